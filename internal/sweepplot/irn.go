package sweepplot

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/softnic/softnic/internal/sweep"
)

// IRN draws IRN's Figs. 1-3 layout to <dir>/<name>.png: three bar charts
// side by side (average slowdown, average FCT, 99th-percentile FCT), a
// bar per configuration (scheme, PFC, congestion control) in the order
// the rows first name it, each the mean over the rows' seeds.
func IRN(dir, name, title string, rs []sweep.IRNResult) (string, error) {
	type agg struct {
		label          string
		slow, fct, p99 float64
		n              int
	}
	var order []string
	by := map[string]*agg{}
	for _, r := range rs {
		pfc := ""
		if r.PFC {
			pfc = "+PFC"
		}
		cc := ""
		if r.CC != "" && r.CC != "none" {
			cc = "+" + r.CC
		}
		l := r.Label() + cc + pfc
		a, ok := by[l]
		if !ok {
			a = &agg{label: l}
			by[l] = a
			order = append(order, l)
		}
		a.slow += r.AvgSlowdown
		a.fct += r.AvgFCT.Seconds() * 1e6
		a.p99 += r.P99FCT.Seconds() * 1e6
		a.n++
	}
	if len(order) == 0 {
		return "", fmt.Errorf("sweepplot: IRN %s: no rows", name)
	}
	metrics := []struct {
		ylabel string
		v      func(*agg) float64
	}{
		{"average slowdown", func(a *agg) float64 { return a.slow / float64(a.n) }},
		{"average FCT (µs)", func(a *agg) float64 { return a.fct / float64(a.n) }},
		{"99th-percentile FCT (µs)", func(a *agg) float64 { return a.p99 / float64(a.n) }},
	}
	const w, h = 13 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, 0, -vg.Points(22))
	tiles := draw.Tiles{Rows: 1, Cols: len(metrics), PadX: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	for i, m := range metrics {
		p := plot.New()
		p.Y.Label.Text = m.ylabel
		p.Y.Min = 0
		vals := make(plotter.Values, len(order))
		for j, l := range order {
			vals[j] = m.v(by[l])
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(28))
		if err != nil {
			return "", err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Color = color.Black
		p.Add(bars)
		p.NominalX(order...)
		p.X.Tick.Label.Rotation = 0.5
		p.X.Tick.Label.XAlign = draw.XRight
		p.Draw(tiles.At(top, i, 0))
	}
	ts := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, XAlign: draw.XCenter, YAlign: draw.YTop}
	ts.Font.Size = vg.Points(12)
	ts.Handler = plot.DefaultTextHandler
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(4)}, title)
	path := filepath.Join(dir, name+".png")
	if err := writePNG(path, img); err != nil {
		return "", fmt.Errorf("sweepplot: IRN %s: %w", name, err)
	}
	return path, nil
}
