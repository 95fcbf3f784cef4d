package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
)

// IRN's (001) evaluation on the embedded fabric: Figs. 1-3 (no explicit
// congestion control), each configuration (scheme × PFC) run over the same
// seeded workloads.

// The run's size: IRN's fat tree and how long flows arrive. On this
// 2-core machine a 54-host run costs about 4-6 s of wall time per
// simulated millisecond of arrivals for irn and gbn with PFC, and far
// more for gbn without PFC (docs/results.md, "IRN Figs. 1-3").
const (
	irnFigK       = 6
	irnFigHorizon = 2 * time.Millisecond
	// irnFigDrain censors flows still open this long after the last
	// arrival: only gbn without PFC has any (go-back-N's collapse), and
	// its summaries are then lower bounds.
	irnFigDrain = 10 * time.Millisecond
)

var irnFigSeeds = []uint64{1, 2, 3}

func irnParams(cc string) []paperParam {
	pfc := sweep.IRNPFC()
	ps := []paperParam{
		{"topology", fmt.Sprintf("3-tier fat tree, k = %d (%d hosts, %d switches)", irnFigK, irnFigK*irnFigK*irnFigK/4, 5*irnFigK*irnFigK/4), "§4.1: k = 6, 54 servers, 45 switches"},
		{"links", "40 Gb/s, 2 µs each", "§4.1"},
		{"routing", "ECMP on the UDP source port", "§4.1: ECMP"},
		{"MTU", "1024 B", "§4.1: single-packet messages up to 1 KB"},
		{"buffer", fmt.Sprintf("%d B per input port", netsw.DefaultPortBytes), "§4.1: twice the BDP (240 KB)"},
		{"PFC", fmt.Sprintf("XOFF %d B, XON %d B, headroom %d B", pfc.XOFFBytes, pfc.XONBytes, pfc.HeadroomBytes), "§4.1: buffer minus the upstream link's BDP (220 KB); headroom netsw.HeadroomFor (BDP + pause + 2 frames), since IRN's round 20 KB overruns here; XON a choice"},
		{"workload", "Poisson arrivals per host, random destination, heavy-tailed sizes", "§4.1; sizes: 50% 32 B-1 KB uniform, 35% 1-200 KB and 15% 200 KB-3 MB log-uniform (the bands' insides are softnic's choice)"},
		{"load", "70% of host link capacity", "§4.1 default"},
		{"arrivals", fmt.Sprintf("over %v, then until every flow completes or %v more have passed (flows open then count with their FCT so far: lower bounds)", irnFigHorizon, irnFigDrain), "softnic: the wall time a 2-core machine allows; the paper does not give its duration"},
		{"seeds", fmt.Sprint(irnFigSeeds), "softnic"},
		{"QPs", "a flow per WRITE on an idle QP of its (src,dst) pool, new QPs on demand", "§4.1 QP per flow; pooled so that no flow waits behind another"},
		{"irn", fmt.Sprintf("RTO_low %v with N = %d, RTO_high %v, BDP-FC %d packets, ACK timeout code %d", sweep.IRNSchemeParams().RTOLow, sweep.IRNSchemeParams().RTOLowThreshold, sweep.IRNSchemeParams().RTOHigh, sweep.IRNSchemeParams().BDPPackets, sweep.IRNTimeoutCode), "§4.1 (the code only must not cut RTO_high)"},
		{"gbn (RoCE)", fmt.Sprintf("go-back-N, fixed ACK timeout code %d (262 µs)", sweep.GBNTimeoutCode), "§4.1: RoCE without PFC uses RTO_high, 320 µs, no code's value; 262 µs is the nearest"},
		{"with PFC", "ACK timeouts off (code 0)", "§4.1: timeouts disabled under PFC"},
		{"slowdown", "FCT / (the flow alone on its path: packets at line rate, store and forward, the last ACK back)", "§4.1 Metrics"},
	}
	switch cc {
	case "":
		ps = append(ps, paperParam{"congestion control", "none; flows start at line rate", "§4.2, Figs. 1-3"})
	default:
		ps = append(ps, paperParam{"congestion control", cc + " with cc's defaults (docs/cc.md), ECN marking netsw.DefaultECN (DCQCN's Kmin/Kmax/Pmax)", "§4.3: the parameters of [29] and [37]; flows start at line rate"})
	}
	return ps
}

func init() {
	registerPaper(paperPreset{
		Name: "irn-fig1", Paper: "IRN (001)", Figure: "Figs. 1-3",
		Summary: "average slowdown, average and 99th-percentile FCT for irn and gbn (RoCE), each with and without PFC, no congestion control, IRN's workload at 70% load in a fat tree",
		Params:  irnParams(""),
		Run: func(o paperOpts) error {
			return runIRNFig(o, irnFig{name: "irn-fig1", confs: irnFigConfs,
				title: "IRN Figs. 1-3 (embedded): fat tree k = %d, 40 Gb/s, 2 µs links, 70%% load, arrivals over %v, mean of %d seeds"})
		},
		TestbedNote: "fabric only: a 54-host fat tree with switches, PFC and ECN",
	})
	for _, cc := range []string{"dcqcn", "timely"} {
		registerPaper(paperPreset{
			Name: "irn-fig4-" + cc, Paper: "IRN (001)", Figure: "Figs. 4-6 (" + cc + ")",
			Summary: "Figs. 1-3's rows with " + cc + " on every QP (ECN marking at the switches)",
			Params:  irnParams(cc),
			Run: func(o paperOpts) error {
				return runIRNFig(o, irnFig{name: "irn-fig4-" + cc, confs: withCC(irnFigConfs, cc), title: "IRN with " + cc + " (embedded): " + irnFigTitle})
			},
			TestbedNote: "fabric only: a 54-host fat tree with switches, PFC and ECN",
		})
	}
	registerPaper(paperPreset{
		Name: "irn-fig7", Paper: "IRN (001)", Figure: "Fig. 7",
		Summary: "IRN's factor analysis: irn, irn with go-back-N loss recovery (BDP-FC kept) and irn without BDP-FC, no PFC, under each congestion control (none, timely, dcqcn), IRN's workload at 70% load in a fat tree",
		Params: append(irnParams("")[:len(irnParams(""))-1], // all but "congestion control", given below
			paperParam{"irn-gbn", fmt.Sprintf("go-back-N with gbn.window=%d (BDP-FC), fixed ACK timeout code %d", sweep.IRNSchemeParams().BDPPackets, sweep.GBNTimeoutCode), "§4.3: IRN with go-back-N instead of SACKs"},
			paperParam{"irn-nobdpfc", fmt.Sprintf("irn with a window (and bitmaps) of %d packets, above the workload's largest flow", sweep.IRNNoBDPFCPackets), "§4.3: IRN with BDP-FC disabled"},
			paperParam{"congestion control", "none, timely, dcqcn (each with cc's defaults, ECN marking with dcqcn and timely as in Figs. 4-6)", "§4.3: Fig. 7's three groups"}),
		Run:         runIRNFig7,
		TestbedNote: "fabric only: a 54-host fat tree with switches, PFC and ECN",
	})
}

// irnConf is one bar of an IRN figure: a scheme (or IRN variant) with
// or without PFC, with a congestion control ("": none).
type irnConf struct {
	scheme, variant string
	pfc             bool
	cc              string
}

// withCC is confs with congestion control cc.
func withCC(confs []irnConf, cc string) []irnConf {
	out := slices.Clone(confs)
	for i := range out {
		out[i].cc = cc
	}
	return out
}

// irnFig is one run of IRN presets' bars: its CSV and PNG name, its
// bars, its chart's title (a format of k, the horizon and the number of
// seeds), its arrivals and drain (0: irnFigHorizon, irnFigDrain), and
// the drain of its -quick run (0: the drain).
type irnFig struct {
	name                       string
	confs                      []irnConf
	title                      string
	horizon, drain, quickDrain time.Duration
}

// irnFigTitle is the title's common part.
const irnFigTitle = "fat tree k = %d, 70%% load, arrivals over %v, mean of %d seeds"

// irnFigConfs are Figs. 1-6's bars.
var irnFigConfs = []irnConf{{"irn", "", false, ""}, {"irn", "", true, ""}, {"gbn", "", true, ""}, {"gbn", "", false, ""}}

// irnFig7Confs are Fig. 7's: IRN and its two variants, without PFC.
var irnFig7Confs = []irnConf{{"irn", "", false, ""}, {"irn", sweep.IRNGoBackN, false, ""}, {"irn", sweep.IRNNoBDPFC, false, ""}}

func runIRNFig7(o paperOpts) error {
	for _, cc := range []string{"", "timely", "dcqcn"} {
		f := irnFig{name: "irn-fig7", confs: withCC(irnFig7Confs, cc), title: "IRN Fig. 7 (embedded), no congestion control: " + irnFigTitle}
		if cc != "" {
			f.name, f.title = f.name+"-"+cc, "IRN Fig. 7 (embedded), "+cc+": "+irnFigTitle
		}
		if err := runIRNFig(o, f); err != nil {
			return err
		}
		if o.Quick {
			break
		}
	}
	return nil
}

func runIRNFig(o paperOpts, f irnFig) error {
	k, horizon, drain, seeds := irnFigK, irnFigHorizon, irnFigDrain, irnFigSeeds
	if f.horizon != 0 {
		horizon, drain = f.horizon, f.drain
	}
	if o.Quick {
		k, horizon, seeds = 4, 50*time.Microsecond, seeds[:1]
		if f.quickDrain != 0 {
			drain = f.quickDrain
		}
	}
	fmt.Fprintf(o.Stdout, " fat tree k = %d, arrivals over %v\n %-11s %-6s %-3s %4s %6s %9s %10s %10s %8s %7s %6s %6s %9s %5s %5s %8s\n", k, horizon,
		"scheme", "cc", "pfc", "seed", "flows", "avg slow", "avg FCT", "p99 FCT", "drops", "pauses", "cnps", "ecn", "retx", "unfin", "fail", "wall")
	var rs []sweep.IRNResult
	for _, c := range f.confs {
		for _, seed := range seeds {
			r, err := sweep.RunIRN(sweep.IRNPoint{Scheme: c.scheme, Variant: c.variant, PFC: c.pfc, CC: c.cc, Load: 0.7, Seed: seed, K: k, Horizon: horizon, Drain: drain})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, " %-11s %-6s %-3s %4d %6d %9.2f %10v %10v %8d %7d %6d %6d %9d %5d %5d %8v\n", r.Label(), sweep.CCName(r.CC), sweep.PFCName(r.PFC), seed, r.NFlows, r.AvgSlowdown,
				r.AvgFCT.Round(time.Microsecond), r.P99FCT.Round(time.Microsecond), r.Drops, r.Pauses, r.CNPs, r.ECNMarks, r.Retransmits, r.Unfinished, r.Failed, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	csvPath, err := sweep.SaveIRN(o.Out, f.name, rs)
	if err != nil {
		return err
	}
	png, err := sweepplot.IRN(o.Out, f.name, fmt.Sprintf(f.title, k, horizon, len(seeds)), rs)
	fmt.Fprintln(o.Stdout, " wrote", csvPath, png)
	return err
}

// IRN's incast (Fig. 9): fan-ins, seeds and the stripes' total. The
// paper repeats each M 100 times with new senders; three seeds here
// (each draws the senders and the switches' hashes anew).
var (
	incastMs    = []int{10, 20, 30, 40, 50}
	incastSeeds = []uint64{1, 2, 3}
)

func init() {
	registerPaper(paperPreset{
		Name: "irn-fig9", Paper: "IRN (001)", Figure: "Fig. 9",
		Summary: "incast: 150 MB striped over M random senders to one host, the request completion time of irn without PFC over gbn (RoCE) with PFC, for each congestion control (none, timely, dcqcn)",
		Params: append(irnParams("")[:6],
			paperParam{"incast", fmt.Sprintf("%d MB striped over M senders drawn at random, to host %d, all posted at time 0, a QP per stripe", sweep.IncastTotal/1_000_000, sweep.IncastDst), "§4.4.3, after [17]"},
			paperParam{"M", fmt.Sprint(incastMs), "§4.4.3: 10 to 50"},
			paperParam{"seeds", fmt.Sprint(incastSeeds), "§4.4.3 repeats each M 100 times; softnic: the wall time a 2-core machine allows"},
			paperParam{"RCT", "when the last stripe completes; a stripe whose QP fails (RETRY_EXC_ERR) is posted again whole", "§4.4.3"},
			paperParam{"irn, gbn (RoCE), with PFC", "as irn-fig1", "§4.1"},
			paperParam{"irn-timeoutall", "irn with recovery's irn.timeout_all=1: a timeout resends every packet out, not only the cumulative acknowledgement", "softnic: §3.1 recovers a wholly lost tail one packet per RTO_high (docs/results.md, IRN Fig. 9)"},
			paperParam{"congestion control", "none, timely, dcqcn (cc's defaults; ECN marking with timely and dcqcn)", "§4.4.3: across the three"}),
		Run:         runIRNFig9,
		TestbedNote: "fabric only: a 54-host fat tree with switches, PFC and ECN",
	})
}

func runIRNFig9(o paperOpts) error {
	k, ms, seeds, total := irnFigK, incastMs, incastSeeds, sweep.IncastTotal
	ccs := []string{"", "timely", "dcqcn"}
	if o.Quick {
		k, ms, seeds, total, ccs = 4, []int{4}, seeds[:1], 2_000_000, ccs[:1]
	}
	fmt.Fprintf(o.Stdout, " fat tree k = %d, %d B to host %d\n %-6s %-14s %-3s %3s %4s %10s %8s %7s %6s %6s %9s %5s %8v\n", k, total, sweep.IncastDst,
		"cc", "sch", "pfc", "M", "seed", "RCT", "drops", "pauses", "cnps", "ecn", "retx", "fail", "wall")
	var rs []sweep.IncastResult
	for _, cc := range ccs {
		for _, m := range ms {
			for _, c := range []irnConf{{"irn", "", false, ""}, {"irn", sweep.IRNTimeoutAll, false, ""}, {"gbn", "", true, ""}} {
				for _, seed := range seeds {
					r, err := sweep.RunIncast(sweep.IncastPoint{Scheme: c.scheme, Variant: c.variant, PFC: c.pfc, CC: cc, M: m, Total: total, Seed: seed, K: k})
					if err != nil {
						return err
					}
					fmt.Fprintf(o.Stdout, " %-6s %-14s %-3s %3d %4d %10v %8d %7d %6d %6d %9d %5d %8v\n", sweep.CCName(cc), r.Label(), sweep.PFCName(c.pfc), m, seed,
						r.RCT.Round(time.Microsecond), r.Drops, r.Pauses, r.CNPs, r.ECNMarks, r.Retransmits, r.Failed, r.Wall.Round(time.Millisecond))
					rs = append(rs, r)
				}
			}
		}
	}
	csvPath, err := sweep.SaveIncast(o.Out, "irn-fig9", rs)
	if err != nil {
		return err
	}
	for _, cc := range []string{"none", "timely", "dcqcn"} {
		for _, l := range []string{"irn", "irn-" + sweep.IRNTimeoutAll} {
			for _, p := range sweepplot.IncastRatios(rs, cc, l) {
				fmt.Fprintf(o.Stdout, " %-6s M = %2.0f: RCT %s (no PFC) / gbn (PFC) = %.3f\n", cc, p.X, l, p.Y)
			}
		}
	}
	png := filepath.Join(o.Out, "irn-fig9.png")
	err = sweepplot.Incast(png, fmt.Sprintf("IRN Fig. 9 (embedded): incast of %d MB into one host of a fat tree k = %d, mean of %d seeds", total/1_000_000, k, len(seeds)), rs)
	fmt.Fprintln(o.Stdout, " wrote", csvPath, png)
	return err
}

// plotIRNCmd is `softnic-sweep plot-irn`: an IRN figure's PNG (Figs. 1-7,
// or with -incast Fig. 9's) from its CSV, as the preset draws it.
func plotIRNCmd(args []string) error {
	fs := flag.NewFlagSet("plot-irn", flag.ContinueOnError)
	in := fs.String("in", "results/irn-fig1.csv", "an IRN preset's CSV (irn-fig1, irn-fig4-*, irn-fig7*, or irn-fig9 with -incast)")
	out := fs.String("out", "", "the PNG (default: the CSV's name with .png)")
	title := fs.String("title", "", "the chart's title")
	incast := fs.Bool("incast", false, "the CSV is irn-fig9's: draw the RCT ratio against M")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	png := *out
	if png == "" {
		png = strings.TrimSuffix(*in, filepath.Ext(*in)) + ".png"
	}
	if *incast {
		rs, err := sweep.ReadIncastCSV(f)
		if err != nil {
			return err
		}
		if err := sweepplot.Incast(png, *title, rs); err != nil {
			return err
		}
	} else {
		rs, err := sweep.ReadIRNCSV(f)
		if err != nil {
			return err
		}
		dir, base := filepath.Split(png)
		if _, err := sweepplot.IRN(filepath.Clean(dir), strings.TrimSuffix(base, ".png"), *title, rs); err != nil {
			return err
		}
	}
	fmt.Println(" wrote", png)
	return nil
}

// irn-long: two of the comparisons that 2 ms of arrivals leave open, over
// four times as long: PFC's cost to IRN (Figs. 1-3 (b)) and whether RoCE
// with DCQCN needs PFC (Fig. 6).
const (
	irnLongHorizon = 8 * time.Millisecond
	irnLongDrain   = 20 * time.Millisecond
)

func init() {
	registerPaper(paperPreset{
		Name: "irn-long", Paper: "IRN (001)", Figure: "Figs. 1-3 (b) and 6, longer",
		Summary: "irn with and without PFC (no congestion control), and gbn (RoCE) with DCQCN with and without PFC, over 8 ms of arrivals instead of 2",
		Params: append(irnParams("")[:len(irnParams(""))-1],
			paperParam{"arrivals", fmt.Sprintf("over %v, then until every flow completes or %v more have passed", irnLongHorizon, irnLongDrain), "softnic: four times irn-fig1's, for the queues' longer-run behaviour"},
			paperParam{"rows", "irn, irn+PFC (no congestion control); gbn+dcqcn+PFC, gbn+dcqcn", "Figs. 1-3 (b); Fig. 6 (RoCE + DCQCN)"}),
		Run:         runIRNLong,
		TestbedNote: "fabric only: a 54-host fat tree with switches, PFC and ECN",
	})
}

func runIRNLong(o paperOpts) error {
	return runIRNFig(o, irnFig{name: "irn-long", horizon: irnLongHorizon, drain: irnLongDrain, quickDrain: time.Millisecond,
		confs: []irnConf{{"irn", "", false, ""}, {"irn", "", true, ""}, {"gbn", "", true, "dcqcn"}, {"gbn", "", false, "dcqcn"}},
		title: "IRN, longer (embedded): " + irnFigTitle})
}
