package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/dataplane/udpport"
	"github.com/softnic/softnic/internal/metricslint"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs/verbsd"
)

// statsNames are every name `softnic stats` can print but the pools',
// which /metrics labels: the engine's, the recovery schemes', either
// port's, the XDP program's and the verbs server's.
func statsNames() []string {
	var names []string
	c := dataplane.Counters{SchemeCounters: recovery.AllCounters()}
	c.Each(func(name string, _ uint64) { names = append(names, name) })
	for name := range (afxdp.Stats{}).All() {
		names = append(names, "port_"+name)
	}
	for name := range (udpport.Stats{}).All() {
		names = append(names, "port_"+name)
	}
	for name := range (bpf.Counters{}).All() {
		names = append(names, "xdp_"+name)
	}
	(*verbsd.Server)(nil).LimitCounters(func(name string, _ uint64) { names = append(names, name) })
	return names
}

// TestMetricSpecs: every counter has a metric spec (a counter added
// without one fails here), and the specs follow Prometheus's naming: a
// counter ends in _total, nothing else does, no unit is abbreviated
// (_ns) and times are in seconds.
func TestMetricSpecs(t *testing.T) {
	summary := map[string]bool{"rtt_samples": true, "rtt_sample_ns_sum": true}
	for _, name := range statsNames() {
		s, ok := specFor(name)
		switch {
		case summary[name]:
			if ok {
				t.Errorf("%s: has a spec, but is part of softnic_rtt_seconds", name)
			}
			continue
		case !ok:
			t.Errorf("%s: no metric spec (cmd/softnic/metricspec.go, docs/metrics.md)", name)
			continue
		case s.metric == "":
			continue // stats only
		}
		if s.help == "" {
			t.Errorf("%s: no help", name)
		}
		total := strings.HasSuffix(s.metric, "_total")
		switch {
		case s.typ == prometheus.CounterValue && !total:
			t.Errorf("%s: counter %s without _total", name, s.metric)
		case s.typ != prometheus.CounterValue && total:
			t.Errorf("%s: %s ends in _total but is not a counter", name, s.metric)
		case strings.Contains(s.metric+"_", "_ns_"):
			t.Errorf("%s: %s names nanoseconds", name, s.metric)
		case strings.HasSuffix(name, "_ns") != strings.Contains(s.metric, "_seconds"):
			t.Errorf("%s: %s: a time in nanoseconds must become seconds, and only that", name, s.metric)
		}
	}
	// The AF_XDP port's per-queue counters are perQueue, and nothing
	// else is.
	queued := map[string]bool{}
	for name := range (afxdp.QueueStats{}).All() {
		queued["port_"+name] = true
		if !metricSpecs["port_"+name].perQueue {
			t.Errorf("port_%s: afxdp.QueueStats has it, its spec is not perQueue", name)
		}
	}
	for name, s := range metricSpecs {
		if s.perQueue && !queued[name] {
			t.Errorf("%s: perQueue, but not in afxdp.QueueStats", name)
		}
		if s.perQueue && s.label != "" {
			t.Errorf("%s: perQueue and labelled %s", name, s.label)
		}
	}
	// Values that go down are gauges.
	for _, name := range []string{"qpc_resident", "qpc_resident_bytes", "rob_in_use", "sr_resident_bytes", "sram_shared_bytes", "rto_min_ns"} {
		if s := metricSpecs[name]; s.typ != prometheus.GaugeValue {
			t.Errorf("%s: not a gauge", name)
		}
	}
}

// specFor is the spec of the counter called name in softnic stats: its
// metricSpecs entry or, for a recovery scheme's counter, the spec
// schemeCounterSpec makes of it.
func specFor(name string) (metricSpec, bool) {
	if s, ok := metricSpecs[name]; ok {
		return s, true
	}
	for _, c := range recovery.AllCounters() {
		if c.Name == name {
			return schemeCounterSpec(c), true
		}
	}
	return metricSpec{}, false
}

// TestSchemeCounterNames: a recovery scheme's counter is named as the
// engine's are, means one thing whichever scheme reports it (one help),
// and takes no name the NIC's other counters have.
func TestSchemeCounterNames(t *testing.T) {
	var engine []string
	(&dataplane.Counters{}).Each(func(name string, _ uint64) { engine = append(engine, name) })
	help := map[string]string{}
	for _, name := range recovery.Names() {
		s, err := recovery.New(name, recovery.Params{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Counters() {
			switch h, seen := help[c.Name]; {
			case seen && h != c.Help:
				t.Errorf("%s: %s's help %q, another scheme's %q", c.Name, name, c.Help, h)
			case seen:
				continue
			}
			help[c.Name] = c.Help
			switch {
			case !regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`).MatchString(c.Name):
				t.Errorf("%s (%s): not lower case words joined by _", c.Name, name)
			case strings.HasSuffix(c.Name, "_total") || strings.HasSuffix(c.Name, "_ns") || strings.HasSuffix(c.Name, "_bytes"):
				t.Errorf("%s (%s): a scheme's counter counts events: no unit, no _total", c.Name, name)
			case c.Help == "":
				t.Errorf("%s (%s): no help", c.Name, name)
			case slices.Contains(engine, c.Name) || metricSpecs[c.Name].metric != "" || strings.HasPrefix(c.Name, "pool_"):
				t.Errorf("%s (%s): the name of another counter", c.Name, name)
			}
		}
	}
}

// TestSchemeCounterMetrics: a scheme's counter, whatever its name, is a
// counter in /metrics with the scheme's help, with no spec of its own
// (recovery/example_scheme_test.go has a scheme that reports one).
func TestSchemeCounterMetrics(t *testing.T) {
	c := dataplane.Counters{SchemeCounters: []recovery.Counter{{Name: "example_events", Help: "Events an example scheme counted.", Value: 7}}}
	_, page := scrape(t, metricsHandler(metricsSource{engine: func() dataplane.Counters { return c }}), "/metrics")
	want := "# HELP softnic_example_events_total Events an example scheme counted.\n# TYPE softnic_example_events_total counter\nsoftnic_example_events_total 7\n"
	if !strings.Contains(page, want) {
		t.Errorf("/metrics has no\n%s", want)
	}
	problems, err := metricslint.Problems(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// scrape GETs path from h and returns the body.
func scrape(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// TestMetricsLint runs send_bw at 2% loss between two embedded NICs on
// MELO (shared pools, a reorder buffer, retransmissions) and lints the
// /metrics of each NIC as the daemon serves it, the port, XDP and client
// counters included: promlint reports nothing, every counter ends in
// _total, the values that go down are gauges, the pools are labelled
// series and the build is described.
func TestMetricsLint(t *testing.T) {
	var client, server dataplane.Counters
	cfg := perftest.Config{Test: perftest.SendBW, Sizes: []int{4096}, Iters: 300, MTU: qp.MTU1024, Schemes: []string{recovery.MELO}}
	fab := perftest.Fabric{Link: perftest.DefaultLink, Scheme: recovery.MELO, Seed: 13}
	fab.Link.Loss = 0.02
	if _, err := perftest.RunEmbedded(context.Background(), cfg, fab, perftest.Hooks{Counters: func(c, s dataplane.Counters) { client, server = c, s }}); err != nil {
		t.Fatal(err)
	}
	if client.Retransmits == 0 || server.RDMARecvs == 0 || len(server.Pools) == 0 {
		t.Fatalf("the run did not exercise what is linted: retransmitted_pkts %d, rdma_recvs %d, %d pools", client.Retransmits, server.RDMARecvs, len(server.Pools))
	}
	others := func() []counter {
		var out []counter
		seen := map[string]bool{} // both port kinds' names, each once
		for _, name := range statsNames() {
			if (strings.HasPrefix(name, "port_") || strings.HasPrefix(name, "xdp_") || strings.HasPrefix(name, "client_")) && !seen[name] {
				seen[name] = true
				out = append(out, counter{name, 1})
			}
		}
		return out
	}
	for side, c := range map[string]dataplane.Counters{"client": client, "server": server} {
		h := metricsHandler(metricsSource{engine: func() dataplane.Counters { return c }, others: others, queues: testQueues})
		code, page := scrape(t, h, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s: /metrics: status %d: %s", side, code, page)
		}
		problems, err := metricslint.Problems(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", side, p)
		}
		fams, err := metricslint.Families(page)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]dto.MetricType{
			"softnic_sent_pkts_total": dto.MetricType_COUNTER, "softnic_qpc_stall_seconds_total": dto.MetricType_COUNTER,
			"softnic_qpc_resident": dto.MetricType_GAUGE, "softnic_rob_in_use": dto.MetricType_GAUGE,
			"softnic_pool_in_use": dto.MetricType_GAUGE, "softnic_pool_allocs_total": dto.MetricType_COUNTER,
			"softnic_rtt_seconds": dto.MetricType_SUMMARY, "softnic_build_info": dto.MetricType_GAUGE,
			"softnic_xdp_passed_total": dto.MetricType_COUNTER, "softnic_port_rx_frames_total": dto.MetricType_COUNTER,
			"softnic_client_limit_refusals_total": dto.MetricType_COUNTER,
			"softnic_sr_pool_drops_total":         dto.MetricType_COUNTER, // melo's, by its Counters
		} {
			if f := fams[name]; f == nil {
				t.Errorf("%s: no %s", side, name)
			} else if f.GetType() != want {
				t.Errorf("%s: %s: type %v, want %v", side, name, f.GetType(), want)
			}
		}
		for name, f := range fams {
			if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
				t.Errorf("%s: counter %s without _total", side, name)
			}
		}
		// The pools are series of one metric, by scheme and pool.
		pools := fams["softnic_pool_in_use"].GetMetric()
		if len(pools) != len(c.Pools) {
			t.Errorf("%s: %d softnic_pool_in_use series, want one for each of %d pools", side, len(pools), len(c.Pools))
		}
		for _, m := range pools {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["scheme"] != recovery.MELO || labels["pool"] == "" || strings.HasPrefix(labels["pool"], "melo") {
				t.Errorf("%s: pool series labelled %v, want scheme melo and the pool's own name", side, labels)
			}
		}
		// Counters in seconds and bytes carry the stats' values, scaled.
		if got := fams["softnic_tx_wire_bytes_total"].GetMetric()[0].GetCounter().GetValue(); got != float64(c.TxWireBytes) {
			t.Errorf("%s: softnic_tx_wire_bytes_total %v, want %d", side, got, c.TxWireBytes)
		}
		if s := fams["softnic_rtt_seconds"].GetMetric()[0].GetSummary(); s.GetSampleCount() != c.RTTSamples || s.GetSampleSum() != float64(c.RTTSampleNs)*1e-9 {
			t.Errorf("%s: softnic_rtt_seconds count %d sum %v, want %d and %v", side, s.GetSampleCount(), s.GetSampleSum(), c.RTTSamples, float64(c.RTTSampleNs)*1e-9)
		}
		if code, _ := scrape(t, h, "/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("%s: the metrics listener serves /debug/pprof/: status %d, want 404", side, code)
		}
	}
}

// testQueues are two AF_XDP queues' counters, 0 and 3: for each counter
// of afxdp.QueueStats, 10 and 30 plus the counter's index.
func testQueues() []queueCounters {
	var out []queueCounters
	for _, q := range []int{0, 3} {
		var cs []counter
		i := 0
		for name := range (afxdp.QueueStats{Queue: q}).All() {
			cs = append(cs, counter{"port_" + name, uint64(10*(q+1) + i)})
			i++
		}
		out = append(out, queueCounters{q, cs})
	}
	return out
}

// TestMetricsQueues: with an AF_XDP port, the per-queue counters are one
// series per queue, labelled queue, with the queue's value, and are not
// also exported as sums; the port's other counters stay unlabelled. With
// a port without queues (UDP) the same counters are sums, unlabelled.
func TestMetricsQueues(t *testing.T) {
	others := func() []counter {
		var out []counter
		for name, v := range (afxdp.Stats{RxFrames: 1000, Wakeups: 7, RxDropped: 1000}).All() {
			out = append(out, counter{"port_" + name, v})
		}
		return out
	}
	_, page := scrape(t, metricsHandler(metricsSource{others: others, queues: testQueues}), "/metrics")
	problems, err := metricslint.Problems(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, line := range []string{
		`softnic_port_rx_frames_total{queue="0"} 10`,
		`softnic_port_rx_frames_total{queue="3"} 40`,
		`softnic_port_tx_frames_total{queue="3"} 41`,
		`softnic_port_rx_dropped_total{queue="0"} 12`,
		`softnic_port_tx_ring_empty_descs_total{queue="3"} 47`,
		`softnic_port_wakeups_total 7`,
	} {
		if !strings.Contains(page, "\n"+line+"\n") {
			t.Errorf("no line %q", line)
		}
	}
	fams, err := metricslint.Families(page)
	if err != nil {
		t.Fatal(err)
	}
	for name := range (afxdp.QueueStats{}).All() {
		f := fams["softnic_port_"+name+"_total"]
		if len(f.GetMetric()) != 2 {
			t.Errorf("softnic_port_%s_total: %d series, want one for each of 2 queues", name, len(f.GetMetric()))
		}
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "queue" {
				t.Errorf("softnic_port_%s_total: series labelled %v, want queue only", name, l)
			}
		}
	}
	// Without queues: the sums, unlabelled.
	_, page = scrape(t, metricsHandler(metricsSource{others: others}), "/metrics")
	for _, line := range []string{"softnic_port_rx_frames_total 1000", "softnic_port_rx_dropped_total 1000"} {
		if !strings.Contains(page, "\n"+line+"\n") {
			t.Errorf("without queues: no line %q", line)
		}
	}
	if strings.Contains(page, "queue=") {
		t.Error("without queues: a series labelled queue")
	}
}

// TestBuildInfo: softnic_build_info is 1 with the Go version and labels
// for version and revision.
func TestBuildInfo(t *testing.T) {
	_, page := scrape(t, metricsHandler(metricsSource{}), "/metrics")
	fams, err := metricslint.Families(page)
	if err != nil {
		t.Fatal(err)
	}
	f := fams["softnic_build_info"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("softnic_build_info: %v", f)
	}
	labels := map[string]string{}
	for _, l := range f.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if !strings.HasPrefix(labels["goversion"], "go") || labels["version"] == "" || labels["revision"] == "" {
		t.Errorf("softnic_build_info labels %v: want goversion, version and revision", labels)
	}
}

// TestPprofFlag: profiles are off unless --pprof names an address, and
// then served there: the index and the named profiles.
func TestPprofFlag(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.pprof != "" {
		t.Errorf("--pprof defaults to %q, want off", o.pprof)
	}
	if o, err = parseRun([]string{"--iface", "x", "--pprof", "127.0.0.1:6060"}); err != nil || o.pprof != "127.0.0.1:6060" {
		t.Errorf("--pprof 127.0.0.1:6060: %q, %v", o.pprof, err)
	}
	h := pprofHandler()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, body := scrape(t, h, path); code != http.StatusOK || body == "" {
			t.Errorf("pprof %s: status %d, %d bytes", path, code, len(body))
		}
	}
	if code, _ := scrape(t, h, "/metrics"); code != http.StatusNotFound {
		t.Errorf("the pprof listener serves /metrics: status %d", code)
	}
}

// TestMetricsDoc: docs/metrics.md has a row for every counter with its
// metric, and {queue} after those labelled by queue.
func TestMetricsDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range statsNames() {
		row := "| `" + name + "` | "
		if s := metricSpecs[name]; s.metric != "" {
			row += "`softnic_" + s.metric
			if s.perQueue {
				row += "{queue}`"
			}
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/metrics.md has no row %q...", row)
		}
	}
	// A scheme's counter: the whole row, from what the scheme says.
	for _, c := range recovery.AllCounters() {
		row := "| `" + c.Name + "` | `softnic_" + c.Name + "_total` | counter | " + c.Help + " |\n"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/metrics.md has no row for a scheme's counter:\n%s", row)
		}
	}
}
