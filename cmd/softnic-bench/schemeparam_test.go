package main

import (
	"strings"
	"testing"
)

// TestSchemeParamFlag: --scheme-param sets a scheme knob of both embedded
// NICs; a knob no scheme has, or the flag against a daemon, is a usage
// error that says so.
func TestSchemeParamFlag(t *testing.T) {
	o, err := parseArgs([]string{"write_bw", "--embedded", "--scheme", "melo", "--scheme-param", "melo.pool_bits=16", "--scheme-param", "fasr.units=2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.knobs.String(); got != "fasr.units=2,melo.pool_bits=16" {
		t.Errorf("knobs %s", got)
	}
	if code, out, errOut := bench(t, "write_bw", "--embedded", "--scheme", "melo", "--scheme-param", "melo.pool_bits=8", "-n", "100", "--loss", "1"); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "--embedded", "--scheme-param", "melo.pool=8"}, `scheme melo has no knob "pool"`},
		{[]string{"write_bw", "--embedded", "--scheme-param", "melo.pool_bits=x"}, "melo.pool_bits=x: not an integer"},
		{[]string{"write_bw", "--scheme-param", "melo.pool_bits=8", "192.0.2.1"}, "use it with --embedded"},
	} {
		if code, _, errOut := bench(t, tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
