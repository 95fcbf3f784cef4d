package sweep

import (
	"testing"
	"time"

	"github.com/softnic/softnic/recovery"
)

// TestMeloFCTFromPost: with one QP the flows take turns, most waiting for
// it; each flow's FCT runs from its WRITE's post to its completion, so
// the flows' [post, done] intervals follow one another without overlap,
// the wait is reported apart, and the 99th percentile is of done - post.
func TestMeloFCTFromPost(t *testing.T) {
	r, err := RunMeloFCT(MeloFCTConfig{Scheme: recovery.GBN, Load: 0.9, Flows: 12, Loss: 0, Paths: 4, QPs: 1, Timeout: 12, Seed: 3, Window: 128})
	if err != nil {
		t.Fatal(err)
	}
	var fcts []time.Duration
	waited := 0
	var prevDone time.Duration
	for i, f := range r.Records {
		switch {
		case f.Posted < f.Arrived || f.Done <= f.Posted:
			t.Fatalf("flow %d: %+v", i, f)
		case f.Posted < prevDone:
			t.Fatalf("flow %d posted at %v, before flow %d finished at %v on the one QP", i, f.Posted, i-1, prevDone)
		}
		if f.Posted > f.Arrived {
			waited++
		}
		prevDone = f.Done
		fcts = append(fcts, f.Done-f.Posted)
	}
	if waited == 0 || r.WaitP99 == 0 {
		t.Fatalf("no flow waited for the QP (wait p99 %v): the test shows nothing", r.WaitP99)
	}
	if p := percentile(fcts, 0.99); r.P99 != p {
		t.Fatalf("p99 %v, want %v (done - posted)", r.P99, p)
	}
	t.Logf("%d of %d flows waited, wait p99 %v, FCT p99 %v", waited, len(r.Records), r.WaitP99, r.P99)
}

// TestMeloFCTWindowOnBothSchemes: Window caps each scheme's QP: a cap of
// 8 packets, a tenth of the 16 µs path's BDP, makes a lossless flow
// several times slower than the cap of 128, for go-back-N as for MELO.
func TestMeloFCTWindowOnBothSchemes(t *testing.T) {
	for _, s := range []string{recovery.GBN, recovery.MELO} {
		fct := map[int]time.Duration{}
		for _, w := range []int{8, 128} {
			r, err := RunMeloFCT(MeloFCTConfig{Scheme: s, Load: 0.1, Flows: 4, Loss: 0, Paths: 4, QPs: 4, Timeout: 12, Seed: 5, Window: w})
			if err != nil {
				t.Fatal(err)
			}
			fct[w] = r.P99
		}
		t.Logf("%s: p99 FCT %v with a cap of 8, %v with 128", s, fct[8], fct[128])
		if fct[8] < 3*fct[128] {
			t.Errorf("%s: p99 FCT %v with a cap of 8 packets, %v with 128: the cap is not applied", s, fct[8], fct[128])
		}
	}
}

// TestMeloFCTEndsAtCompletion: a flow alone on the link completes in
// about its ideal time (FlowIdeal: its packets at line rate and a round
// trip), not at whatever event comes next (the next arrival, tens of
// milliseconds off at 1% load): the completion is dated when the engines
// made it, before the clock moves on.
func TestMeloFCTEndsAtCompletion(t *testing.T) {
	r, err := RunMeloFCT(MeloFCTConfig{Scheme: recovery.MELO, Load: 0.01, Flows: 3, Loss: 0, Paths: 4, QPs: 4, Timeout: 12, Seed: 7, Window: 128})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range r.Records {
		ideal := FlowIdeal(f.Size, 1, MeloLinkBps, 8*time.Microsecond)
		fct := f.Done - f.Posted
		t.Logf("flow %d: %d B, FCT %v, ideal %v, next arrival %v later", i, f.Size, fct, ideal, nextArrival(r.Records, i)-f.Posted)
		if fct < ideal || fct > ideal+ideal/10+2*time.Microsecond {
			t.Errorf("flow %d: %d B in %v; ideal %v", i, f.Size, fct, ideal)
		}
	}
}

func nextArrival(rs []MeloFlowRecord, i int) time.Duration {
	if i+1 < len(rs) {
		return rs[i+1].Arrived
	}
	return rs[i].Done
}
