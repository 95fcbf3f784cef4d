package cc

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/knob"
)

// Knob is one of an algorithm's own parameters, which users set by name
// as algorithm.knob=value (dcqcn.rai=40Mbit), the way recovery's scheme
// knobs are set (the machinery is package internal/knob's, shared with
// them). An algorithm declares its knobs in its own file with IntKnob,
// DurationKnob, RateKnob or FloatKnob, which return the function it reads
// the value with when it is built; New checks every value first, so a
// wrong one is an error before anything runs. Its Owner is the
// algorithm.
type Knob = knob.Knob

// knobs are the algorithms' knobs.
var knobs = knob.NewRegistry("cc", "algorithm", "dcqcn.rai=40Mbit", Names)

// IntKnob declares algorithm's knob name, an integer from lo to hi, def
// when not set, and returns what reads it from the algorithm's Params.
func IntKnob(algorithm, name string, def, lo, hi int, help string) func(Params) int {
	k := knobs.Declare(algorithm, name, strconv.Itoa(def), help, knob.Int(lo, hi))
	return func(p Params) int { return knobs.Value(k, p.Knobs).(int) }
}

// DurationKnob declares algorithm's knob name, a duration from lo to hi
// in Go's notation (1.2us, 500µs, 2ms), def when not set, and returns
// what reads it from the algorithm's Params.
func DurationKnob(algorithm, name string, def, lo, hi time.Duration, help string) func(Params) time.Duration {
	k := knobs.Declare(algorithm, name, def.String(), help, knob.Duration(lo, hi))
	return func(p Params) time.Duration { return knobs.Value(k, p.Knobs).(time.Duration) }
}

// RateKnob declares algorithm's knob name, a bit rate from lo to hi bit/s
// in tc's decimal units as softnic's --link-rate takes them (bit, kbit,
// mbit, gbit, tbit, any case: 40Mbit, 2.5gbit, or plain bit/s), def when
// not set, and returns what reads it, in bit/s, from the algorithm's
// Params.
func RateKnob(algorithm, name string, def, lo, hi uint64, help string) func(Params) uint64 {
	k := knobs.Declare(algorithm, name, FormatRate(def), help, func(s string) (any, error) {
		v, err := ParseRate(s)
		if err != nil {
			return nil, err
		}
		if v < lo || v > hi {
			return nil, fmt.Errorf("out of range %s to %s", FormatRate(lo), FormatRate(hi))
		}
		return v, nil
	})
	return func(p Params) uint64 { return knobs.Value(k, p.Knobs).(uint64) }
}

// FloatKnob declares algorithm's knob name, a real number from lo to hi
// written as a decimal (0.8, 3.9e-3) or a fraction (1/256, as papers write
// gains), def when not set (as users would write it), and returns what
// reads it from the algorithm's Params.
func FloatKnob(algorithm, name, def string, lo, hi float64, help string) func(Params) float64 {
	k := knobs.Declare(algorithm, name, def, help, func(s string) (any, error) {
		v, err := parseFloat(s)
		if err != nil {
			return nil, err
		}
		if v < lo || v > hi {
			return nil, fmt.Errorf("out of range %g to %g", lo, hi)
		}
		return v, nil
	})
	return func(p Params) float64 { return knobs.Value(k, p.Knobs).(float64) }
}

// parseFloat reads a decimal or a fraction of two decimals.
func parseFloat(s string) (float64, error) {
	errFloat := errors.New("not a number (e.g. 0.8, 1/256)")
	num, den, frac := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, errFloat
	}
	if !frac {
		return n, nil
	}
	d, err := strconv.ParseFloat(strings.TrimSpace(den), 64)
	if err != nil || math.IsNaN(d) || math.IsInf(d, 0) || d == 0 {
		return 0, errFloat
	}
	return n / d, nil
}

// maxRate is 1 Pbit/s, dataplane's limit for a link rate.
const maxRate = 1e15

var rateUnits = []struct {
	suffix string
	mult   float64
}{ // longest suffix first: "kbit" before "bit"
	{"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}, {"bit", 1},
}

var errRate = errors.New("want a rate such as 40Mbit, 2.5Gbit or 1e9 (units bit, kbit, mbit, gbit, tbit)")

// ParseRate reads a tc-style bit rate (40Mbit, 2.5gbit, 1e9) in bit/s, as
// softnic's --link-rate does; like it, it refuses tc's bps, which is bytes
// per second.
func ParseRate(s string) (uint64, error) {
	num, mult := strings.TrimSpace(s), 1.0
	lower := strings.ToLower(num)
	if strings.HasSuffix(lower, "bps") {
		return 0, fmt.Errorf("%q: bps is ambiguous (tc reads bytes/s); %w", s, errRate)
	}
	for _, u := range rateUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = num[:len(num)-len(u.suffix)], u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%q: %w", s, errRate)
	}
	v := math.Round(f * mult)
	if v > maxRate {
		return 0, fmt.Errorf("%q: above 1 Pbit/s", s)
	}
	return uint64(v), nil
}

// FormatRate writes a bit rate as ParseRate reads it, in the largest unit
// that divides it (40Mbit, 2500Mbit, 7bit).
func FormatRate(v uint64) string {
	for _, u := range []struct {
		name string
		mult uint64
	}{{"Tbit", 1e12}, {"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}} {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatUint(v/u.mult, 10) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "bit"
}

// Knobs are every declared knob, sorted by Key.
func Knobs() []Knob { return knobs.Knobs() }

// KnobValues are knob settings by Key (dcqcn.rai), each value as users
// write it (40Mbit); a knob not set has its default. It is a flag.Value:
// each Set adds one algorithm.knob=value, so a flag of it may be
// repeated.
type KnobValues map[string]string

// Set sets one knob from "algorithm.knob=value" once it has checked it;
// the error is one line that says what is wrong.
func (v *KnobValues) Set(arg string) error { return knobs.Set((*map[string]string)(v), arg) }

// SetDefault is Set for a knob not set yet; one set already keeps its
// value (a config file under the command line).
func (v *KnobValues) SetDefault(arg string) error {
	return knobs.SetDefault((*map[string]string)(v), arg)
}

// String is the settings, algorithm.knob=value, sorted and
// comma-separated.
func (v KnobValues) String() string { return knob.String(v) }

// Check says what is wrong with the first wrong setting, in knob order:
// a knob no algorithm declared or a value its knob does not take.
func (v KnobValues) Check() error { return knobs.Check(v) }
