package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/dataplane/udpport"
	"github.com/softnic/softnic/internal/hostaddr"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs/verbsd"
)

// defaultSocket is the control socket: the verbs RPC and the stats RPC.
const defaultSocket = "/run/softnic/softnic.sock"

// errUsage is a command-line mistake the flag package already reported.
var errUsage = errors.New("usage")

// options are `softnic run`'s flags; a config file sets the same keys.
type options struct {
	cc       string
	ccParams cc.Params
	iface    string
	ip       string
	port     string
	mtu      int
	scheme   string
	socket   string
	metrics  string
	pprof    string
	queues   string
	logLevel string
	level    slog.Level // logLevel, parsed
	sram     int
	penalty  time.Duration
	busyPoll time.Duration
	// maxUnacked is the QPs' bound on unacknowledged PSNs (0: none).
	maxUnacked int
	backoff    bool
	rto        dataplane.RTOMode
	rtoMin     time.Duration
	params     recovery.Params // the schemes' knobs (0: the papers' defaults)
	// The emulated link (dataplane.Config.LinkRate, LinkBurst).
	linkRate  linkRate
	linkBurst byteCount
	// modelRate is the line rate of the NIC being modelled: hardware
	// costs are scaled by modelRate/linkRate (emulationScale).
	modelRate linkRate
	// linkDelay is the emulated link's one-way delay, applied on receive
	// (dataplane.Config.LinkDelay).
	linkDelay time.Duration
	// netemText is --netem; netem is it parsed, with a seed picked by
	// parseRun when it gave none (dataplane.Config.Netem).
	netemText string
	netem     impair.Spec
	// limits bound what one verbs client may make the daemon hold
	// (verbsd.Limits; -1: no limit).
	limits verbsd.Limits
	// starServer is dataplane.Config.StarServer.
	starServer bool
	// pfc and pfcPriority are dataplane.Config.PFC and PFCPriority; with
	// pfc the XDP program steers MAC Control frames to the NIC
	// (bpf.Options.SteerPause).
	pfc         bool
	pfcPriority int

	// The control socket's group (--socket-group; socketGID is it
	// resolved, 0: the daemon's own) and mode (--socket-mode).
	socketGroup string
	socketGID   int
	socketMode  socketMode
}

// The daemon's retransmission timeouts. IRN sets RTO_high to the longest
// round trip with one congested link and RTO_low to the tail latency a
// short message may see (§4.1): 320 and 100 µs on its simulated 40 Gb/s
// fabric, where a NIC answers in nanoseconds. A software NIC on a host
// whose cores it shares answers in tens of microseconds and, now and then,
// after a scheduler time slice of milliseconds (softnic-bench write_lat's
// 99.9th percentile on the two-core testbed is about 3 ms): with the
// paper's values every such pause fires timeouts, spends the QP's
// retry_cnt and ends in RETRY_EXC_ERR. 1 and 2 ms, doubled after each
// timeout without progress (--rto-backoff), ride out such a pause with a
// few retries and still resend a lost retransmission within a few round
// trips. With --rto adaptive (the default) they are only where a QP starts:
// after its first round-trip sample its timeouts follow its path
// (docs/recovery.md, "Timeouts that follow the path"). The embedded
// fabric, which models hardware timing, keeps the paper's values and fixed
// timeouts (recovery.Default*).
const (
	// daemonBusyPoll is how long the poll loop keeps polling after the
	// last work before it blocks. A blocked loop pays a wake-up per
	// packet or doorbell (the ppoll return, the Go runtime's exitsyscall,
	// often a migration: tens of microseconds, and milliseconds in the
	// tail, on a loaded two-core host); polling costs a yield per empty
	// poll, which gives the core away whenever anything else can run. A
	// ping-pong's next message comes within a round trip; an idle NIC
	// blocks after 1 ms and then costs nothing.
	daemonBusyPoll = time.Millisecond
	// daemonRTOMin floors the adaptive timeouts, as TCP's rto_min does.
	// On the two-core testbed ACKs now and then come milliseconds late
	// (the host's scheduler: a few times a second, whatever the rate):
	// lossless irn runs timed out about three times a second with a
	// 500 µs floor, once a second with 2 ms, never with 5 ms in the runs
	// that picked it (docs/recovery.md). A lost retransmission waits this
	// long, which is what it costs at 1 % loss.
	daemonRTOMin  = 5 * time.Millisecond
	daemonRTOLow  = 1 * time.Millisecond
	daemonRTOHigh = 2 * time.Millisecond
	// The NAK interval, for the same reason: igbn's CE timer re-sends a NAK
	// every interval while the expected PSN waits, and each NAK costs the
	// requester a go-back and a retry; 500 µs fire several times in one
	// scheduler pause.
	daemonNakInterval = 2 * time.Millisecond
)

func runFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.iface, "iface", "", "network interface (required)")
	fs.StringVar(&o.ip, "ip", "", "local IPv4 or IPv6 address, the GID (default: the interface's first 198.18.0.0/15 address, else its first global one)")
	fs.StringVar(&o.port, "port", "afxdp", "port kind: afxdp (XDP steering + AF_XDP, needs root) or udp (kernel UDP socket on port 4791)")
	fs.IntVar(&o.mtu, "mtu", 1024, "largest RoCE path MTU, 1024, 2048 or 4096 (picks the UMEM frame size: 2048 or 4096 bytes; 4096 needs AF_XDP multi-buffer, Linux 6.6+, and an interface MTU of at least 4200)")
	fs.StringVar(&o.scheme, "scheme", recovery.GBN, fmt.Sprintf("loss recovery of QPs that do not ask for one %v", recovery.Names()))
	fs.StringVar(&o.socket, "socket", defaultSocket, "control socket: the verbs and stats RPC (see --socket-group, --socket-mode)")
	fs.StringVar(&o.socketGroup, "socket-group", "", "group of the control socket, a name or gid: with --socket-mode 0660 its members may use the NIC without root (softnic-bench, softnic stats) (default: the daemon's group)")
	o.socketMode = defaultSocketMode
	fs.Var(&o.socketMode, "socket-mode", "`octal` permission bits of the control socket: connecting needs write permission, so 0660 admits the owner and --socket-group")
	fs.StringVar(&o.metrics, "metrics", "127.0.0.1:9479", `Prometheus /metrics listen address ("" disables; docs/metrics.md)`)
	fs.StringVar(&o.pprof, "pprof", "", "serve the daemon's Go profiles (/debug/pprof/) on this `address`, e.g. 127.0.0.1:6060 (default: off; a profile stops the world now and then, so keep it to loopback and debugging)")
	fs.StringVar(&o.queues, "queues", "", "comma-separated RX queues to bind (default: all the interface has)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.sram, "sram", qp.DefaultCacheBudget, "on-chip SRAM for QP contexts and the scheme's shared pools, bytes (default: 300 contexts of 256 B, StaR's RNIC; 0 = unlimited)")
	fs.DurationVar(&o.penalty, "fetch-penalty", qp.DefaultFetchPenalty, "pipeline stall of a QP-context cache miss, a PCIe read (0 disables it)")
	fs.IntVar(&o.maxUnacked, "max-unacked-psns", 0, "bound each QP's unacknowledged PSNs (what go-back-N resends at most per go-back; rxe's is 128, RXE_MAX_UNACKED_PSNS); 0: no bound beyond the scheme's window")
	fs.DurationVar(&o.busyPoll, "busy-poll", daemonBusyPoll, "keep polling this long after the last work before blocking, yielding the CPU between empty polls (0: block after 32 empty polls)")
	o.rto = dataplane.RTOAdaptive
	fs.Var(&o.rto, "rto", "retransmission timeouts: adaptive (from each QP's measured round trip, RFC 6298 and IRN's rule; --rto-low/--rto-high until its first sample, go-back-N never below the QP's ACK timeout) or fixed (--rto-low/--rto-high, go-back-N the QP's ACK timeout)")
	fs.DurationVar(&o.rtoMin, "rto-min", daemonRTOMin, "with --rto adaptive, the least retransmission timeout, like TCP's rto_min (scheduler pauses on a shared host; 0: none)")
	fs.DurationVar(&o.params.RTOLow, "rto-low", daemonRTOLow, "selective schemes' short retransmission timeout, armed with at most --rto-low-packets in flight (IRN RTO_low; the paper's 100µs is for a hardware NIC); with --rto adaptive, until a QP's first round-trip sample")
	fs.DurationVar(&o.params.RTOHigh, "rto-high", daemonRTOHigh, "selective schemes' retransmission timeout otherwise (IRN RTO_high: the longest round trip; the paper's 320µs is for a hardware NIC); with --rto adaptive, until a QP's first round-trip sample")
	fs.BoolVar(&o.backoff, "rto-backoff", true, "double a QP's retransmission timeout after each timeout without progress, up to 16x (scheduler pauses on a shared host)")
	fs.IntVar(&o.params.RTOLowThreshold, "rto-low-packets", recovery.DefaultRTOLowThreshold, "IRN's N: RTO_low applies with at most this many packets in flight")
	fs.DurationVar(&o.params.NakInterval, "nak-interval", daemonNakInterval, "at most one go-back-N NAK per interval, and igbn's CE timer (Improved go-back-N's 500µs is for a hardware NIC)")
	fs.IntVar(&o.params.BDPPackets, "bdp-packets", recovery.DefaultBDPPackets, "selective schemes' cap on packets in flight (IRN BDP-FC) and reorder window")
	fs.StringVar(&o.cc, "cc", cc.None, fmt.Sprintf("congestion control of QPs that do not ask for one %v (docs/cc.md): none runs at the port's speed, sends no ECN-capable frame and no CNP", cc.Names()))
	fs.Var(&o.ccParams.Knobs, "cc-param", "set a congestion control's `knob`, algorithm.knob=value; repeat it for more (docs/cc.md). The knobs, with their defaults:"+ccKnobList())
	fs.Var(&o.params.Knobs, "scheme-param", "set a scheme's own `knob`, scheme.knob=value; repeat it for more (docs/adding-a-scheme.md). The knobs, with their defaults:"+knobList())
	for _, a := range knobAliases {
		fs.Var(knobAlias{&o.params.Knobs, a.key}, a.flag, "`N`: the same as --scheme-param "+a.key+"=N")
	}
	fs.Var(&o.linkRate, "link-rate", "emulated link: pace all transmission as an Ethernet link of this `rate` would, each frame with its padding, FCS, preamble and gap (tc units bit, kbit, mbit, gbit, e.g. 5Gbit; counters link_paced, link_paced_ns; default 0: unlimited)")
	fs.DurationVar(&o.linkDelay, "link-delay", 0, "emulated link's one-way propagation delay: every received frame is held this long before the NIC sees it, so that two hosts a few µs apart have a datacenter path's bandwidth-delay product (set it on both hosts; --netem adds loss, jitter, reordering and more; counter impair_drops, also as link_delay_drops; default 0: none)")
	fs.StringVar(&o.netemText, "netem", "", `impair every received frame before the NIC parses it, in netem's words (tc-netem(8)): "loss P% [CORR%]", "loss gemodel P [R [1-H [1-K]]]", "delay TIME [JITTER [CORR%]]" (on top of --link-delay), "reorder P% [CORR%] [gap N]", "duplicate P%", "corrupt P%", "hold P% TIME", "limit N", "seed N"; set it on both hosts to impair both directions; change it while running with softnic netem (docs/impair.md; counters impair_*; default: none)`)
	fs.Var(&o.modelRate, "model-rate", "line `rate` of the NIC being modelled (e.g. 100Gbit, StaR's): with --link-rate, hardware costs (--fetch-penalty) are scaled by model-rate/link-rate, so that a context fetch lasts as many packet times on the emulated link as on the modelled one (default 0: no scaling)")
	fs.Var(&o.linkBurst, "link-burst", "emulated link's burst: `bytes` of wire time it sends back to back after an idle spell (default 0: the larger of 16 full frames and 20µs at --link-rate)")
	fs.IntVar(&o.limits.ConnsPerUID, "max-conns-per-uid", verbsd.DefaultConnsPerUID, "verbs connections one uid may have open at once (-1: no limit)")
	fs.IntVar(&o.limits.PDs, "max-pds", verbsd.DefaultPDs, "protection domains per verbs connection (-1: no limit)")
	fs.IntVar(&o.limits.QPs, "max-qps", verbsd.DefaultQPs, "QPs per verbs connection (-1: no limit beyond the protocol's 65536)")
	fs.IntVar(&o.limits.CQs, "max-cqs", verbsd.DefaultCQs, "CQs per verbs connection (-1: no limit)")
	fs.IntVar(&o.limits.MRs, "max-mrs", verbsd.DefaultMRs, "memory regions per verbs connection (-1: no limit)")
	fs.IntVar(&o.limits.Channels, "max-channels", verbsd.DefaultChannels, "completion channels per verbs connection (-1: no limit)")
	fs.Int64Var(&o.limits.RingBytes, "max-ring-bytes", verbsd.DefaultRingBytes, "bytes of QP and CQ rings the daemon allocates per verbs connection: ring files and the engine's own queues behind them (-1: no limit)")
	fs.Int64Var(&o.limits.RingBytesPerUID, "max-ring-bytes-per-uid", verbsd.DefaultRingBytesPerUID, "bytes of QP and CQ rings (as --max-ring-bytes counts them) all verbs connections of one uid may hold together (-1: no limit)")
	fs.BoolVar(&o.starServer, "star-server", false, "serve StaR's stateless data packets (RDP -> RA, GD -> SDPs) with no per-connection state, checked against the memory regions' keys, bounds and access only, with no protection domain: the NIC trusts its StaR clients' security tables (StaR §3.2; docs/star.md; counters star_*)")
	fs.BoolVar(&o.pfc, "pfc", true, "honour 802.1Qbb priority flow control: the XDP program steers MAC Control frames to the NIC, and a PFC frame for --pfc-priority stops it from starting any frame for that priority's pause time (quanta of 512 bit times at --link-rate, else at the interface's speed from /sys/class/net/IF/speed, else 10 Gb/s), 0 resumes; frames wait, none is dropped (counters rx_prio_pause, rx_prio_pause_resume, rx_prio_pause_duration_ns, rx_pause_ignored). Off: MAC Control frames go to the kernel, which drops them. --port afxdp only")
	fs.IntVar(&o.pfcPriority, "pfc-priority", 3, "the 802.1p priority (0-7) whose pauses the NIC honours: a PFC frame whose priority-enable vector has this priority's bit pauses it for that priority's time; others, and 802.3x PAUSE, are ignored (rx_pause_ignored). softnic's frames are untagged, so this is the priority the switch puts them in: RoCE's is usually 3")
	fs.Int64Var(&o.limits.MRBytes, "max-mr-bytes", verbsd.DefaultMRBytes, "bytes of client memory the daemon maps for one verbs connection's memory regions (-1: no limit)")
	fs.IntVar(&o.limits.AHs, "max-ahs", verbsd.DefaultAHs, "address handles (UD) per verbs connection (-1: no limit)")
	fs.String("config", "", "config file: one `key = value` per line with the keys of these flags; flags override it")
	return fs
}

// parseRun reads the flags and the config file they name.
func parseRun(args []string) (options, error) {
	var o options
	fs := runFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, usagef("run: unexpected argument %q", fs.Arg(0))
	}
	if path := fs.Lookup("config").Value.String(); path != "" {
		if err := applyConfigFile(fs, path); err != nil {
			return o, err
		}
	}
	// Values the flag package let through: usage errors (exit status 2)
	// as much as its own, whether from the command line or the config
	// file.
	switch {
	case o.iface == "":
		return o, usagef("run: --iface is required")
	case o.port != "afxdp" && o.port != "udp":
		return o, usagef("run: --port %q: want afxdp or udp", o.port)
	case o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096:
		return o, usagef("run: --mtu %d: want 1024, 2048 or 4096", o.mtu)
	case o.socket == "":
		return o, usagef("run: --socket is required")
	case o.modelRate != 0 && o.linkRate == 0:
		return o, usagef("run: --model-rate needs --link-rate: the scale is model-rate/link-rate")
	case o.pfcPriority < 0 || o.pfcPriority > 7:
		return o, usagef("run: --pfc-priority %d: want 0 to 7", o.pfcPriority)
	}
	if o.socketGroup != "" {
		gid, err := lookupGroup(o.socketGroup)
		if err != nil {
			return o, usagef("run: --socket-group %q: %w", o.socketGroup, err)
		}
		o.socketGID = gid
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return o, usagef("run: --log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if _, err := parseQueues(o.queues); err != nil {
		return o, usagef("run: %w", err)
	}
	spec, err := impair.Parse(o.netemText)
	if err != nil {
		return o, usagef("run: --netem: %w", err)
	}
	o.netem = withSeed(spec)
	return o, nil
}

// withSeed gives an impairment without a seed a random one, which the
// daemon logs and softnic netem prints, so that a run can be repeated.
func withSeed(spec impair.Spec) impair.Spec {
	if spec.Active() && !spec.HasSeed {
		spec.Seed, spec.HasSeed = rand.Uint64(), true
	}
	return spec
}

func runCmd(args []string) error {
	o, err := parseRun(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: o.level}))
	oneP()
	d, err := start(o, log)
	if err != nil {
		return err
	}
	untilSignal(d.run)
	return d.shutdown()
}

// oneP runs the process on one P unless GOMAXPROCS is in the environment:
// the NIC (or switch) is one poll-mode goroutine and the control plane is
// light; a second P keeps a runtime thread spinning for work, which on a
// host with few cores takes a core from the application or the peer
// (write_lat 8 B on the testbed: t_typical 16-20 µs with two Ps in daemon
// and bench, 14-16 µs with one). The poll loop lets the control plane's
// goroutines run between polls (Engine.Run).
func oneP() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// untilSignal runs run until SIGINT or SIGTERM cancels its context; a
// second signal then gets the default action, so that a stuck shutdown
// can still be interrupted.
func untilSignal(run func(context.Context)) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	run(ctx)
}

// teardown runs the steps of a shutdown: each runs whatever the others
// did, a step's panic is an error like any other, and err joins them all.
type teardown struct{ errs []error }

func (t *teardown) step(what string, f func() error) {
	defer func() {
		if r := recover(); r != nil {
			t.errs = append(t.errs, fmt.Errorf("%s: panic: %v", what, r))
		}
	}()
	if err := f(); err != nil {
		t.errs = append(t.errs, fmt.Errorf("%s: %w", what, err))
	}
}

func (t *teardown) err() error { return errors.Join(t.errs...) }

// controlPlane serves local processes on the control socket and moves
// their work into the engine from the poll loop: the verbs server
// (package verbs/verbsd), which also answers `softnic stats`.
type controlPlane interface {
	Serve(ctx context.Context) error
	// Pump runs on the poll loop after every engine poll and reports
	// whether it moved anything (dataplane.RunConfig.Pump).
	Pump() bool
	// BeforeWait runs before the poll loop blocks.
	BeforeWait()
	// Close stops serving, frees every client's objects and removes the
	// socket.
	Close() error
}

// newControlPlane starts the verbs server for the daemon's engine; the
// stats RPC reports extraCounters after the engine's.
func newControlPlane(d *daemon) (controlPlane, error) {
	var s *verbsd.Server // set before Serve, so before any stats RPC
	s, err := verbsd.New(d.engine, verbsd.Options{
		SocketPath: d.opts.socket,
		Logger:     d.log,
		Wake:       d.port.Wake,
		Watch:      d.port.Watch,
		Unwatch:    d.port.Unwatch,
		SocketMode: os.FileMode(d.opts.socketMode),
		SocketGID:  d.opts.socketGID,
		Name:       "softnic_" + d.ifi.Name,
		Counters: func(yield func(string, uint64)) {
			for _, c := range d.extraCounters() {
				yield(c.name, c.value)
			}
		},
		Limits: d.opts.limits,
	})
	if err != nil {
		// Not s: a nil *Server in the interface is not a nil interface,
		// and shutdown would call its Close.
		return nil, err
	}
	d.limits = s.LimitCounters
	return s, nil
}

// port is what the daemon needs of either port kind.
type port interface {
	dataplane.Port
	dataplane.Waiter
	Watch(fd int) error
	Unwatch(fd int) error
	Close() error
}

// daemon is a running softnic: the XDP attachment, the port, the engine,
// the control plane and the metrics server.
type daemon struct {
	opts      options
	log       *slog.Logger
	ifi       *net.Interface
	addr      netip.Addr
	steer     *bpf.Steer // nil with --port udp
	link      *bpf.Link
	port      port
	portStats func() []counter
	// queueStats are the port's counters per receive queue (AF_XDP);
	// nil for the UDP port.
	queueStats func() []queueCounters
	engine     *dataplane.Engine
	cp         controlPlane
	limits     func(yield func(string, uint64)) // the verbs server's client_* counters
	metrics    *http.Server
	pprof      *http.Server
	ran        bool // run was called: shutdown reports the final counters
}

// start checks the environment, then brings the daemon up in dependency
// order. On error it undoes what it did.
func start(o options, log *slog.Logger) (d *daemon, err error) {
	d = &daemon{opts: o, log: log}
	defer func() {
		if err != nil {
			if cerr := d.shutdown(); cerr != nil {
				log.Warn("cleanup after failed start", "err", cerr)
			}
			d = nil
		}
	}()
	if o.port == "afxdp" {
		if err := checkPrivileges(); err != nil {
			return d, err
		}
	}
	if d.ifi, err = net.InterfaceByName(o.iface); err != nil {
		return d, fmt.Errorf("no such interface %q", o.iface)
	}
	if d.addr, err = localAddr(d.ifi, o.ip); err != nil {
		return d, err
	}
	if err := dataplane.CheckScheme(o.scheme); err != nil {
		return d, err
	}
	if o.port == "afxdp" {
		if err := checkAFXDP(); err != nil {
			return d, err
		}
	}
	// The socket comes before the interface: a second daemon started by
	// mistake must be turned away before it touches the first one's XDP
	// program, and a socket directory that cannot be made fails here
	// rather than after XDP is attached.
	if err := ensureSocketDir(o.socket); err != nil {
		return d, err
	}
	if err := checkControlFree(o.socket); err != nil {
		return d, err
	}
	frameSize, maxFrame := portFrames(o.mtu)
	var mac [6]byte
	copy(mac[:], d.ifi.HardwareAddr)
	switch o.port {
	case "afxdp":
		// Queues the interface does not have are refused before XDP
		// is attached, in one line (binding them fails with EINVAL in
		// every bind mode, which says nothing of why).
		queues, err := parseQueues(o.queues)
		if err != nil {
			return d, err
		}
		if err := afxdp.CheckQueues(o.iface, queues); err != nil {
			return d, fmt.Errorf("--queues %s: %w", o.queues, err)
		}
		if err := d.attachXDP(); err != nil {
			return d, err
		}
		p, err := afxdp.Open(afxdp.Config{Interface: o.iface, Queues: queues, FrameSize: frameSize, MaxFrame: maxFrame, XSKMap: d.steer.XSKMap})
		if err != nil {
			return d, err
		}
		warnSmallMTU(log, o, p.MaxFrame())
		d.port = p
		d.portStats = func() []counter { return collect(p.Stats().All()) }
		d.queueStats = func() []queueCounters {
			var out []queueCounters
			for _, q := range p.QueueStats() {
				var cs []counter
				for name, v := range q.All() {
					cs = append(cs, counter{"port_" + name, v})
				}
				out = append(out, queueCounters{q.Queue, cs})
			}
			return out
		}
		log.Info("AF_XDP port open", "iface", o.iface, "queues", p.Queues(), "zerocopy", p.ZeroCopy(),
			"need_wakeup", p.NeedWakeup(), "max_frame", p.MaxFrame(), "multi_buffer", p.MultiBuffer())
	case "udp":
		// The same frame limit as the AF_XDP port's (a chunk less its
		// receive headroom), so --mtu means the same on either port.
		p, err := udpport.Open(udpport.Config{Addr: d.addr, MAC: mac, MaxFrame: maxFrame})
		if err != nil {
			return d, err
		}
		d.port = p
		d.portStats = func() []counter { return collect(p.Stats().All()) }
		log.Info("UDP port open", "addr", netip.AddrPortFrom(d.addr, 4791), "max_frame", p.MaxFrame())
	}
	if d.engine, err = dataplane.NewEngine(dataplane.Config{MAC: mac, Addr: d.addr, MaxUnackedPSNs: o.maxUnacked, Scheme: o.scheme, SchemeParams: o.params, SRAMBytes: o.sram, FetchPenalty: fetchPenalty(scaled(o.penalty, o.emulationScale())), RTOBackoff: o.backoff, RTO: o.rto, RTOMin: o.rtoMin,
		LinkRate: uint64(o.linkRate), LinkBurst: int(o.linkBurst), LinkDelay: o.linkDelay, Netem: o.netem, StarServer: o.starServer, CC: o.cc, CCParams: o.ccParams,
		PFC: o.pfc && o.port == "afxdp", PFCPriority: o.pfcPriority, PFCRate: ifaceSpeed(o.iface)}, d.port); err != nil {
		return d, err
	}
	// Fields are set only from values known not to be nil, so that
	// shutdown's nil checks hold for interfaces too.
	cp, err := newControlPlane(d)
	if err != nil {
		return d, err
	}
	d.cp = cp
	if o.metrics != "" {
		src := metricsSource{engine: d.engine.Counters, others: d.extraCounters, queues: d.queueStats}
		if d.metrics, err = serveHTTP(o.metrics, metricsHandler(src), "metrics", log); err != nil {
			return d, fmt.Errorf("metrics: %w", err)
		}
	}
	if o.pprof != "" {
		if d.pprof, err = serveHTTP(o.pprof, pprofHandler(), "pprof", log); err != nil {
			return d, fmt.Errorf("pprof: %w", err)
		}
	}
	log.Info("softnic running", "iface", o.iface, "mac", d.ifi.HardwareAddr.String(), "gid", d.addr,
		"port", o.port, "mtu", o.mtu, "scheme", o.scheme, "rto", o.rto.String(), "sram", o.sram, "fetch_penalty", scaled(o.penalty, o.emulationScale()),
		"link_rate", o.linkRate.String(), "link_delay", o.linkDelay, "netem", o.netem.String(), "model_rate", o.modelRate.String(), "emulation_scale", o.emulationScale(), "pfc", o.pfc && o.port == "afxdp", "pfc_priority", o.pfcPriority, "socket", o.socket, "socket_mode", o.socketMode.String(), "socket_group", o.socketGroup, "metrics", o.metrics, "pprof", o.pprof)
	return d, nil
}

// run drives the engine until ctx ends, with the control plane serving
// beside it.
func (d *daemon) run(ctx context.Context) {
	d.ran = true
	go func() {
		if err := d.cp.Serve(ctx); err != nil {
			d.log.Error("control plane stopped", "err", err)
		}
	}()
	clock := dataplane.NewMonotonicClock()
	d.engine.Run(ctx, d.port, clock.Now, dataplane.RunConfig{Pump: d.cp.Pump, BeforeWait: d.cp.BeforeWait, BusyPoll: d.opts.busyPoll, IdlePolls: idlePolls(d.opts.busyPoll)})
	d.log.Info("stopping")
}

// idlePolls is how many empty polls the loop spins through before it
// yields (busy polling) or blocks: with busy polling, a few, so that a
// peer daemon or application on the same core runs soon; without, the
// engine's default.
func idlePolls(busyPoll time.Duration) int {
	if busyPoll > 0 {
		return 4
	}
	return 0
}

// shutdown undoes start, in reverse: control socket and metrics first (no
// new clients), then the XDP program (frames go back to the kernel), the
// port, and the program's maps. It is safe on a partly started daemon:
// each step runs only for what start set up, and a step that fails, even
// by panicking, does not keep the later ones (the XDP program's detachment
// above all) from running.
func (d *daemon) shutdown() error {
	var t teardown
	step := t.step
	if d.cp != nil {
		step("control socket", d.cp.Close)
	}
	for _, srv := range []struct {
		what string
		s    *http.Server
	}{{"metrics", d.metrics}, {"pprof", d.pprof}} {
		if srv.s != nil {
			step(srv.what, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				return srv.s.Shutdown(ctx)
			})
		}
	}
	if d.engine != nil && d.ran {
		step("counters", func() error { d.logCounters(); return nil })
	}
	if d.link != nil {
		step("XDP detach", d.link.Close)
	}
	if d.port != nil {
		step("port", d.port.Close)
	}
	if d.steer != nil {
		step("XDP program", d.steer.Close)
	}
	*d = daemon{opts: d.opts, log: d.log}
	return t.err()
}

// logCounters logs the counters that are not zero, once, at exit.
func (d *daemon) logCounters() {
	var attrs []any
	for _, c := range d.snapshot() {
		if c.value != 0 {
			attrs = append(attrs, c.name, c.value)
		}
	}
	d.log.Info("final counters", attrs...)
}

// snapshot reads every counter: the engine's (rxe hw_counters names),
// then extraCounters. Safe from any goroutine.
func (d *daemon) snapshot() []counter {
	var out []counter
	if d.engine != nil {
		c := d.engine.Counters()
		c.Each(func(name string, v uint64) { out = append(out, counter{name, v}) })
	}
	return append(out, d.extraCounters()...)
}

// extraCounters are the port's (port_*), the XDP program's (xdp_*) and
// the verbs server's (client_*): `softnic stats` after the engine's.
func (d *daemon) extraCounters() []counter {
	var out []counter
	if d.portStats != nil {
		for _, c := range d.portStats() {
			out = append(out, counter{"port_" + c.name, c.value})
		}
	}
	if d.steer != nil {
		if c, err := d.steer.Counters(); err == nil {
			for name, v := range c.All() {
				out = append(out, counter{"xdp_" + name, v})
			}
		}
	}
	if d.limits != nil {
		d.limits(func(name string, v uint64) { out = append(out, counter{name, v}) })
	}
	return out
}

func collect(seq func(func(string, uint64) bool)) []counter {
	var out []counter
	for name, v := range seq {
		out = append(out, counter{name, v})
	}
	return out
}

// attachXDP removes a program a dead softnic left on the interface, then
// loads the steering program for the daemon's address and attaches it.
func (d *daemon) attachXDP() (err error) {
	if err := checkNoLiveDaemon(d.ifi); err != nil {
		return err
	}
	n, err := bpf.DetachStale(d.ifi.Index)
	if err != nil {
		return err
	}
	if n > 0 {
		d.log.Info("removed a stale softnic XDP program", "iface", d.ifi.Name, "count", n)
	}
	opts := bpf.Options{SteerPause: d.opts.pfc}
	if d.addr.Is4() {
		opts.LocalIPv4 = d.addr
	} else {
		opts.LocalIPv6 = d.addr
	}
	if d.steer, err = bpf.Load(opts); err != nil {
		return err
	}
	if d.link, err = bpf.Attach(d.steer.Program, d.ifi.Index); err != nil {
		return err
	}
	d.log.Info("XDP steering program attached", "iface", d.ifi.Name, "mode", d.link.Mode.String())
	return nil
}

// ifaceSpeed is the interface's speed in bits/s as the kernel reports it
// (/sys/class/net/IF/speed, in Mb/s), the rate PFC pause quanta count at
// without --link-rate; 0 when unknown (no link, a virtual device that
// reports -1): the engine then takes dataplane.DefaultPFCRate, 10 Gb/s.
func ifaceSpeed(iface string) uint64 {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", iface, "speed"))
	if err != nil {
		return 0
	}
	mbps, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbps <= 0 || mbps > 1e9 {
		return 0
	}
	return uint64(mbps) * 1e6
}

// errNeedsRoot is the one-line answer to a missing capability.
var errNeedsRoot = errors.New("needs root (CAP_NET_ADMIN, CAP_BPF) to attach XDP; use --port udp or run as root")

// checkPrivileges looks at the effective capabilities rather than the
// uid: root in a container may lack them, and a non-root process may have
// been granted them.
func checkPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return errNeedsRoot
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if !has(unix.CAP_NET_ADMIN) || !has(unix.CAP_BPF) && !has(unix.CAP_SYS_ADMIN) {
		return errNeedsRoot
	}
	return nil
}

// checkAFXDP reports a kernel without AF_XDP sockets, or a process
// without the capability to open one (CAP_NET_RAW).
func checkAFXDP() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("AF_XDP sockets need CAP_NET_RAW: %w; run as root or grant it", err)
	}
	if err != nil {
		return fmt.Errorf("the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS): %w; use --port udp", err)
	}
	return unix.Close(fd)
}

// localAddr picks the engine's address: --ip if given (it must be on the
// interface), else the interface's first address in 198.18.0.0/15, else
// its first global unicast one (internal/hostaddr).
func localAddr(ifi *net.Interface, want string) (netip.Addr, error) {
	return hostaddr.Local(ifi, want, "--ip")
}

func parseQueues(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var qs []int
	for _, f := range strings.Split(s, ",") {
		q, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || q < 0 {
			return nil, fmt.Errorf("--queues %q: want comma-separated queue numbers", s)
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// ensureSocketDir creates the control socket's directory if it is
// missing, with any missing parents, mode 0755 whatever the umask (owned
// by the daemon's user, root), as systemd's RuntimeDirectory= would: the
// default /run/softnic does not exist on a fresh host, and clients of
// other users must be able to reach the socket (whose own mode, 0660,
// is what guards it). An existing directory is left as it is.
func ensureSocketDir(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("control socket directory %s is not a directory", dir)
	}
	// Missing, or another error (a parent that is a file, no search
	// permission): MkdirAll makes it or names the part it cannot make.
	// The directories MkdirAll will make, to give them their mode after
	// the umask took its share.
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create control socket directory: %w", err)
	}
	for _, d := range missing {
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("create control socket directory: %w", err)
		}
	}
	return nil
}

// checkControlFree turns a second daemon away before it touches the
// interface: a socket at path that a live daemon answers on is in use,
// and a file there that is not a socket is not ours to replace. A stale
// socket (a killed daemon's) is fine: the verbs server replaces it.
func checkControlFree(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("control socket path %s exists and is not a socket", path)
	}
	for _, network := range []string{"unixpacket", "unix"} {
		if c, err := net.DialTimeout(network, path, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("control socket %s is in use by a running daemon", path)
		}
	}
	return nil
}

// emulationScale is how much longer a hardware cost lasts on the emulated
// link than on the modelled NIC: modelRate/linkRate (1 without
// --model-rate). StaR's 1 µs context fetch lasts about 11 frames of 1 KiB
// (or about 120 8-byte WRITEs) at 100 Gb/s; at --link-rate 5gbit the same
// number of packet times is 20 µs, so that the fetch weighs on the
// emulated link as it does on the real one, and not as a speck beside a
// software NIC's microseconds per packet.
func (o options) emulationScale() float64 {
	if o.modelRate == 0 || o.linkRate == 0 {
		return 1
	}
	return float64(o.modelRate) / float64(o.linkRate)
}

// scaled is d times scale.
func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d)*scale + 0.5)
}

// fetchPenalty maps the flag (0 disables) to the engine's convention
// (0 means the default, negative disables).
func fetchPenalty(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// knobList is every scheme knob with its default and help, for
// --scheme-param's usage.
func knobList() string {
	var b strings.Builder
	for _, k := range recovery.Knobs() {
		fmt.Fprintf(&b, "\n  %s=%s: %s", k.Key(), k.Default, k.Help)
	}
	return b.String()
}

// ccKnobList is --cc-param's usage.
func ccKnobList() string {
	var b strings.Builder
	for _, k := range cc.Knobs() {
		fmt.Fprintf(&b, "\n  %s=%s: %s", k.Key(), k.Default, k.Help)
	}
	return b.String()
}

// knobAliases are the flags that set a scheme knob under its older
// name.
var knobAliases = []struct{ flag, key string }{
	{"melo-pool-bits", "melo.pool_bits"},
	{"fasr-units", "fasr.units"},
	{"fasr-blocks", "fasr.blocks"},
}

// knobAlias is a flag that sets one knob of knobs.
type knobAlias struct {
	knobs *recovery.KnobValues
	key   string
}

func (a knobAlias) String() string {
	if a.knobs == nil {
		return ""
	}
	return (*a.knobs)[a.key]
}

func (a knobAlias) Set(v string) error { return a.knobs.Set(a.key + "=" + v) }

// SetDefault sets the knob unless the command line did (applyConfigFile).
func (a knobAlias) SetDefault(v string) error { return a.knobs.SetDefault(a.key + "=" + v) }
