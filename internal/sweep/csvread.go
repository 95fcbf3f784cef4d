package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The testbed sweeps (scripts/sweep-loss.sh, scripts/sweep-qps.sh) measure
// with softnic-bench between two daemons and write one CSV row per run, in
// the columns of loss.csv or qps.csv plus their own (rep, status, error,
// ...). The readers here take the known columns by header name and ignore
// the rest, so those files can be combined and plotted with the embedded
// sweeps' code.

// table is a CSV file read by header name.
type table struct {
	col  map[string]int
	rows [][]string
}

func readTable(r io.Reader, need ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("sweep: empty CSV")
	}
	t := &table{col: map[string]int{}, rows: recs[1:]}
	for i, h := range recs[0] {
		t.col[strings.TrimSpace(h)] = i
	}
	for _, n := range need {
		if _, ok := t.col[n]; !ok {
			return nil, fmt.Errorf("sweep: CSV has no %q column (header %v)", n, recs[0])
		}
	}
	return t, nil
}

// get returns row's value in column name ("" when the column or the cell
// is missing).
func (t *table) get(row []string, name string) string {
	i, ok := t.col[name]
	if !ok || i >= len(row) {
		return ""
	}
	return strings.TrimSpace(row[i])
}

// ok reports whether a row is a successful run: rows of a file with a
// status column count only when it says "ok".
func (t *table) ok(row []string) bool {
	if _, has := t.col["status"]; !has {
		return true
	}
	return t.get(row, "status") == "ok"
}

// numbers parses the named columns of row; an empty cell is zero.
type parser struct {
	t   *table
	row []string
	n   int // line number, for errors
	err error
}

func (p *parser) float(name string) float64 {
	s := p.t.get(p.row, name)
	if s == "" || p.err != nil {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		p.err = fmt.Errorf("sweep: CSV line %d, %s: %v", p.n, name, err)
	}
	return v
}

func (p *parser) int(name string) int { return int(p.float(name)) }

// micros parses a column of microseconds.
func (p *parser) micros(name string) time.Duration {
	return time.Duration(p.float(name) * float64(time.Microsecond))
}

func (p *parser) uint(name string) uint64 {
	v := p.float(name)
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// ReadLossCSV reads rows in loss.csv's columns (scheme, loss, size,
// iterations, mtu, goodput_gbps, relative, retransmits, ack_timeouts; by
// header name, other columns ignored). With a status column only the
// rows whose status is "ok" are returned.
func ReadLossCSV(r io.Reader) ([]LossResult, error) {
	t, err := readTable(r, "scheme", "loss", "goodput_gbps")
	if err != nil {
		return nil, err
	}
	var rs []LossResult
	for i, row := range t.rows {
		if !t.ok(row) {
			continue
		}
		p := parser{t: t, row: row, n: i + 2}
		var res LossResult
		res.Scheme = t.get(row, "scheme")
		res.Loss = p.float("loss")
		res.Size = p.int("size")
		res.Iters = p.int("iterations")
		if m := p.int("mtu"); m != 0 && p.err == nil {
			if res.MTU, err = qp.MTUFromBytes(m); err != nil {
				return nil, fmt.Errorf("sweep: CSV line %d: %v", i+2, err)
			}
		}
		res.Gbps = p.float("goodput_gbps")
		res.Relative = p.float("relative")
		res.Retransmits = p.uint("retransmits")
		res.Timeouts = p.uint("ack_timeouts")
		if p.err != nil {
			return nil, p.err
		}
		rs = append(rs, res)
	}
	return rs, nil
}

// Spread is what the repeated runs of one point measured.
type Spread struct {
	Runs     int
	Min, Max float64
}

// CombineLoss merges repeated runs of a (scheme, loss) point into one row,
// the run with the median goodput (the lower median of an even count, so
// the row is a run that happened, with its own retransmits and timeouts),
// in the order the points first appear, and fills Relative from each
// scheme's combined lossless row. spread has the goodput range of each
// returned row, index for index.
func CombineLoss(rs []LossResult) (out []LossResult, spread []Spread) {
	type key struct {
		scheme string
		loss   float64
	}
	groups := map[key][]LossResult{}
	var order []key
	for _, r := range rs {
		k := key{r.Scheme, r.Loss}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		g := groups[k]
		sort.SliceStable(g, func(i, j int) bool { return g[i].Gbps < g[j].Gbps })
		out = append(out, g[(len(g)-1)/2])
		spread = append(spread, Spread{Runs: len(g), Min: g[0].Gbps, Max: g[len(g)-1].Gbps})
	}
	for i := range out {
		out[i].Relative = 0
	}
	Relativize(out)
	return out, spread
}

// ReadQPCSV reads rows in qps.csv's columns (by header name, other columns
// ignored; with a status column only "ok" rows). An empty or missing
// sr_bytes is filled with SRBytes for the scheme when this binary has it.
func ReadQPCSV(r io.Reader) ([]QPResult, error) {
	t, err := readTable(r, "scheme", "qps", "size", "loss", "msg_rate")
	if err != nil {
		return nil, err
	}
	var rs []QPResult
	for i, row := range t.rows {
		if !t.ok(row) {
			continue
		}
		p := parser{t: t, row: row, n: i + 2}
		var res QPResult
		res.Scheme = t.get(row, "scheme")
		res.QPs = p.int("qps")
		res.Size = p.int("size")
		res.Loss = p.float("loss")
		res.SRAM = p.int("sram_bytes")
		res.Penalty = durationNS(p.float("fetch_penalty_ns"))
		res.Messages = p.uint("messages")
		res.MsgRate = p.float("msg_rate")
		res.GoodputGbps = p.float("goodput_gbps")
		res.Misses = p.uint("cache_misses")
		res.HitRate = p.float("hit_rate")
		res.PeakQPs = p.int("peak_resident_qps")
		res.SRBytes = p.int("sr_bytes")
		res.Retransmits = p.uint("retransmits")
		if p.err != nil {
			return nil, p.err
		}
		if t.get(row, "sr_bytes") == "" {
			if s, err := recovery.New(res.Scheme, recovery.Params{}); err == nil {
				res.SRBytes = SRBytes(s, res.QPs)
			}
		}
		rs = append(rs, res)
	}
	return rs, nil
}

// irnColumns reads the columns IRN's CSVs begin with, as IRNPoint.Label,
// PFCName and CCName write them: the scheme (and an IRN variant after a
// '-'), PFC and the congestion control ("" for none).
func (t *table) irnColumns(row []string) (scheme, variant string, pfc bool, cc string) {
	scheme, variant, _ = strings.Cut(t.get(row, "scheme"), "-")
	if cc = t.get(row, "cc"); cc == "none" {
		cc = ""
	}
	return scheme, variant, t.get(row, "pfc") == "on", cc
}

// ReadIRNCSV reads the rows of an IRN figure's CSV (WriteIRNCSV: scheme,
// pfc, cc, load, seed and the three summaries; by header name), as far
// as charts need them: a scheme "irn-gbn" is irn's variant "gbn".
func ReadIRNCSV(r io.Reader) ([]IRNResult, error) {
	t, err := readTable(r, "scheme", "pfc", "cc", "seed", "avg_slowdown", "avg_fct_us", "p99_fct_us")
	if err != nil {
		return nil, err
	}
	var rs []IRNResult
	for i, row := range t.rows {
		p := parser{t: t, row: row, n: i + 2}
		var res IRNResult
		res.Scheme, res.Variant, res.PFC, res.CC = t.irnColumns(row)
		res.Load = p.float("load")
		res.Seed = p.uint("seed")
		res.K = p.int("k")
		res.AvgSlowdown = p.float("avg_slowdown")
		res.AvgFCT = p.micros("avg_fct_us")
		res.P99FCT = p.micros("p99_fct_us")
		if p.err != nil {
			return nil, p.err
		}
		rs = append(rs, res)
	}
	return rs, nil
}

// ReadIncastCSV reads the rows of irn-fig9.csv (WriteIncastCSV; by header
// name) as far as charts need them.
func ReadIncastCSV(r io.Reader) ([]IncastResult, error) {
	t, err := readTable(r, "scheme", "pfc", "cc", "m", "seed", "rct_us")
	if err != nil {
		return nil, err
	}
	var rs []IncastResult
	for i, row := range t.rows {
		p := parser{t: t, row: row, n: i + 2}
		var res IncastResult
		res.Scheme, res.Variant, res.PFC, res.CC = t.irnColumns(row)
		res.M = p.int("m")
		res.Seed = p.uint("seed")
		res.K = p.int("k")
		res.Total = p.int("total_bytes")
		res.RCT = p.micros("rct_us")
		if p.err != nil {
			return nil, p.err
		}
		rs = append(rs, res)
	}
	return rs, nil
}
