package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/qp"
)

// incastCmd is `softnic-sweep incast`: the embedded twin of
// scripts/testbed-incast.sh. N-1 hosts run write_bw into the last one
// through a switch on a star, each scheme with DCQCN, ECN and PFC on and
// with all three off, at the link rate the testbed uses; it prints a
// table and writes rows of docs/results/testbed-incast.csv.
func incastCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sweep incast", flag.ContinueOnError)
	hosts := fs.Int("hosts", 4, "hosts on the switch: hosts-1 senders into the last")
	rateMbps := fs.Int("rate-mbps", 1000, "every link's rate, Mbit/s (the testbed's softnic switch --rate and daemons' --link-rate)")
	delay := fs.Duration("delay", 10*time.Microsecond, "every link's one-way delay")
	schemes := fs.String("schemes", "gbn,irn,fasr", "recovery schemes")
	ccs := fs.String("modes", "dcqcn+pfc,none", "modes: dcqcn+pfc (DCQCN, ECN marking and PFC on) and none (all three off); also timely+pfc, dcqcn, none+pfc")
	size := fs.Int("s", 65536, "write_bw message size, bytes")
	depth := fs.Int("t", 128, "write_bw WRITEs outstanding per sender (perftest's default, as the testbed's softnic-bench)")
	warm := fs.Duration("warmup", 20*time.Millisecond, "simulated time before goodput is counted")
	measure := fs.Duration("measure", 100*time.Millisecond, "simulated time goodput is counted over")
	seed := fs.Uint64("seed", 1, "seed of the switch's marking draws")
	var knobs cc.KnobValues
	fs.Var(&knobs, "cc-param", "a congestion-control knob, algorithm.knob=value (repeatable; docs/cc.md), as the daemons' --cc-param")
	out := fs.String("csv", "", "append rows to this CSV (header written when the file is new); - for standard output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hosts < 2 || *rateMbps <= 0 {
		return usagef("incast: need -hosts >= 2 and -rate-mbps > 0")
	}
	link := fabric.LinkParams{RateBps: uint64(*rateMbps) * 1e6, Delay: *delay}
	var rs []sweep.SteadyIncastResult
	fmt.Fprintf(stdout, " %d hosts (%d:1), %d Mbit/s, %v per link, write_bw -s %d -t %d, %v measured after %v\n", *hosts, *hosts-1, *rateMbps, *delay, *size, *depth, *measure, *warm)
	fmt.Fprintf(stdout, " %-6s %-6s %-3s %-30s %5s %7s %7s %7s %7s %9s %6s\n", "scheme", "cc", "pfc", "goodput Gb/s per flow", "jain", "drops", "pauses", "cnps", "ecn", "q p99 B", "wall")
	for _, mode := range strings.Split(*ccs, ",") {
		cc, pfc, ok := strings.Cut(mode, "+")
		if ok && pfc != "pfc" || cc != "none" && cc != "dcqcn" && cc != "timely" {
			return usagef("incast: mode %q: want CC or CC+pfc, CC one of none, dcqcn, timely", mode)
		}
		for _, sch := range strings.Split(*schemes, ",") {
			c := sweep.SteadyIncastConfig{Hosts: *hosts, Scheme: sch, CC: cc, Link: link, Size: *size, TxDepth: *depth,
				Warmup: *warm, Measure: *measure, Seed: *seed, CCKnobs: knobs,
				Switch: sweep.SteadyIncastSwitch(link.RateBps, link.Delay, ok, cc != "none")}
			r, err := sweep.RunSteadyIncast(c)
			if err != nil {
				return err
			}
			var per []string
			for _, f := range r.Flows {
				g := fmt.Sprintf("%.3f", f.Gbps)
				if f.Status != qp.WCSuccess {
					g += "!" // the QP failed: the note below
				}
				per = append(per, g)
			}
			fmt.Fprintf(stdout, " %-6s %-6s %-3s %-30s %5.3f %7d %7d %7d %7d %9d %6v\n", sch, cc, sweep.PFCName(ok), strings.Join(per, " "), r.Jain,
				r.Drops, r.Pauses, r.CNPs, r.ECNMarks, r.QueueP99Bytes, r.Wall.Round(time.Millisecond))
			for _, f := range r.Flows {
				if f.Status != qp.WCSuccess {
					fmt.Fprintf(stdout, "   ! %s's QP failed with %v and stopped (perftest would exit)\n", sweep.HostLetter(f.Src), f.Status)
				}
			}
			rs = append(rs, r)
		}
	}
	switch *out {
	case "":
		return nil
	case "-":
		return sweep.WriteSteadyIncastCSV(stdout, rs, true)
	}
	_, statErr := os.Stat(*out)
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := sweep.WriteSteadyIncastCSV(f, rs, statErr != nil); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
