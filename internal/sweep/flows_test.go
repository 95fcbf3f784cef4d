package sweep

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/recovery"
)

// TestIRNFlowSize: the sizes' bands hold their shares (50% in 32 B-1 KB,
// 15% in 200 KB-3 MB) and their mean is IRNMeanFlowSize's.
func TestIRNFlowSize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 400_000
	var small, large int
	var sum float64
	for range n {
		s := IRNFlowSize(r)
		if s < IRNSmallMin || s > IRNLargeMax {
			t.Fatalf("size %d out of range", s)
		}
		if s <= IRNSmallMax {
			small++
		}
		if s >= IRNLargeMin {
			large++
		}
		sum += float64(s)
	}
	if f := float64(small) / n; math.Abs(f-0.5) > 0.005 {
		t.Errorf("single-packet share %.4f, want 0.5", f)
	}
	if f := float64(large) / n; math.Abs(f-0.15) > 0.005 {
		t.Errorf("200 KB-3 MB share %.4f, want 0.15", f)
	}
	mean, want := sum/n, IRNMeanFlowSize()
	if math.Abs(mean-want)/want > 0.02 {
		t.Errorf("mean %.0f B, want %.0f B", mean, want)
	}
	t.Logf("mean %.0f B (analytic %.0f B)", mean, want)
}

// TestIRNFlowsPoisson: each host's arrivals are a Poisson process of the
// rate the load asks for (count and the interarrival's mean and
// coefficient of variation, 1 for an exponential), destinations are
// never the source and spread over the others, and the same seed draws
// the same flows.
func TestIRNFlowsPoisson(t *testing.T) {
	const hosts, load, rate = 8, 0.7, 40e9
	horizon := 200 * time.Millisecond
	fs := IRNFlows(hosts, load, rate, horizon, 5)
	perSec := load * rate / 8 / IRNMeanFlowSize()
	want := perSec * horizon.Seconds()
	last := make([]time.Duration, hosts)
	count := make([]int, hosts)
	dsts := make([]int, hosts)
	var gaps []float64
	for i, f := range fs {
		if f.Src == f.Dst {
			t.Fatalf("flow %d to itself", i)
		}
		if i > 0 && f.Arrive < fs[i-1].Arrive {
			t.Fatal("not sorted by arrival")
		}
		gaps = append(gaps, (f.Arrive - last[f.Src]).Seconds())
		last[f.Src] = f.Arrive
		count[f.Src]++
		dsts[f.Dst]++
	}
	for h, c := range count {
		if math.Abs(float64(c)-want) > 4*math.Sqrt(want) {
			t.Errorf("host %d: %d flows, want %.0f ± %.0f", h, c, want, 4*math.Sqrt(want))
		}
		if math.Abs(float64(dsts[h])-want) > 4*math.Sqrt(want) {
			t.Errorf("host %d: destination of %d flows, want about %.0f", h, dsts[h], want)
		}
	}
	var m, v float64
	for _, g := range gaps {
		m += g
	}
	m /= float64(len(gaps))
	for _, g := range gaps {
		v += (g - m) * (g - m)
	}
	cv := math.Sqrt(v/float64(len(gaps))) / m
	if math.Abs(m*perSec-1) > 0.03 || math.Abs(cv-1) > 0.05 {
		t.Errorf("interarrival mean %.3g s (want %.3g), CV %.3f (want 1)", m, 1/perSec, cv)
	}
	again := IRNFlows(hosts, load, rate, horizon, 5)
	if len(again) != len(fs) || again[len(fs)/2] != fs[len(fs)/2] {
		t.Error("the same seed drew other flows")
	}
	if other := IRNFlows(hosts, load, rate, horizon, 6); len(other) > 0 && len(fs) > 0 && other[0] == fs[0] {
		t.Error("another seed drew the same first flow")
	}
}

// TestIncastFlows: the stripes add up to the total, come from distinct
// senders, none the destination.
func TestIncastFlows(t *testing.T) {
	fs := IncastFlows(54, 13, 7, 150_000_000, 1)
	seen := map[int]bool{}
	sum := 0
	for _, f := range fs {
		if f.Src == 7 || f.Dst != 7 || seen[f.Src] {
			t.Fatalf("%+v", f)
		}
		seen[f.Src] = true
		sum += f.Size
	}
	if len(fs) != 13 || sum != 150_000_000 {
		t.Fatalf("%d flows, %d bytes", len(fs), sum)
	}
}

// TestRunFlowsStar: IRN's workload for 1 ms on a 4-host star (40 Gb/s,
// 2 µs links, IRN's buffers), for irn without PFC and gbn with it: every
// flow completes, every byte arrives (Verify), no slowdown is below 1, and
// the run is deterministic.
func TestRunFlowsStar(t *testing.T) {
	link := fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}
	fs := IRNFlows(4, 0.7, 40e9, time.Millisecond, 3)
	if len(fs) < 20 {
		t.Fatalf("only %d flows", len(fs))
	}
	run := func(scheme string, pfc bool) FlowRunResult {
		sw := fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()}
		conn := dataplane.ConnParams{Timeout: 7}
		if pfc {
			sw.PFC = netsw.DefaultPFC()
			conn = dataplane.ConnParams{TimeoutDisabled: true}
		}
		r, err := RunFlows(FlowRunConfig{
			Network: func(c fabric.Clock) (*fabric.Network, error) {
				return fabric.Star(c, 4, fabric.TopologyConfig{Link: link, Switch: sw, Seed: 1})
			},
			PathLinks: func(int, int) int { return 2 }, Link: link,
			Engine: dataplane.Config{Scheme: scheme, SchemeParams: IRNSchemeParams()},
			Conn:   conn, Flows: fs, Verify: true, Drain: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(scheme, pfc, err)
		}
		if r.Unfinished != 0 || r.Failed != 0 {
			t.Fatalf("%s pfc=%v: %d unfinished, %d failed of %d", scheme, pfc, r.Unfinished, r.Failed, len(fs))
		}
		for _, f := range r.Flows {
			if f.Slowdown < 1 {
				t.Fatalf("%s pfc=%v: flow %+v faster than alone at line rate", scheme, pfc, f)
			}
		}
		t.Logf("%s pfc=%v: %d flows, %d QPs, avg slowdown %.2f, avg FCT %v, p99 FCT %v, drops %d, pauses %d, queue p99 %d B, wall %v",
			scheme, pfc, len(fs), r.QPs, r.AvgSlowdown, r.AvgFCT, r.P99FCT, r.Drops, r.Pauses, r.QueueP99Bytes, r.Wall)
		return r
	}
	a := run(recovery.IRN, false)
	run(recovery.GBN, true)
	if b := run(recovery.IRN, false); b.AvgFCT != a.AvgFCT || b.P99FCT != a.P99FCT || b.Drops != a.Drops {
		t.Fatalf("the same run twice: %v/%v/%d, then %v/%v/%d", a.AvgFCT, a.P99FCT, a.Drops, b.AvgFCT, b.P99FCT, b.Drops)
	}
}

// TestFlowIdeal: one packet over 2 links, and 1 MB over 6, against the
// arithmetic by hand.
func TestFlowIdeal(t *testing.T) {
	// 100 B: a 174-byte frame, stored and forwarded once, a 62-byte ACK
	// twice, 4 × 2 µs of propagation.
	want := time.Duration(math.Ceil((2*174.0*8+2*62*8)/40e9*1e9)) + 8*time.Microsecond
	if got := FlowIdeal(100, 2, 40e9, 2*time.Microsecond); got != want {
		t.Errorf("100 B over 2 links: %v, want %v", got, want)
	}
	if got := FlowIdeal(1_000_000, 6, 40e9, 2*time.Microsecond); got < 200*time.Microsecond+24*time.Microsecond || got > 230*time.Microsecond+24*time.Microsecond {
		t.Errorf("1 MB over 6 links: %v", got)
	}
}

// TestIRNFlowsNoLoad: no load, no horizon or one host draws no flows,
// and returns (a load of 0 once drew gaps of +Inf, which no Duration
// holds, and never ended).
func TestIRNFlowsNoLoad(t *testing.T) {
	for _, c := range []struct {
		hosts   int
		load    float64
		horizon time.Duration
	}{{54, 0, time.Millisecond}, {54, 0.7, 0}, {1, 0.7, time.Millisecond}, {54, -1, time.Millisecond}} {
		if fs := IRNFlows(c.hosts, c.load, 40e9, c.horizon, 1); len(fs) != 0 {
			t.Errorf("%+v: %d flows", c, len(fs))
		}
	}
}
