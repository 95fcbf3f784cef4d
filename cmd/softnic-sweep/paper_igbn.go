package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
)

// The Improved go-back-N paper's (002) figures: Fig. 6a-c (the four
// algorithms against loss at three ACK timeouts) and Fig. 3 (go-back-N's
// ACK timeouts by reason at 1% loss).

var igbnParams = []paperParam{
	{"link rate", "40 Gb/s", "Table I (\"40GB\")"},
	{"propagation", "1 µs per hop, 2 hops (2 µs one way)", "Table I; Fig. 1: two hosts through one switch"},
	{"message size", "4 MiB WRITE, one QP", "Table I (4 MB)"},
	{"pipelining", "none: the next message is posted when the last completes", "§II-B, §III-A: applications that do not pipeline"},
	{"packet payload", "1024 B (path MTU 1024)", "Table I (1 KB)"},
	{"ACK request interval", "every 256 packets, and the last", "Table I (256 KB)"},
	{"NAK interval", "500 µs", "Table I"},
	{"loss", "random, each direction, data and ACKs/NAKs alike", "§IV (\"packet loss rate\")"},
	{"schemes", "gbn, gbn-st, gbn-ce, igbn", "§IV: GBN, GBN+ST, GBN+CE, IGBN"},
}

// IBA's ACK timeout is 4.096 µs * 2^k; the paper's values fall between
// codes, so each takes the nearest: 100 ms -> 134 ms (k=15), 10 ms ->
// 8.4 ms (k=11), 500 µs -> 524 µs (k=7).
// Each panel's messages per point: at a 134 ms timeout one timeout costs
// as much as 151 messages take, so 6a needs many messages for its order
// at 1% loss (ST removes the few timeouts of reasons 1 and 2) to stand
// above the noise. 6a's 2000 are run as igbnFig6aSeeds seeds of
// igbnFig6aMessages (runIGBNFig6a).
var igbnFig6Timeouts = []struct {
	fig   string
	code  uint8
	paper string
	msgs  int
}{{"6a", 15, "100 ms", 2000}, {"6b", 11, "10 ms", 500}, {"6c", 7, "500 µs", 500}}

// Fig. 6a runs every point with several seeds (igbnFig6aSeeds by default,
// -seeds to change it) of igbnFig6aMessages messages each: 2000 messages a
// point at 5 seeds, as many as its one seed ran before, now with an
// interval. At 134 ms one timeout costs 160 messages' time, and at 0.01%
// to 0.1% a point has 0 to 20 of them, so one seed's point is mostly
// luck.
const (
	igbnFig6aSeeds    = 5
	igbnFig6aMessages = 400
)

var igbnLosses = []float64{0, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2}

func init() {
	registerPaper(paperPreset{
		Name: "igbn-fig6", Paper: "Improved go-back-N (002)", Figure: "Fig. 6a-c",
		Summary: "GBN, GBN+ST, GBN+CE, IGBN: relative throughput against loss, non-pipelined 4 MB messages, ACK timeout 100 ms / 10 ms / 500 µs",
		Params: append(append([]paperParam{}, igbnParams...),
			paperParam{"ACK timeout", "134 ms (6a), 8.4 ms (6b), 524 µs (6c)", "§IV: 100 ms, 10 ms, 500 µs; IBA's 4.096 µs * 2^k has no code for them, the nearest are used"},
			paperParam{"loss rates", "0, 0.01%, 0.02%, 0.05%, 0.1%, 0.2%, 0.5%, 1%", "Fig. 6 x axis (0.01% to 1%); 0 is the base of \"relative\""},
			paperParam{"messages per point", "6a: 400 per seed, 5 seeds (-seeds N), mean and 95% t-interval; 6b, 6c: 500, seed 1; -quick: 2, only 6c, losses 0 and 1%", "softnic: simulated time, seeded; the paper repeats its runs (§III-A: 100 times)"},
			paperParam{"-testbed", "6a and 6b only, via scripts/sweep-loss.sh (SOFTNIC_SWEEP_PAPER=igbn-fig6a/6b): two daemons over AF_XDP, link 1.5 Gb/s, loss on the switch both ways, 0-1%, 3 runs of 10 s per point, --rto fixed without backoff", "softnic: the host's link is 27x slower than Table I's, so a 4 MiB message takes 23 ms and a 134 ms timeout costs 6 messages, not 160; 6c's 524 µs is within this shared host's scheduler pauses"}),
		Run: runIGBNFig6, Testbed: true, Seeds: igbnFig6aSeeds,
		TestbedNote: "the testbed runs 6a and 6b through scripts/sweep-loss.sh (SOFTNIC_SWEEP_PAPER=igbn-fig6a, igbn-fig6b; `paper igbn-fig6 -testbed` runs both), at the host's 1.5 Gb/s; 6c's 524 µs timeout is not run there, as it is within this shared host's scheduler pauses",
	})
	registerPaper(paperPreset{
		Name: "igbn-fig6a", Paper: "Improved go-back-N (002)", Figure: "Fig. 6a",
		Summary: "Fig. 6a alone (ACK timeout 100 ms): the four algorithms against loss, each point over several seeds with its mean and 95% t-interval",
		Params: append(append([]paperParam{}, igbnParams...),
			paperParam{"ACK timeout", "134 ms", "§IV: 100 ms; the nearest IBA code (k=15)"},
			paperParam{"loss rates", "0, 0.01%, 0.02%, 0.05%, 0.1%, 0.2%, 0.5%, 1%", "Fig. 6 x axis (0.01% to 1%); 0 is the base of \"relative\""},
			paperParam{"messages per point", "400 per seed, seeds 1-5 (-seeds N): 2000 a point; -quick: 2 per seed, 2 seeds, losses 0 and 1%", "softnic: simulated time; the paper repeats its runs (§III-A: 100 times)"},
			paperParam{"interval", "mean of the seeds' relative goodput, two-sided 95% Student t-interval; min and max beside it", "softnic"}),
		Run: runIGBNFig6aOnly, Seeds: igbnFig6aSeeds,
		TestbedNote: "the testbed's Fig. 6a is `paper igbn-fig6 -testbed` (scripts/sweep-loss.sh, SOFTNIC_SWEEP_PAPER=igbn-fig6a), 3 runs a point",
	})
	registerPaper(paperPreset{
		Name: "igbn-fig7", Paper: "Improved go-back-N (002)", Figure: "Fig. 7a-d",
		Summary: "Fig. 6a-c's points by algorithm: one panel each (a GBN, b IGBN, c GBN+CE, d GBN+ST), a line per ACK timeout; drawn from the igbn-fig6 CSVs, no new run",
		Params: []paperParam{
			{"points", "igbn-fig6a.csv, igbn-fig6b.csv, igbn-fig6c.csv in -out", "the same 96 points as Fig. 6a-c (§IV-B); run `paper igbn-fig6` first"},
			{"ACK timeout", "134 ms, 8.4 ms, 524 µs", "§IV-B: 100 ms, 10 ms, 500 µs (nearest IBA codes, as igbn-fig6)"},
			{"panels", "(a) gbn, (b) igbn, (c) gbn-ce, (d) gbn-st", "Fig. 7's order"},
		},
		Run:         runIGBNFig7,
		TestbedNote: "nothing to run: the testbed's 6a and 6b (paper igbn-fig6 -testbed) are drawn as panels of their own, and it has no 6c",
	})
	registerPaper(paperPreset{
		Name: "igbn-fig3", Paper: "Improved go-back-N (002)", Figure: "Fig. 3",
		Summary: "go-back-N's ACK timeouts at 1% loss by the paper's four reasons (last packet lost, last ACK lost, NAK lost, lost twice)",
		Params: append(append([]paperParam{}, igbnParams...),
			paperParam{"ACK timeout", "134 ms", "Table I: 100 ms (nearest IBA code)"},
			paperParam{"loss", "1%", "§III-A"},
			paperParam{"runs", "1000 messages (-quick: 3)", "§III-A repeats the simulation 100 times"},
			paperParam{"classification", "at each timeout, from the responder's expected PSN and NAK state and whether the requester heard that NAK", "softnic: the embedded fabric lets the requester read its peer (dataplane/timeout_reason.go)"}),
		Run:         runIGBNFig3,
		TestbedNote: "fabric only: a timeout's reason is read from both ends' state at the moment it fires, which only the embedded fabric can see (the daemon leaves the reason counters 0)",
	})
}

func runIGBNPoints(o paperOpts, codes []uint8, losses []float64, schemes []string, msgs int) ([]sweep.IGBNResult, error) {
	var rs []sweep.IGBNResult
	for _, code := range codes {
		for _, s := range schemes {
			for _, l := range losses {
				r, err := sweep.RunIGBN(sweep.IGBNConfig{Scheme: s, Loss: l, Timeout: code, Messages: msgs, Seed: 1})
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(o.Stdout, " %-7s timeout %-9v loss %-7g %8.3f Gb/s  timeouts %5d  retransmits %8d  wall %v\n",
					s, sweep.TimeoutOf(code).Round(time.Microsecond), l, r.Gbps, r.Timeouts, r.Retransmits, r.Wall.Round(time.Millisecond))
				rs = append(rs, r)
			}
		}
	}
	sweep.RelativizeIGBN(rs)
	return rs, nil
}

func runIGBNFig6(o paperOpts) error {
	if o.Testbed {
		return runIGBNFig6Testbed(o)
	}
	figs, losses := igbnFig6Timeouts, igbnLosses
	if o.Quick {
		figs, losses = figs[2:], []float64{0, 0.01}
	} else {
		if err := runIGBNFig6a(o); err != nil {
			return err
		}
		figs = figs[1:]
	}
	for _, f := range figs {
		msgs := f.msgs
		if o.Quick {
			msgs = 2
		}
		rs, err := runIGBNPoints(o, []uint8{f.code}, losses, sweep.IGBNSchemes, msgs)
		if err != nil {
			return err
		}
		name := "igbn-fig" + f.fig
		path, err := sweep.SaveIGBN(o.Out, name, rs)
		if err != nil {
			return err
		}
		png := filepath.Join(o.Out, name+".png")
		title := fmt.Sprintf("Improved go-back-N Fig. %s: 4 MiB non-pipelined WRITEs, 40 Gb/s, ACK timeout %v (paper %s)",
			f.fig, sweep.TimeoutOf(f.code).Round(time.Microsecond), f.paper)
		if err := sweepplot.IGBN(png, title, rs); err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
		for _, r := range rs {
			if r.Loss == 0.01 {
				fmt.Fprintf(o.Stdout, " Fig. %s at 1%% loss: %-7s relative %.4f\n", f.fig, r.Scheme, r.Relative)
			}
		}
	}
	return nil
}

// runIGBNFig6aOnly is paper igbn-fig6a: Fig. 6a alone, seeded.
func runIGBNFig6aOnly(o paperOpts) error {
	if o.Testbed {
		return fmt.Errorf("paper igbn-fig6a runs on the embedded fabric; the testbed's Fig. 6a is `paper igbn-fig6 -testbed`")
	}
	return runIGBNFig6a(o)
}

// runIGBNFig6a runs Fig. 6a (134 ms) with o.Seeds seeds a point
// (igbnFig6aSeeds when 0) and writes igbn-fig6a.csv (each point's mean
// and interval), igbn-fig6a-runs.csv (every seed's run) and
// igbn-fig6a.png (the means with their 95% t-intervals).
func runIGBNFig6a(o paperOpts) error {
	f := igbnFig6Timeouts[0]
	seeds, msgs, losses := o.Seeds, igbnFig6aMessages, igbnLosses
	if seeds == 0 {
		seeds = igbnFig6aSeeds
	}
	if o.Quick {
		msgs, losses = 2, []float64{0, 0.01}
		if o.Seeds == 0 {
			seeds = 2
		}
	}
	var cfgs []sweep.IGBNConfig
	for _, s := range sweep.IGBNSchemes {
		for _, l := range losses {
			for seed := 1; seed <= seeds; seed++ {
				cfgs = append(cfgs, sweep.IGBNConfig{Scheme: s, Loss: l, Timeout: f.code, Messages: msgs, Seed: uint64(seed)})
			}
		}
	}
	rs, err := runIGBNConfigs(o, cfgs, runtime.GOMAXPROCS(0))
	if err != nil {
		return err
	}
	sweep.RelativizeIGBN(rs)
	ss := sweep.SummarizeIGBN(rs)
	name := "igbn-fig" + f.fig
	path, runs, err := sweep.SaveIGBNSeeds(o.Out, name, rs, ss)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, name+".png")
	title := fmt.Sprintf("IGBN Fig. %s, 4 MiB WRITEs, 40 Gb/s, ACK timeout %v (paper %s): mean of %d seeds, bars 95%% t-interval",
		f.fig, sweep.TimeoutOf(f.code).Round(time.Millisecond), f.paper, seeds)
	if err := sweepplot.IGBNSeeds(png, title, ss); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s, %s and %s\n", path, runs, png)
	for _, s := range ss {
		if s.Loss > 0 {
			fmt.Fprintf(o.Stdout, " Fig. %s at loss %-6g %-7s relative %.4f (95%% %.4f-%.4f, seeds %.4f-%.4f), timeouts %d (%d-%d a seed)\n", f.fig, s.Loss, s.Scheme,
				s.Relative, s.RelLo, s.RelHi, s.RelMin, s.RelMax, s.Timeouts, s.TimeoutsMin, s.TimeoutsMax)
		}
	}
	return nil
}

// runIGBNConfigs runs the points on up to jobs goroutines (each run is its
// own simulation in simulated time: the results do not depend on jobs)
// and returns them in cfgs' order.
func runIGBNConfigs(o paperOpts, cfgs []sweep.IGBNConfig, jobs int) ([]sweep.IGBNResult, error) {
	rs := make([]sweep.IGBNResult, len(cfgs))
	errs := make([]error, len(cfgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(jobs, 1))
	for i, c := range cfgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := sweep.RunIGBN(c)
			rs[i], errs[i] = r, err
			if err != nil {
				return
			}
			mu.Lock()
			fmt.Fprintf(o.Stdout, " %-7s timeout %-9v loss %-7g seed %-2d %8.3f Gb/s  timeouts %5d  retransmits %8d  wall %v\n",
				c.Scheme, sweep.TimeoutOf(c.Timeout).Round(time.Microsecond), c.Loss, c.Seed, r.Gbps, r.Timeouts, r.Retransmits, r.Wall.Round(time.Millisecond))
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}

func runIGBNFig3(o paperOpts) error {
	msgs := 1000
	if o.Quick {
		msgs = 3
	}
	rs, err := runIGBNPoints(o, []uint8{15}, []float64{0.01}, []string{"gbn"}, msgs)
	if err != nil {
		return err
	}
	path, err := sweep.SaveIGBNReasons(o.Out, "igbn-fig3", rs[0])
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "igbn-fig3.png")
	if err := sweepplot.IGBNReasons(png, "Improved go-back-N Fig. 3: go-back-N's ACK timeouts by reason, 1% loss, 4 MiB messages", rs[0]); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	return nil
}

// runIGBNFig7 reads the three panels igbn-fig6 wrote into o.Out and draws
// them grouped by algorithm: igbn-fig7.csv (scheme, timeout_ms, loss,
// relative) and igbn-fig7.png. It measures nothing (-quick changes
// nothing).
func runIGBNFig7(o paperOpts) error {
	var rs []sweep.IGBNResult
	for _, f := range igbnFig6Timeouts {
		path := filepath.Join(o.Out, "igbn-fig"+f.fig+".csv")
		fh, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("paper igbn-fig7 draws igbn-fig6's CSVs (run `softnic-sweep paper igbn-fig6 -out %s` first): %w", o.Out, err)
		}
		part, err := sweep.ReadIGBNCSV(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, r := range part {
			if r.Timeout != f.code {
				return fmt.Errorf("%s: %s at loss %g has ACK timeout %v, not Fig. %s's %v", path, r.Scheme, r.Loss,
					sweep.TimeoutOf(r.Timeout).Round(time.Microsecond), f.fig, sweep.TimeoutOf(f.code).Round(time.Microsecond))
			}
		}
		rs = append(rs, part...)
	}
	path, err := sweep.SaveIGBNFig7(o.Out, "igbn-fig7", rs)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "igbn-fig7.png")
	title := "Improved go-back-N Fig. 7: each algorithm at the three ACK timeouts (paper 100 ms, 10 ms, 500 µs); 4 MiB non-pipelined WRITEs, 40 Gb/s"
	if err := sweepplot.IGBNFig7(png, title, rs); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	for _, r := range sweep.SortIGBNFig7(rs) {
		if r.Loss == 0.01 {
			fmt.Fprintf(o.Stdout, " Fig. 7 at 1%% loss: %-7s timeout %-9v relative %.4f\n", r.Scheme, sweep.TimeoutOf(r.Timeout).Round(time.Microsecond), r.Relative)
		}
	}
	return nil
}

// igbnTestbedScript runs the testbed panels; relative to the repository,
// where softnic-sweep is run from (go run ./cmd/softnic-sweep).
const igbnTestbedScript = "scripts/sweep-loss.sh"

// igbnTestbedEnv is the environment scripts/sweep-loss.sh gets for one
// testbed panel (fig "6a" or "6b"): the paper's workload, the output
// directory, and with -quick a smoke run (gbn and igbn, 0 and 1% loss,
// one run of 2 s each).
func igbnTestbedEnv(fig string, o paperOpts) []string {
	env := []string{"SOFTNIC_SWEEP_PAPER=igbn-fig" + fig, "SOFTNIC_SWEEP_OUT=" + o.Out}
	if o.Quick {
		env = append(env, "SOFTNIC_SWEEP_SCHEMES=gbn igbn", "SOFTNIC_SWEEP_LOSSES=0 1", "SOFTNIC_SWEEP_SECONDS=2",
			"SOFTNIC_SWEEP_LOSSLESS_RUNS=1", "SOFTNIC_SWEEP_RUNS=1")
	}
	return env
}

// runIGBNFig6Testbed runs Fig. 6a and 6b on the two-host testbed (as root,
// with XDP; the script runs the embedded preset instead where it cannot)
// and writes testbed-igbn-fig6a/b.csv, -runs.csv and .png into o.Out.
func runIGBNFig6Testbed(o paperOpts) error {
	if _, err := os.Stat(igbnTestbedScript); err != nil {
		return fmt.Errorf("paper igbn-fig6 -testbed runs %s from the repository's top directory: %w", igbnTestbedScript, err)
	}
	for _, fig := range []string{"6a", "6b"} {
		cmd := exec.Command("bash", igbnTestbedScript)
		cmd.Env = append(os.Environ(), igbnTestbedEnv(fig, o)...)
		cmd.Stdout, cmd.Stderr = o.Stdout, os.Stderr
		var shown []string
		for _, kv := range igbnTestbedEnv(fig, o) {
			k, v, _ := strings.Cut(kv, "=")
			shown = append(shown, k+"="+strconv.Quote(v))
		}
		fmt.Fprintf(o.Stdout, " %s bash %s\n", strings.Join(shown, " "), igbnTestbedScript)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s (Fig. %s): %w", igbnTestbedScript, fig, err)
		}
	}
	return nil
}
