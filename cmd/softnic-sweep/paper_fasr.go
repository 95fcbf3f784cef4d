package main

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
)

// The FaSR paper's (004) figures.
func init() {
	registerPaper(paperPreset{
		Name: "fasr-fig7c", Paper: "FaSR (004)", Figure: "Fig. 7c",
		Summary: "goodput at 5K QPs against loss: the go-back-N NIC whose contexts do not fit (CX6-like), SRNIC, IRN+ and FaSR, with the NIC's per-frame service time",
		Params: []paperParam{
			{"QPs", "5000", "§V-C2: 5K concurrent QPs"},
			{"link", "100 Gb/s, each NIC transmitting at that rate", "§V-A: 100 Gbps FPGA boards, Tofino switches"},
			{"base RTT", "6 µs (3 µs each way)", "§V-A: about 6 µs"},
			{"MTU", "1024 B", "§V-A"},
			{"message", "8 KiB RDMA WRITE, one outstanding per QP, reposted on completion", "§V-B: 8KB (Fig. 7a's); §V-A perftest; per-QP depth not given, 1 keeps 5K QPs' 40K packets in flight"},
			{"loss", "0, 0.1, 0.5, 1% random, both directions", "§V-A: loss injected on the switch; the x-axis points are not in the text"},
			{"service time", "every frame occupies its NIC's receive or transmit pipeline for its wire time at 100 Gb/s, every NIC", "§II: a stall idles a pipeline at line rate (dataplane.Config.ServiceRate)"},
			{"gbn NIC", fmt.Sprintf("go-back-N, %d B on chip: %d contexts", sweep.CX6Budget(), sweep.CX6Contexts), "§V-C1/Fig. 7b: CX6 drops past 256 QPs (its 2 MB also holds other state)"},
			{"srnic NIC", fmt.Sprintf("srnic, %d B on chip (256 + 12 B per QP: all 5000 fit), bitmaps in host memory, %v per query at each end", sweep.FaSRBudget, sweep.FasrFig7aHostLatency), "§V-A: 256 B QPC + 12 B, 1.2 µs per bitmap access; §II: 1.4 µs per SR query (Fig. 7a's)"},
			{"irn NIC", fmt.Sprintf("irn (IRN+), %d B on chip (256 + 20 B + five 500-bit bitmaps: 589 B per QP, 2,376 fit)", sweep.FaSRBudget), "§V-A: IRN+ stores WQEs in host memory; 256 B QPC, 20 B SR state, 5 BDP-size bitmaps; §II: 500 slots"},
			{"fasr NIC", fmt.Sprintf("fasr, %d B on chip", sweep.FaSRBudget), "§V-A: 1.4 MB of 3.2 MB SRAM for QP contexts"},
			{"budgeted NICs", "both (server and clients)", "§V-C1: 1 server, 3 clients, each with 1.7K-5K QPs, past any 256-context cache"},
			{"miss stall", "1 µs per context fetch", "softnic's model (a PCIe read; StaR §4's calibration); the paper gives no figure"},
			{"TX scheduling", "gbn packet by packet among QPs (TxBurst 1); srnic, irn, fasr a WQE (8 packets) per QP turn", "departure: the paper does not say; the FPGA NICs share SRNIC's WQE scheduling (§V-A, §V-D1); fasr-fig7c-msgburst.csv gives gbn 8 packets per turn too"},
			{"ACK timeout", "code 14 (67 ms), all", "perftest's default (§V-A perftest)"},
			{"RTO_low, RTO_high", "100, 320 µs (srnic, irn, fasr)", "IRN's (§4.1); the schemes' own"},
			{"warm-up, window", "20 ms, 40 ms simulated", "softnic: steady state"},
		},
		Run:         runFasrFig7c,
		TestbedNote: "fabric only: the effect is a hardware NIC's context cache missing at 100 Gb/s with 5000 QPs in flight, and the testbed's two daemons at 1.5 Gb/s on 2 cores cannot carry 5000 QPs at a rate where a miss costs anything measurable",
	})
}

func runFasrFig7c(o paperOpts) error {
	qps, losses, warm, meas := 5000, sweep.FasrFig7cLosses, 20*time.Millisecond, 40*time.Millisecond
	if o.Quick {
		qps, losses, warm, meas = 300, []float64{0, 0.01}, time.Millisecond, 2*time.Millisecond
	}
	labels := map[string]string{"gbn": fmt.Sprintf("gbn, CX6-like (%d contexts; 1 packet per turn)", sweep.CX6Contexts), "srnic": "srnic (bitmaps in host memory)",
		"irn": "irn+ (589 B contexts, 2,376 on chip; 8 packets per turn)", "fasr": "fasr (1.4 MB on chip)"}
	fmt.Fprintf(o.Stdout, " %d QPs, service time at 100 Gb/s\n %-5s %5s %7s %9s %12s %7s %12s %8s\n", qps, "nic", "turn", "loss%", "Gb/s", "msgs/s", "hit", "retransmits", "wall")
	point := func(nic sweep.FasrFig7cNIC, l float64, burst int) (sweep.FasrFig7cPoint, error) {
		p, err := sweep.RunFasrFig7c(nic, qps, l, burst, warm, meas)
		if err == nil {
			fmt.Fprintf(o.Stdout, " %-5s %5d %7g %9.3f %12.0f %7.3f %12d %8v\n", p.NIC, burst, l*100, p.GoodputGbps, p.MsgRate, p.HitRate, p.Retransmits, p.Wall.Round(time.Millisecond))
		}
		return p, err
	}
	var ps, burst8 []sweep.FasrFig7cPoint
	for _, nic := range sweep.FasrFig7cNICs() {
		for _, l := range losses {
			p, err := point(nic, l, sweep.FasrFig7cTurn(nic))
			if err != nil {
				return err
			}
			ps = append(ps, p)
			if sweep.FasrFig7cTurn(nic) == 8 {
				burst8 = append(burst8, p)
			}
		}
		if sweep.FasrFig7cTurn(nic) != 8 && !o.Quick {
			// fasr-fig7c-msgburst: this NIC with a WQE per turn too.
			for _, l := range losses {
				p, err := point(nic, l, 8)
				if err != nil {
					return err
				}
				burst8 = append(burst8, p)
			}
		}
	}
	for _, l := range losses {
		g, base := map[string]float64{}, map[string]float64{}
		for _, p := range ps {
			if p.Loss == l {
				g[p.NIC] = p.GoodputGbps
			}
			if p.Loss == 0 {
				base[p.NIC] = p.GoodputGbps
			}
		}
		if g["gbn"] > 0 && base["fasr"] > 0 {
			fmt.Fprintf(o.Stdout, " at %g%% loss fasr/gbn = %.1fx; of fasr's lossless: gbn %.3f, srnic %.3f, irn %.3f, fasr %.3f\n", l*100, g["fasr"]/g["gbn"],
				g["gbn"]/base["fasr"], g["srnic"]/base["fasr"], g["irn"]/base["fasr"], g["fasr"]/base["fasr"])
		}
	}
	save := func(name, gbnTurn string, ps []sweep.FasrFig7cPoint) error {
		labels["gbn"] = fmt.Sprintf("gbn, CX6-like (%d contexts; %s per turn)", sweep.CX6Contexts, gbnTurn)
		csvPath, err := sweep.SaveFasrFig7c(o.Out, name, ps)
		if err != nil {
			return err
		}
		png, err := sweepplot.FasrFig7c(o.Out, name, fmt.Sprintf("FaSR Fig. 7c: %d QPs, 8 KiB WRITEs, 100 Gb/s, service time", qps), labels, ps)
		fmt.Fprintln(o.Stdout, " wrote", csvPath, png)
		return err
	}
	if err := save("fasr-fig7c", "1 packet", ps); err != nil || o.Quick {
		return err
	}
	return save("fasr-fig7c-msgburst", "8 packets", burst8)
}

// The deep dive's parameters, shared by Fig. 9b and Fig. 10.
var fasrDiveParams = []paperParam{
	{"link", "100 Gb/s", "§V-D3: the servers' links (NS3 fat tree; softnic: one link)"},
	{"base RTT", "40 µs (20 µs each way)", "§V-D3"},
	{"MTU", "1024 B", "§V-D3: 1KB"},
	{"bitmap pool", "128 blocks of 16 bits (256 B) + 32 SR units", "§V-D3: 270 B; the recovery package's default pool"},
	{"traffic", "512 packets of WRITEs in flight in all: 64/QPs 8 KiB WRITEs per QP up to 64 QPs, then one WRITE of 512/QPs packets (4 KiB at 128 QPs, 1 KiB at 512); BDP cap 128 per QP", "§III-A: BDP 500 packets; the paper's websearch/datamining loads are not modelled"},
	{"loss", "random, both directions", "§V-D: random loss (the paper's incast case is not modelled)"},
	{"on-chip budget", fmt.Sprintf("%d B, both NICs (every context fits)", sweep.FaSRBudget), "§V-A"},
	{"warm-up, window", "10 ms, 20 ms simulated", "softnic: steady state"},
}

func init() {
	registerPaper(paperPreset{
		Name: "fasr-fig9", Paper: "FaSR (004)", Figure: "Fig. 9b",
		Summary:     "share of FaSR's SR operations on the fast path (no bitmap), against QPs and loss",
		Params:      append([]paperParam{{"QPs, loss", "2, 8, 32, 128, 512 QPs at 0.1, 1, 5%", "§V-D: loss scenarios; QP counts as Fig. 10's"}}, fasrDiveParams...),
		Run:         func(o paperOpts) error { return runFasrDive(o, "fasr-fig9", "9b", []float64{0.001, 0.01, 0.05}) },
		TestbedNote: "fabric only for now: sweep-qps.sh could carry 2-512 QPs at these losses, but it records neither sr_rx_fast_path nor sr_tx_fast_path per run",
	})
	registerPaper(paperPreset{
		Name: "fasr-fig10", Paper: "FaSR (004)", Figure: "Fig. 10",
		Summary:     "peak use of FaSR's shared bitmap pool at 1% loss against concurrent QPs",
		Params:      append([]paperParam{{"QPs, loss", "2, 8, 32, 128, 512 QPs at 1%", "§V-D3/Fig. 10: 2QP, 8QP, ... at 1%"}}, fasrDiveParams...),
		Run:         func(o paperOpts) error { return runFasrDive(o, "fasr-fig10", "10", []float64{0.01}) },
		TestbedNote: "fabric only for now: sweep-qps.sh could carry 2-512 QPs at 1% loss, but it records no pool peak (pool_fasr_*_peak) per run",
	})
}

func runFasrDive(o paperOpts, name, fig string, losses []float64) error {
	qps, warm, meas := []int{2, 8, 32, 128, 512}, 10*time.Millisecond, 20*time.Millisecond
	if o.Quick {
		qps, losses, warm, meas = []int{2, 32}, losses[len(losses)-1:], time.Millisecond, 2*time.Millisecond
	}
	fmt.Fprintf(o.Stdout, " %5s %6s %9s %10s %10s %10s %10s %6s %12s %9s %8s\n", "QPs", "loss%", "Gb/s", "rx fast", "rx slow", "tx fast", "tx slow", "fast", "blocks peak", "fallbacks", "wall")
	var ps []sweep.FasrDivePoint
	for _, l := range losses {
		for _, n := range qps {
			p, err := sweep.RunFasrDive(n, l, warm, meas)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, " %5d %6g %9.3f %10d %10d %10d %10d %6.3f %8d/%-3d %9d %8v\n", n, l*100, p.GoodputGbps, p.RxFast, p.RxSlow, p.TxFast, p.TxSlow, p.FastShare(), p.BlocksPeak, p.BlocksSlots, p.Fallbacks, p.Wall.Round(time.Millisecond))
			ps = append(ps, p)
		}
	}
	csvPath, err := sweep.SaveFasrDive(o.Out, name, ps)
	if err != nil {
		return err
	}
	png, err := sweepplot.FasrDive(o.Out, name, fig, ps)
	fmt.Fprintln(o.Stdout, " wrote", csvPath, png)
	return err
}
