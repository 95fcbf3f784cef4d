package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs/cm"
)

// options are the command line, with perftest's flag names.
type options struct {
	test     string
	verbs    perftest.Test // zero for raw
	server   string        // empty: this side is the server
	size     int
	iters    int
	duration float64 // seconds
	qps      int
	all      bool
	mtu      int
	txDepth  int
	rxDepth  int
	gbits    bool
	events   bool
	csv      string
	port     int
	socket   string
	embedded bool
	scheme   string
	loss     float64 // percent
	rate     float64 // Gb/s
	delay    time.Duration
	seed     uint64
	ipv6     bool
	sweepMax int // hidden: the largest size of an -a sweep (tests)

	// raw
	iface  string
	dstMAC string
	srcIP  string
	dstIP  string

	set map[string]bool // flags given on the command line, by long name
}

const (
	defaultPort   = 18515
	defaultSocket = "/run/softnic/softnic.sock"
	rawTest       = "raw"
	// perftest's -a sweeps 2 B to 8 MiB in powers of two.
	sweepMin = 2
	sweepMax = 1 << 23
)

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// flagSet registers flags under perftest's short and long names.
type flagSet struct {
	*flag.FlagSet
	long map[string]string // short name -> long name
}

func (fs *flagSet) intVar(p *int, short, long string, def int) {
	fs.IntVar(p, long, def, "")
	if short != "" {
		fs.IntVar(p, short, def, "")
		fs.long[short] = long
	}
}

func (fs *flagSet) floatVar(p *float64, short, long string, def float64) {
	fs.Float64Var(p, long, def, "")
	if short != "" {
		fs.Float64Var(p, short, def, "")
		fs.long[short] = long
	}
}

func (fs *flagSet) boolVar(p *bool, short, long string) {
	fs.BoolVar(p, long, false, "")
	if short != "" {
		fs.BoolVar(p, short, false, "")
		fs.long[short] = long
	}
}

func (fs *flagSet) stringVar(p *string, long, def string) { fs.StringVar(p, long, def, "") }

const usageText = `usage: softnic-bench <test> [flags] [server]

perftest for softnic. The server runs "softnic-bench <test> [flags]", the
client the same with the server's address last; they meet over TCP on
--port and then measure over RoCEv2. With --embedded both sides run in this
process on softnic's in-memory fabric: no daemon, no privileges.

tests:
  write_bw read_bw send_bw atomic_bw   bandwidth (perftest's ib_*_bw)
  write_lat read_lat send_lat          latency (ib_*_lat)
  raw                                  raw RoCEv2 frames through the AF_XDP
                                       port, no transport: the path limit
  version                              the version, commit and Go toolchain
                                       of this build (also --version)

flags (perftest names):
  -s, --size N          message size in bytes (default 65536 bw, 2 lat)
  -n, --iters N         messages per size (default 5000 bw, 1000 lat)
  -D, --duration SEC    run each size this many seconds instead of -n
  -q, --qp N            QPs, WRs spread round robin (bw tests; default 1,
                        at most 16384)
  -a, --all             sweep sizes 2 B .. 8 MiB in powers of two
  -m, --mtu N           path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)
  -t, --tx-depth N      send WRs in flight per QP (default 128): -q 5000 -t 1
                        keeps one WR outstanding on each of 5000 QPs
  -r, --rx-depth N      receive WRs posted per QP, SEND tests (default 512)
  -p, --port N          TCP port of the connection exchange (default 18515)
  -e, --events          wait for completions by completion events only: arm
                        the CQ, poll again, block on its completion channel
                        (perftest's --use_event). Without -e a wait spins
                        briefly and then blocks on the channel the same way;
                        write_lat's wait for the peer's write to land in
                        memory has no completion and spins either way
      --report_gbits    bandwidth in Gb/s rather than MB/s (2^20 B/s)
      --csv FILE        append rows to FILE (bandwidth in Gb/s, times in
                        usec, loss in percent), with a header when new:
                        test,bytes,iterations,bw_peak,bw_avg,msg_rate,t_min,
                        t_max,t_typical,t_avg,t_stdev,p99,p99_9,scheme,loss
      --scheme NAME     loss recovery this side offers first, then gbn; every
                        QP runs the scheme both sides agree on (default:
                        the daemon's default scheme; --embedded: gbn, for
                        both NICs)
      --socket PATH     softnic daemon's control socket
                        (default /run/softnic/softnic.sock)

embedded fabric (--embedded):
      --embedded        run both sides in this process on the in-memory fabric
      --loss PCT        frame loss in percent, both directions (default 0)
      --rate GBPS       link rate in Gb/s (default 25; 0: unlimited)
      --delay DUR       one-way propagation delay (default 2us)
      --seed N          seed of the fabric's loss (default 1)
      --ipv6            address the NICs by IPv6 GIDs

raw:
      --iface NAME      interface to send or receive on (AF_XDP, needs root)
      --dst-mac MAC     client: the server's MAC address
      --src-ip IP       client: source address; server: the address to
                        count frames for (default: every RoCEv2 frame)
      --dst-ip IP       client: the server's address
  -D is the client's sending time (default 5 s); -s the payload per frame
  (default 1024: a full RoCE packet at MTU 1024)
`

func newFlagSet(o *options) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("softnic-bench", flag.ContinueOnError), long: map[string]string{}}
	// Errors are reported once, by run, with a pointer to -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.intVar(&o.size, "s", "size", 0)
	fs.intVar(&o.iters, "n", "iters", 0)
	fs.floatVar(&o.duration, "D", "duration", 0)
	fs.intVar(&o.qps, "q", "qp", 1)
	fs.boolVar(&o.all, "a", "all")
	fs.intVar(&o.mtu, "m", "mtu", 1024)
	fs.intVar(&o.txDepth, "t", "tx-depth", perftest.DefaultTxDepth)
	fs.intVar(&o.rxDepth, "r", "rx-depth", perftest.DefaultRxDepth)
	fs.intVar(&o.port, "p", "port", defaultPort)
	fs.boolVar(&o.gbits, "", "report_gbits")
	fs.boolVar(&o.events, "e", "events")
	fs.stringVar(&o.csv, "csv", "")
	fs.stringVar(&o.socket, "socket", defaultSocket)
	fs.boolVar(&o.embedded, "", "embedded")
	fs.stringVar(&o.scheme, "scheme", recovery.GBN)
	fs.floatVar(&o.loss, "", "loss", 0)
	fs.floatVar(&o.rate, "", "rate", perftest.DefaultLink.RateBps/1e9)
	fs.DurationVar(&o.delay, "delay", perftest.DefaultLink.Delay, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.boolVar(&o.ipv6, "", "ipv6")
	fs.intVar(&o.sweepMax, "", "sweep_max", sweepMax)
	fs.stringVar(&o.iface, "iface", "")
	fs.stringVar(&o.dstMAC, "dst-mac", "")
	fs.stringVar(&o.srcIP, "src-ip", "")
	fs.stringVar(&o.dstIP, "dst-ip", "")
	return fs
}

// errHelp asks for the usage text and exit status 0.
var errHelp = errors.New("help requested")

// errVersion asks for the build information and exit status 0.
var errVersion = errors.New("version requested")

// parseArgs parses and checks the command line.
func parseArgs(args []string) (*options, error) {
	if len(args) == 0 {
		return nil, usagef("no test given")
	}
	if a := args[0]; a == "-h" || a == "--help" || a == "-help" || a == "help" {
		return nil, errHelp
	}
	if a := args[0]; a == "version" || a == "--version" || a == "-version" {
		if len(args) > 1 {
			return nil, usagef("%s: unexpected argument %q", a, args[1])
		}
		return nil, errVersion
	}
	o := &options{test: args[0], set: map[string]bool{}}
	if strings.HasPrefix(o.test, "-") {
		return nil, usagef("the test comes first: softnic-bench <test> [flags] [server]")
	}
	fs := newFlagSet(o)
	var positional []string
	// Flags may come before and after the server address, as perftest
	// takes them.
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usagef("%v", err)
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		rest = rest[1:]
	}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if l, ok := fs.long[name]; ok {
			name = l
		}
		o.set[name] = true
	})
	if len(positional) > 1 {
		return nil, usagef("one server address at most, got %q", positional)
	}
	if len(positional) == 1 {
		o.server = positional[0]
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *options) check() error {
	if o.test == rawTest {
		return o.checkRaw()
	}
	t, err := perftest.ParseTest(o.test)
	if err != nil {
		return usagef("unknown test %q: want one of %s or %s", o.test, strings.Join(perftest.Tests(), ", "), rawTest)
	}
	o.verbs = t
	for _, name := range []string{"iface", "dst-mac", "src-ip", "dst-ip"} {
		if o.set[name] {
			return usagef("--%s belongs to the raw test", name)
		}
	}
	if o.set["iters"] && o.set["duration"] {
		return usagef("-n and -D exclude each other")
	}
	if o.set["size"] && o.all {
		return usagef("-s and -a exclude each other")
	}
	switch {
	case o.set["size"] && (o.size < 1 || o.size > perftest.MaxSize):
		return usagef("-s %d: message size must be 1 to %d", o.size, perftest.MaxSize)
	case o.set["iters"] && o.iters < 1:
		return usagef("-n %d: iterations must be positive", o.iters)
	case o.set["duration"] && !(o.duration > 0):
		return usagef("-D %g: duration must be positive", o.duration)
	case o.qps < 1 || o.qps > cm.MaxQPs:
		return usagef("-q %d: 1 to %d QPs", o.qps, cm.MaxQPs)
	case t.IsLatency() && o.qps != 1:
		return usagef("-q %d: latency tests run on one QP", o.qps)
	case o.txDepth < 1 || o.txDepth > 1<<16:
		return usagef("-t %d: tx depth must be 1 to 65536", o.txDepth)
	case o.rxDepth < 1 || o.rxDepth > 1<<16:
		return usagef("-r %d: rx depth must be 1 to 65536", o.rxDepth)
	case o.port < 1 || o.port > 65535:
		return usagef("-p %d: not a TCP port", o.port)
	case o.sweepMax < sweepMin:
		return usagef("--sweep_max %d: at least %d", o.sweepMax, sweepMin)
	}
	if _, err := qp.MTUFromBytes(o.mtu); err != nil {
		return usagef("-m %d: path MTU must be 256, 512, 1024, 2048 or 4096", o.mtu)
	}
	if t == perftest.AtomicBW && (o.all || o.set["size"] && o.size != 8) {
		return usagef("atomic_bw moves 8 bytes per operation: -s and -a do not apply")
	}
	if err := o.checkScheme(); err != nil {
		return err
	}
	if o.embedded {
		if o.server != "" {
			return usagef("--embedded runs both sides in this process: no server address (got %q)", o.server)
		}
		return o.checkFabric()
	}
	for _, name := range []string{"loss", "rate", "delay", "seed", "ipv6"} {
		if o.set[name] {
			return usagef("--%s models the embedded fabric: use it with --embedded (on real links inject loss in the testbed's switch)", name)
		}
	}
	return nil
}

func (o *options) checkScheme() error {
	if o.embedded {
		if !slices.Contains(recovery.Names(), o.scheme) {
			return usagef("--scheme %q: this build has %s", o.scheme, strings.Join(recovery.Names(), ", "))
		}
		return nil
	}
	// The daemon knows which schemes it has (the run checks the name
	// against them); here it needs only to be a name.
	for _, c := range o.scheme {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return usagef("--scheme %q: not a scheme name", o.scheme)
		}
	}
	if o.scheme == "" || len(o.scheme) > 32 {
		return usagef("--scheme %q: not a scheme name", o.scheme)
	}
	return nil
}

func (o *options) checkFabric() error {
	switch {
	case !(o.loss >= 0 && o.loss <= 100):
		return usagef("--loss %g: a percentage, 0 to 100", o.loss)
	case !(o.rate >= 0 && o.rate <= 1e6):
		return usagef("--rate %g: Gb/s, 0 (unlimited) to 1000000", o.rate)
	case o.delay < 0 || o.delay > time.Minute:
		return usagef("--delay %v: 0 to 1m", o.delay)
	}
	return nil
}

func (o *options) checkRaw() error {
	if o.embedded {
		return usagef("raw measures the AF_XDP path: it has no embedded mode")
	}
	if o.iface == "" {
		return usagef("raw needs --iface")
	}
	for _, name := range []string{"iters", "all", "qp", "mtu", "tx-depth", "rx-depth", "csv", "report_gbits", "scheme", "socket", "events"} {
		if o.set[name] {
			return usagef("--%s does not apply to raw (it sends for -D seconds, frames of -s payload bytes)", name)
		}
	}
	if o.set["size"] && (o.size < 0 || o.size > 4096) {
		return usagef("-s %d: raw payload must be 0 to 4096 bytes", o.size)
	}
	if o.set["duration"] && !(o.duration > 0) {
		return usagef("-D %g: duration must be positive", o.duration)
	}
	if o.port < 1 || o.port > 65535 {
		return usagef("-p %d: not a TCP port", o.port)
	}
	if o.srcIP != "" {
		if _, err := netip.ParseAddr(o.srcIP); err != nil {
			return usagef("--src-ip: %v", err)
		}
	}
	if o.server == "" {
		return nil
	}
	if o.dstMAC == "" || o.srcIP == "" || o.dstIP == "" {
		return usagef("the raw client needs --dst-mac, --src-ip and --dst-ip")
	}
	if _, err := net.ParseMAC(o.dstMAC); err != nil {
		return usagef("--dst-mac: %v", err)
	}
	src, _ := netip.ParseAddr(o.srcIP)
	dst, err := netip.ParseAddr(o.dstIP)
	if err != nil {
		return usagef("--dst-ip: %v", err)
	}
	if src.Unmap().Is4() != dst.Unmap().Is4() {
		return usagef("--src-ip %v and --dst-ip %v are of different IP versions", src, dst)
	}
	return nil
}

// config turns the options into the measurement's configuration.
func (o *options) config() perftest.Config {
	t := o.verbs
	c := perftest.Config{Test: t, QPs: o.qps, TxDepth: o.txDepth, RxDepth: o.rxDepth, LossPct: o.loss, Events: o.events}
	c.MTU, _ = qp.MTUFromBytes(o.mtu)
	size, iters := 65536, 5000
	if t.IsLatency() {
		size, iters = 2, 1000
	}
	if t == perftest.AtomicBW {
		size = 8
	}
	if o.set["size"] {
		size = o.size
	}
	if o.set["iters"] {
		iters = o.iters
	}
	c.Sizes = []int{size}
	if o.all {
		c.Sizes = nil
		for s := sweepMin; s <= min(sweepMax, o.sweepMax); s *= 2 {
			c.Sizes = append(c.Sizes, s)
		}
	}
	if o.duration > 0 {
		c.Duration = time.Duration(o.duration * float64(time.Second))
	} else {
		c.Iters = iters
	}
	// Against a daemon without --scheme, the QPs ask for nothing
	// particular: the run offers the daemon's default scheme.
	if o.embedded || o.set["scheme"] {
		c.Schemes = []string{o.scheme}
		if o.scheme != recovery.GBN {
			c.Schemes = append(c.Schemes, recovery.GBN)
		}
	}
	return c
}

// link is the embedded fabric's wire.
func (o *options) link() perftest.Link {
	l := perftest.DefaultLink
	l.RateBps, l.Delay, l.Loss = o.rate*1e9, o.delay, o.loss/100
	return l
}
