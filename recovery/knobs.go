package recovery

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Knob is one of a scheme's own parameters, which users set by name as
// scheme.knob=value: `softnic run --scheme-param melo.pool_bits=2048`,
// `softnic-bench --embedded --scheme-param ...`, `softnic-sweep loss
// -scheme-param ...`, and Go callers in Params.Knobs. A scheme declares
// its knobs in its own file with IntKnob or DurationKnob, which return
// the function the scheme reads the value with when it is built; New
// checks every value first, so a wrong one is an error before anything
// runs.
type Knob struct {
	// Scheme is the scheme that owns the knob, Name the knob's own name
	// (lower case, words joined by '_').
	Scheme, Name string
	// Help says what the knob sets, in a few words.
	Help string
	// Default is the value when the knob is not set, as users write it.
	Default string

	parse func(string) (any, error)
}

// Key is the knob's name as users write it: scheme.name.
func (k Knob) Key() string { return k.Scheme + "." + k.Name }

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
		panic(fmt.Sprintf("recovery: %s=%s: %v", k.Key(), s, err))
	}
	return v
}

var knobs = map[string]*Knob{}

// declareKnob adds k to the knobs users can set; it panics on a
// duplicate or on a default k does not take (programming errors at init
// time).
func declareKnob(k Knob) *Knob {
	if strings.ContainsAny(k.Scheme, ".=") || strings.ContainsAny(k.Name, ".=") || k.Scheme == "" || k.Name == "" {
		panic("recovery: bad knob name " + k.Key())
	}
	if _, dup := knobs[k.Key()]; dup {
		panic("recovery: knob declared twice: " + k.Key())
	}
	if err := k.Check(k.Default); err != nil {
		panic(fmt.Sprintf("recovery: knob %s: default %s: %v", k.Key(), k.Default, err))
	}
	knobs[k.Key()] = &k
	return &k
}

// IntKnob declares scheme's knob name, an integer from lo to hi, def
// when not set, and returns what reads it from the scheme's Params.
func IntKnob(scheme, name string, def, lo, hi int, help string) func(Params) int {
	k := declareKnob(Knob{Scheme: scheme, Name: name, Help: help, Default: strconv.Itoa(def),
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

// DurationKnob declares scheme's knob name, a duration from lo to hi in
// Go's notation (1.2us, 500µs, 2ms), def when not set, and returns what
// reads it from the scheme's Params.
func DurationKnob(scheme, name string, def, lo, hi time.Duration, help string) func(Params) time.Duration {
	k := declareKnob(Knob{Scheme: scheme, Name: name, Help: help, Default: def.String(),
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

// Knobs are every declared knob, sorted by Key.
func Knobs() []Knob {
	out := make([]Knob, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// KnobValues are knob settings by Key (melo.pool_bits), each value as
// users write it (2048); a knob not set has its default. It is a
// flag.Value: each Set adds one scheme.knob=value, so a flag of it may be
// repeated.
type KnobValues map[string]string

// Set sets one knob from "scheme.knob=value" once it has checked it; the
// error is one line that says what is wrong.
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
// value. (A config file under the command line: cmd/softnic.)
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

// String is the settings, scheme.knob=value, sorted and comma-separated.
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
// a knob no scheme declared or a value its knob does not take.
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

// splitKnob parses and checks "scheme.knob=value".
func splitKnob(arg string) (key, value string, err error) {
	key, value, ok := strings.Cut(arg, "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	scheme, name, dotted := strings.Cut(key, ".")
	if !ok || !dotted || scheme == "" || name == "" {
		return "", "", fmt.Errorf("%q: want scheme.knob=value, e.g. melo.pool_bits=2048", arg)
	}
	k := knobs[key]
	if k == nil {
		if _, registered := registry[scheme]; !registered {
			return "", "", fmt.Errorf("%s: no scheme %q (have %s)", key, scheme, strings.Join(Names(), ", "))
		}
		var have []string
		for _, k := range Knobs() {
			if k.Scheme == scheme {
				have = append(have, k.Name)
			}
		}
		if len(have) == 0 {
			return "", "", fmt.Errorf("%s: scheme %s has no knobs", key, scheme)
		}
		return "", "", fmt.Errorf("%s: scheme %s has no knob %q (its knobs: %s)", key, scheme, name, strings.Join(have, ", "))
	}
	if err := k.Check(value); err != nil {
		return "", "", fmt.Errorf("%s=%s: %v", key, value, err)
	}
	return key, value, nil
}
