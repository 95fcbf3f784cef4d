package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/internal/depcheck"
	"github.com/softnic/softnic/tests/netns"
)

// TestNoPlottingInDaemon: the daemon's binary links no plotting code
// (gonum/plot and its fonts and image libraries are most of a 24 MB
// binary's weight); softnic-sweep draws the figures.
func TestNoPlottingInDaemon(t *testing.T) {
	depcheck.Forbid(t, func(p string) bool {
		return strings.HasPrefix(p, "gonum.org/") || strings.HasPrefix(p, "codeberg.org/go-") ||
			strings.HasPrefix(p, "git.sr.ht/~sbinet/") || strings.HasPrefix(p, "github.com/golang/freetype") ||
			p == "github.com/softnic/softnic/internal/sweepplot"
	})
}

// TestSweepRunsSoftnicSweep: `softnic sweep ARGS` runs softnic-sweep from
// PATH with ARGS in its place (exit status and output its own), and says
// where the sweeps are when there is none.
func TestSweepRunsSoftnicSweep(t *testing.T) {
	if os.Getenv("SOFTNIC_TEST_SWEEP_EXEC") == "1" {
		t.Skip("the helper process runs TestSweepExecHelper only")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >\"$SOFTNIC_TEST_SWEEP_OUT\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, sweepCommand), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	netns.RequireTool(t, "sh") // the stand-in softnic-sweep is a shell script
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepExecHelper$")
	cmd.Env = append(os.Environ(), "SOFTNIC_TEST_SWEEP_EXEC=1", "SOFTNIC_TEST_SWEEP_OUT="+out, "PATH="+dir+":/usr/bin:/bin")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit %v, want softnic-sweep's status 7", err)
	}
	got, err := os.ReadFile(out)
	if err != nil || string(got) != "loss -n 1 -out x\n" {
		t.Fatalf("softnic-sweep got %q (%v)", got, err)
	}

	t.Setenv("PATH", t.TempDir())
	if _, err := findSweep(); !errors.Is(err, errNoSweep) || !strings.Contains(err.Error(), "go run ./cmd/softnic-sweep") {
		t.Fatalf("without softnic-sweep: %v", err)
	}
}

// TestSweepExecHelper is the process TestSweepRunsSoftnicSweep starts.
func TestSweepExecHelper(t *testing.T) {
	if os.Getenv("SOFTNIC_TEST_SWEEP_EXEC") != "1" {
		t.Skip("run by TestSweepRunsSoftnicSweep")
	}
	err := sweepCmd([]string{"loss", "-n", "1", "-out", "x"})
	t.Fatalf("sweepCmd returned: %v", err)
}
