// Package verbs is softnic's verbs API, named and shaped after libibverbs
// so that an RDMA programmer reads it without a manual: a Context (an
// opened device) gives protection domains, memory regions, completion
// queues and reliable-connected queue pairs; work requests are posted to
// QPs and work completions polled from CQs, with ibverbs' opcodes,
// statuses and attribute masks.
//
// A Context runs on one of two backends with the same behaviour (a
// third way, OpenDirect, runs the embedded backend's engine on a real
// AF_XDP port in this process: docs/direct.md):
//
//   - embedded (NewEmbedded): the NIC runs inside the calling process on
//     the in-memory fabric (package dataplane/sim), which is what unit
//     tests, the demo and hosts without XDP use. Every call goes straight
//     into the engine.
//   - daemon (Dial): the softnic daemon owns the NIC and serves the API
//     over its unix socket (package verbsd). Control operations are
//     RPCs; memory regions, send/receive queues and completion queues
//     live in shared memory, so PostSend, PostRecv and Poll are plain
//     memory writes and reads with no system call, as with a hardware
//     NIC's user-space verbs. docs/verbs-ipc.md has the protocol.
//
// Completion events (CreateCompChannel, CQ.ReqNotify, GetEvent,
// AckEvents) work in both modes without a system call to arm: a waiter
// spins briefly, then arms the CQ, polls once more, and blocks on the
// channel's descriptor (channel.go has the pattern).
//
// Control operations go through an internal backend interface; the data
// path (post and poll) branches on the object instead, so that posting a
// work request through the variadic API stays allocation-free in both
// modes (a call through an interface would make the argument escape).
package verbs

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// The ibverbs types, shared with the dataplane.
type (
	WC        = qp.WC
	SendWR    = qp.SendWR
	RecvWR    = qp.RecvWR
	SGE       = qp.SGE
	Access    = qp.Access
	AttrMask  = qp.AttrMask
	QPState   = qp.State
	PSN       = qp.PSN
	MTU       = qp.MTU
	WCStatus  = qp.WCStatus
	WROpcode  = qp.WROpcode
	WCOpcode  = qp.WCOpcode
	WCFlags   = qp.WCFlags
	SendFlags = qp.SendFlags
	QPAttr    = dataplane.QPAttr
	AHAttr    = dataplane.AddressVector
	ConnParam = dataplane.ConnParams
)

// Access flags (IBV_ACCESS_*).
const (
	AccessLocalWrite   = qp.AccessLocalWrite
	AccessRemoteWrite  = qp.AccessRemoteWrite
	AccessRemoteRead   = qp.AccessRemoteRead
	AccessRemoteAtomic = qp.AccessRemoteAtomic
)

// Send opcodes (IBV_WR_*) and flags (IBV_SEND_*).
const (
	WRRDMAWrite         = qp.WRRDMAWrite
	WRRDMAWriteWithImm  = qp.WRRDMAWriteWithImm
	WRSend              = qp.WRSend
	WRSendWithImm       = qp.WRSendWithImm
	WRRDMARead          = qp.WRRDMARead
	WRAtomicCmpAndSwp   = qp.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = qp.WRAtomicFetchAndAdd
	SendSignaled        = qp.SendSignaled
	SendFence           = qp.SendFence
	SendSolicited       = qp.SendSolicited
)

// Completion statuses (IBV_WC_*).
const (
	WCSuccess        = qp.WCSuccess
	WCLocLenErr      = qp.WCLocLenErr
	WCLocQPOpErr     = qp.WCLocQPOpErr
	WCLocProtErr     = qp.WCLocProtErr
	WCWRFlushErr     = qp.WCWRFlushErr
	WCRemInvReqErr   = qp.WCRemInvReqErr
	WCRemAccessErr   = qp.WCRemAccessErr
	WCRemOpErr       = qp.WCRemOpErr
	WCRetryExcErr    = qp.WCRetryExcErr
	WCRNRRetryExcErr = qp.WCRNRRetryExcErr
)

// Completion opcodes (IBV_WC_*) and flags (IBV_WC_WITH_IMM).
const (
	WCSend            = qp.WCSend
	WCRDMAWrite       = qp.WCRDMAWrite
	WCRDMARead        = qp.WCRDMARead
	WCCompSwap        = qp.WCCompSwap
	WCFetchAdd        = qp.WCFetchAdd
	WCRecv            = qp.WCRecv
	WCRecvRDMAWithImm = qp.WCRecvRDMAWithImm
	WCWithImm         = qp.WCWithImm
	WCSolicited       = qp.WCSolicited // softnic: the message carried the solicited-event bit
)

// Modify-QP attribute mask bits (IBV_QP_*).
const (
	AttrState           = qp.AttrState
	AttrCurState        = qp.AttrCurState
	AttrAccessFlags     = qp.AttrAccessFlags
	AttrPKeyIndex       = qp.AttrPKeyIndex
	AttrPort            = qp.AttrPort
	AttrAV              = qp.AttrAV
	AttrPathMTU         = qp.AttrPathMTU
	AttrTimeout         = qp.AttrTimeout
	AttrRetryCnt        = qp.AttrRetryCnt
	AttrRNRRetry        = qp.AttrRNRRetry
	AttrRQPSN           = qp.AttrRQPSN
	AttrMaxQPRdAtomic   = qp.AttrMaxQPRdAtomic
	AttrMinRNRTimer     = qp.AttrMinRNRTimer
	AttrSQPSN           = qp.AttrSQPSN
	AttrMaxDestRdAtomic = qp.AttrMaxDestRdAtomic
	AttrDestQPN         = qp.AttrDestQPN
)

// Path MTUs (IBV_MTU_*).
const (
	MTU256  = qp.MTU256
	MTU512  = qp.MTU512
	MTU1024 = qp.MTU1024
	MTU2048 = qp.MTU2048
	MTU4096 = qp.MTU4096
)

// QP states (IBV_QPS_*).
const (
	QPSReset = qp.Reset
	QPSInit  = qp.Init
	QPSRTR   = qp.RTR
	QPSRTS   = qp.RTS
	QPSSQD   = qp.SQD
	QPSSQE   = qp.SQE
	QPSErr   = qp.Err
)

var (
	// ErrClosed is returned for objects already destroyed and for
	// contexts already closed.
	ErrClosed = proto.ErrClosed
	// ErrBadHandle is the daemon's answer to a handle that names no
	// object of this connection: objects of other processes cannot be
	// named at all.
	ErrBadHandle = proto.ErrBadHandle
	// ErrLimit: a daemon refused the request because it would exceed a
	// per-client limit; the error's message names the limit and the
	// softnic run flag that raises it.
	ErrLimit = proto.ErrLimit
	// ErrPermission: a daemon refused a request this user may not make
	// (SetNetem: only root or the daemon's user).
	ErrPermission = proto.ErrPermission
	// ErrNotShared is RegMR on a daemon context with memory that did not
	// come from AllocBuf: the daemon can only reach memory it can map.
	ErrNotShared = errors.New("verbs: RegMR on a daemon context needs memory from Context.AllocBuf (the daemon maps the region from shared memory)")
	// ErrForeign is an object of one Context used with another.
	ErrForeign = errors.New("verbs: object belongs to another context")
)

// Context is an opened softnic device (struct ibv_context).
type Context struct {
	b      backend
	e      *dataplane.Engine          // embedded mode only
	remote *remote                    // daemon mode only
	ev     atomic.Pointer[asyncState] // asynchronous events (srq.go)
	drv    *driver                    // direct mode only: who drives the engine (direct.go)
}

// Name is the device name.
func (c *Context) Name() string { return c.b.name() }

// Engine exposes the NIC behind an embedded context (counters, scheme);
// it is nil on a daemon context, whose NIC lives in another process (use
// QueryDevice and Stats).
func (c *Context) Engine() *dataplane.Engine { return c.e }

// DeviceAttr is ibv_query_device's answer plus the port's addresses: the
// GID (RoCEv2: the port's IP address) and MAC a peer's address vector
// names.
type DeviceAttr struct {
	Name        string
	GID         netip.Addr
	MAC         [6]byte
	Scheme      string   // loss recovery of QPs that do not ask for one (QPInitAttr.Scheme)
	Schemes     []string // the loss-recovery schemes a QP may ask for
	MaxQPWR     int
	MaxCQE      int
	MaxSGE      int
	MaxQPRdAtom int
	// StarServer: the NIC serves StaR's stateless packets (softnic run
	// --star-server) and can hold StaR server QPs (QPInitAttr.Star).
	StarServer bool
}

// QueryDevice is ibv_query_device (and ibv_query_gid).
func (c *Context) QueryDevice() (DeviceAttr, error) { return c.b.queryDevice() }

// Counter is one NIC statistic (rxe's hw_counters names).
type Counter struct {
	Name  string
	Value uint64
}

// Stats returns the NIC's counters in display order.
func (c *Context) Stats() ([]Counter, error) { return c.b.stats() }

// Netem returns the impairment the NIC applies to what it receives, in
// netem's words ("" for none; softnic run --netem, package
// dataplane/impair).
func (c *Context) Netem() (string, error) { return c.b.netem() }

// SetNetem replaces the NIC's receive impairment with spec, in netem's
// words ("" removes it), and returns the one in force: canonical words,
// with the seed a daemon chose if spec gave none. A daemon lets only root
// or its own user change it (ErrPermission).
func (c *Context) SetNetem(spec string) (string, error) { return c.b.setNetem(spec) }

// AllocBuf returns n bytes of memory the NIC can reach once registered:
// on a daemon context, shared memory (a sealed memfd the daemon maps at
// RegMR); on an embedded context, ordinary memory. Release it with
// FreeBuf after deregistering its regions.
func (c *Context) AllocBuf(n int) ([]byte, error) { return c.b.allocBuf(n) }

// FreeBuf releases memory from AllocBuf. It fails while a region still
// covers it. It may be called after Close.
func (c *Context) FreeBuf(b []byte) error { return c.b.freeBuf(b) }

// Close is ibv_close_device. On a daemon context it closes the
// connection, upon which the daemon destroys every object the context
// still had; queues are unmapped, and objects of the context fail with
// ErrClosed. Buffers from AllocBuf stay mapped until FreeBuf.
func (c *Context) Close() error {
	c.closeEvents()
	return c.b.close()
}

// PD is a protection domain (struct ibv_pd).
type PD struct {
	ctx  *Context
	h    uint32
	dead bool
}

// AllocPD is ibv_alloc_pd.
func (c *Context) AllocPD() (*PD, error) {
	h, err := c.b.allocPD()
	if err != nil {
		return nil, err
	}
	return &PD{ctx: c, h: h}, nil
}

// Dealloc is ibv_dealloc_pd.
func (pd *PD) Dealloc() error {
	if pd.dead {
		return ErrClosed
	}
	if err := pd.ctx.b.deallocPD(pd.h); err != nil {
		return err
	}
	pd.dead = true
	return nil
}

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	Addr   uint64
	LKey   uint32
	RKey   uint32
	Length int
	pd     *PD
	mr     *dataplane.MR // embedded
	h      uint32        // daemon handle
	buf    []byte
	dead   bool
}

// Buf is the registered memory.
func (m *MR) Buf() []byte { return m.buf }

// SGE names length bytes at offset off of the region.
func (m *MR) SGE(off, length int) SGE {
	return SGE{Addr: m.Addr + uint64(off), Length: uint32(length), LKey: m.LKey}
}

// RegMR is ibv_reg_mr: buf becomes reachable by the NIC with access. The
// region's address (MR.Addr) is the address of buf in this process, in
// both modes, so peers name it as they would an ibverbs region.
//
// As ibv_reg_mr, it refuses (EINVAL: an error wrapping
// dataplane.ErrBadAccess) access bits softnic does not define, and
// remote write or remote atomic access without local write.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if pd.dead {
		return nil, ErrClosed
	}
	if err := dataplane.CheckAccess(access); err != nil {
		return nil, err
	}
	m, err := pd.ctx.b.regMR(pd, buf, access)
	if err != nil {
		return nil, err
	}
	m.pd, m.buf, m.Length = pd, buf, len(buf)
	return m, nil
}

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error {
	if m.dead {
		return ErrClosed
	}
	if err := m.pd.ctx.b.deregMR(m); err != nil {
		return err
	}
	m.dead = true
	return nil
}

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	ctx   *Context
	ecq   *dataplane.CQ // embedded
	ring  *cqRing       // daemon: the shared completion ring
	h     uint32
	users atomic.Int32 // QPs using the CQ
	dead  atomic.Bool

	// Completion events (channel.go). notify is the arm and event words:
	// in the CQ file on a daemon context, in words on an embedded one.
	ch     *CompChannel
	notify shm.Notify
	words  [2]atomic.Uint32
	taken  uint32 // events GetEvent returned (ch.mu)
	acked  uint32 // events acknowledged (ch.mu)
}

// CreateCQ is ibv_create_cq with cqe entries and no completion channel
// (CreateCQWithChannel has one).
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	cq := &CQ{ctx: c}
	if err := c.b.createCQ(cq, cqe); err != nil {
		return nil, err
	}
	c.events().track(trackKey(cq), cq)
	return cq, nil
}

// Poll is ibv_poll_cq: it fills wcs with up to len(wcs) completions. It
// makes no system call and does not allocate.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if cq.ring != nil {
		return cq.ring.poll(wcs)
	}
	if cq.dead.Load() {
		return 0, ErrClosed
	}
	if cq.ctx.drv != nil {
		cq.ctx.drv.drive()
	}
	return cq.ctx.e.PollCQ(cq.ecq, wcs)
}

// Destroy is ibv_destroy_cq; a CQ still used by a QP is busy (EBUSY).
// So is a CQ whose completion events (GetEvent) are not all
// acknowledged with AckEvents: where ibv_destroy_cq blocks until they
// are, Destroy fails with an error that errors.Is dataplane.ErrBusy.
func (cq *CQ) Destroy() error {
	if cq.dead.Load() {
		return ErrClosed
	}
	if n := cq.users.Load(); n > 0 {
		return fmt.Errorf("%w: completion queue is used by %d QP queues", dataplane.ErrBusy, n)
	}
	if err := cq.detach(); err != nil {
		return err
	}
	if err := cq.ctx.b.destroyCQ(cq); err != nil {
		cq.attach()
		return err
	}
	cq.dead.Store(true)
	cq.ctx.events().untrack(trackKey(cq))
	return nil
}

// QPInitAttr is struct ibv_qp_init_attr for an RC QP.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	MaxSendWR      int
	MaxRecvWR      int
	SqSigAll       bool
	// Scheme is the QP's loss recovery, one of DeviceAttr.Schemes; ""
	// takes the device's default (DeviceAttr.Scheme). ibverbs has no such
	// attribute: it is a softnic extension, as a vendor's
	// ibv_create_qp_ex attribute would be. Both ends of a connection
	// must run the same scheme (package cm agrees on one); QP.SetScheme
	// changes it until the QP leaves INIT.
	Scheme string
	// CC names the QP's congestion control (cc.Names(), docs/cc.md); ""
	// takes the device's (softnic run --cc). Each end of a connection
	// chooses its own.
	CC string
	// Star is the QP's role in StaR's stateless mode (docs/star.md):
	// StarNone (default) for an ordinary RC QP, StarServer for a
	// stateless server QP (the NIC must run with --star-server), or
	// StarClient for a QP that keeps the transport state of both
	// directions (it needs a scheme that places out of order: irn, melo,
	// fasr, srnic). Like Scheme, a softnic extension; package cm agrees
	// on it with the peer (a server pairs only with a client).
	Star StarRole
	// MaxUnackedPSNs bounds the QP's unacknowledged PSNs: what go-back-N
	// resends at most per go-back (0: the device's, softnic run
	// --max-unacked-psns; rxe's is the constant 128). A softnic
	// extension, like Scheme.
	MaxUnackedPSNs int
	// Type is the QP's transport service (ibv_qp_init_attr.qp_type):
	// the zero value and QPTRC make a reliable-connected QP, QPTUD an
	// Unreliable Datagram QP (ud.go).
	Type QPType
	// SRQ, if not nil, is the shared receive queue the QP takes its
	// receive work requests from (ibv_qp_init_attr.srq): MaxRecvWR is
	// then ignored and PostRecv on the QP is refused.
	SRQ *SRQ
}

// QP is a reliable-connected queue pair (struct ibv_qp).
type QP struct {
	pd             *PD
	qpn            uint32
	q              *dataplane.QP // embedded
	ring           *qpRing       // daemon: the shared send and receive rings
	h              uint32
	scheme         string // daemon: the scheme the daemon reported
	star           StarRole
	sendCQ, recvCQ *CQ
	dead           bool
	srq            *SRQ
}

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Scheme is the name of the loss recovery the QP runs: what
// QPInitAttr.Scheme or SetScheme asked for, or the device's default.
// Like QPInitAttr.Scheme, it is a softnic extension.
func (q *QP) Scheme() string {
	if q.q != nil {
		return q.pd.ctx.e.QPScheme(q.q)
	}
	return q.scheme
}

// SetScheme changes the QP's loss recovery to the named scheme ("" is
// the device's default) while the QP is in RESET or INIT: afterwards it
// fails with an error that errors.Is dataplane.ErrSchemeState. It lets a
// program create its QPs, exchange their numbers with the peer together
// with the schemes each side supports, and apply the scheme both agreed
// on before connecting (cm.AgreeScheme). A name the device does not have
// fails with dataplane.ErrUnknownScheme, naming the ones it has. A softnic
// extension, like QPInitAttr.Scheme.
func (q *QP) SetScheme(name string) error {
	if q.dead {
		return ErrClosed
	}
	return q.pd.ctx.b.setQPScheme(q, name)
}

// CreateQP is ibv_create_qp with IBV_QPT_RC.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if pd.dead {
		return nil, ErrClosed
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, errors.New("verbs: create QP needs a send and a receive CQ")
	}
	if attr.SendCQ.ctx != pd.ctx || attr.RecvCQ.ctx != pd.ctx {
		return nil, ErrForeign
	}
	if attr.SendCQ.dead.Load() || attr.RecvCQ.dead.Load() {
		return nil, ErrClosed
	}
	if attr.SRQ != nil {
		if attr.SRQ.pd.ctx != pd.ctx {
			return nil, ErrForeign
		}
		if attr.SRQ.dead.Load() {
			return nil, ErrClosed
		}
		attr.MaxRecvWR = 1 // ignored with an SRQ (the engine's ring holds one WQE in progress)
	}
	q := &QP{pd: pd, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, star: attr.Star, srq: attr.SRQ}
	if err := pd.ctx.b.createQP(q, attr); err != nil {
		return nil, err
	}
	q.sendCQ.users.Add(1)
	q.recvCQ.users.Add(1)
	if q.srq != nil {
		q.srq.users.Add(1)
	}
	pd.ctx.events().track(trackKey(q), q)
	return q, nil
}

// Modify is ibv_modify_qp.
func (q *QP) Modify(attr *QPAttr, mask AttrMask) error {
	if q.dead {
		return ErrClosed
	}
	return q.pd.ctx.b.modifyQP(q, attr, mask)
}

// QueryAttr is ibv_query_qp.
func (q *QP) QueryAttr() (QPAttr, error) {
	if q.dead {
		return QPAttr{}, ErrClosed
	}
	return q.pd.ctx.b.queryQP(q)
}

// Query is ibv_query_qp for callers that cannot fail: when the attributes
// cannot be read (the QP is destroyed, the daemon is gone) it reports a
// QP in the error state, which is what such a QP is.
func (q *QP) Query() QPAttr {
	a, err := q.QueryAttr()
	if err != nil {
		return QPAttr{State: QPSErr, CurState: QPSErr}
	}
	return a
}

// Destroy is ibv_destroy_qp.
func (q *QP) Destroy() error {
	if q.dead {
		return ErrClosed
	}
	if err := q.pd.ctx.b.destroyQP(q); err != nil {
		return err
	}
	q.dead = true
	q.sendCQ.users.Add(-1)
	q.recvCQ.users.Add(-1)
	if q.srq != nil {
		q.srq.users.Add(-1)
	}
	q.pd.ctx.events().untrack(trackKey(q))
	return nil
}

// PostError says which work request of a post was refused
// (ibv_post_send's bad_wr); the ones before it were posted.
type PostError struct {
	Index int
	Err   error
}

func (e *PostError) Error() string { return fmt.Sprintf("verbs: work request %d: %v", e.Index, e.Err) }
func (e *PostError) Unwrap() error { return e.Err }

// PostSend is ibv_post_send. On a daemon context the requests are copied
// into the QP's shared send ring: no system call unless the daemon's poll
// loop sleeps and must be woken (docs/verbs-ipc.md, "Doorbell").
func (q *QP) PostSend(wrs ...SendWR) error {
	if q.ring != nil {
		return q.ring.postSend(wrs)
	}
	n, err := q.pd.ctx.e.PostSend(q.q, wrs)
	if q.pd.ctx.drv != nil {
		q.pd.ctx.drv.drive() // transmit now: the caller drives the engine
	}
	if err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}

// PostRecv is ibv_post_recv.
func (q *QP) PostRecv(wrs ...RecvWR) error {
	if q.srq != nil {
		return &PostError{Index: 0, Err: fmt.Errorf("dataplane: QP %#x: %w", q.qpn, dataplane.ErrHasSRQ)}
	}
	if q.ring != nil {
		return q.ring.postRecv(wrs)
	}
	if n, err := q.pd.ctx.e.PostRecv(q.q, wrs); err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}

// backend is what a Context is opened on: the engine in this process
// (embedded) or the daemon behind a socket (remote). It carries the
// control operations; the data path is on the objects (see the package
// comment).
type backend interface {
	name() string
	queryDevice() (DeviceAttr, error)
	stats() ([]Counter, error)
	netem() (string, error)
	setNetem(spec string) (string, error)
	allocBuf(n int) ([]byte, error)
	freeBuf(b []byte) error
	allocPD() (uint32, error)
	deallocPD(pd uint32) error
	regMR(pd *PD, buf []byte, access Access) (*MR, error)
	deregMR(m *MR) error
	// createCQ makes cq.ch's CQ (cq.ch may be nil) and sets cq.notify.
	createCQ(cq *CQ, cqe int) error
	destroyCQ(cq *CQ) error
	createCompChannel(ch *CompChannel) error
	destroyCompChannel(ch *CompChannel) error
	createQP(q *QP, attr QPInitAttr) error
	modifyQP(q *QP, attr *QPAttr, mask AttrMask) error
	queryQP(q *QP) (QPAttr, error)
	setQPScheme(q *QP, name string) error
	// createAH makes the address handle a (a.pd, a.attr set; DMAC zero
	// resolved from the NIC's neighbours), destroyAH removes it (ud.go).
	createAH(a *AH) error
	destroyAH(a *AH) error
	starTable(q *QP) ([]StarRegion, error)
	destroyQP(q *QP) error
	close() error
}

func deviceAttr(d proto.Device) DeviceAttr {
	return DeviceAttr{Name: d.Name, GID: d.GID, MAC: d.MAC, Scheme: d.Scheme, Schemes: d.Schemes,
		MaxQPWR: d.MaxQPWR, MaxCQE: d.MaxCQE, MaxSGE: d.MaxSGE, MaxQPRdAtom: d.MaxQPRdAtom, StarServer: d.StarServer}
}
