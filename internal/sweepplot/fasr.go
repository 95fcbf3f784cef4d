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
