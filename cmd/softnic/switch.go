package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/xswitch"
	"github.com/softnic/softnic/internal/conform"
	"github.com/softnic/softnic/verbs/verbsd"
)

// softnic switch: a RoCEv2-aware switch over AF_XDP on N interfaces
// (package xswitch is its forwarding core). The XDP program on each port
// steers RoCEv2 (UDP/4791) and MAC Control frames to the switch; every
// other frame (ARP, ICMP, TCP, other UDP) goes to the kernel, which
// forwards it as a router would (ip_forward on), untouched by softnic.

const defaultSwitchSocket = "/run/softnic/switch.sock"

// switchOptions are softnic switch's flags.
type switchOptions struct {
	ports    stringList
	routes   stringList
	rate     linkRate
	ecn      string
	pfc      string
	buffer   int
	charge   string
	occAfter time.Duration
	rules    string
	trace    string
	socket   string
	metrics  string
	logLevel string
	level    slog.Level

	// Parsed.
	ecnCfg   netsw.ECN
	pfcCfg   netsw.PFC
	priority int
	set      *inject.Set
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func switchFlags(o *switchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.Var(&o.ports, "port", "an `interface` the switch forwards between; repeat it, 2 or more (port 0, 1, ... in this order: the port<i>_ counters)")
	fs.Var(&o.rate, "rate", "pace every port's transmission as an Ethernet link of this `rate` would, each frame with its padding, FCS, preamble and gap (tc units bit, kbit, mbit, gbit, e.g. 10Gbit; default 0: unpaced, the interface's own speed; pauses received on an unpaced port are timed at 10 Gb/s)")
	fs.Var(&o.routes, "route", "`PREFIX=IFACE[@NEXTHOP]`: send PREFIX out of IFACE to NEXTHOP (an IP address, resolved in the kernel's neighbour table, or a MAC); without @, the destination is on IFACE's link. Repeatable (default: each port's own connected prefixes)")
	fs.StringVar(&o.ecn, "ecn", "on", "RED ECN marking on each egress queue (DCQCN's congestion point): on, off, or a `spec` kmin=BYTES,kmax=BYTES,pmax=P, any of them (defaults 5000, 200000, 0.01)")
	fs.StringVar(&o.pfc, "pfc", "on", "802.1Qbb PFC: on, off, or a `spec` xoff=BYTES,xon=BYTES,headroom=BYTES,quanta=N,priority=P, any of them (defaults 220000, 200000, 20000, 65535, 3): an ingress port past XOFF pauses its link partner, at XON it resumes it; PFC frames received for the priority pause the port's egress")
	fs.IntVar(&o.buffer, "buffer", netsw.DefaultPortBytes, "packet buffer per port, `bytes`, charged as --buffer-charge says (IRN's 240 KB)")
	fs.StringVar(&o.charge, "buffer-charge", "ingress", "what a port's --buffer limits without PFC: ingress (the bytes queued that came in on it, IRN's switch) or egress (its own output queue, a shallow output-queued switch)")
	fs.DurationVar(&o.occAfter, "occupancy-after", 0, "count the queues' occupancy percentiles (queue_p50_bytes, queue_p99_bytes) only from this long after the first frame was queued: the queue after convergence (0: from the start)")
	fs.StringVar(&o.rules, "rules", "", "event-injection rule `file` (JSON, package inject): drop, mark, corrupt, delay or duplicate chosen RoCEv2 packets")
	fs.StringVar(&o.trace, "trace", "", "on exit, write the trace (every RoCEv2 packet seen, with its time at ingress) and the rules' events to this `file` as JSON lines, the format `softnic-sweep conform -trace` reports on (docs/conform.md); without --rules too")
	fs.StringVar(&o.socket, "socket", defaultSwitchSocket, "control socket: softnic stats --socket and softnic capture -i read the switch through it")
	fs.StringVar(&o.metrics, "metrics", "", `Prometheus /metrics listen address, e.g. 127.0.0.1:9480 ("": off)`)
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return fs
}

func parseSwitch(args []string) (switchOptions, error) {
	var o switchOptions
	fs := switchFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, usagef("switch: unexpected argument %q", fs.Arg(0))
	}
	if len(o.ports) < 2 {
		return o, usagef("switch: need --port at least twice")
	}
	seen := map[string]bool{}
	for _, p := range o.ports {
		if seen[p] {
			return o, usagef("switch: --port %s twice", p)
		}
		seen[p] = true
	}
	if o.charge != "ingress" && o.charge != "egress" {
		return o, usagef("switch: --buffer-charge %q: want ingress or egress", o.charge)
	}
	if o.buffer <= 0 {
		return o, usagef("switch: --buffer %d: want a positive number of bytes", o.buffer)
	}
	if o.socket == "" {
		return o, usagef("switch: --socket is required")
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return o, usagef("switch: --log-level %q: want debug, info, warn or error", o.logLevel)
	}
	var err error
	if o.ecnCfg, err = parseECN(o.ecn); err != nil {
		return o, usagef("switch: --ecn %q: %w", o.ecn, err)
	}
	if o.pfcCfg, o.priority, err = parsePFC(o.pfc); err != nil {
		return o, usagef("switch: --pfc %q: %w", o.pfc, err)
	}
	if o.pfcCfg.Enabled && o.pfcCfg.XOFFBytes+o.pfcCfg.HeadroomBytes > o.buffer {
		return o, usagef("switch: --pfc xoff %d + headroom %d exceed --buffer %d", o.pfcCfg.XOFFBytes, o.pfcCfg.HeadroomBytes, o.buffer)
	}
	if o.rules != "" {
		if o.set, err = inject.LoadFile(o.rules); err != nil {
			return o, usageError{err}
		}
	} else if o.trace != "" {
		// A trace without rules: every RoCEv2 packet, nothing changed.
		o.set, _ = inject.NewSet(nil)
	}
	return o, nil
}

// keyValues splits "k=v,k=v" after an optional leading "on".
func keyValues(s string, set func(k, v string) error) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return fmt.Errorf("%q: want key=value", kv)
		}
		if err := set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func atoiBytes(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: want a number of bytes", v)
	}
	return n, nil
}

func parseECN(s string) (netsw.ECN, error) {
	switch s {
	case "off":
		return netsw.ECN{}, nil
	case "on", "":
		return netsw.DefaultECN(), nil
	}
	e := netsw.DefaultECN()
	err := keyValues(s, func(k, v string) (err error) {
		switch k {
		case "kmin":
			e.KminBytes, err = atoiBytes(v)
		case "kmax":
			e.KmaxBytes, err = atoiBytes(v)
		case "pmax":
			e.Pmax, err = strconv.ParseFloat(v, 64)
			if err == nil && !(e.Pmax >= 0 && e.Pmax <= 1) {
				err = fmt.Errorf("%v is not a probability", e.Pmax)
			}
		default:
			err = errors.New("unknown key: want kmin, kmax, pmax")
		}
		return err
	})
	if err == nil && e.KmaxBytes <= e.KminBytes {
		err = fmt.Errorf("kmax %d must be above kmin %d", e.KmaxBytes, e.KminBytes)
	}
	return e, err
}

func parsePFC(s string) (netsw.PFC, int, error) {
	prio := xswitch.DefaultPriority
	switch s {
	case "off":
		return netsw.PFC{}, prio, nil
	case "on", "":
		return netsw.DefaultPFC(), prio, nil
	}
	p := netsw.DefaultPFC()
	err := keyValues(s, func(k, v string) (err error) {
		switch k {
		case "xoff":
			p.XOFFBytes, err = atoiBytes(v)
		case "xon":
			p.XONBytes, err = atoiBytes(v)
		case "headroom":
			p.HeadroomBytes, err = atoiBytes(v)
		case "quanta":
			var q uint64
			q, err = strconv.ParseUint(v, 0, 16)
			if err == nil && q == 0 {
				err = errors.New("0 quanta pause nothing")
			}
			p.Quanta = uint16(q)
		case "priority":
			prio, err = strconv.Atoi(v)
			if err == nil && (prio < 0 || prio > 7) {
				err = fmt.Errorf("%d: want 0 to 7", prio)
			}
		default:
			err = errors.New("unknown key: want xoff, xon, headroom, quanta, priority")
		}
		return err
	})
	if err == nil && p.XONBytes > p.XOFFBytes {
		err = fmt.Errorf("xon %d above xoff %d", p.XONBytes, p.XOFFBytes)
	}
	return p, prio, err
}

// parseRoutes reads --route values against the port names.
func parseRoutes(specs []string, ports []string) ([]xswitch.Route, error) {
	var out []xswitch.Route
	for _, spec := range specs {
		pfx, rest, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("--route %q: want PREFIX=IFACE[@NEXTHOP]", spec)
		}
		prefix, err := netip.ParsePrefix(strings.TrimSpace(pfx))
		if err != nil {
			return nil, fmt.Errorf("--route %q: %w", spec, err)
		}
		iface, hop, _ := strings.Cut(rest, "@")
		port := -1
		for i, p := range ports {
			if p == iface {
				port = i
			}
		}
		if port < 0 {
			return nil, fmt.Errorf("--route %q: %s is not a --port", spec, iface)
		}
		r := xswitch.Route{Prefix: prefix.Masked(), Port: port}
		if hop != "" {
			if a, err := netip.ParseAddr(hop); err == nil {
				r.Via = a.Unmap()
			} else if mac, err := net.ParseMAC(hop); err == nil && len(mac) == 6 {
				r.MAC, r.HasMAC = [6]byte(mac), true
			} else {
				return nil, fmt.Errorf("--route %q: next hop %q is neither an IP address nor a MAC", spec, hop)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// connectedRoutes are the ports' own prefixes (link-local ones excepted:
// every port has fe80::/64).
func connectedRoutes(ifis []*net.Interface) ([]xswitch.Route, error) {
	var out []xswitch.Route
	for i, ifi := range ifis {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			addr, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || addr.Unmap().IsLinkLocalUnicast() {
				continue
			}
			bits, _ := ipn.Mask.Size()
			if addr.Is4In6() {
				addr = addr.Unmap()
			}
			out = append(out, xswitch.Route{Prefix: netip.PrefixFrom(addr, bits).Masked(), Port: i})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the ports have no addresses to derive routes from: give --route")
	}
	return out, nil
}

// switchPort is one interface of the running switch.
type switchPort struct {
	ifi   *net.Interface
	steer *bpf.Steer
	link  *bpf.Link
	port  *afxdp.Port
}

// switchd is a running softnic switch.
type switchd struct {
	opts    switchOptions
	log     *slog.Logger
	ports   []*switchPort
	group   *afxdp.Group
	sw      *xswitch.Switch
	neigh   *neighbours
	engine  *dataplane.Engine // idle: carries the control socket's stats and captures
	cp      *verbsd.Server
	metrics *http.Server
	ran     bool
}

func switchCmd(args []string) error {
	o, err := parseSwitch(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: o.level}))
	oneP() // as the daemon: the poll loop and a light control plane
	d, err := startSwitch(o, log)
	if err != nil {
		return err
	}
	untilSignal(d.run)
	return d.shutdown()
}

// nullPort is the idle engine's port: it carries nothing.
type nullPort struct{ maxFrame int }

func (nullPort) Receive([][]byte) int { return 0 }
func (nullPort) TxBuffer() []byte     { return nil }
func (nullPort) Transmit(int)         {}
func (nullPort) Flush()               {}
func (p nullPort) MaxFrame() int      { return p.maxFrame }

func startSwitch(o switchOptions, log *slog.Logger) (d *switchd, err error) {
	d = &switchd{opts: o, log: log}
	defer func() {
		if err != nil {
			if cerr := d.shutdown(); cerr != nil {
				log.Warn("cleanup after failed start", "err", cerr)
			}
			d = nil
		}
	}()
	if err := checkPrivileges(); err != nil {
		return d, err
	}
	if err := checkAFXDP(); err != nil {
		return d, err
	}
	var ifis []*net.Interface
	for _, name := range o.ports {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return d, fmt.Errorf("no such interface %q", name)
		}
		ifis = append(ifis, ifi)
	}
	routes, err := parseRoutes(o.routes, o.ports)
	if err != nil {
		return d, usageError{err}
	}
	if len(routes) == 0 {
		if routes, err = connectedRoutes(ifis); err != nil {
			return d, err
		}
	}
	if err := ensureSocketDir(o.socket); err != nil {
		return d, err
	}
	if err := checkControlFree(o.socket); err != nil {
		return d, err
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(b)) != "1" {
		log.Warn("net.ipv4.ip_forward is off: the kernel will not forward what the switch leaves to it (ARP is answered, but ICMP, TCP and non-RoCE UDP between the ports are dropped)")
	}
	cfg := xswitch.Config{Routes: routes, Priority: o.priority, Inject: o.set,
		OccupancyAfter: o.occAfter,
		Queues:         netsw.Config{Buffer: netsw.Buffer{PortBytes: o.buffer, Ingress: o.charge == "ingress"}, ECN: o.ecnCfg, PFC: o.pfcCfg, Seed: uint64(time.Now().UnixNano())}}
	ifindex := make([]int, len(ifis))
	for i, ifi := range ifis {
		ifindex[i] = ifi.Index
		sp := &switchPort{ifi: ifi}
		d.ports = append(d.ports, sp)
		if err := sp.attach(log); err != nil {
			return d, err
		}
		if sp.port, err = afxdp.Open(afxdp.Config{Interface: ifi.Name, FrameSize: 4096, MaxFrame: switchMaxFrame(ifi.MTU), XSKMap: sp.steer.XSKMap}); err != nil {
			return d, err
		}
		var mac [6]byte
		copy(mac[:], ifi.HardwareAddr)
		cfg.Ports = append(cfg.Ports, xswitch.PortConfig{Port: sp.port, MAC: mac, RateBps: uint64(o.rate)})
		log.Info("port open", "port", i, "iface", ifi.Name, "mac", ifi.HardwareAddr.String(), "xdp_mode", sp.link.Mode.String(),
			"queues", sp.port.Queues(), "zerocopy", sp.port.ZeroCopy(), "max_frame", sp.port.MaxFrame())
	}
	d.neigh = newNeighbours(ifindex, log)
	cfg.Neighbour = d.neigh.lookup
	ports := make([]*afxdp.Port, len(d.ports))
	for i, sp := range d.ports {
		ports[i] = sp.port
	}
	if d.group, err = afxdp.NewGroup(ports...); err != nil {
		return d, err
	}
	// The control socket is the daemon's verbs server over an engine that
	// carries nothing: its stats RPC reports the switch's counters, and
	// its capture sessions get the switch's ingress frames.
	var mac [6]byte
	copy(mac[:], ifis[0].HardwareAddr)
	if d.engine, err = dataplane.NewEngine(dataplane.Config{MAC: mac, Addr: netip.MustParseAddr("198.18.0.0")}, nullPort{maxFrame: ports[0].MaxFrame()}); err != nil {
		return d, err
	}
	cfg.Capture = d.engine.Capture
	if d.sw, err = xswitch.New(cfg); err != nil {
		return d, err
	}
	if d.cp, err = verbsd.New(d.engine, verbsd.Options{SocketPath: o.socket, Logger: log, Name: "softnic_switch",
		CountersOnly: true, SocketMode: os.FileMode(defaultSocketMode),
		Counters: func(yield func(string, uint64)) {
			for _, c := range d.counters() {
				yield(c.name, c.value)
			}
		}}); err != nil {
		return d, err
	}
	if o.metrics != "" {
		if d.metrics, err = serveHTTP(o.metrics, metricsHandler(metricsSource{others: d.counters}), "metrics", log); err != nil {
			return d, fmt.Errorf("metrics: %w", err)
		}
	}
	for _, r := range routes {
		hop := "connected"
		switch {
		case r.HasMAC:
			hop = net.HardwareAddr(r.MAC[:]).String()
		case r.Via.IsValid():
			hop = r.Via.String()
		}
		log.Info("route", "prefix", r.Prefix, "iface", o.ports[r.Port], "next_hop", hop)
	}
	log.Info("softnic switch running", "ports", strings.Join(o.ports, ","), "rate", o.rate.String(), "ecn", o.ecn, "pfc", o.pfc,
		"priority", o.priority, "buffer", o.buffer, "rules", o.rules, "socket", o.socket, "metrics", o.metrics)
	return d, nil
}

// attach removes a program a dead softnic left on the interface, then
// loads the steering program (every RoCEv2 frame, whatever its
// destination, and MAC Control frames) and attaches it: driver mode where
// it works, else generic.
func (sp *switchPort) attach(log *slog.Logger) (err error) {
	if err := checkNoLiveDaemon(sp.ifi); err != nil {
		return err
	}
	n, err := bpf.DetachStale(sp.ifi.Index)
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("removed a stale softnic XDP program", "iface", sp.ifi.Name, "count", n)
	}
	if sp.steer, err = bpf.Load(bpf.Options{SteerPause: true}); err != nil {
		return err
	}
	if sp.link, err = bpf.Attach(sp.steer.Program, sp.ifi.Index); err != nil {
		return err
	}
	return nil
}

// run is the poll loop: it polls the switch, then blocks on every port's
// sockets until a frame comes or the switch's next deadline (a pacer, a
// pause, a refresh, a delayed frame), never spinning while idle.
func (d *switchd) run(ctx context.Context) {
	d.ran = true
	go func() {
		if err := d.cp.Serve(ctx); err != nil {
			d.log.Error("control plane stopped", "err", err)
		}
	}()
	go d.neigh.run(ctx)
	stop := context.AfterFunc(ctx, d.group.Wake)
	defer stop()
	clock := dataplane.NewMonotonicClock()
	busy := 0
	for ctx.Err() == nil {
		next := d.sw.Poll(clock.Now())
		now := clock.Now()
		if next <= now {
			// More at once (a full batch); let the runtime's other
			// goroutines in now and then.
			if busy++; busy%64 == 0 {
				runtime.Gosched()
			}
			continue
		}
		busy = 0
		timeout := time.Second
		if next != xswitch.Never {
			timeout = min(timeout, next-now)
		}
		d.group.Wait(timeout)
	}
	d.log.Info("stopping")
}

// counters are the switch's (xswitch: totals, then port<i>_), then each
// port's AF_XDP socket counters (port<i>_xsk_*) and XDP program counters
// (port<i>_xdp_*). Safe from any goroutine.
func (d *switchd) counters() []counter {
	var out []counter
	if d.sw != nil {
		c := d.sw.Snapshot()
		for name, v := range c.All() {
			out = append(out, counter{name, v})
		}
	}
	for i, sp := range d.ports {
		prefix := "port" + strconv.Itoa(i) + "_"
		if sp.port != nil {
			for name, v := range sp.port.Stats().All() {
				out = append(out, counter{prefix + "xsk_" + name, v})
			}
		}
		if sp.steer != nil {
			if c, err := sp.steer.Counters(); err == nil {
				for name, v := range c.All() {
					out = append(out, counter{prefix + "xdp_" + name, v})
				}
			}
		}
	}
	return out
}

// shutdown undoes startSwitch in reverse; each step runs whatever the
// others did, the XDP detachment above all.
func (d *switchd) shutdown() error {
	var t teardown
	step := t.step
	if d.cp != nil {
		step("control socket", d.cp.Close)
	}
	if d.metrics != nil {
		step("metrics", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return d.metrics.Shutdown(ctx)
		})
	}
	if d.ran && d.sw != nil {
		step("counters", func() error {
			var attrs []any
			for _, c := range d.counters() {
				if c.value != 0 {
					attrs = append(attrs, c.name, c.value)
				}
			}
			d.log.Info("final counters", attrs...)
			return nil
		})
	}
	if d.ran && d.opts.trace != "" && d.opts.set != nil {
		step("trace", func() error { return writeTrace(d.opts.trace, d.opts.set) })
	}
	for _, sp := range d.ports {
		if sp.link != nil {
			step("XDP detach "+sp.ifi.Name, sp.link.Close)
		}
	}
	if d.group != nil {
		step("doorbell", d.group.Close)
	}
	for _, sp := range d.ports {
		if sp.port != nil {
			step("port "+sp.ifi.Name, sp.port.Close)
		}
		if sp.steer != nil {
			step("XDP program "+sp.ifi.Name, sp.steer.Close)
		}
	}
	*d = switchd{opts: d.opts, log: d.log}
	return t.err()
}

// writeTrace writes set's trace and events to path in the trace file
// format of package conform (JSON lines), which `softnic-sweep conform
// -trace` reports on.
func writeTrace(path string, set *inject.Set) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := conform.WriteTrace(f, set.Trace(), set.Events()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
