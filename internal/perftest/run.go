package perftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Test names one of the benchmarks.
type Test int

const (
	WriteBW Test = iota + 1
	ReadBW
	SendBW
	AtomicBW
	WriteLat
	ReadLat
	SendLat
	// RPCLat is a softnic extension (rpc.go): N connections, each with one
	// call outstanding, a SEND request answered by a SEND response.
	RPCLat
)

var testInfo = [...]struct{ name, title string }{
	WriteBW:  {"write_bw", "RDMA_Write BW Test"},
	ReadBW:   {"read_bw", "RDMA_Read BW Test"},
	SendBW:   {"send_bw", "Send BW Test"},
	AtomicBW: {"atomic_bw", "Atomic FETCH_AND_ADD BW Test"},
	WriteLat: {"write_lat", "RDMA_Write Latency Test"},
	ReadLat:  {"read_lat", "RDMA_Read Latency Test"},
	SendLat:  {"send_lat", "Send Latency Test"},
	RPCLat:   {"rpc_lat", "Send RPC Latency Test (softnic extension)"},
}

// Tests lists the test names ParseTest accepts.
func Tests() []string {
	var names []string
	for t := WriteBW; t <= RPCLat; t++ {
		names = append(names, t.String())
	}
	return names
}

// ParseTest maps a name such as "write_bw" to its Test.
func ParseTest(s string) (Test, error) {
	for t := WriteBW; t <= RPCLat; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("perftest: unknown test %q (have %v)", s, Tests())
}

func (t Test) valid() bool { return t >= WriteBW && t <= RPCLat }

func (t Test) String() string {
	if t.valid() {
		return testInfo[t].name
	}
	return fmt.Sprintf("Test(%d)", int(t))
}

// Title is perftest's banner for the test, e.g. "RDMA_Write BW Test".
func (t Test) Title() string {
	if t.valid() {
		return testInfo[t].title
	}
	return t.String()
}

// IsLatency reports whether t prints a latency table.
func (t Test) IsLatency() bool { return t == WriteLat || t == ReadLat || t == SendLat || t == RPCLat }

// OneQP reports whether t runs on one QP only: perftest's latency tests
// do; rpc_lat runs one call outstanding on each of -q QPs.
func (t Test) OneQP() bool { return t.IsLatency() && t != RPCLat }

// usesRecv reports whether t consumes receive WQEs on role's side; in a
// bidirectional SEND test both sides do.
func (t Test) usesRecv(r Role, bidir bool) bool {
	return t == SendLat || t == RPCLat || t == SendBW && (r == Server || bidir)
}

// Role is the side of a run: the client drives and measures, the server
// answers (or only lends its memory to one-sided operations).
type Role int

const (
	Client Role = iota
	Server
)

func (r Role) String() string {
	if r == Server {
		return "server"
	}
	return "client"
}

// Config is what both sides of a run must agree on, plus the local
// preferences (schemes) and limits. Zero fields take the defaults below.
type Config struct {
	Test  Test
	Sizes []int // message sizes in bytes, run in order (-s, or the -a sweep)
	// Iters is the number of messages per size, over all QPs together
	// (-n); bandwidth tests spread them round robin.
	Iters int
	// Duration, if positive, runs each size for this long instead (-D).
	Duration time.Duration
	QPs      int    // -q (bandwidth tests)
	TxDepth  int    // -t: send WRs in flight per QP
	RxDepth  int    // receive WRs posted per QP by the side of a SEND test that receives
	MTU      qp.MTU // -m
	// Schemes is this side's list of recovery schemes, most preferred
	// first, advertised in the exchange; every QP runs the scheme the two
	// sides agree on (cm.AgreeScheme). Empty: the NIC's default scheme
	// (Device.Scheme), then go-back-N, the fallback every side speaks.
	Schemes []string
	LossPct float64 // reported in each row
	// Stall ends the run with an error when nothing happened for this
	// long (a dead peer): default 10 s.
	Stall time.Duration
	// Events makes the loops wait for completions by completion events
	// only (perftest's -e, --use_event): arm the CQ, poll once more, block
	// on the completion channel, poll. Without it they spin first and
	// block only once a wait grows long. A local choice: the two sides
	// need not agree. write_lat's wait for the peer's write to land in
	// memory has no completion to wait for and spins either way.
	Events bool
	// PostList, if positive, posts send WRs in lists of exactly this many
	// per PostSend call (perftest's -l), the last of an -n run excepted
	// when -n does not split evenly over the QPs; 0 posts whatever room a
	// QP has in one call. Bandwidth tests; a local choice.
	PostList int
	// NoPeak skips BW peak (perftest's -N); it is also skipped, as in
	// perftest, in timed runs and above MaxPeakIters iterations.
	NoPeak bool
	// QPTimeout is the QPs' local ACK timeout exponent (perftest's -u,
	// 4.096 us * 2^QPTimeout) when QPTimeoutSet, 0 meaning none; unset,
	// perftest's 14. A local choice.
	QPTimeout    uint8
	QPTimeoutSet bool
	// Bidirectional makes both sides send (perftest's -b, bandwidth
	// tests): each measures its own sends, and the rows the sides print
	// add the two (Row.Both keeps each).
	Bidirectional bool
	// Infinite runs the bandwidth test until Stop is closed (perftest's
	// --run_infinitely), reporting a row every Duration.
	Infinite bool
	// Stop ends an Infinite run (the client's): posting stops, the WRs in
	// flight complete, and the last interval is reported. Unlike
	// cancelling the context, the run ends cleanly on both sides.
	Stop <-chan struct{}
	// Star runs StaR's stateless mode (star.go): the server's QPs are
	// stateless StaR servers (its NIC must serve StaR), the client's StaR
	// clients. write_bw, read_bw and read_lat only.
	Star bool
	// RespSize is rpc_lat's response size in bytes (--response-size;
	// default DefaultRespSize); Sizes are its request sizes.
	RespSize int
	// CQMod signals one SEND in CQMod on each QP (perftest's -Q,
	// --cq-mod), rpc_lat only: the requests on the client, the responses
	// on the server. A closed-loop call needs no completion of its SENDs
	// (a response implies that its request landed, the next request that
	// the last response did), so the others go unsignaled and retire with
	// the next signaled one, as on an RC send queue; each send queue holds
	// CQMod work requests. 0 or 1 signals every SEND. A local choice.
	CQMod int
}

// Defaults, as perftest's where it has them.
const (
	DefaultTxDepth    = 128
	DefaultTxDepthLat = 1 // perftest's latency tests: one WR in flight
	DefaultRxDepth    = 512
	DefaultRxDepthRPC = 1    // rpc_lat: one call, so one response, outstanding per QP
	DefaultRespSize   = 1400 // rpc_lat: StaR Fig. 5b's response
	DefaultReqSize    = 2800 // rpc_lat: StaR Fig. 5b's request
	DefaultStall      = 10 * time.Second
	MaxSize           = 1 << 30
)

func (c *Config) fill() error {
	if !c.Test.valid() {
		return fmt.Errorf("perftest: no test chosen")
	}
	if c.QPs == 0 {
		c.QPs = 1
	}
	if c.TxDepth == 0 {
		c.TxDepth = DefaultTxDepth
		if c.Test.IsLatency() {
			c.TxDepth = DefaultTxDepthLat
		}
	}
	if c.RxDepth == 0 {
		c.RxDepth = DefaultRxDepth
		if c.Test == RPCLat {
			c.RxDepth = DefaultRxDepthRPC
		}
	}
	if c.Test == RPCLat && c.RespSize == 0 {
		c.RespSize = DefaultRespSize
	}
	if c.MTU == 0 {
		c.MTU = qp.MTU1024
	}
	if c.Stall == 0 {
		c.Stall = DefaultStall
	}
	switch {
	case len(c.Sizes) == 0:
		return errors.New("perftest: no message size")
	case c.Iters <= 0 && c.Duration <= 0:
		return errors.New("perftest: iterations (-n) or a duration (-D) must be positive")
	case c.QPs < 1 || c.QPs > cm.MaxQPs:
		return fmt.Errorf("perftest: %d QPs; 1 to %d", c.QPs, cm.MaxQPs)
	case c.Test.OneQP() && c.QPs != 1:
		return fmt.Errorf("perftest: %v runs on one QP (got -q %d)", c.Test, c.QPs)
	case c.TxDepth < 1 || c.TxDepth > dataplane.MaxWR:
		return fmt.Errorf("perftest: tx depth %d; 1 to %d", c.TxDepth, dataplane.MaxWR)
	case c.RxDepth < 1 || c.RxDepth > dataplane.MaxWR:
		return fmt.Errorf("perftest: rx depth %d; 1 to %d", c.RxDepth, dataplane.MaxWR)
	case c.Test == RPCLat && (c.RespSize < 1 || c.RespSize > MaxSize):
		return fmt.Errorf("perftest: response size %d; 1 to %d bytes", c.RespSize, MaxSize)
	case c.Test != RPCLat && c.RespSize != 0:
		return fmt.Errorf("perftest: a response size is rpc_lat's, not %v's", c.Test)
	case c.CQMod < 0 || c.CQMod > dataplane.MaxWR:
		return fmt.Errorf("perftest: cq-mod %d; 1 to %d", c.CQMod, dataplane.MaxWR)
	case c.Test != RPCLat && c.CQMod > 1:
		return fmt.Errorf("perftest: cq-mod is rpc_lat's, not %v's", c.Test)
	case c.MTU.Bytes() == 0:
		return fmt.Errorf("perftest: invalid path MTU %v", c.MTU)
	case c.PostList < 0 || c.PostList > c.TxDepth:
		return fmt.Errorf("perftest: post list %d; 0 to the tx depth, %d", c.PostList, c.TxDepth)
	case c.QPTimeout > 31:
		return fmt.Errorf("perftest: QP timeout %d; 0 to 31", c.QPTimeout)
	case c.Test.IsLatency() && (c.Bidirectional || c.Infinite || c.PostList > 1):
		return fmt.Errorf("perftest: %v: bidirectional, infinite and post-list runs are bandwidth tests", c.Test)
	case c.Infinite && c.Bidirectional:
		return errors.New("perftest: an infinite run is one-way: the client's interrupt ends it")
	case c.Infinite && (c.Duration <= 0 || c.Iters > 0 || len(c.Sizes) != 1):
		return errors.New("perftest: an infinite run reports every Duration, of one size, with no iteration count")
	}
	if err := c.CheckStar(); err != nil {
		return err
	}
	for _, s := range c.Sizes {
		if s < 1 || s > MaxSize {
			return fmt.Errorf("perftest: message size %d; 1 to %d bytes", s, MaxSize)
		}
		if c.Test == AtomicBW && s != 8 {
			return fmt.Errorf("perftest: atomics move 8 bytes, not %d", s)
		}
	}
	return nil
}

// Device is the NIC a side runs on and what cannot be asked of a
// verbs.Context alone: its GID and MAC (the addresses the peer's QP sends
// to) and where memory the NIC can reach comes from.
type Device struct {
	Ctx *verbs.Context
	GID netip.Addr
	MAC [6]byte
	// AllocBuf returns n bytes of memory to register, 8-byte aligned:
	// shared memory with the daemon, or MmapBuf embedded.
	AllocBuf func(n int) ([]byte, error)
	// FreeBuf, if set, releases memory from AllocBuf once deregistered.
	FreeBuf func([]byte) error
	// NextHop, if set, gives the MAC address frames to the peer's GID
	// must carry, from the MAC the peer announced: the peer's own on a
	// flat link, a gateway's on a routed one (cm.NextHopMAC). Without it
	// the peer's MAC is used, which is right on the embedded fabric.
	NextHop func(gid netip.Addr, peerMAC [6]byte) ([6]byte, error)
	// Scheme is the NIC's default recovery scheme, the one a QP that
	// asks for none runs, if known; a side with no Config.Schemes offers
	// it first.
	Scheme string
	// Schemes are the schemes the NIC's QPs can run, if known: a scheme
	// this side offers must be one of them.
	Schemes []string
	// PollDriven says the NIC makes progress only inside this process's
	// calls that poll a CQ or post (direct mode, verbs.OpenDirect, with
	// its progress goroutine on standby): a wait on memory (write_lat's)
	// polls the CQ every round instead of now and then, or the peer's
	// WRITE would sit in the receive ring between polls.
	PollDriven bool
}

// Hooks let a caller print as a run goes; nil fields are skipped.
type Hooks struct {
	// Connected is called once the QPs are connected, before the first
	// measurement.
	Connected func(Connection)
	// Row is called with each row as soon as it exists.
	Row func(Row)
	// Counters is called by RunEmbedded at the end, with the statistics
	// of the client's and the server's NIC.
	Counters func(client, server dataplane.Counters)
	// Captured is called by RunEmbedded at the end with the number of
	// frames written to Fabric.Pcap, when it is set.
	Captured func(frames uint64)
}

// Connection is what the exchange established.
type Connection struct {
	Local, Remote []cm.Endpoint
	Scheme        string // the recovery scheme the two sides agreed on
	QPScheme      string // the scheme this side's QPs run: Scheme, applied to every QP
	QPTimeout     uint8  // the local ACK timeout the QPs run with (QP 1's, as queried)
}

// Run runs cfg's test as role over dev: set up the QPs, exchange and
// connect them with the peer over conn, then measure every size, and
// return the rows. The client measures; the server receives the client's
// rows over conn, so both sides can print the same table. After an error
// conn may have been closed.
func Run(ctx context.Context, dev Device, conn net.Conn, role Role, cfg Config, hooks Hooks) (rows []Row, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s, err := newSession(dev, role, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	// The exchange and the barriers block on conn: cancelling ctx must
	// end them too, not only the measurement loops.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	// And a loop blocked on its completion channel.
	stopKick := context.AfterFunc(ctx, s.ev.kick)
	defer stopKick()
	if cfg.Infinite && role == Client && hooks.Row != nil {
		s.interval = func(r Row) {
			r.Test, r.Scheme, r.LossPct = s.cfg.Test.String(), s.qpScheme, s.cfg.LossPct
			hooks.Row(r)
		}
	}
	if err := s.connect(conn); err != nil {
		return nil, err
	}
	if hooks.Connected != nil {
		c := Connection{Local: s.local, Remote: s.remote, Scheme: s.scheme, QPScheme: s.qpScheme}
		if attr, err := s.qps[0].QueryAttr(); err == nil {
			c.QPTimeout = attr.Timeout
		}
		hooks.Connected(c)
	}
	for _, size := range cfg.Sizes {
		row, err := s.runSize(ctx, conn, size)
		if err != nil {
			return rows, err
		}
		if cfg.Infinite && row.Iters == 0 {
			continue // stopped just after an interval's row
		}
		rows = append(rows, row)
		if hooks.Row != nil {
			hooks.Row(row)
		}
	}
	// The closing barrier (perftest's closing handshake): the server's
	// last SEND or WRITE (send_lat, write_lat) completes only when the
	// client's ACK for it arrives, and the client, which has its last
	// message already, may be done first. The server reaches this
	// barrier only after its send queue drained (serve), so the client
	// keeps its QPs until then: were that ACK lost and the client's QP
	// gone, the server's retransmissions would find no QP, and its QP
	// would end in RETRY_EXC_ERR (TestTeardownWaitsForLastAck).
	if _, err := cm.Sync(conn, nil); err != nil {
		return rows, fmt.Errorf("perftest: closing barrier: %w", err)
	}
	return rows, nil
}

// session is one side's resources for a run.
type session struct {
	dev      Device
	role     Role
	cfg      Config
	slot     int // bytes per buffer half: the largest size, rounded up
	pd       *verbs.PD
	ch       *verbs.CompChannel // the CQ's: the loops block on it (waiter)
	cq       *verbs.CQ
	ev       *events
	qps      []*verbs.QP
	buf      []byte    // every QP's buffer, one after the other
	mr       *verbs.MR // buf, registered once, as perftest does without --mr_per_qp
	bufs     [][]byte  // per QP: [target region | source region], slot bytes each, in buf
	offs     []int     // per QP: offset of bufs[i] in buf
	local    []cm.Endpoint
	remote   []cm.Endpoint
	scheme   string // agreed with the peer
	qpScheme string // what the QPs run
	wcs      []verbs.WC
	recvWR   []verbs.RecvWR // per QP: the receive WR reposted after each SEND
	interval func(Row)      // the client's hook for an infinite run's rows
}

func newSession(dev Device, role Role, cfg Config) (*session, error) {
	if dev.Ctx == nil || dev.AllocBuf == nil {
		return nil, errors.New("perftest: device without a context or a memory allocator")
	}
	s := &session{dev: dev, role: role, cfg: cfg, wcs: make([]verbs.WC, 64)}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("perftest: eventfd: %w", err)
	}
	s.ev = &events{wake: wake, only: cfg.Events}
	if err := s.setup(); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// offered is the list of schemes this side advertises: Config.Schemes,
// or the NIC's default and then the fallback. Each must be a scheme the
// NIC has, when the NIC says which it has.
func (s *session) offered() ([]string, error) {
	list := s.cfg.Schemes
	if len(list) == 0 {
		list = []string{cm.FallbackScheme}
		if d := s.dev.Scheme; d != "" && d != cm.FallbackScheme {
			list = []string{d, cm.FallbackScheme}
		}
	}
	if s.cfg.Star {
		return s.starOffered(list)
	}
	if len(s.dev.Schemes) > 0 {
		for _, name := range list {
			if !slices.Contains(s.dev.Schemes, name) {
				return nil, fmt.Errorf("perftest: this NIC has no recovery scheme %q (it has %v)", name, s.dev.Schemes)
			}
		}
	}
	return list, nil
}

// setup creates the PD, the CQ, one registered buffer for every QP, and
// the QPs, on this side's preferred scheme (the agreed one is applied
// after the exchange, before the QPs leave RESET).
func (s *session) setup() (err error) {
	dev, cfg := s.dev, s.cfg
	schemes, err := s.offered()
	if err != nil {
		return err
	}
	if err := s.checkStarDevice(); err != nil {
		return err
	}
	// A cache line's worth of alignment keeps atomics and the polled
	// word inside one region.
	s.slot = (max(slices.Max(cfg.Sizes), cfg.RespSize) + 63) &^ 63
	if s.pd, err = dev.Ctx.AllocPD(); err != nil {
		return fmt.Errorf("perftest: alloc PD: %w", err)
	}
	// Every WR is signalled, so the CQ must hold every send and every
	// posted receive of every QP at once. A side that posts no receives
	// needs neither receive queues nor room for their completions: at
	// -q 5000 that is the difference between a few kilobytes and
	// hundreds of megabytes of rings.
	rxDepth := 0
	if cfg.Test.usesRecv(s.role, cfg.Bidirectional) {
		rxDepth = cfg.RxDepth
	}
	depth := cfg.QPs * (cfg.TxDepth + rxDepth)
	if s.ch, err = dev.Ctx.CreateCompChannel(); err != nil {
		return fmt.Errorf("perftest: create completion channel: %w", err)
	}
	if s.cq, err = dev.Ctx.CreateCQWithChannel(depth, s.ch); err != nil {
		return fmt.Errorf("perftest: create CQ of %d: %w", depth, err)
	}
	s.ev.ch, s.ev.cq = s.ch, s.cq
	// One buffer and one region for all QPs, each QP with its own slice.
	region := 2 * s.slot
	if s.buf, err = dev.AllocBuf(cfg.QPs * region); err != nil {
		return fmt.Errorf("perftest: buffer of %d bytes: %w", cfg.QPs*region, err)
	}
	if !aligned(s.buf) {
		return errors.New("perftest: the device's buffer is not 8-byte aligned")
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	if s.mr, err = s.pd.RegMR(s.buf, access); err != nil {
		return fmt.Errorf("perftest: register %d bytes: %w", len(s.buf), err)
	}
	for i := 0; i < cfg.QPs; i++ {
		off := i * region
		s.offs = append(s.offs, off)
		s.bufs = append(s.bufs, s.buf[off:off+region:off+region])
		q, err := s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: max(cfg.TxDepth, cfg.CQMod), MaxRecvWR: max(rxDepth, 1), Scheme: schemes[0], Star: s.starRole()})
		if err != nil {
			return fmt.Errorf("perftest: create QP %d of %d: %w", i+1, cfg.QPs, err)
		}
		s.qps = append(s.qps, q)
		s.local = append(s.local, cm.Endpoint{
			QPN: q.QPN(), PSN: cm.RandomPSN(), GID: dev.GID, MAC: dev.MAC,
			RKey: s.mr.RKey, Addr: s.mr.Addr + uint64(off), Size: uint64(s.slot), Schemes: schemes, Star: s.starRole(),
		})
		rwr := verbs.RecvWR{WRID: uint64(i), NumSGE: 1}
		rwr.SGL[0] = s.mr.SGE(off, s.slot)
		s.recvWR = append(s.recvWR, rwr)
	}
	return s.starTable()
}

// agreement is what the two sides compare before measuring: a mismatch
// would otherwise show up as a hang (one side waiting for messages the
// other never sends), or, for the scheme, as a connection whose two ends
// speak different recovery.
type agreement struct {
	Test     string
	Sizes    []int
	Iters    int
	Duration time.Duration
	QPs      int
	TxDepth  int
	MTU      int
	Scheme   string // what the QPs run
	Bidir    bool   `json:",omitempty"`
	Infinite bool   `json:",omitempty"`
	Star     bool   `json:",omitempty"`
	RespSize int    `json:",omitempty"`
}

func (s *session) connect(conn net.Conn) error {
	remote, err := cm.Exchange(conn, s.local)
	if err != nil {
		return err
	}
	if err := s.agreeStar(remote); err != nil {
		return err
	}
	// Both sides reach the same answer from the two lists; every QP runs
	// it, on both sides. The QPs are still in RESET, where their scheme
	// may change.
	s.scheme = cm.AgreeScheme(s.local[0].Schemes, remote[0].Schemes)
	for i, q := range s.qps {
		if q.Scheme() == s.scheme {
			continue // created with it: no round trip to the daemon
		}
		if err := q.SetScheme(s.scheme); err != nil {
			return fmt.Errorf("perftest: QP %d of %d: run the agreed recovery scheme: %w", i+1, len(s.qps), err)
		}
	}
	s.qpScheme = s.qps[0].Scheme()
	for i, q := range s.qps {
		if got := q.Scheme(); got != s.qpScheme {
			return fmt.Errorf("perftest: QP %d runs %s, QP 1 %s", i+1, got, s.qpScheme)
		}
	}
	for i, r := range remote {
		if r.Size < uint64(slices.Max(s.cfg.Sizes)) {
			return fmt.Errorf("perftest: peer's buffer %d holds %d bytes, the test needs %d", i, r.Size, slices.Max(s.cfg.Sizes))
		}
		if s.dev.NextHop != nil {
			if r.MAC, err = s.dev.NextHop(r.GID, r.MAC); err != nil {
				return err
			}
		}
		p := verbs.ConnParam{MTU: s.cfg.MTU}
		if s.cfg.QPTimeoutSet {
			p.Timeout, p.TimeoutDisabled = s.cfg.QPTimeout, s.cfg.QPTimeout == 0
		}
		if err := cm.ConnectQP(s.qps[i], s.local[i], r, p); err != nil {
			return err
		}
	}
	s.remote = remote
	if s.cfg.Test.usesRecv(s.role, s.cfg.Bidirectional) {
		for i, q := range s.qps {
			for range s.cfg.RxDepth {
				if err := q.PostRecv(s.recvWR[i]); err != nil {
					return fmt.Errorf("perftest: post receive: %w", err)
				}
			}
		}
	}
	// The barrier also tells the peer our QPs are in RTR with their
	// receives posted, so its first packet is not dropped.
	mine, _ := json.Marshal(agreement{s.cfg.Test.String(), s.cfg.Sizes, s.cfg.Iters, s.cfg.Duration, s.cfg.QPs, s.cfg.TxDepth, s.cfg.MTU.Bytes(), s.qpScheme,
		s.cfg.Bidirectional, s.cfg.Infinite, s.cfg.Star, s.cfg.RespSize})
	theirs, err := cm.Sync(conn, mine)
	if err != nil {
		return err
	}
	if string(theirs) != string(mine) {
		return fmt.Errorf("perftest: the two sides run different tests: %s here, %s on the peer", mine, theirs)
	}
	return nil
}

// errPeerFailed is the server's error when the client reported a failed
// measurement.
var errPeerFailed = errors.New("perftest: the client failed")

// endReport is the client's message at the end of each size.
type endReport struct {
	Row Row
	Err string
}

func (s *session) runSize(ctx context.Context, conn net.Conn, size int) (Row, error) {
	if s.cfg.Test == WriteLat {
		// The peer writes our target region and we spin on its last
		// byte: start from zeros, which no iteration writes.
		clear(s.bufs[0][:size])
	}
	if _, err := cm.Sync(conn, nil); err != nil {
		return Row{}, err
	}
	if s.cfg.Bidirectional {
		return s.bidirectional(ctx, conn, size)
	}
	if s.role == Server {
		return s.serve(ctx, conn, size)
	}
	row, runErr := s.measure(ctx, size)
	row.Test, row.Scheme, row.LossPct = s.cfg.Test.String(), s.qpScheme, s.cfg.LossPct
	rep := endReport{Row: row}
	if runErr != nil {
		rep.Err = runErr.Error()
	}
	payload, _ := json.Marshal(rep)
	if _, err := cm.Sync(conn, payload); err != nil && runErr == nil {
		runErr = err
	}
	return row, runErr
}

// serve is the server's part of one size. The passive tests only wait
// for the client's report; the others answer until the client is done.
func (s *session) serve(ctx context.Context, conn net.Conn, size int) (Row, error) {
	type result struct {
		payload []byte
		err     error
	}
	end := make(chan result, 1)
	var done atomic.Bool
	go func() {
		p, err := cm.Sync(conn, nil)
		done.Store(true)
		s.ev.kick() // a loop blocked on the channel looks at done
		end <- result{p, err}
	}()
	var loopErr error
	switch s.cfg.Test {
	case SendBW:
		loopErr = s.serveSendBW(ctx, &done, false)
	case WriteLat:
		loopErr = s.serveWriteLat(ctx, &done, size)
	case SendLat:
		loopErr = s.serveSendLat(ctx, &done, size)
	case RPCLat:
		loopErr = s.serveRPC(ctx, &done, size)
	}
	if loopErr != nil {
		// The client cannot finish without us: end the run on both
		// sides rather than leave the report goroutine waiting.
		conn.Close()
		<-end
		return Row{}, loopErr
	}
	r := <-end
	if r.err != nil {
		return Row{}, r.err
	}
	var rep endReport
	if err := json.Unmarshal(r.payload, &rep); err != nil {
		return Row{}, fmt.Errorf("perftest: client's report: %w", err)
	}
	if rep.Err != "" {
		return rep.Row, fmt.Errorf("%w: %s", errPeerFailed, rep.Err)
	}
	return rep.Row, nil
}

// measure is the client's part of one size.
func (s *session) measure(ctx context.Context, size int) (Row, error) {
	switch s.cfg.Test {
	case WriteLat:
		return s.writeLat(ctx, size)
	case SendLat:
		return s.sendLat(ctx, size)
	case ReadLat:
		return s.readLat(ctx, size)
	case RPCLat:
		return s.rpcLat(ctx, size)
	}
	return s.bandwidth(ctx, size)
}

// sendWR is the template of the client's work requests on QP i: from our
// source region to the peer's target region.
func (s *session) sendWR(i, size int) verbs.SendWR {
	wr := verbs.SendWR{WRID: uint64(i), Flags: verbs.SendSignaled, NumSGE: 1,
		RemoteAddr: s.remote[i].Addr, RKey: s.remote[i].RKey}
	wr.SGL[0] = s.mr.SGE(s.offs[i]+s.slot, size)
	switch s.cfg.Test {
	case WriteBW, WriteLat:
		wr.Opcode = verbs.WRRDMAWrite
	case ReadBW, ReadLat:
		wr.Opcode = verbs.WRRDMARead
	case SendBW, SendLat, RPCLat:
		wr.Opcode = verbs.WRSend
	case AtomicBW:
		wr.Opcode, wr.CompareAdd = verbs.WRAtomicFetchAndAdd, 1
	}
	return wr
}

// completionError describes a failed work completion.
func completionError(wc *verbs.WC) error {
	return fmt.Errorf("perftest: %v completion on QP %#x: %v", wc.Opcode, wc.QPNum, wc.Status)
}

func (s *session) close() error {
	var errs []error
	for _, q := range s.qps {
		errs = append(errs, q.Destroy())
	}
	if s.cq != nil {
		errs = append(errs, s.cq.Destroy()) // the waiters acknowledged every event they took
	}
	if s.ch != nil {
		errs = append(errs, s.ch.Destroy())
	}
	if s.ev != nil {
		s.ev.close()
	}
	if s.mr != nil {
		errs = append(errs, s.mr.Dereg())
	}
	if s.pd != nil {
		errs = append(errs, s.pd.Dealloc())
	}
	if s.dev.FreeBuf != nil && s.buf != nil {
		errs = append(errs, s.dev.FreeBuf(s.buf))
	}
	s.qps, s.cq, s.ch, s.mr, s.buf, s.bufs, s.pd = nil, nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
