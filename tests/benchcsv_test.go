package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/tests/netns"
)

// fakeBench stands in for softnic-bench: it appends a row to its --csv
// file, as a real server does with the client's rows (both sides print
// the same table).
const fakeBench = `#!/bin/sh
csv=
while [ $# -gt 0 ]; do
	case "$1" in
	--csv) csv=$2; shift ;;
	--csv=*) csv=${1#--csv=} ;;
	esac
	shift
done
[ -z "$csv" ] || echo row >>"$csv"
`

// TestScriptsWriteCSVOnce: the scripts' bench helpers (scripts/lib.sh for
// demo.sh and figures.sh, scripts/sweep-lib.sh for the sweeps) run the
// server and the client with the same arguments but give --csv to the
// client only, so every row is written once (sweep-lib.sh gave it to
// both: every row twice). No testbed: ip netns exec runs the command here.
func TestScriptsWriteCSVOnce(t *testing.T) {
	bash := netns.RequireTool(t, "bash")
	netns.RequireTool(t, "timeout") // sweep-lib.sh's bench
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lib, call string }{
		{"scripts/lib.sh", "bench"},
		{"scripts/sweep-lib.sh", "bench 30"},
	} {
		for _, form := range []string{`--csv "$csv"`, `--csv="$csv"`} {
			work := t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "softnic-bench"), []byte(fakeBench), 0o755); err != nil {
				t.Fatal(err)
			}
			csv := filepath.Join(t.TempDir(), "rows.csv")
			script := `set -euo pipefail
me=test
source ` + c.lib + `
tb=/nonexistent # the EXIT trap's testbed teardown must find nothing to tear down
rmdir "$work" 2>/dev/null || true # lib.sh made one
work=$WORK
csv=$CSV
ip() { shift 3; "$@"; } # ip netns exec NS CMD...: CMD here
sleep() { :; }
` + c.call + ` write_bw -s 8 ` + form + ` 198.18.1.1
`
			cmd := exec.Command(bash, "-c", script)
			cmd.Dir = repo
			cmd.Env = append(os.Environ(), "WORK="+work, "CSV="+csv, "SOFTNIC_NS_PREFIX=sncsvtest")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", c.lib, form, err, out)
			}
			b, err := os.ReadFile(csv)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), "row\n"); n != 1 {
				t.Errorf("%s, %s: %d rows written, want 1", c.lib, form, n)
			}
		}
	}
}
