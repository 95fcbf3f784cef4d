package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
)

// starSweepCmd is `softnic-sweep star` (`softnic sweep star`): StaR's
// Fig. 5a stress test or, with -fig 5b, its RPC test, on the embedded
// fabric, the stateful NIC (rdma) beside StaR's stateless server (star),
// with the paper's setup (internal/sweep/star.go).
func starSweepCmd(args []string) error {
	fs := flag.NewFlagSet("star", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for star-fig5a|5b.csv and .png")
	fig := fs.String("fig", "5a", "5a: 8-byte WRITEs, one outstanding per connection; 5b: RPCs, a 2.8 KB SEND request and a 1.4 KB SEND response")
	counts := fs.String("connections", "", "connection counts (default: the figure's)")
	modes := fs.String("modes", "rdma,star", "rdma (the stateful NIC), star (StaR's stateless server)")
	measure := fs.Duration("measure", 40*time.Millisecond, "measurement window per point (simulated), after a 20 ms warm-up")
	maxMsgs := fs.Uint64("max-msgs", 0, "end the measurement window after this many WRITEs or calls (the warm-up after half as many); default 200000 (5a), 100000 (5b)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	list, run, what := sweep.StarFig5aCounts, sweep.RunStarFig5a, "8-byte WRITEs, one outstanding per connection"
	limit := uint64(200000)
	switch *fig {
	case "5a":
	case "5b":
		list, run, what = sweep.StarFig5bCounts, sweep.RunStarFig5b, "RPCs: a 2.8 KB SEND request, a 1.4 KB SEND response (one in 16 signaled at the server), path MTU 2048"
		limit = 100000
	default:
		return usagef("star: -fig %q: want 5a or 5b", *fig)
	}
	if *maxMsgs != 0 {
		limit = *maxMsgs
	}
	if *counts != "" {
		ns, err := ints(*counts)
		if err != nil {
			return err
		}
		list = ns
	}
	fmt.Printf(" StaR Fig. %s on the embedded fabric, simulated time\n", *fig)
	fmt.Printf(" link 100 Gb/s, RTT 12 µs, no loss; server NIC %d B of contexts (300), clients unlimited; 1 µs per context fetch\n", sweep.StaRBudget)
	fmt.Printf(" %s\n", what)
	fmt.Printf(" %-5s %11s %12s %14s %15s %8s\n", "mode", "connections", "M/s", "server misses", "server on-chip", "wall")
	var ps []sweep.StarPoint
	for _, mode := range strings.Split(*modes, ",") {
		for _, n := range list {
			start := time.Now()
			p, err := run(strings.TrimSpace(mode), n, *measure, limit)
			if err != nil {
				return err
			}
			fmt.Printf(" %-5s %11d %12.3f %14d %13d B %8v\n", p.Mode, n, p.MsgRate/1e6, p.Misses, p.OnChipPeak, time.Since(start).Round(time.Millisecond))
			ps = append(ps, p)
		}
	}
	csvPath, err := sweep.SaveStarCSV(*out, *fig, ps)
	if err != nil {
		return err
	}
	pngPath, err := sweepplot.Star(*out, *fig, ps)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, " wrote", csvPath, pngPath)
	return nil
}

// plotStarCmd is `softnic-sweep plot-star`: star-fig5a|5b.png from its CSV.
func plotStarCmd(args []string) error {
	fs := flag.NewFlagSet("plot-star", flag.ContinueOnError)
	in := fs.String("in", "results/star-fig5a.csv", "a CSV of softnic-sweep star (Fig. 5a or 5b)")
	out := fs.String("out", "results", "directory for the PNG")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	fig, ps, err := sweep.ReadStarCSV(f)
	if err != nil {
		return err
	}
	path, err := sweepplot.Star(*out, fig, ps)
	if err != nil {
		return err
	}
	fmt.Println(" wrote", path)
	return nil
}
