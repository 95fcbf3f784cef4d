package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// unackedRun posts 16 WRITEs of 64 packets at once on a go-back-N QP
// through 1% loss both ways (10 Gb/s, 200 µs each way), with the engines' bound on unacknowledged
// PSNs, and returns the largest distance the requester sent a request
// ahead of the oldest PSN not yet acknowledged (as the switch saw the
// ACKs leave: the requester's own view is never ahead of it), and its
// counters.
func unackedRun(t *testing.T, limit int) (ahead int, c Counters) {
	const msgs, size = 16, 64 << 10
	p := newTestPair(t, SimConfig{Seed: 31, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01), LinkRate: 10e9, LinkDelay: 200 * time.Microsecond, MaxUnackedPSNs: limit}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
	var oldest qp.PSN // the oldest PSN not acknowledged
	have := false
	p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, _ bool) {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			return
		}
		psn := qp.PSN(f.Pkt.BTH().PSN())
		switch {
		case d == fabric.AtoB && f.Pkt.Info.Flags&bth.IsRequest != 0:
			if !have {
				oldest, have = psn, true
			}
			ahead = max(ahead, int(psn.Diff(oldest)))
		case d == fabric.BtoA && f.Pkt.Opcode() == bth.RCAcknowledge && have:
			next := psn.Next() // an ACK of psn acknowledges it
			if f.Pkt.AETH().Syndrome().Kind() != bth.AckKind {
				next = psn // a NAK acknowledges what is before psn
			}
			if next.After(oldest) {
				oldest = next
			}
		}
	})
	wrs := make([]qp.SendWR, msgs)
	for i := range wrs {
		wrs[i] = sendWR(uint64(i+1), qp.WRRDMAWrite, sge(p.mrA, 0, size))
		wrs[i].RemoteAddr, wrs[i].RKey = p.mrB.Addr, p.mrB.RKey
	}
	p.postSend(wrs...)
	for i, wc := range p.waitWCs(p.sim.A, p.cqA, msgs, time.Minute) {
		wantWC(t, wc, uint64(i+1), qp.WCSuccess, qp.WCRDMAWrite)
	}
	return ahead, p.sim.A.Counters()
}

// TestMaxUnackedPSNs: with a bound of 128 (rxe's RXE_MAX_UNACKED_PSNS) a
// go-back-N requester never sends a PSN 128 or more ahead of the oldest
// one not acknowledged, and under 1% loss it resends fewer packets than
// without the bound, where a whole round trip's worth (about 460 PSNs on
// this 10 Gb/s, 400 µs path) is in flight and each go-back resends it.
func TestMaxUnackedPSNs(t *testing.T) {
	freeAhead, free := unackedRun(t, 0)
	boundAhead, bound := unackedRun(t, 128)
	t.Logf("no bound: %d PSNs ahead at most, %d retransmitted; bound 128: %d ahead, %d retransmitted",
		freeAhead, free.Retransmits, boundAhead, bound.Retransmits)
	if boundAhead >= 128 {
		t.Errorf("with a bound of 128, a request went %d PSNs ahead of the oldest unacknowledged", boundAhead)
	}
	if freeAhead < 128 {
		t.Errorf("without a bound, requests went only %d PSNs ahead: the run does not test the bound", freeAhead)
	}
	if bound.Retransmits >= free.Retransmits {
		t.Errorf("retransmitted %d packets with the bound, %d without", bound.Retransmits, free.Retransmits)
	}
}

// TestMaxUnackedPSNsRange: a bound out of range is refused, at the engine
// and at the QP.
func TestMaxUnackedPSNsRange(t *testing.T) {
	if _, err := NewSim(SimConfig{MaxUnackedPSNs: -1}); err == nil {
		t.Error("engine took a bound of -1")
	}
	if _, err := NewSim(SimConfig{MaxUnackedPSNs: MaxUnackedLimit + 1}); err == nil {
		t.Errorf("engine took a bound of %d", MaxUnackedLimit+1)
	}
	p := newTestPair(t, SimConfig{Seed: 1}, ConnParams{})
	pd := p.sim.A.AllocPD()
	cq, err := p.sim.A.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.sim.A.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MaxUnackedPSNs: MaxUnackedLimit + 1}); err != ErrMaxUnacked {
		t.Errorf("QP with a bound of %d: %v, want ErrMaxUnacked", MaxUnackedLimit+1, err)
	}
}
