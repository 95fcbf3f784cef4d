package recovery

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKnobValuesSet: scheme.knob=value sets a knob once it is checked,
// and every mistake is one line that names it.
func TestKnobValuesSet(t *testing.T) {
	var v KnobValues
	for _, arg := range []string{"melo.pool_bits=2048", "fasr.units = 4", "melo.pool_bits=16"} {
		if err := v.Set(arg); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
	}
	if got := v.String(); got != "fasr.units=4,melo.pool_bits=16" {
		t.Errorf("String %q", got)
	}
	if err := v.SetDefault("melo.pool_bits=8"); err != nil || v["melo.pool_bits"] != "16" {
		t.Errorf("SetDefault over a knob set: %v, %q", err, v["melo.pool_bits"])
	}
	if err := v.SetDefault("fasr.blocks=7"); err != nil || v["fasr.blocks"] != "7" {
		t.Errorf("SetDefault of a knob not set: %v, %q", err, v["fasr.blocks"])
	}
	for arg, want := range map[string]string{
		"melo":                 `want scheme.knob=value`,
		"pool_bits=2048":       `want scheme.knob=value`,
		"melo.=1":              `want scheme.knob=value`,
		"nope.pool_bits=1":     `no scheme "nope" (have `,
		"melo.pool=1":          `scheme melo has no knob "pool" (its knobs: pool_bits)`,
		"igbn.x=1":             `scheme igbn has no knobs`,
		"gbn.window=70000":     `gbn.window=70000: out of range 0 to 65536`,
		"melo.pool_bits=lots":  `melo.pool_bits=lots: not an integer`,
		"melo.pool_bits=0":     `melo.pool_bits=0: out of range 8 to `,
		"fasr.block_bits=17":   `fasr.block_bits=17: out of range 1 to 16`,
		"fasr.block_bits=1e3":  `not an integer`,
		"melo.pool_bits=":      `melo.pool_bits=: not an integer`,
		"melo.pool_bits=-2048": `out of range`,
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

// TestNewChecksKnobs: New refuses knobs no scheme declared and values
// their knob does not take, whichever scheme it builds, and builds with
// the values set.
func TestNewChecksKnobs(t *testing.T) {
	for _, knobs := range []KnobValues{{"melo.pool_bit": "8"}, {"melo.pool_bits": "x"}, {"x.y": "1"}} {
		if _, err := New(GBN, Params{Knobs: knobs}); err == nil || !strings.HasPrefix(err.Error(), "recovery: ") {
			t.Errorf("%v: error %v", knobs, err)
		}
	}
	s, err := New(MELO, Params{Knobs: KnobValues{"melo.pool_bits": "20", "fasr.units": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Pools(); p[0].Slots != 3 || p[1].Slots != 3 { // 20 bits: three 8-bit blocks
		t.Errorf("melo.pool_bits=20: pools %+v", p)
	}
	if s, _ = New(MELO, Params{}); s.Pools()[0].Slots != DefaultMeloPoolBits/8 {
		t.Errorf("melo without knobs: pools %+v", s.Pools())
	}
}

// TestKnobsDeclared: every knob belongs to a registered scheme, is named
// as knobs are, says what it sets, and takes its default.
func TestKnobsDeclared(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, k := range Knobs() {
		switch {
		case !slices.Contains(Names(), k.Owner):
			t.Errorf("%s: no scheme %s", k.Key(), k.Owner)
		case !name.MatchString(k.Name):
			t.Errorf("%s: not lower case words joined by _", k.Key())
		case k.Help == "":
			t.Errorf("%s: no help", k.Key())
		case k.Check(k.Default) != nil:
			t.Errorf("%s: default %s: %v", k.Key(), k.Default, k.Check(k.Default))
		}
	}
}
