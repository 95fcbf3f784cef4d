package netsw

import "math/bits"

// histogram counts values in log-linear buckets, as HdrHistogram does with
// four bits of precision: values below 16 exactly, then 16 buckets per
// power of two, so a bucket's upper bound is at most 1/16 above any value
// in it. Values are clamped to 2^32-1. add does not allocate.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
}

const (
	histSubBits = 4
	histSub     = 1 << histSubBits
	histMaxBits = 32
	histBuckets = histSub + (histMaxBits-histSubBits)*histSub
)

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v)                     // >= histSubBits+1
	mantissa := v >> (e - histSubBits - 1) // in [histSub, 2*histSub)
	return histSub + (e-histSubBits-1)*histSub + int(mantissa-histSub)
}

// histUpper is the largest value of bucket i.
func histUpper(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	shift := (i - histSub) / histSub
	mantissa := uint64(histSub + (i-histSub)%histSub)
	return (mantissa+1)<<shift - 1
}

func (h *histogram) add(v int) {
	u := uint64(max(v, 0))
	if u >= 1<<histMaxBits {
		u = 1<<histMaxBits - 1
	}
	h.counts[histIndex(u)]++
	h.total++
}

func (h *histogram) quantile(q float64) int {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	if float64(rank) < q*float64(h.total) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return int(histUpper(i))
		}
	}
	return int(histUpper(histBuckets - 1))
}
