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

// PeakSpan is the stretch of time BW peak is measured over.
const PeakSpan = 10 * time.Millisecond

// peakMeter tracks BW peak: the best average rate over any stretch of at
// least span of a run. perftest takes its peak from single messages,
// which on a pipelined queue mostly measures how completions were
// batched; a software NIC sharing two cores with other programs, whose
// poll loop the kernel may preempt for a few milliseconds and which then
// reports a backlog of completions at once, would make that figure
// meaningless. Over 10 ms, the peak is a rate the path sustained.
type peakMeter struct {
	span  time.Duration
	marks []mark // possible window starts, oldest first, from head on
	head  int
	total int     // completions so far
	best  float64 // messages per second
}

type mark struct {
	t     time.Duration
	count int // completions before t
}

func newPeakMeter(span time.Duration) *peakMeter {
	return &peakMeter{span: span, marks: []mark{{0, 0}}}
}

// add records k completions observed at t (time since the run's start).
func (m *peakMeter) add(t time.Duration, k int) {
	m.total += k
	// Window starts more than a span back are of no more use, except the
	// newest of them.
	for m.head+1 < len(m.marks) && t-m.marks[m.head+1].t >= m.span {
		m.head++
	}
	if start := m.marks[m.head]; t-start.t >= m.span {
		m.best = max(m.best, float64(m.total-start.count)/(t-start.t).Seconds())
	}
	// Keep a start every span/64 at most: memory stays bounded by the
	// span, not by the completion rate, at the cost of windows up to
	// 1/64 longer than the span.
	if last := m.marks[len(m.marks)-1]; t-last.t >= m.span/64 {
		if m.head > len(m.marks)/2 {
			m.marks = append(m.marks[:0], m.marks[m.head:]...)
			m.head = 0
		}
		m.marks = append(m.marks, mark{t, m.total})
	}
}

// msgRate is the peak in messages per second; 0 until a run has lasted a
// span.
func (m *peakMeter) msgRate() float64 { return m.best }

// bwRow fills the bandwidth columns from a run of iters messages of size
// bytes that took elapsed, with the peak message rate from meter.
func bwRow(r *Row, size, iters int, elapsed time.Duration, peakMsgRate float64) {
	r.Bytes, r.Iters = size, iters
	if elapsed <= 0 || iters == 0 {
		return
	}
	rate := float64(iters) / elapsed.Seconds()
	r.MsgRateMpps = rate / 1e6
	r.AvgGbps = rate * float64(size) * 8 / 1e9
	// A run shorter than the span has no peak of its own, and the best
	// stretch is never slower than the whole run.
	r.PeakGbps = max(peakMsgRate, rate) * float64(size) * 8 / 1e9
}
