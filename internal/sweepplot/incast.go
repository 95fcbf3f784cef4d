package sweepplot

import (
	"slices"
	"sort"

	"gonum.org/v1/plot/plotter"

	"github.com/softnic/softnic/internal/sweep"
)

// Incast draws IRN's Fig. 9 to path: for each congestion control, the
// ratio of the mean request completion time of irn without PFC to that
// of gbn (RoCE) with PFC, against the fan-in M; a line for each irn
// label the rows have (irn, irn-timeoutall: a dash of its own).
func Incast(path, title string, rs []sweep.IncastResult) error {
	c := &chart{title: title, xlabel: "fan-in M (senders)", ylabel: "RCT of irn (no PFC) / RCT of gbn (PFC)"}
	var labels []string
	for _, r := range rs {
		if l := r.Label(); r.Scheme == "irn" && !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	for _, cc := range []string{"none", "timely", "dcqcn"} {
		for v, l := range labels {
			pts := IncastRatios(rs, cc, l)
			if len(pts) == 0 {
				continue
			}
			name := cc
			if l != "irn" {
				name += ", " + l
			}
			c.lines = append(c.lines, line{label: name, scheme: cc, variant: v, pts: pts})
			for _, p := range pts {
				if !slices.Contains(c.xTicks, p.X) {
					c.xTicks = append(c.xTicks, p.X)
				}
			}
		}
	}
	sort.Float64s(c.xTicks)
	return save(path, c)
}

// IncastRatios are, for cc, (M, mean RCT of label without PFC / mean RCT
// of gbn with PFC) over the seeds, for every M that has both.
func IncastRatios(rs []sweep.IncastResult, cc, label string) plotter.XYs {
	type sum struct {
		irn, gbn   float64
		nIRN, nGBN int
	}
	by := map[int]*sum{}
	for _, r := range rs {
		if sweep.CCName(r.CC) != cc {
			continue
		}
		s := by[r.M]
		if s == nil {
			s = &sum{}
			by[r.M] = s
		}
		switch {
		case r.Label() == label && !r.PFC:
			s.irn += r.RCT.Seconds()
			s.nIRN++
		case r.Scheme == "gbn" && r.PFC:
			s.gbn += r.RCT.Seconds()
			s.nGBN++
		}
	}
	var pts plotter.XYs
	for m, s := range by {
		if s.nIRN > 0 && s.nGBN > 0 {
			pts = append(pts, plotter.XY{X: float64(m), Y: (s.irn / float64(s.nIRN)) / (s.gbn / float64(s.nGBN))})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
	return pts
}
