package recovery

import (
	"testing"
	"time"
)

// TestRTTSample: RFC 6298 §2.2 for the first sample, §2.3 after it.
func TestRTTSample(t *testing.T) {
	var r RTT
	if r.Valid {
		t.Fatal("zero RTT is valid")
	}
	r.Sample(80 * time.Microsecond)
	if !r.Valid || r.SRTT != 80*time.Microsecond || r.RTTVar != 40*time.Microsecond {
		t.Fatalf("first sample: %+v, want SRTT 80µs RTTVAR 40µs", r)
	}
	if got, want := r.RTO(), 80*time.Microsecond+160*time.Microsecond; got != want {
		t.Fatalf("RTO %v, want %v", got, want)
	}
	// RTTVAR = 3/4·40 + 1/4·|80-40| = 40; SRTT = 7/8·80 + 1/8·40 = 75.
	r.Sample(40 * time.Microsecond)
	if r.SRTT != 75*time.Microsecond || r.RTTVar != 40*time.Microsecond {
		t.Fatalf("second sample: %+v, want SRTT 75µs RTTVAR 40µs", r)
	}
	// A steady path: SRTT converges on it, RTTVAR decays to nothing and
	// the granularity keeps RTO above SRTT.
	for range 200 {
		r.Sample(24 * time.Microsecond)
	}
	// (integer rounding leaves a few nanoseconds' dead band)
	if d := r.SRTT - 24*time.Microsecond; d < -8*time.Nanosecond || d > 8*time.Nanosecond || r.RTTVar > 8*time.Nanosecond {
		t.Fatalf("steady: %+v", r)
	}
	if got := r.RTO(); got < r.SRTT+RTTGranularity || got > r.SRTT+RTTGranularity+32*time.Nanosecond {
		t.Fatalf("steady RTO %v, want SRTT+G", got)
	}
	r.Sample(-time.Second) // a clock that went backwards counts as 0
	if r.SRTT < 0 || r.RTTVar < 0 {
		t.Fatalf("negative sample: %+v", r)
	}
}

// TestRTTIRNFixedPoint: on IRN's default path (a 24 µs round trip, no
// variation) the rule gives the paper's RTO_low and RTO_high.
func TestRTTIRNFixedPoint(t *testing.T) {
	r := RTT{SRTT: 24 * time.Microsecond, MinRTT: 24 * time.Microsecond, Valid: true}
	if got := r.RTOLow(); got < 99*time.Microsecond || got > 101*time.Microsecond {
		t.Fatalf("RTO_low %v, want about %v", got, DefaultRTOLow)
	}
	if got := r.RTOHigh(); got < 310*time.Microsecond || got > 330*time.Microsecond {
		t.Fatalf("RTO_high %v, want about %v", got, DefaultRTOHigh)
	}
	// Variation widens both by 4·RTTVAR.
	r.RTTVar = 10 * time.Microsecond
	if got, want := r.RTOLow(), 96*time.Microsecond+40*time.Microsecond; got != want {
		t.Fatalf("RTO_low with RTTVAR: %v, want %v", got, want)
	}
	if got, want := r.RTOHigh(), 312*time.Microsecond+40*time.Microsecond; got != want {
		t.Fatalf("RTO_high with RTTVAR: %v, want %v", got, want)
	}
}

// TestTimeoutAdaptive: every scheme keeps its fixed timeouts without a
// sample; with one, the selective schemes take IRN's rule capped by the
// ACK timeout, go-back-N RFC 6298's RTO floored by it.
func TestTimeoutAdaptive(t *testing.T) {
	p := Params{RTOLow: 100 * time.Microsecond, RTOHigh: 320 * time.Microsecond, RTOLowThreshold: 3}
	path := RTT{SRTT: 50 * time.Microsecond, RTTVar: 5 * time.Microsecond, MinRTT: 50 * time.Microsecond, Valid: true}
	low, high := path.RTOLow(), path.RTOHigh() // 220 µs, 670 µs
	for _, name := range Names() {
		s, err := New(name, p)
		if err != nil {
			t.Fatal(err)
		}
		snd := s.NewSender()
		snd.Reset(0)
		base := 16 * time.Millisecond
		type tc struct {
			base     time.Duration
			inflight int
			rtt      RTT
			want     time.Duration
		}
		var cases []tc
		switch {
		case s.ReorderWindow() == 0: // the go-back-N family
			cases = []tc{
				{base, 1, RTT{}, base},
				{base, 1, path, base},                        // the ACK timeout is the floor
				{50 * time.Microsecond, 1, path, path.RTO()}, // a slower path waits longer
				{50 * time.Microsecond, 50, path, path.RTO()},
			}
		default:
			cases = []tc{
				{base, 1, RTT{}, p.RTOLow},
				{base, 50, RTT{}, p.RTOHigh},
				{base, 3, path, low},
				{base, 4, path, high},
				{500 * time.Microsecond, 50, path, 500 * time.Microsecond}, // capped by the ACK timeout
			}
		}
		for _, c := range cases {
			if got := snd.Timeout(c.base, c.inflight, c.rtt); got != c.want {
				t.Errorf("%s: Timeout(%v, %d, %+v) = %v, want %v", name, c.base, c.inflight, c.rtt, got, c.want)
			}
		}
	}
}
