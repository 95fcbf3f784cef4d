package sweepplot

import (
	"fmt"
	"math"
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

// MeloFCT draws MELO's Fig. 5b: the 99th-percentile flow completion time
// against load, one line per scheme, to path.
func MeloFCT(path, title string, rs []sweep.MeloFCTResult) error {
	c := &chart{title: title, xlabel: "load (fraction of the 40 Gb/s link)", ylabel: "99th percentile FCT (ms)"}
	idx := map[string]int{}
	for _, r := range rs {
		i, ok := idx[r.Scheme]
		if !ok {
			i = len(c.lines)
			idx[r.Scheme] = i
			c.lines = append(c.lines, line{label: r.Scheme, scheme: r.Scheme})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: r.Load, Y: float64(r.P99.Microseconds()) / 1000})
		if !slices.Contains(c.xTicks, r.Load) {
			c.xTicks = append(c.xTicks, r.Load)
		}
	}
	return save(path, c)
}

// MeloCopy draws MELO's Fig. 6a: the share of one core that copying the
// out-of-order bytes out of the reorder buffer takes, against loss, to
// path.
func MeloCopy(path, title string, ps []sweep.MeloCopyPoint) error {
	return save(path, meloCopyChart(title, ps))
}

func meloCopyChart(title string, ps []sweep.MeloCopyPoint) *chart {
	// The worst case, as the paper bounds it: every byte of the 40 Gb/s
	// link copied.
	all := 100 * sweep.MeloLinkBps / 8 / sweep.MeloCopyBytesPerSec
	c := &chart{title: title, xlabel: "loss rate (%, both directions)", ylabel: "CPU usage (% of one core)", logX: true,
		yMin: 0, yMax: 10 * math.Ceil(all/10), yStep: 10}
	l := line{label: fmt.Sprintf("melo (copy at %.0f MB/s)", sweep.MeloCopyBytesPerSec/1e6), scheme: "melo"}
	bound := line{label: fmt.Sprintf("all of 40 Gb/s copied (%.1f%%)", all), scheme: "bound"}
	for _, p := range ps {
		if p.Loss <= 0 {
			continue // no point on a log axis
		}
		l.pts = append(l.pts, plotter.XY{X: 100 * p.Loss, Y: 100 * p.CoreFraction})
		bound.pts = append(bound.pts, plotter.XY{X: 100 * p.Loss, Y: all})
		c.xTicks = append(c.xTicks, 100*p.Loss)
	}
	c.lines = []line{l, bound}
	return c
}
