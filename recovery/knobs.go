package recovery

import (
	"time"

	"strconv"

	"github.com/softnic/softnic/internal/knob"
)

// Knob is one of a scheme's own parameters, which users set by name as
// scheme.knob=value: `softnic run --scheme-param melo.pool_bits=2048`,
// `softnic-bench --embedded --scheme-param ...`, `softnic-sweep loss
// -scheme-param ...`, and Go callers in Params.Knobs. A scheme declares
// its knobs in its own file with IntKnob or DurationKnob, which return
// the function the scheme reads the value with when it is built; New
// checks every value first, so a wrong one is an error before anything
// runs. Its Owner is the scheme. (Package internal/knob holds the
// machinery, which congestion control's knobs share.)
type Knob = knob.Knob

// knobs are the schemes' knobs.
var knobs = knob.NewRegistry("recovery", "scheme", "melo.pool_bits=2048", Names)

// IntKnob declares scheme's knob name, an integer from lo to hi, def
// when not set, and returns what reads it from the scheme's Params.
func IntKnob(scheme, name string, def, lo, hi int, help string) func(Params) int {
	k := knobs.Declare(scheme, name, strconv.Itoa(def), help, knob.Int(lo, hi))
	return func(p Params) int { return knobs.Value(k, p.Knobs).(int) }
}

// DurationKnob declares scheme's knob name, a duration from lo to hi in
// Go's notation (1.2us, 500µs, 2ms), def when not set, and returns what
// reads it from the scheme's Params.
func DurationKnob(scheme, name string, def, lo, hi time.Duration, help string) func(Params) time.Duration {
	k := knobs.Declare(scheme, name, def.String(), help, knob.Duration(lo, hi))
	return func(p Params) time.Duration { return knobs.Value(k, p.Knobs).(time.Duration) }
}

// Knobs are every declared knob, sorted by Key.
func Knobs() []Knob { return knobs.Knobs() }

// KnobValues are knob settings by Key (melo.pool_bits), each value as
// users write it (2048); a knob not set has its default. It is a
// flag.Value: each Set adds one scheme.knob=value, so a flag of it may be
// repeated.
type KnobValues map[string]string

// Set sets one knob from "scheme.knob=value" once it has checked it; the
// error is one line that says what is wrong.
func (v *KnobValues) Set(arg string) error { return knobs.Set((*map[string]string)(v), arg) }

// SetDefault is Set for a knob not set yet; one set already keeps its
// value. (A config file under the command line: cmd/softnic.)
func (v *KnobValues) SetDefault(arg string) error {
	return knobs.SetDefault((*map[string]string)(v), arg)
}

// String is the settings, scheme.knob=value, sorted and comma-separated.
func (v KnobValues) String() string { return knob.String(v) }

// Check says what is wrong with the first wrong setting, in knob order:
// a knob no scheme declared or a value its knob does not take.
func (v KnobValues) Check() error { return knobs.Check(v) }
