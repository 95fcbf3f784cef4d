//go:build linux

package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestIbverbsSRQPingpong: Debian's unmodified ibv_srq_pingpong (16 RC
// QPs on one shared receive queue at each end) runs between the hosts
// over the drop-in library, checking the data it receives (-c),
// lossless and at 1% loss on the switch, with and without completion
// events (-e).
//
// Lossless, both sides exit 0 with their reports. At 1% loss one side
// may not: ibv_srq_pingpong has no closing handshake. Each side stops
// when its totals over all QPs reach -n (500 receives, 500 completed
// SENDs) and destroys its QPs, and it posts a SEND while its count of
// *completed* SENDs is below the total, so a side whose SENDs wait for
// a retransmission on one QP posts extra ones on the others; the peer,
// done, has destroyed the QPs those extra SENDs (or a last SEND whose
// ACK the switch dropped) go to, their retries meet no QP, and they
// complete with RETRY_EXC_ERR. The test accepts exactly that: one side
// exits 0 with its full report and checked data, the other fails only
// with "transport retry counter exceeded" on a SEND (wr_id 2), and the
// daemon of the side that finished counted packets for unknown QPs
// (rcvd_unknown_qpn) in that run.
func TestIbverbsSRQPingpong(t *testing.T) {
	netns.RequireNft(t)
	tb, a, b := ibvTestbed(t, "ibv_srq_pingpong")
	port := 18800
	for _, loss := range []float64{0, 1} {
		if out, err := tb.Loss(loss); err != nil {
			t.Fatal(err)
		} else if loss > 0 {
			t.Logf("switch: %s", out)
		}
		retx := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts")
		for _, extra := range [][]string{nil, {"-e"}} {
			port++
			argv := append([]string{"ibv_srq_pingpong", "-g", "0", "-p", fmt.Sprint(port), "-n", "500", "-c"}, extra...)
			unknown := [2]uint64{a.counter(t, "rcvd_unknown_qpn"), b.counter(t, "rcvd_unknown_qpn")}
			srv := ibvProc(t, tb, b.name, b.socket, argv...)
			waitListen(t, tb, b.name, port, srv)
			c := ibvProc(t, tb, a.name, a.socket, append(argv, b.ip.String())...)
			for _, p := range []*childProc{c, srv} {
				select {
				case <-p.exited:
				case <-time.After(3 * time.Minute):
					p.cmd.Process.Kill()
					<-p.exited
					t.Errorf("ibv_srq_pingpong still running after 3 minutes; killed:\n%s", p.out.String())
				}
			}
			procs := [2]*childProc{c, srv}
			names := [2]string{"client", "server"}
			for i, p := range procs {
				out, other := p.out.String(), procs[1-i]
				switch {
				case p.err == nil:
					if !strings.Contains(out, "Mbit/sec") || !strings.Contains(out, "500 iters in") {
						t.Errorf("loss %v%% %v %s: no bandwidth report:\n%s", loss, extra, names[i], out)
					}
					if strings.Contains(out, "invalid data") || strings.Contains(out, "Failed") || strings.Contains(out, "Couldn't") {
						t.Errorf("loss %v%% %v %s: reported a failure:\n%s", loss, extra, names[i], out)
					}
				case loss > 0 && endOfRunRace(out) && other.err == nil:
					peer := [2]*e2eHost{b, a}[i] // the side that finished
					n := peer.counter(t, "rcvd_unknown_qpn") - unknown[1-i]
					if n == 0 {
						t.Errorf("loss %v%% %v: the %s failed a SEND, but nothing reached a destroyed QP of its peer:\n%s", loss, extra, names[i], out)
					}
					t.Logf("loss %v%% %v: the %s's last SENDs went to its finished peer's destroyed QPs (%d packets for unknown QPs at %s): %s",
						loss, extra, names[i], n, peer.name, firstLines(out, 1))
				default:
					t.Errorf("loss %v%% %v %s: %v, want exit 0:\n%s", loss, extra, names[i], p.err, out)
				}
			}
			t.Logf("ibv_srq_pingpong loss %v%% %v, client:\n%s", loss, extra, lastLines(c.out.String(), 2))
			if t.Failed() {
				for _, h := range []*e2eHost{a, b} {
					st := mustStats(t, h.socket)
					var line []string
					for _, name := range []string{"sent_pkts", "rcvd_pkts", "retransmitted_pkts", "local_ack_timeout_err", "retry_exceeded_err",
						"send_rnr_err", "rcvd_rnr_err", "duplicate_request", "out_of_seq_request", "rcvd_seq_err", "rcvd_bad_state",
						"resp_queue_full", "rcvd_stale_ack", "rcvd_unknown_qpn", "acks_sent"} {
						line = append(line, fmt.Sprintf("%s=%d", name, statValue(t, st, name)))
					}
					t.Logf("daemon %s: %s", h.name, strings.Join(line, " "))
				}
				t.FailNow()
			}
		}
		if loss > 0 {
			if n := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts") - retx; n == 0 {
				t.Errorf("no retransmissions at %v%% loss", loss)
			} else {
				t.Logf("%v%% loss: %d packets retransmitted", loss, n)
			}
		}
	}
	tb.Loss(0)
}

// endOfRunRace reports whether ibv_srq_pingpong's output shows only
// SENDs failed for want of an acknowledgement (wr_id 2 is its SEND).
func endOfRunRace(out string) bool {
	failed := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Failed status") {
			if !strings.HasPrefix(l, "Failed status transport retry counter exceeded (12) for wr_id 2") {
				return false
			}
			failed = true
		} else if strings.Contains(l, "invalid data") || strings.Contains(l, "Couldn't") {
			return false
		}
	}
	return failed
}

// TestIbverbsAsyncEvents: a program built against rdma-core's headers
// (tests/ibvasync) finds IBV_EVENT_PORT_ACTIVE waiting on a new context's
// async_fd (poll says readable), gets EAGAIN from ibv_get_async_event
// once async_fd has O_NONBLOCK and nothing waits, uses ibv_create_srq,
// ibv_modify_srq(IBV_SRQ_LIMIT), ibv_query_srq and ibv_post_srq_recv,
// is refused ibv_post_recv on a QP with an SRQ and ibv_destroy_srq of a
// busy SRQ (EBUSY), and after its peer's two SENDs consumed two WQEs
// gets IBV_EVENT_SRQ_LIMIT_REACHED naming its SRQ (async_fd readable),
// once; ibv_destroy_srq then waits until the event is acknowledged.
func TestIbverbsAsyncEvents(t *testing.T) {
	tb, a, b := ibvTestbed(t)
	lib := ibverbsLib(t)
	prog := filepath.Join(binDir, "ibvasync")
	if out, err := exec.Command("gcc", "-Wall", "-o", prog, "ibvasync/main.c", "-pthread", "-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	dir := t.TempDir()
	srv := ibvProc(t, tb, b.name, b.socket, prog, "server", dir)
	cli := ibvProc(t, tb, a.name, a.socket, prog, "client", dir)
	cout := waitExit(t, cli, "ibvasync client", time.Minute)
	sout := waitExit(t, srv, "ibvasync server", time.Minute)
	for _, want := range []string{"port active event ok", "nonblocking EAGAIN ok", "srq verbs ok", "receives ok",
		"srq limit event ok: SRQ limit reached", "destroy waits for ack ok", "ibvasync server ok"} {
		if !strings.Contains(sout, want) {
			t.Errorf("server: no %q:\n%s", want, sout)
		}
	}
	for _, want := range []string{"port active event ok", "sends ok", "ibvasync client ok"} {
		if !strings.Contains(cout, want) {
			t.Errorf("client: no %q:\n%s", want, cout)
		}
	}
	t.Logf("ibvasync server:\n%s", sout)
}
