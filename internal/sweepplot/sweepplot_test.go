package sweepplot

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"github.com/softnic/softnic/internal/sweep"
)

// committed are the sweeps' CSV files in docs/results, the figures'
// sources.
func committedLoss(t *testing.T) map[string][]sweep.LossResult {
	t.Helper()
	out := map[string][]sweep.LossResult{}
	for _, name := range []string{"loss.csv", "testbed-loss.csv", "testbed-loss-delay.csv"} {
		f, err := os.Open(filepath.Join("../../docs/results", name))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := sweep.ReadLossCSV(f)
		f.Close()
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s: %d rows, %v", name, len(rs), err)
		}
		out[name] = rs
	}
	return out
}

func committedQPs(t *testing.T) map[string][]sweep.QPResult {
	t.Helper()
	out := map[string][]sweep.QPResult{}
	for _, name := range []string{"qps.csv", "qps_fasr.csv", "testbed-qps.csv"} {
		f, err := os.Open(filepath.Join("../../docs/results", name))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := sweep.ReadQPCSV(f)
		f.Close()
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s: %d rows, %v", name, len(rs), err)
		}
		out[name] = rs
	}
	return out
}

// labelsWithin returns the labels of the axis's ticks that fall within
// [lo, hi].
func labelsWithin(a plot.Axis, lo, hi float64) []string {
	var ls []string
	for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
		if tk.Label != "" && tk.Value >= lo*(1-1e-9) && tk.Value <= hi*(1+1e-9) {
			ls = append(ls, tk.Label)
		}
	}
	return ls
}

// checkTicks: both axes of c have at least two labelled ticks over the
// data (a log axis whose data sat within a decade had one or none).
func checkTicks(t *testing.T, name string, c *chart) {
	t.Helper()
	p, _, err := c.plot()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	xmin, xmax, ymin, ymax := c.dataRange(c.logY)
	if got := labelsWithin(p.X, xmin, xmax); len(got) < 2 && xmax > xmin {
		t.Errorf("%s: x labels over the data [%g, %g]: %v", name, xmin, xmax, got)
	}
	if got := labelsWithin(p.Y, ymin, ymax); len(got) < 2 && ymax > ymin {
		t.Errorf("%s: y labels over the data [%g, %g]: %v", name, ymin, ymax, got)
	}
}

// TestTicksOverData: every chart drawn from the committed CSVs labels
// ticks over its data on both axes, and the loss charts label every loss
// rate measured (the 2% and 5% ticks were unlabelled).
func TestTicksOverData(t *testing.T) {
	for name, rs := range committedLoss(t) {
		c := lossChart("t", rs)
		checkTicks(t, name, c)
		p, _, _ := c.plot()
		labels := labelsWithin(p.X, 0, 100)
		for _, r := range rs {
			if r.Loss > 0 && !slices.Contains(labels, label(r.Loss*100)) {
				t.Errorf("%s: loss %g%% has no label (labels %v)", name, r.Loss*100, labels)
			}
		}
	}
	for name, rs := range committedQPs(t) {
		for _, nc := range qpCharts("p", "", rs) {
			checkTicks(t, name+" "+nc.file, nc.chart)
		}
	}
	// A log axis within one decade, and within a factor of two.
	for _, r := range [][2]float64{{0.12, 0.28}, {300, 520}, {1.331, 1.5}} {
		ls := 0
		for _, tk := range (logTicker{}).Ticks(r[0], r[1]) {
			if tk.Label != "" && tk.Value >= r[0] && tk.Value <= r[1] {
				ls++
			}
		}
		if ls < 2 {
			t.Errorf("log axis %v: %d labels", r, ls)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{0.01, "0.01"}, {0.003, "0.003"}, {2, "2"}, {5000, "5000"}, {200000, "200000"}, {1e7, "1e+07"}} {
		if got := label(c.v); got != c.want {
			t.Errorf("label(%g) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestLossLegendBaselines: the relative goodput hides each scheme's
// lossless goodput; the legend gives it, and a scheme without a lossless
// run gets no line.
func TestLossLegendBaselines(t *testing.T) {
	row := func(s string, loss, gbps float64) sweep.LossResult {
		return sweep.LossResult{LossConfig: sweep.LossConfig{Scheme: s, Loss: loss}, Gbps: gbps}
	}
	c := lossChart("t", []sweep.LossResult{
		row("gbn", 0, 23.65), row("gbn", 0.01, 12.0), row("gbn", 0.05, 0.85),
		row("fasr", 0, 19.0), row("fasr", 0.01, 18.8),
		row("melo", 0.01, 5), // no lossless run
	})
	var labels []string
	for _, l := range c.lines {
		labels = append(labels, l.label)
	}
	want := []string{"fasr (lossless 19.000 Gb/s)", "gbn (lossless 23.650 Gb/s)"}
	if !slices.Equal(labels, want) {
		t.Fatalf("legend %q, want %q", labels, want)
	}
	if y := c.lines[1].pts[0].Y; math.Abs(y-12/23.65) > 1e-12 {
		t.Fatalf("gbn at 1%%: %g", y)
	}
	if err := Loss(filepath.Join(t.TempDir(), "l.png"), "t", c2rows()); err == nil {
		t.Fatal("a loss figure without a lossless run drew")
	}
}

func c2rows() []sweep.LossResult {
	return []sweep.LossResult{{LossConfig: sweep.LossConfig{Scheme: "gbn", Loss: 0.01}, Gbps: 1}}
}

// TestSeriesDistinguishable: in a QP chart every scheme has its own colour
// and marker and every loss rate its own dash pattern, so lines drawn over
// each other still show.
func TestSeriesDistinguishable(t *testing.T) {
	var rs []sweep.QPResult
	for _, s := range []string{"fasr", "gbn", "igbn", "irn", "melo", "srnic"} {
		for _, loss := range []float64{0, 0.01} {
			for _, n := range []int{1, 16, 300} {
				rs = append(rs, sweep.QPResult{QPConfig: sweep.QPConfig{Scheme: s, QPs: n, Size: 8, Loss: loss}, MsgRate: 1e6, SRBytes: 5 * n})
			}
		}
	}
	c := qpCharts("p", "", rs)[0].chart
	if len(c.lines) != 12 {
		t.Fatalf("%d lines", len(c.lines))
	}
	seen := map[string]string{}
	for i, st := range c.styles() {
		l := c.lines[i]
		key := fmt.Sprintf("%v %T %v", st.color, st.shape, st.dashes)
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s are drawn alike", l.label, other)
		}
		seen[key] = l.label
		for j, st2 := range c.styles() {
			l2 := c.lines[j]
			sameScheme := l.scheme == l2.scheme
			if sameScheme != (st.color == st2.color) || sameScheme != (fmt.Sprintf("%T", st.shape) == fmt.Sprintf("%T", st2.shape)) {
				t.Errorf("%s and %s: colour or marker not the scheme's", l.label, l2.label)
			}
			if (l.variant == l2.variant) != slices.Equal(st.dashes, st2.dashes) {
				t.Errorf("%s and %s: dashes not the loss rate's", l.label, l2.label)
			}
		}
	}
}

// TestDrawCommitted draws every figure of the committed CSVs (what
// softnic-sweep plot-loss and plot-qps do to regenerate docs/results).
func TestDrawCommitted(t *testing.T) {
	dir := t.TempDir()
	for name, rs := range committedLoss(t) {
		path := filepath.Join(dir, strings.TrimSuffix(name, ".csv")+".png")
		if err := Loss(path, "t", rs); err != nil {
			t.Fatal(err)
		}
	}
	for name, rs := range committedQPs(t) {
		files, err := QPs(dir, strings.TrimSuffix(name, ".csv"), "note", rs)
		if err != nil || len(files) < 2 {
			t.Fatalf("%s: %v %v", name, files, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if st, err := e.Info(); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
}

// TestZeroSRBytes: a scheme with no on-chip state (0 bytes) cannot go on
// a log axis; the chart falls back to a linear one rather than fail.
func TestZeroSRBytes(t *testing.T) {
	rs := []sweep.QPResult{{QPConfig: sweep.QPConfig{Scheme: "x", QPs: 1, Size: 8}, MsgRate: 1e6}, {QPConfig: sweep.QPConfig{Scheme: "x", QPs: 10, Size: 8}, MsgRate: 2e6}}
	if _, err := QPs(t.TempDir(), "p", "", rs); err != nil {
		t.Fatal(err)
	}
}

// TestLossLineInLossOrder: rows out of loss order (a testbed point whose
// first runs failed is merged after the next loss rate's) still draw each
// line from the lowest loss to the highest.
func TestLossLineInLossOrder(t *testing.T) {
	pt := func(l, g float64) sweep.LossResult {
		return sweep.LossResult{LossConfig: sweep.LossConfig{Scheme: "gbn-ce", Loss: l}, Gbps: g}
	}
	c := lossChart("t", []sweep.LossResult{pt(0, 1), pt(0.002, 0.98), pt(0.01, 0.89), pt(0.005, 0.95)})
	if len(c.lines) != 1 {
		t.Fatalf("%d lines", len(c.lines))
	}
	var xs []float64
	for _, p := range c.lines[0].pts {
		xs = append(xs, p.X)
	}
	if !slices.IsSorted(xs) || len(xs) != 3 {
		t.Fatalf("line's x %v: want the three lossy points in loss order", xs)
	}
}
