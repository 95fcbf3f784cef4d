//go:build linux

package tests

import (
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// switchProc is a `softnic switch` started in the testbed's switch
// namespace.
type switchProc struct {
	*daemonProc
	socket string
}

// startSwitch runs `softnic switch` on the switch namespace's two ports
// and waits until it answers `softnic stats`.
func startSwitch(t *testing.T, tb *netns.Testbed, args ...string) *switchProc {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "switch.sock")
	argv := append([]string{"netns", "exec", tb.NS(netns.HostSwitch), softnicBinary(t), "switch",
		"--port", tb.SwitchA.Iface, "--port", tb.SwitchB.Iface, "--socket", socket}, args...)
	s := &switchProc{daemonProc: &daemonProc{t: t, childProc: startChild(t, exec.Command("ip", argv...), "switch output")}, socket: socket}
	s.waitReady(socket)
	return s
}

// TestSwitch is softnic switch between the testbed's hosts: two softnic
// daemons move every opcode at every size through it (RoCEv2 over the
// switch's AF_XDP ports, MACs and TTL rewritten), its counters show the
// frames, ping and TCP between the hosts still work (the kernel forwards
// what the XDP program passes, untouched), /metrics serves the same
// counters, and SIGTERM leaves no XDP program on its ports.
func TestSwitch(t *testing.T) {
	tb := requireE2E(t)
	// Paced below what the hosts send, so that queues build and PFC
	// pauses the daemons (which honour it). The headroom covers what a
	// daemon has already handed its AF_XDP ring when a pause reaches it.
	sw := startSwitch(t, tb, "--metrics", "127.0.0.1:9481", "--rate", "2gbit",
		"--buffer", "2000000", "--pfc", "xoff=200000,xon=100000,headroom=1500000")
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	startE2EDaemon(t, tb, b, tb.B.IPv4)
	for _, p := range []string{tb.SwitchA.Iface, tb.SwitchB.Iface} {
		if x := xdpOn(t, tb, netns.HostSwitch, p); x == "" {
			t.Fatalf("no XDP program on the switch's %s", p)
		}
	}

	// softnic capture reads the switch's ingress frames through its
	// control socket, as a daemon's.
	pcap := filepath.Join(t.TempDir(), "switch.pcap")
	capture := startChild(t, exec.Command(softnicBinary(t), "capture", "-i", sw.socket, "-c", "100", "-w", pcap), "capture output")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(capture.out.String(), "listening on"); {
		if time.Now().After(deadline) {
			t.Fatalf("softnic capture on the switch did not start: %s", capture.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	runPair(t, tb, a, b, e2eSteps, "--sizes", e2eSizes, "--seed", "1")

	select {
	case <-capture.exited:
		if fi, err := os.Stat(pcap); capture.err != nil || err != nil || fi.Size() < 100*60 {
			t.Errorf("softnic capture on the switch: %v, %v, %s", capture.err, err, capture.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("softnic capture on the switch did not get 100 frames: %s", capture.out.String())
	}

	out := mustStats(t, sw.socket)
	fwd := statValue(t, out, "forwarded")
	// The 1 MiB WRITE, SEND and READ alone are over 3000 packets.
	if fwd < 3000 || statValue(t, out, "port0_forwarded") == 0 || statValue(t, out, "port1_forwarded") == 0 {
		t.Errorf("switch forwarded %d frames (%d toward A, %d toward B), want thousands both ways:\n%s",
			fwd, statValue(t, out, "port0_forwarded"), statValue(t, out, "port1_forwarded"), out)
	}
	if rx, tx := statValue(t, out, "rx_frames"), statValue(t, out, "tx_frames"); rx < fwd || tx < fwd {
		t.Errorf("rx_frames %d, tx_frames %d, below forwarded %d", rx, tx, fwd)
	}
	for _, c := range []string{"no_route", "ttl_expired", "malformed", "dropped"} {
		if v := statValue(t, out, c); v != 0 {
			t.Errorf("%s = %d, want 0", c, v)
		}
	}
	t.Logf("switch: forwarded %d, no_neighbour %d, ecn_marked %d, pauses_sent %d",
		fwd, statValue(t, out, "no_neighbour"), statValue(t, out, "ecn_marked"), statValue(t, out, "pauses_sent"))

	metrics, err := httpGetIn(tb, netns.HostSwitch, "http://127.0.0.1:9481/metrics")
	if err != nil || !strings.Contains(metrics, "softnic_forwarded ") {
		t.Errorf("/metrics: %v, softnic_forwarded missing", err)
	}

	// The kernel forwards what the switch leaves to it: ICMP and TCP.
	if n, err := tb.Ping(netns.HostA, tb.B.IPv4, 5, 2*time.Second); err != nil || n != 5 {
		t.Errorf("ping A -> B through the switch: %d of 5 replies, %v", n, err)
	}
	if n, err := tb.Ping(netns.HostB, tb.A.IPv6, 5, 2*time.Second); err != nil || n != 5 {
		t.Errorf("ping6 B -> A through the switch: %d of 5 replies, %v", n, err)
	}
	tcpThroughSwitch(t, tb)

	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
	if err := sw.signal(syscall.SIGTERM); err != nil {
		t.Errorf("switch: SIGTERM: exited with %v, want 0\n%s", err, sw.out.String())
	}
	if strings.Contains(sw.out.String(), "panic") {
		t.Errorf("switch logged a panic:\n%s", sw.out.String())
	}
	for _, p := range []string{tb.SwitchA.Iface, tb.SwitchB.Iface} {
		if x := xdpOn(t, tb, netns.HostSwitch, p); x != "" {
			t.Errorf("XDP program left on the switch's %s after SIGTERM: %s", p, x)
		}
	}
}

// tcpThroughSwitch sends 64 KiB over TCP from A to B and reads it back.
func tcpThroughSwitch(t *testing.T, tb *netns.Testbed) {
	t.Helper()
	var ln net.Listener
	if err := tb.Do(netns.HostB, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(tb.B.IPv4, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 64 << 10
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	}()
	err := tb.Do(netns.HostA, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(make([]byte, size))
		return err
	})
	if err != nil {
		t.Fatalf("TCP A -> B through the switch: %v", err)
	}
	select {
	case n := <-got:
		if n != size {
			t.Errorf("TCP A -> B: %d bytes arrived, want %d", n, size)
		}
	case <-time.After(15 * time.Second):
		t.Error("TCP A -> B: no end of stream")
	}
}

// TestSwitchBadRules: a malformed rule file is one line and exit status 2.
func TestSwitchBadRules(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(rules, []byte(`{"rules": [{"action": "drop"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runSoftnic(t, nil, "switch", "--port", "x0", "--port", "x1", "--rules", rules)
	if code != 2 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, rules) {
		t.Errorf("exit %d, output %q: want 2 and one line naming the file", code, out)
	}
}
