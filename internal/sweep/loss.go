package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// LossConfig is one point of the loss sweep: perftest's write_bw between
// the two embedded NICs in simulated time.
type LossConfig struct {
	Scheme  string
	Loss    float64 // probability, both directions (data and ACKs)
	Size    int
	Iters   int
	TxDepth int
	MTU     qp.MTU
	Link    perftest.Link
	Seed    uint64
	// Params are the schemes' knobs (zero: the papers' defaults).
	Params recovery.Params
}

// LossResult is one measured point.
type LossResult struct {
	LossConfig
	Gbps        float64
	Relative    float64 // goodput over the same scheme's lossless goodput
	Retransmits uint64
	Timeouts    uint64
	Wall        time.Duration
}

// RunLoss measures one point.
func RunLoss(c LossConfig) (LossResult, error) {
	link := c.Link
	link.Loss = c.Loss
	r, err := perftest.WriteBWEmbedded(perftest.Options{Size: c.Size, Iters: c.Iters, TxDepth: c.TxDepth, MTU: c.MTU, Scheme: c.Scheme, Seed: c.Seed, Params: c.Params}, link)
	if err != nil {
		return LossResult{}, fmt.Errorf("%s at %g%% loss: %w", c.Scheme, c.Loss*100, err)
	}
	return LossResult{LossConfig: c, Gbps: r.AvgGbps, Retransmits: r.A.Retransmits, Timeouts: r.A.LocalAckTimeout, Wall: r.Wall}, nil
}

// Relativize fills Relative from each scheme's lossless point.
func Relativize(rs []LossResult) {
	base := map[string]float64{}
	for _, r := range rs {
		if r.Loss == 0 {
			base[r.Scheme] = r.Gbps
		}
	}
	for i := range rs {
		if b := base[rs[i].Scheme]; b > 0 {
			rs[i].Relative = rs[i].Gbps / b
		}
	}
}

// WriteLossCSV writes the sweep's rows.
func WriteLossCSV(w io.Writer, rs []LossResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "loss", "size", "iterations", "mtu", "goodput_gbps", "relative", "retransmits", "ack_timeouts"})
	for _, r := range rs {
		cw.Write([]string{r.Scheme, strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.Itoa(r.Size), strconv.Itoa(r.Iters),
			r.MTU.String(), strconv.FormatFloat(r.Gbps, 'f', 3, 64), strconv.FormatFloat(r.Relative, 'f', 4, 64),
			strconv.FormatUint(r.Retransmits, 10), strconv.FormatUint(r.Timeouts, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// PlotLoss draws goodput relative to lossless against loss rate, one line
// per scheme: the shape of the papers' throughput-vs-loss figures
// (Improved go-back-N Fig. 6, IRN Fig. 3, FaSR Fig. 7a).
func PlotLoss(path string, rs []LossResult) error {
	return PlotLossTitle(path, "RDMA WRITE goodput under random loss (both directions)", rs)
}

// PlotLossTitle is PlotLoss with its own title.
func PlotLossTitle(path, title string, rs []LossResult) error {
	var names []string
	lines := map[string]plotter.XYs{}
	based := map[string]bool{}
	for _, r := range rs {
		if r.Loss == 0 && r.Gbps > 0 {
			based[r.Scheme] = true
		}
	}
	for _, r := range rs {
		if r.Loss == 0 || !based[r.Scheme] {
			// A lossless point has no place on a log axis: it is the
			// 1.0 every line is relative to; without it (a failed
			// testbed run) a scheme has no relative goodput.
			continue
		}
		if _, ok := lines[r.Scheme]; !ok {
			names = append(names, r.Scheme)
		}
		lines[r.Scheme] = append(lines[r.Scheme], plotter.XY{X: r.Loss * 100, Y: r.Relative})
	}
	sort.Strings(names) // a scheme's colour is its place in the sorted names
	return lineChart(path, title, "loss rate (%)",
		"goodput relative to lossless", false, 1.05, names, lines)
}

// SaveLoss writes loss.csv and loss.png into dir.
func SaveLoss(dir string, rs []LossResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(dir + "/loss.csv")
	if err != nil {
		return nil, err
	}
	if err := WriteLossCSV(f, rs); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return []string{dir + "/loss.csv", dir + "/loss.png"}, PlotLoss(dir+"/loss.png", rs)
}
