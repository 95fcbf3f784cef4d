package cc

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Knob is one of an algorithm's own parameters, which users set by name
// as algorithm.knob=value (dcqcn.rai=40Mbit), the way recovery's scheme
// knobs are set. An algorithm declares its knobs in its own file with
// IntKnob, DurationKnob, RateKnob or FloatKnob, which return the function
// it reads the value with when it is built; New checks every value first,
// so a wrong one is an error before anything runs.
type Knob struct {
	// Algorithm is the algorithm that owns the knob, Name the knob's own
	// name (lower case, words joined by '_').
	Algorithm, Name string
	// Help says what the knob sets, in a few words, and where its default
	// comes from.
	Help string
	// Default is the value when the knob is not set, as users write it.
	Default string

	parse func(string) (any, error)
}

// Key is the knob's name as users write it: algorithm.name.
func (k Knob) Key() string { return k.Algorithm + "." + k.Name }

// Check says why value is not one the knob takes, in a few words; nil
// when it is.
func (k Knob) Check(value string) error {
	_, err := k.parse(value)
	return err
}

// value is the knob's value in p: the one set, else the default.
func (k *Knob) value(p Params) any {
	s, ok := p.Knobs[k.Key()]
	if !ok {
		s = k.Default
	}
	v, err := k.parse(s)
	if err != nil { // New checked p.Knobs
		panic(fmt.Sprintf("cc: %s=%s: %v", k.Key(), s, err))
	}
	return v
}

var knobs = map[string]*Knob{}

// declareKnob adds k to the knobs users can set; it panics on a duplicate
// or on a default k does not take (programming errors at init time).
func declareKnob(k Knob) *Knob {
	if strings.ContainsAny(k.Algorithm, ".=") || strings.ContainsAny(k.Name, ".=") || k.Algorithm == "" || k.Name == "" {
		panic("cc: bad knob name " + k.Key())
	}
	if _, dup := knobs[k.Key()]; dup {
		panic("cc: knob declared twice: " + k.Key())
	}
	if err := k.Check(k.Default); err != nil {
		panic(fmt.Sprintf("cc: knob %s: default %s: %v", k.Key(), k.Default, err))
	}
	knobs[k.Key()] = &k
	return &k
}

// IntKnob declares algorithm's knob name, an integer from lo to hi, def
// when not set, and returns what reads it from the algorithm's Params.
func IntKnob(algorithm, name string, def, lo, hi int, help string) func(Params) int {
	k := declareKnob(Knob{Algorithm: algorithm, Name: name, Help: help, Default: strconv.Itoa(def),
		parse: func(s string) (any, error) {
			v, err := strconv.Atoi(s)
			if err != nil {
				return nil, errors.New("not an integer")
			}
			if v < lo || v > hi {
				return nil, fmt.Errorf("out of range %d to %d", lo, hi)
			}
			return v, nil
		}})
	return func(p Params) int { return k.value(p).(int) }
}

// DurationKnob declares algorithm's knob name, a duration from lo to hi
// in Go's notation (1.2us, 500µs, 2ms), def when not set, and returns
// what reads it from the algorithm's Params.
func DurationKnob(algorithm, name string, def, lo, hi time.Duration, help string) func(Params) time.Duration {
	k := declareKnob(Knob{Algorithm: algorithm, Name: name, Help: help, Default: def.String(),
		parse: func(s string) (any, error) {
			v, err := time.ParseDuration(s)
			if err != nil {
				return nil, errors.New("not a duration (e.g. 1.2us, 2ms)")
			}
			if v < lo || v > hi {
				return nil, fmt.Errorf("out of range %v to %v", lo, hi)
			}
			return v, nil
		}})
	return func(p Params) time.Duration { return k.value(p).(time.Duration) }
}

// RateKnob declares algorithm's knob name, a bit rate from lo to hi bit/s
// in tc's decimal units as softnic's --link-rate takes them (bit, kbit,
// mbit, gbit, tbit, any case: 40Mbit, 2.5gbit, or plain bit/s), def when
// not set, and returns what reads it, in bit/s, from the algorithm's
// Params.
func RateKnob(algorithm, name string, def, lo, hi uint64, help string) func(Params) uint64 {
	k := declareKnob(Knob{Algorithm: algorithm, Name: name, Help: help, Default: FormatRate(def),
		parse: func(s string) (any, error) {
			v, err := ParseRate(s)
			if err != nil {
				return nil, err
			}
			if v < lo || v > hi {
				return nil, fmt.Errorf("out of range %s to %s", FormatRate(lo), FormatRate(hi))
			}
			return v, nil
		}})
	return func(p Params) uint64 { return k.value(p).(uint64) }
}

// FloatKnob declares algorithm's knob name, a real number from lo to hi
// written as a decimal (0.8, 3.9e-3) or a fraction (1/256, as papers write
// gains), def when not set (as users would write it), and returns what
// reads it from the algorithm's Params.
func FloatKnob(algorithm, name, def string, lo, hi float64, help string) func(Params) float64 {
	k := declareKnob(Knob{Algorithm: algorithm, Name: name, Help: help, Default: def,
		parse: func(s string) (any, error) {
			v, err := parseFloat(s)
			if err != nil {
				return nil, err
			}
			if v < lo || v > hi {
				return nil, fmt.Errorf("out of range %g to %g", lo, hi)
			}
			return v, nil
		}})
	return func(p Params) float64 { return k.value(p).(float64) }
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
func Knobs() []Knob {
	out := make([]Knob, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// KnobValues are knob settings by Key (dcqcn.rai), each value as users
// write it (40Mbit); a knob not set has its default. It is a flag.Value:
// each Set adds one algorithm.knob=value, so a flag of it may be
// repeated.
type KnobValues map[string]string

// Set sets one knob from "algorithm.knob=value" once it has checked it;
// the error is one line that says what is wrong.
func (v *KnobValues) Set(arg string) error {
	key, value, err := splitKnob(arg)
	if err != nil {
		return err
	}
	if *v == nil {
		*v = KnobValues{}
	}
	(*v)[key] = value
	return nil
}

// SetDefault is Set for a knob not set yet; one set already keeps its
// value (a config file under the command line).
func (v *KnobValues) SetDefault(arg string) error {
	key, _, err := splitKnob(arg)
	if err != nil {
		return err
	}
	if _, set := (*v)[key]; set {
		return nil
	}
	return v.Set(arg)
}

// String is the settings, algorithm.knob=value, sorted and
// comma-separated.
func (v KnobValues) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + v[k]
	}
	return strings.Join(keys, ",")
}

// Check says what is wrong with the first wrong setting, in knob order:
// a knob no algorithm declared or a value its knob does not take.
func (v KnobValues) Check() error {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, _, err := splitKnob(k + "=" + v[k]); err != nil {
			return err
		}
	}
	return nil
}

// splitKnob parses and checks "algorithm.knob=value".
func splitKnob(arg string) (key, value string, err error) {
	key, value, ok := strings.Cut(arg, "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	alg, name, dotted := strings.Cut(key, ".")
	if !ok || !dotted || alg == "" || name == "" {
		return "", "", fmt.Errorf("%q: want algorithm.knob=value, e.g. dcqcn.rai=40Mbit", arg)
	}
	k := knobs[key]
	if k == nil {
		if _, registered := registry[alg]; !registered {
			return "", "", fmt.Errorf("%s: no algorithm %q (have %s)", key, alg, strings.Join(Names(), ", "))
		}
		var have []string
		for _, k := range Knobs() {
			if k.Algorithm == alg {
				have = append(have, k.Name)
			}
		}
		if len(have) == 0 {
			return "", "", fmt.Errorf("%s: algorithm %s has no knobs", key, alg)
		}
		return "", "", fmt.Errorf("%s: algorithm %s has no knob %q (its knobs: %s)", key, alg, name, strings.Join(have, ", "))
	}
	if err := k.Check(value); err != nil {
		return "", "", fmt.Errorf("%s=%s: %v", key, value, err)
	}
	return key, value, nil
}
