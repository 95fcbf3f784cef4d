package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

const sweepUsage = `usage: softnic-sweep <command> [flags] (softnic-sweep <command> -h for its flags)
  qps        StaR's QP-scalability stress test on the embedded fabric (CSV + PNG);
             -budget fasr for FaSR's 1.4 MB of on-chip QP state
  loss       goodput against loss rate, every scheme, embedded fabric (CSV + PNG)
  star       StaR Fig. 5a: the stateful NIC vs StaR's stateless server, 1-5000
             connections, embedded fabric (CSV + PNG)
  incast     N-1 hosts' write_bw into one through a switch, DCQCN+ECN+PFC and
             none, embedded twin of scripts/testbed-incast.sh (table, CSV rows)
  paper      a paper's figure with the paper's own workload (softnic-sweep paper
             lists the presets)
  conform    the conformance suite: one packet dropped, marked or corrupted per
             case, every scheme judged against IBA and docs/recovery.md
  schemes    print the registered recovery schemes, one a line (for scripts)
  plot-loss  combine and plot a loss CSV: the testbed's runs
             (scripts/sweep-loss.sh) or a loss.csv written before
  plot-star  plot a StaR Fig. 5a CSV (star-fig5a.csv)
  plot-irn   plot an IRN preset's CSV (irn-fig1.csv, ...; -incast for irn-fig9.csv)
  plot-qps   plot a QP CSV: the testbed's runs (scripts/sweep-qps.sh) or a
             qps.csv written before`

func sweepCmd(args []string) error {
	if len(args) == 0 {
		return usagef("no command\n%s", sweepUsage)
	}
	switch args[0] {
	case "loss":
		return lossSweepCmd(args[1:])
	case "qps":
		return qpSweepCmd(args[1:])
	case "star":
		return starSweepCmd(args[1:])
	case "paper":
		return paperCmd(args[1:])
	case "conform":
		return conformCmd(args[1:])
	case "incast":
		return incastCmd(args[1:], os.Stdout)
	case "plot-star":
		return plotStarCmd(args[1:])
	case "plot-irn":
		return plotIRNCmd(args[1:])
	case "schemes":
		for _, n := range recovery.Names() {
			fmt.Println(n)
		}
		return nil
	case "plot-loss":
		return plotLossCmd(args[1:])
	case "plot-qps":
		return plotQPsCmd(args[1:])
	case "-h", "--help", "help":
		fmt.Println(sweepUsage)
		return nil
	}
	return usagef("unknown command %q\n%s", args[0], sweepUsage)
}

// qpSweepCmd is `softnic-sweep qps`: the StaR stress test on the embedded
// fabric for every scheme, size, loss and QP count.
func qpSweepCmd(args []string) error {
	fs := flag.NewFlagSet("sweep qps", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for the CSV and the PNG plots")
	prefix := fs.String("prefix", "qps", `file names: <prefix>.csv, <prefix>_msgrate_<size>B.png, <prefix>_sr_bytes.png (default "qps_fasr" with -budget fasr)`)
	schemes := fs.String("schemes", strings.Join(sweepSchemes(), ","), "recovery schemes (default: every registered one but gbn-st and gbn-ce)")
	qpList := fs.String("qps", "1,2,4,8,16,32,64,128,200,256,290,300,400,512,1000,2000,5000", "QP counts")
	sizes := fs.String("sizes", "8,8192", "WRITE sizes: 8 (StaR's stress test) and 8192 (bulk)")
	losses := fs.String("loss", "0,1", "loss percentages, both directions")
	budget := fs.String("budget", "star", fmt.Sprintf("on-chip SRAM preset: star (%d B: 300 contexts of 256 B, StaR's CX4-like RNIC) or fasr (%d B: FaSR §V-A, 1.4 MB of its 3.2 MB SRAM for QP contexts); -sram overrides it", sweep.StaRBudget, sweep.FaSRBudget))
	sram := fs.Int("sram", qp.DefaultCacheBudget, "on-chip SRAM per NIC, bytes (0 = unlimited; default: the -budget preset)")
	penalty := fs.Duration("fetch-penalty", qp.DefaultFetchPenalty, "context-cache miss stall")
	measure := fs.Duration("measure", 40*time.Millisecond, "measurement window per point (simulated), after a 20 ms warm-up")
	nics := fs.String("nics", "server", "which NICs -sram budgets: server (B alone; the clients, A, stand for separate machines, StaR §4) or both")
	rtoMode := fs.String("rto", "adaptive", "the schemes' timeouts: fixed (IRN's 100/320 µs for the selective schemes, the ACK timeout for go-back-N) or adaptive (the same rules applied to each QP's measured round trip, which past the knee is milliseconds); both with backoff")
	oneTimeout := fs.Bool("one-timeout", false, "the sweep before issue 14: both NICs budgeted and every scheme's RTO the QPs' 16.8 ms ACK timeout, no backoff (overrides -nics)")
	rttOffChip := fs.Bool("rtt-offchip", false, "with -rto adaptive, leave each QP's 16-byte round-trip estimate out of its on-chip context (the papers' NICs keep none; FaSR §V-A's SRNIC context is 256 + 12 B)")
	maxMsgs := fs.Uint64("max-msgs", 200000, "lossless points: end the measurement window after this many messages (the warm-up after half as many); 0: never. Lossy points always run the whole windows")
	var knobs recovery.KnobValues
	fs.Var(&knobs, "scheme-param", schemeParamUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	rto, err := dataplane.ParseRTOMode(*rtoMode)
	if err != nil {
		return usagef("sweep qps: -rto: %v", err)
	}
	if *nics != "server" && *nics != "both" {
		return usagef("sweep qps: -nics %q: want server or both", *nics)
	}
	preset, ok := sweep.Budgets[*budget]
	if !ok {
		return fmt.Errorf("sweep qps: -budget %q: want star or fasr", *budget)
	}
	if !set["sram"] {
		*sram = preset
	}
	if !set["prefix"] && *budget == "fasr" {
		*prefix = "qps_fasr"
	}
	ns, err := ints(*qpList)
	if err != nil {
		return err
	}
	ss, err := ints(*sizes)
	if err != nil {
		return err
	}
	var ls []float64
	for _, f := range strings.Split(*losses, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("sweep: loss %q: %v", f, err)
		}
		ls = append(ls, v/100)
	}
	fmt.Printf(" QP scalability sweep (StaR stress test) on the embedded fabric, simulated time\n")
	budgeted, timeouts := "the server's NIC (B)", "each scheme's own, with backoff"
	if *nics == "both" || *oneTimeout {
		budgeted = "each NIC"
	}
	if *oneTimeout {
		timeouts = fmt.Sprintf("%v for every scheme, no backoff", sweepTimeout)
	}
	fmt.Printf(" link 100 Gb/s, RTT 12 µs; SRAM %d B for %s (-budget %s), %d-byte base context, miss stall %v; timeouts %s\n", *sram, budgeted, *budget, qp.DefaultQPContextBytes, *penalty, timeouts)
	fmt.Printf(" %-6s %6s %6s %6s %12s %9s %8s %9s %9s %8s\n", "scheme", "size", "loss%", "QPs", "msgs/s", "Gb/s", "hit", "SR bytes", "measured", "wall")
	var rs []sweep.QPResult
	for _, scheme := range strings.Split(*schemes, ",") {
		for _, size := range ss {
			for _, loss := range ls {
				for _, n := range ns {
					var limit uint64
					if loss == 0 {
						limit = *maxMsgs
					}
					c := sweep.QPConfig{Scheme: strings.TrimSpace(scheme), QPs: n, Size: size, Loss: loss, SRAM: *sram,
						Penalty: *penalty, Link: sweep.DefaultQPLink, Warmup: 20 * time.Millisecond, Measure: *measure, MaxMessages: limit, Seed: uint64(n),
						// StaR's clients are separate machines (§4): the
						// server's NIC alone is budgeted, unless -nics both.
						ServerSRAMOnly: *nics == "server",
						// Each scheme's own timeouts (IRN's 100/320 µs
						// RTO_low/RTO_high for the selective ones, the QPs'
						// ACK timeout for go-back-N), doubled after each
						// timeout without progress: past the cache's knee a
						// QP waits milliseconds for its turn in the NIC, and
						// fixed RTOs of 100 µs fired again and again until
						// the retries ran out (found by this sweep).
						RTOBackoff: true, RTO: rto, RTTOffChip: *rttOffChip}
					if rto == dataplane.RTOAdaptive {
						// Until its first round trip is measured a QP
						// waits the ACK timeout, as RFC 6298 (§2.1)
						// starts conservatively: 5000 QPs posting at once
						// wait milliseconds for their first turn in a
						// thrashing NIC.
						c.Params = recovery.Params{RTOLow: sweepTimeout, RTOHigh: sweepTimeout}
					}
					if *oneTimeout {
						c.ServerSRAMOnly, c.RTOBackoff, c.RTO = false, false, dataplane.RTOFixed
						c.Params = recovery.Params{RTOLow: sweepTimeout, RTOHigh: sweepTimeout}
					}
					c.Params.Knobs = knobs
					r, err := sweep.RunQPs(c)
					if err != nil {
						return err
					}
					fmt.Printf(" %-6s %6d %6g %6d %12.0f %9.3f %8.3f %9d %9d %8v\n", r.Scheme, size, loss*100, n, r.MsgRate, r.GoodputGbps, r.HitRate, r.SRBytes, r.Messages, r.Wall.Round(time.Millisecond))
					rs = append(rs, r)
				}
			}
		}
	}
	csvPath, err := sweep.SaveQPs(*out, *prefix, rs)
	if err != nil {
		return err
	}
	files, err := sweepplot.QPs(*out, *prefix, fmt.Sprintf("embedded, SRAM %d B", *sram), rs)
	fmt.Println(" wrote", strings.Join(append([]string{csvPath}, files...), " "))
	return err
}

// The loss sweep's retransmission timeouts, IRN's rule (§4.1) applied to
// the embedded link: RTO_high about twice the longest round trip with one
// congested link (2 µs each way plus a full 64-frame transmit ring of
// 1 KiB frames at 25 Gb/s each way: about 50 µs), RTO_low half of it. IRN's
// own 100/320 µs are that rule on its 40 Gb/s three-tier fabric.
const (
	embeddedRTOLow  = 50 * time.Microsecond
	embeddedRTOHigh = 100 * time.Microsecond
)

// schemeParamUsage is the loss and QP sweeps' -scheme-param.
const schemeParamUsage = "a scheme's own `knob` on both NICs, scheme.knob=value, e.g. melo.pool_bits=2048; repeat it for more (softnic run --help lists them)"

// sweepTimeout is the ACK timeout of the QP sweep's QPs (code 12).
const sweepTimeout = 16777216 * time.Nanosecond

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("sweep: %q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// lossSweepCmd runs write_bw for every scheme at every loss rate on the
// embedded fabric (simulated time) and plots goodput relative to each
// scheme's lossless run.
func lossSweepCmd(args []string) error {
	fs := flag.NewFlagSet("sweep loss", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for loss.csv and loss.png")
	schemes := fs.String("schemes", strings.Join(sweepSchemes(), ","), "recovery schemes (default: every registered one but gbn-st and gbn-ce)")
	losses := fs.String("loss", "0,0.01,0.1,0.5,1,2,5", "loss percentages, both directions")
	size := fs.Int("s", 65536, "WRITE size")
	iters := fs.Int("n", 3000, "WRITEs per point")
	depth := fs.Int("t", 128, "tx depth")
	mtu := fs.Int("m", 1024, "path MTU")
	rate := fs.Float64("rate", perftest.DefaultLink.RateBps/1e9, "link rate, Gb/s")
	delay := fs.Duration("delay", perftest.DefaultLink.Delay, "one-way delay")
	rtoLow := fs.Duration("rto-low", embeddedRTOLow, "selective schemes' RTO_low (IRN's 100µs is for its 40 Gb/s fabric; see docs/results.md)")
	rtoHigh := fs.Duration("rto-high", embeddedRTOHigh, "selective schemes' RTO_high: about twice the longest round trip of this link")
	pcapPath := fs.String("pcap", "", "write a pcap of every frame the writer's NIC sends and receives to this `file` (one point only: one scheme, one loss)")
	var knobs recovery.KnobValues
	fs.Var(&knobs, "scheme-param", schemeParamUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var pcapOut *os.File
	if *pcapPath != "" {
		if strings.Contains(*schemes, ",") || strings.Contains(*losses, ",") {
			return usagef("loss: -pcap takes one point: one -schemes, one -loss")
		}
		f, err := os.Create(*pcapPath)
		if err != nil {
			return err
		}
		defer f.Close()
		pcapOut = f
	}
	m, err := qp.MTUFromBytes(*mtu)
	if err != nil {
		return err
	}
	link := perftest.DefaultLink
	link.RateBps, link.Delay = *rate*1e9, *delay
	fmt.Printf(" loss sweep on the embedded fabric, simulated time: %.0f Gb/s, one-way %v, TX ring %d, MTU %d, %d x %d B, depth %d, RTO %v/%v\n",
		*rate, *delay, link.Ring, *mtu, *iters, *size, *depth, *rtoLow, *rtoHigh)
	fmt.Printf(" %-6s %7s %9s %9s %12s %9s %8s\n", "scheme", "loss%", "Gb/s", "relative", "retransmits", "timeouts", "CPU")
	var rs []sweep.LossResult
	for _, scheme := range strings.Split(*schemes, ",") {
		var base float64
		for _, f := range strings.Split(*losses, ",") {
			pct, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("sweep: loss %q: %v", f, err)
			}
			c := sweep.LossConfig{Scheme: strings.TrimSpace(scheme), Loss: pct / 100, Size: *size, Iters: *iters,
				TxDepth: *depth, MTU: m, Link: link, Seed: 1, Params: recovery.Params{RTOLow: *rtoLow, RTOHigh: *rtoHigh, Knobs: knobs}}
			if pcapOut != nil {
				c.Pcap = pcapOut
			}
			r, err := sweep.RunLoss(c)
			if err != nil {
				return err
			}
			if pct == 0 {
				base = r.Gbps
			}
			rel := 0.0
			if base > 0 {
				rel = r.Gbps / base
			}
			fmt.Printf(" %-6s %7g %9.3f %9.3f %12d %9d %8v\n", r.Scheme, pct, r.Gbps, rel, r.Retransmits, r.Timeouts, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	sweep.Relativize(rs)
	csvPath, err := sweep.SaveLoss(*out, rs)
	if err != nil {
		return err
	}
	if pcapOut != nil {
		fmt.Println(" wrote", csvPath, *pcapPath, "(one point: no plot)")
		return nil
	}
	png := filepath.Join(*out, "loss.png")
	if err := sweepplot.Loss(png, lossTitle, rs); err != nil {
		return err
	}
	fmt.Println(" wrote", csvPath, png)
	return nil
}

// plotLossCmd is `softnic-sweep plot-loss`: it reads runs in loss.csv's
// columns (the testbed's, from scripts/sweep-loss.sh), merges repeated
// runs of a point by their median, writes the merged rows in loss.csv's
// columns and draws the loss plot.
func plotLossCmd(args []string) error {
	fs := flag.NewFlagSet("sweep plot-loss", flag.ContinueOnError)
	in := fs.String("in", "", "CSV of runs: loss.csv's columns by header name, extra columns ignored, only status=ok rows if it has a status column (required)")
	csvOut := fs.String("csv", "", "write the merged rows here, in loss.csv's columns")
	out := fs.String("out", "", "PNG to draw (required)")
	title := fs.String("title", lossTitle, "plot title")
	paperCols := fs.Bool("paper-columns", false, "write -csv with the paper presets' columns first: scheme, loss, relative (then loss.csv's others)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return usagef("sweep plot-loss: -in and -out are required")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	runs, err := sweep.ReadLossCSV(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if len(runs) == 0 {
		return fmt.Errorf("sweep plot-loss: %s has no successful runs", *in)
	}
	rs, spread := sweep.CombineLoss(runs)
	fmt.Printf(" %-6s %7s %9s %9s %12s %9s %5s %17s\n", "scheme", "loss%", "Gb/s", "relative", "retransmits", "timeouts", "runs", "range Gb/s")
	based := map[string]bool{}
	for _, r := range rs {
		if r.Loss == 0 && r.Gbps > 0 {
			based[r.Scheme] = true
		}
	}
	for i, r := range rs {
		rng := ""
		if spread[i].Runs > 1 {
			rng = fmt.Sprintf("%.3f-%.3f", spread[i].Min, spread[i].Max)
		}
		rel := fmt.Sprintf("%9.3f", r.Relative)
		if !based[r.Scheme] {
			rel = fmt.Sprintf("%9s", "n/a") // no successful lossless run
		}
		fmt.Printf(" %-6s %7g %9.3f %s %12d %9d %5d %17s\n", r.Scheme, r.Loss*100, r.Gbps, rel, r.Retransmits, r.Timeouts, spread[i].Runs, rng)
	}
	for _, r := range rs {
		if !based[r.Scheme] {
			fmt.Printf(" %s: no successful lossless run, so no relative goodput (left out of the plot)\n", r.Scheme)
			based[r.Scheme] = true // once
		}
	}
	if *csvOut != "" {
		write, rows := sweep.WriteLossCSV, rs
		if *paperCols {
			// By scheme, then loss, as the paper presets' CSVs are, however
			// the runs were ordered (sweep-loss.sh interleaves a paper's).
			write, rows = sweep.WritePaperLossCSV, sweep.SortLossByScheme(rs)
		}
		if err := writeFile(*csvOut, func(w *os.File) error { return write(w, rows) }); err != nil {
			return err
		}
	}
	if err := sweepplot.Loss(*out, *title, rs); err != nil {
		return err
	}
	fmt.Println(" wrote", strings.TrimSpace(*csvOut+" "+*out))
	return nil
}

// plotQPsCmd is `softnic-sweep plot-qps`: it reads runs in qps.csv's
// columns (the testbed's, from scripts/sweep-qps.sh, or a qps.csv),
// writes them in qps.csv's columns if asked (-csv) and draws the QP
// sweep's plots.
func plotQPsCmd(args []string) error {
	fs := flag.NewFlagSet("sweep plot-qps", flag.ContinueOnError)
	in := fs.String("in", "", "CSV of runs: qps.csv's columns by header name, extra columns ignored, only status=ok rows if it has a status column; an empty sr_bytes is computed from the scheme (required)")
	out := fs.String("out", "results", "directory for the plots")
	prefix := fs.String("prefix", "testbed-qps", "file names: <prefix>_msgrate_<size>B.png, <prefix>_sr_bytes.png")
	csvOut := fs.String("csv", "", "write the rows here, in qps.csv's columns")
	note := fs.String("note", "", "appended to the plots' titles")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" {
		return usagef("sweep plot-qps: -in is required")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	rs, err := sweep.ReadQPCSV(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if len(rs) == 0 {
		return fmt.Errorf("sweep plot-qps: %s has no successful runs", *in)
	}
	if *csvOut != "" {
		if err := writeFile(*csvOut, func(w *os.File) error { return sweep.WriteQPCSV(w, rs) }); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	files, err := sweepplot.QPs(*out, *prefix, *note, rs)
	if err != nil {
		return err
	}
	fmt.Println(" wrote", strings.TrimSpace(strings.Join(append(files, *csvOut), " ")))
	return nil
}

// writeFile creates path and writes it with fill.
func writeFile(path string, fill func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sweepSchemes are the loss and QP sweeps' default schemes: every
// registered one but Improved go-back-N's two halves on their own (gbn-st,
// gbn-ce), an ablation its paper preset draws (paper igbn-fig6) and that
// adds nothing to these sweeps beside gbn and igbn.
func sweepSchemes() []string {
	var ns []string
	for _, n := range recovery.Names() {
		if n != recovery.GBNST && n != recovery.GBNCE {
			ns = append(ns, n)
		}
	}
	return ns
}
