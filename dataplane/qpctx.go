package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// AddressVector is where an RC QP sends (struct ibv_ah_attr for RoCEv2:
// the destination GID as an IP address, plus the resolved MAC).
type AddressVector struct {
	DGID         netip.Addr
	DMAC         [6]byte
	TrafficClass uint8
	HopLimit     uint8
	FlowLabel    uint32
	// SGIDIndex is the source GID's index in the port's GID table (an
	// address handle's; softnic's port has one GID, index 0).
	SGIDIndex uint8
}

// ECN codepoints of the IP traffic class's two low bits (RFC 3168).
const (
	ecnMask = 0x3
	ecnECT0 = 0x2
	ecnCE   = 0x3
)

// QPAttr is struct ibv_qp_attr, the part RC uses.
type QPAttr struct {
	State           qp.State
	CurState        qp.State
	AccessFlags     qp.Access
	PKeyIndex       uint16
	Port            uint8
	AV              AddressVector
	PathMTU         qp.MTU
	DestQPN         uint32
	RQPSN           qp.PSN
	SQPSN           qp.PSN
	MaxDestRdAtomic uint8
	MaxRdAtomic     uint8
	MinRNRTimer     uint8 // IBA RNR timer code (Table 45)
	Timeout         uint8 // local ACK timeout = 4.096 µs * 2^Timeout; 0 = infinite
	RetryCnt        uint8 // 0-7 retries after a timeout or sequence error
	RNRRetry        uint8 // 0-7; 7 = retry forever (IBA)
	// QKey is a UD QP's Q_Key (IBV_QP_QKEY).
	QKey uint32
}

// QPInitAttr is struct ibv_qp_init_attr for RC.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	MaxSendWR      int
	MaxRecvWR      int
	SigAll         bool // every send WR generates a completion
	// Scheme names the QP's loss recovery (recovery.Names()); "" takes
	// the engine's. Both ends of a connection must agree (the connection
	// exchange negotiates it).
	Scheme string
	// CC names the QP's congestion control (cc.Names()); "" takes the
	// engine's (Config.CC). Unlike the scheme, each end chooses its own:
	// the reaction point throttles the QP's sending, the notification
	// point answers ECN marks on what the QP receives with CNPs.
	CC string
	// Star is the QP's part in StaR's stateless mode (starqp.go,
	// docs/star.md "Roles"); the zero value is an ordinary RC QP.
	Star StarRole
	// MaxUnackedPSNs bounds the QP's unacknowledged PSNs (0: the
	// engine's Config.MaxUnackedPSNs; at most MaxUnackedLimit). A
	// softnic extension, like Scheme: rxe's bound is the constant 128.
	MaxUnackedPSNs int
	// Type is the QP's transport service (ibv_qp_init_attr.qp_type):
	// the zero value and qp.QPTypeRC make an RC QP, qp.QPTypeUD an
	// Unreliable Datagram QP (ud.go).
	Type qp.QPType
	// SRQ, if not nil, is the shared receive queue the QP takes its
	// receive WQEs from (ibv_qp_init_attr.srq); MaxRecvWR is then
	// ignored, and PostRecv on the QP is refused (srq.go).
	SRQ *SRQ
}

// MaxUnackedLimit is the largest bound on unacknowledged PSNs: half the
// PSN space less one, beyond which a responder could not tell a new PSN
// from a duplicate (IBA 9.7.5.1.1).
const MaxUnackedLimit = 1<<23 - 1

// ErrMaxUnacked is a bound on unacknowledged PSNs out of range.
var ErrMaxUnacked = fmt.Errorf("dataplane: max unacknowledged PSNs must be 0 to %d", MaxUnackedLimit)

// Limits of one QP.
const (
	MaxWR        = 1 << 16
	MaxRdAtomic  = 16
	maxRespQueue = 2*MaxRdAtomic + 8
)

// QP is the whole context of one reliable-connected queue pair.
type QP struct {
	qpn    uint32
	pd     uint32
	state  qp.State
	sendCQ *CQ
	recvCQ *CQ
	sigAll bool
	queued bool // on the engine's ready list
	// turnLeft is what is left of a transmit turn a busy service
	// pipeline cut short (turn.go); 0: none.
	turnLeft int
	// maxUnacked bounds the unacknowledged PSNs (0: none).
	maxUnacked int
	av         AddressVector

	// hwContext is the per-packet transport state: what an RNIC keeps in
	// on-chip SRAM. When the context cache evicts this QP it is written
	// back to host (if dirty) and poisoned on chip; a miss fills it back.
	hwContext
	host  hwContext // the host-memory copy
	cache qp.CacheEntry

	sq       *qp.Ring[sendWQE]  // in host memory, as WQEs are
	rq       *qp.Ring[recvWQE]  // in host memory
	respQ    *qp.Ring[respItem] // responder output queue
	res      []resource         // responder resources ring (max_dest_rd_atomic)
	stash    []stashedReq       // READ and atomic requests kept out of order (responder.go)
	ooo      bool               // the scheme places out of order: extension opcodes on the wire
	buffers  bool               // ... and keeps early packets in the reorder buffer (MELO)
	rob      []int32            // reorder-buffer slot+1 per PSN slot (reorder.go)
	scheme   recovery.Scheme
	sender   recovery.Sender
	receiver recovery.Receiver
	star     StarRole  // its part in StaR's stateless mode, fixed at create
	tr       transport // what the QP runs: RC, or StaR's client or server driver
	qpType   qp.QPType // RC (0 or qp.QPTypeRC) or UD, fixed at create
	qkey     uint32    // UD: the QP's Q_Key

	// srq is the shared receive queue the QP takes receive WQEs from
	// (nil: its own rq); srq.go. The flags are for asynchronous events
	// (events.go): COMM_EST raised, SQ_DRAINED raised in this SQD, and
	// the event a class C NAK raises when the QP then enters ERR.
	srq      *SRQ
	commEst  bool
	sqdDone  bool
	errEvent EventType
}

// hwContext is the on-chip part of a QP context (see QP): the
// connection's attributes and the RC stages' state, one part each as in
// rxe (req, comp, resp), copied as one value by the context cache.
type hwContext struct {
	connCtx
	reqCtx
	compCtx
	respCtx
}

// connCtx is the connection's attributes (modify QP).
type connCtx struct {
	access          qp.Access
	hdr             bth.FrameHeader
	mtu             uint32
	destQPN         uint32
	maxRdAtomic     int
	maxDestRdAtomic int
	minRNRTimer     uint8
	timeoutCode     uint8
	retryCnt        uint8
	rnrRetry        uint8
}

// reqCtx is the requester's state (requester.go; rxe's qp->req): the send
// cursor and what it has sent.
type reqCtx struct {
	sqStart    uint32 // ring index of the next WQE that has no PSNs yet
	nextPSN    qp.PSN // first PSN of the next WQE to start
	cur        uint32 // ring index of the WQE under the send cursor
	curPSN     qp.PSN // next PSN to (re)transmit
	maxSentPSN qp.PSN // one past the highest PSN ever sent
	noAck      int    // packets sent since the last AckReq
	rdAtomics  int    // started, uncompleted READ and atomic WQEs
	stPending  qp.PSN // p+1: ST's second copy of packet p waits for ring space; 0: none
	nextRecvSN uint32 // receive WQE sequence number of the next SEND or WRITE with immediate (IRN §5.3.2)
	lastAckReq qp.PSN // the furthest packet sent with AckReq (or answered at once: READ, atomic)
	ackReqOut  bool   // lastAckReq is set
	rttPSN     qp.PSN // p+1: PSN p, sent once at rttSentAt, is being timed; 0: none
	rttSentAt  time.Duration
}

// compCtx is the completer's state (completer.go; rxe's qp->comp): what
// is acknowledged, the retry budgets, the go-back rounds, the
// retransmission timer's start and the round-trip estimate.
type compCtx struct {
	unacked    qp.PSN // oldest PSN not yet acknowledged
	retryLeft  uint8
	rnrLeft    uint8
	rnrWait    bool          // transmission paused until the RNR timer fires
	impliedAt  qp.PSN        // unacked+1 when an implied NAK already went back there; 0: none
	nakHeld    qp.PSN        // p+1 after a NAK for p went back there, until p is resent; 0: none
	nakBackTo  qp.PSN        // p+1: the last sequence NAK went back to p (a repeat of it is no new stall); 0: none
	recoverPSN qp.PSN        // p+1: a go-back round covers the PSNs before p (maxSentPSN when it started); 0: none
	goBackAt   time.Duration // when that round started
	retryStart time.Duration // when the running retransmission timer was started
	rtt        recovery.RTT  // the round-trip estimate (Config.RTO adaptive; rc.go)
	rttBackoff uint8         // Karn: timeouts since the last sample, each doubling the RTO (adaptive)
}

// respCtx is the responder's state (responder.go; rxe's qp->resp).
type respCtx struct {
	ePSN    qp.PSN
	msn     qp.MSN
	msg     respMsg
	resNext int
	goError bool   // a class C error NAK is queued: the QP moves to ERR once it is sent
	recvSN  uint32 // receive WQE sequence number of the receive queue's head (IRN §5.3.2)
}

// poisoned is what an evicted context's on-chip copy holds: values that
// break any transfer that used them without a fill.
var poisoned = hwContext{
	connCtx: connCtx{mtu: 256, destQPN: 0xBAD, maxRdAtomic: 1, maxDestRdAtomic: 1},
	reqCtx: reqCtx{sqStart: 0xBAD0BAD, nextPSN: 0xBADBAD, cur: 0xBAD0BAD, curPSN: 0xBADBAD, maxSentPSN: 0xBADBAD,
		nextRecvSN: 0xBADBAD, rttPSN: 0xBADBAD, rttSentAt: -time.Hour},
	compCtx: compCtx{unacked: 0x0BAD0B, retryStart: -time.Hour, rtt: recovery.RTT{SRTT: time.Hour, RTTVar: time.Hour, Valid: true}},
	respCtx: respCtx{ePSN: 0xBADBAD, msn: 0xBAD, msg: respMsg{active: true, off: 0xBAD}, resNext: 0, recvSN: 0xBAD0BA},
}

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Scheme is the name of the QP's loss recovery.
func (q *QP) Scheme() string { return q.scheme.Name() }

// State is the current QP state.
func (q *QP) State() qp.State { return q.state }

var (
	ErrBadQP      = errors.New("dataplane: no such QP")
	ErrBadCQ      = errors.New("dataplane: QP needs a send and a receive CQ")
	ErrQueueSize  = errors.New("dataplane: queue size must be 1 to 65536")
	ErrTransition = errors.New("dataplane: illegal QP state transition")
	ErrAttrs      = errors.New("dataplane: modify QP attribute mask does not match the transition")
	ErrAttrValue  = errors.New("dataplane: modify QP attribute out of range")
	ErrQueueFull  = errors.New("dataplane: work queue full")
	ErrPostState  = errors.New("dataplane: QP state does not allow posting")
	ErrBadWR      = errors.New("dataplane: malformed work request")
)

func checkAttrValues(a *QPAttr, mask qp.AttrMask) error {
	switch {
	case mask&qp.AttrPathMTU != 0 && a.PathMTU.Bytes() == 0:
		return errors.Join(ErrAttrValue, errors.New("path MTU must be 256 to 4096"))
	case mask&qp.AttrRQPSN != 0 && !a.RQPSN.Valid(), mask&qp.AttrSQPSN != 0 && !a.SQPSN.Valid():
		return errors.Join(ErrAttrValue, errors.New("PSN wider than 24 bits"))
	case mask&qp.AttrRetryCnt != 0 && a.RetryCnt > 7, mask&qp.AttrRNRRetry != 0 && a.RNRRetry > 7:
		return errors.Join(ErrAttrValue, errors.New("retry counts are 0 to 7"))
	case mask&qp.AttrMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return errors.Join(ErrAttrValue, errors.New("RNR timer code is 0 to 31"))
	case mask&qp.AttrTimeout != 0 && a.Timeout > 31:
		return errors.Join(ErrAttrValue, errors.New("timeout is 0 to 31"))
	case mask&qp.AttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > MaxRdAtomic,
		mask&qp.AttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > MaxRdAtomic:
		return errors.Join(ErrAttrValue, errors.New("max_rd_atomic is at most 16"))
	case mask&qp.AttrAV != 0 && !a.AV.DGID.IsValid():
		return errors.Join(ErrAttrValue, errors.New("address vector needs a destination GID"))
	}
	return nil
}

// udpSourcePort is the per-QP entropy RoCEv2 puts in the UDP source port
// (IBA A17.3.3: 0xC000 | a 14-bit flow hash), so ECMP spreads QPs.
func udpSourcePort(qpn, dqpn uint32) uint16 {
	h := qpn*0x9E3779B1 ^ dqpn
	h ^= h >> 16
	return 0xC000 | uint16(h&0x3FFF)
}

func mtuEnum(b uint32) qp.MTU {
	m, _ := qp.MTUFromBytes(int(b))
	return m
}

// ackTimeout is the local ACK timeout of IBA §9.7.6.1.3: 4.096 µs * 2^code;
// code 0 disables it.
func ackTimeout(code uint8) (time.Duration, bool) {
	if code == 0 {
		return 0, false
	}
	return time.Duration(4096<<code) * time.Nanosecond, true
}

// rnrTimerTable is IBA Table 45 (RNR timer field encoding), code -> delay.
var rnrTimerTable = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRDelay returns the delay an RNR timer code stands for.
func RNRDelay(code uint8) time.Duration { return rnrTimerTable[code&31] }

// ackReqOutstanding reports whether a packet that asks for an
// acknowledgement is out and not yet acknowledged (lastAckReq).
func (q *QP) ackReqOutstanding() bool { return q.ackReqOut && !q.lastAckReq.Before(q.unacked) }

// sendWQE is a posted send work request plus the requester's bookkeeping.
// WQEs between the ring head and sqStart have PSNs; the head is the oldest
// not yet completed, and completions retire strictly from the head
// (completions are returned in order).
type sendWQE struct {
	wr       qp.SendWR
	length   uint32
	firstPSN qp.PSN
	lastPSN  qp.PSN
	recvSN   uint32 // the receive WQE it consumes at the responder (SEND, WRITE with immediate)
}

func (w *sendWQE) isReadOrAtomic() bool {
	return w.wr.Opcode == qp.WRRDMARead || w.wr.Opcode.IsAtomic()
}

// consumesRecvWQE reports whether w uses up a receive WQE at the
// responder, in posting order (IRN §5.3.2).
func (w *sendWQE) consumesRecvWQE() bool {
	switch w.wr.Opcode {
	case qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWriteWithImm:
		return true
	}
	return false
}

// contains reports whether psn is one of w's PSNs.
func (w *sendWQE) contains(psn qp.PSN) bool {
	return psn.Diff(w.firstPSN) >= 0 && psn.Diff(w.lastPSN) <= 0
}

// nicSendFlags are send flags that only the NIC sets, on work requests it
// makes itself (a StaR client's pulls, starclient.go): no application
// posts them.
const nicSendFlags qp.SendFlags = 3 << 29

func checkSendWR(wr *qp.SendWR) error {
	if wr.Flags&nicSendFlags != 0 {
		return fmt.Errorf("%w: send flags %#x", ErrBadWR, uint32(wr.Flags))
	}
	if wr.NumSGE < 0 || wr.NumSGE > qp.MaxSGE {
		return fmt.Errorf("%w: %d SGEs (max %d)", ErrBadWR, wr.NumSGE, qp.MaxSGE)
	}
	var total uint64
	for _, s := range wr.SGEs() {
		total += uint64(s.Length)
	}
	if total > 1<<31 {
		return fmt.Errorf("%w: message of %d bytes exceeds 2^31", ErrBadWR, total)
	}
	switch wr.Opcode {
	case qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWrite, qp.WRRDMAWriteWithImm, qp.WRRDMARead:
	case qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAndAdd:
		if wr.NumSGE != 1 || wr.SGL[0].Length != 8 {
			return fmt.Errorf("%w: an atomic needs one 8-byte SGE", ErrBadWR)
		}
	default:
		return fmt.Errorf("%w: opcode %v", ErrBadWR, wr.Opcode)
	}
	return nil
}

// packets is how many PSNs w consumes: one per MTU of payload (READ:
// of response), at least one.
func (q *QP) packets(w *sendWQE) uint32 {
	if w.wr.Opcode.IsAtomic() {
		return 1
	}
	return max(1, (w.length+q.mtu-1)/q.mtu)
}

// windowFull applies the scheme's in-flight cap (IRN BDP-FC, §3.2): a new
// packet goes out only while fewer than Window are unacknowledged.
func (q *QP) windowFull() bool {
	win := q.window()
	return win > 0 && int(q.curPSN.Diff(q.unacked)) >= win
}

// window is the QP's in-flight cap in PSNs, 0 for none: the scheme's
// (Sender.Window) or the QP's bound on unacknowledged PSNs, the smaller.
func (q *QP) window() int {
	win := q.sender.Window()
	if m := q.maxUnacked; m > 0 && (win == 0 || m < win) {
		win = m
	}
	return win
}

// windowOut reports whether what is out fills the scheme's in-flight cap:
// windowFull by the PSNs sent, not by the send cursor, which a go-back
// moves back and which sendRequest moves on only after the packet.
func (q *QP) windowOut() bool {
	win := q.window()
	return win > 0 && int(q.maxSentPSN.Diff(q.unacked)) >= win
}

// seekCursor points the send cursor at psn (unacked <= psn <= nextPSN).
func (q *QP) seekCursor(psn qp.PSN) {
	q.curPSN = psn
	for i := q.sq.Head(); i != q.sqStart; i++ {
		if q.sq.At(i).contains(psn) {
			q.cur = i
			return
		}
	}
	q.cur = q.sqStart
}

// wqeIndex returns the ring index of the started WQE that psn belongs to.
func (q *QP) wqeIndex(psn qp.PSN) (uint32, bool) {
	for i := q.sq.Head(); i != q.sqStart; i++ {
		if q.sq.At(i).contains(psn) {
			return i, true
		}
	}
	return 0, false
}

// wqeAt returns the started WQE that psn belongs to, or nil.
func (q *QP) wqeAt(psn qp.PSN) *sendWQE {
	if i, ok := q.wqeIndex(psn); ok {
		return q.sq.At(i)
	}
	return nil
}

// ackReqInterval is how many packets may go out without AckReq: the
// scheme's interval, but at most half its window, so that a window always
// holds a packet that asks to be acknowledged.
func (q *QP) ackReqInterval() int {
	n := q.scheme.Params().AckReqInterval
	if win := q.sender.Window(); win > 0 {
		n = min(n, max(1, win/2))
	}
	return n
}

// recvWQE is a posted receive work request. With out-of-order placement
// the last packet of its message may arrive before the others: its
// completion is then prepared here (IRN §5.3.3's premature CQE, kept in
// host memory with the WQE) and delivered when the expected PSN passes
// lastPSN.
type recvWQE struct {
	wr      qp.RecvWR
	length  uint32
	ready   bool // wc holds the completion of the message ending at lastPSN
	lastPSN qp.PSN
	wc      qp.WC
}

// respMsg is the multi-packet SEND or WRITE being received.
type respMsg struct {
	active bool
	write  bool
	off    uint32 // bytes placed so far
	va     uint64
	rkey   uint32
	dmaLen uint32
}

type resKind uint8

const (
	resNone resKind = iota
	resRead
	resAtomic
)

// resource is one entry of the responder resources ring
// (max_dest_rd_atomic): what a duplicate READ or atomic needs to be
// answered again without being executed twice (IBA §9.7.5.1.3).
type resource struct {
	kind              resKind
	firstPSN, lastPSN qp.PSN
	va                uint64
	rkey              uint32
	length            uint32
	orig              uint64 // atomic: the value returned, kept for duplicates
	gen               uint32 // bumped when the slot is reused; stale queue items are skipped
	start, next       qp.PSN // READ: where the current response stream began and its next PSN
	queued            bool
}

type respKind uint8

const (
	respAck respKind = iota
	respNak
	respRead
	respAtomic
	respReply    // IRN NACK, FaSR SACK or FNACK, MELO NACK: NAK psn, carrying reply
	respReadPull // the one response packet of a READ request with out-of-order placement
)

// respItem is one entry of the ordered response queue.
type respItem struct {
	kind      respKind
	psn       qp.PSN
	syn       bth.Syndrome
	res       int
	gen       uint32
	thenError bool      // class C error: the QP moves to ERR once this NAK is out
	reply     bth.Reply // respReply: its kind and extension header
	va        uint64    // respReadPull: what to read
	rkey      uint32
	length    uint32
}

// stashedReq is a READ or atomic request kept out of order.
type stashedReq struct {
	used   bool
	psn    qp.PSN
	op     bth.Opcode
	reth   bth.RETHFields      // READ
	atomic bth.AtomicETHFields // COMPARE SWAP, FETCH ADD
}

// newStash sizes the stash for a reorder window: slot psn modulo a power
// of two of at least the window is free for every PSN the receiver keeps.
func newStash(window int) []stashedReq {
	n := 1
	for n < window {
		n <<= 1
	}
	return make([]stashedReq, n)
}

func (q *QP) stashSlot(psn qp.PSN) *stashedReq {
	return &q.stash[uint32(psn)&uint32(len(q.stash)-1)]
}

// Star returns q's StaR role (QPInitAttr.Star), fixed when q was made.
func (q *QP) Star() StarRole { return q.star }
