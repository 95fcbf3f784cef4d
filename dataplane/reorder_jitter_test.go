package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// jitterLink is the embedded setup of issue 10: a 10 Gb/s link with 20 µs
// delay, a 256-frame queue and uniform extra delay (jitter) that reorders
// frames, with random loss.
func jitterLink(jitter time.Duration, loss float64) fabric.LinkConfig {
	return fabric.LinkConfig{
		Delay:       20 * time.Microsecond,
		Jitter:      jitter,
		Loss:        loss,
		RateBps:     10e9,
		QueueFrames: 256,
	}
}

// TestReorderingIsNotLoss (issue 10): under reordering alone, or
// reordering with 1 % or 5 % loss (5 % not under the race detector:
// TestReorderingMatrix has it), every scheme completes alternating WRITEs
// and READs byte-exact with the daemon's timeouts (RTO_low 1 ms, RTO_high
// 2 ms, back-off on). The embedded run is 16 messages of 4 MiB;
// 8 of 2 MiB fail the same way before the fix and keep the race run
// short. Before it, of 10 seeds per cell, fasr failed 4/6/5/5 (jitter
// 20 µs at 0 and 1 % loss, 50 µs at 0 and 1 %: it took reordering for
// loss, dropped late originals as FNACKed retransmissions and ended in
// RETRY_EXC_ERR) and melo 2 at 50 µs and 1 % (a late READ response before
// the sender's recorded bits went unrecorded: one answered per timeout).
// docs/recovery.md, "Reordering is not loss".
func TestReorderingIsNotLoss(t *testing.T) {
	seeds := 10
	switch {
	case raceOn:
		seeds = 1 // the race detector makes gbn's runs take ~15 s each
	case testing.Short():
		seeds = 2
	}
	const (
		msgs = 8
		size = 2 << 20
	)
	params := recovery.Params{RTOLow: time.Millisecond, RTOHigh: 2 * time.Millisecond}
	for _, scheme := range []string{recovery.GBN, recovery.IGBN, recovery.IRN, recovery.MELO, recovery.FaSR} {
		for _, jitter := range []time.Duration{20 * time.Microsecond, 50 * time.Microsecond} {
			for _, loss := range []float64{0, 0.01, 0.05} {
				if loss == 0.05 && raceOn {
					continue // TestReorderingMatrix covers 5 % under -race
				}
				for seed := 1; seed <= seeds; seed++ {
					name := fmt.Sprintf("%s/jitter=%v/loss=%g/seed=%d", scheme, jitter, loss, seed)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						p := newSchemePair(t, scheme, params, SimConfig{Seed: uint64(seed), RTOBackoff: true,
							AtoB: jitterLink(jitter, loss), BtoA: jitterLink(jitter, loss)}, ConnParams{MTU: qp.MTU1024})
						t.Cleanup(func() {
							if t.Failed() {
								t.Logf("A %+v", p.sim.A.Counters())
								t.Logf("B %+v", p.sim.B.Counters())
							}
						})
						for i := 0; i < msgs; i++ {
							if i%2 == 0 {
								p.checkWrite(uint64(i+1), size, false)
							} else {
								p.checkRead(uint64(i+1), size)
							}
						}
						a, b := p.sim.A.Counters(), p.sim.B.Counters()
						t.Logf("A resent %d timeouts %d fnacks taken %d; B fnacks sent %d middle drops %d pool drops %d",
							a.Retransmits, a.LocalAckTimeout, a.SchemeCounter("sr_fnacks_taken"), b.FNACKSent, b.SchemeCounter("sr_middle_drops"), b.SchemeCounter("sr_pool_drops"))
					})
				}
			}
		}
	}
}
