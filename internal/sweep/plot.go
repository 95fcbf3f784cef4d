package sweep

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"os"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	for i, n := range names {
		l, pts, err := plotter.NewLinePoints(lines[n])
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		l.Color, pts.Color = c, c
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// PlotQPs draws the two figures of the QP sweep: aggregate message rate
// against QPs (the knee at cache capacity, StaR Fig. 5(a)) for each
// message size, and on-chip SR bytes against QPs (FaSR Fig. 8b).
func PlotQPs(dir string, rs []QPResult) ([]string, error) {
	var files []string
	sizes := map[int]bool{}
	for _, r := range rs {
		sizes[r.Size] = true
	}
	for size := range sizes {
		names, lines := series(rs, func(r QPResult) bool { return r.Size == size },
			func(r QPResult) string { return fmt.Sprintf("%s, %g%% loss", r.Scheme, r.Loss*100) },
			func(r QPResult) float64 { return r.MsgRate / 1e6 })
		path := fmt.Sprintf("%s/qps_msgrate_%dB.png", dir, size)
		if err := lineChart(path, fmt.Sprintf("%d B WRITEs, one outstanding per QP", size), "queue pairs", "aggregate message rate (Mops/s)", true, 0, names, lines); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	names, lines := series(rs, func(r QPResult) bool { return r.Loss == 0 && r.Size == minSize(rs) },
		func(r QPResult) string { return r.Scheme }, func(r QPResult) float64 { return float64(r.SRBytes) })
	path := dir + "/qps_sr_bytes.png"
	if err := lineChart(path, "on-chip loss-recovery state", "queue pairs", "bytes", true, 0, names, lines); err != nil {
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(dir + "/qps.csv")
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
	files, err := PlotQPs(dir, rs)
	return append([]string{dir + "/qps.csv"}, files...), err
}
