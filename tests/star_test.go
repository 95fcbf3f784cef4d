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
// stateless server) run every operation a stateless QP has, each size
// byte-exact with its completions checked: RDMA WRITE and READ, SEND and
// SEND with immediate into the server's RECVs, and the server's SENDs
// into the client's RECVs (SEND_BACK), at 0%, 1% and 5% loss with delay,
// reordering and duplication (both daemons' --netem stage, set with
// softnic netem); softnic-bench write_bw, read_bw, send_bw, send_lat and
// rpc_lat (8 connections of 2,800/1,400-byte calls, payloads checked) run
// with --star, and rpc_lat without it; and B's counters show RDPs and GDs served, WQEPs sent
// and CQEPs taken, with no context on chip (qpc_resident_bytes_peak 0)
// and no security drops on either side. Without --star-server, the
// bench's server fails with one line naming it.
func TestE2EStar(t *testing.T) {
	tb := requireE2E(t)
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	startE2EDaemon(t, tb, b, tb.B.IPv4, "--star-server")
	ops := []string{"RDMA_WRITE", "RDMA_READ", "SEND", "SEND_WITH_IMM", "SEND_BACK"}
	steps := len(ops) * len(strings.Split(starSizes, ","))
	plan := []string{"--star", "--ops", strings.Join(ops, ","), "--sizes", starSizes, "--scheme", "fasr"}

	for i, loss := range []int{0, 1, 5} {
		t.Run(fmt.Sprintf("loss %d%%", loss), func(t *testing.T) {
			if loss > 0 {
				for j, h := range []*e2eHost{a, b} {
					spec := fmt.Sprintf("loss %d%% delay 20us reorder 2%% duplicate 0.1%% seed %d", loss, 11+10*i+j)
					if out, code := runSoftnic(t, nil, "netem", "--socket", h.socket, spec); code != 0 {
						t.Fatalf("softnic netem %s on %s: exit %d: %s", spec, h.name, code, out)
					}
					t.Cleanup(func() { runSoftnic(t, nil, "netem", "--socket", h.socket, "clear") })
				}
			}
			lost := a.counter(t, "impair_lost") + b.counter(t, "impair_lost")
			runPair(t, tb, a, b, steps, append(plan, "--seed", fmt.Sprint(1+i))...)
			if got := a.counter(t, "impair_lost") + b.counter(t, "impair_lost"); loss > 0 && got == lost {
				t.Errorf("impair_lost did not move at %d%% loss: was the loss applied?", loss)
			}
			for _, h := range []*e2eHost{a, b} {
				if out, code := runSoftnic(t, nil, "netem", "--socket", h.socket, "clear"); code != 0 {
					t.Fatalf("softnic netem clear: exit %d: %s", code, out)
				}
			}
		})
	}
	t.Run("softnic-bench", func(t *testing.T) {
		for i, args := range [][]string{
			{"write_bw", "-n", "2000", "-q", "8", "-s", "4096"},
			{"read_bw", "-n", "2000", "-q", "8", "-s", "4096"},
			{"send_bw", "-n", "2000", "-q", "8", "-s", "4096"},
			{"send_lat", "-n", "500", "-s", "2800"},
			{"rpc_lat", "-n", "800", "-q", "8"},
		} {
			out := runBenchPair(t, tb, a, b, 18700+i, args, []string{"--star", "server"}, []string{"--star", "client"})
			if !strings.Contains(out, "StaR role       : client, the peer server") {
				t.Errorf("%s: no StaR role in the client's banner:\n%s", args[0], out)
			}
			if args[0] == "rpc_lat" && !strings.Contains(out, " 2800    1400        800 ") {
				t.Errorf("rpc_lat: not 800 calls of 2800/1400 bytes:\n%s", out)
			}
		}
	})
	wqep, cqep := b.counter(t, "star_wqep_sent"), b.counter(t, "star_cqep_rcvd")
	t.Logf("server daemon: star_wqep_sent %d, star_wqep_resent %d, star_cqep_rcvd %d, star_ea_sent %d; client daemon: star_cqep_resent %d, star_wqep_dropped %d",
		wqep, b.counter(t, "star_wqep_resent"), cqep, b.counter(t, "star_ea_sent"), a.counter(t, "star_cqep_resent"), a.counter(t, "star_wqep_dropped"))
	if wqep == 0 || cqep == 0 {
		t.Errorf("want the server's RECVs and SENDs through WQEPs and their completions through CQEPs")
	}
	rdp, gd := b.counter(t, "star_rdp_rcvd"), b.counter(t, "star_gd_rcvd")
	peak, sec := b.counter(t, "qpc_resident_bytes_peak"), a.counter(t, "star_security_drops")+b.counter(t, "star_security_drops")
	t.Logf("server daemon: star_rdp_rcvd %d, star_gd_rcvd %d, qpc_resident_bytes_peak %d; both daemons: star_security_drops %d", rdp, gd, peak, sec)
	if rdp == 0 || gd == 0 || peak != 0 || sec != 0 {
		t.Errorf("want RDPs and GDs served, no context on chip and no security drops")
	}

	// The bench's StaR server on a daemon without --star-server.
	srv := exec.Command("ip", "netns", "exec", tb.NS(a.name), benchBinary(t), "write_bw", "--star", "server", "--socket", a.socket, "-p", "18710")
	out, err := srv.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run its daemon with softnic run --star-server") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Errorf("StaR server on a daemon without --star-server: %v, %q; want one line naming --star-server", err, out)
	}

	// rpc_lat on ordinary QPs between the same daemons (after the
	// counters above: these QPs keep context on B's chip): each side
	// checks every request and response it receives.
	if out := runBenchPair(t, tb, a, b, 18709, []string{"rpc_lat", "-n", "800", "-q", "8"}, nil, nil); !strings.Contains(out, " 2800    1400        800 ") {
		t.Errorf("rpc_lat without --star:\n%s", out)
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
