package sweep

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/softnic/softnic/recovery"
)

// IRN's workload (IRN §4.1): every host starts flows as a Poisson
// process, each to a destination drawn uniformly from the other hosts,
// its size from a heavy-tailed distribution: "50% of the flows are single
// packet messages with sizes ranging between 32 bytes-1KB ... 15% of the
// flows are between 200KB-3MB". The paper does not say how sizes are
// spread inside those bands nor what the other 35% are. softnic draws
// the 50% uniformly in [32 B, 1 KB] (any single-packet RPC size alike),
// the remaining 35% log-uniformly in [1 KB, 200 KB] (the band between
// the paper's two, heavy-tailed within it, as the web-search and
// data-mining traces such workloads derive from are) and the 15%
// log-uniformly in [200 KB, 3 MB] (KB = 1000 B, as IRN writes them).
// Then about 92% of the bytes are in the 15% of large flows, as the
// paper's "most of the bytes are in large flows" has it.

// The bands of IRNFlowSize.
const (
	IRNSmallMin, IRNSmallMax   = 32, 1024
	IRNLargeMin, IRNLargeMax   = 200_000, 3_000_000
	IRNSmallShare, IRNMidShare = 0.50, 0.35 // the large band takes the rest, 0.15
)

// IRNFlowSize draws one flow size in bytes.
func IRNFlowSize(r *rand.Rand) int {
	u := r.Float64()
	switch {
	case u < IRNSmallShare:
		return IRNSmallMin + r.IntN(IRNSmallMax-IRNSmallMin+1)
	case u < IRNSmallShare+IRNMidShare:
		return logUniform(r, IRNSmallMax, IRNLargeMin)
	default:
		return logUniform(r, IRNLargeMin, IRNLargeMax)
	}
}

func logUniform(r *rand.Rand, lo, hi int) int {
	v := int(math.Round(float64(lo) * math.Exp(r.Float64()*math.Log(float64(hi)/float64(lo)))))
	return min(max(v, lo), hi)
}

// IRNMeanFlowSize is the distribution's mean in bytes (the continuous
// log-uniform mean (b-a)/ln(b/a) for the two upper bands), which turns a
// load into an arrival rate.
func IRNMeanFlowSize() float64 {
	lu := func(a, b float64) float64 { return (b - a) / math.Log(b/a) }
	return IRNSmallShare*(IRNSmallMin+IRNSmallMax)/2 +
		IRNMidShare*lu(IRNSmallMax, IRNLargeMin) +
		(1-IRNSmallShare-IRNMidShare)*lu(IRNLargeMin, IRNLargeMax)
}

// A Flow is one RDMA WRITE of Size bytes from host Src to host Dst,
// posted at Arrive.
type Flow struct {
	Src, Dst, Size int
	Arrive         time.Duration
}

// IRNFlows draws IRN's workload on hosts hosts: each host's flows arrive
// as a Poisson process of rate load × rateBps / (8 × mean size) from time
// 0 until horizon, each to another host drawn uniformly. Host i draws
// from its own stream seeded by (seed, i), so the flows are a function of
// the arguments alone. They come back sorted by arrival (then host).
func IRNFlows(hosts int, load, rateBps float64, horizon time.Duration, seed uint64) []Flow {
	perSec := load * rateBps / 8 / IRNMeanFlowSize()
	if !(perSec > 0) || horizon <= 0 || hosts < 2 {
		return nil // no load: no flows (an infinite gap is no time.Duration)
	}
	var fs []Flow
	for h := range hosts {
		r := rand.New(rand.NewPCG(seed, uint64(h)+0x9e3779b97f4a7c15))
		t := 0.0
		for {
			t += r.ExpFloat64() / perSec
			at := time.Duration(t * float64(time.Second))
			if at >= horizon {
				break
			}
			d := r.IntN(hosts - 1)
			if d >= h {
				d++
			}
			fs = append(fs, Flow{Src: h, Dst: d, Size: IRNFlowSize(r), Arrive: at})
		}
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Arrive < fs[j].Arrive })
	return fs
}

// IncastFlows is IRN's incast (§4.4.3, after [17]): total bytes striped
// over m senders drawn at random (never dst), all posted at time 0 to
// host dst. The last stripe takes the remainder.
func IncastFlows(hosts, m, dst, total int, seed uint64) []Flow {
	r := rand.New(rand.NewPCG(seed, 0x1ca57))
	others := make([]int, 0, hosts-1)
	for h := range hosts {
		if h != dst {
			others = append(others, h)
		}
	}
	r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	fs := make([]Flow, m)
	for i := range m {
		size := total / m
		if i == m-1 {
			size = total - size*(m-1)
		}
		fs[i] = Flow{Src: others[i], Dst: dst, Size: size}
	}
	return fs
}

// IRNSchemeParams are IRN's recovery parameters (§4.1): RTO_low 100 µs
// with N = 3, RTO_high 320 µs, BDP-FC at 110 packets (40 Gb/s × 24 µs
// over 1 KB packets, §3.2 and §4.1's BDP of 120 KB).
func IRNSchemeParams() recovery.Params {
	return recovery.Params{BDPPackets: 110, RTOLow: 100 * time.Microsecond, RTOHigh: 320 * time.Microsecond, RTOLowThreshold: 3}
}
