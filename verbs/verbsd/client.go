package verbsd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// client is one connection and everything it created. Its maps are
// guarded by Server.mu; handles are per connection, so no other client
// can name these objects.
type client struct {
	id    uint64
	uid   uint32 // SO_PEERCRED, for the per-uid connection limit
	conn  *proto.Conn
	log   *slog.Logger
	bell  *os.File // doorbell eventfd relayed by a goroutine; nil when watched
	bfd   int      // the doorbell's descriptor (SCM_RIGHTS; the client holds a duplicate)
	hello bool
	vers  int // protocol version announced at hello

	// bells is the client's doorbell file (protocol version 2): the
	// pump looks only at the QPs whose bits the client set. A version-1
	// client has none, and the pump looks at all its QPs every round.
	bells    shm.Bells
	bellsMem shm.Mapping
	slots    []*qpObj // by doorbell slot; nil: free
	free     []uint32 // free slots below len(slots)

	next uint32
	pds  map[uint32]*pdObj
	mrs  map[uint32]*mrObj
	cqs  map[uint32]*cqObj
	qps  map[uint32]*qpObj
	chs  map[uint32]*chanObj
	ahs  map[uint32]*ahObj // address handles (ud.go); nil until the first

	// ringBytes and mrBytes are what the connection holds against
	// Limits.RingBytes and Limits.MRBytes (Server.mu).
	ringBytes, mrBytes int64

	ext clientExt             // SRQs and asynchronous events (srq.go)
	cm  map[uint32]*cmChanObj // CM channels (cm.go); nil until the first is made
}

// chanObj is a client's completion channel (version 3): an eventfd the
// client holds a duplicate of. The pump writes it when a CQ of the
// channel that the client armed gets a qualifying completion.
type chanObj struct {
	h     uint32
	fd    int
	users int // CQs using it
}

type pdObj struct {
	h  uint32
	id uint32 // the engine's PD
}

type mrObj struct {
	h    uint32
	pd   *pdObj
	m    *dataplane.MR
	mem  shm.Mapping
	size int64 // counted in client.mrBytes
}

// handle returns a fresh handle (Server.mu held). Handles are never
// reused within a connection, so a stale handle cannot name a new object.
func (c *client) handle() uint32 {
	c.next++
	return c.next
}

// start checks the peer, makes its doorbell and starts its goroutines.
func (s *Server) start(conn *net.UnixConn) error {
	cred, err := peerCred(conn)
	if err != nil {
		return err
	}
	// The per-uid connection limit, counted before anything is made.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("server closed")
	}
	if n := s.perUID[cred.Uid]; s.lim.ConnsPerUID >= 0 && n >= s.lim.ConnsPerUID {
		s.mu.Unlock()
		s.connRefusals.Add(1)
		err := fmt.Errorf("%w: %d connections per uid (softnic run --max-conns-per-uid)", proto.ErrLimit, s.lim.ConnsPerUID)
		s.refuseLog.warn(s.log, time.Second, "verbs client refused", "pid", cred.Pid, "uid", cred.Uid, "err", err)
		s.refuse(conn, err)
		return nil
	}
	s.perUID[cred.Uid]++
	s.mu.Unlock()
	id := s.nextClient.Add(1)
	log := s.log.With("client", id, "pid", cred.Pid, "uid", cred.Uid, "gid", cred.Gid)
	// One eventfd per client: a client that reads its own doorbell (and
	// so swallows wakeups) delays only itself.
	bfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		s.mu.Lock()
		s.unUID(cred.Uid)
		s.mu.Unlock()
		return fmt.Errorf("doorbell eventfd: %w", err)
	}
	c := &client{
		id: id, uid: cred.Uid, conn: proto.NewConn(conn), log: log, bfd: bfd,
		pds: map[uint32]*pdObj{}, mrs: map[uint32]*mrObj{}, cqs: map[uint32]*cqObj{}, qps: map[uint32]*qpObj{}, chs: map[uint32]*chanObj{},
	}
	c.initExt()
	// The poll loop watches the doorbell itself where it can (one hop
	// from the client's ring to the loop); else a goroutine relays it.
	if s.o.Watch == nil || s.o.Watch(bfd) != nil {
		c.bell = os.NewFile(uintptr(bfd), "softnic-doorbell")
	}
	s.mu.Lock()
	if s.closed {
		s.unUID(cred.Uid)
		s.mu.Unlock()
		c.closeBell(s)
		return errors.New("server closed")
	}
	s.clients[c] = struct{}{}
	s.wg.Add(1)
	if c.bell != nil {
		s.wg.Add(1)
		go s.doorbell(c)
	}
	s.mu.Unlock()
	log.Debug("verbs client connected")
	go s.serveClient(c)
	return nil
}

// unUID forgets one connection of uid (Server.mu held).
func (s *Server) unUID(uid uint32) {
	if s.perUID[uid]--; s.perUID[uid] <= 0 {
		delete(s.perUID, uid)
	}
}

// maxRefusing bounds the refused connections being answered at once;
// beyond it a refused connection is closed without a reply.
const maxRefusing = 64

// refuse answers a refused connection's first request (its hello) with
// err, then closes it: the client's Dial then fails with an error naming
// the limit rather than with a bare hang-up. The answer waits at most a
// second for the request, in its own goroutine, so that a silent client
// holds neither the accept loop nor a descriptor for long.
func (s *Server) refuse(conn *net.UnixConn, err error) {
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		conn.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(time.Second))
		pc := proto.NewConn(conn)
		var req proto.Request
		fds, rerr := pc.Recv(&req)
		proto.CloseFDs(fds)
		if rerr != nil {
			return
		}
		pc.Send(proto.Response{ID: req.ID, Error: protoconv.EncodeError(err)})
	}()
}

// closeBell closes c's doorbell (ending its relay goroutine, if any).
func (c *client) closeBell(s *Server) {
	if c.bell != nil {
		c.bell.Close()
		return
	}
	if s.o.Unwatch != nil {
		s.o.Unwatch(c.bfd)
	}
	unix.Close(c.bfd)
}

// peerCred is the connecting process's credentials (SO_PEERCRED), for
// the log: the socket's mode decides who may connect at all.
func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}

// doorbell waits on the client's eventfd (parked in the runtime's poller,
// not spinning) and wakes the poll loop each time the client rings.
func (s *Server) doorbell(c *client) {
	defer s.wg.Done()
	var b [8]byte
	for {
		if _, err := c.bell.Read(b[:]); err != nil {
			return
		}
		s.wake()
	}
}

// serveClient answers c's requests in order until the connection ends,
// then tears down everything c created.
func (s *Server) serveClient(c *client) {
	defer s.wg.Done()
	defer s.drop(c)
	for {
		var req proto.Request
		fds, err := c.conn.Recv(&req)
		if err != nil {
			proto.CloseFDs(fds)
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Info("verbs client connection error", "err", err)
			}
			return
		}
		res, out, err := s.handle(c, &req, fds)
		// Received descriptors are used (mapped) inside handle; the
		// mapping outlives the descriptor.
		proto.CloseFDs(fds)
		resp := proto.Response{ID: req.ID}
		if err != nil {
			resp.Error = protoconv.EncodeError(err)
		} else if res != nil {
			if resp.Result, err = json.Marshal(res); err != nil {
				resp.Error = protoconv.EncodeError(err)
			}
		}
		var send []int
		if resp.Error == nil {
			send = out.fds
		}
		err = c.conn.Send(resp, send...)
		proto.CloseFDs(out.owned)
		if err != nil {
			c.log.Info("verbs client: reply failed", "err", err)
			return
		}
		if out.hangUp {
			return
		}
	}
}

// reply is what a handler sends besides its result: descriptors to pass,
// of which owned are closed once sent.
type reply struct {
	fds    []int
	owned  []int
	hangUp bool
}

// handle runs one request.
func (s *Server) handle(c *client, req *proto.Request, fds []int) (any, reply, error) {
	if req.Op != proto.OpHello && !c.hello {
		return nil, reply{}, fmt.Errorf("%w: %s before hello", proto.ErrProtocol, req.Op)
	}
	args := func(v any) error {
		if err := json.Unmarshal(req.Args, v); err != nil {
			return fmt.Errorf("%w: %s arguments: %v", proto.ErrProtocol, req.Op, err)
		}
		return nil
	}
	var h proto.Handle
	switch req.Op {
	case proto.OpHello:
		var a proto.HelloArgs
		if err := args(&a); err != nil {
			return nil, reply{hangUp: true}, err
		}
		return s.hello(c, a)
	case proto.OpQueryDevice:
		return protoconv.DeviceOf(s.e, s.o.Name), reply{}, nil
	case proto.OpStats:
		return s.stats(), reply{}, nil
	case proto.OpAllocPD:
		return s.allocPD(c)
	case proto.OpRegMR:
		var a proto.RegMRArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		if len(fds) != 1 {
			return nil, reply{}, fmt.Errorf("%w: reg_mr needs one memfd, got %d descriptors", proto.ErrProtocol, len(fds))
		}
		return s.regMR(c, a, fds[0])
	case proto.OpCreateCQ:
		var a proto.CreateCQArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.createCQ(c, a)
	case proto.OpCreateQP:
		var a proto.CreateQPArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.createQP(c, a)
	case proto.OpModifyQP:
		var a proto.ModifyQPArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return nil, reply{}, s.modifyQP(c, a)
	case proto.OpSetQPScheme:
		var a proto.SetQPSchemeArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.setQPScheme(c, a)
	case proto.OpCreateCompChannel:
		if c.vers < 3 {
			return nil, reply{}, fmt.Errorf("%w: %s needs protocol version 3", proto.ErrProtocol, req.Op)
		}
		return s.createCompChannel(c)
	case proto.OpNetem, proto.OpSetNetem:
		if c.vers < 4 {
			return nil, reply{}, fmt.Errorf("%w: %s needs protocol version 4", proto.ErrProtocol, req.Op)
		}
		if req.Op == proto.OpNetem {
			return proto.NetemResult{Spec: s.e.Netem().String()}, reply{}, nil
		}
		var a proto.NetemArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.setNetem(c, a)
	case proto.OpCapture:
		var a proto.CaptureArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.startCapture(c, a)
	case proto.OpCaptureStop:
		return s.captureStop(c)
	case proto.OpStarTable:
		if c.vers < 5 {
			return nil, reply{}, fmt.Errorf("%w: %s needs protocol version 5", proto.ErrProtocol, req.Op)
		}
		if err := args(&h); err != nil {
			return nil, reply{}, err
		}
		return s.starTable(c, h.Handle)
	case proto.OpCreateAH, proto.OpDestroyAH:
		if c.vers < 6 {
			return nil, reply{}, fmt.Errorf("%w: %s needs protocol version 6", proto.ErrProtocol, req.Op)
		}
		if req.Op == proto.OpDestroyAH {
			if err := args(&h); err != nil {
				return nil, reply{}, err
			}
			return nil, reply{}, s.destroyAH(c, h.Handle)
		}
		var a proto.CreateAHArgs
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		return s.createAH(c, a)
	case proto.OpCMCreateChannel, proto.OpCMDestroyChannel, proto.OpCMGetEvents, proto.OpCMListen, proto.OpCMUnlisten,
		proto.OpCMConnect, proto.OpCMAccept, proto.OpCMReject, proto.OpCMRTU, proto.OpCMEstablished,
		proto.OpCMDisconnect, proto.OpCMDestroy, proto.OpCMInfo, proto.OpCMSIDRResolve, proto.OpCMSIDRReply:
		return s.cmOp(c, req.Op, req.Args)
	case proto.OpQueryQP, proto.OpDeallocPD, proto.OpDeregMR, proto.OpDestroyCQ, proto.OpDestroyQP, proto.OpDestroyCompChannel:
		if err := args(&h); err != nil {
			return nil, reply{}, err
		}
	default:
		if res, out, err, ok := s.handleExt(c, req, args); ok {
			return res, out, err
		}
		return nil, reply{}, fmt.Errorf("%w: unknown operation %q", proto.ErrProtocol, req.Op)
	}
	switch req.Op {
	case proto.OpQueryQP:
		return s.queryQP(c, h.Handle)
	case proto.OpDeallocPD:
		return nil, reply{}, s.deallocPD(c, h.Handle)
	case proto.OpDeregMR:
		return nil, reply{}, s.deregMR(c, h.Handle)
	case proto.OpDestroyCQ:
		return nil, reply{}, s.destroyCQ(c, h.Handle)
	case proto.OpDestroyCompChannel:
		return nil, reply{}, s.destroyCompChannel(c, h.Handle)
	default: // proto.OpDestroyQP
		return nil, reply{}, s.destroyQP(c, h.Handle)
	}
}

func (s *Server) hello(c *client, a proto.HelloArgs) (any, reply, error) {
	if a.Version < proto.MinVersion || a.Version > proto.Version {
		return nil, reply{hangUp: true}, fmt.Errorf("%w: client speaks version %d, daemon %d to %d", proto.ErrProtocol, a.Version, proto.MinVersion, proto.Version)
	}
	if a.ABI != s.abi {
		return nil, reply{hangUp: true}, fmt.Errorf("%w: client's work request layout %#x differs from the daemon's %#x (rebuild the client against this softnic)", proto.ErrProtocol, a.ABI, s.abi)
	}
	if c.hello {
		return nil, reply{}, fmt.Errorf("%w: second hello", proto.ErrProtocol)
	}
	res := proto.HelloResult{Device: protoconv.DeviceOf(s.e, s.o.Name), Client: c.id}
	c.vers = a.Version
	if a.Version < 2 {
		c.hello = true
		return res, reply{fds: []int{s.devFD, c.bfd}}, nil
	}
	fd, mem, err := shm.Create("softnic-bells", shm.BellFileLen, shm.SealAll)
	if err != nil {
		return nil, reply{hangUp: true}, err
	}
	shm.InitBells(mem)
	s.mu.Lock()
	c.bells, c.bellsMem = shm.MapBells(mem), shm.Mapping{Mem: mem, Bytes: mem}
	s.mu.Unlock()
	c.hello = true
	return res, reply{fds: []int{s.devFD, c.bfd, fd}, owned: []int{fd}}, nil
}

func (s *Server) stats() proto.StatsResult {
	var res proto.StatsResult
	if !s.o.CountersOnly {
		res.Counters = protoconv.CountersOf(s.e)
	}
	if s.o.Counters != nil {
		s.o.Counters(func(name string, v uint64) {
			res.Counters = append(res.Counters, proto.Counter{Name: name, Value: v})
		})
	}
	return res
}

func (s *Server) allocPD(c *client) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.count(len(c.pds), s.lim.PDs, "PDs", "max-pds"); err != nil {
		return nil, reply{}, err
	}
	pd := &pdObj{h: c.handle(), id: s.e.AllocPD()}
	c.pds[pd.h] = pd
	return proto.Handle{Handle: pd.h}, reply{}, nil
}

func (s *Server) deallocPD(c *client, h uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := c.pds[h]
	if pd == nil {
		return badHandle("PD", h)
	}
	if err := s.e.DeallocPD(pd.id); err != nil {
		return err
	}
	delete(c.pds, h)
	return nil
}

func badHandle(kind string, h uint32) error {
	return fmt.Errorf("%w: %s handle %d", proto.ErrBadHandle, kind, h)
}

// regMR maps the client's memfd (which must be sealed against shrinking:
// otherwise the client could truncate it and crash the daemon with
// SIGBUS) and registers the pages under the client's address.
func (s *Server) regMR(c *client, a proto.RegMRArgs, fd int) (any, reply, error) {
	if a.Addr == 0 || a.Addr+uint64(a.Length) < a.Addr {
		return nil, reply{}, fmt.Errorf("%w: region address %#x length %d", proto.ErrProtocol, a.Addr, a.Length)
	}
	if a.Length == 0 {
		return nil, reply{}, dataplane.ErrEmptyMR
	}
	// The client library checks the flags too, but a client need not use
	// it; refuse before mapping anything.
	if err := dataplane.CheckAccess(a.Access); err != nil {
		return nil, reply{}, err
	}
	s.mu.Lock()
	err := s.count(len(c.mrs), s.lim.MRs, "MRs", "max-mrs")
	if err == nil {
		err = s.bytes(c.mrBytes, a.Length, s.lim.MRBytes, "registered memory", "max-mr-bytes")
	}
	s.mu.Unlock()
	if err != nil {
		return nil, reply{}, err
	}
	mem, err := shm.MapShared(fd, a.Offset, a.Length, unix.PROT_READ|unix.PROT_WRITE, unix.F_SEAL_SHRINK)
	if err != nil {
		return nil, reply{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := c.pds[a.PD]
	if pd == nil {
		mem.Unmap()
		return nil, reply{}, badHandle("PD", a.PD)
	}
	m, err := s.e.RegMR(pd.id, mem.Bytes, a.Addr, a.Access)
	if err != nil {
		mem.Unmap()
		return nil, reply{}, err
	}
	mr := &mrObj{h: c.handle(), pd: pd, m: m, mem: mem, size: a.Length}
	c.mrs[mr.h] = mr
	c.mrBytes += mr.size
	return proto.RegMRResult{Handle: mr.h, LKey: m.LKey, RKey: m.RKey}, reply{}, nil
}

// deregMR: once the engine forgot the region (under its lock) nothing
// references the pages, and they can be unmapped.
func (s *Server) deregMR(c *client, h uint32) error {
	s.mu.Lock()
	mr := c.mrs[h]
	if mr == nil {
		s.mu.Unlock()
		return badHandle("MR", h)
	}
	err := s.e.DeregMR(mr.m)
	if err == nil {
		delete(c.mrs, h)
		c.mrBytes -= mr.size
	}
	s.mu.Unlock()
	if err == nil {
		mr.mem.Unmap()
	}
	return err
}

// createCompChannel makes a completion channel's eventfd; the daemon
// keeps its descriptor (the pump writes it) and passes a duplicate.
func (s *Server) createCompChannel(c *client) (any, reply, error) {
	s.mu.Lock()
	err := s.count(len(c.chs), s.lim.Channels, "completion channels", "max-channels")
	s.mu.Unlock()
	if err != nil {
		return nil, reply{}, err
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, reply{}, fmt.Errorf("completion channel eventfd: %w", err)
	}
	s.mu.Lock()
	ch := &chanObj{h: c.handle(), fd: fd}
	c.chs[ch.h] = ch
	s.mu.Unlock()
	return proto.Handle{Handle: ch.h}, reply{fds: []int{fd}}, nil
}

func (s *Server) destroyCompChannel(c *client, h uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := c.chs[h]
	if ch == nil {
		return badHandle("completion channel", h)
	}
	if ch.users > 0 {
		return fmt.Errorf("%w: completion channel is used by %d CQs", dataplane.ErrBusy, ch.users)
	}
	delete(c.chs, h)
	unix.Close(ch.fd) // the pump writes it only under s.mu, for a CQ that uses it
	return nil
}

func (s *Server) createCQ(c *client, a proto.CreateCQArgs) (any, reply, error) {
	var ch *chanObj
	if a.Channel != 0 {
		s.mu.Lock()
		if ch = c.chs[a.Channel]; ch != nil {
			ch.users++ // pinned while the CQ is made
		}
		s.mu.Unlock()
		if ch == nil {
			return nil, reply{}, badHandle("completion channel", a.Channel)
		}
	}
	res, out, err := s.createCQChan(c, a, ch)
	if err != nil && ch != nil {
		s.mu.Lock()
		ch.users--
		s.mu.Unlock()
	}
	return res, out, err
}

func (s *Server) createCQChan(c *client, a proto.CreateCQArgs, ch *chanObj) (any, reply, error) {
	// The limits first, before the engine allocates its ring: the cost is
	// the ring file and the engine's ring behind it, reserved now and
	// given back if the CQ is not made after all. A depth the engine
	// refuses has no layout and is refused by the engine below.
	l, lerr := shm.NewCQLayout(a.CQE)
	var cost int64
	s.mu.Lock()
	err := s.count(len(c.cqs), s.lim.CQs, "CQs", "max-cqs")
	if err == nil && lerr == nil {
		cost = int64(l.Size) + dataplane.CQBytes(a.CQE)
		err = s.reserveRings(c, cost)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, reply{}, err
	}
	fail := func(ecq *dataplane.CQ, err error) (any, reply, error) {
		if ecq != nil {
			s.e.DestroyCQ(ecq)
		}
		s.mu.Lock()
		s.releaseRings(c, cost)
		s.mu.Unlock()
		return nil, reply{}, err
	}
	ecq, err := s.e.CreateCQ(a.CQE, nil)
	if err != nil {
		return fail(nil, err)
	}
	if lerr != nil {
		return fail(ecq, lerr)
	}
	fd, mem, err := shm.Create("softnic-cq", l.Size, shm.SealAll)
	if err != nil {
		return fail(ecq, err)
	}
	l.Init(mem)
	cq := &cqObj{owner: c, ecq: ecq, cost: cost, mem: shm.Mapping{Mem: mem, Bytes: mem}, ring: shm.NewProducer(l.Ring(mem)), layout: l,
		ch: ch, notify: l.Notify(mem)}
	s.mu.Lock()
	cq.h = c.handle()
	c.cqs[cq.h] = cq
	s.cqs = append(s.cqs, cq)
	s.mu.Unlock()
	return proto.CreateCQResult{Handle: cq.h, Cap: l.Cap, Size: l.Size}, reply{fds: []int{fd}, owned: []int{fd}}, nil
}

func (s *Server) destroyCQ(c *client, h uint32) error {
	s.mu.Lock()
	cq := c.cqs[h]
	if cq == nil {
		s.mu.Unlock()
		return badHandle("CQ", h)
	}
	if cq.users > 0 {
		s.mu.Unlock()
		return fmt.Errorf("%w: completion queue is used by %d QP queues", dataplane.ErrBusy, cq.users)
	}
	// Nothing uses it (no QP, so the engine adds no completion): its
	// engine ring goes (unmapped at once if deep).
	if err := s.e.DestroyCQ(cq.ecq); err != nil {
		s.mu.Unlock()
		return err
	}
	delete(c.cqs, h)
	s.releaseRings(c, cq.cost)
	s.cqs = remove(s.cqs, cq)
	if cq.ch != nil {
		cq.ch.users--
	}
	s.mu.Unlock()
	cq.mem.Unmap()
	return nil
}

func (s *Server) createQP(c *client, a proto.CreateQPArgs) (any, reply, error) {
	// The engine validates the queue sizes first; the rings match them.
	s.mu.Lock()
	pd, scq, rcq := c.pds[a.PD], c.cqs[a.SendCQ], c.cqs[a.RecvCQ]
	var err error
	switch {
	case pd == nil:
		err = badHandle("PD", a.PD)
	case scq == nil:
		err = badHandle("CQ", a.SendCQ)
	case rcq == nil:
		err = badHandle("CQ", a.RecvCQ)
	}
	if err == nil {
		err = dataplane.CheckScheme(a.Scheme)
	}
	var srq *dataplane.SRQ
	if err == nil {
		srq, err = c.srqOf(a.SRQ)
	}
	if err == nil && a.Star != 0 && c.vers < 5 {
		err = fmt.Errorf("%w: a StaR role needs protocol version 5", proto.ErrProtocol)
	}
	if err == nil && a.Type != 0 && c.vers < 6 {
		err = fmt.Errorf("%w: a QP type needs protocol version 6", proto.ErrProtocol)
	}
	if err == nil && len(c.free) == 0 && len(c.slots) >= shm.BellSlots {
		err = fmt.Errorf("verbsd: a connection has at most %d QPs", shm.BellSlots)
	}
	if err == nil {
		err = s.count(len(c.qps), s.lim.QPs, "QPs", "max-qps")
	}
	// The rings' cost, if the sizes make rings at all (else the engine
	// refuses them below), checked before the engine creates anything:
	// the ring file and the engine's own send and receive queues.
	var cost int64
	if l, lerr := shm.NewQPLayout(a.MaxSendWR, a.MaxRecvWR); err == nil && lerr == nil {
		cost = int64(l.Size) + dataplane.QueueBytes(a.MaxSendWR, a.MaxRecvWR)
		err = s.reserveRings(c, cost)
		if err != nil {
			cost = 0 // nothing reserved
		}
	}
	var eq *dataplane.QP
	if err == nil {
		eq, err = s.e.CreateQP(pd.id, dataplane.QPInitAttr{SendCQ: scq.ecq, RecvCQ: rcq.ecq,
			MaxSendWR: a.MaxSendWR, MaxRecvWR: a.MaxRecvWR, SigAll: a.SigAll, Scheme: a.Scheme, CC: a.CC, Star: dataplane.StarRole(a.Star),
			MaxUnackedPSNs: a.MaxUnackedPSNs, Type: qp.QPType(a.Type), SRQ: srq})
	}
	if err != nil && cost > 0 {
		s.releaseRings(c, cost)
	}
	if err == nil {
		scq.users++ // pinned now, so that the CQs outlive the unlocked stretch
		rcq.users++
	}
	s.mu.Unlock()
	if err != nil {
		return nil, reply{}, err
	}
	l, err := shm.NewQPLayout(a.MaxSendWR, a.MaxRecvWR)
	var fd int
	var mem []byte
	if err == nil {
		fd, mem, err = shm.Create("softnic-qp", l.Size, shm.SealAll)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		scq.users--
		rcq.users--
		s.e.DestroyQP(eq)
		s.releaseRings(c, cost)
		return nil, reply{}, err
	}
	l.Init(mem)
	q := &qpObj{h: c.handle(), owner: c, pd: pd, cost: cost, eq: eq, sendCQ: scq, recvCQ: rcq, sigAll: a.SigAll,
		mem: shm.Mapping{Mem: mem, Bytes: mem}, sq: shm.NewConsumer(l.SQ(mem)), rq: shm.NewConsumer(l.RQ(mem))}
	if n := len(c.free); n > 0 {
		q.slot, c.free = c.free[n-1], c.free[:n-1]
		c.slots[q.slot] = q
	} else {
		q.slot = uint32(len(c.slots))
		c.slots = append(c.slots, q)
	}
	c.qps[q.h] = q
	s.qps = append(s.qps, q)
	s.byQPN[eq.QPN()] = q
	res := proto.CreateQPResult{Handle: q.h, QPN: eq.QPN(), SQCap: l.SQCap, RQCap: l.RQCap, Size: l.Size,
		Scheme: s.e.QPScheme(eq), Bell: q.slot}
	if qp.QPType(a.Type).IsUD() {
		res.UDMTU = s.e.PortMTU().Bytes()
	}
	return res, reply{fds: []int{fd}, owned: []int{fd}}, nil
}

// setQPScheme changes a QP's loss recovery (RESET or INIT only; the
// engine checks). Work the client published first moves into the engine,
// as for a modify.
func (s *Server) setQPScheme(c *client, a proto.SetQPSchemeArgs) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := c.qps[a.QP]
	if q == nil {
		return nil, reply{}, badHandle("QP", a.QP)
	}
	s.pumpQP(q)
	err := s.e.SetQPScheme(q.eq, a.Scheme)
	s.retire(q)
	if err != nil {
		return nil, reply{}, err
	}
	return proto.SchemeResult{Scheme: s.e.QPScheme(q.eq)}, reply{}, nil
}

// modifyQP first moves what the client already published into the
// engine, so that work posted before the modify is ordered before it (a
// RESET discards it, an ERR flushes it), then publishes what the modify
// retired.
func (s *Server) modifyQP(c *client, a proto.ModifyQPArgs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := c.qps[a.QP]
	if q == nil {
		return badHandle("QP", a.QP)
	}
	s.pumpQP(q)
	attr := protoconv.ToQPAttr(&a.Attr)
	err := s.e.ModifyQP(q.eq, &attr, a.Mask)
	s.retire(q)
	return err
}

func (s *Server) queryQP(c *client, h uint32) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := c.qps[h]
	if q == nil {
		return nil, reply{}, badHandle("QP", h)
	}
	a := s.e.QueryQP(q.eq)
	return protoconv.FromQPAttr(&a), reply{}, nil
}

func (s *Server) destroyQP(c *client, h uint32) error {
	s.mu.Lock()
	q := c.qps[h]
	if q == nil {
		s.mu.Unlock()
		return badHandle("QP", h)
	}
	err := s.destroyQPLocked(q)
	s.mu.Unlock()
	if err == nil {
		q.mem.Unmap()
	}
	return err
}

// destroyQPLocked takes q out of the pump and the engine (s.mu held).
func (s *Server) destroyQPLocked(q *qpObj) error {
	if err := s.e.DestroyQP(q.eq); err != nil {
		return err
	}
	delete(q.owner.qps, q.h)
	s.releaseRings(q.owner, q.cost)
	s.qps = remove(s.qps, q)
	delete(s.byQPN, q.eq.QPN())
	q.owner.slots[q.slot] = nil
	q.owner.free = append(q.owner.free, q.slot)
	if q.pending {
		s.pending = remove(s.pending, q)
	}
	if q.watched {
		s.watch = remove(s.watch, q)
	}
	q.sendCQ.users--
	q.recvCQ.users--
	return nil
}

// drop tears down everything c created, in dependency order: QPs (moved
// to ERR first, which stops their timers and flushes their queues, then
// destroyed), MRs, CQs, PDs. Unmapping waits until nothing (engine or
// pump) can reach the memory; c leaves s.clients last, so that a count of
// no clients means their memory is released.
func (s *Server) drop(c *client) {
	s.stopCapture(c)
	c.closeBell(s)
	c.conn.C.Close()
	s.dropCM(c) // DREQs for its connections, while their QPs still exist
	s.mu.Lock()
	held := c.ringBytes
	var maps []shm.Mapping
	n := struct{ qps, mrs, cqs, pds int }{len(c.qps), len(c.mrs), len(c.cqs), len(c.pds)}
	errAttr := dataplane.QPAttr{State: qp.Err}
	for _, q := range c.qps {
		s.e.ModifyQP(q.eq, &errAttr, qp.AttrState)
		if err := s.destroyQPLocked(q); err != nil {
			c.log.Warn("destroy QP", "qp", q.h, "err", err)
		}
		maps = append(maps, q.mem)
	}
	for h, mr := range c.mrs {
		if err := s.e.DeregMR(mr.m); err != nil {
			c.log.Warn("deregister MR", "mr", h, "err", err)
		}
		maps = append(maps, mr.mem)
		delete(c.mrs, h)
		c.mrBytes -= mr.size
	}
	for h, cq := range c.cqs {
		// Its QPs are gone: nothing uses the engine's ring any more.
		if err := s.e.DestroyCQ(cq.ecq); err != nil {
			c.log.Warn("destroy CQ", "cq", h, "err", err)
		}
		s.cqs = remove(s.cqs, cq)
		maps = append(maps, cq.mem)
		delete(c.cqs, h)
		s.releaseRings(c, cq.cost)
	}
	for h, ch := range c.chs {
		unix.Close(ch.fd) // no CQ of c is left for the pump to signal it
		delete(c.chs, h)
	}
	s.dropAHs(c) // after the QPs that send through them, before their PDs
	maps = append(maps, s.dropExt(c)...)
	for h, pd := range c.pds {
		if err := s.e.DeallocPD(pd.id); err != nil {
			c.log.Warn("deallocate PD", "pd", h, "err", err)
		}
		delete(c.pds, h)
	}
	if c.bells.Valid() {
		maps = append(maps, c.bellsMem)
		c.bells = shm.Bells{}
	}
	s.mu.Unlock()
	for i := range maps {
		maps[i].Unmap()
	}
	// The client counts (Objects, the per-uid limit) until its memory
	// is unmapped.
	s.mu.Lock()
	delete(s.clients, c)
	s.unUID(c.uid)
	idle := len(s.clients) == 0
	s.mu.Unlock()
	c.log.Debug("verbs client gone; its objects are destroyed", "qps", n.qps, "mrs", n.mrs, "cqs", n.cqs, "pds", n.pds)
	// A large client's heap, and everything once the last client has
	// gone, goes back to the system (returnMemoryBytes).
	if held >= returnMemoryBytes || idle {
		s.memReturn.request()
	}
}

func remove[T comparable](s []T, v T) []T {
	for i := range s {
		if s[i] == v {
			s[i] = s[len(s)-1]
			s[len(s)-1] = *new(T)
			return s[:len(s)-1]
		}
	}
	return s
}
