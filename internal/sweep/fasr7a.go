package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// FaSR's Fig. 7a (FaSR §V-B, "We evaluate the throughput of a single QP
// continuously sending 8KB between two servers with varying packet loss
// rates"): one QP of 8 KiB WRITEs at perftest's depth (128), 100 Gb/s, a
// base RTT of about 6 µs, MTU 1024, loss both ways, four NICs: the
// CX6-like go-back-N NIC, SRNIC (IRN's selective repeat with its bitmaps in
// host memory), IRN and FaSR. The paper: CX6 about 10% of its lossless
// throughput past 1%, SRNIC -25%, IRN and FaSR under -7%.
//
// What the figure needs from the model is the NIC's service time
// (dataplane.Config.ServiceRate): SRNIC's 1.4 µs bitmap query (§II, Fig.
// 2) idles a pipeline that runs at the line rate, and the time is lost.
// Without it softnic's engine processes frames in no time, so a stall only
// delays the frames behind it and SRNIC loses nothing IRN does not.
//
// The parameters the paper leaves open, chosen from its own text and
// IRN's rules (FasrFig7aParams):
//   - BDP cap (IRN's BDP-FC and both bitmaps): 500 packets, FaSR §II's
//     bitmap "500 slots ... to fit the BDP cap of a network with bandwidth
//     100 Gbps and RTT 40 µs".
//   - RTO_high and RTO_low: 18 µs by IRN's rule (IRN §4.1: the
//     propagation delay plus the queueing of a full buffer on a congested
//     link, with buffers of twice the BDP): 6 µs + 2 x 75 KB at 100 Gb/s.
//   - SRNIC's host access: 1.4 µs (FaSR §II: "the latency of software SR
//     query ... was as high as 1.4us at 1% packet loss"), charged where
//     recovery/srnic.go charges it, at each end.
//   - Each NIC transmits at 100 Gb/s as its MAC would (QPConfig.NICRate).

// FasrFig7aRTO is the preset's RTO_high and RTO_low (IRN's rule above).
const FasrFig7aRTO = 18 * time.Microsecond

// FasrFig7aHostLatency is SRNIC's bitmap query in the preset (FaSR §II).
const FasrFig7aHostLatency = 1400 * time.Nanosecond

// FasrFig7aLosses are the figure's loss rates (fractions); the paper's
// x-axis reaches past 1%, its text quotes 0.1% and 1%.
var FasrFig7aLosses = []float64{0, 0.0001, 0.001, 0.005, 0.01}

// FasrFig7aNICs are the figure's four curves.
func FasrFig7aNICs() []FasrFig7cNIC {
	return []FasrFig7cNIC{
		{"gbn", recovery.GBN, CX6Budget()},
		{"srnic", recovery.SRNIC, FaSRBudget},
		{"irn", recovery.IRN, FaSRBudget},
		{"fasr", recovery.FaSR, FaSRBudget},
	}
}

// FasrFig7aParams are the schemes' knobs in the preset (see above).
func FasrFig7aParams() recovery.Params {
	p := recovery.Params{BDPPackets: 500, RTOHigh: FasrFig7aRTO, RTOLow: FasrFig7aRTO}
	if err := p.Knobs.Set(fmt.Sprintf("srnic.host_latency=%v", FasrFig7aHostLatency)); err != nil {
		panic(err)
	}
	return p
}

// FasrFig7aConfig returns one point; service gives both NICs the per-frame
// service time at the link rate.
func FasrFig7aConfig(nic FasrFig7cNIC, loss float64, service bool, seed uint64, warmup, measure time.Duration) QPConfig {
	return fasrOneQPConfig(nic, DefaultQPLink.RateBps, loss, service, seed, warmup, measure)
}

// fasrOneQPConfig is Fig. 7a's point at a link rate of rate bits/s.
func fasrOneQPConfig(nic FasrFig7cNIC, rate, loss float64, service bool, seed uint64, warmup, measure time.Duration) QPConfig {
	link := DefaultQPLink
	link.RateBps = rate
	link.Delay = 3 * time.Microsecond // §V-A: base RTT about 6 µs
	c := QPConfig{Scheme: nic.Scheme, QPs: 1, Size: 8192, Depth: 128, Loss: loss, SRAM: nic.SRAM, Penalty: qp.DefaultFetchPenalty,
		Link: link, Warmup: warmup, Measure: measure, Seed: seed, MTU: qp.MTU1024, Params: FasrFig7aParams(),
		// perftest's default local ACK timeout (14, 67 ms): go-back-N's.
		Timeout: 14, NICRate: uint64(link.RateBps)}
	if service {
		c.ServiceRate = uint64(link.RateBps)
	}
	return c
}

// FasrFig7aPoint is one measured point.
type FasrFig7aPoint struct {
	Scheme      string
	Loss        float64
	GoodputGbps float64
	Relative    float64 // over the same NIC's lossless goodput
	Retransmits uint64
	Timeouts    uint64
	Wall        time.Duration
}

// RunFasrFig7a measures every NIC at every loss, with or without the
// service time, and fills Relative.
func RunFasrFig7a(losses []float64, service bool, seed uint64, warmup, measure time.Duration, progress func(FasrFig7aPoint)) ([]FasrFig7aPoint, error) {
	var ps []FasrFig7aPoint
	for _, nic := range FasrFig7aNICs() {
		err := lossCurve(losses, "FaSR Fig. 7a, "+nic.Name, func(l float64) QPConfig {
			return FasrFig7aConfig(nic, l, service, seed, warmup, measure)
		}, func(r QPResult, relative float64) {
			p := FasrFig7aPoint{Scheme: nic.Name, Loss: r.Loss, GoodputGbps: r.GoodputGbps, Relative: relative, Retransmits: r.Retransmits, Timeouts: r.Timeouts, Wall: r.Wall}
			if progress != nil {
				progress(p)
			}
			ps = append(ps, p)
		})
		if err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// lossCurve runs cfg at each loss (the first 0) and hands each result to
// each with its goodput over the lossless point's.
func lossCurve(losses []float64, what string, cfg func(loss float64) QPConfig, each func(r QPResult, relative float64)) error {
	var base float64
	for _, l := range losses {
		r, err := RunQPs(cfg(l))
		if err != nil {
			return fmt.Errorf("sweep: %s at %g%% loss: %w", what, l*100, err)
		}
		if l == 0 {
			base = r.GoodputGbps
		}
		relative := 0.0
		if base > 0 {
			relative = r.GoodputGbps / base
		}
		each(r, relative)
	}
	return nil
}

// WriteFasrFig7aCSV writes docs/results/fasr-fig7a.csv: scheme, loss (a
// fraction), goodput_gbps, relative.
func WriteFasrFig7aCSV(w io.Writer, ps []FasrFig7aPoint) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "loss", "goodput_gbps", "relative"})
	for _, p := range ps {
		cw.Write([]string{p.Scheme, strconv.FormatFloat(p.Loss, 'g', -1, 64), strconv.FormatFloat(p.GoodputGbps, 'f', 3, 64), strconv.FormatFloat(p.Relative, 'f', 4, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveFasrFig7a writes <dir>/<name>.csv and returns its path.
func SaveFasrFig7a(dir, name string, ps []FasrFig7aPoint) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteFasrFig7aCSV(w, ps) })
}

// FaSR's Fig. 2 (§II): "Impact of 1.4us SR latency on throughput at
// different RNIC bandwidths": SRNIC at 1% loss against the link rate,
// "the loss of throughput at 1% packet loss on 400Gbps bandwidth can be as
// high as 40%". Fig. 7a's single QP and parameters (FasrFig7aConfig) at
// 100, 200 and 400 Gb/s, with the service time; the RTO rule gives the
// same 18 µs at every rate (a buffer of twice the BDP drains in two base
// round trips).

// FasrFig2Rates are the figure's link rates, bits/s.
var FasrFig2Rates = []float64{100e9, 200e9, 400e9}

// FasrFig2Point is one measured point.
type FasrFig2Point struct {
	LinkGbps    float64
	Loss        float64
	GoodputGbps float64
	Relative    float64 // over the lossless goodput at the same rate
	Wall        time.Duration
}

// RunFasrFig2 measures srnic at every rate, lossless and at loss.
func RunFasrFig2(rates []float64, loss float64, seed uint64, warmup, measure time.Duration, progress func(FasrFig2Point)) ([]FasrFig2Point, error) {
	nic := FasrFig7cNIC{Name: "srnic", Scheme: recovery.SRNIC, SRAM: FaSRBudget}
	var ps []FasrFig2Point
	for _, rate := range rates {
		err := lossCurve([]float64{0, loss}, fmt.Sprintf("FaSR Fig. 2, %g Gb/s", rate/1e9), func(l float64) QPConfig {
			return fasrOneQPConfig(nic, rate, l, true, seed, warmup, measure)
		}, func(r QPResult, relative float64) {
			p := FasrFig2Point{LinkGbps: rate / 1e9, Loss: r.Loss, GoodputGbps: r.GoodputGbps, Relative: relative, Wall: r.Wall}
			if progress != nil {
				progress(p)
			}
			ps = append(ps, p)
		})
		if err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// WriteFasrFig2CSV writes docs/results/fasr-fig2.csv: link_gbps, loss,
// goodput_gbps, relative.
func WriteFasrFig2CSV(w io.Writer, ps []FasrFig2Point) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"link_gbps", "loss", "goodput_gbps", "relative"})
	for _, p := range ps {
		cw.Write([]string{strconv.FormatFloat(p.LinkGbps, 'g', -1, 64), strconv.FormatFloat(p.Loss, 'g', -1, 64), strconv.FormatFloat(p.GoodputGbps, 'f', 3, 64), strconv.FormatFloat(p.Relative, 'f', 4, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveFasrFig2 writes <dir>/<name>.csv and returns its path.
func SaveFasrFig2(dir, name string, ps []FasrFig2Point) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteFasrFig2CSV(w, ps) })
}
