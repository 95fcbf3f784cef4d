package sweep

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
)

// TestLossSweep: a small sweep produces relative goodput that falls with
// loss for go-back-N, and loss.csv.
func TestLossSweep(t *testing.T) {
	var rs []LossResult
	for _, s := range []string{"gbn", "igbn"} {
		for _, loss := range []float64{0, 0.001, 0.01} {
			r, err := RunLoss(LossConfig{Scheme: s, Loss: loss, Size: 65536, Iters: 300, TxDepth: 64, MTU: qp.MTU1024, Link: perftest.DefaultLink, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	Relativize(rs)
	if rs[0].Relative != 1 || rs[2].Relative >= rs[1].Relative || rs[2].Relative >= 0.9 {
		t.Fatalf("gbn relative goodput %v %v %v", rs[0].Relative, rs[1].Relative, rs[2].Relative)
	}
	path, err := SaveLoss(t.TempDir(), rs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if back, err := ReadLossCSV(f); err != nil || len(back) != len(rs) || back[2].Retransmits != rs[2].Retransmits || math.Abs(back[2].Relative-rs[2].Relative) > 1e-4 {
		t.Fatalf("%s read back %+v, %v", path, back, err)
	}
}

// TestSortLossByScheme: interleaved runs (sweep-loss.sh's paper order)
// come out by scheme, in the order the schemes first appear, then loss.
func TestSortLossByScheme(t *testing.T) {
	pt := func(s string, l float64) LossResult { return LossResult{LossConfig: LossConfig{Scheme: s, Loss: l}} }
	in := []LossResult{pt("gbn", 0), pt("igbn", 0), pt("gbn", 0.01), pt("igbn", 0.001), pt("igbn", 0.01), pt("gbn", 0.001)}
	var got []string
	for _, r := range SortLossByScheme(in) {
		got = append(got, fmt.Sprintf("%s@%g", r.Scheme, r.Loss))
	}
	want := "[gbn@0 gbn@0.001 gbn@0.01 igbn@0 igbn@0.001 igbn@0.01]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if in[1].Scheme != "igbn" {
		t.Fatal("the input was reordered")
	}
}
