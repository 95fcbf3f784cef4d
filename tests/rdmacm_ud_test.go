package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// udaddy is rdmacm-utils' UD test: its port is fixed (7174, RDMA_PS_UDP),
// so its runs here are one at a time. The server prints "udaddy:
// starting server" before its rdma_listen; a client whose SIDR_REQ came
// first gets UNREACHABLE with the SIDR_REP's status 1 (the service ID is
// not supported) and is started again.
const (
	udaddyReady   = "udaddy: starting server"
	udaddyRefused = "rdma_cm_event_unreachable, error: 1"
)

// udaddyRun is one udaddy server on B and client on A, each killed after
// timeout; ok reports that both exited 0.
type udaddyRun struct {
	cout, sout string
	cerr, serr error
	killed     bool
}

func (r udaddyRun) ok() bool { return r.cerr == nil && r.serr == nil && !r.killed }

func runUDaddy(t *testing.T, tb *netns.Testbed, a, b *e2eHost, timeout time.Duration, extra ...string) udaddyRun {
	t.Helper()
	srv := rdmacmProc(t, tb, b.name, b.socket, append([]string{"stdbuf", "-o0", "udaddy"}, extra...)...)
	waitFor(t, srv, udaddyReady, 30*time.Second)
	var cli *childProc
	var r udaddyRun
	deadline := time.Now().Add(timeout)
	for try := 0; ; try++ {
		cli = rdmacmProc(t, tb, a.name, a.socket, append([]string{"stdbuf", "-o0", "udaddy", "-s", b.ip.String()}, extra...)...)
		select {
		case <-cli.exited:
		case <-time.After(time.Until(deadline)):
		}
		if cli.err == nil || try == 10 || !strings.Contains(strings.ToLower(cli.out.String()), udaddyRefused) {
			break
		}
		t.Logf("udaddy client: the server was not yet listening; again")
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []*childProc{cli, srv} {
		select {
		case <-p.exited:
		case <-time.After(time.Until(deadline)):
			p.cmd.Process.Kill()
			<-p.exited
			r.killed = true
		}
	}
	r.cout, r.sout, r.cerr, r.serr = cli.out.String(), srv.out.String(), cli.err, srv.err
	return r
}

// sidrDone: the SIDR exchange succeeded, whatever came after it: the
// client took ESTABLISHED (its address handle made) and began sending,
// the server accepted.
func (r udaddyRun) sidrDone() bool {
	return strings.Contains(r.cout, "initiating data transfers") && strings.Contains(r.sout, "receiving data transfers")
}

func (r udaddyRun) String() string {
	return fmt.Sprintf("client (%v):\n%s\nserver (%v):\n%s", r.cerr, r.cout, r.serr, r.sout)
}

func sidrRetries(t *testing.T, a, b *e2eHost) uint64 {
	return a.counter(t, "cm_tx_retries_sidr_req") + b.counter(t, "cm_tx_retries_sidr_rep")
}

// TestRdmacmUDaddy: Debian's unmodified udaddy (rdmacm-utils) over both
// drop-in libraries between the testbed's daemons: rdma_cm's UDP port
// space, resolved with SIDR on the NICs' QP1. The client's rdma_connect
// sends a SIDR_REQ; the server's CONNECT_REQUEST id makes a UD QP
// (rdma_create_qp: INIT with RDMA_UDP_QKEY, RTR, RTS) and rdma_accept
// answers with the SIDR_REP; the client's ESTABLISHED carries the
// server's QPN, Q_Key and address handle attributes (ibv_create_ah).
// The client sends its datagrams (SEND with immediate: its QPN); the
// server makes its reply address handle with ibv_create_ah_from_wc from
// the first completion and the GRH area, and answers each.
//
// udaddy polls for exactly -C completions on each side and UD never
// resends: at 1% loss a lost datagram leaves a side waiting for ever
// (killed here after its timeout). The lossy subtest therefore requires
// the SIDR exchange to succeed on every try, and the whole run (both
// sides exit 0) on one try of five; it logs each try whose datagram was
// lost. SIDR alone (-C 0: no datagrams) must pass every time, also at
// 10% loss, where lost SIDR_REQs and SIDR_REPs are resent (the counts
// are logged).
func TestRdmacmUDaddy(t *testing.T) {
	needRdmacm(t)
	netns.RequireNft(t)
	tb, a, b := ibvTestbed(t, "udaddy", "stdbuf")
	rdmacmLib(t)
	t.Cleanup(func() { tb.Loss(0) })

	t.Run("no listener", func(t *testing.T) {
		cli := rdmacmProc(t, tb, a.name, a.socket, "stdbuf", "-o0", "udaddy", "-s", b.ip.String())
		bounded(t, cli, "udaddy client", time.Minute)
		if out := cli.out.String(); cli.err == nil || !strings.Contains(strings.ToLower(out), udaddyRefused) {
			t.Errorf("udaddy to a port nobody listens on: %v, want UNREACHABLE with status 1:\n%s", cli.err, out)
		}
	})
	check := func(t *testing.T, r udaddyRun, count int) {
		t.Helper()
		if !r.ok() || !strings.Contains(r.cout, "data transfers complete") || !strings.Contains(r.sout, "data transfers complete") ||
			!strings.Contains(r.cout, "return status 0") || !strings.Contains(r.sout, "return status 0") {
			t.Errorf("udaddy -C %d: %s", count, r)
		}
	}
	t.Run("loss 0%", func(t *testing.T) {
		for _, count := range []int{10, 1000} {
			ra, rb := a.counter(t, "rdma_recvs"), b.counter(t, "rdma_recvs")
			r := runUDaddy(t, tb, a, b, 2*time.Minute, "-C", fmt.Sprint(count))
			check(t, r, count)
			// udaddy looks at no completion's status: the daemons'
			// counts show the datagrams arrived, each way (besides
			// them, the SIDR_REQ on B's QP1, the SIDR_REP on A's).
			da, db := a.counter(t, "rdma_recvs")-ra, b.counter(t, "rdma_recvs")-rb
			if da != uint64(count)+1 || db != uint64(count)+1 {
				t.Errorf("udaddy -C %d: received A %d B %d, want %d each (the datagrams and one MAD)", count, da, db, count+1)
			}
			t.Logf("udaddy -C %d, received A %d B %d:\n%s", count, da, db, r)
		}
		r := runUDaddy(t, tb, a, b, time.Minute, "-C", "0")
		if !r.ok() || !strings.Contains(r.cout, "return status 0") {
			t.Errorf("udaddy -C 0: %s", r)
		}
		t.Logf("udaddy client:\n%s", r.cout)
	})
	t.Run("loss 1%", func(t *testing.T) {
		if out, err := tb.Loss(1); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("switch: %s", out)
		}
		retries := sidrRetries(t, a, b)
		passed := 0
		for try := 1; try <= 5 && passed == 0; try++ {
			r := runUDaddy(t, tb, a, b, time.Minute)
			switch {
			case !r.sidrDone():
				t.Errorf("try %d: the SIDR exchange failed: %s", try, r)
			case r.ok():
				check(t, r, 10)
				passed++
			default:
				t.Logf("try %d: SIDR done, a UD datagram lost (udaddy waits for all 10; killed=%v):\nclient: %s\nserver: %s",
					try, r.killed, lastLines(r.cout, 2), lastLines(r.sout, 2))
			}
		}
		if passed == 0 {
			t.Errorf("udaddy at 1%% loss: no try of five passed")
		}
		for i := range 10 {
			if r := runUDaddy(t, tb, a, b, 2*time.Minute, "-C", "0"); !r.ok() {
				t.Errorf("udaddy -C 0, run %d: %s", i, r)
			}
		}
		t.Logf("1%% loss: SIDR_REQs and SIDR_REPs resent: %d", sidrRetries(t, a, b)-retries)
	})
	t.Run("loss 10%", func(t *testing.T) {
		if _, err := tb.Loss(10); err != nil {
			t.Fatal(err)
		}
		retries := sidrRetries(t, a, b)
		for i := range 10 {
			if r := runUDaddy(t, tb, a, b, 3*time.Minute, "-C", "0"); !r.ok() {
				t.Errorf("udaddy -C 0, run %d: %s", i, r)
			}
		}
		t.Logf("10%% loss: SIDR_REQs and SIDR_REPs resent: %d", sidrRetries(t, a, b)-retries)
	})
}
