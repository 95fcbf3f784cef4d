package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// Dial opens the softnic device served by the daemon listening on
// socketPath (its verbs server, package verbsd). The Context behaves as
// an embedded one; in addition, memory to register must come from
// AllocBuf, and Close releases everything the daemon holds for it.
//
// When the socket cannot be connected to, the error says why in one line
// (no daemon listening there, or permission denied and who may connect)
// and wraps the connect error.
func Dial(socketPath string) (*Context, error) {
	abi, err := shm.Fingerprint()
	if err != nil {
		return nil, err
	}
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socketPath, Net: "unixpacket"})
	if err != nil {
		return nil, explainDial(socketPath, err)
	}
	r := &remote{conn: proto.NewConn(conn), bell: -1, bufs: map[*byte]*sharedBuf{}}
	r.mrs.Store(&map[uint32]mrCheck{})
	var hello proto.HelloResult
	fds, err := r.call(proto.OpHello, proto.HelloArgs{Version: proto.Version, ABI: abi}, nil, &hello)
	if err == nil && len(fds) != 3 {
		err = fmt.Errorf("%w: hello carried %d descriptors, want 3", proto.ErrProtocol, len(fds))
	}
	if err == nil {
		r.dev = deviceAttr(hello.Device)
		r.devPage, err = shm.MapShared(fds[0], 0, shm.DevicePageLen, unix.PROT_READ, 0)
		if err == nil {
			if err = shm.CheckDevicePage(r.devPage.Bytes); err != nil {
				r.devPage.Unmap()
			}
		}
	}
	if err == nil {
		r.bellsMem, err = shm.MapShared(fds[2], 0, int64(shm.BellFileLen), unix.PROT_READ|unix.PROT_WRITE, shm.SealSize)
		if err == nil {
			if err = shm.CheckBells(r.bellsMem.Bytes); err != nil {
				r.bellsMem.Unmap()
			}
		}
		if err != nil {
			r.devPage.Unmap()
		}
	}
	if err != nil {
		proto.CloseFDs(fds)
		conn.Close()
		return nil, err
	}
	unix.Close(fds[0]) // the mappings keep the pages
	unix.Close(fds[2])
	r.bells = shm.MapBells(r.bellsMem.Bytes)
	r.bell = fds[1]
	r.needWakeup = shm.NeedWakeup(r.devPage.Bytes)
	return &Context{b: r, remote: r}, nil
}

// remote is the backend of a daemon context.
type remote struct {
	dev DeviceAttr

	callMu sync.Mutex // one RPC at a time: the protocol has no multiplexing
	conn   *proto.Conn
	nextID uint64
	closed bool

	devPage    shm.Mapping
	needWakeup *atomic.Uint32 // in the read-only device page
	bell       int            // doorbell eventfd
	bells      shm.Bells      // per-QP doorbell bits the daemon's pump looks at
	bellsMem   shm.Mapping
	rung       atomic.Uint64 // doorbells rung, for tests

	mu   sync.Mutex // bufs, MR table writes, live rings
	bufs map[*byte]*sharedBuf
	qps  []*qpRing
	cqs  []*cqRing
	chs  []*CompChannel
	// mrs is the registered regions by lkey, copy-on-write so that
	// PostRecv reads it without a lock.
	mrs atomic.Pointer[map[uint32]mrCheck]
	// ahs is the live address handles, the engine's number to the PD
	// handle, copy-on-write so that PostSend reads it without a lock
	// (ud.go); nil until the first AH.
	ahs atomic.Pointer[map[uint32]uint32]

	cmChs []*CMChannel // CM channels (cm.go; r.mu)
}

// sharedBuf is one AllocBuf allocation: a sealed memfd mapped here.
type sharedBuf struct {
	fd  int
	mem []byte
	mrs int // regions registered in it
	// fixed: mapped by ShareMemory over memory the process owns; FreeBuf
	// does not unmap it.
	fixed bool
}

// mrCheck is what the client needs to check a receive SGE as the engine
// would: the region's PD, range and access.
type mrCheck struct {
	pd     uint32
	addr   uint64
	length uint64
	access Access
}

var doorbellValue = [8]byte{1} // eventfd adds this little-endian 1

// kick rings the doorbell if the daemon's poll loop sleeps or is about to.
// The caller has just published ring indices (atomic stores); the flag
// is read after them, and the daemon raises it before its last look at
// the indices. With sequentially consistent atomics on both sides, either
// the daemon sees the new entries or the client sees the flag, so work is
// never stranded; a busy daemon keeps the flag clear and the client makes
// no system call (AF_XDP's need_wakeup).
func (r *remote) kick() {
	if r.needWakeup.Load() != 0 {
		r.rung.Add(1)
		// EAGAIN (the counter is saturated) means a wakeup is pending
		// anyway; EBADF cannot happen: rings die before the fd closes.
		unix.Write(r.bell, doorbellValue[:])
	}
}

// call sends one request and waits for its response. Descriptors in the
// response are the caller's to close.
func (r *remote) call(op string, args any, fds []int, result any) ([]int, error) {
	r.callMu.Lock()
	defer r.callMu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	r.nextID++
	req := proto.Request{ID: r.nextID, Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		req.Args = b
	}
	if err := r.conn.Send(req, fds...); err != nil {
		return nil, fmt.Errorf("verbs: %s: %w", op, err)
	}
	var resp proto.Response
	rfds, err := r.conn.Recv(&resp)
	if err == nil && resp.ID != req.ID {
		err = fmt.Errorf("%w: response %d to request %d", proto.ErrProtocol, resp.ID, req.ID)
	}
	if err != nil {
		proto.CloseFDs(rfds)
		if errors.Is(err, io.EOF) {
			err = errors.New("daemon closed the connection")
		}
		return nil, fmt.Errorf("verbs: %s: %w", op, err)
	}
	if resp.Error != nil {
		proto.CloseFDs(rfds)
		return nil, protoconv.DecodeError(resp.Error)
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			proto.CloseFDs(rfds)
			return nil, fmt.Errorf("verbs: %s: %w: %v", op, proto.ErrProtocol, err)
		}
	}
	return rfds, nil
}

func (r *remote) name() string { return r.dev.Name }

func (r *remote) queryDevice() (DeviceAttr, error) {
	var d proto.Device
	if _, err := r.call(proto.OpQueryDevice, nil, nil, &d); err != nil {
		return DeviceAttr{}, err
	}
	return deviceAttr(d), nil
}

func (r *remote) stats() ([]Counter, error) {
	var res proto.StatsResult
	if _, err := r.call(proto.OpStats, nil, nil, &res); err != nil {
		return nil, err
	}
	out := make([]Counter, len(res.Counters))
	for i, c := range res.Counters {
		out[i] = Counter{Name: c.Name, Value: c.Value}
	}
	return out, nil
}

func (r *remote) netem() (string, error) {
	var res proto.NetemResult
	if _, err := r.call(proto.OpNetem, nil, nil, &res); err != nil {
		return "", err
	}
	return res.Spec, nil
}

func (r *remote) setNetem(spec string) (string, error) {
	var res proto.NetemResult
	if _, err := r.call(proto.OpSetNetem, proto.NetemArgs{Spec: spec}, nil, &res); err != nil {
		return "", err
	}
	return res.Spec, nil
}

var errBufSize = errors.New("verbs: AllocBuf size must be positive")

// allocBuf makes a memfd sealed against resizing (the daemon refuses to
// map memory a client could shrink under it) and maps it here.
func (r *remote) allocBuf(n int) ([]byte, error) {
	if n <= 0 {
		return nil, errBufSize
	}
	fd, mem, err := shm.Create("softnic-mr", n, shm.SealAll)
	if err != nil {
		return nil, fmt.Errorf("verbs: AllocBuf: %w", err)
	}
	r.mu.Lock()
	r.bufs[&mem[0]] = &sharedBuf{fd: fd, mem: mem}
	r.mu.Unlock()
	return mem[:n:n], nil
}

func (r *remote) freeBuf(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b) == 0 {
		return errors.New("verbs: FreeBuf of an empty slice")
	}
	sb := r.bufs[&b[0]]
	if sb == nil || sb.fixed {
		return errors.New("verbs: FreeBuf of memory that did not come from AllocBuf")
	}
	if sb.mrs > 0 {
		return fmt.Errorf("%w: buffer still has %d registered regions", dataplane.ErrBusy, sb.mrs)
	}
	delete(r.bufs, &b[0])
	if sb.fd >= 0 {
		unix.Close(sb.fd)
	}
	return unix.Munmap(sb.mem)
}

// findBuf returns the allocation holding all of b and b's offset in it.
func (r *remote) findBuf(b []byte) (*sharedBuf, int64) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, sb := range r.bufs {
		base := uintptr(unsafe.Pointer(&sb.mem[0]))
		if p >= base && p-base <= uintptr(len(sb.mem)) && uintptr(len(b)) <= uintptr(len(sb.mem))-(p-base) {
			return sb, int64(p - base)
		}
	}
	return nil, 0
}

func (r *remote) allocPD() (uint32, error) {
	var h proto.Handle
	_, err := r.call(proto.OpAllocPD, nil, nil, &h)
	return h.Handle, err
}

func (r *remote) deallocPD(pd uint32) error {
	_, err := r.call(proto.OpDeallocPD, proto.Handle{Handle: pd}, nil, nil)
	return err
}

// regMR sends the memfd behind buf; the daemon maps the same pages and
// registers them under this process's address of buf, so that peers use
// client addresses as with ibverbs.
func (r *remote) regMR(pd *PD, buf []byte, access Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, dataplane.ErrEmptyMR
	}
	r.mu.Lock()
	sb, off := r.findBuf(buf)
	if sb != nil {
		sb.mrs++ // held while the RPC runs, so that FreeBuf cannot race it
	}
	r.mu.Unlock()
	if sb == nil {
		return nil, ErrNotShared
	}
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	var res proto.RegMRResult
	_, err := r.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.h, Addr: addr, Offset: off, Length: int64(len(buf)), Access: access}, []int{sb.fd}, &res)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		sb.mrs--
		return nil, err
	}
	r.updateMRs(func(m map[uint32]mrCheck) {
		m[res.LKey] = mrCheck{pd: pd.h, addr: addr, length: uint64(len(buf)), access: access}
	})
	return &MR{Addr: addr, LKey: res.LKey, RKey: res.RKey, h: res.Handle}, nil
}

func (r *remote) deregMR(m *MR) error {
	if _, err := r.call(proto.OpDeregMR, proto.Handle{Handle: m.h}, nil, nil); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updateMRs(func(t map[uint32]mrCheck) { delete(t, m.LKey) })
	if sb, _ := r.findBuf(m.buf); sb != nil {
		sb.mrs--
	}
	return nil
}

// updateMRs replaces the MR table with an edited copy (r.mu held).
func (r *remote) updateMRs(edit func(map[uint32]mrCheck)) {
	old := *r.mrs.Load()
	m := make(map[uint32]mrCheck, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	edit(m)
	r.mrs.Store(&m)
}

// recvSGLOK is the engine's receive SGE check (each nonempty SGE inside a
// locally writable region of the QP's PD, at most 2^31 bytes in all).
func (r *remote) recvSGLOK(pd uint32, sgl []SGE) bool {
	mrs := *r.mrs.Load()
	var total uint64
	for i := range sgl {
		s := &sgl[i]
		total += uint64(s.Length)
		if s.Length == 0 {
			continue
		}
		m, ok := mrs[s.LKey]
		if !ok || m.pd != pd || m.access&AccessLocalWrite == 0 || s.Addr < m.addr {
			return false
		}
		if off := s.Addr - m.addr; off > m.length || uint64(s.Length) > m.length-off {
			return false
		}
	}
	return total <= 1<<31
}

// mapRing maps a ring file the daemon sent and closes the descriptor.
func mapRing(fds []int, size int) (shm.Mapping, error) {
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return shm.Mapping{}, fmt.Errorf("%w: %d descriptors with a ring, want 1", proto.ErrProtocol, len(fds))
	}
	defer unix.Close(fds[0])
	return shm.MapShared(fds[0], 0, int64(size), unix.PROT_READ|unix.PROT_WRITE, shm.SealSize)
}

func (r *remote) createCQ(cq *CQ, cqe int) error {
	var res proto.CreateCQResult
	args := proto.CreateCQArgs{CQE: cqe}
	if cq.ch != nil {
		args.Channel = cq.ch.h
	}
	fds, err := r.call(proto.OpCreateCQ, args, nil, &res)
	if err != nil {
		return err
	}
	l, err := shm.NewCQLayout(cqe)
	if err == nil && (l.Cap != res.Cap || l.Size != res.Size) {
		err = fmt.Errorf("%w: CQ ring of %d entries in %d bytes, expected %d in %d", proto.ErrProtocol, res.Cap, res.Size, l.Cap, l.Size)
	}
	var m shm.Mapping
	if err == nil {
		m, err = mapRing(fds, l.Size)
		fds = nil
	}
	if err == nil {
		if err = l.Check(m.Bytes); err != nil {
			m.Unmap()
		}
	}
	if err != nil {
		proto.CloseFDs(fds)
		r.call(proto.OpDestroyCQ, proto.Handle{Handle: res.Handle}, nil, nil)
		return err
	}
	cq.h = res.Handle
	cq.ring = &cqRing{mem: m, ring: shm.NewConsumer(l.Ring(m.Bytes)), overflow: l.Overflow(m.Bytes)}
	cq.notify = l.Notify(m.Bytes)
	r.mu.Lock()
	r.cqs = append(r.cqs, cq.ring)
	r.mu.Unlock()
	return nil
}

func (r *remote) destroyCQ(cq *CQ) error {
	if _, err := r.call(proto.OpDestroyCQ, proto.Handle{Handle: cq.h}, nil, nil); err != nil {
		return err
	}
	cq.ring.unmap()
	r.mu.Lock()
	r.cqs = remove(r.cqs, cq.ring)
	r.mu.Unlock()
	return nil
}

// dupConn returns a close-on-exec duplicate of the connection to the
// daemon, which a channel polls for the daemon's hangup.
func (r *remote) dupConn() (int, error) {
	hup := -1
	var derr error
	raw, err := r.conn.C.SyscallConn()
	if err == nil {
		err = raw.Control(func(fd uintptr) { hup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	}
	if err == nil {
		err = derr
	}
	return hup, err
}

// createCompChannel: the daemon makes the eventfd and passes it; the
// channel also keeps a duplicate of the connection, which GetEvent polls
// for the daemon's hangup.
func (r *remote) createCompChannel(ch *CompChannel) error {
	var h proto.Handle
	fds, err := r.call(proto.OpCreateCompChannel, nil, nil, &h)
	if err != nil {
		return err
	}
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return fmt.Errorf("%w: %d descriptors with a completion channel, want 1", proto.ErrProtocol, len(fds))
	}
	hup, err := r.dupConn()
	if err != nil {
		unix.Close(fds[0])
		r.call(proto.OpDestroyCompChannel, h, nil, nil)
		return fmt.Errorf("verbs: completion channel: %w", err)
	}
	ch.fd, ch.hup, ch.h = fds[0], hup, h.Handle
	r.mu.Lock()
	r.chs = append(r.chs, ch)
	r.mu.Unlock()
	return nil
}

func (r *remote) destroyCompChannel(ch *CompChannel) error {
	_, err := r.call(proto.OpDestroyCompChannel, proto.Handle{Handle: ch.h}, nil, nil)
	if err == nil || !errors.Is(err, dataplane.ErrBusy) {
		r.mu.Lock()
		r.chs = remove(r.chs, ch)
		r.mu.Unlock()
	}
	return err
}

func (r *remote) createQP(q *QP, attr QPInitAttr) error {
	var res proto.CreateQPResult
	fds, err := r.call(proto.OpCreateQP, proto.CreateQPArgs{
		PD: q.pd.h, SendCQ: attr.SendCQ.h, RecvCQ: attr.RecvCQ.h,
		MaxSendWR: attr.MaxSendWR, MaxRecvWR: attr.MaxRecvWR, SigAll: attr.SqSigAll, Scheme: attr.Scheme, CC: attr.CC,
		Star: uint8(attr.Star), MaxUnackedPSNs: attr.MaxUnackedPSNs, Type: uint8(attr.Type), SRQ: srqHandle(attr.SRQ),
	}, nil, &res)
	if err != nil {
		return err
	}
	l, err := shm.NewQPLayout(attr.MaxSendWR, attr.MaxRecvWR)
	if err == nil && (l.SQCap != res.SQCap || l.RQCap != res.RQCap || l.Size != res.Size) {
		err = fmt.Errorf("%w: QP rings of %d/%d entries in %d bytes, expected %d/%d in %d", proto.ErrProtocol,
			res.SQCap, res.RQCap, res.Size, l.SQCap, l.RQCap, l.Size)
	}
	var m shm.Mapping
	if err == nil {
		m, err = mapRing(fds, l.Size)
		fds = nil
	}
	if err == nil {
		if err = l.Check(m.Bytes); err != nil {
			m.Unmap()
		}
	}
	if err != nil {
		proto.CloseFDs(fds)
		r.call(proto.OpDestroyQP, proto.Handle{Handle: res.Handle}, nil, nil)
		return err
	}
	q.h, q.qpn, q.scheme = res.Handle, res.QPN, res.Scheme
	q.ring = &qpRing{r: r, qpn: res.QPN, pd: q.pd.h, mem: m, slot: res.Bell,
		sq: shm.NewProducer(l.SQ(m.Bytes)), rq: shm.NewProducer(l.RQ(m.Bytes)),
		ud: attr.Type.IsUD(), udMTU: res.UDMTU}
	q.ring.state.Store(uint32(qp.Reset))
	r.mu.Lock()
	r.qps = append(r.qps, q.ring)
	r.mu.Unlock()
	return nil
}

// modifyQP: the daemon first moves whatever the client already published
// into the engine, so that work posted before a modify is ordered before
// it, as in embedded mode.
func (r *remote) modifyQP(q *QP, attr *QPAttr, mask AttrMask) error {
	if _, err := r.call(proto.OpModifyQP, proto.ModifyQPArgs{QP: q.h, Attr: protoconv.FromQPAttr(attr), Mask: mask}, nil, nil); err != nil {
		return err
	}
	if mask&qp.AttrState != 0 {
		q.ring.state.Store(uint32(attr.State))
	}
	return nil
}

func (r *remote) queryQP(q *QP) (QPAttr, error) {
	var a proto.QPAttr
	if _, err := r.call(proto.OpQueryQP, proto.Handle{Handle: q.h}, nil, &a); err != nil {
		return QPAttr{}, err
	}
	q.ring.state.Store(uint32(a.State))
	return protoconv.ToQPAttr(&a), nil
}

// setQPScheme: as for a modify, the daemon first moves what the client
// already published into the engine.
func (r *remote) setQPScheme(q *QP, name string) error {
	var res proto.SchemeResult
	if _, err := r.call(proto.OpSetQPScheme, proto.SetQPSchemeArgs{QP: q.h, Scheme: name}, nil, &res); err != nil {
		return err
	}
	q.scheme = res.Scheme
	return nil
}

func (r *remote) destroyQP(q *QP) error {
	if _, err := r.call(proto.OpDestroyQP, proto.Handle{Handle: q.h}, nil, nil); err != nil {
		return err
	}
	q.ring.unmap()
	r.mu.Lock()
	r.qps = remove(r.qps, q.ring)
	r.mu.Unlock()
	return nil
}

// close hangs up; the daemon then destroys everything this connection
// created. The rings die first (under their locks, so that no post or
// poll is inside them), then the device page and the doorbell they use.
func (r *remote) close() error {
	r.callMu.Lock()
	if r.closed {
		r.callMu.Unlock()
		return ErrClosed
	}
	r.closed = true
	err := r.conn.C.Close()
	r.callMu.Unlock()

	// Channels first: their GetEvent reads the event words of CQ files
	// about to be unmapped; a blocked GetEvent returns ErrClosed. (A
	// channel's lock is taken before r.mu elsewhere, never inside it.)
	r.mu.Lock()
	chs := r.chs
	r.chs = nil
	r.mu.Unlock()
	for _, ch := range chs {
		ch.mu.Lock()
		ch.shut()
		ch.mu.Unlock()
	}
	r.shutCM()

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.qps {
		q.unmap()
	}
	for _, c := range r.cqs {
		c.unmap()
	}
	r.qps, r.cqs = nil, nil
	r.devPage.Unmap()
	r.bellsMem.Unmap()
	unix.Close(r.bell)
	for _, sb := range r.bufs {
		unix.Close(sb.fd) // no RegMR can follow; the memory stays mapped until FreeBuf
		sb.fd = -1
	}
	return err
}

func remove[T comparable](s []T, v T) []T {
	for i := range s {
		if s[i] == v {
			s[i] = s[len(s)-1]
			return s[:len(s)-1]
		}
	}
	return s
}
