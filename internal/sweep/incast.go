package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"
)

// IRN's incast (§4.4.3, Fig. 9): Total bytes striped over M senders drawn
// at random, all to host IncastDst of IRN's fat tree, every stripe posted
// at time 0 as one WRITE on a QP of its own. The request completion time
// (RCT) is when the last stripe completes. The network, links, buffers,
// PFC, ECN and the schemes' parameters are IRNConfig's.
type IncastPoint struct {
	Scheme  string
	Variant string // IRNPoint.Variant
	PFC     bool
	CC      string // "" or "none", "dcqcn", "timely"
	M       int    // senders
	Total   int    // bytes striped over them (IRN: 150 MB)
	Seed    uint64 // the senders' draw and the switches'
	K       int    // fat tree's k
}

// Label is the point's scheme as CSVs write it (IRNPoint.Label).
func (p IncastPoint) Label() string { return IRNPoint{Scheme: p.Scheme, Variant: p.Variant}.Label() }

// IRN's incast size and destination.
const (
	IncastTotal = 150_000_000
	IncastDst   = 0
)

// IncastResult is one row of Fig. 9's CSV.
type IncastResult struct {
	IncastPoint
	RCT time.Duration
	FlowRunResult
}

// RunIncast runs p. A stripe whose QP fails (RETRY_EXC_ERR) is posted
// again whole on a new QP, as an application would (RunFlows): its RCT
// then includes the lost work, and Failed counts it.
func RunIncast(p IncastPoint) (IncastResult, error) {
	cfg := IRNConfig(IRNPoint{Scheme: p.Scheme, Variant: p.Variant, PFC: p.PFC, CC: p.CC, Seed: p.Seed, K: p.K})
	cfg.Flows = IncastFlows(p.K*p.K*p.K/4, p.M, IncastDst, p.Total, p.Seed)
	// The drain bounds the run: ten times the stripes' time at line rate.
	cfg.Drain = 10 * time.Duration(float64(p.Total)*8/float64(IRNLink.RateBps)*float64(time.Second))
	r, err := RunFlows(cfg)
	if err != nil {
		return IncastResult{}, fmt.Errorf("sweep: incast %s pfc=%v cc=%q M=%d seed %d: %w", p.Label(), p.PFC, p.CC, p.M, p.Seed, err)
	}
	if r.Unfinished > 0 {
		return IncastResult{}, fmt.Errorf("sweep: incast %s pfc=%v cc=%q M=%d seed %d: %d stripes unfinished after %v", p.Label(), p.PFC, p.CC, p.M, p.Seed, r.Unfinished, cfg.Drain)
	}
	var rct time.Duration
	for _, f := range r.Flows {
		rct = max(rct, f.FCT)
	}
	r.Flows = nil
	return IncastResult{IncastPoint: p, RCT: rct, FlowRunResult: r}, nil
}

// IncastCSVHeader is Fig. 9's CSV columns.
var IncastCSVHeader = []string{"scheme", "pfc", "cc", "m", "seed", "rct_us", "drops", "pauses", "cnps", "ecn_marks",
	"queue_p99_bytes", "retransmits", "failed", "qps", "k", "total_bytes", "wall_s"}

// WriteIncastCSV writes the rows.
func WriteIncastCSV(w io.Writer, rs []IncastResult) error {
	cw := csv.NewWriter(w)
	cw.Write(IncastCSVHeader)
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, r := range rs {
		cw.Write([]string{r.Label(), PFCName(r.PFC), CCName(r.CC), strconv.Itoa(r.M), u(r.Seed), strconv.FormatFloat(float64(r.RCT)/float64(time.Microsecond), 'f', 1, 64),
			u(r.Drops), u(r.Pauses), u(r.CNPs), u(r.ECNMarks), strconv.Itoa(r.QueueP99Bytes), u(r.Retransmits), strconv.Itoa(r.Failed),
			strconv.Itoa(r.QPs), strconv.Itoa(r.K), strconv.Itoa(r.Total), strconv.FormatFloat(r.Wall.Seconds(), 'f', 2, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveIncast writes <dir>/<name>.csv and returns its path.
func SaveIncast(dir, name string, rs []IncastResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIncastCSV(w, rs) })
}
