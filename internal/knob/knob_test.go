package knob

import (
	"strings"
	"testing"
	"time"
)

// TestRegistry: a declared knob reads its default until set; a setting
// is checked as it is made, and each wrong one is refused with one line
// that names what is wrong; String lists the settings in order.
func TestRegistry(t *testing.T) {
	r := NewRegistry("test", "part", "a.n=3", func() []string { return []string{"a", "b"} })
	n := r.Declare("a", "n", "2", "a number", Int(1, 9))
	d := r.Declare("a", "d", "1ms", "a time", Duration(time.Microsecond, time.Second))
	var set map[string]string
	if got := r.Value(n, set).(int); got != 2 {
		t.Fatalf("default %d", got)
	}
	if err := r.Set(&set, "a.n=7"); err != nil || r.Value(n, set).(int) != 7 {
		t.Fatalf("set: %v, %v", err, set)
	}
	if err := r.SetDefault(&set, "a.n=5"); err != nil || r.Value(n, set).(int) != 7 {
		t.Fatalf("a default over a setting: %v, %v", err, set)
	}
	if err := r.SetDefault(&set, "a.d=2ms"); err != nil || r.Value(d, set).(time.Duration) != 2*time.Millisecond {
		t.Fatalf("a default: %v, %v", err, set)
	}
	if got := String(set); got != "a.d=2ms,a.n=7" {
		t.Fatalf("String %q", got)
	}
	for arg, want := range map[string]string{
		"a.n=10": "out of range 1 to 9", "a.n=x": "not an integer", "a.x=1": "part a has no knob \"x\" (its knobs: d, n)",
		"b.n=1": "part b has no knobs", "c.n=1": "no part \"c\" (have a, b)", "n=1": "want part.knob=value, e.g. a.n=3",
		"a.d=1h": "out of range",
	} {
		err := r.Set(&set, arg)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", arg, err, want)
		}
	}
	if err := r.Check(map[string]string{"a.n": "3", "a.d": "x"}); err == nil || !strings.Contains(err.Error(), "a.d=x") {
		t.Errorf("Check: %v", err)
	}
	if ks := r.Knobs(); len(ks) != 2 || ks[0].Key() != "a.d" || ks[1].Key() != "a.n" {
		t.Errorf("Knobs %v", ks)
	}
}
