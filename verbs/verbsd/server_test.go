package verbsd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// These tests speak the wire protocol directly, as a client that does not
// use the verbs library (or means harm) would. Whatever it sends, the
// daemon answers with errors, keeps serving, and confines the damage to
// that client's own objects.

type rawClient struct {
	t    *testing.T
	c    *proto.Conn
	next uint64
}

func newServer(t *testing.T) (*Server, *sim.Sim) {
	t.Helper()
	return newServerLog(t, nil)
}

// newServerLog is newServer with log as the server's logger (nil: none).
func newServerLog(t *testing.T, log *slog.Logger) (*Server, *sim.Sim) {
	t.Helper()
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sim.A, Options{SocketPath: filepath.Join(t.TempDir(), "v.sock"), Wake: sim.Wake, Logger: log,
		Counters: func(yield func(string, uint64)) { yield("port_rx_frames", 5) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ctx) })
	t.Cleanup(func() { s.Close(); cancel(); wg.Wait() })
	return s, sim
}

func dial(t *testing.T, s *Server) *rawClient {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: s.SocketPath(), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: proto.NewConn(c)}
}

// call sends op and returns the response's error and descriptors.
func (r *rawClient) call(op string, args any, result any, fds ...int) ([]int, error) {
	r.t.Helper()
	r.next++
	req := proto.Request{ID: r.next, Op: op}
	if args != nil {
		req.Args, _ = json.Marshal(args)
	}
	if err := r.c.Send(req, fds...); err != nil {
		r.t.Fatalf("%s: send: %v", op, err)
	}
	var resp proto.Response
	got, err := r.c.Recv(&resp)
	if err != nil {
		r.t.Fatalf("%s: receive: %v", op, err)
	}
	if resp.Error != nil {
		return got, protoconv.DecodeError(resp.Error)
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			r.t.Fatal(err)
		}
	}
	return got, nil
}

// hello opens the session as a client of the given protocol version; a
// version-2 client gets its doorbell file, mapped.
func (r *rawClient) hello(version int) shm.Bells {
	abi, _ := shm.Fingerprint()
	fds, err := r.call(proto.OpHello, proto.HelloArgs{Version: version, ABI: abi}, nil)
	defer proto.CloseFDs(fds)
	want := 2
	if version >= 2 {
		want = 3
	}
	if err != nil || len(fds) != want {
		r.t.Fatalf("hello: %v, %d descriptors", err, len(fds))
	}
	if version < 2 {
		return shm.Bells{}
	}
	m, err := shm.MapShared(fds[2], 0, int64(shm.BellFileLen), unix.PROT_READ|unix.PROT_WRITE, shm.SealSize)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { m.Unmap() })
	if err := shm.CheckBells(m.Bytes); err != nil {
		r.t.Fatal(err)
	}
	return shm.MapBells(m.Bytes)
}

// TestProtocolAbuse: requests out of order, malformed, unknown, with
// stray descriptors or the wrong version get errors; the connection and
// the server survive.
func TestProtocolAbuse(t *testing.T) {
	s, _ := newServer(t)
	r := dial(t, s)
	if _, err := r.call(proto.OpAllocPD, nil, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("request before hello: %v", err)
	}
	r.hello(proto.Version)
	if _, err := r.call("format_disk", nil, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := r.call(proto.OpDestroyQP, "not an object", nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("malformed arguments: %v", err)
	}
	if _, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: 1, Addr: 4096, Length: 4096}, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("reg_mr without a memfd: %v", err)
	}
	// A descriptor that is not a sealed memfd, and one sent with an op
	// that takes none (it must be closed, not leaked or used).
	var pd proto.Handle
	if _, err := r.call(proto.OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	p := make([]int, 2)
	if err := unix.Pipe2(p, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer proto.CloseFDs(p)
	if _, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096, Access: qp.AccessLocalWrite}, nil, p[0]); err == nil {
		t.Fatal("a pipe registered as memory")
	}
	fd, mem, err := shm.Create("unsealed", 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Munmap(mem)
	if _, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096, Access: qp.AccessLocalWrite}, nil, fd); err == nil {
		t.Fatal("memory the client could shrink registered")
	}
	if _, err := r.call(proto.OpStats, nil, nil, p[1]); err != nil {
		t.Fatalf("stats with a stray descriptor: %v", err)
	}
	var st proto.StatsResult
	if _, err := r.call(proto.OpStats, nil, &st); err != nil || st.Counters[len(st.Counters)-1] != (proto.Counter{Name: "port_rx_frames", Value: 5}) {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	// A client of another layout is turned away at hello, and so is one
	// of a protocol version the daemon does not speak.
	other := dial(t, s)
	if _, err := other.call(proto.OpHello, proto.HelloArgs{Version: proto.Version, ABI: 12345}, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("foreign layout: %v", err)
	}
	abi, _ := shm.Fingerprint()
	for _, v := range []int{proto.MinVersion - 1, proto.Version + 1} {
		c := dial(t, s)
		if _, err := c.call(proto.OpHello, proto.HelloArgs{Version: v, ABI: abi}, nil); !errors.Is(err, proto.ErrProtocol) {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	// The first connection still works.
	if _, err := r.call(proto.OpQueryDevice, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// hostileQP sets up a QP in RTS over the raw protocol and maps its rings.
func hostileQP(t *testing.T, r *rawClient, sim *sim.Sim) (qpRes proto.CreateQPResult, l shm.QPLayout, rings []byte, cqRing []byte, cqLayout shm.CQLayout) {
	t.Helper()
	var pd proto.Handle
	r.call(proto.OpAllocPD, nil, &pd)
	var cq proto.CreateCQResult
	fds, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 8}, &cq)
	if err != nil {
		t.Fatal(err)
	}
	cqLayout, _ = shm.NewCQLayout(8)
	m, err := shm.MapShared(fds[0], 0, int64(cq.Size), unix.PROT_READ|unix.PROT_WRITE, 0)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmap() })
	fds, err = r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 4, MaxRecvWR: 4}, &qpRes)
	if err != nil {
		t.Fatal(err)
	}
	l, _ = shm.NewQPLayout(4, 4)
	qm, err := shm.MapShared(fds[0], 0, int64(qpRes.Size), unix.PROT_READ|unix.PROT_WRITE, 0)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qm.Unmap() })
	for _, st := range []struct {
		a    dataplane.QPAttr
		mask qp.AttrMask
	}{
		{dataplane.QPAttr{State: qp.Init, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{dataplane.QPAttr{State: qp.RTR, AV: dataplane.AddressVector{DGID: sim.B.Addr()}, PathMTU: qp.MTU1024, DestQPN: 0x10},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{dataplane.QPAttr{State: qp.RTS}, qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	} {
		if _, err := r.call(proto.OpModifyQP, proto.ModifyQPArgs{QP: qpRes.Handle, Attr: protoconv.FromQPAttr(&st.a), Mask: st.mask}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return qpRes, l, qm.Bytes, m.Bytes, cqLayout
}

func qpState(t *testing.T, r *rawClient, h uint32) qp.State {
	t.Helper()
	var a proto.QPAttr
	if _, err := r.call(proto.OpQueryQP, proto.Handle{Handle: h}, &a); err != nil {
		t.Fatal(err)
	}
	return a.State
}

// TestHostileRings: a malformed WQE written straight into the ring moves
// only that QP to ERR and completes as flushed under its WRID; a forged
// producer index does the same; the server pumps on for everyone else.
// A version-1 client (no doorbell file: the pump looks at all its QPs)
// and a version-2 one (which marks its QPs in the doorbell file, and
// then every slot there is) get the same treatment.
func TestHostileRings(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { hostileRings(t, version) })
	}
}

func hostileRings(t *testing.T, version int) {
	s, sim := newServer(t)
	r := dial(t, s)
	bells := r.hello(version)
	ring := func(slot uint32) {
		if bells.Valid() {
			bells.Ring(slot)
		}
	}
	q, l, rings, cqMem, cql := hostileQP(t, r, sim)
	sq := shm.NewProducer(l.SQ(rings))
	sq.Push(&qp.SendWR{WRID: 77, Opcode: qp.WRSend, NumSGE: 1000}) // the library would refuse this
	sq.Publish()
	ring(q.Bell)
	s.Pump()
	if st := qpState(t, r, q.Handle); st != qp.Err {
		t.Fatalf("QP in %v after a malformed WQE", st)
	}
	s.Pump()
	cq := shm.NewConsumer(cql.Ring(cqMem))
	if n, err := cq.Available(); err != nil || n != 1 || cq.At(0).WRID != 77 || cq.At(0).Status != qp.WCWRFlushErr {
		t.Fatalf("completion of the malformed WQE: %d %v %+v", n, err, *cq.At(0))
	}

	// A second QP whose producer index claims more than the ring holds.
	q2, _, rings2, _, _ := hostileQP(t, r, sim)
	binary.LittleEndian.PutUint32(rings2[shm.OffSQProd:], 1<<20)
	ring(q2.Bell)
	s.Pump()
	if st := qpState(t, r, q2.Handle); st != qp.Err {
		t.Fatalf("QP in %v after a forged index", st)
	}
	if o := s.Objects(); o.QPs != 2 || o.Clients != 1 {
		t.Fatalf("objects %+v", o)
	}
	// Pumping the broken QP again neither panics nor resurrects it; nor
	// do doorbell bits for every slot, most of them no QP's.
	s.Pump()
	for slot := range uint32(shm.BellSlots) {
		ring(slot)
	}
	s.BeforeWait()
	s.Pump()
	if st := qpState(t, r, q2.Handle); st != qp.Err {
		t.Fatalf("QP in %v after all doorbells", st)
	}
}

// TestPumpLooksAtRungQPs: with many QPs, a pump looks at the rings of the
// QPs whose doorbell bits were set, not at every QP: posting to one of
// 300 QPs costs one look. A version-1 client, which has no doorbell file,
// gets all its QPs looked at.
func TestPumpLooksAtRungQPs(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			s, _ := newServer(t)
			r := dial(t, s)
			bells := r.hello(version)
			var pd proto.Handle
			r.call(proto.OpAllocPD, nil, &pd)
			var cq proto.CreateCQResult
			fds, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 8}, &cq)
			proto.CloseFDs(fds)
			if err != nil {
				t.Fatal(err)
			}
			const n = 300
			var qps []proto.CreateQPResult
			for range n {
				var q proto.CreateQPResult
				fds, err := r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 1, MaxRecvWR: 1}, &q)
				proto.CloseFDs(fds)
				if err != nil {
					t.Fatal(err)
				}
				qps = append(qps, q)
			}
			s.Pump()
			want := 0
			if version < 2 {
				want = n
			}
			if s.looked != want {
				t.Fatalf("an idle pump looked at %d QPs, want %d", s.looked, want)
			}
			if version < 2 {
				return
			}
			bells.Ring(qps[n/2].Bell)
			s.Pump()
			if s.looked != 1 {
				t.Fatalf("a pump after one doorbell looked at %d QPs", s.looked)
			}
			// A destroyed QP's slot is reused by the next QP.
			if _, err := r.call(proto.OpDestroyQP, proto.Handle{Handle: qps[7].Handle}, nil); err != nil {
				t.Fatal(err)
			}
			var q proto.CreateQPResult
			fds, err = r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 1, MaxRecvWR: 1}, &q)
			proto.CloseFDs(fds)
			if err != nil || q.Bell != qps[7].Bell {
				t.Fatalf("new QP in slot %d, want the freed %d (%v)", q.Bell, qps[7].Bell, err)
			}
		})
	}
}

// TestCompChannelProtocol: completion channels are version 3: an older
// client is refused them; a CQ cannot name another connection's channel
// (or none); a channel a CQ uses is busy; the channel's eventfd comes
// with create_comp_channel and the pump writes it only for an armed CQ.
func TestCompChannelProtocol(t *testing.T) {
	s, _ := newServer(t)
	old := dial(t, s)
	old.hello(2)
	if _, err := old.call(proto.OpCreateCompChannel, nil, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("create_comp_channel from a version-2 client: %v", err)
	}
	r := dial(t, s)
	r.hello(proto.Version)
	var ch proto.Handle
	fds, err := r.call(proto.OpCreateCompChannel, nil, &ch)
	if err != nil || len(fds) != 1 {
		t.Fatalf("create_comp_channel: %v, %d descriptors", err, len(fds))
	}
	defer proto.CloseFDs(fds)
	if _, err := old.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 4, Channel: ch.Handle}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("CQ on another connection's channel: %v", err)
	}
	if _, err := old.call(proto.OpDestroyCompChannel, ch, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("destroying another connection's channel: %v", err)
	}
	if _, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 4, Channel: 999}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("CQ on no channel: %v", err)
	}
	var cq proto.CreateCQResult
	cqFDs, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 4, Channel: ch.Handle}, &cq)
	proto.CloseFDs(cqFDs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.call(proto.OpDestroyCompChannel, ch, nil); !errors.Is(err, dataplane.ErrBusy) {
		t.Fatalf("destroying a channel a CQ uses: %v", err)
	}
	if got := s.Objects(); got.Channels != 1 || got.CQs != 1 {
		t.Fatalf("server holds %+v", got)
	}
	if _, err := r.call(proto.OpDestroyCQ, proto.Handle{Handle: cq.Handle}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.call(proto.OpDestroyCompChannel, ch, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Objects(); got.Channels != 0 || got.CQs != 0 {
		t.Fatalf("server holds %+v", got)
	}
}

// TestRegMRAccessFlags: the daemon itself refuses what ibv_reg_mr
// refuses with EINVAL, for a client that skips the library's check:
// access bits softnic does not define, and remote write or atomic
// without local write. Nothing is registered; defined flags still work.
func TestRegMRAccessFlags(t *testing.T) {
	s, _ := newServer(t)
	r := dial(t, s)
	r.hello(proto.Version)
	var pd proto.Handle
	if _, err := r.call(proto.OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	fd, mem, err := shm.Create("region", 4096, shm.SealSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Munmap(mem)
	for _, access := range []qp.Access{
		0xffff,
		qp.AccessLocalWrite | 1<<4, // IBV_ACCESS_MW_BIND: softnic has no memory windows
		1 << 31,
		qp.AccessRemoteWrite,
		qp.AccessRemoteAtomic,
		qp.AccessRemoteRead | qp.AccessRemoteWrite,
	} {
		_, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096, Access: access}, nil, fd)
		if !errors.Is(err, dataplane.ErrBadAccess) {
			t.Errorf("reg_mr with access %#x: %v; want ErrBadAccess", uint32(access), err)
		}
	}
	if n := s.Objects().MRs; n != 0 {
		t.Fatalf("%d regions registered with refused flags", n)
	}
	for _, access := range []qp.Access{0, qp.AccessRemoteRead, qp.AccessDefined} {
		if _, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096, Access: access}, nil, fd); err != nil {
			t.Errorf("reg_mr with access %#x: %v", uint32(access), err)
		}
	}
}

// levelCounter is a slog handler that counts records by level.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
	// msgs are the messages of records at Info or above.
	msgs []string
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelCounter) WithGroup(string) slog.Handler            { return h }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Level]++
	if r.Level >= slog.LevelInfo {
		h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	}
	return nil
}

// TestConnectionLogQuiet: a client that connects in a loop cannot flood
// the daemon's log at its default level: a well-behaved connection
// (hello, an object, close) logs nothing at Info or above, only at
// Debug.
func TestConnectionLogQuiet(t *testing.T) {
	h := &levelCounter{n: map[slog.Level]int{}}
	s, _ := newServerLog(t, slog.New(h))
	const cycles = 50
	for range cycles {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: s.SocketPath(), Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		r := &rawClient{t: t, c: proto.NewConn(c)}
		r.hello(proto.Version)
		if _, err := r.call(proto.OpAllocPD, nil, nil); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Close waits for every connection's goroutine, whose teardown
	// (and its log line) runs before it ends.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) != 0 {
		t.Errorf("%d records at Info or above over %d connections, e.g. %q", len(h.msgs), cycles, h.msgs[0])
	}
	if h.n[slog.LevelDebug] < 2*cycles {
		t.Errorf("%d Debug records over %d connections; want connect and teardown of each", h.n[slog.LevelDebug], cycles)
	}
}
