package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// MELO's (000) figures: Fig. 5a (one connection's throughput against
// loss, go-back-N beside MELO) and Fig. 6b (bits pool usage against
// concurrent connections and loss at a 200 µs RTT).

// The paper's MELO runs over DCQCN, which paces it at the link's rate;
// softnic has no congestion control, so the sender's in-flight cap stands
// in for it: for one connection the 1 Kb pool (1024 packets, more than the
// path's BDP, so the rate and not the cap limits it), for N connections
// sharing a path their fair share of its BDP.
const meloFig5aWindow = 1024

func init() {
	registerPaper(paperPreset{
		Name: "melo-fig5a", Paper: "MELO (000)", Figure: "Fig. 5a",
		Summary: "one connection at full speed: go-back-N's and MELO's throughput against loss (paper: MELO 99.0% of the bandwidth at 1%, 14.02x go-back-N)",
		Params: []paperParam{
			{"link rate", "40 Gb/s", "§4: server-to-leaf links of 40 Gb/s; both servers under one leaf"},
			{"base RTT", "16 µs (8 µs one way)", "§4 (\"base RTT to 16µs\")"},
			{"MTU", "1024", "§4 (1 KB)"},
			{"bits pool", "1 Kb per side", "§4"},
			{"traffic", "64 KiB WRITEs, 32 outstanding, 2000 per point", "§4.1.1: \"sends traffic at full speed\"; softnic: a perftest write_bw stream"},
			{"in-flight cap", "1024 packets (the pool's bits)", "softnic: no DCQCN; the cap is above the 16 µs BDP (about 80 packets) so the link, not the cap, sets the rate"},
			{"loss", "0, 0.001%, 0.01%, 0.1%, 1%, both directions", "Fig. 5a x axis (1e-5 to 1e-2); the paper drops at the leaf switch"},
			{"go-back-N's ACK timeout", "67 ms (perftest's -u 14)", "softnic default; the paper's DCQCN ns-3 setting is not given"},
		},
		Run:         runMeloFig5a,
		TestbedNote: "makes sense: one QP's goodput against loss is the testbed loss sweep with two schemes and 32 outstanding, `SOFTNIC_SWEEP_SCHEMES=\"gbn melo\" SOFTNIC_SWEEP_LOSSES=\"0 0.001 0.01 0.1 1\" SOFTNIC_SWEEP_TX_DEPTH=32 SOFTNIC_SWEEP_NAME=testbed-melo-fig5a bash scripts/sweep-loss.sh`, at 1.5 Gb/s and the host's RTT instead of 40 Gb/s and 16 µs",
	})
	registerPaper(paperPreset{
		Name: "melo-fig5b", Paper: "MELO (000)", Figure: "Fig. 5b",
		Summary: "99th-percentile FCT of web search flows against load, 1% loss on one of four paths (paper: MELO 2.11x-3.11x below go-back-N)",
		Params: []paperParam{
			{"flow sizes", "web search (DCTCP), 10 KB to 30 MB, mean 1.71 MB", "§4.1.2 (web search workload distribution [4])"},
			{"arrivals", "Poisson, at load x 40 Gb/s", "§4.1.2"},
			{"loads", "0.5, 0.6, 0.7", "Fig. 5b x axis"},
			{"flows per point", "1000 (-quick: 30 at 0.5)", "softnic: enough for a 99th percentile of 10 flows"},
			{"topology", "one 40 Gb/s link, 16 µs RTT, between the two NICs; each flow a WRITE on a QP of its own (32 QPs, a flow waits for a free one)", "§4: leaf-spine of 320 servers, 40 Gb/s server links, base RTT 16 µs; softnic: one sender-receiver pair carries the load"},
			{"FCT", "from the flow's WRITE posted to its completion; the wait for a free QP is reported apart (qp_wait_p99_us)", "§4.1.2: each flow has its connection; softnic's 32 QPs are a departure, and the wait is not the flow's"},
			{"loss", "1%, both directions, on the flows of one path in four (QPN mod 4 = 0)", "§4.1.2: 1% random drop at spine L0, one of 4 spines"},
			{"congestion control", fmt.Sprintf("none: the flows share the link's FIFO; each QP capped at %d packets in flight, both schemes", meloFig5bWindow), "softnic has no DCQCN (§4 runs MELO and go-back-N over DCQCN); the cap is the same on both, recovery's default BDP cap, above the 16 µs path's BDP of about 80 packets"},
			{"ACK timeout", "16.8 ms (-u 12)", "softnic: the paper's go-back-N setting is not given; its Fig. 5b axis tops at 25 ms"},
			{"bits pool", "1 Kb per side, shared by the 32 QPs", "§4"},
		},
		Run:         runMeloFig5b,
		TestbedNote: "fabric only: it needs loss on one path of four and a web-search flow generator with per-flow completion times, and the testbed has one path and softnic-bench measures no FCT",
	})
	registerPaper(paperPreset{
		Name: "melo-fig6b", Paper: "MELO (000)", Figure: "Fig. 6b",
		Summary: "MELO's receiver bits-pool usage against concurrent connections and loss at 200 µs RTT (paper: 96.9% at one connection, 65.6% at 20 and 2%)",
		Params: []paperParam{
			{"link rate", "40 Gb/s", "§4: server links; one server to another under a different leaf"},
			{"RTT", "200 µs (100 µs one way)", "§4.2.2"},
			{"MTU", "1024", "§4"},
			{"bits pool", "1 Kb (128 blocks of 8 bits) per side", "§4, §3.2.3"},
			{"connections", "1, 2, 4, 8, 12, 16, 20", "Fig. 6b x axis (up to 20, §4.2.2)"},
			{"loss", "0.1%, 0.5%, 1%, 2%, both directions", "§4.2.2 (\"various loss ratio\", 2% named)"},
			{"in-flight cap", fmt.Sprintf("%d/N packets per connection", sweep.MeloFig6bWindow), "softnic: no DCQCN; what DCQCN's line rate and the RTT put in flight, 40 Gb/s x 200 µs = 1 MB in 1 KB packets, shared fairly (§4.2.2: \"each flow has a smaller BDP\"); the paper's one connection peaks at 96.9% of the pool at every loss, a span of about this much"},
			{"traffic", "1 MiB WRITEs, two outstanding per connection; 5 ms warm-up, 20 ms measured", "§4.2.2: connections at full speed"},
			{"usage", "peak blocks in use in the receiver's pool over the pool", "§4.2.2 (\"bits pool usage\")"},
		},
		Run:         runMeloFig6b,
		TestbedNote: "fabric only: the pool is used only with hundreds of packets in flight on a path (976 at one connection), which at the testbed's 1.5 Gb/s takes a link delay of milliseconds (--link-delay) and more connections than two daemons on 2 cores carry at once, and sweep-loss.sh records no pool peak per run",
	})
}

func runMeloFig5a(o paperOpts) error {
	losses, iters := []float64{0, 1e-5, 1e-4, 1e-3, 1e-2}, 2000
	if o.Quick {
		losses, iters = []float64{0, 1e-2}, 50
	}
	link := perftest.Link{RateBps: sweep.MeloLinkBps, Delay: 8 * time.Microsecond, Ring: perftest.DefaultLink.Ring}
	var rs []sweep.LossResult
	for _, s := range []string{recovery.GBN, recovery.MELO} {
		for _, l := range losses {
			r, err := sweep.RunLoss(sweep.LossConfig{Scheme: s, Loss: l, Size: 64 << 10, Iters: iters, TxDepth: 32, MTU: qp.MTU1024, Link: link, Seed: 1,
				Params: recovery.Params{BDPPackets: meloFig5aWindow, Knobs: sweep.MeloKnobs()}})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, " %-5s loss %-7g %8.3f Gb/s  timeouts %4d  retransmits %7d  wall %v\n", s, l, r.Gbps, r.Timeouts, r.Retransmits, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	sweep.Relativize(rs)
	path, err := sweep.SaveLossAs(o.Out, "melo-fig5a.csv", rs)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "melo-fig5a.png")
	if err := sweepplot.Loss(png, "MELO Fig. 5a: one connection at full speed, 40 Gb/s, 16 µs RTT, 1 Kb pool", rs); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	for _, r := range rs {
		if r.Loss == 0.01 {
			fmt.Fprintf(o.Stdout, " at 1%% loss: %-5s %.3f Gb/s, %.1f%% of its lossless goodput\n", r.Scheme, r.Gbps, 100*r.Relative)
		}
	}
	return nil
}

func runMeloFig6b(o paperOpts) error {
	conns, losses := []int{1, 2, 4, 8, 12, 16, 20}, []float64{0.001, 0.005, 0.01, 0.02}
	warm, measure := 5*time.Millisecond, 20*time.Millisecond
	if o.Quick {
		conns, losses, warm, measure = []int{1, 20}, []float64{0.02}, time.Millisecond, 2*time.Millisecond
	}
	var rs []sweep.MeloPoolResult
	for _, l := range losses {
		for _, n := range conns {
			r, err := sweep.RunMeloPool(sweep.MeloPoolConfig{Conns: n, Loss: l, RTT: 200 * time.Microsecond, Size: 1 << 20, Window: sweep.MeloFig6bWindow / n,
				Warmup: warm, Measure: measure, Seed: 1})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, " loss %-6g connections %2d  pool peak %4d of %d bits (%5.1f%%)  fallbacks %5d  %6.2f Gb/s  wall %v\n",
				l, n, 8*r.PoolPeak, 8*r.PoolSlots, 100*r.Usage(), r.Fallbacks, r.GoodputGbps, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	path, err := sweep.SaveMeloPool(o.Out, "melo-fig6b", rs)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "melo-fig6b.png")
	if err := sweepplot.MeloPool(png, fmt.Sprintf("MELO Fig. 6b: bits pool usage, 200 µs RTT, 40 Gb/s, in-flight cap %d/N", sweep.MeloFig6bWindow), rs); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	return nil
}

// meloFig5bWindow is the in-flight cap of every QP in melo-fig5b, on
// both schemes (recovery.DefaultBDPPackets).
const meloFig5bWindow = recovery.DefaultBDPPackets

func runMeloFig5b(o paperOpts) error {
	loads, flows := []float64{0.5, 0.6, 0.7}, 1000
	if o.Quick {
		loads, flows = []float64{0.5}, 30
	}
	var rs []sweep.MeloFCTResult
	for _, s := range []string{recovery.GBN, recovery.MELO} {
		for _, l := range loads {
			r, err := sweep.RunMeloFCT(sweep.MeloFCTConfig{Scheme: s, Load: l, Flows: flows, Loss: 0.01, Paths: 4, QPs: 32, Timeout: 12, Seed: 1, Window: meloFig5bWindow})
			if err != nil {
				return err
			}
			waited := 0
			for _, f := range r.Records {
				if f.Posted > f.Arrived {
					waited++
				}
			}
			fmt.Fprintf(o.Stdout, " %-5s load %.1f  FCT p50 %9v  p99 %9v  p99 on the lossy path %9v  waited for a QP %3d (p99 %v)  timeouts %4d  fallbacks %d  wall %v\n",
				s, l, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P99Lossy.Round(time.Microsecond), waited, r.WaitP99.Round(time.Microsecond), r.Timeouts, r.Fallbacks, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	path, err := sweep.SaveMeloFCT(o.Out, "melo-fig5b", rs)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "melo-fig5b.png")
	if err := sweepplot.MeloFCT(png, "MELO Fig. 5b: 99th percentile FCT, web search flows, 1% loss on one path of four", rs); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	return nil
}

// MELO Fig. 5a in its paper's setup (issue 23): DCQCN on both schemes,
// the two servers under one switch that marks ECN, loss at the leaf; and
// go-back-N at 1% across ACK timeouts, which is what sets its line.
var meloFig5aTimeouts = []uint8{6, 8, 10, 12} // and the figure's 14

func init() {
	registerPaper(paperPreset{
		Name: "melo-fig5a-dcqcn", Paper: "MELO (000)", Figure: "Fig. 5a (with DCQCN)",
		Summary: "melo-fig5a with DCQCN on both schemes through a leaf switch that marks ECN, as the paper ran it; then go-back-N at 1% loss against its ACK timeout",
		Params: []paperParam{
			{"topology", "two servers under one switch, 40 Gb/s links of 4 µs (16 µs base RTT)", "§4: server-to-leaf links of 40 Gb/s, base RTT 16 µs"},
			{"congestion control", "dcqcn on both NICs (cc's defaults, docs/cc.md); the switch marks ECN (netsw.DefaultECN: Kmin 5 KB, Kmax 200 KB, Pmax 1%)", "§4: MELO and go-back-N run over DCQCN"},
			{"switch", "240 KB per input port, no PFC", "IRN's; the paper's leaf buffer is not given"},
			{"loss", "0, 0.001%, 0.01%, 0.1%, 1%, of the frames each host receives (data and ACKs)", "Fig. 5a x axis; the paper drops at the leaf switch"},
			{"traffic", "64 KiB WRITEs, 32 outstanding, 2000 per point, one QP", "§4.1.1: \"sends traffic at full speed\"; as melo-fig5a"},
			{"in-flight cap", "1024 packets (MELO's pool), none for go-back-N", "as melo-fig5a"},
			{"go-back-N's ACK timeout", "67 ms (code 14) in the figure; also codes 6, 8, 10, 12 (262 µs to 16.8 ms) at 0 and 1% loss", "the paper does not give it; it decides go-back-N's line"},
			{"bits pool", "1 Kb per side", "§4"},
		},
		Run:         runMeloFig5aDCQCN,
		TestbedNote: "fabric only: the switch that marks ECN is the next issue's on real wires",
	})
}

func runMeloFig5aDCQCN(o paperOpts) error {
	losses, iters, timeouts := []float64{0, 1e-5, 1e-4, 1e-3, 1e-2}, 2000, meloFig5aTimeouts
	if o.Quick {
		losses, iters, timeouts = []float64{0, 1e-2}, 300, timeouts[:1]
	}
	run := func(c sweep.MeloSwitchedConfig) (sweep.MeloSwitchedResult, error) {
		r, err := sweep.RunMeloSwitched(c)
		if err == nil {
			fmt.Fprintf(o.Stdout, " %-5s %-6s loss %-7g timeout %2d %8.3f Gb/s  timeouts %4d  retransmits %7d  ecn %5d  cnps %5d  wall %v\n",
				c.Scheme, c.CC, c.Loss, c.TimeoutCode(), r.Gbps, r.Timeouts, r.Retransmits, r.ECNMarks, r.CNPs, r.Wall.Round(time.Millisecond))
		}
		return r, err
	}
	var rs []sweep.MeloSwitchedResult
	for _, s := range []string{recovery.GBN, recovery.MELO} {
		for _, l := range losses {
			r, err := run(sweep.MeloSwitchedConfig{Scheme: s, CC: "dcqcn", Loss: l, Size: 64 << 10, Iters: iters, TxDepth: 32, Window: meloFig5aWindow, Seed: 1})
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
	}
	var lrs []sweep.LossResult
	for _, r := range rs {
		lrs = append(lrs, r.LossResult())
	}
	sweep.Relativize(lrs)
	for _, to := range timeouts {
		for _, l := range []float64{0, 1e-2} {
			r, err := run(sweep.MeloSwitchedConfig{Scheme: recovery.GBN, CC: "dcqcn", Loss: l, Size: 64 << 10, Iters: iters, TxDepth: 32, Window: meloFig5aWindow, Seed: 1, Timeout: to})
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
	}
	path, err := sweep.SaveMeloSwitched(o.Out, "melo-fig5a-dcqcn", rs)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "melo-fig5a-dcqcn.png")
	if err := sweepplot.Loss(png, "MELO Fig. 5a with DCQCN: one connection through a leaf switch, 40 Gb/s, 16 µs RTT, 1 Kb pool", lrs); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	var melo float64
	for _, r := range rs {
		if r.Scheme == recovery.MELO && r.Loss == 1e-2 {
			melo = r.Gbps
		}
	}
	for _, r := range rs {
		if r.Scheme == recovery.GBN && r.Loss == 1e-2 && r.Gbps > 0 {
			fmt.Fprintf(o.Stdout, " at 1%% loss: melo / gbn (timeout code %d) = %.2fx\n", r.TimeoutCode(), melo/r.Gbps)
		}
	}
	return nil
}

// MELO Fig. 6a (issue 26): the CPU cost of the reorder copies, from a
// trace of the bytes copied out of the reorder buffer, costed as the
// paper costs its trace.
func init() {
	registerPaper(paperPreset{
		Name: "melo-fig6a", Paper: "MELO (000)", Figure: "Fig. 6a",
		Summary: "the share of one core that copying out-of-order data from the reorder buffer to the application takes, against loss (paper: about 30% at 0.2%, at most 82.2% when every packet is copied at 40 Gb/s)",
		Params: []paperParam{
			{"link rate", "40 Gb/s", "§4: server links; two servers under the same leaf"},
			{"RTT", "100 µs (50 µs one way)", "§4.2.1: \"RTT ~100µs\", the 99th percentile of [8]"},
			{"MTU", "1024", "§4"},
			{"bits pool", "1 Kb per side", "§4"},
			{"sender", "paced by the link at 40 Gb/s (the one-way pipe plus a 64-frame transmit ring), in-flight cap 1024 packets (the pool's bits, as melo-fig5a)", "§4.2.1: BDP 512 KB; the paper's DCQCN sends one flow at line rate with no window and goes on sending while a loss is recovered; softnic has no DCQCN. Also run, printed only: a cap at the BDP, 512 packets, which stalls the sender in each recovery"},
			{"traffic", "one connection, 1 MiB WRITEs two at a time; 5 ms warm-up, 100 ms measured (-quick: 1 ms, 5 ms)", "§4.2.1: \"two servers sending at full speed\""},
			{"loss", "0.01%, 0.05%, 0.1%, 0.2%, 0.5%, 1%, 2%, both directions", "§4.2.1: \"configure the switch to be lossy\"; 0.2% is the point the text gives"},
			{"trace", "rob_delivered_bytes: payload copied from the receiver's reorder buffer to the application in the measured time", "§4.2.1: \"count the CPU cycles to copy out-of-order data based on the collected packet-level trace\""},
			{"copy rate", fmt.Sprintf("%.0f MB/s, one core", sweep.MeloCopyBytesPerSec/1e6), "softnic: BenchmarkMeloReorderCopy/dst-256MiB (internal/sweep), measured once on the machine the figure was made on: 1 KB chunks from a 512 KB reorder ring into a 256 MiB buffer, bytes over thread CPU time, median of 5 runs (sweep.MeloCopyBytesPerSec). The paper: one logical core of a 2.4 GHz Xeon E5-2630 v3, about 6,080 MB/s by its 82.2% worst case"},
			{"CPU usage", "ooo_bytes_per_s / copy rate", "§4.2.1: \"the fraction of one second to finish copying the trace produced within 1s\""},
		},
		Run:         runMeloFig6a,
		TestbedNote: "fabric only: the figure needs a 40 Gb/s connection with a 100 µs RTT, and its CPU cost is computed from the trace, not measured on a host",
	})
}

func runMeloFig6a(o paperOpts) error {
	losses, warm, measure := []float64{1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2}, 5*time.Millisecond, 100*time.Millisecond
	if o.Quick {
		losses, warm, measure = []float64{2e-3}, time.Millisecond, 5*time.Millisecond
	}
	run := func(c sweep.MeloPoolConfig) (sweep.MeloCopyPoint, error) {
		p, err := sweep.RunMeloCopy(c)
		if err == nil {
			r := p.Run
			fmt.Fprintf(o.Stdout, " cap %4d  loss %-6g  out of order %6.3f GB/s (%7d packets) of %6.2f Gb/s goodput  core %5.1f%%  pool peak %4d bits  fallbacks %d  wall %v\n",
				c.Window, c.Loss, p.OOOBytesPerSec/1e9, r.ROBPackets, r.GoodputGbps, 100*p.CoreFraction, 8*r.PoolPeak, r.Fallbacks, r.Wall.Round(time.Millisecond))
		}
		return p, err
	}
	var ps []sweep.MeloCopyPoint
	for _, l := range losses {
		p, err := run(sweep.MeloFig6aConfig(l, warm, measure))
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	path, err := sweep.SaveMeloCopy(o.Out, "melo-fig6a", ps)
	if err != nil {
		return err
	}
	png := filepath.Join(o.Out, "melo-fig6a.png")
	if err := sweepplot.MeloCopy(png, "MELO Fig. 6a: CPU to copy out-of-order data, 40 Gb/s, 100 µs RTT", ps); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, " wrote %s and %s\n", path, png)
	fmt.Fprintf(o.Stdout, " copying all of 40 Gb/s (5 GB/s) at %.0f MB/s: %.1f%% of a core (the paper's worst case: 82.2%%)\n",
		sweep.MeloCopyBytesPerSec/1e6, 100*5e9/sweep.MeloCopyBytesPerSec)
	fmt.Fprintf(o.Stdout, " the variant with the cap at the BDP (%d packets, no ring), not in the CSV:\n", sweep.MeloFig6aBDP)
	for _, l := range losses {
		c := sweep.MeloFig6aConfig(l, warm, measure)
		c.Window, c.Ring = sweep.MeloFig6aBDP, 0
		if _, err := run(c); err != nil {
			return err
		}
	}
	return nil
}
