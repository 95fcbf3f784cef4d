package sweepplot

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

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
