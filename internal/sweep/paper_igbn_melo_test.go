package sweep

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/recovery"
)

// TestWebSearchSizes: the sampler follows the CDF: sizes within 1 B-30 MB,
// 15% at most 10 KB, 70% at most 1 MB, and a sample mean near the
// distribution's 1.71 MB.
func TestWebSearchSizes(t *testing.T) {
	if m := WebSearchMean(); m < 1.70e6 || m > 1.72e6 {
		t.Fatalf("mean %.0f, want 1.71 MB", m)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	var small, mid int
	var sum float64
	for range n {
		s := webSearchSize(r)
		if s < 1 || s > 30e6 {
			t.Fatalf("size %d out of range", s)
		}
		if s <= 10e3 {
			small++
		}
		if s <= 1e6 {
			mid++
		}
		sum += float64(s)
	}
	if f := float64(small) / n; f < 0.145 || f > 0.155 {
		t.Errorf("%.3f at most 10 KB, want 0.15", f)
	}
	if f := float64(mid) / n; f < 0.695 || f > 0.705 {
		t.Errorf("%.3f at most 1 MB, want 0.70", f)
	}
	if m := sum / n; m < 1.6e6 || m > 1.82e6 {
		t.Errorf("sample mean %.0f, want about 1.71 MB", m)
	}
}

// TestRunIGBNClassifiesEveryTimeout: on the paper's workload each of
// go-back-N's ACK timeouts is counted under exactly one reason.
func TestRunIGBNClassifiesEveryTimeout(t *testing.T) {
	r, err := RunIGBN(IGBNConfig{Scheme: recovery.GBN, Loss: 0.01, Timeout: 7, Messages: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, n := range r.Reasons {
		sum += n
	}
	if r.Timeouts == 0 || sum != r.Timeouts || r.Unclassified != 0 {
		t.Fatalf("timeouts %d, by reason %v (sum %d), unclassified %d", r.Timeouts, r.Reasons, sum, r.Unclassified)
	}
	if TimeoutOf(15) != 134217728*time.Nanosecond {
		t.Fatalf("TimeoutOf(15) = %v", TimeoutOf(15))
	}
}

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond
	}
	if p := percentile(ds, 0.99); p != 99*time.Millisecond {
		t.Fatalf("p99 %v", p)
	}
	if p := percentile(ds, 0.5); p != 50*time.Millisecond {
		t.Fatalf("p50 %v", p)
	}
	if percentile(nil, 0.99) != 0 {
		t.Fatal("empty")
	}
}

// TestReadIGBNCSV: the committed Fig. 6a reads back as 32 points at code
// 15 (134 ms) with their relative goodput; a timeout that is no IBA code's
// is refused.
func TestReadIGBNCSV(t *testing.T) {
	f, err := os.Open("../../docs/results/igbn-fig6a.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ReadIGBNCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 32 {
		t.Fatalf("%d rows, want 32", len(rs))
	}
	for _, r := range rs {
		if r.Timeout != 15 || r.Messages != 2000 || (r.Loss == 0 && r.Relative != 1) || r.Relative <= 0 || r.Relative > 1.01 {
			t.Errorf("row %+v", r)
		}
	}
	_, err = ReadIGBNCSV(strings.NewReader("scheme,loss,relative,timeout_us\ngbn,0,1,100000\n"))
	if err == nil || !strings.Contains(err.Error(), "no IBA ACK timeout") {
		t.Fatalf("timeout_us 100000: err %v", err)
	}
}
