package impair

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Spec
	}{
		{"", Spec{}},
		{"loss 1%", Spec{LossPct: 1}},
		{"loss random 0.5 25%", Spec{LossPct: 0.5, LossCorr: 25}},
		{"drop 2%", Spec{LossPct: 2}},
		{"loss gemodel 1%", Spec{GE: true, GEP: 1, GER: 99, GE1H: 100}},
		{"loss gemodel 1% 25%", Spec{GE: true, GEP: 1, GER: 25, GE1H: 100}},
		{"loss gemodel 1% 25% 80% 0.1%", Spec{GE: true, GEP: 1, GER: 25, GE1H: 80, GE1K: 0.1}},
		{"delay 100us", Spec{Delay: 100 * time.Microsecond}},
		{"delay 1.5ms 20usec 10%", Spec{Delay: 1500 * time.Microsecond, Jitter: 20 * time.Microsecond, DelayCorr: 10}},
		{"delay 100 50ns", Spec{Delay: 100 * time.Microsecond, Jitter: 50}},
		{"delay 1s", Spec{Delay: time.Second}},
		{"delay 10ms reorder 25% 50% gap 5", Spec{Delay: 10 * time.Millisecond, ReorderPct: 25, ReorderCorr: 50, ReorderGap: 5}},
		{"duplicate 0.1% corrupt 0.01%", Spec{DupPct: 0.1, CorruptPct: 0.01}},
		{"hold 2% 40us", Spec{HoldPct: 2, HoldTime: 40 * time.Microsecond}},
		{"limit 1000 seed 42", Spec{Limit: 1000, Seed: 42, HasSeed: true}},
		{"loss 1% delay 100us 20us reorder 2% duplicate 0.1% corrupt 0.01%",
			Spec{LossPct: 1, Delay: 100 * time.Microsecond, Jitter: 20 * time.Microsecond, ReorderPct: 2, DupPct: 0.1, CorruptPct: 0.01}},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, word string }{
		{"loss", "loss needs a percentage"},
		{"loss 101%", `loss "101%"`},
		{"loss -1%", `loss "-1%"`},
		{"loss x", `loss "x"`},
		{"loss 1%%", `loss "1%%"`},
		{"loss NaN", `loss "NaN"`},
		{"loss 1% loss 2%", `"loss" given twice`},
		{"loss gemodel", "gemodel needs"},
		{"loss gemodel 1% 200%", `gemodel r "200%"`},
		{"loss state 1%", `loss "state"`},
		{"delay", "delay needs a time"},
		{"delay 2s", `delay "2s"`},
		{"delay 10parsecs", `delay "10parsecs"`},
		{"delay 1ms 5x", `jitter "5x"`},
		{"reorder 5%", "reorder needs a delay"},
		{"delay 1ms gap 3", "gap needs reorder"},
		{"delay 1ms reorder 1% gap 0", `gap "0"`},
		{"hold 5%", "hold needs a time"},
		{"hold 5% fast", `hold "fast"`},
		{"limit 0", `limit "0"`},
		{"limit many", `limit "many"`},
		{"seed -3", `seed "-3"`},
		{"rate 1gbit", `"rate" is not supported`},
		{"delay 1ms 1ms distribution normal", `"distribution" is not supported`},
		{"lose 1%", `unknown word "lose"`},
	} {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) accepted", c.in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.word) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "netem: ") {
			t.Errorf("Parse(%q): %q, want one line naming %q", c.in, msg, c.word)
		}
	}
}

// TestRoundTrip: String prints what Parse reads back to the same Spec.
func TestRoundTrip(t *testing.T) {
	for _, in := range []string{
		"loss 1% delay 100us 20us reorder 2% duplicate 0.1% corrupt 0.01%",
		"limit 64 delay 1500ns 3us 12.5% loss gemodel 0.3% 40% 99.9% 0.001% duplicate 1% 5% reorder 10% 20% gap 3 corrupt 0.5% 1% hold 1% 1ms seed 18446744073709551615",
		"loss 0.1 50", "delay 0us 5us", "delay 1s", "loss gemodel 5", "hold 100% 7ns",
	} {
		s, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		back, err := Parse(s.String())
		if err != nil || back != s {
			t.Errorf("%q printed %q, read back %+v (%v), want %+v", in, s.String(), back, err, s)
		}
		if again := back.String(); again != s.String() {
			t.Errorf("%q: String not canonical: %q then %q", in, s.String(), again)
		}
	}
	if got := (Spec{LossPct: 1, Delay: 100 * time.Microsecond, Jitter: 20 * time.Microsecond}).String(); got != "delay 100us 20us loss 1%" {
		t.Errorf("String: %q", got)
	}
}

// run decides frames frames with m and returns the verdicts' summary.
func run(m Model, seed uint64, frames int, each func(Verdict)) Stats {
	s := NewStage(m, seed, 0)
	for range frames {
		v := s.Decide(1000)
		if each != nil {
			each(v)
		}
	}
	return s.Stats()
}

// within fails unless got is within tol (relative) of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s %.5g, want %.5g within %.0f%%", what, got, want, 100*tol)
	}
}

func TestStatistics(t *testing.T) {
	const n = 100000
	spec, _ := Parse("loss 1% delay 100us 20us reorder 2% duplicate 0.5% corrupt 0.1% hold 3% 1ms")
	var minD, maxD time.Duration = time.Hour, 0
	var bits [8]int
	st := run(spec.Model(), 7, n, func(v Verdict) {
		if v.Drop || v.Reordered || v.Held {
			return
		}
		minD, maxD = min(minD, v.Delay), max(maxD, v.Delay)
		if v.CorruptBit >= 0 {
			bits[v.CorruptBit%8]++
			if v.CorruptBit >= 8000 {
				t.Fatalf("corrupt bit %d outside a 1000-byte frame", v.CorruptBit)
			}
		}
	})
	within(t, "loss", float64(st.Lost)/n, 0.01, 0.1)
	kept := float64(n - st.Lost)
	within(t, "duplicate", float64(st.Duplicated)/kept, 0.005, 0.15)
	within(t, "reorder", float64(st.Reordered)/kept, 0.02, 0.1)
	within(t, "hold", float64(st.Held)/kept, 0.03, 0.1)
	within(t, "corrupt", float64(st.Corrupted)/kept, 0.001, 0.25)
	if minD < 80*time.Microsecond || maxD >= 120*time.Microsecond || minD > 81*time.Microsecond || maxD < 119*time.Microsecond {
		t.Errorf("delays in [%v, %v], want to fill [80us, 120us)", minD, maxD)
	}
	for b, c := range bits {
		if c == 0 {
			t.Errorf("bit %d of a byte never corrupted", b)
		}
	}
}

// TestGilbertElliott: with netem's defaults (1-H 100%, 1-K 0) losses come
// in bursts of mean length 1/R at the rate P/(P+R).
func TestGilbertElliott(t *testing.T) {
	const n = 100000
	spec, _ := Parse("loss gemodel 1% 25%")
	bursts, run0 := 0, 0
	lostTotal := 0
	st := run(spec.Model(), 3, n, func(v Verdict) {
		if v.Drop {
			run0++
			lostTotal++
			return
		}
		if run0 > 0 {
			bursts++
			run0 = 0
		}
	})
	within(t, "mean burst", float64(lostTotal)/float64(bursts), 4, 0.1)
	within(t, "loss rate", float64(st.Lost)/n, 0.01/0.26, 0.1)
	if st.GEBad != st.Lost {
		t.Errorf("%d frames in the bad state, %d lost: with 1-H 100%% and 1-K 0 they are the same", st.GEBad, st.Lost)
	}
}

// TestDeterminism: a seed reproduces the decisions; another seed does not;
// turning on the newer impairments leaves the fixed draws' decisions alone.
func TestDeterminism(t *testing.T) {
	spec, _ := Parse("loss 5% delay 1ms 500us duplicate 5% hold 5% 1ms")
	record := func(m Model, seed uint64) []Verdict {
		var vs []Verdict
		run(m, seed, 2000, func(v Verdict) { vs = append(vs, v) })
		return vs
	}
	a, b, c := record(spec.Model(), 1), record(spec.Model(), 1), record(spec.Model(), 2)
	same := func(x, y []Verdict) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, different decisions")
	}
	if same(a, c) {
		t.Error("seeds 1 and 2 decided alike")
	}
	// Reseed repeats the decisions and keeps the counts.
	s := NewStage(spec.Model(), 1, 0)
	for i := range 2000 {
		s.Decide(1000)
		if i == 999 {
			s.Reseed(1, 0)
		}
	}
	if st := s.Stats(); st.Frames != 2000 {
		t.Errorf("after Reseed, %d frames counted, want 2000", st.Frames)
	}
	s.Reseed(1, 0)
	for i := range 100 {
		if v := s.Decide(1000); v != a[i] {
			t.Fatalf("frame %d after Reseed: %+v, want %+v", i, v, a[i])
		}
	}
	more := spec
	more.CorruptPct = 10
	d := record(more.Model(), 1)
	for i := range a {
		x, y := a[i], d[i]
		y.CorruptBit = -1
		if x != y {
			t.Fatalf("frame %d: corruption changed the other decisions: %+v vs %+v", i, a[i], d[i])
		}
	}
}

// TestLegacyDraws pins the fixed draws to the fabric's historical ones:
// PCG(seed, StreamSalt+stream), five Float64 per frame.
func TestLegacyDraws(t *testing.T) {
	m := Model{Loss: 0.3, Duplicate: 0.3, Hold: 0.3, HoldTime: 7, DelaySpan: 1000}
	s := NewStage(m, 99, 1)
	ref := NewStage(Model{}, 99, 1).rng
	for i := range 1000 {
		loss, dup, hold, jit, cj := ref.Float64(), ref.Float64(), ref.Float64(), ref.Float64(), ref.Float64()
		v := s.Decide(100)
		if v.Drop != (loss < 0.3) {
			t.Fatalf("frame %d: drop %v with draw %v", i, v.Drop, loss)
		}
		if v.Drop {
			continue
		}
		want := uniform(jit, 1000)
		if hold < 0.3 {
			want += 7
		}
		if v.Delay != want || v.Dup != (dup < 0.3) || v.Dup && v.DupDelay != uniform(cj, 1000) {
			t.Fatalf("frame %d: %+v, draws %v %v %v %v", i, v, dup, hold, jit, cj)
		}
	}
}

func TestDecideAllocs(t *testing.T) {
	spec, _ := Parse("loss gemodel 1% 30% delay 100us 20us 5% reorder 2% 10% duplicate 1% 10% corrupt 1% 10% hold 1% 1ms")
	s := NewStage(spec.Model(), 1, 0)
	if n := testing.AllocsPerRun(1000, func() { s.Decide(1500) }); n != 0 {
		t.Errorf("Decide: %v allocations", n)
	}
}

// FuzzParse: whatever Parse accepts, String prints in words Parse reads
// back to the same Spec; whatever it refuses, it refuses in one line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"loss 1% delay 100us 20us reorder 2% duplicate 0.1% corrupt 0.01%",
		"limit 64 delay 1500ns 3us 12.5% loss gemodel 0.3% 40% 99.9% 0.001% gap 3 reorder 10% hold 1% 1ms seed 1",
		"latency 1ms drop 5 25", "loss random 1e-3", "delay .5ms", "hold 0% 5us", "loss gemodel 0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "netem: ") {
				t.Fatalf("Parse(%q): error %q", in, msg)
			}
			return
		}
		back, err := Parse(s.String())
		if err != nil || back != s {
			t.Fatalf("Parse(%q) = %+v, printed %q, read back %+v, %v", in, s, s.String(), back, err)
		}
	})
}
