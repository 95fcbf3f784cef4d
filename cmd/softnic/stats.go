package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/softnic/softnic/verbs"
)

// counter is one named value of a snapshot.
type counter struct {
	name  string
	value uint64
}

// statsCmd prints a running daemon's counters, one `name value` per line
// in the order rdma-core's `rdma statistic show` would: the engine's (rxe
// hw_counters names first), then the port's (port_*) and the XDP
// program's (xdp_*). It asks over the verbs control socket.
func statsCmd(args []string) error {
	flags := flag.NewFlagSet("stats", flag.ContinueOnError)
	socket := flags.String("socket", defaultSocket, "control socket of the daemon")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usagef("stats: unexpected argument %q", flags.Arg(0))
	}
	counters, err := queryStats(*socket)
	if err != nil {
		return err // one line: Dial says why
	}
	w := bufio.NewWriter(os.Stdout)
	for _, c := range counters {
		fmt.Fprintf(w, "%s %d\n", c.Name, c.Value)
	}
	return w.Flush()
}

func queryStats(socket string) ([]verbs.Counter, error) {
	ctx, err := verbs.Dial(socket)
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	return ctx.Stats()
}
