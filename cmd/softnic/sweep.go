package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// sweepCommand is the command that runs the sweeps and draws their
// figures. It is not built into the daemon: the figures are drawn with
// gonum/plot, which the daemon does not link (TestNoPlottingInDaemon).
const sweepCommand = "softnic-sweep"

// sweepCmd is `softnic sweep ARGS`: it runs `softnic-sweep ARGS` in this
// process's place, the softnic-sweep beside this executable or else the
// one on PATH.
func sweepCmd(args []string) error {
	path, err := findSweep()
	if err != nil {
		return err
	}
	if err := syscall.Exec(path, append([]string{path}, args...), os.Environ()); err != nil {
		return fmt.Errorf("sweep: %s: %w", path, err)
	}
	return nil // not reached: the process is softnic-sweep now
}

// errNoSweep says where the sweeps went when softnic-sweep is not found.
var errNoSweep = errors.New("sweep: the sweeps and their plots are the softnic-sweep command, not found beside softnic or on PATH: run it with 'go run ./cmd/softnic-sweep ARGS' in the source tree, or install it beside softnic ('go build -o DIR ./cmd/softnic-sweep')")

// findSweep returns the softnic-sweep beside this executable, else the one
// on PATH.
func findSweep() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), sweepCommand)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(sweepCommand); err == nil {
		return p, nil
	}
	return "", errNoSweep
}
