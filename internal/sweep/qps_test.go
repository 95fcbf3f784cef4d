package sweep

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

func point(n int, loss float64) QPConfig {
	return QPConfig{Scheme: "gbn", QPs: n, Size: 8, Loss: loss, SRAM: 4 * (qp.DefaultQPContextBytes + 5), Penalty: time.Microsecond,
		Link: DefaultQPLink, Warmup: 200 * time.Microsecond, Measure: 2 * time.Millisecond, Seed: 1}
}

// TestQPSweepKnee: with SRAM for four contexts, four QPs never miss and
// scale the rate up; eight QPs cycling through an LRU cache miss on every
// access, so twice the QPs move fewer messages than four: the knee of
// StaR Fig. 5(a) at capacity.
func TestQPSweepKnee(t *testing.T) {
	four, err := RunQPs(point(4, 0))
	if err != nil {
		t.Fatal(err)
	}
	one, _ := RunQPs(point(1, 0))
	eight, _ := RunQPs(point(8, 0))
	if four.Misses != 0 || four.HitRate != 1 || four.MsgRate < 3.5*one.MsgRate {
		t.Fatalf("below capacity: %+v (1 QP: %.0f/s)", four, one.MsgRate)
	}
	if eight.HitRate > 0.01 || eight.MsgRate >= four.MsgRate || eight.PeakQPs != 4 {
		t.Fatalf("past capacity: %+v (4 QPs: %.0f/s)", eight, four.MsgRate)
	}
	lossy, err := RunQPs(point(4, 0.01))
	if err != nil || lossy.Messages == 0 {
		t.Fatalf("lossy point: %+v %v", lossy, err)
	}
}

func TestQPSweepOutput(t *testing.T) {
	var rs []QPResult
	for _, n := range []int{1, 4, 8} {
		for _, loss := range []float64{0, 0.01} {
			r, err := RunQPs(point(n, loss))
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	dir := t.TempDir()
	path, err := SaveQPs(dir, "qps", rs)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 100 || path != filepath.Join(dir, "qps.csv") {
		t.Fatalf("%s: %v", path, err)
	}
	var buf bytes.Buffer
	WriteQPCSV(&buf, rs)
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != len(rs)+1 || len(rows[0]) != 14 {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
}

// TestQPSweepOneQP: with one QP the simulation goes idle after every
// completion; the window still runs to its end (it once stopped after the
// first message), and at 1% loss the rate shows the timeouts.
func TestQPSweepOneQP(t *testing.T) {
	c := point(1, 0)
	c.Link.Delay = time.Microsecond
	r, err := RunQPs(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages < 100 {
		t.Fatalf("1 QP, lossless: %d messages in %v", r.Messages, c.Measure)
	}
	c = point(1, 0.3)
	c.Measure = 200 * time.Millisecond
	lossy, err := RunQPs(c)
	if err != nil {
		t.Fatal(err)
	}
	if lossy.Messages == 0 || lossy.MsgRate > r.MsgRate/2 {
		t.Fatalf("1 QP, 30%% loss: %+v (lossless %.0f/s)", lossy, r.MsgRate)
	}
}
