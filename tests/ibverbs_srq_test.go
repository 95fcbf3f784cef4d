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
// lossless and at 1% loss on the switch (RC retransmits: it completes),
// with and without completion events (-e).
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
			cli, srv := ibvPair(t, tb, a, b, port, argv...)
			for side, out := range map[string]string{"client": cli, "server": srv} {
				if !strings.Contains(out, "Mbit/sec") || !strings.Contains(out, "iters in") {
					t.Errorf("loss %v%% %v %s: no bandwidth report:\n%s", loss, extra, side, out)
				}
				if strings.Contains(out, "invalid data") || strings.Contains(out, "Failed") || strings.Contains(out, "Couldn't") {
					t.Errorf("loss %v%% %v %s: reported a failure:\n%s", loss, extra, side, out)
				}
			}
			t.Logf("ibv_srq_pingpong loss %v%% %v, client:\n%s", loss, extra, lastLines(cli, 2))
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
