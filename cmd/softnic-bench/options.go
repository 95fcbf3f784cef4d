package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
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
	pcap     string
	scheme   string
	loss     float64 // percent
	rate     float64 // Gb/s
	delay    time.Duration
	seed     uint64
	ipv6     bool
	sweepMax int     // hidden: the largest size of an -a sweep (tests)
	star     string  // --star server|client (star.go)
	respSize int     // --response-size: rpc_lat's response, bytes
	cqMod    int     // -Q, --cq-mod: rpc_lat signals one SEND in this many
	stall    float64 // --stall: seconds without progress that end a run

	knobs recovery.KnobValues // --scheme-param: the embedded NICs' scheme knobs

	// direct and directQueue: --direct IFACE runs the NIC in this
	// process on the interface's queue (verbs.OpenDirect), no daemon.
	direct      string
	directQueue int

	// perftest's flags that act on softnic too
	bidir      bool   // -b
	postList   int    // -l: WRs per post call (bandwidth tests)
	qpTimeout  int    // -u: local ACK timeout exponent
	noPeak     bool   // -N
	conn       string // -c: RC only
	rdmaCM     bool   // -R
	infinite   bool   // --run_infinitely
	reportBoth bool   // --report-both
	outJSON    string // --out_json, --out_json_file: file name, "" for none

	// perftest's flags that name hardware softnic does not have: accepted
	// and printed in the banner as ignored.
	ibDev    string // -d
	gidIndex int    // -x
	ibPort   int    // -i
	cpuFreq  bool   // -F

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
	// perftest's QP timeout (-u): 4.096 us * 2^14, 67 ms.
	defaultQPTimeout = 14
	// perftest's --out_json file name.
	defaultJSONFile = "perftest_out.json"
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

func (fs *flagSet) shortStringVar(p *string, short, long, def string) {
	fs.StringVar(p, long, def, "")
	fs.StringVar(p, short, def, "")
	fs.long[short] = long
}

// sizeVar registers a byte count that takes perftest's suffixes: 64K is
// 65536 bytes, 1M 2^20, 1G 2^30.
func (fs *flagSet) sizeVar(p *int, short, long string) {
	fs.Var(sizeValue{p}, long, "")
	if short != "" {
		fs.Var(sizeValue{p}, short, "")
		fs.long[short] = long
	}
}

type sizeValue struct{ p *int }

func (v sizeValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// parseSize reads a byte count as perftest's -s does: a number (decimal,
// 0x hex or 0 octal, as strtol with base 0), optionally followed by K, M
// or G (binary multiples; perftest has K and M).
func parseSize(s string) (int, error) {
	factor := int64(1)
	num := s
	if n := len(s); n > 1 {
		switch s[n-1] {
		case 'K', 'k':
			factor, num = 1<<10, s[:n-1]
		case 'M', 'm':
			factor, num = 1<<20, s[:n-1]
		case 'G', 'g':
			factor, num = 1<<30, s[:n-1]
		}
	}
	n, err := strconv.ParseInt(num, 0, 64)
	if err != nil || n < 0 || n > (1<<40)/factor {
		return 0, errors.New("not a size: a byte count, optionally with K, M or G")
	}
	return int(n * factor), nil
}

// jsonValue is perftest's --out_json: a switch that writes the report
// to perftest_out.json; --out_json=FILE names the file, as
// --out_json_file FILE does.
type jsonValue struct{ p *string }

func (v jsonValue) IsBoolFlag() bool { return true }

func (v jsonValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v jsonValue) Set(s string) error {
	switch s {
	case "true", "1":
		if *v.p == "" {
			*v.p = defaultJSONFile
		}
	case "false", "0":
		*v.p = ""
	case "":
		return errors.New("empty file name")
	default:
		*v.p = s
	}
	return nil
}

// expandShort rewrites perftest's getopt spellings into ones package flag
// parses: a value attached to a short flag (-s4096, -n100) and clustered
// short switches (-ab, -eF, -bs 64K). Values that follow a flag are
// passed on untouched, so "-n -1" still reads -1 as -n's value.
func (fs *flagSet) expandShort(args []string) []string {
	takesValue := func(f *flag.Flag) bool {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		return !ok || !b.IsBoolFlag()
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil || strings.HasPrefix(a, "--") || len(a) == 2 {
			out = append(out, a)
			if f != nil && !hasValue && takesValue(f) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		// -XYZ: short flags, the first that takes a value ending the
		// cluster with the rest of the word (or the next word) as its value.
		var expanded []string
		ok := true
		for k := 1; k < len(a); k++ {
			c := a[k : k+1]
			f := fs.Lookup(c)
			if _, short := fs.long[c]; f == nil || !short {
				ok = false
				break
			}
			expanded = append(expanded, "-"+c)
			if !takesValue(f) {
				continue
			}
			if k+1 < len(a) {
				expanded = append(expanded, a[k+1:])
			} else if i+1 < len(args) {
				i++
				expanded = append(expanded, args[i])
			}
			break
		}
		if !ok {
			out = append(out, a) // package flag names the unknown flag
			continue
		}
		out = append(out, expanded...)
	}
	return out
}

const usageText = `usage: softnic-bench <test> [flags] [server]

perftest for softnic. The server runs "softnic-bench <test> [flags]", the
client the same with the server's address last; they meet over TCP on
--port and then measure over RoCEv2. With --embedded both sides run in this
process on softnic's in-memory fabric: no daemon, no privileges.

tests:
  write_bw read_bw send_bw atomic_bw   bandwidth (perftest's ib_*_bw)
  write_lat read_lat send_lat          latency (ib_*_lat)
  rpc_lat                              RPCs (softnic extension): -q N
                                       connections, one call outstanding
                                       on each, a SEND request of -s bytes
                                       (default 2800) answered by a SEND
                                       response of --response-size bytes
                                       (default 1400); calls/s and the
                                       calls' round-trip percentiles
  raw                                  raw RoCEv2 frames through the AF_XDP
                                       port, no transport: the path limit
  version                              the version, commit and Go toolchain
                                       of this build (also --version)

flags (perftest names; getopt's spellings work too: -s4096, -bN, --size=64K):
  -s, --size N          message size in bytes, with K, M or G: 64K (default
                        65536 bw, 2 lat)
  -n, --iters N         messages per size, spread over the QPs (default 5000
                        write_bw, 1000 the other tests, as perftest)
  -D, --duration SEC    run each size this many seconds instead of -n (no BW
                        peak then, as perftest)
  -q, --qp N            QPs, WRs spread round robin (bw tests and rpc_lat;
                        default 1, at most 16384)
  -a, --all             sweep sizes 2 B .. 8 MiB in powers of two
  -m, --mtu N           path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)
  -t, --tx-depth N      send WRs in flight per QP (default 128 bw, 1 lat):
                        -q 5000 -t 1 keeps one WR outstanding on each of
                        5000 QPs
  -r, --rx-depth N      receive WRs posted per QP, SEND tests (default 512;
                        rpc_lat 1)
      --response-size N rpc_lat: the response's bytes, with K, M or G
                        (default 1400)
  -Q, --cq-mod N        rpc_lat: signal one SEND in N on each QP, requests
                        on the client, responses on the server (default 1:
                        all); the others retire with the next signaled one
      --stall SEC       end the run with an error after SEC seconds with no
                        completion (default 10; softnic extension)
  -p, --port N          TCP port of the connection exchange (default 18515)
  -e, --events          wait for completions by completion events only: arm
                        the CQ, poll again, block on its completion channel
                        (perftest's --use_event). Without -e a wait spins
                        briefly and then blocks on the channel the same way;
                        write_lat's wait for the peer's write to land in
                        memory has no completion and spins either way
  -b, --bidirectional   both sides send (bw tests); rows add the two sides
      --report-both     with -b, also print each side's rows
  -l, --post_list N     post send WRs in lists of N (bw tests; default: all a
                        QP has room for in one call)
  -u, --qp-timeout N    QPs' local ACK timeout, 4.096 us * 2^N (default 14;
                        0: none)
  -N, --noPeak          do not compute BW peak
  -c, --connection RC   connection type: softnic runs RC only
  -R, --rdma_cm         accepted: softnic has no RDMA CM, the QPs are always
                        connected by the TCP exchange on --port
      --run_infinitely  bw tests: run until interrupted (SIGINT, SIGTERM),
                        printing a row every -D seconds (default 5)
      --out_json        write the last row to perftest_out.json with
                        perftest's JSON keys (--out_json=FILE names the file)
      --out_json_file F the file for --out_json
      --report_gbits    bandwidth in Gb/s rather than MiB/s (2^20 B/s)
  -d, --ib-dev NAME     accepted and ignored: the device is the daemon's
  -x, --gid-index N     accepted and ignored: a softnic device has one GID
  -i, --ib-port N       accepted and ignored: a softnic device has one port
  -F, --CPU-freq        accepted and ignored: softnic does not count cycles
      --csv FILE        append rows to FILE (bandwidth in Gb/s, times in
                        usec, loss in percent), with a header when new:
                        test,bytes,iterations,bw_peak,bw_avg,msg_rate,t_min,
                        t_max,t_typical,t_avg,t_stdev,p99,p99_9,scheme,loss
      --scheme NAME     loss recovery this side offers first, then gbn; every
                        QP runs the scheme both sides agree on (default:
                        the daemon's default scheme; --embedded: gbn, for
                        both NICs)
      --star ROLE       StaR's stateless mode (softnic extension): server on
                        the server side (its daemon runs --star-server),
                        client on the client side; write_bw, read_bw,
                        read_lat, send_bw, send_lat and rpc_lat
                        (docs/star.md)
      --socket PATH     softnic daemon's control socket
                        (default /run/softnic/softnic.sock)
      --direct IFACE    direct mode: no daemon; the NIC runs in this process
                        on its own AF_XDP socket on IFACE (needs root; the
                        queue must be free: docs/direct.md)
      --direct-queue N  with --direct, the receive queue to own (default 0)

embedded fabric (--embedded):
      --embedded        run both sides in this process on the in-memory fabric
      --loss PCT        frame loss in percent, both directions (default 0)
      --rate GBPS       link rate in Gb/s (default 25; 0: unlimited)
      --delay DUR       one-way propagation delay (default 2us)
      --seed N          seed of the fabric's loss (default 1)
      --ipv6            address the NICs by IPv6 GIDs
      --pcap FILE       write every frame the client's NIC sends and receives
                        to FILE (pcap, simulated time; with a daemon: softnic
                        capture, docs/capture.md)
      --scheme-param SCHEME.KNOB=VALUE
                        a scheme's own knob on both NICs, e.g.
                        melo.pool_bits=2048; repeat it for more (softnic run
                        --help lists them)

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
	fs.sizeVar(&o.size, "s", "size")
	fs.intVar(&o.iters, "n", "iters", 0)
	fs.floatVar(&o.duration, "D", "duration", 0)
	fs.intVar(&o.qps, "q", "qp", 1)
	fs.boolVar(&o.all, "a", "all")
	fs.intVar(&o.mtu, "m", "mtu", 1024)
	fs.intVar(&o.txDepth, "t", "tx-depth", 0)
	fs.intVar(&o.rxDepth, "r", "rx-depth", perftest.DefaultRxDepth)
	fs.intVar(&o.port, "p", "port", defaultPort)
	fs.boolVar(&o.gbits, "", "report_gbits")
	fs.boolVar(&o.events, "e", "events")
	fs.stringVar(&o.csv, "csv", "")
	fs.stringVar(&o.socket, "socket", defaultSocket)
	fs.boolVar(&o.embedded, "", "embedded")
	fs.stringVar(&o.direct, "direct", "")
	fs.intVar(&o.directQueue, "", "direct-queue", 0)
	fs.stringVar(&o.pcap, "pcap", "")
	fs.stringVar(&o.scheme, "scheme", recovery.GBN)
	fs.Var(&o.knobs, "scheme-param", "")
	fs.floatVar(&o.loss, "", "loss", 0)
	fs.floatVar(&o.rate, "", "rate", perftest.DefaultLink.RateBps/1e9)
	fs.DurationVar(&o.delay, "delay", perftest.DefaultLink.Delay, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.boolVar(&o.ipv6, "", "ipv6")
	fs.stringVar(&o.star, "star", "")
	fs.sizeVar(&o.respSize, "", "response-size")
	fs.intVar(&o.cqMod, "Q", "cq-mod", 1)
	fs.floatVar(&o.stall, "", "stall", perftest.DefaultStall.Seconds())
	fs.intVar(&o.sweepMax, "", "sweep_max", sweepMax)
	fs.boolVar(&o.bidir, "b", "bidirectional")
	fs.intVar(&o.postList, "l", "post_list", 0)
	fs.intVar(&o.qpTimeout, "u", "qp-timeout", defaultQPTimeout)
	fs.boolVar(&o.noPeak, "N", "noPeak")
	fs.shortStringVar(&o.conn, "c", "connection", "RC")
	fs.boolVar(&o.rdmaCM, "R", "rdma_cm")
	fs.boolVar(&o.infinite, "", "run_infinitely")
	fs.boolVar(&o.reportBoth, "", "report-both")
	fs.Var(jsonValue{&o.outJSON}, "out_json", "")
	fs.StringVar(&o.outJSON, "out_json_file", "", "")
	fs.shortStringVar(&o.ibDev, "d", "ib-dev", "")
	fs.intVar(&o.gidIndex, "x", "gid-index", -1)
	fs.intVar(&o.ibPort, "i", "ib-port", 1)
	fs.boolVar(&o.cpuFreq, "F", "CPU-freq")
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
	for rest := fs.expandShort(args[1:]); ; {
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
	case t.OneQP() && o.qps != 1:
		return usagef("-q %d: latency tests run on one QP (rpc_lat runs many)", o.qps)
	case o.set["response-size"] && t != perftest.RPCLat:
		return usagef("--response-size is rpc_lat's")
	case o.set["response-size"] && (o.respSize < 1 || o.respSize > perftest.MaxSize):
		return usagef("--response-size %d: 1 to %d bytes", o.respSize, perftest.MaxSize)
	case o.set["cq-mod"] && t != perftest.RPCLat:
		return usagef("-Q is rpc_lat's in softnic-bench")
	case o.cqMod < 1 || o.cqMod > 1<<16:
		return usagef("-Q %d: cq-mod must be 1 to 65536", o.cqMod)
	case !(o.stall > 0 && o.stall <= 86400):
		return usagef("--stall %g: seconds, more than 0 and at most a day", o.stall)
	case o.set["tx-depth"] && (o.txDepth < 1 || o.txDepth > 1<<16):
		return usagef("-t %d: tx depth must be 1 to 65536", o.txDepth)
	case o.rxDepth < 1 || o.rxDepth > 1<<16:
		return usagef("-r %d: rx depth must be 1 to 65536", o.rxDepth)
	case o.port < 1 || o.port > 65535:
		return usagef("-p %d: not a TCP port", o.port)
	case o.sweepMax < sweepMin:
		return usagef("--sweep_max %d: at least %d", o.sweepMax, sweepMin)
	}
	if err := o.checkPerftest(); err != nil {
		return err
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
	if err := o.checkStar(); err != nil {
		return err
	}
	if o.direct != "" {
		if o.embedded {
			return usagef("--direct and --embedded are two places for the NIC: give one")
		}
		if o.set["socket"] {
			return usagef("--direct runs the NIC in this process: no daemon socket (got --socket %s)", o.socket)
		}
		if o.directQueue < 0 {
			return usagef("--direct-queue %d: want a queue number", o.directQueue)
		}
	} else if o.set["direct-queue"] {
		return usagef("--direct-queue needs --direct IFACE")
	}
	if o.embedded {
		if o.server != "" {
			return usagef("--embedded runs both sides in this process: no server address (got %q)", o.server)
		}
		return o.checkFabric()
	}
	if o.pcap != "" {
		return usagef("--pcap writes the embedded NICs' frames: use it with --embedded (against a daemon: softnic capture -w FILE)")
	}
	for _, name := range []string{"loss", "rate", "delay", "seed", "ipv6"} {
		if o.set[name] {
			return usagef("--%s models the embedded fabric: use it with --embedded (on real links inject loss in the testbed's switch)", name)
		}
	}
	if o.set["scheme-param"] {
		return usagef("--scheme-param sets the embedded NICs' scheme knobs: use it with --embedded (a daemon's are softnic run --scheme-param)")
	}
	return nil
}

// checkPerftest checks perftest's flags that softnic takes for
// compatibility.
func (o *options) checkPerftest() error {
	t := o.verbs
	if !strings.EqualFold(o.conn, "RC") {
		return usagef("-c %s: softnic runs RC only (perftest's UC, UD, XRC, DC, SRD and RawEth are not implemented)", o.conn)
	}
	if t.IsLatency() {
		for _, f := range []struct{ name, flag string }{{"bidirectional", "-b"}, {"post_list", "-l"}, {"run_infinitely", "--run_infinitely"}, {"noPeak", "-N"}} {
			if o.set[f.name] {
				return usagef("%s applies to the bandwidth tests, as in perftest", f.flag)
			}
		}
	}
	switch {
	case o.set["post_list"] && (o.postList < 1 || o.postList > o.txDepthOrDefault()):
		return usagef("-l %d: a post list holds 1 to -t (%d) WRs", o.postList, o.txDepthOrDefault())
	case o.set["post_list"] && o.set["iters"] && o.iters%o.postList != 0:
		return usagef("-n %d: iterations must be a multiple of the post list (-l %d), as in perftest", o.iters, o.postList)
	case o.qpTimeout < 0 || o.qpTimeout > 31:
		return usagef("-u %d: the QP timeout is an exponent, 0 (none) to 31", o.qpTimeout)
	case o.set["gid-index"] && (o.gidIndex < 0 || o.gidIndex > 255):
		return usagef("-x %d: a GID index is 0 to 255", o.gidIndex)
	case o.ibPort < 1 || o.ibPort > 255:
		return usagef("-i %d: a port number is 1 to 255", o.ibPort)
	case o.set["ib-dev"] && o.ibDev == "":
		return usagef("-d: empty device name")
	case o.infinite && o.bidir:
		return usagef("--run_infinitely with -b is not supported: the client's interrupt ends an infinite run, which the sending server would not see")
	case o.infinite && (o.set["iters"] || o.all):
		return usagef("--run_infinitely runs until interrupted and reports every -D seconds: -n and -a do not apply")
	}
	return nil
}

// txDepthOrDefault is -t, or perftest's default for the test: 128 for
// the bandwidth tests, 1 for the latency tests.
func (o *options) txDepthOrDefault() int {
	if o.set["tx-depth"] {
		return o.txDepth
	}
	if o.verbs.IsLatency() {
		return perftest.DefaultTxDepthLat
	}
	return perftest.DefaultTxDepth
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
	for _, name := range []string{"iters", "all", "qp", "mtu", "tx-depth", "rx-depth", "csv", "report_gbits", "scheme", "star", "response-size", "stall", "socket", "events",
		"bidirectional", "post_list", "qp-timeout", "noPeak", "connection", "rdma_cm", "run_infinitely", "report-both",
		"out_json", "out_json_file", "ib-dev", "gid-index", "ib-port", "CPU-freq"} {
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
	c := perftest.Config{Test: t, QPs: o.qps, TxDepth: o.txDepthOrDefault(), RxDepth: o.rxDepth, LossPct: o.loss, Events: o.events,
		PostList: o.postList, NoPeak: o.noPeak, Bidirectional: o.bidir}
	c.MTU, _ = qp.MTUFromBytes(o.mtu)
	c.QPTimeout, c.QPTimeoutSet = uint8(o.qpTimeout), true
	// perftest's defaults: 5000 iterations for write_bw only, 1000 for
	// every other test.
	size, iters := 65536, 1000
	if t == perftest.WriteBW {
		iters = 5000
	}
	if t.IsLatency() {
		size = 2
	}
	if t == perftest.RPCLat {
		size = perftest.DefaultReqSize
		c.RespSize = perftest.DefaultRespSize
		if o.set["response-size"] {
			c.RespSize = o.respSize
		}
		if !o.set["rx-depth"] {
			c.RxDepth = perftest.DefaultRxDepthRPC
		}
		c.CQMod = o.cqMod
	}
	c.Stall = time.Duration(o.stall * float64(time.Second))
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
	if o.infinite {
		// perftest reports every -D seconds, 5 by default.
		c.Infinite, c.Duration = true, 5*time.Second
		if o.duration > 0 {
			c.Duration = time.Duration(o.duration * float64(time.Second))
		}
	} else if o.duration > 0 {
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
	o.starConfig(&c)
	return c
}

// link is the embedded fabric's wire.
func (o *options) link() perftest.Link {
	l := perftest.DefaultLink
	l.RateBps, l.Delay, l.Loss = o.rate*1e9, o.delay, o.loss/100
	return l
}

// ignored lists perftest's flags that name hardware softnic does not
// have, each with why it is ignored, for the banner.
func (o *options) ignored(device string) []string {
	var lines []string
	add := func(flag, why string) { lines = append(lines, fmt.Sprintf("%-15s : ignored: %s", flag, why)) }
	if o.set["ib-dev"] {
		add("-d "+o.ibDev, fmt.Sprintf("the device is the softnic daemon's (%s), reached through --socket", device))
		if o.embedded {
			lines[len(lines)-1] = fmt.Sprintf("%-15s : ignored: the device is the embedded NIC", "-d "+o.ibDev)
		}
	}
	if o.set["gid-index"] {
		add("-x "+strconv.Itoa(o.gidIndex), "a softnic device has one GID, its IP address (softnic run --ip)")
	}
	if o.set["ib-port"] {
		add("-i "+strconv.Itoa(o.ibPort), "a softnic device has one port")
	}
	if o.cpuFreq {
		add("-F", "softnic times with the monotonic clock, not CPU cycles: the CPU frequency does not matter")
	}
	return lines
}
