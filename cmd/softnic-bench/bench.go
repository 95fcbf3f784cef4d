package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// connectRetry is how long a client keeps trying to reach a server that
// is not listening yet.
const connectRetry = 30 * time.Second

// runVerbs runs one of the verbs tests, embedded or against the daemon.
func runVerbs(ctx context.Context, o *options, out io.Writer) error {
	cfg := o.config()
	p := &printer{o: o, out: out, cfg: cfg}
	p.cfg.TxDepth = o.txDepthOrDefault()
	if o.csv != "" {
		// Fail before measuring, not after, if the file cannot be written.
		if err := perftest.AppendCSV(o.csv); err != nil {
			return err
		}
	}
	hooks := perftest.Hooks{Connected: p.connected, Row: p.row, Counters: p.counters}
	if o.infinite && (o.embedded || o.server != "") {
		// The client's interrupt ends an infinite run: posting stops, the
		// WRs in flight complete, and both sides finish cleanly. A second
		// interrupt kills the process (main).
		cfg.Stop = ctx.Done()
		ctx = context.WithoutCancel(ctx)
	}
	if o.embedded {
		p.device = "softnic_a (embedded)"
		fab := perftest.Fabric{Link: o.link(), Scheme: o.scheme, Seed: o.seed, IPv6: o.ipv6, SchemeParams: recovery.Params{Knobs: o.knobs}}
		var pcapFile *os.File
		if o.pcap != "" {
			f, err := os.Create(o.pcap)
			if err != nil {
				return err
			}
			pcapFile, fab.Pcap = f, f
			hooks.Captured = func(n uint64) {
				fmt.Fprintf(os.Stderr, "softnic-bench: %d frames of softnic_a written to %s\n", n, o.pcap)
			}
		}
		_, err := perftest.RunEmbedded(ctx, cfg, fab, hooks)
		if pcapFile != nil {
			if cerr := pcapFile.Close(); err == nil {
				err = cerr
			}
		}
		return p.finish(err)
	}
	oneProc()
	var dev perftest.Device
	var closeDev func() error
	var err error
	if o.direct != "" {
		dev, closeDev, err = openDirect(o.direct, o.directQueue, o.mtu)
	} else {
		dev, closeDev, err = openDaemon(o.socket)
	}
	if err != nil {
		return err
	}
	defer closeDev()
	p.device = dev.Ctx.Name()
	if o.direct != "" {
		p.device += " (direct mode, queue " + strconv.Itoa(o.directQueue) + ")"
	}
	if err := o.checkStarDaemon(dev); err != nil {
		return err
	}
	role := perftest.Client
	var conn net.Conn
	if o.server == "" {
		role = perftest.Server
		fmt.Fprintln(out, "\n************************************\n* Waiting for client to connect... *\n************************************")
		conn, err = cm.Server(ctx, ":"+strconv.Itoa(o.port))
	} else {
		conn, err = cm.Client(ctx, net.JoinHostPort(o.server, strconv.Itoa(o.port)), connectRetry)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	before, _ := dev.Ctx.Stats()
	_, err = perftest.Run(ctx, dev, conn, role, cfg, hooks)
	if after, serr := dev.Ctx.Stats(); serr == nil && err == nil {
		p.daemonCounters(before, after)
	}
	return p.finish(err)
}

// printer prints perftest's banner and table as a run goes.
type printer struct {
	o       *options
	out     io.Writer
	cfg     perftest.Config
	device  string
	csvErr  error
	jsonErr error
	rows    int
	// local and remote are each side's rows of a bidirectional run, for
	// --report-both.
	local, remote []perftest.Row
}

func (p *printer) connected(c perftest.Connection) {
	w, o := p.out, p.o
	perftest.PrintRule(w)
	fmt.Fprintf(w, "                    %s\n", p.title())
	if o.events {
		fmt.Fprintf(w, " Test with events: completions by the CQ's completion channel\n")
	}
	fmt.Fprintf(w, " Device          : %s\n", p.device)
	fmt.Fprintf(w, " Number of qps   : %-14d Transport type : RoCEv2 RC\n", p.cfg.QPs)
	fmt.Fprintf(w, " Connection type : %-14s Using SRQ      : OFF\n", "RC")
	fmt.Fprintf(w, " Mtu             : %-14s TX depth       : %d\n", strconv.Itoa(o.mtu)+"[B]", p.cfg.TxDepth)
	if o.postList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", o.postList)
	}
	if o.set["qp-timeout"] {
		timeout := "none"
		if c.QPTimeout > 0 {
			timeout = (4096 * time.Nanosecond << c.QPTimeout).String()
		}
		fmt.Fprintf(w, " QP timeout      : %d (local ACK timeout %s)\n", c.QPTimeout, timeout)
	}
	cmNote := ""
	if o.rdmaCM {
		cmNote = fmt.Sprintf(" (-R: softnic has no RDMA CM; the QPs are connected by the TCP exchange on port %d, which carries what rdma_cm would)", o.port)
	}
	fmt.Fprintf(w, " rdma_cm QPs     : OFF%s\n", cmNote)
	fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	for _, line := range o.ignored(p.device) {
		fmt.Fprintf(w, " %s\n", line)
	}
	fmt.Fprintf(w, " Recovery scheme : %s (agreed: this side offered %v, the peer %v", c.QPScheme, c.Local[0].Schemes, c.Remote[0].Schemes)
	if c.QPScheme != c.Scheme {
		// Never expected (the run applies the agreement to every QP), but
		// the banner must not let the agreed name pass for what ran.
		fmt.Fprintf(w, "; agreed on %s, but the QPs run %s", c.Scheme, c.QPScheme)
	}
	fmt.Fprintln(w, ")")
	p.starBanner(w, c)
	switch {
	case p.cfg.Infinite:
		fmt.Fprintf(w, " Duration        : a row every %v until interrupted (--run_infinitely)\n", p.cfg.Duration)
	case p.cfg.Duration > 0:
		fmt.Fprintf(w, " Duration        : %v per size\n", p.cfg.Duration)
	}
	if !o.verbs.IsLatency() && (p.cfg.Duration > 0 || p.cfg.NoPeak || p.cfg.Iters > perftest.MaxPeakIters) {
		fmt.Fprintf(w, " WARNING: BW peak won't be measured in this run.\n")
	}
	if o.embedded {
		l := o.link()
		rate := "unlimited"
		if l.RateBps > 0 {
			rate = fmt.Sprintf("%g Gb/s", l.RateBps/1e9)
		}
		fmt.Fprintf(w, " Link            : in-memory fabric, %s, one-way delay %v, loss %g%%, TX ring %d frames\n", rate, l.Delay, o.loss, l.Ring)
		fmt.Fprintf(w, "                   both NICs and both sides share this process; times are wall clock\n")
	}
	perftest.PrintRule(w)
	const show = 4
	for i := range c.Local {
		if i == show {
			fmt.Fprintf(w, " ... and %d more QPs\n", len(c.Local)-show)
			break
		}
		for _, a := range []struct {
			side string
			e    cm.Endpoint
		}{{" local", c.Local[i]}, {"remote", c.Remote[i]}} {
			fmt.Fprintf(w, " %s address: QPN %#06x PSN %#06x RKey %#08x VAddr %#016x GID %v\n",
				a.side, a.e.QPN, uint32(a.e.PSN), a.e.RKey, a.e.Addr, a.e.GID)
		}
	}
	perftest.PrintHeader(w, o.verbs, o.gbits)
}

// title is perftest's test title, e.g. "RDMA_Write Bidirectional BW Test".
func (p *printer) title() string {
	title := p.o.verbs.Title()
	if p.o.bidir {
		title = strings.Replace(title, " BW Test", " Bidirectional BW Test", 1)
	}
	if p.o.postList > 1 {
		title = strings.Replace(title, " BW Test", " Post List BW Test", 1)
	}
	return title
}

func (p *printer) row(r perftest.Row) {
	perftest.PrintRow(p.out, r, p.o.gbits)
	p.rows++
	if r.Both != nil {
		p.local, p.remote = append(p.local, r.Both.Local), append(p.remote, r.Both.Remote)
	}
	if p.o.csv != "" && p.csvErr == nil {
		p.csvErr = perftest.AppendCSV(p.o.csv, r)
	}
	if p.o.outJSON != "" && p.jsonErr == nil {
		// perftest rewrites its JSON file with every report: the last
		// row's is left.
		p.jsonErr = writeJSON(p.o.outJSON, p.o, p.cfg, p.device, r)
	}
}

// reportBoth prints each side's rows of a bidirectional run after the
// table of their sums, as perftest's --report-both does.
func (p *printer) reportBoth() {
	for _, part := range []struct {
		name string
		rows []perftest.Row
	}{{"Local", p.local}, {"Remote", p.remote}} {
		if part.name == "Remote" {
			perftest.PrintRule(p.out) // the table before Local's ends with one
		}
		fmt.Fprintf(p.out, "\n %s results: \n", part.name)
		perftest.PrintHeader(p.out, p.o.verbs, p.o.gbits)
		for _, r := range part.rows {
			perftest.PrintRow(p.out, r, p.o.gbits)
		}
	}
}

// lossCounters are the NIC counters (rxe's names) that show what loss
// did to a run.
var lossCounters = []string{"sent_pkts", "retransmitted_pkts", "rcvd_seq_err", "implied_nak_seq_err",
	"local_ack_timeout_err", "seq_nak_sent", "duplicate_request", "out_of_seq_request"}

// counters prints the embedded NICs' loss counters.
func (p *printer) counters(client, server dataplane.Counters) {
	if p.rows == 0 {
		return
	}
	perftest.PrintRule(p.out)
	for _, nic := range []struct {
		name string
		c    dataplane.Counters
	}{{"client NIC", client}, {"server NIC", server}} {
		v := map[string]uint64{}
		nic.c.Each(func(name string, n uint64) { v[name] = n })
		p.printCounters(nic.name, v)
	}
}

// daemonCounters prints how the daemon's NIC counters moved during the
// run. They count every QP of the NIC, not only this run's.
func (p *printer) daemonCounters(before, after []verbs.Counter) {
	if p.rows == 0 {
		return
	}
	delta := map[string]uint64{}
	for _, c := range after {
		delta[c.Name] += c.Value
	}
	for _, c := range before {
		delta[c.Name] -= c.Value
	}
	perftest.PrintRule(p.out)
	p.printCounters("this NIC during the run (all its QPs)", delta)
}

// rxDropCounters are where received frames are dropped for want of room:
// the daemon's port (AF_XDP: RX ring full, fill ring empty, other drops;
// UDP: the socket's receive buffer) and the engine's own queues. Each
// that the NIC reports is printed, 0 included, so that a lossless run
// shows that nothing was dropped.
var rxDropCounters = []string{"port_rx_ring_full", "port_rx_fill_ring_empty_descs", "port_rx_dropped",
	"port_rx_socket_drops", "resp_queue_full", "rob_full"}

func (p *printer) printCounters(what string, v map[string]uint64) {
	line := func(names []string) string {
		var parts []string
		for _, name := range names {
			if n, ok := v[name]; ok {
				parts = append(parts, fmt.Sprintf("%s %d", name, n))
			}
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(p.out, " %s: %s\n", what, line(lossCounters))
	fmt.Fprintf(p.out, "   receive drops: %s\n", line(rxDropCounters))
}

func (p *printer) finish(err error) error {
	if p.rows > 0 {
		perftest.PrintRule(p.out)
	}
	if p.o.reportBoth && len(p.local) > 0 {
		p.reportBoth()
		perftest.PrintRule(p.out)
	}
	if err != nil {
		return err
	}
	if p.csvErr != nil {
		return fmt.Errorf("csv: %w", p.csvErr)
	}
	if p.jsonErr != nil {
		return fmt.Errorf("--out_json: %w", p.jsonErr)
	}
	return nil
}

// oneProc runs a daemon-mode measurement on one Go P, as perftest's
// loops run on one thread: the loop is one goroutine, and with a second P
// the runtime keeps a thread spinning for work that never comes, which on
// a two-core host takes the core a NIC's poll loop needs (write_lat 8 B on
// the testbed: t_typical 22-28 µs with two Ps, 16-20 µs with one). A
// GOMAXPROCS in the environment wins. The embedded mode keeps its Ps: its
// NICs' poll loop is a goroutine of this process.
func oneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
