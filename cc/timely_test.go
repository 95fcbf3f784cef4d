package cc

import (
	"math"
	"testing"
	"time"
)

const us = time.Microsecond

func newTimely(t testing.TB, knobs ...string) Algorithm {
	t.Helper()
	var v KnobValues
	for _, k := range knobs {
		if err := v.Set(k); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(Timely, Params{LineRate: 40 * gbit, Knobs: v})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// timelyCut is Timely's multiplicative decrease of rate by factor, with
// the minimum rate of the defaults.
func timelyCut(rate uint64, factor float64) uint64 {
	return max(uint64(math.Round(float64(rate)*max(factor, 0))), 10_000_000)
}

// TestTimelyPositiveGradient: RTTs that grow between T_low and T_high cut
// the rate by beta times the normalised gradient (Timely Algorithm 1),
// sample by sample, and only that QP's.
func TestTimelyPositiveGradient(t *testing.T) {
	a := newTimely(t)
	s, other := a.NewSender(), a.NewSender()
	s.OnRTT(0, 60*us) // sets prev_rtt only
	other.OnRTT(0, 60*us)
	if s.Rate() != 40*gbit {
		t.Fatalf("first sample moved the rate to %d", s.Rate())
	}
	const alpha, beta, minRTT = 0.875, 0.8, 20_000.0
	rate, diff := uint64(40*gbit), 0.0
	prev := 60 * us
	for i, rtt := range []time.Duration{70 * us, 80 * us, 85 * us, 86 * us} {
		diff = (1-alpha)*diff + alpha*float64(rtt-prev)
		prev = rtt
		gradient := diff / minRTT
		want := timelyCut(rate, 1-beta*gradient)
		s.OnRTT(Time(i+1)*100*us, rtt)
		if s.Rate() != want || want >= rate {
			t.Errorf("RTT %v: rate %d, want %d, below %d", rtt, s.Rate(), want, rate)
		}
		rate = want
	}
	// 70 µs after 60: diff 8.75 µs, gradient 0.4375, factor 0.65.
	if other.OnRTT(time.Millisecond, 70*us); other.Rate() != 26*gbit {
		t.Errorf("QP 2: rate %d after one positive gradient, want 26G", other.Rate())
	}
	if c := counts(a); c["timely_gradient_decreases"] != 5 {
		t.Errorf("counters %v", c)
	}
}

// TestTimelyNegativeGradient: RTTs that shrink raise the rate by delta,
// and after five negative gradients in a row by five deltas (HAI); a
// positive gradient ends the run.
func TestTimelyNegativeGradient(t *testing.T) {
	a := newTimely(t)
	s := a.NewSender()
	s.OnRTT(0, 100*us)
	s.OnRTT(1, 101*us) // diff 875 ns, gradient 0.04375: a cut
	rate := timelyCut(40*gbit, 1-0.8*0.04375)
	if s.Rate() != rate {
		t.Fatalf("rate %d, want %d", s.Rate(), rate)
	}
	for i, step := range []struct {
		rtt  time.Duration
		gain uint64 // in deltas of 10 Mbit/s
	}{
		{100 * us, 1}, {99 * us, 1}, {98 * us, 1}, {97 * us, 1},
		{96 * us, 5}, {95 * us, 5}, // the 5th and 6th negative gradients: HAI
		{95 * us, 5}, // no change: the EWMA is still negative
		{97 * us, 0}, // a positive gradient: a cut, the run ends
		{96 * us, 1}, // negative again: one delta
	} {
		before := s.Rate()
		s.OnRTT(Time(i+2)*us, step.rtt)
		if step.gain == 0 {
			if s.Rate() >= before {
				t.Errorf("step %d (%v): rate %d not below %d", i, step.rtt, s.Rate(), before)
			}
			continue
		}
		if s.Rate() != before+step.gain*10_000_000 {
			t.Errorf("step %d (%v): rate %d, want %d + %d deltas", i, step.rtt, s.Rate(), before, step.gain)
		}
	}
	if c := counts(a); c["timely_additive_increases"] != 5 || c["timely_hai_increases"] != 3 || c["timely_gradient_decreases"] != 2 {
		t.Errorf("counters %v", c)
	}
}

// TestTimelyThresholds: below T_low the rate rises by delta even when the
// RTT grows; above T_high it is cut by beta·(1 - T_high/rtt) even when the
// RTT shrinks; the rate stays between the minimum and line rate.
func TestTimelyThresholds(t *testing.T) {
	a := newTimely(t)
	s := a.NewSender()
	s.OnRTT(0, 20*us)
	s.OnRTT(1, 45*us) // growing fast, but below T_low
	if s.Rate() != 40*gbit {
		t.Errorf("rate %d above line rate", s.Rate())
	}
	s.OnRTT(2, time.Millisecond) // twice T_high: factor 1 - 0.8·0.5 = 0.6
	if want := timelyCut(40*gbit, 1-0.8*0.5); s.Rate() != want || want > 24*gbit {
		t.Errorf("above T_high: rate %d, want %d", s.Rate(), want)
	}
	r := s.Rate()
	s.OnRTT(3, 800*us) // shrinking, but above T_high: still a cut
	if want := timelyCut(r, 1-0.8*(1-500.0/800)); s.Rate() != want {
		t.Errorf("above T_high, shrinking: rate %d, want %d", s.Rate(), want)
	}
	r = s.Rate()
	s.OnRTT(4, 30*us)
	s.OnRTT(5, 40*us)
	if s.Rate() != r+20_000_000 {
		t.Errorf("below T_low: rate %d, want %d", s.Rate(), r+20_000_000)
	}
	for i := range 50 {
		s.OnRTT(Time(6+i), 10*time.Millisecond)
	}
	if s.Rate() != 10_000_000 {
		t.Errorf("rate %d after 50 samples of 10 ms, want the minimum 10Mbit", s.Rate())
	}
	if c := counts(a); c["timely_tlow_increases"] != 3 || c["timely_thigh_decreases"] != 52 {
		t.Errorf("counters %v", c)
	}
}

// TestTimelyQuiet: Timely uses no ECN, no CNP and no timer.
func TestTimelyQuiet(t *testing.T) {
	a := newTimely(t)
	if a.Caps().ECN {
		t.Error("Timely asks for ECT")
	}
	s, r := a.NewSender(), a.NewReceiver()
	if s.OnCNP(0) || r.OnCE(0) || s.Rate() != 40*gbit {
		t.Error("Timely acted on a CNP or asked for one")
	}
	s.OnSent(0, 1<<20)
	s.OnRTT(1, 30*us)
	if _, ok := s.Deadline(); ok {
		t.Error("Timely wants a timer")
	}
	s.OnRTT(2, time.Millisecond)
	s.Reset(3)
	if s.Rate() != 40*gbit {
		t.Errorf("after Reset rate %d", s.Rate())
	}
}

// TestTimelyAllocs: Timely's calls allocate nothing.
func TestTimelyAllocs(t *testing.T) {
	a := newTimely(t)
	s, r := a.NewSender(), a.NewReceiver()
	now := Time(0)
	if n := testing.AllocsPerRun(10_000, func() {
		now += us
		s.OnRTT(now, 40*us+time.Duration(now/us%80)*us)
		s.OnSent(now, 1078)
		s.OnCNP(now)
		s.OnTimer(now)
		_, _ = s.Deadline()
		_ = s.Rate()
		_ = r.OnCE(now)
	}); n != 0 {
		t.Errorf("%v allocations per sample", n)
	}
}
