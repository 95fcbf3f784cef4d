// Package depcheck lets a test state what its package must not link:
// layering rules that hold because a test fails when they break.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// Forbid fails t for every package that the package in the test's
// directory depends on (go list -deps) and bad reports; it skips when
// the go command is not there.
func Forbid(t testing.TB, bad func(pkg string) bool) {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gotool, "list", "-deps", ".").Output()
	if err != nil {
		t.Skip("go list:", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if bad(p) {
			t.Errorf("depends on %s", p)
		}
	}
}
