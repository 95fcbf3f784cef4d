// Command softnic-bench is perftest for softnic: the bandwidth and latency
// tests of ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw,
// ib_write_lat, ib_read_lat and ib_send_lat, with perftest's flags and
// tables, between two softnic daemons (the server waits, the client names
// it) or, with --embedded, between two NICs inside this process on the
// in-memory fabric. The raw test sends RoCEv2-looking frames through the
// AF_XDP port with no transport at all, for the path's own limit.
//
// Both modes run the same measurement code (package internal/perftest):
// post work requests, poll the completion queue, time with the wall clock.
// Only where the NIC lives differs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/softnic/softnic/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal ends the run (cleanly, for --run_infinitely); a
	// second one kills the process as if it were not handled.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it returns the exit status, 2 for a bad
// command line and 1 for a failed run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usageText)
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintln(stdout, "softnic-bench", buildinfo.Read())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic-bench: %v\nRun 'softnic-bench -h' for usage.\n", err)
		return 2
	}
	if o.test == rawTest {
		err = runRaw(ctx, o, stdout)
	} else {
		err = runVerbs(ctx, o, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic-bench: %v\n", err)
		return 1
	}
	return 0
}
