package main

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/internal/sweepplot"
)

func init() {
	registerPaper(paperPreset{
		Name: "fasr-fig7a", Paper: "FaSR (004)", Figure: "Fig. 7a",
		Summary: "one QP's goodput against loss: CX6-like go-back-N, SRNIC, IRN, FaSR, with the NIC's per-frame service time",
		Params: []paperParam{
			{"QPs", "1", "§V-B: \"a single QP continuously sending 8KB between two servers\""},
			{"message", "8 KiB RDMA WRITE, 128 outstanding", "§V-B: 8KB; §V-A perftest, whose tx depth is 128"},
			{"link", "100 Gb/s, each NIC transmitting at that rate", "§V-A: 100 Gbps FPGA boards"},
			{"base RTT", "6 µs (3 µs each way)", "§V-A: about 6 µs"},
			{"MTU", "1024 B", "§V-A"},
			{"loss", "0, 0.01, 0.1, 0.5, 1% random, both directions", "§V-A: loss injected on the switch; the text quotes 0.1% and 1%"},
			{"service time", "every frame occupies its NIC's receive or transmit pipeline for its wire time at 100 Gb/s", "§II, Fig. 2: a stall idles a pipeline at line rate (dataplane.Config.ServiceRate); fasr-fig7a-noservice.csv repeats it without"},
			{"srnic host access", sweep.FasrFig7aHostLatency.String() + " per bitmap query, at each end", "§II: \"as high as 1.4us at 1% packet loss\""},
			{"BDP cap", "500 packets (irn, srnic)", "§II: bitmaps of \"500 slots ... 100 Gbps and RTT 40 μs\""},
			{"RTO_high, RTO_low", sweep.FasrFig7aRTO.String() + " (irn, srnic, fasr)", "IRN §4.1's rule: propagation plus a full buffer of twice the BDP (6 µs + 12 µs)"},
			{"gbn NIC", fmt.Sprintf("go-back-N, %d B on chip (CX6-like)", sweep.CX6Budget()), "§V-B; one QP fits any budget"},
			{"ACK timeout", "code 14 (67 ms)", "perftest's default"},
			{"warm-up, window", "2 ms, 100 ms simulated, one seed", "softnic: steady state; the window spans go-back-N's 67 ms timeout"},
		},
		Run:         runFasrFig7a,
		TestbedNote: "fabric only: 100 Gb/s and a 1.4 µs stall per query are a hardware NIC's; the testbed's daemons move about 6 Gb/s",
	})
}

func runFasrFig7a(o paperOpts) error {
	losses, warm, meas := sweep.FasrFig7aLosses, 2*time.Millisecond, 100*time.Millisecond
	if o.Quick {
		losses, warm, meas = []float64{0, 0.01}, time.Millisecond, 2*time.Millisecond
	}
	labels := map[string]string{"gbn": "gbn, CX6-like", "srnic": "srnic (bitmaps in host memory)", "irn": "irn", "fasr": "fasr"}
	for _, service := range []bool{true, false} {
		name, what := "fasr-fig7a", "with the per-frame service time"
		if !service {
			name, what = "fasr-fig7a-noservice", "without a service time (frames take no time)"
		}
		fmt.Fprintf(o.Stdout, " %s: 1 QP, %s\n %-6s %7s %9s %9s %12s %9s %8s\n", name, what, "scheme", "loss%", "Gb/s", "relative", "retransmits", "timeouts", "wall")
		ps, err := sweep.RunFasrFig7a(losses, service, 1, warm, meas, func(p sweep.FasrFig7aPoint) {
			fmt.Fprintf(o.Stdout, " %-6s %7g %9.3f %9.4f %12d %9d %8v\n", p.Scheme, p.Loss*100, p.GoodputGbps, p.Relative, p.Retransmits, p.Timeouts, p.Wall.Round(time.Millisecond))
		})
		if err != nil {
			return err
		}
		csvPath, err := sweep.SaveFasrFig7a(o.Out, name, ps)
		if err != nil {
			return err
		}
		pts := make([]sweep.FasrFig7cPoint, len(ps))
		for i, p := range ps {
			pts[i] = sweep.FasrFig7cPoint{NIC: p.Scheme, Loss: p.Loss, GoodputGbps: p.GoodputGbps}
		}
		png, err := sweepplot.FasrFig7c(o.Out, name, "FaSR Fig. 7a: 1 QP, 8 KiB WRITEs, MTU 1024 (embedded, 100 Gb/s, 6 µs RTT, "+what+")", labels, pts)
		if err != nil {
			return err
		}
		fmt.Fprintln(o.Stdout, " wrote", csvPath, png)
	}
	return nil
}

func init() {
	registerPaper(paperPreset{
		Name: "fasr-fig2", Paper: "FaSR (004)", Figure: "Fig. 2",
		Summary: "SRNIC's goodput at 1% loss against the link rate, with the NIC's per-frame service time",
		Params: []paperParam{
			{"link", "100, 200, 400 Gb/s, each NIC transmitting at that rate", "§II, Fig. 2: RNIC bandwidths"},
			{"workload", "Fig. 7a's: 1 QP, 8 KiB WRITEs, 128 outstanding, MTU 1024, 6 µs base RTT", "the paper does not say what Fig. 2 ran"},
			{"srnic host access", sweep.FasrFig7aHostLatency.String() + " per bitmap query, at each end", "§II: 1.4 µs SR latency"},
			{"service time", "every frame occupies its pipeline for its wire time at the link rate", "§II: \"the backlog of packets waiting to be processed will also increase\""},
			{"BDP cap, RTOs", "500 packets; " + sweep.FasrFig7aRTO.String(), "as fasr-fig7a"},
			{"loss", "0 and 1% random, both directions", "§II: 1%"},
			{"warm-up, window", "2 ms, 20 ms simulated, one seed", "softnic: steady state"},
		},
		Run:         runFasrFig2,
		TestbedNote: "fabric only: 100-400 Gb/s",
	})
}

func runFasrFig2(o paperOpts) error {
	rates, warm, meas := sweep.FasrFig2Rates, 2*time.Millisecond, 20*time.Millisecond
	if o.Quick {
		rates, warm, meas = []float64{100e9, 400e9}, time.Millisecond, time.Millisecond
	}
	fmt.Fprintf(o.Stdout, " %9s %7s %9s %9s %8s\n", "link Gb/s", "loss%", "Gb/s", "relative", "wall")
	ps, err := sweep.RunFasrFig2(rates, 0.01, 1, warm, meas, func(p sweep.FasrFig2Point) {
		fmt.Fprintf(o.Stdout, " %9g %7g %9.3f %9.4f %8v\n", p.LinkGbps, p.Loss*100, p.GoodputGbps, p.Relative, p.Wall.Round(time.Millisecond))
	})
	if err != nil {
		return err
	}
	csvPath, err := sweep.SaveFasrFig2(o.Out, "fasr-fig2", ps)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Stdout, " wrote", csvPath)
	return nil
}
