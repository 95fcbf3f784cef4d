package sweepplot

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/softnic/softnic/internal/sweep"
)

// IGBN draws one panel of Improved go-back-N's Fig. 6 (the four
// algorithms' throughput relative to lossless against loss, at one ACK
// timeout) to path.
func IGBN(path, title string, rs []sweep.IGBNResult) error {
	ls := make([]sweep.LossResult, len(rs))
	for i, r := range rs {
		ls[i] = sweep.LossResult{LossConfig: sweep.LossConfig{Scheme: r.Scheme, Loss: r.Loss}, Gbps: r.Gbps, Relative: r.Relative}
	}
	return save(path, lossChart(title, ls))
}

// IGBNSeeds draws one panel of Fig. 6 from points run with several seeds:
// each scheme's mean relative goodput against loss, with its 95%
// t-interval as an error bar (sweep.IGBNSummary, cut at 0), to path. The
// title should say so.
func IGBNSeeds(path, title string, ss []sweep.IGBNSummary) error {
	return save(path, igbnSeedsChart(title, ss))
}

func igbnSeedsChart(title string, ss []sweep.IGBNSummary) *chart {
	c := &chart{title: title, xlabel: "loss rate (%, both directions)", ylabel: "goodput relative to the scheme's lossless goodput",
		logX: true, yMin: 0, yMax: 1.05, yStep: 0.1}
	base := map[string]float64{}
	for _, s := range ss {
		if s.Loss == 0 {
			base[s.Scheme] = s.Gbps
		}
	}
	idx := map[string]int{}
	for _, s := range ss {
		if s.Loss == 0 {
			continue // the 1.0 the lines are relative to; no place on a log axis
		}
		i, ok := idx[s.Scheme]
		if !ok {
			i = len(c.lines)
			idx[s.Scheme] = i
			c.lines = append(c.lines, line{label: fmt.Sprintf("%s (lossless %.3f Gb/s)", s.Scheme, base[s.Scheme]),
				scheme: s.Scheme, errs: plotter.YErrors{}})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: s.Loss * 100, Y: s.Relative})
		// A t-interval of few seeds may reach below 0, which no goodput
		// does: the bar stops at 0.
		c.lines[i].errs = append(c.lines[i].errs, struct{ Low, High float64 }{s.Relative - max(s.RelLo, 0), s.RelHi - s.Relative})
		if !slices.Contains(c.xTicks, s.Loss*100) {
			c.xTicks = append(c.xTicks, s.Loss*100)
		}
	}
	sort.Slice(c.lines, func(i, j int) bool { return c.lines[i].scheme < c.lines[j].scheme })
	for _, l := range c.lines {
		sort.Sort(byX{l.pts, l.errs})
	}
	return c
}

// byX sorts a line's points and their error bars together by x.
type byX struct {
	pts  plotter.XYs
	errs plotter.YErrors
}

func (b byX) Len() int           { return len(b.pts) }
func (b byX) Less(i, j int) bool { return b.pts[i].X < b.pts[j].X }
func (b byX) Swap(i, j int) {
	b.pts[i], b.pts[j] = b.pts[j], b.pts[i]
	b.errs[i], b.errs[j] = b.errs[j], b.errs[i]
}

// IGBNReasons draws Improved go-back-N's Fig. 3: the share of go-back-N's
// ACK timeouts by reason, softnic's beside the paper's, to path.
func IGBNReasons(path, title string, r sweep.IGBNResult) error {
	var sum uint64
	for _, n := range r.Reasons {
		sum += n
	}
	if sum == 0 {
		return fmt.Errorf("sweepplot: %s: no classified timeouts to plot", path)
	}
	ours, paper := make(plotter.Values, 4), make(plotter.Values, 4)
	for i, n := range r.Reasons {
		ours[i] = 100 * float64(n) / float64(sum)
		paper[i] = 100 * sweep.IGBNPaperShares[i]
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "share of ACK timeouts (%)"
	w := vg.Points(28)
	b1, err := plotter.NewBarChart(ours, w)
	if err != nil {
		return err
	}
	b1.Color, b1.Offset = palette[0], -w/2
	b2, err := plotter.NewBarChart(paper, w)
	if err != nil {
		return err
	}
	b2.Color, b2.Offset = palette[1], w/2
	p.Add(b1, b2)
	p.Legend.Add(fmt.Sprintf("softnic (%d timeouts)", sum), b1)
	p.Legend.Add("paper (Fig. 3)", b2)
	p.Legend.Top = true
	p.NominalX(sweep.IGBNReasonNames...)
	p.Y.Min, p.Y.Max = 0, 100
	return p.Save(chartWidth, chartHeight, path)
}

// IGBNFig7Panels are the paper's Fig. 7 panels in its order: (a) GBN,
// (b) IGBN, (c) GBN+CE, (d) GBN+ST.
var IGBNFig7Panels = []struct{ Scheme, Paper string }{
	{"gbn", "(a) GBN"}, {"igbn", "(b) IGBN"}, {"gbn-ce", "(c) GBN+CE"}, {"gbn-st", "(d) GBN+ST"},
}

// igbnPaperTimeouts are the paper's timeouts by the IBA code that stands
// in for each (paper igbn-fig6).
var igbnPaperTimeouts = map[uint8]string{15: "100 ms", 11: "10 ms", 7: "500 µs"}

// igbnFig7Chart is one panel of Fig. 7: one scheme's relative goodput
// against loss, a line per ACK timeout (longest first, each its own
// colour, marker and dash). Lossless points are the 1.0 the lines are
// relative to and have no place on the log axis.
func igbnFig7Chart(title, scheme string, rs []sweep.IGBNResult) *chart {
	c := &chart{title: title, xlabel: "loss rate (%, both directions)", ylabel: "goodput relative to lossless",
		logX: true, yMin: 0, yMax: 1.05, yStep: 0.1}
	idx := map[uint8]int{}
	for _, r := range sweep.SortIGBNFig7(rs) {
		if r.Scheme != scheme || r.Loss == 0 {
			continue
		}
		i, ok := idx[r.Timeout]
		if !ok {
			i = len(c.lines)
			idx[r.Timeout] = i
			to := sweep.TimeoutOf(r.Timeout).Round(time.Microsecond)
			label := "ACK timeout " + to.String()
			if p, ok := igbnPaperTimeouts[r.Timeout]; ok {
				label += " (paper " + p + ")"
			}
			c.lines = append(c.lines, line{label: label, scheme: to.String(), variant: i})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: r.Loss * 100, Y: r.Relative})
		if !slices.Contains(c.xTicks, r.Loss*100) {
			c.xTicks = append(c.xTicks, r.Loss*100)
		}
	}
	return c
}

// IGBNFig7 draws Improved go-back-N's Fig. 7 to path: Fig. 6a-c's points
// grouped by algorithm, one panel each (IGBNFig7Panels), each with a line
// per ACK timeout, under title. Every panel needs data.
func IGBNFig7(path, title string, rs []sweep.IGBNResult) error {
	const w, h = 14 * vg.Inch, 10 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	head := plot.New().Title.TextStyle
	head.Font.Size = vg.Points(14)
	top := head.Height(title) + vg.Points(10)
	head.XAlign, head.YAlign = draw.XCenter, draw.YTop
	dc.FillText(head, vg.Point{X: w / 2, Y: h - vg.Points(5)}, title)
	plots := make([][]*plot.Plot, 2)
	for i, pn := range IGBNFig7Panels {
		c := igbnFig7Chart(fmt.Sprintf("%s: softnic %s", pn.Paper, pn.Scheme), pn.Scheme, rs)
		if len(c.lines) == 0 {
			return fmt.Errorf("sweepplot: %s: no lossy points of %s", path, pn.Scheme)
		}
		p, legend, err := c.plot()
		if err != nil {
			return err
		}
		// The lines fall from the top left: the bottom left is free.
		legend.Top, legend.Left = false, true
		legend.XOffs, legend.YOffs = vg.Points(8), vg.Points(8)
		p.Legend = legend
		plots[i/2] = append(plots[i/2], p)
	}
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(12), PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12)}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -top))
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
		}
	}
	return writePNG(path, img)
}
