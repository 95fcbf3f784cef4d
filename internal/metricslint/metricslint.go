// Package metricslint checks a scraped /metrics page against Prometheus's
// conventions, for the tests of the daemon's metrics (cmd/softnic, and
// tests/ on a running daemon).
package metricslint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Problems lints text, a page in the text exposition format: what
// promlint reports (a counter without _total or another type with it,
// units that are not base units or abbreviated, no HELP, ...), then
// softnic's own rule: no softnic_ metric is untyped (the daemon exports a
// counter it has no spec for untyped). Nil means a clean page.
func Problems(text string) ([]string, error) {
	lint, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		return nil, fmt.Errorf("promlint: %w", err)
	}
	var out []string
	for _, p := range lint {
		out = append(out, p.Metric+": "+p.Text)
	}
	fams, err := Families(text)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		if strings.HasPrefix(name, "softnic_") && fams[name].GetType() == dto.MetricType_UNTYPED {
			out = append(out, name+": untyped (the daemon has no metric spec for it)")
		}
	}
	return out, nil
}

// Families parses text into its metric families, by name.
func Families(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}
