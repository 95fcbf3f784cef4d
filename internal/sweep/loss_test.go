package sweep

import (
	"os"
	"testing"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
)

// TestLossSweep: a small sweep produces relative goodput that falls with
// loss for go-back-N, Improved go-back-N above it at 1%, and the files.
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
	files, err := SaveLoss(t.TempDir(), rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() < 100 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
