package perftest

import (
	"math"
	"slices"
	"time"
)

// LatStats summarises latency samples the way perftest's latency tests
// report them.
type LatStats struct {
	Min, Max time.Duration
	// Typical is the median, which perftest calls t_typical: the sample
	// in the middle of the sorted list (index n/2).
	Typical time.Duration
	Avg     time.Duration
	Stdev   time.Duration
	P99     time.Duration // 99th percentile, nearest rank
	P999    time.Duration // 99.9th percentile, nearest rank
}

// Latencies computes the statistics of samples, sorting samples in place.
// It returns the zero value for no samples.
func Latencies(samples []time.Duration) LatStats {
	n := len(samples)
	if n == 0 {
		return LatStats{}
	}
	slices.Sort(samples)
	var sum float64
	for _, s := range samples {
		sum += float64(s)
	}
	mean := sum / float64(n)
	var sq float64
	for _, s := range samples {
		d := float64(s) - mean
		sq += d * d
	}
	return LatStats{
		Min:     samples[0],
		Max:     samples[n-1],
		Typical: samples[n/2],
		Avg:     time.Duration(math.Round(mean)),
		// The population deviation (divide by n), as perftest prints.
		Stdev: time.Duration(math.Round(math.Sqrt(sq / float64(n)))),
		P99:   Percentile(samples, 99),
		P999:  Percentile(samples, 99.9),
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample such that at least p% of the
// samples are at or below it. Unlike an interpolating definition it is
// always a latency that was actually observed, and for 1000 samples the
// 99.9th percentile is the maximum, as in perftest.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// Work in integer thousandths of a percent so that 99.9% of 1000 is
	// exactly rank 999, which float arithmetic turns into 999.0000000001.
	rank := (int64(math.Round(p*1000))*int64(n) + 100000 - 1) / 100000
	rank = min(max(rank, 1), int64(n))
	return sorted[rank-1]
}

// MaxPeakIters is the largest run whose BW peak is computed: perftest
// skips the peak above 20000 iterations ("WARNING: BW peak won't be
// measured in this run"), as the search takes time quadratic in them.
const MaxPeakIters = 20000

// peakRecorder keeps what perftest's BW peak is computed from: the time
// each WR was posted (tposted, in posting order over all QPs) and the
// time each completion was polled (tcompleted, in polling order).
type peakRecorder struct {
	posted, completed []time.Duration
	list              int // WRs per post call (-l), the step of the search
}

func newPeakRecorder(n, list int) *peakRecorder {
	return &peakRecorder{posted: make([]time.Duration, 0, n), completed: make([]time.Duration, 0, n), list: max(list, 1)}
}

// post records k WRs posted at t.
func (p *peakRecorder) post(t time.Duration, k int) {
	for range k {
		p.posted = append(p.posted, t)
	}
}

// complete records k completions polled at t.
func (p *peakRecorder) complete(t time.Duration, k int) {
	for range k {
		p.completed = append(p.completed, t)
	}
}

// msgRate is perftest's BW peak as a message rate (print_report_bw): the
// shortest time per message over every stretch from the post of WR i to
// the completion of WR j >= i, (tcompleted[j] - tposted[i]) / (j - i + 1),
// with i stepping by the post list. It is 0 when nothing completed.
//
// This is perftest's definition, not a sustained rate: with WRs in
// flight, a short stretch that starts at a late post and ends at a burst
// of completions reads the burst as a rate, so the peak of a pipelined
// run sits well above its average, the more so the more completions
// arrive batched (a poll loop that was preempted catches up at once).
func (p *peakRecorder) msgRate() float64 {
	n := min(len(p.posted), len(p.completed))
	if n == 0 {
		return 0
	}
	best := math.Inf(1)
	for i := 0; i < n; i += p.list {
		for j := i; j < n; j++ {
			if t := float64(p.completed[j]-p.posted[i]) / float64(j-i+1); t < best {
				best = t
			}
		}
	}
	if !(best > 0) {
		return 0
	}
	return 1e9 / best
}

// bwRow fills the bandwidth columns from a run of iters messages of size
// bytes that took elapsed, with the peak message rate (0: not measured).
func bwRow(r *Row, size, iters int, elapsed time.Duration, peakMsgRate float64) {
	r.Bytes, r.Iters = size, iters
	if elapsed <= 0 || iters == 0 {
		return
	}
	rate := float64(iters) / elapsed.Seconds()
	r.MsgRateMpps = rate / 1e6
	r.AvgGbps = rate * float64(size) * 8 / 1e9
	r.PeakGbps = peakMsgRate * float64(size) * 8 / 1e9
}
