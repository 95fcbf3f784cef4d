package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/recovery"
)

// metricsSource is what /metrics reads at scrape time: the same counters
// as the stats RPC, so the data path never touches a metric (the engine,
// the port and the XDP program keep their own plain counters).
type metricsSource struct {
	// engine returns the engine's counters; nil when there is no engine.
	engine func() dataplane.Counters
	// others returns the rest of `softnic stats` by their stats names:
	// the port's (port_*), the XDP program's (xdp_*) and the verbs
	// server's (client_*).
	others func() []counter
	// queues returns the port's counters per receive queue (port_*,
	// the AF_XDP port's); nil for a port without queues. When it is
	// set, the counters whose spec is perQueue go out labelled queue,
	// one series per queue, and their sums in others not at all: no
	// metric is exported both with and without the label.
	queues func() []queueCounters
}

// queueCounters are one receive queue's counters, by their stats names.
type queueCounters struct {
	queue    int
	counters []counter
}

// counterCollector exports a metricsSource as softnic_* metrics, named
// and typed by metricSpecs. It is an unchecked collector (Describe sends
// nothing) because the set of metrics comes from the running
// configuration (port kind, XDP or not, the schemes' pools).
type counterCollector struct {
	src metricsSource
}

func (c counterCollector) Describe(chan<- *prometheus.Desc) {}

func (c counterCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.engine != nil {
		e := c.src.engine()
		var rtt struct {
			count uint64
			sumNs uint64
		}
		pools := e.Pools
		e.Pools = nil // by label below, not by name
		schemes := e.SchemeCounters
		e.SchemeCounters = nil // with their own help below
		e.Each(func(name string, v uint64) {
			switch name {
			case "rtt_samples":
				rtt.count = v
			case "rtt_sample_ns_sum":
				rtt.sumNs = v
			default:
				emit(ch, name, v)
			}
		})
		ch <- prometheus.MustNewConstSummary(rttDesc, rtt.count, float64(rtt.sumNs)*1e-9, nil)
		for _, x := range schemes {
			emitSpec(ch, schemeCounterSpec(x), x.Value, "")
		}
		for _, p := range pools {
			scheme, pool := poolLabels(p.Name)
			for _, m := range []struct {
				d *prometheus.Desc
				t prometheus.ValueType
				v float64
			}{
				{poolBytesDesc, prometheus.GaugeValue, float64(p.Bytes)},
				{poolSlotsDesc, prometheus.GaugeValue, float64(p.Slots)},
				{poolInUseDesc, prometheus.GaugeValue, float64(p.InUse)},
				{poolPeakDesc, prometheus.GaugeValue, float64(p.Peak)},
				{poolAllocsDesc, prometheus.CounterValue, float64(p.Allocs)},
				{poolExhaustedDesc, prometheus.CounterValue, float64(p.Exhausted)},
			} {
				ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, scheme, pool)
			}
		}
	}
	if c.src.others != nil {
		for _, x := range c.src.others() {
			if c.src.queues != nil && metricSpecs[x.name].perQueue {
				continue // by queue below
			}
			emit(ch, x.name, x.value)
		}
	}
	if c.src.queues != nil {
		for _, q := range c.src.queues() {
			queue := strconv.Itoa(q.queue)
			for _, x := range q.counters {
				if metricSpecs[x.name].perQueue {
					emitQueue(ch, x.name, x.value, queue)
				}
			}
		}
	}
}

// emit sends the counter called name in `softnic stats` as its metric. A
// name without a spec (a counter added without one; TestMetricSpecs
// catches it) still goes out, untyped, so that nothing is lost.
func emit(ch chan<- prometheus.Metric, name string, v uint64) {
	emitQueue(ch, name, v, "")
}

// emitQueue is emit for one receive queue's value of a perQueue counter:
// the series labelled queue. An empty queue is emit's unlabelled sum.
func emitQueue(ch chan<- prometheus.Metric, name string, v uint64, queue string) {
	s, ok := metricSpecs[name]
	if !ok {
		d := prometheus.NewDesc("softnic_"+name, "softnic counter "+name+" (see softnic stats)", nil, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.UntypedValue, float64(v))
		return
	}
	emitSpec(ch, s, v, queue)
}

// emitSpec sends v as the metric s says.
func emitSpec(ch chan<- prometheus.Metric, s metricSpec, v uint64, queue string) {
	if s.metric == "" {
		return // in softnic stats only
	}
	val := float64(v)
	if s.scale != 0 {
		val *= s.scale
	}
	var labels []string
	var values []string
	if s.label != "" {
		labels, values = []string{s.label}, []string{s.value}
	}
	help := s.help
	if queue != "" {
		labels, values = append(labels, "queue"), append(values, queue)
		help += " By AF_XDP receive queue."
	}
	d := prometheus.NewDesc("softnic_"+s.metric, help, labels, nil)
	ch <- prometheus.MustNewConstMetric(d, s.typ, val, values...)
}

// poolLabels splits a shared pool's name, "melo_tx_bits", into the scheme
// that owns it and the pool's own name: "melo" and "tx_bits". A name that
// starts with no scheme's name is all pool.
func poolLabels(name string) (scheme, pool string) {
	if s, rest, ok := strings.Cut(name, "_"); ok && slices.Contains(recovery.Names(), s) {
		return s, rest
	}
	return "", name
}

var (
	rttDesc = prometheus.NewDesc("softnic_rtt_seconds",
		"Round-trip samples taken for the adaptive retransmission timeout (count), and their sum (stats rtt_samples, rtt_sample_ns_sum).", nil, nil)
	poolLabelNames    = []string{"scheme", "pool"}
	poolBytesDesc     = prometheus.NewDesc("softnic_pool_bytes", "On-chip size of a recovery scheme's shared pool, management structures included (stats pool_<scheme>_<pool>_bytes).", poolLabelNames, nil)
	poolSlotsDesc     = prometheus.NewDesc("softnic_pool_slots", "Blocks or units of a shared pool (stats pool_*_slots).", poolLabelNames, nil)
	poolInUseDesc     = prometheus.NewDesc("softnic_pool_in_use", "Blocks or units of a shared pool allocated now (stats pool_*_in_use).", poolLabelNames, nil)
	poolPeakDesc      = prometheus.NewDesc("softnic_pool_peak", "Most blocks or units of a shared pool allocated at once (stats pool_*_peak).", poolLabelNames, nil)
	poolAllocsDesc    = prometheus.NewDesc("softnic_pool_allocs_total", "Successful allocations from a shared pool (stats pool_*_allocs).", poolLabelNames, nil)
	poolExhaustedDesc = prometheus.NewDesc("softnic_pool_exhausted_total", "Allocations a shared pool refused, empty (stats pool_*_exhausted).", poolLabelNames, nil)
)

// buildInfoCollector is softnic_build_info: 1, with the build's version,
// VCS revision and Go version as labels (runtime/debug.ReadBuildInfo).
func buildInfoCollector() prometheus.Collector {
	version, revision, modified, goVersion := "unknown", "unknown", "unknown", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "softnic_build_info",
		Help: "Always 1; the labels say which softnic this is: its module version, VCS revision (commit), whether the tree had changes, and the Go version it was built with.",
		ConstLabels: prometheus.Labels{
			"version": version, "revision": revision, "modified": modified, "goversion": goVersion,
		},
	})
	g.Set(1)
	return g
}

// metricsHandler serves /metrics, and nothing else, from src.
func metricsHandler(src metricsSource) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(counterCollector{src}, buildInfoCollector(), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// pprofHandler serves the running daemon's profiles under /debug/pprof/,
// for finding where the data path's time goes (go tool pprof
// http://ADDR/debug/pprof/profile). It has a listener of its own
// (--pprof, off by default): a profile stops the world and a trace costs
// the poll loop, which no metrics scraper should be able to ask for.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveHTTP listens on addr at once, so that a busy address is a start-up
// error, and serves h until the returned server is shut down.
func serveHTTP(addr string, h http.Handler, what string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" server stopped", "err", err)
		}
	}()
	return srv, nil
}
