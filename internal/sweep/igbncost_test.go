package sweep

import (
	"testing"
	"time"

	"github.com/softnic/softnic/internal/perftest"
)

// TestIGBNGoBackCost measures where igbn's goodput goes at 1% loss on
// Fig. 6a's workload (docs/results.md, "Fig. 6a"): no ACK timeout, but
// about two packets sent for each delivered, as every sequence NAK makes
// the requester resend what was in flight behind the lost packet. Two
// knobs set that amount: the frames the link lets queue behind it
// (perftest.DefaultLink.Ring, 64 each way) and the 500 µs NAK interval,
// for which the responder drops everything without a NAK when the NAK or
// the resent packet is lost (CE's timer ends that wait only at the
// message's end). Each alone cuts the resends per NAK and raises the
// goodput; both together more.
func TestIGBNGoBackCost(t *testing.T) {
	const msgs = 20
	run := func(ring int, nak time.Duration) IGBNResult {
		r, err := RunIGBN(IGBNConfig{Scheme: "igbn", Loss: 0.01, Timeout: 15, Messages: msgs, Seed: 1, Ring: ring, NakInterval: nak})
		if err != nil {
			t.Fatal(err)
		}
		data := float64(msgs * IGBNMessageSize / 1024)
		shown, shownNak := ring, nak
		if ring == 0 {
			shown = perftest.DefaultLink.Ring
		}
		if nak == 0 {
			shownNak = IGBNNakInterval
		}
		t.Logf("link queue %2d frames, NAK interval %-6v: %6.3f Gb/s, ACK timeouts %d, sent %.3f x the data, NAKs sent %d heard %d, resends per NAK heard %.1f",
			shown, shownNak, r.Gbps, r.Timeouts, float64(r.SentPkts)/data, r.NaksSent, r.NaksRcvd, float64(r.Retransmits)/float64(r.NaksRcvd))
		return r
	}
	perNak := func(r IGBNResult) float64 { return float64(r.Retransmits) / float64(r.NaksRcvd) }
	base := run(0, 0) // Fig. 6a's: 64 frames, 500 µs
	if base.Timeouts != 0 || float64(base.SentPkts) < 1.8*msgs*IGBNMessageSize/1024 || perNak(base) < 60 {
		t.Fatalf("Fig. 6a's igbn at 1%%: %d timeouts, %d packets sent for %d, %.1f resends per NAK: want none, about twice, more than 60",
			base.Timeouts, base.SentPkts, msgs*IGBNMessageSize/1024, perNak(base))
	}
	short := run(16, 0)
	quick := run(0, 50*time.Microsecond)
	both := run(16, 50*time.Microsecond)
	for _, c := range []struct {
		name string
		r    IGBNResult
	}{{"a 16-frame link queue", short}, {"a 50 µs NAK interval", quick}} {
		if perNak(c.r) > 0.85*perNak(base) || c.r.Gbps < 1.1*base.Gbps {
			t.Errorf("%s: %.1f resends per NAK, %.3f Gb/s; Fig. 6a's %.1f, %.3f Gb/s", c.name, perNak(c.r), c.r.Gbps, perNak(base), base.Gbps)
		}
		if both.Gbps < 1.1*c.r.Gbps {
			t.Errorf("both knobs: %.3f Gb/s, not above %s alone (%.3f)", both.Gbps, c.name, c.r.Gbps)
		}
	}
}
