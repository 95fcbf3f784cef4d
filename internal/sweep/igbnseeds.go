package sweep

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
)

// IGBNSummary is one point of Fig. 6 over several seeds (IGBNConfig.Seed):
// the runs' mean with an interval. Its IGBNResult holds the sums and
// means: Relative and Gbps the mean over the seeds, Messages, Retransmits,
// Timeouts, Reasons, Unclassified and STSkipped the totals over them.
type IGBNSummary struct {
	IGBNResult
	Seeds int
	// RelMin and RelMax are the lowest and highest seed's relative
	// goodput; RelLo and RelHi the two-sided 95% Student t-interval of the
	// mean (mean -+ t(0.975, n-1) s/sqrt(n)), equal to the mean with one
	// seed.
	RelMin, RelMax, RelLo, RelHi float64
	TimeoutsMin, TimeoutsMax     uint64 // ACK timeouts of the seed with the fewest and the most
}

// tQuantile975 is Student's t distribution's 0.975 quantile for 1 to 30
// degrees of freedom (beyond, the normal's 1.96 is within 2%).
var tQuantile975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// TInterval95 is the mean of xs and its two-sided 95% Student t-interval;
// one value's interval is the value itself.
func TInterval95(xs []float64) (mean, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return 0, 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n == 1 {
		return mean, mean, mean
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	t := 1.96
	if n-1 <= len(tQuantile975) {
		t = tQuantile975[n-2]
	}
	h := t * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	return mean, mean - h, mean + h
}

// SummarizeIGBN groups relativized runs (RelativizeIGBN) by scheme,
// timeout and loss, in the order each point first appears, and sums them
// up over their seeds.
func SummarizeIGBN(rs []IGBNResult) []IGBNSummary {
	type key struct {
		s string
		t uint8
		l float64
	}
	idx := map[key]int{}
	var groups [][]IGBNResult
	for _, r := range rs {
		k := key{r.Scheme, r.Timeout, r.Loss}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	out := make([]IGBNSummary, len(groups))
	for i, g := range groups {
		s := IGBNSummary{Seeds: len(g), RelMin: math.Inf(1), RelMax: math.Inf(-1), TimeoutsMin: math.MaxUint64}
		s.IGBNConfig = g[0].IGBNConfig
		s.Messages, s.Seed = 0, 0
		rel := make([]float64, len(g))
		for j, r := range g {
			rel[j] = r.Relative
			s.Gbps += r.Gbps / float64(len(g))
			s.Elapsed += r.Elapsed
			s.Wall += r.Wall
			s.Messages += r.Messages
			s.Retransmits += r.Retransmits
			s.Timeouts += r.Timeouts
			for k := range s.Reasons {
				s.Reasons[k] += r.Reasons[k]
			}
			s.Unclassified += r.Unclassified
			s.STSkipped += r.STSkipped
			s.SentPkts += r.SentPkts
			s.NaksSent += r.NaksSent
			s.NaksRcvd += r.NaksRcvd
			s.GoBackFree += r.GoBackFree
			s.OutOfSeq += r.OutOfSeq
			s.RelMin, s.RelMax = min(s.RelMin, r.Relative), max(s.RelMax, r.Relative)
			s.TimeoutsMin, s.TimeoutsMax = min(s.TimeoutsMin, r.Timeouts), max(s.TimeoutsMax, r.Timeouts)
		}
		s.Relative, s.RelLo, s.RelHi = TInterval95(rel)
		out[i] = s
	}
	return out
}

// IGBNSummaryResults are the summaries' IGBNResults (the means and sums),
// for what draws or reads single points (sweepplot, Fig. 7).
func IGBNSummaryResults(ss []IGBNSummary) []IGBNResult {
	out := make([]IGBNResult, len(ss))
	for i, s := range ss {
		out[i] = s.IGBNResult
	}
	return out
}

// WriteIGBNSummaryCSV writes one row per point in WriteIGBNCSV's columns
// first (relative and goodput_gbps the mean over the seeds; messages and
// the counters the totals over them), then seeds, relative_min,
// relative_max, relative_ci95_lo, relative_ci95_hi (the mean's 95% Student
// t-interval), ack_timeouts_min and ack_timeouts_max (per seed), then
// igbnCostColumns' totals.
func WriteIGBNSummaryCSV(w io.Writer, ss []IGBNSummary) error {
	cw := csv.NewWriter(w)
	cw.Write(append(append(igbnColumns(), "seeds", "relative_min", "relative_max", "relative_ci95_lo", "relative_ci95_hi", "ack_timeouts_min", "ack_timeouts_max"), igbnCostColumns...))
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	for _, s := range ss {
		row := append(igbnRow(s.IGBNResult), strconv.Itoa(s.Seeds), f(s.RelMin), f(s.RelMax), f(s.RelLo), f(s.RelHi),
			strconv.FormatUint(s.TimeoutsMin, 10), strconv.FormatUint(s.TimeoutsMax, 10))
		cw.Write(append(row, igbnCostRow(s.IGBNResult)...))
	}
	cw.Flush()
	return cw.Error()
}

// igbnCostColumns are the go-back's costs (IGBNResult.SentPkts and on):
// sent_pkts, seq_naks_sent, seq_naks_rcvd, go_back_free, out_of_seq.
var igbnCostColumns = []string{"sent_pkts", "seq_naks_sent", "seq_naks_rcvd", "go_back_free", "out_of_seq"}

func igbnCostRow(r IGBNResult) []string {
	var row []string
	for _, n := range []uint64{r.SentPkts, r.NaksSent, r.NaksRcvd, r.GoBackFree, r.OutOfSeq} {
		row = append(row, strconv.FormatUint(n, 10))
	}
	return row
}

// WriteIGBNRunsCSV writes every seed's run: WriteIGBNCSV's columns, then
// seed and igbnCostColumns.
func WriteIGBNRunsCSV(w io.Writer, rs []IGBNResult) error {
	cw := csv.NewWriter(w)
	cw.Write(append(append(igbnColumns(), "seed"), igbnCostColumns...))
	for _, r := range rs {
		cw.Write(append(append(igbnRow(r), strconv.FormatUint(r.Seed, 10)), igbnCostRow(r)...))
	}
	cw.Flush()
	return cw.Error()
}

// SaveIGBNSeeds writes <dir>/<name>.csv (the summary) and
// <dir>/<name>-runs.csv (every seed's run) and returns their paths.
func SaveIGBNSeeds(dir, name string, rs []IGBNResult, ss []IGBNSummary) (string, string, error) {
	sum, err := saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIGBNSummaryCSV(w, ss) })
	if err != nil {
		return "", "", err
	}
	runs, err := saveCSV(dir, name+"-runs.csv", func(w io.Writer) error { return WriteIGBNRunsCSV(w, rs) })
	return sum, runs, err
}
