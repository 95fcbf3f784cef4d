package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// slotAt is the time a frame of n bytes occupies a pipeline at rate.
func slotAt(n int, rate uint64) time.Duration {
	return time.Duration(uint64(WireBytes(n)) * 8 * uint64(time.Second) / rate)
}

// TestServiceTimeReceive: a 64 KiB WRITE's 64 frames reach B at once (a
// fabric of no rate and no delay). With a service rate of 1 Gbit/s B's
// receive pipeline takes one frame per slot, so the WRITE completes at A
// only after B has spent 64 slots on it; without a service rate it
// completes within a slot.
func TestServiceTimeReceive(t *testing.T) {
	const rate = 1e9
	frame := 14 + 20 + 8 + 12 + 1024 + 4 // WRITE middle, MTU 1024
	slot := slotAt(frame, rate)
	for _, service := range []uint64{0, rate} {
		p := newTestPair(t, SimConfig{ServiceRateB: service, FetchPenalty: -1}, ConnParams{MTU: qp.MTU1024})
		wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))
		wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
		p.postSend(wr)
		wc := p.waitWCs(p.sim.A, p.cqA, 1, time.Second)
		done := p.sim.Now()
		t.Logf("service rate %d: completed at %v (slot %v), status %v", service, done, slot, wc[0].Status)
		if wc[0].Status != qp.WCSuccess {
			t.Fatalf("completion %+v", wc[0])
		}
		if service == 0 && done >= slot {
			t.Errorf("no service time: completed at %v, want within one slot (%v)", done, slot)
		}
		if service > 0 && (done < 63*slot || done > 64*slot+2*time.Microsecond) {
			t.Errorf("service time: completed at %v, want between 63 slots (%v) and 64 slots plus an ACK (%v)", done, 63*slot, 64*slot+2*time.Microsecond)
		}
	}
}

// TestServiceTimeTransmit: with a service rate, A's transmit pipeline
// hands the fabric one frame per slot, with no burst, even where its
// emulated link (none here) and the fabric would take them at once.
func TestServiceTimeTransmit(t *testing.T) {
	const rate = 10e9
	tap := &linkTap{}
	atob := fabric.LinkConfig{Drop: tap.drop}
	p := newTestPair(t, SimConfig{AtoB: atob, ServiceRate: rate, FetchPenalty: -1}, ConnParams{MTU: qp.MTU1024})
	tap.clock = p.sim.Clock
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	p.waitWCs(p.sim.A, p.cqA, 1, time.Second)
	if len(tap.at) != 64 {
		t.Fatalf("%d frames on the wire, want 64", len(tap.at))
	}
	for i := 1; i < len(tap.at); i++ {
		if gap, min := tap.at[i]-tap.at[i-1], slotAt(tap.n[i-1], rate); gap < min-1 {
			t.Fatalf("frame %d left %v after frame %d, within its slot of %v", i, gap, i-1, min)
		}
	}
	if c := p.sim.A.Counters(); c.LinkPaced == 0 {
		t.Error("link_paced 0: the transmit pipeline never held a frame back")
	}
}

// TestServiceRateChecked: a service rate above the emulated link's limit
// is refused.
func TestServiceRateChecked(t *testing.T) {
	if _, err := NewSim(SimConfig{ServiceRate: 2e15}); err == nil {
		t.Error("NewSim took a service rate of 2 Pbit/s")
	}
}
