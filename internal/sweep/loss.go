package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

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
	// Pcap, when set, receives a pcap of every frame the writer's NIC
	// sends and receives (softnic-sweep loss -pcap, one point).
	Pcap io.Writer
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
	r, err := perftest.WriteBWEmbedded(perftest.Options{Size: c.Size, Iters: c.Iters, TxDepth: c.TxDepth, MTU: c.MTU, Scheme: c.Scheme, Seed: c.Seed, Params: c.Params, Pcap: c.Pcap}, link)
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

// WritePaperLossCSV writes the same rows with the paper presets' columns
// first (scheme, loss as a fraction, relative, as igbn-fig6a.csv has
// them), then the rest of loss.csv's: the testbed's run of a paper's
// workload (scripts/sweep-loss.sh with SOFTNIC_SWEEP_PAPER).
func WritePaperLossCSV(w io.Writer, rs []LossResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "loss", "relative", "size", "iterations", "mtu", "goodput_gbps", "retransmits", "ack_timeouts"})
	for _, r := range rs {
		cw.Write([]string{r.Scheme, strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.FormatFloat(r.Relative, 'f', 4, 64),
			strconv.Itoa(r.Size), strconv.Itoa(r.Iters), r.MTU.String(), strconv.FormatFloat(r.Gbps, 'f', 3, 64),
			strconv.FormatUint(r.Retransmits, 10), strconv.FormatUint(r.Timeouts, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// SortLossByScheme returns the rows by scheme, in the order the schemes
// first appear, then by loss.
func SortLossByScheme(rs []LossResult) []LossResult {
	first := map[string]int{}
	for i, r := range rs {
		if _, ok := first[r.Scheme]; !ok {
			first[r.Scheme] = i
		}
	}
	out := append([]LossResult(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := first[out[i].Scheme], first[out[j].Scheme]; a != b {
			return a < b
		}
		return out[i].Loss < out[j].Loss
	})
	return out
}

// SaveLoss writes the rows to <dir>/loss.csv and returns its path (the
// plot: softnic-sweep, internal/sweepplot).
func SaveLoss(dir string, rs []LossResult) (string, error) {
	return saveCSV(dir, "loss.csv", func(w io.Writer) error { return WriteLossCSV(w, rs) })
}

// SaveLossAs writes the rows to <dir>/<name> (a paper preset's file).
func SaveLossAs(dir, name string, rs []LossResult) (string, error) {
	return saveCSV(dir, name, func(w io.Writer) error { return WriteLossCSV(w, rs) })
}
