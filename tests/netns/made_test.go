package netns

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// recordTB records what RequireMade asks of a test instead of ending one.
type recordTB struct {
	testing.TB
	skipped, fatal string
}

func (r *recordTB) Helper()                           {}
func (r *recordTB) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }
func (r *recordTB) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// TestRequireMade: a missing file skips with a message naming the file
// and what makes it, fails instead under SOFTNIC_REQUIRE_PRIVILEGED=1,
// and a present one does neither.
func TestRequireMade(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "rxe.cpio.gz")
	const how = "scripts/rxe-vm.sh image"

	t.Setenv("SOFTNIC_REQUIRE_PRIVILEGED", "")
	r := &recordTB{TB: t}
	RequireMade(r, missing, how)
	if !strings.HasPrefix(r.skipped, "skipping: needs "+missing+" (made by "+how+")") || r.fatal != "" {
		t.Errorf("missing file: skipped %q, fatal %q", r.skipped, r.fatal)
	}

	t.Setenv("SOFTNIC_REQUIRE_PRIVILEGED", "1")
	r = &recordTB{TB: t}
	RequireMade(r, missing, how)
	// (A real test ends at Fatalf; this one goes on to the Skip after it.)
	if !strings.Contains(r.fatal, missing+" (made by "+how+")") || !strings.Contains(r.fatal, "SOFTNIC_REQUIRE_PRIVILEGED=1") {
		t.Errorf("missing file, strict: skipped %q, fatal %q", r.skipped, r.fatal)
	}

	r = &recordTB{TB: t}
	RequireMade(r, dir, how)
	if r.skipped != "" || r.fatal != "" {
		t.Errorf("present file: skipped %q, fatal %q", r.skipped, r.fatal)
	}
}
