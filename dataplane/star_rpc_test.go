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

// bringUp moves q on e from RESET to RTS towards peer's QP pq, as one
// side of Connect does, leaving the other side alone.
func bringUp(tb testing.TB, e *Engine, q *QP, peer *Engine, pq *QP, timeout uint8) {
	tb.Helper()
	for _, st := range []struct {
		a    QPAttr
		mask qp.AttrMask
	}{
		{QPAttr{State: qp.Init, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{QPAttr{State: qp.RTR, AV: AddressVector{DGID: peer.Addr(), DMAC: peer.MAC(), HopLimit: 64}, PathMTU: qp.MTU1024, DestQPN: pq.QPN()},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{QPAttr{State: qp.RTS, Timeout: timeout, RetryCnt: 7, RNRRetry: 7}, qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	} {
		if err := e.ModifyQP(q, &st.a, st.mask); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestStarConnectionStart: the two ends of a StaR connection reach RTR
// at different times, as two hosts do. When the server is first, its
// driver's first WQEP (the probe) reaches a client QP that is not ready
// and is dropped; the driver sends nothing more until it hears from the
// client, whose QP, at RTR, says so with an EA for nothing yet, and the
// probe goes again at once. When the client is first, the probe finds it
// ready and is acknowledged at once. Either way the first call takes
// round trips, not the driver's 4.3 s timeout.
func TestStarConnectionStart(t *testing.T) {
	for _, serverFirst := range []bool{true, false} {
		name := map[bool]string{true: "server-first", false: "client-first"}[serverFirst]
		t.Run(name, func(t *testing.T) {
			p := newStarPairUnconnected(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)})
			const timeout = 20 // 4.3 s
			server := func() {
				bringUp(t, p.sim.B, p.qb, p.sim.A, p.qa, timeout)
				p.postRecv(recvWR(1, sge(p.mrB, 0, 512)))
			}
			client := func() { bringUp(t, p.sim.A, p.qa, p.sim.B, p.qb, timeout) }
			first, second := client, server
			if serverFirst {
				first, second = server, client
			}
			first()
			// Less than the 1 ms a driver waits before its QP has a
			// timeout (RTS sets it): the probe is sent once.
			p.sim.RunTo(p.sim.Now() + 500*time.Microsecond)
			second()
			start := p.sim.Now()
			p.postSend(sendWR(7, qp.WRSend, sge(p.mrA, 0, 512)))
			wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, 10*time.Second)[0], 7, qp.WCSuccess, qp.WCSend)
			wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, 10*time.Second)[0], 1, qp.WCSuccess, qp.WCRecv)
			if d := p.sim.Now() - start; d > time.Millisecond {
				t.Errorf("the first call took %v of simulated time", d)
			}
			a, b := p.sim.A.Counters(), p.sim.B.Counters()
			if serverFirst && (a.RcvdBadAddr != 1 || b.StarWQEPResent != 1) || !serverFirst && (a.RcvdBadAddr != 0 || b.StarWQEPResent != 0) {
				t.Errorf("client dropped %d frames before RTR, driver resent %d WQEPs", a.RcvdBadAddr, b.StarWQEPResent)
			}
		})
	}
}
