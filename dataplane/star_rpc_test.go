package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestStarRPCClosedLoop: calls one after another through a stateless
// server whose responses are mostly unsignaled (StaR Fig. 5b's server)
// each take a few round trips of simulated time: none waits for a late
// EA or a resend; the signaled responses complete at the
// server in order, and the unsignaled ones retire with them.
func TestStarRPCClosedLoop(t *testing.T) {
	p := newStarPair(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU2048, Timeout: 12})
	p.settle()
	const calls, req, resp, signal = 40, 2800, 1400, 4
	start := p.sim.Now()
	var sends uint64
	wcs := make([]qp.WC, 1)
	// wait returns the next completion of cq the moment the engines are
	// idle with it there (RunUntilReact), as an application polling it.
	wait := func(e *Engine, cq *CQ) qp.WC {
		t.Helper()
		if !p.sim.RunUntilReact(func() bool {
			n, err := e.PollCQ(cq, wcs)
			return err == nil && n == 1
		}, time.Second) {
			t.Fatal("no completion")
		}
		return wcs[0]
	}
	for i := 0; i < calls; i++ {
		if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(uint64(i), sge(p.mrB, 0, req))}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sim.A.PostRecv(p.qa, []qp.RecvWR{recvWR(uint64(i), sge(p.mrA, 8192, resp))}); err != nil {
			t.Fatal(err)
		}
		p.postSend(sendWR(uint64(i), qp.WRSend, sge(p.mrA, 0, req)))
		for got := false; !got; {
			wc := wait(p.sim.B, p.cqB)
			if wc.Opcode == qp.WCSend {
				wantWC(t, wc, 100+sends*signal+signal-1, qp.WCSuccess, qp.WCSend)
				sends++
				continue
			}
			wantWC(t, wc, uint64(i), qp.WCSuccess, qp.WCRecv)
			got = true
		}
		w := sendWR(uint64(100+i), qp.WRSend, sge(p.mrB, 4096, resp))
		if i%signal != signal-1 {
			w.Flags &^= qp.SendSignaled
		}
		if _, err := p.sim.B.PostSend(p.qb, []qp.SendWR{w}); err != nil {
			t.Fatal(err)
		}
		wait(p.sim.A, p.cqA) // the request's send completion
		wantWC(t, wait(p.sim.A, p.cqA), uint64(i), qp.WCSuccess, qp.WCRecv)
	}
	// A call is three round trips of a 12 µs path at most (docs/star.md);
	// 100 µs each leaves room for serialisation, never for a timer.
	if d := p.sim.Now() - start; d > calls*100*time.Microsecond {
		t.Errorf("%d calls took %v of simulated time, want under %v", calls, d, calls*100*time.Microsecond)
	}
	p.settle()
	if s, _ := p.sim.B.QueueDepths(p.qb); s != 0 {
		t.Errorf("%d server SENDs not retired", s)
	}
}
