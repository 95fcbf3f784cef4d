package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestRepeatedNakBehindQueue: behind a deep queue the packet a go-back
// resends reaches the responder milliseconds later, and until then the
// responder repeats its NAK for the same PSN (once per NAK interval while
// out-of-order packets keep arriving; igbn's CE on its timer). Each
// repeat is the same news: the requester goes back again (the resent
// packet may have been lost too) but spends no retry; the retransmission
// timer still counts a stall. One WRITE packet lost once, behind a
// 2,048-frame queue at 1 Gb/s (16 ms), with the daemon's 2 ms NAK
// interval: each repeat came more than a go-back round's hold (1/64 of
// the ACK timeout, 1 ms, without an RTT estimate) after the last, spent a
// retry, and both gbn and igbn ended in RETRY_EXC_ERR for one lost
// packet. The soak saw this as send_bw igbn failing about once in 100
// runs.
func TestRepeatedNakBehindQueue(t *testing.T) {
	for _, scheme := range []string{recovery.GBN, recovery.IGBN} {
		t.Run(scheme, func(t *testing.T) {
			fwd := fabric.LinkConfig{Delay: 20 * time.Microsecond, RateBps: 1e9, QueueFrames: 2048}
			fwd.Drop = dropOnce(bth.RCWriteMiddle, 10)
			back := fabric.LinkConfig{Delay: 20 * time.Microsecond, RateBps: 1e9, QueueFrames: 2048}
			p := newSchemePair(t, scheme, recovery.Params{NakInterval: 2 * time.Millisecond}, SimConfig{Seed: 1, AtoB: fwd, BtoA: back},
				ConnParams{MTU: qp.MTU1024, Timeout: 14})
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("A %+v", p.sim.A.Counters())
					t.Logf("B %+v", p.sim.B.Counters())
				}
			})
			p.dataBatch("write", 1, 4, 1<<20)
			a, b := p.sim.A.Counters(), p.sim.B.Counters()
			t.Logf("%v simulated; NAKs %d received, %d sent; retries %d, free go-backs %d, timeouts %d", p.sim.Now(), a.RcvdSeqErr, b.SeqNakSent, a.CompleterRetry, a.GoBackFree, a.LocalAckTimeout)
			if a.RetryExceededErr != 0 {
				t.Errorf("RETRY_EXC_ERR for one lost packet behind a queue (%d NAKs, %d retries spent)", a.RcvdSeqErr, a.CompleterRetry)
			}
		})
	}
}
