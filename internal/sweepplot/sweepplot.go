// Package sweepplot draws the sweeps' PNG figures (package sweep's
// results, or the CSV files they were written to) with gonum/plot. It is
// a package of its own so that only the command that draws them,
// softnic-sweep, links the plotting code; the daemon runs sweeps and
// writes CSV without it (cmd/softnic's TestNoPlottingInDaemon).
//
// Every chart labels ticks within its data on both axes, gives each
// scheme a colour and a marker shape of its own and each loss rate a dash
// pattern, and draws its legend in a column beside the data.
package sweepplot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/softnic/softnic/internal/sweep"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// shapes are the schemes' markers, one each (in the order of their
// colours), so that lines drawn over each other, as the schemes' are
// wherever they perform alike, still show every scheme's points: outlines
// first, then filled shapes drawn small enough to sit inside them
// (gonum's Ring, Square and Triangle are outlines, Circle, Box and
// Pyramid filled).
var shapes = []struct {
	glyph  draw.GlyphDrawer
	radius vg.Length
}{
	{draw.RingGlyph{}, vg.Points(4)}, {draw.SquareGlyph{}, vg.Points(4)}, {draw.TriangleGlyph{}, vg.Points(4)},
	{draw.CrossGlyph{}, vg.Points(4)}, {draw.PlusGlyph{}, vg.Points(4)},
	{draw.CircleGlyph{}, vg.Points(2)}, {draw.BoxGlyph{}, vg.Points(2)}, {draw.PyramidGlyph{}, vg.Points(2)},
}

// dashes are the loss rates' line patterns, lossless solid.
var dashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(2), vg.Points(2)},
	{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)},
}

// line is one series of a chart: its points, its scheme (colour and
// marker) and its variant (dash pattern), and its legend label.
type line struct {
	label   string
	scheme  string
	variant int
	pts     plotter.XYs
	errs    plotter.YErrors // nil, or an error bar for each of pts
}

// chart is a chart before it is drawn.
type chart struct {
	title, xlabel, ylabel string
	logX, logY            bool
	yMin, yMax            float64 // yMax > yMin: a fixed y axis
	yStep                 float64 // > 0: a linear y axis labelled every yStep
	xTicks                []float64
	lines                 []line
}

// Loss draws goodput relative to lossless against loss rate, one line per
// scheme (the loss sweep; FaSR Fig. 7a), to path.
// Each scheme's legend label carries its absolute lossless goodput, which
// the relative scale hides; the x axis labels every loss rate measured.
func Loss(path, title string, rs []sweep.LossResult) error {
	return save(path, lossChart(title, rs))
}

func lossChart(title string, rs []sweep.LossResult) *chart {
	c := &chart{title: title, xlabel: "loss rate (%, both directions)", ylabel: "goodput relative to the scheme's lossless goodput",
		logX: true, yMin: 0, yMax: 1.05, yStep: 0.1}
	base := map[string]float64{}
	for _, r := range rs {
		if r.Loss == 0 && r.Gbps > 0 {
			base[r.Scheme] = r.Gbps
		}
	}
	idx := map[string]int{}
	for _, r := range rs {
		if r.Loss == 0 || base[r.Scheme] == 0 {
			// A lossless point has no place on a log axis: it is the 1.0
			// every line is relative to, given in the legend; without it
			// (a failed testbed run) a scheme has no relative goodput.
			continue
		}
		i, ok := idx[r.Scheme]
		if !ok {
			i = len(c.lines)
			idx[r.Scheme] = i
			c.lines = append(c.lines, line{label: fmt.Sprintf("%s (lossless %.3f Gb/s)", r.Scheme, base[r.Scheme]), scheme: r.Scheme})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: r.Loss * 100, Y: r.Gbps / base[r.Scheme]})
		if !slices.Contains(c.xTicks, r.Loss*100) {
			c.xTicks = append(c.xTicks, r.Loss*100)
		}
	}
	sort.Slice(c.lines, func(i, j int) bool { return c.lines[i].scheme < c.lines[j].scheme })
	// Each line in loss order, however the rows came (a testbed sweep's
	// point whose first runs failed comes after the next loss rate's).
	for _, l := range c.lines {
		sort.SliceStable(l.pts, func(i, j int) bool { return l.pts[i].X < l.pts[j].X })
	}
	return c
}

// QPs draws the QP sweep's figures into dir: aggregate message rate
// against QPs (the knee at cache capacity, StaR Fig. 5(a)) for each
// message size, <prefix>_msgrate_<size>B.png, and on-chip SR bytes
// against QPs (FaSR Fig. 8b), <prefix>_sr_bytes.png. note is appended to
// the titles (e.g. "testbed, SRAM 76800 B"). It returns the files' paths.
func QPs(dir, prefix, note string, rs []sweep.QPResult) ([]string, error) {
	var files []string
	for _, c := range qpCharts(prefix, note, rs) {
		path := dir + "/" + c.file
		if err := save(path, c.chart); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

type namedChart struct {
	file  string
	chart *chart
}

func qpCharts(prefix, note string, rs []sweep.QPResult) []namedChart {
	var sizes []int
	var losses []float64
	for _, r := range rs {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
		if !slices.Contains(losses, r.Loss) {
			losses = append(losses, r.Loss)
		}
	}
	sort.Ints(sizes)
	sort.Float64s(losses)
	suffix := ""
	if note != "" {
		suffix = " (" + note + ")"
	}
	var out []namedChart
	for _, size := range sizes {
		c := &chart{title: fmt.Sprintf("%d B WRITEs, one outstanding per QP%s", size, suffix), xlabel: "queue pairs",
			ylabel: "aggregate message rate (Mops/s)", logX: true, logY: true}
		c.lines = series(rs, func(r sweep.QPResult) bool { return r.Size == size },
			func(r sweep.QPResult) (string, int) {
				return fmt.Sprintf("%s, %g%% loss", r.Scheme, r.Loss*100), slices.Index(losses, r.Loss)
			},
			func(r sweep.QPResult) float64 { return r.MsgRate / 1e6 })
		out = append(out, namedChart{fmt.Sprintf("%s_msgrate_%dB.png", prefix, size), c})
	}
	// SR bytes depend only on the scheme and the QP count: one line per
	// scheme, from the rows of one size and loss (the lossless rows of the
	// smallest size when there are any).
	if len(sizes) > 0 {
		size, loss := sizes[0], -1.0
		for _, r := range rs {
			if r.Size == size && (loss < 0 || r.Loss < loss) {
				loss = r.Loss
			}
		}
		c := &chart{title: "on-chip loss-recovery state" + suffix, xlabel: "queue pairs", ylabel: "bytes", logX: true, logY: true}
		c.lines = series(rs, func(r sweep.QPResult) bool { return r.Loss == loss && r.Size == size },
			func(r sweep.QPResult) (string, int) { return r.Scheme, 0 },
			func(r sweep.QPResult) float64 { return float64(r.SRBytes) })
		out = append(out, namedChart{prefix + "_sr_bytes.png", c})
	}
	return out
}

// series groups the rows keep accepts into lines keyed by the label that
// label returns (with its variant), x the QP count, sorted by label.
func series(rs []sweep.QPResult, keep func(sweep.QPResult) bool, label func(sweep.QPResult) (string, int), y func(sweep.QPResult) float64) []line {
	idx := map[string]int{}
	var lines []line
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		l, variant := label(r)
		i, ok := idx[l]
		if !ok {
			i = len(lines)
			idx[l] = i
			lines = append(lines, line{label: l, scheme: r.Scheme, variant: variant})
		}
		lines[i].pts = append(lines[i].pts, plotter.XY{X: float64(r.QPs), Y: y(r)})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].label < lines[j].label })
	for _, l := range lines {
		sort.Slice(l.pts, func(i, j int) bool { return l.pts[i].X < l.pts[j].X })
	}
	return lines
}

// dataRange returns the smallest and largest x and y of the lines (only
// positive values when positive is set, as a log axis takes).
func (c *chart) dataRange(positive bool) (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, l := range c.lines {
		for _, p := range l.pts {
			if !positive || p.X > 0 {
				xmin, xmax = min(xmin, p.X), max(xmax, p.X)
			}
			if !positive || p.Y > 0 {
				ymin, ymax = min(ymin, p.Y), max(ymax, p.Y)
			}
		}
	}
	return
}

// positiveY reports whether every y is above 0, as a log axis needs (a
// scheme with no on-chip state, a point that completed nothing).
func (c *chart) positiveY() bool {
	for _, l := range c.lines {
		for _, p := range l.pts {
			if p.Y <= 0 {
				return false
			}
		}
	}
	return true
}

// style is how a line is drawn.
type style struct {
	color  color.Color
	shape  draw.GlyphDrawer
	radius vg.Length
	dashes []vg.Length
}

// styles gives each line its scheme's colour and marker (schemes in the
// order they first appear, so a scheme keeps them across a sweep's
// charts, whose lines come sorted) and its variant's dash pattern.
func (c *chart) styles() []style {
	scheme := map[string]int{}
	var out []style
	for _, l := range c.lines {
		i, ok := scheme[l.scheme]
		if !ok {
			i = len(scheme)
			scheme[l.scheme] = i
		}
		sh := shapes[i%len(shapes)]
		out = append(out, style{color: palette[i%len(palette)], shape: sh.glyph, radius: sh.radius, dashes: dashes[l.variant%len(dashes)]})
	}
	return out
}

// plot builds the gonum plot of c, its legend apart.
func (c *chart) plot() (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xlabel
	p.Y.Label.Text = c.ylabel
	legend := plot.NewLegend()
	if c.yMax > c.yMin {
		p.Y.Min, p.Y.Max = c.yMin, c.yMax
	}
	if c.yStep > 0 {
		p.Y.Tick.Marker = stepTicker(c.yStep)
	}
	if c.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicker{}
	}
	if c.xTicks != nil {
		p.X.Tick.Marker = valueTicker{values: c.xTicks, log: c.logX}
	}
	if c.logY && c.positiveY() {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicker{}
	}
	p.Add(plotter.NewGrid())
	for i, st := range c.styles() {
		l := c.lines[i]
		ln, pts, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return nil, legend, fmt.Errorf("sweepplot: %s: %w", l.label, err)
		}
		ln.Color, pts.Color = st.color, st.color
		ln.Dashes = st.dashes
		pts.Shape, pts.Radius = st.shape, st.radius
		p.Add(ln, pts)
		if l.errs != nil {
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{l.pts, l.errs})
			if err != nil {
				return nil, legend, fmt.Errorf("sweepplot: %s: %w", l.label, err)
			}
			eb.Color = st.color
			p.Add(eb)
		}
		legend.Add(l.label, ln, pts)
	}
	// A log axis needs a range: one x (or y) value makes none.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2+1
	}
	return p, legend, nil
}

// Chart geometry: the legend gets a column of its own right of the data,
// as wide as its longest label, so that no line hides behind it.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 5 * vg.Inch
)

// save draws c to path as a PNG, with its legend beside the data.
func save(path string, c *chart) error {
	if len(c.lines) == 0 {
		return fmt.Errorf("sweepplot: %s: no data to plot", path)
	}
	p, legend, err := c.plot()
	if err != nil {
		return err
	}
	img := vgimg.New(chartWidth, chartHeight)
	dc := draw.New(img)
	column := legend.ThumbnailWidth + vg.Points(18)
	for _, l := range c.lines {
		column = max(column, legend.ThumbnailWidth+legend.TextStyle.Width(l.label)+vg.Points(18))
	}
	p.Draw(draw.Crop(dc, 0, -column, 0, 0))
	legend.Top, legend.Left = true, true
	legend.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - p.Title.Padding
	legend.Draw(draw.Crop(dc, chartWidth-column+vg.Points(6), 0, 0, 0))
	return writePNG(path, img)
}

// writePNG writes img to path as a PNG.
func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logTicker labels a log axis at 1, 2 and 5 times the powers of ten when
// that makes at most maxLabels labels, else at 1 and 3 times them, else
// at the powers of ten, with unlabelled minor ticks between; if fewer
// than two labels fall within the range, its ends are labelled too, so
// that no axis has data without a label beside it (gonum's LogTicks
// labels only powers of ten, and a range within one decade got one label
// or none).
type logTicker struct{}

const maxLabels = 12

func (logTicker) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) {
		return nil
	}
	k0, k1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	var labelled []float64
	for _, mantissas := range [][]int{{1, 2, 5}, {1, 3}, {1}} {
		labelled = labelled[:0]
		for k := k0; k <= k1; k++ {
			for _, m := range mantissas {
				if v := decimal(m, k); v >= lo && v <= hi {
					labelled = append(labelled, v)
				}
			}
		}
		if len(labelled) <= maxLabels {
			break
		}
	}
	var ticks []plot.Tick
	if len(labelled) < 2 {
		for _, v := range []float64{lo, hi} {
			if !slices.Contains(labelled, v) {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)})
			}
		}
	}
	for _, v := range labelled {
		ticks = append(ticks, plot.Tick{Value: v, Label: label(v)})
	}
	for k := k0; k <= k1; k++ {
		for m := 1; m <= 9; m++ {
			if v := decimal(m, k); v >= lo && v <= hi && !slices.Contains(labelled, v) {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	return ticks
}

// stepTicker labels a linear axis at every multiple of its step, with a
// minor tick half way.
type stepTicker float64

func (t stepTicker) Ticks(lo, hi float64) []plot.Tick {
	step := float64(t)
	var ticks []plot.Tick
	for i := math.Ceil(lo / step * 2); i <= math.Floor(hi/step*2); i++ {
		v := i * step / 2
		if int(i)%2 != 0 {
			ticks = append(ticks, plot.Tick{Value: v})
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals(step), 64)})
	}
	return ticks
}

// decimals is how many decimals a multiple of step needs.
func decimals(step float64) int {
	return max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
}

// valueTicker labels exactly the data's values (the loss rates measured),
// with a log axis's minor ticks between.
type valueTicker struct {
	values []float64
	log    bool
}

func (t valueTicker) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, v := range t.values {
		ticks = append(ticks, plot.Tick{Value: v, Label: label(v)})
	}
	if t.log && lo > 0 {
		for _, m := range (logTicker{}).Ticks(lo, hi) {
			if m.Label == "" && !slices.Contains(t.values, m.Value) {
				ticks = append(ticks, plot.Tick{Value: m.Value})
			}
		}
	}
	return ticks
}

// decimal is m times 10^k, the float64 nearest to it (m*math.Pow10(k)
// is not, for negative k).
func decimal(m, k int) float64 {
	v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", m, k), 64)
	return v
}

// label is a tick's text for a round value: the shortest decimal that is
// v, without an exponent from 0.0001 up to a million.
func label(v float64) string {
	if v >= 1e-4 && v < 1e6 {
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', -1, 64), ".0")
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// Star draws StaR's Fig. 5a (fig "5a": the aggregate WRITE rate) or 5b
// ("5b": the RPC rate) from its points to dir/star-fig5X.png against the
// connection count, the stateful NIC beside StaR's stateless server.
func Star(dir, fig string, ps []sweep.StarPoint) (string, error) {
	c := &chart{title: "StaR Fig. 5a: 8-byte WRITEs, one outstanding per connection (embedded, 100 Gb/s, 12 µs RTT)",
		xlabel: "concurrent connections", ylabel: "aggregate WRITE rate (Mops)", logX: true, logY: true}
	if fig == "5b" {
		c.title = "StaR Fig. 5b: RPCs, 2.8 KB request, 1.4 KB response (embedded, 100 Gb/s, 12 µs RTT, MTU 1024)"
		c.ylabel = "RPC rate (Mcalls/s)"
	}
	idx := map[string]int{}
	for _, p := range ps {
		label := "RDMA (stateful)"
		if p.Mode == "star" {
			label = "StaR"
		}
		i, ok := idx[label]
		if !ok {
			i = len(c.lines)
			idx[label] = i
			c.lines = append(c.lines, line{label: label, scheme: p.Mode})
		}
		c.lines[i].pts = append(c.lines[i].pts, plotter.XY{X: float64(p.Connections), Y: p.MsgRate / 1e6})
	}
	path := dir + "/star-fig" + fig + ".png"
	return path, save(path, c)
}
