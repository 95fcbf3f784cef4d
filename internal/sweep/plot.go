package sweep

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
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
)

// WriteQPCSV writes the sweep's rows.
func WriteQPCSV(w io.Writer, rs []QPResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "qps", "size", "loss", "sram_bytes", "fetch_penalty_ns", "messages", "msg_rate", "goodput_gbps", "cache_misses", "hit_rate", "peak_resident_qps", "sr_bytes", "retransmits"})
	for _, r := range rs {
		cw.Write([]string{r.Scheme, strconv.Itoa(r.QPs), strconv.Itoa(r.Size), strconv.FormatFloat(r.Loss, 'g', -1, 64),
			strconv.Itoa(r.SRAM), strconv.FormatInt(int64(r.Penalty), 10), strconv.FormatUint(r.Messages, 10),
			strconv.FormatFloat(r.MsgRate, 'f', 0, 64), strconv.FormatFloat(r.GoodputGbps, 'f', 3, 64),
			strconv.FormatUint(r.Misses, 10), strconv.FormatFloat(r.HitRate, 'f', 4, 64), strconv.Itoa(r.PeakQPs),
			strconv.Itoa(r.SRBytes), strconv.FormatUint(r.Retransmits, 10)})
	}
	cw.Flush()
	return cw.Error()
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// series groups results into named lines keyed by what label returns.
func series(rs []QPResult, keep func(QPResult) bool, label func(QPResult) string, y func(QPResult) float64) (names []string, lines map[string]plotter.XYs) {
	lines = map[string]plotter.XYs{}
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		l := label(r)
		if _, ok := lines[l]; !ok {
			names = append(names, l)
		}
		lines[l] = append(lines[l], plotter.XY{X: float64(r.QPs), Y: y(r)})
	}
	sort.Strings(names)
	for _, n := range names {
		sort.Slice(lines[n], func(i, j int) bool { return lines[n][i].X < lines[n][j].X })
	}
	return names, lines
}

// positive reports whether every y is above 0, as a log axis needs (a
// scheme with no on-chip state, a point that completed nothing).
func positive(lines map[string]plotter.XYs) bool {
	for _, l := range lines {
		for _, p := range l {
			if p.Y <= 0 {
				return false
			}
		}
	}
	return true
}

// lineChart draws a log-x chart of the lines to path. yMax > 0 fixes the
// y axis to [0, yMax].
func lineChart(path, title, xlabel, ylabel string, logY bool, yMax float64, names []string, lines map[string]plotter.XYs) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	if yMax > 0 {
		p.Y.Min, p.Y.Max = 0, yMax
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	if logY && positive(lines) {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	// A line named "S, X% loss" takes the colour of its scheme S and is
	// dashed when X is not 0, so a scheme keeps its colour across lines
	// and charts (names come sorted, as recovery.Names() are); past the
	// palette, colours repeat dashed.
	group := map[string]int{}
	for _, n := range names {
		g, _, _ := strings.Cut(n, ", ")
		if _, ok := group[g]; !ok {
			group[g] = len(group)
		}
	}
	for _, n := range names {
		l, pts, err := plotter.NewLinePoints(lines[n])
		if err != nil {
			return err
		}
		g, rest, _ := strings.Cut(n, ", ")
		i := group[g]
		c := palette[i%len(palette)]
		l.Color, pts.Color = c, c
		if i >= len(palette) || rest != "" && !strings.HasPrefix(rest, "0% ") {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	// A log axis needs a range: one x (or y) value makes none.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2+1
	}
	return savePNG(p, path)
}

// Chart geometry: the legend gets a column of its own right of the data,
// so that ten lines (five schemes, two loss rates) hide none of them.
const (
	chartWidth   = 10 * vg.Inch
	chartHeight  = 5 * vg.Inch
	legendColumn = 1.9 * vg.Inch
)

// savePNG draws p with its legend beside it, not over the data.
func savePNG(p *plot.Plot, path string) error {
	img := vgimg.New(chartWidth, chartHeight)
	c := draw.New(img)
	legend := p.Legend
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(c, 0, -legendColumn, 0, 0))
	legend.Top, legend.Left = true, true
	legend.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - p.Title.Padding
	legend.Draw(draw.Crop(c, chartWidth-legendColumn+vg.Points(6), 0, 0, 0))
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

// PlotQPs draws the two figures of the QP sweep: aggregate message rate
// against QPs (the knee at cache capacity, StaR Fig. 5(a)) for each
// message size, and on-chip SR bytes against QPs (FaSR Fig. 8b), as
// qps_msgrate_<size>B.png and qps_sr_bytes.png.
func PlotQPs(dir string, rs []QPResult) ([]string, error) {
	return PlotQPsAs(dir, "qps", "", rs)
}

// PlotQPsAs is PlotQPs with the file names' prefix (<prefix>_msgrate_<size>B.png,
// <prefix>_sr_bytes.png) and a note appended to the titles (e.g. "testbed,
// SRAM 76800 B").
func PlotQPsAs(dir, prefix, note string, rs []QPResult) ([]string, error) {
	var files []string
	var sizes []int
	for _, r := range rs {
		if !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	sort.Ints(sizes)
	suffix := ""
	if note != "" {
		suffix = " (" + note + ")"
	}
	for _, size := range sizes {
		names, lines := series(rs, func(r QPResult) bool { return r.Size == size },
			func(r QPResult) string { return fmt.Sprintf("%s, %g%% loss", r.Scheme, r.Loss*100) },
			func(r QPResult) float64 { return r.MsgRate / 1e6 })
		path := fmt.Sprintf("%s/%s_msgrate_%dB.png", dir, prefix, size)
		if err := lineChart(path, fmt.Sprintf("%d B WRITEs, one outstanding per QP%s", size, suffix), "queue pairs", "aggregate message rate (Mops/s)", true, 0, names, lines); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	// SR bytes depend only on the scheme and the QP count: one line per
	// scheme, from the rows of one size and loss (the lossless rows of the
	// smallest size when there are any).
	size, loss := minSize(rs), -1.0
	for _, r := range rs {
		if r.Size == size && (loss < 0 || r.Loss < loss) {
			loss = r.Loss
		}
	}
	names, lines := series(rs, func(r QPResult) bool { return r.Loss == loss && r.Size == size },
		func(r QPResult) string { return r.Scheme }, func(r QPResult) float64 { return float64(r.SRBytes) })
	path := fmt.Sprintf("%s/%s_sr_bytes.png", dir, prefix)
	if err := lineChart(path, "on-chip loss-recovery state"+suffix, "queue pairs", "bytes", true, 0, names, lines); err != nil {
		return nil, err
	}
	return append(files, path), nil
}

func minSize(rs []QPResult) int {
	m := 0
	for _, r := range rs {
		if m == 0 || r.Size < m {
			m = r.Size
		}
	}
	return m
}

// SaveQPs writes qps.csv and the plots into dir.
func SaveQPs(dir string, rs []QPResult) ([]string, error) {
	return SaveQPsAs(dir, "qps", "", rs)
}

// SaveQPsAs writes <prefix>.csv and the plots (PlotQPsAs) into dir.
func SaveQPsAs(dir, prefix, note string, rs []QPResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(dir + "/" + prefix + ".csv")
	if err != nil {
		return nil, err
	}
	if err := WriteQPCSV(f, rs); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	files, err := PlotQPsAs(dir, prefix, note, rs)
	return append([]string{dir + "/" + prefix + ".csv"}, files...), err
}
