package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// counterCollector exports a snapshot of the daemon's counters as
// Prometheus counters named softnic_<name>. It reads the same snapshot as
// the stats RPC at scrape time, so the data path never touches a metric:
// the engine, the port and the XDP program keep their own plain counters.
// It is an unchecked collector (Describe sends nothing) because the set of
// names comes from the running configuration (port kind, XDP or not).
type counterCollector struct {
	snapshot func() []counter
}

func (c counterCollector) Describe(chan<- *prometheus.Desc) {}

func (c counterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c.snapshot() {
		desc := prometheus.NewDesc("softnic_"+x.name, "softnic counter "+x.name+" (see `softnic stats`)", nil, nil)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(x.value))
	}
}

// serveMetrics listens on addr at once, so that a busy address is a
// start-up error, and serves /metrics until the returned server is shut
// down.
func serveMetrics(addr string, snapshot func() []counter, log *slog.Logger) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(counterCollector{snapshot}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// CPU and heap profiles of the running daemon, for finding where the
	// data path's time goes (go tool pprof http://ADDR/debug/pprof/profile).
	// The listener is loopback by default, like the metrics.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return srv, nil
}
