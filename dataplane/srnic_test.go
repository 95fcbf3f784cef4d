package dataplane

import (
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestSRNICHostStalls: one packet of a 16-packet WRITE is lost once.
// Under srnic the retransmission costs the sender one host access (it
// collects the PSN from its host bitmap) and the receiver one (the walk
// over the 12 packets kept beyond the hole reads its host bitmap), each
// stalling its NIC's pipeline 1.2 µs; irn, whose bitmaps are on chip,
// charges none, and a lossless WRITE charges srnic none either. The data
// arrives intact either way (checkWrite).
func TestSRNICHostStalls(t *testing.T) {
	lat := uint64(recovery.DefaultHostLatency.Nanoseconds())
	for _, tc := range []struct {
		scheme string
		drop   bool
		want   uint64 // host accesses at each NIC
	}{
		{recovery.SRNIC, false, 0},
		{recovery.SRNIC, true, 1},
		{recovery.IRN, true, 0},
	} {
		link := lossyLink(0)
		if tc.drop {
			link.Drop = dropOnce(bth.RCWriteMiddleOOO, 0x103)
		}
		p := newSchemePair(t, tc.scheme, recovery.Params{}, SimConfig{Seed: 33, AtoB: link, BtoA: lossyLink(0)},
			ConnParams{MTU: qp.MTU1024, PSNA: 0x100})
		p.checkWrite(1, 16<<10, false)
		a, b := p.sim.A.Counters(), p.sim.B.Counters()
		t.Logf("%s drop=%v: A %d accesses %d ns, B %d accesses %d ns; retransmitted %d, kept %d, done at %v",
			tc.scheme, tc.drop, a.HostAccesses, a.HostStallNs, b.HostAccesses, b.HostStallNs, a.Retransmits, b.OOOKept, p.sim.Now())
		if a.HostAccesses != tc.want || b.HostAccesses != tc.want ||
			a.HostStallNs != tc.want*lat || b.HostStallNs != tc.want*lat {
			t.Errorf("%s drop=%v: host accesses A %d (%d ns), B %d (%d ns); want %d each at %d ns",
				tc.scheme, tc.drop, a.HostAccesses, a.HostStallNs, b.HostAccesses, b.HostStallNs, tc.want, lat)
		}
		if tc.drop && (a.Retransmits != 1 || b.OOOKept != 12) {
			t.Errorf("%s: %d retransmitted, %d kept out of order; want 1 and 12", tc.scheme, a.Retransmits, b.OOOKept)
		}
	}
}

// TestSRNICStallDelaysPipeline: a host access stalls the receiving NIC's
// pipeline as a context miss does: the frame after the one that charged
// it waits the full latency.
func TestSRNICStallDelaysPipeline(t *testing.T) {
	e := newTestPair(t, SimConfig{Seed: 34, SchemeA: recovery.SRNIC, SchemeB: recovery.SRNIC}, ConnParams{MTU: qp.MTU1024}).sim.B
	e.mu.Lock()
	from := max(e.busyUntil, e.now)
	e.host.Access(recovery.DefaultHostLatency)
	e.hostStall()
	stalled, added := e.stalled(), e.busyUntil-from
	e.mu.Unlock()
	if !stalled || added != recovery.DefaultHostLatency {
		t.Fatalf("stalled %v, for %v more; want %v", stalled, added, recovery.DefaultHostLatency)
	}
	if e.Poll(e.now) {
		t.Fatal("a stalled engine did work")
	}
}
