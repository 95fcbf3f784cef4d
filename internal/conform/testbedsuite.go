//go:build linux

package conform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/softnic/softnic/dataplane"
)

// TestbedPlan is one scheme and case to run Reps times on the testbed.
type TestbedPlan struct {
	Scheme string
	Case   Case
	Reps   int
}

// TestbedCheck is one check over a case's repetitions, beside the
// fabric's verdict.
type TestbedCheck struct {
	Name   string `json:"name"`
	Doc    string `json:"doc"`
	Fabric *bool  `json:"fabric_pass"` // nil: the fabric has no such check for the case
	Passed int    `json:"testbed_passed"`
	Runs   int    `json:"testbed_runs"` // runs that judged it
	// Failed is what a failing run measured (the first).
	Failed string `json:"testbed_failed,omitempty"`
}

// LatencySpread is one latency of the report over the repetitions, in
// ns, beside the fabric's exact value. The percentiles are nearest-rank.
type LatencySpread struct {
	Metric string `json:"metric"` // the rule's name / the report's metric
	Fabric *int64 `json:"fabric_ns"`
	N      int    `json:"n"`
	Median int64  `json:"median_ns"`
	P5     int64  `json:"p5_ns"`
	P95    int64  `json:"p95_ns"`
	Min    int64  `json:"min_ns"`
	Max    int64  `json:"max_ns"`
}

// TestbedCase is a case's repetitions for one scheme.
type TestbedCase struct {
	Case      string          `json:"case"`
	Reps      int             `json:"reps"`
	Checks    []TestbedCheck  `json:"checks"`
	Latencies []LatencySpread `json:"latencies"`
	// RunsWithSwitchDrops counts runs in which the switch lost a frame
	// besides the rules' (Observation.SwitchDrops); Errors are runs that
	// could not run.
	RunsWithSwitchDrops int      `json:"runs_with_switch_drops"`
	Errors              []string `json:"errors,omitempty"`
}

// TestbedScheme is every case run for one scheme.
type TestbedScheme struct {
	Scheme string        `json:"scheme"`
	Cases  []TestbedCase `json:"cases"`
}

// TestbedResult is the suite on the testbed beside the fabric's.
type TestbedResult struct {
	TimerShift uint8           `json:"timer_shift"` // timers ×2^shift (TestbedRunner.TimerShift)
	FabricSeed uint64          `json:"fabric_seed"`
	Runs       int             `json:"runs"`
	Took       string          `json:"took"`
	Schemes    []TestbedScheme `json:"schemes"`
	// Differ lists every check whose verdict is not the fabric's in
	// every run: "scheme case check: fabric pass|FAIL, testbed n/R".
	Differ []string `json:"differ"`
}

// RunTestbedSuite runs the plan on r's testbed and the same cases on the
// fabric (seed), and sets the verdicts and latencies side by side.
func RunTestbedSuite(r *TestbedRunner, plan []TestbedPlan, seed uint64) (*TestbedResult, error) {
	began := time.Now()
	res := &TestbedResult{TimerShift: r.TimerShift, FabricSeed: seed}
	for _, p := range plan {
		class, err := classify(p.Scheme)
		if err != nil {
			return nil, err
		}
		run, err := RunCase(Setup{Scheme: p.Scheme, CC: p.Case.CC, Seed: seed}, p.Case.Workload, p.Case.Rules(hostAddr(0), hostAddr(1)))
		if err != nil {
			return nil, fmt.Errorf("conform: fabric: %s, case %s: %w", p.Scheme, p.Case.Name, err)
		}
		fab := &run.Observation
		tc := TestbedCase{Case: p.Case.Name, Reps: p.Reps}
		for _, ch := range judge(class, p.Case, fab) {
			pass := ch.Pass
			tc.Checks = append(tc.Checks, TestbedCheck{Name: ch.Name, Doc: ch.Doc, Fabric: &pass})
		}
		fabLat := latencies(fab.Report)
		samples := map[string][]int64{}
		var order []string
		for _, m := range fabLat {
			order = append(order, m.name)
		}
		for rep := range p.Reps {
			o, err := r.RunCase(p.Scheme, p.Case)
			res.Runs++
			if err != nil {
				tc.Errors = append(tc.Errors, err.Error())
				continue
			}
			if len(o.SwitchDrops) > 0 {
				tc.RunsWithSwitchDrops++
			}
			checks := judge(class, p.Case, o)
			if err := r.keepFailed(p.Scheme, p.Case.Name, rep+1, o, checks); err != nil {
				return nil, err
			}
			for _, ch := range checks {
				i := slices.IndexFunc(tc.Checks, func(c TestbedCheck) bool { return c.Name == ch.Name })
				if i < 0 {
					tc.Checks = append(tc.Checks, TestbedCheck{Name: ch.Name, Doc: ch.Doc})
					i = len(tc.Checks) - 1
				}
				c := &tc.Checks[i]
				c.Runs++
				if ch.Pass {
					c.Passed++
				} else if c.Failed == "" {
					c.Failed = ch.Measured
				}
			}
			for _, m := range latencies(o.Report) {
				if _, ok := samples[m.name]; !ok && !slices.Contains(order, m.name) {
					order = append(order, m.name)
				}
				samples[m.name] = append(samples[m.name], m.v)
			}
		}
		for _, name := range order {
			ls := spread(samples[name])
			ls.Metric = name
			for _, m := range fabLat {
				if m.name == name {
					v := m.v
					ls.Fabric = &v
				}
			}
			tc.Latencies = append(tc.Latencies, ls)
		}
		for _, c := range tc.Checks {
			fabPass := c.Fabric != nil && *c.Fabric
			if c.Fabric == nil || c.Runs != p.Reps || (fabPass && c.Passed != c.Runs) || (!fabPass && c.Passed != 0) {
				res.Differ = append(res.Differ, fmt.Sprintf("%s %s %s: fabric %s, testbed %d/%d", p.Scheme, p.Case.Name, c.Name,
					verdict(c.Fabric), c.Passed, c.Runs))
			}
		}
		i := slices.IndexFunc(res.Schemes, func(s TestbedScheme) bool { return s.Scheme == p.Scheme })
		if i < 0 {
			res.Schemes = append(res.Schemes, TestbedScheme{Scheme: p.Scheme})
			i = len(res.Schemes) - 1
		}
		res.Schemes[i].Cases = append(res.Schemes[i].Cases, tc)
	}
	res.Took = time.Since(began).Round(time.Second).String()
	return res, nil
}

// keepFailed writes a run that failed a check to r.KeepFailed.
func (r *TestbedRunner) keepFailed(scheme, name string, run int, o *Observation, checks []Check) error {
	var failed []Check
	for _, ch := range checks {
		if !ch.Pass {
			failed = append(failed, ch)
		}
	}
	if r.KeepFailed == "" || len(failed) == 0 {
		return nil
	}
	if err := os.MkdirAll(r.KeepFailed, 0o755); err != nil {
		return err
	}
	base := filepath.Join(r.KeepFailed, fmt.Sprintf("%s-%s-%d", scheme, name, run))
	var tr bytes.Buffer
	if err := WriteTrace(&tr, o.Trace, o.Events); err != nil {
		return err
	}
	if err := os.WriteFile(base+".trace", tr.Bytes(), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Failed                    []Check
		Elapsed                   time.Duration
		SwitchDrops               map[string]uint64
		ReqCounters, RespCounters map[string]uint64
	}{failed, o.Elapsed, o.SwitchDrops, nonZero(&o.ReqCounters), nonZero(&o.RespCounters)}, "", "  ")
	if err != nil {
		return err
	}
	if r.Log != nil {
		fmt.Fprintf(r.Log, "  kept %s.{trace,json}: %s %s\n", base, failed[0].Name, failed[0].Measured)
	}
	return os.WriteFile(base+".json", append(js, '\n'), 0o644)
}

func nonZero(c *dataplane.Counters) map[string]uint64 {
	m := map[string]uint64{}
	c.Each(func(name string, v uint64) {
		if v != 0 {
			m[name] = v
		}
	})
	return m
}

func verdict(p *bool) string {
	switch {
	case p == nil:
		return "-"
	case *p:
		return "pass"
	}
	return "FAIL"
}

type metric struct {
	name string
	v    int64
}

// latencies are a report's latencies, named by the rule and the metric
// (a rule applied twice: its second row is name#2).
func latencies(rep Report) []metric {
	var ms []metric
	seen := map[string]int{}
	for _, row := range rep.Rows {
		seen[row.Name]++
		label := row.Name
		if n := seen[row.Name]; n > 1 {
			label = fmt.Sprintf("%s#%d", row.Name, n)
		}
		for _, m := range []struct {
			name string
			v    *int64
		}{{"signal", row.SignalLatency}, {"retx", row.RetxLatency}, {"recovery", row.RecoveryLatency}, {"cnp", row.CNPLatency}} {
			if m.v != nil {
				ms = append(ms, metric{label + " " + m.name, *m.v})
			}
		}
	}
	return ms
}

func spread(v []int64) LatencySpread {
	ls := LatencySpread{N: len(v)}
	if len(v) == 0 {
		return ls
	}
	s := slices.Clone(v)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) int64 {
		// Nearest rank: the smallest value with at least p of the
		// samples at or below it.
		k := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(k, 0), len(s)-1)]
	}
	ls.Median, ls.P5, ls.P95 = rank(0.5), rank(0.05), rank(0.95)
	ls.Min, ls.Max = s[0], s[len(s)-1]
	return ls
}

func nsString(v int64) string { return fmt.Sprintf("%.1f", float64(v)/1e3) }

// WriteTables writes per scheme the checks (fabric verdict, testbed pass
// count) and the latencies (fabric, testbed median and 5th-95th
// percentile, µs), then the checks whose verdicts differ.
func (r *TestbedResult) WriteTables(w io.Writer) error {
	fmt.Fprintf(w, "testbed: %d runs in %s, timers x%d; fabric: seed %d\n", r.Runs, r.Took, 1<<r.TimerShift, r.FabricSeed)
	for _, s := range r.Schemes {
		fmt.Fprintf(w, "\n scheme %s\n", s.Scheme)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, " case\tcheck\tfabric\ttestbed")
		for _, c := range s.Cases {
			for _, ch := range c.Checks {
				fmt.Fprintf(tw, " %s\t%s\t%s\t%d/%d\n", c.Case, ch.Name, verdict(ch.Fabric), ch.Passed, c.Reps)
			}
			if len(c.Errors) > 0 || c.RunsWithSwitchDrops > 0 {
				fmt.Fprintf(tw, " %s\t(runs that failed to run: %d, with switch drops: %d)\t\t\n", c.Case, len(c.Errors), c.RunsWithSwitchDrops)
			}
		}
		fmt.Fprintln(tw, "\n case\tlatency (µs)\tfabric\ttestbed median\tp5-p95\tn")
		for _, c := range s.Cases {
			for _, l := range c.Latencies {
				fab := "-"
				if l.Fabric != nil {
					fab = nsString(*l.Fabric)
				}
				med, rng := "-", "-"
				if l.N > 0 {
					med, rng = nsString(l.Median), nsString(l.P5)+"-"+nsString(l.P95)
				}
				fmt.Fprintf(tw, " %s\t%s\t%s\t%s\t%s\t%d\n", c.Case, l.Metric, fab, med, rng, l.N)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Differ) == 0 {
		fmt.Fprintln(w, "\nevery check has the fabric's verdict in every run")
		return nil
	}
	fmt.Fprintln(w, "\nverdicts that differ from the fabric's:")
	for _, d := range r.Differ {
		fmt.Fprintln(w, "  "+d)
	}
	return nil
}

// WriteJSON writes the result as one JSON document.
func (r *TestbedResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
