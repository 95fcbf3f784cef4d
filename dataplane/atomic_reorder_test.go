package dataplane

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestAtomicReorderNoStall: a go-back-N requester that receives atomic
// responses out of order goes back at once (an implied NAK, as for READ
// responses; rxe's check_psn), instead of dropping every response after
// the late one and waiting for the retransmission timer. The soak found
// this on the testbed: atomic_bw through "delay 20us 10us reorder 1%"
// completed about one atomic per timeout, each timeout backed off to 1 s
// (Karn: every response it could have timed was dropped), and the run
// looked hung. A stream of FETCH_ADDs, 128 posted and 16 outstanding at
// the responder, with jitter only on the responses: no loss at all, so
// no timeout may fire, and the target ends at the number of atomics.
func TestAtomicReorderNoStall(t *testing.T) {
	spec, err := impair.Parse("delay 20us 10us")
	if err != nil {
		t.Fatal(err)
	}
	back := fabric.LinkConfig{Netem: spec, RateBps: 10e9, QueueFrames: 256}
	fwd := fabric.LinkConfig{Delay: 20 * time.Microsecond, RateBps: 10e9, QueueFrames: 256}
	for _, scheme := range []string{recovery.GBN, recovery.IGBN} {
		t.Run(scheme, func(t *testing.T) {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 1, RTO: RTOAdaptive, RTOBackoff: true, AtoB: fwd, BtoA: back},
				ConnParams{MTU: qp.MTU1024})
			const total, depth, target = 4000, 128, 8 << 20
			posted, done := 0, 0
			post := func(n int) {
				wrs := make([]qp.SendWR, n)
				for i := range wrs {
					wrs[i] = sendWR(uint64(posted+i), qp.WRAtomicFetchAndAdd, sge(p.mrA, 8*((posted+i)%1024), 8))
					wrs[i].RemoteAddr, wrs[i].RKey, wrs[i].CompareAdd = p.mrB.Addr+target, p.mrB.RKey, 1
				}
				p.postSend(wrs...)
				posted += n
			}
			post(depth)
			for done < total {
				for _, wc := range p.waitWCs(p.sim.A, p.cqA, 1, time.Second) {
					if wc.Status != qp.WCSuccess {
						t.Fatalf("completion %+v after %d", wc, done)
					}
					done++
				}
				if n := min(done+depth, total) - posted; n > 0 {
					post(n)
				}
			}
			a := p.sim.A.Counters()
			t.Logf("%v simulated; implied NAKs %d, go-backs free %d, timeouts %d, bad responses %d, packets resent %d",
				p.sim.Now(), a.ImpliedNakSeqErr, a.GoBackFree, a.LocalAckTimeout, a.RcvdBadResponse, a.Retransmits)
			if a.LocalAckTimeout != 0 {
				t.Errorf("%d timeouts without a frame lost: reordered atomic responses were taken for loss only by the timer", a.LocalAckTimeout)
			}
			if got := binary.LittleEndian.Uint64(p.mrB.Bytes()[target:]); got != total {
				t.Errorf("target holds %d after %d FETCH_ADDs of 1: an atomic executed twice or never", got, total)
			}
		})
	}
}
