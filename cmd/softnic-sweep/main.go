// Command softnic-sweep runs softnic's parameter sweeps on the embedded
// fabric and draws their figures:
//
//	softnic-sweep qps        StaR's QP-scalability stress test (CSV + PNG)
//	softnic-sweep loss       goodput against loss rate, every scheme (CSV + PNG)
//	softnic-sweep schemes    the registered recovery schemes, one a line
//	softnic-sweep plot-loss  the loss figure from a CSV (the testbed's runs, or loss.csv)
//	softnic-sweep plot-qps   the QP figures from a CSV (the testbed's runs, or qps.csv)
//
// It is a command of its own, not a part of the daemon, because the
// figures are drawn with gonum/plot: the daemon (cmd/softnic) links no
// plotting code, and `softnic sweep ...` runs this command when it is
// installed beside it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// lossTitle is the loss figure's title.
const lossTitle = "RDMA WRITE goodput under random loss (both directions)"

func main() {
	os.Exit(exitStatus(sweepCmd(os.Args[1:]), os.Stderr))
}

// errUsage is a command line the flag package rejected; it printed why.
var errUsage = errors.New("usage")

// usageError is a bad command line the flag package let through.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitStatus reports a command's error on stderr and returns the exit
// status, as softnic's: 0 for none (or -h), 2 for a bad command line, 1
// for a failure.
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "softnic-sweep:", strings.TrimSpace(err.Error()))
		return 2
	default:
		fmt.Fprintln(stderr, "softnic-sweep:", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
		return 1
	}
}

// parseFlags parses args into fs: flag.ErrHelp for -h, errUsage for
// anything else the flag package rejected.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errUsage
}
