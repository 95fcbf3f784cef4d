//go:build linux

package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/softnic/softnic/tests/netns"
)

var bench built

// benchBinary builds cmd/softnic-bench once per test process.
func benchBinary(t *testing.T) string {
	return bench.get(t, "softnic-bench", "github.com/softnic/softnic/cmd/softnic-bench")
}

// starSizes: empty, one byte, a page less one, 64 packets and 1 MiB.
const starSizes = "0,1,4095,65536,1048576"

// TestE2EStar: StaR's stateless mode between two daemons, the server
// daemon (B) with --star-server. e2eclient pairs (A a StaR client, B a
// stateless server) RDMA WRITE and RDMA READ every size byte-exact, at 0%
// and at 1% loss (both daemons' --netem stage, set with softnic netem);
// softnic-bench write_bw and read_bw run with --star; and B's counters
// show RDPs and GDs served with no context on chip
// (qpc_resident_bytes_peak 0), A's security table stopping nothing.
// Without --star-server, the bench's server fails with one line naming
// it.
func TestE2EStar(t *testing.T) {
	tb := requireE2E(t)
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	startE2EDaemon(t, tb, b, tb.B.IPv4, "--star-server")
	steps := 2 * len(strings.Split(starSizes, ","))
	plan := []string{"--star", "--ops", "RDMA_WRITE,RDMA_READ", "--sizes", starSizes, "--scheme", "fasr"}

	t.Run("loss 0%", func(t *testing.T) {
		runPair(t, tb, a, b, steps, append(plan, "--seed", "1")...)
	})
	t.Run("loss 1%", func(t *testing.T) {
		for i, h := range []*e2eHost{a, b} {
			spec := fmt.Sprintf("loss 1%% seed %d", 11+i)
			if out, code := runSoftnic(t, nil, "netem", "--socket", h.socket, spec); code != 0 {
				t.Fatalf("softnic netem %s on %s: exit %d: %s", spec, h.name, code, out)
			}
			t.Cleanup(func() { runSoftnic(t, nil, "netem", "--socket", h.socket, "clear") })
		}
		lost := a.counter(t, "impair_lost") + b.counter(t, "impair_lost")
		runPair(t, tb, a, b, 2*steps, append(plan, "--rounds", "2", "--seed", "2")...)
		if got := a.counter(t, "impair_lost") + b.counter(t, "impair_lost"); got == lost {
			t.Error("impair_lost did not move at 1% loss: was the loss applied?")
		}
		for _, h := range []*e2eHost{a, b} {
			if out, code := runSoftnic(t, nil, "netem", "--socket", h.socket, "clear"); code != 0 {
				t.Fatalf("softnic netem clear: exit %d: %s", code, out)
			}
		}
	})
	t.Run("softnic-bench", func(t *testing.T) {
		for i, args := range [][]string{
			{"write_bw", "-n", "2000", "-q", "8", "-s", "4096"},
			{"read_bw", "-n", "2000", "-q", "8", "-s", "4096"},
		} {
			out := runBenchPair(t, tb, a, b, 18700+i, args, []string{"--star", "server"}, []string{"--star", "client"})
			if !strings.Contains(out, "StaR role       : client, the peer server") {
				t.Errorf("%s: no StaR role in the client's banner:\n%s", args[0], out)
			}
		}
	})
	rdp, gd := b.counter(t, "star_rdp_rcvd"), b.counter(t, "star_gd_rcvd")
	peak, sec := b.counter(t, "qpc_resident_bytes_peak"), a.counter(t, "star_security_drops")
	t.Logf("server daemon: star_rdp_rcvd %d, star_gd_rcvd %d, qpc_resident_bytes_peak %d; client daemon: star_security_drops %d", rdp, gd, peak, sec)
	if rdp == 0 || gd == 0 || peak != 0 || sec != 0 {
		t.Errorf("want RDPs and GDs served, no context on chip and no security drops")
	}

	// The bench's StaR server on a daemon without --star-server.
	srv := exec.Command("ip", "netns", "exec", tb.NS(a.name), benchBinary(t), "write_bw", "--star", "server", "--socket", a.socket, "-p", "18710")
	out, err := srv.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run its daemon with softnic run --star-server") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Errorf("StaR server on a daemon without --star-server: %v, %q; want one line naming --star-server", err, out)
	}

	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
}

// runBenchPair runs softnic-bench's server on b and its client on a, each
// with its own extra flags, and returns the client's output; both must
// exit 0.
func runBenchPair(t *testing.T, tb *netns.Testbed, a, b *e2eHost, port int, args, srvExtra, cliExtra []string) string {
	t.Helper()
	p := fmt.Sprint(port)
	srv := exec.Command("ip", append([]string{"netns", "exec", tb.NS(b.name), benchBinary(t)}, append(append(append([]string{}, args...), srvExtra...), "--socket", b.socket, "-p", p)...)...)
	var srvOut syncBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	cli := exec.Command("ip", append([]string{"netns", "exec", tb.NS(a.name), benchBinary(t)}, append(append(append([]string{}, args...), cliExtra...), "--socket", a.socket, "-p", p, b.ip.String())...)...)
	out, err := cli.CombinedOutput()
	if err != nil {
		srv.Process.Kill()
	}
	serr := srv.Wait()
	if err != nil || serr != nil {
		t.Fatalf("%s: client %v, server %v\nclient:\n%s\nserver:\n%s", args[0], err, serr, out, srvOut.String())
	}
	return string(out)
}
