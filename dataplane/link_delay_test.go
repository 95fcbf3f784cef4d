package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestLinkDelay: the delay line adds its delay to every frame each way,
// so the round trip the estimator measures is the fabric's plus twice the
// delay, exactly; frames keep their order; data stays intact under loss.
func TestLinkDelay(t *testing.T) {
	const oneWay, delay = 2 * time.Microsecond, 100 * time.Microsecond
	// Timeouts above the 204 µs round trip from the start (before the
	// first sample the fixed ones apply; IRN's 100 µs would fire).
	params := recovery.Params{RTOLow: time.Millisecond, RTOHigh: 2 * time.Millisecond}
	p := newSchemePair(t, recovery.IRN, params, SimConfig{Seed: 71, AtoB: delayLink(oneWay), BtoA: delayLink(oneWay),
		FetchPenalty: -1, RTO: RTOAdaptive, LinkDelay: delay}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
	p.checkWrite(1, 100, false)
	if r := p.sim.A.QPRTT(p.qa); r.SRTT != 2*(oneWay+delay) {
		t.Fatalf("SRTT %v, want %v", r.SRTT, 2*(oneWay+delay))
	}
	for i := range uint64(20) {
		p.checkWrite(i+2, 64<<10, false)
	}
	if a, b := p.sim.A.Counters(), p.sim.B.Counters(); a.LocalAckTimeout != 0 || a.Retransmits != 0 || b.OutOfSeqRequest != 0 || b.LinkDelayDrops != 0 {
		t.Fatalf("lossless: %d timeouts, %d retransmissions, %d out of sequence, %d delay-line drops",
			a.LocalAckTimeout, a.Retransmits, b.OutOfSeqRequest, b.LinkDelayDrops)
	}

	for _, scheme := range []string{recovery.GBN, recovery.FaSR} {
		lossy := newSchemePair(t, scheme, params, SimConfig{Seed: 72, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01),
			LinkDelay: delay, LinkRate: 5e9}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
		for i := range uint64(10) {
			lossy.checkWrite(i+1, 64<<10, false)
		}
	}
}

// TestLinkDelayFull: a delay line with no room drops (counted) and the
// transport recovers.
func TestLinkDelayFull(t *testing.T) {
	p := newSchemePair(t, recovery.GBN, recovery.Params{}, SimConfig{Seed: 73, AtoB: delayLink(time.Microsecond), BtoA: delayLink(time.Microsecond),
		LinkDelay: 50 * time.Microsecond, LinkDelaySlots: 4}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
	p.checkWrite(1, 64<<10, false)
	if b := p.sim.B.Counters(); b.LinkDelayDrops == 0 {
		t.Fatal("64 packets through a 4-slot delay line: no drop counted")
	}
}
