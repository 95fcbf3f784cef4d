package dataplane

import (
	"fmt"
	"testing"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestReadReorderNoStorm (the read_bw retransmission storm): go-back-N
// READs of 64 KiB, 32 posted at a time as read_bw does (16 outstanding at
// the responder), over links that reorder but never lose
// (netem "delay 20us 10us reorder 1%", the testbed's impairment without
// its loss) at 1 Gb/s, with the daemon's adaptive RTO and 67 ms ACK
// timeout. A reordered READ response may cost a spurious go-back; it must
// not snowball or end the QP. Before the fix every seed of both schemes
// ended the first READ with RETRY_EXC_ERR within 20 ms simulated: the
// responder queued each re-executed READ behind every later response
// stream, so the requester saw hundreds of out-of-order responses before
// the one it went back for, and sequence NAKs (queued behind the same
// streams) spent the retry budget without progress. The ceilings are on
// the READ requests re-issued per READ posted and the response packets
// sent per response packet needed.
func TestReadReorderNoStorm(t *testing.T) {
	const (
		batches = 2
		perBat  = 32
		size    = 64 << 10
	)
	spec, err := impair.Parse("delay 20us 10us reorder 1%")
	if err != nil {
		t.Fatal(err)
	}
	link := fabric.LinkConfig{Netem: spec, RateBps: 1e9, QueueFrames: 256}
	for _, scheme := range []string{recovery.GBN, recovery.IGBN} {
		for _, seed := range []uint64{1, 2} {
			if raceOn && seed > 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/seed=%d", scheme, seed), func(t *testing.T) {
				t.Parallel()
				p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: seed, RTO: RTOAdaptive, AtoB: link, BtoA: link},
					ConnParams{MTU: qp.MTU1024})
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("A %+v", p.sim.A.Counters())
						t.Logf("B %+v", p.sim.B.Counters())
					}
				})
				start := p.sim.Now()
				for i := 0; i < batches; i++ {
					p.dataBatch("read", uint64(1000*(i+1)), perBat, size)
				}
				a, b := p.sim.A.Counters(), p.sim.B.Counters()
				reads := float64(batches * perBat)
				needed := reads * size / 1024
				reissued := float64(a.Retransmits) / reads
				amp := float64(b.SentPkts) / needed
				t.Logf("%v simulated; A resent %d READ requests (%.2f per READ), implied NAKs %d, timeouts %d, rtt samples %d; B duplicates %d, sent %d packets (%.2f per needed)",
					p.sim.Now()-start, a.Retransmits, reissued, a.ImpliedNakSeqErr, a.LocalAckTimeout, a.RTTSamples, b.DuplicateRequest, b.SentPkts, amp)
				// A ceiling against the storm coming back, not the goal: at
				// 1 Gb/s a 20 µs jitter span swaps about one adjacent pair
				// of responses in six, and go-back-N goes back on each.
				if reissued > 400 || amp > 40 {
					t.Errorf("retransmission storm: %.2f READ requests re-issued per READ (ceiling 400), %.2f response packets sent per needed (ceiling 40)", reissued, amp)
				}
			})
		}
	}
}
