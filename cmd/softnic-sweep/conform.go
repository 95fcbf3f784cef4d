package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/softnic/softnic/internal/conform"
	"github.com/softnic/softnic/recovery"
)

const conformUsage = `usage: softnic-sweep conform [-scheme NAME|all] [-case NAME] [-json FILE] [-seed N] [-report]
       softnic-sweep conform -trace FILE [-json FILE]
       softnic-sweep conform -testbed [-scheme NAME|all] [-case NAME] [-reps N] [-reps-for SCHEMES:CASES=N]... [-timer-shift K] [-softnic BIN] [-keep-failed DIR] [-json FILE]

Runs the conformance suite on the embedded fabric: each case is one
workload on one QP through a switch that drops, ECN-marks or corrupts
exactly one packet (package dataplane/inject), judged per scheme against
IBA and docs/recovery.md. Prints one table per scheme (case, check,
pass/FAIL, what was measured) and the failed checks; a failed check is a
finding about the scheme and exits 0. -report adds each case's
micro-behaviour report (latencies at the switch). With -trace, analyses
a switch's trace file (JSON lines: conform.WriteTrace's format, softnic
switch --trace) and prints its report instead.

With -testbed (root), runs the suite on the two-host namespace testbed
(scripts/testbed.sh): per run, softnic switch with the case's rules and
a trace, two softnic daemons with the fabric's timers times 2^K, the
workload through package verbs; judged by the same checks (their
real-wire forms where the fabric's compares a latency with the wire
time), each case -reps times, beside the fabric's verdict and latencies
(docs/conform.md). -keep-failed DIR keeps each failing run's trace and
counters, to read why.

Cases: `

// conformCmd is `softnic-sweep conform`.
func conformCmd(args []string) error {
	fs := flag.NewFlagSet("sweep conform", flag.ContinueOnError)
	var names []string
	for _, c := range conform.Cases() {
		names = append(names, c.Name)
	}
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), conformUsage+strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	scheme := fs.String("scheme", "all", "recovery scheme, or all: "+strings.Join(recovery.Names(), ", "))
	caseName := fs.String("case", "", "run only this case (default: every case)")
	jsonOut := fs.String("json", "", "also write the results (or the trace's report) as JSON to this file")
	seed := fs.Uint64("seed", 1, "the fabric's and the data's seed")
	report := fs.Bool("report", false, "print each case's micro-behaviour report too")
	trace := fs.String("trace", "", "analyse this trace file instead of running the suite")
	testbed := fs.Bool("testbed", false, "run the suite on the namespace testbed (root) beside the fabric's")
	reps := fs.Int("reps", 20, "with -testbed: runs of each scheme and case")
	var more repsFor
	fs.Var(&more, "reps-for", "with -testbed: SCHEMES:CASES=N runs for those (comma lists or all; repeatable, the last that matches wins)")
	shift := fs.Uint("timer-shift", 5, "with -testbed: the fabric's timers (ACK timeout, RTO_low, RTO_high, NAK interval) times 2^K on the daemons; 0 is the fabric's own")
	softnicBin := fs.String("softnic", "", "with -testbed: the softnic binary (default: beside this program, on $PATH, or built with go build)")
	keep := fs.String("keep-failed", "", "with -testbed: write each run that fails a check to this directory: its switch trace (read it with -trace) and its failed checks and NIC counters (JSON)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("conform: unexpected argument %q", fs.Arg(0))
	}
	if *trace != "" {
		return conformTrace(*trace, *jsonOut, os.Stdout)
	}
	opt := conform.SuiteOptions{Case: *caseName, Seed: *seed}
	if *scheme != "all" {
		if !slices.Contains(recovery.Names(), *scheme) {
			return usagef("conform: unknown scheme %q (want all or one of %s)", *scheme, strings.Join(recovery.Names(), ", "))
		}
		opt.Schemes = []string{*scheme}
	}
	if *caseName != "" && !slices.Contains(names, *caseName) {
		return usagef("conform: unknown case %q (want one of %s)", *caseName, strings.Join(names, ", "))
	}
	if *testbed {
		if *reps < 1 || *shift > 16 {
			return usagef("conform: -reps %d, -timer-shift %d: want 1 or more, and at most 16", *reps, *shift)
		}
		return conformTestbed(opt.Schemes, *caseName, *reps, more, *shift, *softnicBin, *keep, *jsonOut, *seed)
	}
	res, err := conform.RunSuite(opt)
	if err != nil {
		return err
	}
	if *report {
		for _, s := range res.Schemes {
			for _, c := range s.Cases {
				fmt.Printf("\n %s, %s: %s\n", s.Scheme, c.Case, c.Doc)
				if err := c.Report.WriteTable(os.Stdout); err != nil {
					return err
				}
			}
		}
	}
	if err := res.WriteTables(os.Stdout); err != nil {
		return err
	}
	if *jsonOut != "" {
		return writeJSONFile(*jsonOut, res.WriteJSON)
	}
	return nil
}

// conformTrace prints the report of a trace file.
func conformTrace(path, jsonOut string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	records, events, err := conform.ReadTrace(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep := conform.Analyze(records, events, conform.Options{})
	if err := rep.WriteTable(w); err != nil {
		return err
	}
	if jsonOut != "" {
		return writeJSONFile(jsonOut, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		})
	}
	return nil
}

func writeJSONFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
