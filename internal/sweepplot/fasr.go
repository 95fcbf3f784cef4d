package sweepplot

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot/plotter"

	"github.com/softnic/softnic/internal/sweep"
)

// FasrFig7c draws FaSR's Fig. 7c, goodput against loss at a fixed QP count,
// one line per NIC, to <dir>/<name>.png and returns its path. labels maps
// a point's NIC to its legend label.
func FasrFig7c(dir, name, title string, labels map[string]string, ps []sweep.FasrFig7cPoint) (string, error) {
	c := &chart{title: title, xlabel: "loss rate (%, both directions)", ylabel: "goodput (Gb/s)", yMin: 0, yMax: 105, yStep: 10}
	idx := map[string]int{}
	for _, p := range ps {
		i, ok := idx[p.NIC]
		if !ok {
			i = len(c.lines)
			idx[p.NIC] = i
			l := labels[p.NIC]
			if l == "" {
				l = p.NIC
			}
			c.lines = append(c.lines, line{label: l, scheme: p.NIC})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: p.Loss * 100, Y: p.GoodputGbps})
		if !slices.Contains(c.xTicks, p.Loss*100) {
			c.xTicks = append(c.xTicks, p.Loss*100)
		}
	}
	slices.Sort(c.xTicks)
	path := filepath.Join(dir, name+".png")
	if err := save(path, c); err != nil {
		return "", fmt.Errorf("sweepplot: FaSR Fig. 7c: %w", err)
	}
	return path, nil
}

// FasrDive draws one of FaSR's deep-dive figures against the QP count,
// one line per loss rate, to <dir>/<name>.png: fig "9b" the fast path's
// share of SR operations, "10" the receiver's peak bitmap-pool use in
// bytes.
func FasrDive(dir, name, fig string, ps []sweep.FasrDivePoint) (string, error) {
	c := &chart{title: "FaSR Fig. 9b: fast-path share of SR operations (embedded, 100 Gb/s, 40 µs RTT, MTU 1024)",
		xlabel: "concurrent QPs", ylabel: "fast path / all SR operations", logX: true, yMin: 0, yMax: 1.05, yStep: 0.1}
	y := func(p sweep.FasrDivePoint) float64 { return p.FastShare() }
	if fig == "10" {
		c.title = "FaSR Fig. 10: peak bitmap-pool use at the receiver (embedded, 100 Gb/s, 40 µs RTT, pool 256 B)"
		c.ylabel, c.yMax, c.yStep = "bitmap bytes in use (peak; the axis ends at the pool's size)", 0, 0
		y = func(p sweep.FasrDivePoint) float64 { return float64(p.BlocksPeak * p.BlockBits / 8) }
		for _, p := range ps {
			c.yMax = max(c.yMax, float64(p.BlocksSlots*p.BlockBits/8))
		}
		c.yStep = c.yMax / 8
	}
	idx := map[float64]int{}
	for _, p := range ps {
		i, ok := idx[p.Loss]
		if !ok {
			i = len(c.lines)
			idx[p.Loss] = i
			c.lines = append(c.lines, line{label: fmt.Sprintf("fasr, %g%% loss", p.Loss*100), scheme: "fasr", variant: i})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: float64(p.QPs), Y: y(p)})
		if !slices.Contains(c.xTicks, float64(p.QPs)) {
			c.xTicks = append(c.xTicks, float64(p.QPs))
		}
	}
	slices.Sort(c.xTicks)
	path := filepath.Join(dir, name+".png")
	if err := save(path, c); err != nil {
		return "", fmt.Errorf("sweepplot: FaSR Fig. %s: %w", fig, err)
	}
	return path, nil
}
