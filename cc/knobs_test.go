package cc

import (
	"strings"
	"testing"
	"time"
)

// knobtest is an algorithm with one knob of each kind, for the knob
// tests: none's halves, and its knobs' values kept.
const knobtest = "knobtest"

var (
	ktCount = IntKnob(knobtest, "count", 5, 1, 31, "an integer")
	ktTimer = DurationKnob(knobtest, "timer", 55*time.Microsecond, time.Microsecond, time.Second, "a duration")
	ktRate  = RateKnob(knobtest, "rate", 40_000_000, 1, 1e12, "a rate")
	ktGain  = FloatKnob(knobtest, "g", "1/256", 0, 1, "a gain")
)

type knobtestAlgorithm struct {
	noneAlgorithm
	count int
	timer time.Duration
	rate  uint64
	g     float64
}

func init() {
	Register(knobtest, func(p Params) Algorithm {
		return knobtestAlgorithm{noneAlgorithm{p}, ktCount(p), ktTimer(p), ktRate(p), ktGain(p)}
	})
}

// TestKnobValuesSet: algorithm.knob=value sets a knob once it is checked,
// and every mistake is one line that names it.
func TestKnobValuesSet(t *testing.T) {
	var v KnobValues
	for _, arg := range []string{"knobtest.rate=2.5Gbit", "knobtest.g = 0.5", "knobtest.count=7"} {
		if err := v.Set(arg); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
	}
	if got := v.String(); got != "knobtest.count=7,knobtest.g=0.5,knobtest.rate=2.5Gbit" {
		t.Errorf("String %q", got)
	}
	if err := v.SetDefault("knobtest.count=9"); err != nil || v["knobtest.count"] != "7" {
		t.Errorf("SetDefault over a knob set: %v, %q", err, v["knobtest.count"])
	}
	if err := v.SetDefault("knobtest.timer=300us"); err != nil || v["knobtest.timer"] != "300us" {
		t.Errorf("SetDefault of a knob not set: %v, %q", err, v["knobtest.timer"])
	}
	for arg, want := range map[string]string{
		"knobtest":               `want algorithm.knob=value`,
		"count=1":                `want algorithm.knob=value`,
		"nope.count=1":           `no algorithm "nope" (have `,
		"knobtest.counts=1":      `algorithm knobtest has no knob "counts" (its knobs: count, g, rate, timer)`,
		"none.x=1":               `algorithm none has no knobs`,
		"knobtest.count=0":       `out of range 1 to 31`,
		"knobtest.count=five":    `not an integer`,
		"knobtest.timer=55":      `not a duration`,
		"knobtest.timer=2s":      `out of range 1µs to 1s`,
		"knobtest.rate=40Mbps":   `bps is ambiguous`,
		"knobtest.rate=fast":     `want a rate such as 40Mbit`,
		"knobtest.rate=0":        `out of range 1bit to 1Tbit`,
		"knobtest.rate=-1Mbit":   `want a rate`,
		"knobtest.g=1/0":         `not a number`,
		"knobtest.g=2":           `out of range 0 to 1`,
		"knobtest.g=x/256":       `not a number`,
		"knobtest.g=NaN":         `not a number`,
		"knobtest.count=":        `not an integer`,
		"knobtest.rate=2Pbit":    `want a rate`,
		"knobtest.rate=2000Tbit": `above 1 Pbit/s`,
	} {
		before := v.String()
		err := v.Set(arg)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", arg, err, want)
		}
		if v.String() != before {
			t.Errorf("%s: refused, yet set: %s", arg, v)
		}
	}
}

// TestKnobValues: an algorithm reads its knobs' defaults, and the values
// set, in their units.
func TestKnobValues(t *testing.T) {
	a, err := New(knobtest, Params{})
	if err != nil {
		t.Fatal(err)
	}
	if k := a.(knobtestAlgorithm); k.count != 5 || k.timer != 55*time.Microsecond || k.rate != 40_000_000 || k.g != 1.0/256 {
		t.Errorf("defaults: %+v", k)
	}
	if a.Params().LineRate != DefaultLineRate {
		t.Errorf("line rate %d", a.Params().LineRate)
	}
	v := KnobValues{}
	for _, arg := range []string{"knobtest.count=31", "knobtest.timer=1.5ms", "knobtest.rate=2.5gbit", "knobtest.g=3.9e-3"} {
		if err := v.Set(arg); err != nil {
			t.Fatal(err)
		}
	}
	a, err = New(knobtest, Params{LineRate: 10_000_000_000, Knobs: v})
	if err != nil {
		t.Fatal(err)
	}
	if k := a.(knobtestAlgorithm); k.count != 31 || k.timer != 1500*time.Microsecond || k.rate != 2_500_000_000 || k.g != 3.9e-3 {
		t.Errorf("set: %+v", k)
	}
	if a.Params().LineRate != 10_000_000_000 {
		t.Errorf("line rate %d", a.Params().LineRate)
	}
}

// TestNewChecksKnobs: New refuses knobs no algorithm declared and values
// their knob does not take, whichever algorithm it builds.
func TestNewChecksKnobs(t *testing.T) {
	for _, knobs := range []KnobValues{{"knobtest.cnt": "1"}, {"knobtest.count": "x"}, {"x.y": "1"}} {
		if _, err := New(None, Params{Knobs: knobs}); err == nil || !strings.HasPrefix(err.Error(), "cc: ") {
			t.Errorf("%v: error %v", knobs, err)
		}
	}
	if _, err := New("nope", Params{}); err == nil || !strings.Contains(err.Error(), `unknown algorithm "nope"`) {
		t.Errorf("unknown algorithm: %v", err)
	}
}

// TestKnobsListed: Knobs lists every knob sorted, with its default as
// users write it.
func TestKnobsListed(t *testing.T) {
	var keys []string
	for _, k := range Knobs() {
		keys = append(keys, k.Key()+"="+k.Default)
	}
	got := strings.Join(keys, " ")
	if !strings.Contains(got, "knobtest.count=5 knobtest.g=1/256 knobtest.rate=40Mbit knobtest.timer=55µs") {
		t.Errorf("Knobs: %s", got)
	}
}

// TestRateUnits: ParseRate and FormatRate agree on tc's units.
func TestRateUnits(t *testing.T) {
	for s, want := range map[string]uint64{"40Mbit": 40e6, "2.5GBIT": 2.5e9, "1e9": 1e9, "7bit": 7, "100kbit": 1e5, "1tbit": 1e12, " 3 mbit ": 3e6} {
		got, err := ParseRate(s)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for v, want := range map[uint64]string{40e6: "40Mbit", 2.5e9: "2500Mbit", 7: "7bit", 0: "0bit", 1e12: "1Tbit", 1500: "1500bit"} {
		if got := FormatRate(v); got != want {
			t.Errorf("FormatRate(%d) = %q, want %q", v, got, want)
		}
		if back, err := ParseRate(FormatRate(v)); err != nil || back != v {
			t.Errorf("ParseRate(FormatRate(%d)) = %d, %v", v, back, err)
		}
	}
}
