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
)

var testInfo = [...]struct{ name, title string }{
	WriteBW:  {"write_bw", "RDMA_Write BW Test"},
	ReadBW:   {"read_bw", "RDMA_Read BW Test"},
	SendBW:   {"send_bw", "Send BW Test"},
	AtomicBW: {"atomic_bw", "Atomic FETCH_AND_ADD BW Test"},
	WriteLat: {"write_lat", "RDMA_Write Latency Test"},
	ReadLat:  {"read_lat", "RDMA_Read Latency Test"},
	SendLat:  {"send_lat", "Send Latency Test"},
}

// Tests lists the test names ParseTest accepts.
func Tests() []string {
	var names []string
	for t := WriteBW; t <= SendLat; t++ {
		names = append(names, t.String())
	}
	return names
}

// ParseTest maps a name such as "write_bw" to its Test.
func ParseTest(s string) (Test, error) {
	for t := WriteBW; t <= SendLat; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("perftest: unknown test %q (have %v)", s, Tests())
}

func (t Test) valid() bool { return t >= WriteBW && t <= SendLat }

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
func (t Test) IsLatency() bool { return t == WriteLat || t == ReadLat || t == SendLat }

// usesRecv reports whether t consumes receive WQEs on role's side.
func (t Test) usesRecv(r Role) bool { return t == SendLat || t == SendBW && r == Server }

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
	// first, advertised in the exchange.
	Schemes []string
	LossPct float64 // reported in each row
	// Stall ends the run with an error when nothing happened for this
	// long (a dead peer): default 10 s.
	Stall time.Duration
}

// Defaults, as perftest's where it has them.
const (
	DefaultTxDepth = 128
	DefaultRxDepth = 512
	DefaultStall   = 10 * time.Second
	MaxSize        = 1 << 30
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
	}
	if c.RxDepth == 0 {
		c.RxDepth = DefaultRxDepth
	}
	if c.MTU == 0 {
		c.MTU = qp.MTU1024
	}
	if len(c.Schemes) == 0 {
		c.Schemes = []string{cm.FallbackScheme}
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
	case c.Test.IsLatency() && c.QPs != 1:
		return fmt.Errorf("perftest: %v runs on one QP (got -q %d)", c.Test, c.QPs)
	case c.TxDepth < 1 || c.TxDepth > dataplane.MaxWR:
		return fmt.Errorf("perftest: tx depth %d; 1 to %d", c.TxDepth, dataplane.MaxWR)
	case c.RxDepth < 1 || c.RxDepth > dataplane.MaxWR:
		return fmt.Errorf("perftest: rx depth %d; 1 to %d", c.RxDepth, dataplane.MaxWR)
	case c.MTU.Bytes() == 0:
		return fmt.Errorf("perftest: invalid path MTU %v", c.MTU)
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
	// Scheme is the recovery scheme the NIC runs, if known. NICs run one
	// scheme for every QP today, so it can differ from what the two
	// sides agreed on; the banner shows both.
	Scheme string
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
}

// Connection is what the exchange established.
type Connection struct {
	Local, Remote []cm.Endpoint
	Scheme        string // the recovery scheme the two sides agreed on
	NICScheme     string // the scheme the local NIC runs (Device.Scheme)
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
	if err := s.connect(conn); err != nil {
		return nil, err
	}
	if hooks.Connected != nil {
		hooks.Connected(Connection{Local: s.local, Remote: s.remote, Scheme: s.scheme, NICScheme: dev.Scheme})
	}
	for _, size := range cfg.Sizes {
		row, err := s.runSize(ctx, conn, size)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
		if hooks.Row != nil {
			hooks.Row(row)
		}
	}
	return rows, nil
}

// session is one side's resources for a run.
type session struct {
	dev    Device
	role   Role
	cfg    Config
	slot   int // bytes per buffer half: the largest size, rounded up
	pd     *verbs.PD
	cq     *verbs.CQ
	qps    []*verbs.QP
	mrs    []*verbs.MR
	bufs   [][]byte // per QP: [target region | source region], slot bytes each
	local  []cm.Endpoint
	remote []cm.Endpoint
	scheme string
	wcs    []verbs.WC
	recvWR []verbs.RecvWR // per QP: the receive WR reposted after each SEND
}

func newSession(dev Device, role Role, cfg Config) (*session, error) {
	if dev.Ctx == nil || dev.AllocBuf == nil {
		return nil, errors.New("perftest: device without a context or a memory allocator")
	}
	s := &session{dev: dev, role: role, cfg: cfg, wcs: make([]verbs.WC, 64)}
	if err := s.setup(); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// setup creates the PD, the CQ, and per QP a registered buffer and the
// QP itself.
func (s *session) setup() (err error) {
	dev, cfg := s.dev, s.cfg
	// A cache line's worth of alignment keeps atomics and the polled
	// word inside one region.
	s.slot = (slices.Max(cfg.Sizes) + 63) &^ 63
	if s.pd, err = dev.Ctx.AllocPD(); err != nil {
		return fmt.Errorf("perftest: alloc PD: %w", err)
	}
	// Every WR is signalled, so the CQ must hold every send and every
	// posted receive of every QP at once.
	depth := cfg.QPs * (cfg.TxDepth + cfg.RxDepth)
	if s.cq, err = dev.Ctx.CreateCQ(depth); err != nil {
		return fmt.Errorf("perftest: create CQ of %d: %w", depth, err)
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	for i := 0; i < cfg.QPs; i++ {
		buf, err := dev.AllocBuf(2 * s.slot)
		if err != nil {
			return fmt.Errorf("perftest: buffer of %d bytes: %w", 2*s.slot, err)
		}
		s.bufs = append(s.bufs, buf)
		if !aligned(buf) {
			return errors.New("perftest: the device's buffer is not 8-byte aligned")
		}
		mr, err := s.pd.RegMR(buf, access)
		if err != nil {
			return fmt.Errorf("perftest: register %d bytes: %w", len(buf), err)
		}
		s.mrs = append(s.mrs, mr)
		q, err := s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: cfg.TxDepth, MaxRecvWR: cfg.RxDepth})
		if err != nil {
			return fmt.Errorf("perftest: create QP: %w", err)
		}
		s.qps = append(s.qps, q)
		s.local = append(s.local, cm.Endpoint{
			QPN: q.QPN(), PSN: cm.RandomPSN(), GID: dev.GID, MAC: dev.MAC,
			RKey: mr.RKey, Addr: mr.Addr, Size: uint64(s.slot), Schemes: cfg.Schemes,
		})
		rwr := verbs.RecvWR{WRID: uint64(i), NumSGE: 1}
		rwr.SGL[0] = mr.SGE(0, s.slot)
		s.recvWR = append(s.recvWR, rwr)
	}
	return nil
}

// agreement is what the two sides compare before measuring: a mismatch
// would otherwise show up as a hang (one side waiting for messages the
// other never sends).
type agreement struct {
	Test     string
	Sizes    []int
	Iters    int
	Duration time.Duration
	QPs      int
	TxDepth  int
	MTU      int
}

func (s *session) connect(conn net.Conn) error {
	remote, err := cm.Exchange(conn, s.local)
	if err != nil {
		return err
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
		if err := cm.ConnectQP(s.qps[i], s.local[i], r, verbs.ConnParam{MTU: s.cfg.MTU}); err != nil {
			return err
		}
	}
	s.remote = remote
	s.scheme = cm.AgreeScheme(s.local[0].Schemes, remote[0].Schemes)
	if s.cfg.Test.usesRecv(s.role) {
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
	mine, _ := json.Marshal(agreement{s.cfg.Test.String(), s.cfg.Sizes, s.cfg.Iters, s.cfg.Duration, s.cfg.QPs, s.cfg.TxDepth, s.cfg.MTU.Bytes()})
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
	if s.role == Server {
		return s.serve(ctx, conn, size)
	}
	row, runErr := s.measure(ctx, size)
	row.Test, row.Scheme, row.LossPct = s.cfg.Test.String(), s.scheme, s.cfg.LossPct
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
		end <- result{p, err}
	}()
	var loopErr error
	switch s.cfg.Test {
	case SendBW:
		loopErr = s.serveSendBW(ctx, &done)
	case WriteLat:
		loopErr = s.serveWriteLat(ctx, &done, size)
	case SendLat:
		loopErr = s.serveSendLat(ctx, &done, size)
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
	}
	return s.bandwidth(ctx, size)
}

// sendWR is the template of the client's work requests on QP i: from our
// source region to the peer's target region.
func (s *session) sendWR(i, size int) verbs.SendWR {
	wr := verbs.SendWR{WRID: uint64(i), Flags: verbs.SendSignaled, NumSGE: 1,
		RemoteAddr: s.remote[i].Addr, RKey: s.remote[i].RKey}
	wr.SGL[0] = s.mrs[i].SGE(s.slot, size)
	switch s.cfg.Test {
	case WriteBW, WriteLat:
		wr.Opcode = verbs.WRRDMAWrite
	case ReadBW, ReadLat:
		wr.Opcode = verbs.WRRDMARead
	case SendBW, SendLat:
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
		errs = append(errs, s.cq.Destroy())
	}
	for _, m := range s.mrs {
		errs = append(errs, m.Dereg())
	}
	if s.pd != nil {
		errs = append(errs, s.pd.Dealloc())
	}
	if s.dev.FreeBuf != nil {
		for _, b := range s.bufs {
			errs = append(errs, s.dev.FreeBuf(b))
		}
	}
	s.qps, s.cq, s.mrs, s.bufs, s.pd = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
