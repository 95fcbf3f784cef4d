package sweepplot

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot/plotter"

	"github.com/softnic/softnic/internal/sweep"
)

// MeloPool draws MELO's Fig. 6b: the receiver's peak bits-pool usage
// against concurrent connections, one line per loss rate, to path; each
// label carries the fallbacks to go-back-N the pool's filling caused.
func MeloPool(path, title string, rs []sweep.MeloPoolResult) error {
	c := &chart{title: title, xlabel: "concurrent connections", ylabel: "peak bits pool usage (%, receiver, 1 Kb pool)", yMin: 0, yMax: 105, yStep: 10}
	idx := map[float64]int{}
	fallbacks := map[float64]uint64{}
	for _, r := range rs {
		fallbacks[r.Loss] += r.Fallbacks
	}
	for _, r := range rs {
		i, ok := idx[r.Loss]
		if !ok {
			i = len(c.lines)
			idx[r.Loss] = i
			c.lines = append(c.lines, line{label: fmt.Sprintf("loss %g%% (%d fallbacks)", r.Loss*100, fallbacks[r.Loss]), scheme: fmt.Sprint(r.Loss), variant: i})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: float64(r.Conns), Y: 100 * r.Usage()})
		if !slices.Contains(c.xTicks, float64(r.Conns)) {
			c.xTicks = append(c.xTicks, float64(r.Conns))
		}
	}
	return save(path, c)
}
