package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestDaemonNetem: a daemon started with --netem reports it; softnic netem,
// run inside another namespace as testbed.sh exec would, changes it on the
// running daemon, and the impair_* counters move on the frames the daemon
// then receives; a bad word is a one-line usage error; clear removes it.
func TestDaemonNetem(t *testing.T) {
	netns.RequireTool(t, "bash") // sends datagrams to /dev/udp
	tb := requireDaemon(t)
	socket := filepath.Join(t.TempDir(), "softnic.sock")
	d := startDaemon(t, tb, netns.HostB, "--iface", tb.B.Iface, "--port", "udp", "--ip", tb.B.IPv4.String(), "--socket", socket,
		"--metrics", "", "--netem", "delay 1ms seed 1")
	d.waitReady(socket)
	inA := []string{"ip", "netns", "exec", tb.NS(netns.HostA)}
	if out, code := runSoftnic(t, inA, "netem", "--socket", socket); code != 0 || out != "delay 1ms seed 1\n" {
		t.Fatalf("softnic netem: exit %d, %q", code, out)
	}
	if out, code := runSoftnic(t, inA, "netem", "--socket", socket, "loss 100% seed 2"); code != 0 || out != "loss 100% seed 2\n" {
		t.Fatalf("softnic netem SPEC: exit %d, %q", code, out)
	}
	send := exec.Command("ip", "netns", "exec", tb.NS(netns.HostA), "bash", "-c",
		"for i in $(seq 20); do echo softnic-netem-test > /dev/udp/"+tb.B.IPv4.String()+"/4791; done")
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("sending from A: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := stats(t, socket)
		if err != nil {
			t.Fatalf("softnic stats: %v %s", err, out)
		}
		lost, frames := statValue(t, out, "impair_lost"), statValue(t, out, "impair_frames")
		if lost >= 20 && lost == frames && statValue(t, out, "rcvd_malformed") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 datagrams at loss 100%%: impair_frames %d, impair_lost %d\n%s", frames, lost, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, code := runSoftnic(t, nil, "netem", "--socket", socket, "lose 1%")
	if code != 2 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `unknown word "lose"`) {
		t.Errorf("softnic netem lose 1%%: exit %d, %q; want 2 and one line naming the word", code, out)
	}
	if out, code := runSoftnic(t, nil, "netem", "--socket", socket, "clear"); code != 0 || out != "" {
		t.Fatalf("softnic netem clear: exit %d, %q", code, out)
	}
	if out, code := runSoftnic(t, nil, "netem", "--socket", socket); code != 0 || out != "" {
		t.Fatalf("after clear: exit %d, %q", code, out)
	}
}
