package sweepplot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/internal/sweep"
)

// TestIGBNSeedsChart: one line per scheme, its points in loss order with
// their error bars beside them (the 95% t-interval, cut at 0 below), no
// lossless point; the PNG is written.
func TestIGBNSeedsChart(t *testing.T) {
	pt := func(s string, loss, rel, lo, hi float64) sweep.IGBNSummary {
		return sweep.IGBNSummary{IGBNResult: sweep.IGBNResult{IGBNConfig: sweep.IGBNConfig{Scheme: s, Loss: loss, Timeout: 15}, Gbps: 40 * rel, Relative: rel},
			Seeds: 5, RelLo: lo, RelHi: hi}
	}
	ss := []sweep.IGBNSummary{
		pt("igbn", 0, 1, 1, 1), pt("igbn", 0.01, 0.45, 0.44, 0.46), pt("igbn", 0.001, 0.9, 0.89, 0.92),
		pt("gbn", 0, 1, 1, 1), pt("gbn", 0.01, 0.01, -0.2, 0.05),
	}
	c := igbnSeedsChart("t", ss)
	if len(c.lines) != 2 || c.lines[0].scheme != "gbn" || c.lines[1].scheme != "igbn" {
		t.Fatalf("lines %+v", c.lines)
	}
	g, i := c.lines[0], c.lines[1]
	if len(g.pts) != 1 || g.errs[0].Low != 0.01 || g.errs[0].High != 0.04 {
		t.Fatalf("gbn %+v %+v: want the bar cut at 0", g.pts, g.errs)
	}
	if len(i.pts) != 2 || i.pts[0].X != 0.1 || i.pts[1].X != 1 || i.errs[0].High < 0.0199 || i.errs[0].High > 0.0201 || i.errs[1].Low < 0.0099 || i.errs[1].Low > 0.0101 {
		t.Fatalf("igbn %+v %+v: want loss order, bars beside their points", i.pts, i.errs)
	}
	path := filepath.Join(t.TempDir(), "f.png")
	if err := IGBNSeeds(path, "t", ss); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
