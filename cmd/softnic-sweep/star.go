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

// starSweepCmd is `softnic-sweep star` (`softnic sweep star`): StaR's Fig. 5a stress test on the
// embedded fabric, the stateful NIC (rdma) beside StaR's stateless server
// (star), with the paper's setup (internal/sweep/star.go).
func starSweepCmd(args []string) error {
	fs := flag.NewFlagSet("sweep star", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for star-fig5a.csv and star-fig5a.png")
	counts := fs.String("connections", joinInts(sweep.StarFig5aCounts), "connection counts")
	modes := fs.String("modes", "rdma,star", "rdma (the stateful NIC), star (StaR's stateless server)")
	measure := fs.Duration("measure", 40*time.Millisecond, "measurement window per point (simulated), after a 20 ms warm-up")
	maxMsgs := fs.Uint64("max-msgs", 200000, "end the measurement window after this many WRITEs (the warm-up after half as many); 0: never")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ns, err := ints(*counts)
	if err != nil {
		return err
	}
	fmt.Printf(" StaR Fig. 5a (stress test) on the embedded fabric, simulated time\n")
	fmt.Printf(" link 100 Gb/s, RTT 12 µs, no loss; server NIC %d B of contexts (300), clients unlimited; 1 µs per context fetch\n", sweep.StaRBudget)
	fmt.Printf(" 8-byte WRITEs, one outstanding per connection\n")
	fmt.Printf(" %-5s %11s %12s %14s %15s %8s\n", "mode", "connections", "Mops", "server misses", "server on-chip", "wall")
	var ps []sweep.StarPoint
	for _, mode := range strings.Split(*modes, ",") {
		for _, n := range ns {
			start := time.Now()
			p, err := sweep.RunStarFig5a(strings.TrimSpace(mode), n, *measure, *maxMsgs)
			if err != nil {
				return err
			}
			fmt.Printf(" %-5s %11d %12.2f %14d %13d B %8v\n", p.Mode, n, p.MsgRate/1e6, p.Misses, p.OnChipPeak, time.Since(start).Round(time.Millisecond))
			ps = append(ps, p)
		}
	}
	csvPath, err := sweep.SaveStarFig5aCSV(*out, ps)
	if err != nil {
		return err
	}
	pngPath, err := sweepplot.StarFig5a(*out, ps)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, " wrote", csvPath, pngPath)
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// plotStarCmd is `softnic-sweep plot-star`: star-fig5a.png from a CSV.
func plotStarCmd(args []string) error {
	fs := flag.NewFlagSet("plot-star", flag.ContinueOnError)
	in := fs.String("in", "results/star-fig5a.csv", "the CSV of softnic-sweep star")
	out := fs.String("out", "results", "directory for star-fig5a.png")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	ps, err := sweep.ReadStarFig5aCSV(f)
	if err != nil {
		return err
	}
	path, err := sweepplot.StarFig5a(*out, ps)
	if err != nil {
		return err
	}
	fmt.Println(" wrote", path)
	return nil
}
