package dataplane

import (
	"errors"
	"net/netip"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/timer"
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
}

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
}

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
	av     AddressVector

	// hwContext is the per-packet transport state: what an RNIC keeps in
	// on-chip SRAM. When the context cache evicts this QP it is written
	// back to host (if dirty) and poisoned on chip; a miss fills it back.
	hwContext
	host  hwContext // the host-memory copy
	cache qp.CacheEntry

	sq         *qp.Ring[sendWQE]  // in host memory, as WQEs are
	rq         *qp.Ring[recvWQE]  // in host memory
	respQ      *qp.Ring[respItem] // responder output queue
	res        []resource         // responder resources ring (max_dest_rd_atomic)
	stash      []stashedReq       // READ and atomic requests kept out of order (selective.go)
	ooo        bool               // the scheme places out of order: extension opcodes on the wire
	buffers    bool               // ... and keeps early packets in the reorder buffer (MELO)
	rob        []int32            // reorder-buffer slot+1 per PSN slot (reorder.go)
	scheme     recovery.Scheme
	sender     recovery.Sender
	receiver   recovery.Receiver
	retryTimer timer.Timer
	rnrTimer   timer.Timer
	rxTimer    timer.Timer
}

// hwContext is the on-chip part of a QP context (see QP).
type hwContext struct {
	// Connection (modify QP).
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

	// Requester (requester.go, completer.go).
	sqStart    uint32 // ring index of the next WQE that has no PSNs yet
	nextPSN    qp.PSN // first PSN of the next WQE to start
	cur        uint32 // ring index of the WQE under the send cursor
	curPSN     qp.PSN // next PSN to (re)transmit
	maxSentPSN qp.PSN // one past the highest PSN ever sent
	unacked    qp.PSN // oldest PSN not yet acknowledged
	noAck      int    // packets sent since the last AckReq
	rdAtomics  int    // started, uncompleted READ and atomic WQEs
	retryLeft  uint8
	rnrLeft    uint8
	rnrWait    bool          // transmission paused until the RNR timer fires
	impliedAt  qp.PSN        // unacked+1 when an implied NAK already went back there; 0: none
	nakHeld    qp.PSN        // p+1 after a NAK for p went back there, until p is resent; 0: none
	nakBackTo  qp.PSN        // p+1: the last sequence NAK went back to p (a repeat of it is no new stall); 0: none
	recoverPSN qp.PSN        // p+1: a go-back round covers the PSNs before p (maxSentPSN when it started); 0: none
	goBackAt   time.Duration // when that round started
	stPending  qp.PSN        // p+1: ST's second copy of packet p waits for ring space; 0: none
	nextRecvSN uint32        // receive WQE sequence number of the next SEND or WRITE with immediate (IRN §5.3.2)
	retryStart time.Duration // when the running retransmission timer was started
	lastAckReq qp.PSN        // the furthest packet sent with AckReq (or answered at once: READ, atomic)
	ackReqOut  bool          // lastAckReq is set
	rtt        recovery.RTT  // the round-trip estimate (Config.RTO adaptive; rtt.go)
	rttPSN     qp.PSN        // p+1: PSN p, sent once at rttSentAt, is being timed; 0: none
	rttSentAt  time.Duration
	rttBackoff uint8 // Karn: timeouts since the last sample, each doubling the RTO (adaptive)

	// Responder (responder.go).
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
	mtu: 256, destQPN: 0xBAD, maxRdAtomic: 1, maxDestRdAtomic: 1,
	sqStart: 0xBAD0BAD, nextPSN: 0xBADBAD, cur: 0xBAD0BAD, curPSN: 0xBADBAD, maxSentPSN: 0xBADBAD,
	unacked: 0x0BAD0B, ePSN: 0xBADBAD, msn: 0xBAD, msg: respMsg{active: true, off: 0xBAD}, resNext: 0,
	nextRecvSN: 0xBADBAD, recvSN: 0xBAD0BA, retryStart: -time.Hour,
	rtt: recovery.RTT{SRTT: time.Hour, RTTVar: time.Hour, Valid: true}, rttPSN: 0xBADBAD, rttSentAt: -time.Hour,
}

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// Scheme is the name of the QP's loss recovery.
func (q *QP) Scheme() string { return q.scheme.Name() }

// schemeFor returns the engine's instance of the named scheme, creating
// it (and charging its shared pools to the SRAM once) on first use.
func (e *Engine) schemeFor(name string) (recovery.Scheme, error) {
	if name == "" || name == e.scheme.Name() {
		return e.scheme, nil
	}
	if s, ok := e.schemes[name]; ok {
		return s, nil
	}
	s, err := recovery.New(name, e.scheme.Params())
	if err != nil {
		return nil, err
	}
	e.schemes[name] = s
	e.cache.AddShared(s.SharedOnChipBytes())
	return s, nil
}

// applyScheme gives q the scheme's halves and what its reorder window
// needs: a scheme that keeps packets out of order needs room for a window
// of them (READ and atomic requests wait in the stash, each one is
// answered by a NAK with a selective acknowledgement), and the QP's
// on-chip context is the base context plus the scheme's per-QP bytes.
func (e *Engine) applyScheme(q *QP, scheme recovery.Scheme) {
	e.releaseScheme(q)
	window := scheme.ReorderWindow()
	if q.respQ != nil {
		q.respQ.Release() // a new scheme's replaces it
	}
	q.respQ = qp.NewRing[respItem](maxRespQueue + 2*window)
	q.ooo = window > 0
	q.stash, q.rob = nil, nil
	if q.ooo {
		q.stash = newStash(window)
	}
	b, ok := scheme.(recovery.Buffering)
	q.buffers = q.ooo && ok && b.BuffersOutOfOrder()
	q.scheme = scheme
	q.sender = scheme.NewSender()
	q.receiver = scheme.NewReceiver()
	sr := q.sender.OnChipBytes() + q.receiver.OnChipBytes()
	base := e.cfg.QPContextBytes
	if e.cfg.RTO == RTOAdaptive {
		base += rttOnChipBytes
	}
	e.cache.SetSize(&q.cache, base+sr, sr)
}

// releaseScheme gives back what q's halves hold of the scheme's shared
// pools and of the reorder buffer (reset, destroy, a new scheme).
func (e *Engine) releaseScheme(q *QP) {
	if q.sender != nil {
		q.sender.Reset(0)
		q.receiver.Reset(0)
	}
	e.robClear(q)
}

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

// CreateQP makes an RC QP in RESET.
func (e *Engine) CreateQP(pd uint32, attr QPInitAttr) (*QP, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, ErrBadCQ
	}
	if attr.MaxSendWR < 1 || attr.MaxSendWR > MaxWR || attr.MaxRecvWR < 1 || attr.MaxRecvWR > MaxWR {
		return nil, ErrQueueSize
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.pds[pd]; !ok {
		return nil, ErrBadPD
	}
	if attr.SendCQ.dead || attr.RecvCQ.dead {
		return nil, ErrCQDestroyed
	}
	scheme, err := e.schemeFor(attr.Scheme)
	if err != nil {
		return nil, err
	}
	for e.qps[e.nextQP] != nil || e.nextQP < 0x10 {
		e.nextQP = (e.nextQP + 1) & qp.PSNMask
	}
	q := &QP{
		qpn:    e.nextQP,
		pd:     pd,
		sendCQ: attr.SendCQ,
		recvCQ: attr.RecvCQ,
		sigAll: attr.SigAll,
		sq:     qp.NewRing[sendWQE](attr.MaxSendWR),
		rq:     qp.NewRing[recvWQE](attr.MaxRecvWR),
	}
	e.applyScheme(q, scheme)
	e.nextQP = (e.nextQP + 1) & qp.PSNMask
	q.host = q.hwContext
	q.cache.Spill = func() { q.host = q.hwContext }
	q.cache.Fill = func() { q.hwContext = q.host }
	q.cache.Evicted = func() {
		q.hwContext = poisoned
		for _, h := range [...]any{q.sender, q.receiver} {
			if ev, ok := h.(recovery.Evictable); ok {
				ev.OnEvict()
			}
		}
	}
	q.retryTimer.Init(func(now time.Duration) { e.onRetryTimeout(q, now) })
	q.rnrTimer.Init(func(now time.Duration) { e.onRNRTimer(q, now) })
	q.rxTimer.Init(func(now time.Duration) { e.onReceiverTimer(q, now) })
	e.qps[q.qpn] = q
	e.pds[pd]++
	q.sendCQ.users++
	q.recvCQ.users++
	return q, nil
}

// ModifyQP moves q through the IB state machine (ibv_modify_qp). The mask
// must name every attribute the transition requires and nothing it does
// not allow.
func (e *Engine) ModifyQP(q *QP, a *QPAttr, mask qp.AttrMask) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qps[q.qpn] != q {
		return ErrBadQP
	}
	e.touch(q, true)
	from, to := q.state, q.state
	if mask&qp.AttrState != 0 {
		to = a.State
	}
	if mask&qp.AttrCurState != 0 && a.CurState != from {
		return errorf(q, "%w: current state is %v, not %v", ErrTransition, from, a.CurState)
	}
	if !qp.CanTransition(from, to) {
		return errorf(q, "%w: %v -> %v", ErrTransition, from, to)
	}
	if to != qp.Reset && to != qp.Err {
		if req := qp.RequiredAttrs(from, to); mask&req != req {
			return errorf(q, "%w: %v -> %v needs mask %#x, got %#x", ErrAttrs, from, to, req, mask)
		}
		if extra := mask &^ (qp.AllowedAttrs(from, to) | qp.RequiredAttrs(from, to)); extra != 0 {
			return errorf(q, "%w: %v -> %v does not take attributes %#x", ErrAttrs, from, to, extra)
		}
	}
	if err := checkAttrValues(a, mask); err != nil {
		return errorf(q, "%w", err)
	}
	if mask&qp.AttrAccessFlags != 0 {
		q.access = a.AccessFlags
	}
	if mask&qp.AttrAV != 0 {
		q.av = a.AV
	}
	if mask&qp.AttrPathMTU != 0 {
		q.mtu = uint32(a.PathMTU.Bytes())
	}
	if mask&qp.AttrDestQPN != 0 {
		q.destQPN = a.DestQPN & qp.PSNMask
	}
	if mask&qp.AttrRQPSN != 0 {
		q.ePSN = a.RQPSN
	}
	if mask&qp.AttrSQPSN != 0 {
		q.nextPSN, q.curPSN, q.unacked, q.maxSentPSN = a.SQPSN, a.SQPSN, a.SQPSN, a.SQPSN
		q.nakHeld, q.nakBackTo, q.impliedAt, q.recoverPSN = 0, 0, 0, 0
	}
	if mask&qp.AttrMaxDestRdAtomic != 0 {
		q.maxDestRdAtomic = max(1, int(a.MaxDestRdAtomic))
		q.res = make([]resource, q.maxDestRdAtomic)
	}
	if mask&qp.AttrMaxQPRdAtomic != 0 {
		q.maxRdAtomic = max(1, int(a.MaxRdAtomic))
	}
	if mask&qp.AttrMinRNRTimer != 0 {
		q.minRNRTimer = a.MinRNRTimer
	}
	if mask&qp.AttrTimeout != 0 {
		q.timeoutCode = a.Timeout
	}
	if mask&qp.AttrRetryCnt != 0 {
		q.retryCnt = a.RetryCnt
	}
	if mask&qp.AttrRNRRetry != 0 {
		q.rnrRetry = a.RNRRetry
	}
	e.setState(q, to)
	return nil
}

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

// setState is the one place QP state changes (STYLE: wireguard-go
// changeState). Entering a state does what the state means.
func (e *Engine) setState(q *QP, to qp.State) {
	from := q.state
	q.state = to
	switch to {
	case qp.Reset:
		e.resetQP(q)
	case qp.RTR:
		if from == qp.Init {
			q.hdr = bth.FrameHeader{
				SrcMAC: e.cfg.MAC, DstMAC: q.av.DMAC,
				Src: e.cfg.Addr, Dst: q.av.DGID,
				SrcPort: udpSourcePort(q.qpn, q.destQPN),
				TOS:     q.av.TrafficClass, TTL: q.av.HopLimit, FlowLabel: q.av.FlowLabel,
			}
			q.receiver.Reset(q.ePSN)
		}
	case qp.RTS:
		if from == qp.RTR {
			q.retryLeft, q.rnrLeft = q.retryCnt, q.rnrRetry
			q.sender.Reset(q.nextPSN)
		}
		if e.requestReady(q) {
			e.schedule(q)
		}
	case qp.Err:
		e.flush(q)
	}
}

// udpSourcePort is the per-QP entropy RoCEv2 puts in the UDP source port
// (IBA A17.3.3: 0xC000 | a 14-bit flow hash), so ECMP spreads QPs.
func udpSourcePort(qpn, dqpn uint32) uint16 {
	h := qpn*0x9E3779B1 ^ dqpn
	h ^= h >> 16
	return 0xC000 | uint16(h&0x3FFF)
}

// resetQP returns q to its just-created state.
func (e *Engine) resetQP(q *QP) {
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Stop(&q.rnrTimer)
	e.wheel.Stop(&q.rxTimer)
	for q.sq.Len() > 0 {
		q.sq.Pop()
	}
	for q.rq.Len() > 0 {
		q.rq.Pop()
	}
	for q.respQ.Len() > 0 {
		q.respQ.Pop()
	}
	q.sqStart, q.cur = q.sq.Head(), q.sq.Head()
	q.noAck, q.rdAtomics, q.rnrWait, q.goError = 0, 0, false, false
	q.msg = respMsg{}
	q.msn = 0
	q.nextRecvSN, q.recvSN = 0, 0
	q.rtt, q.rttPSN, q.rttBackoff = recovery.RTT{}, 0, 0 // a new connection, perhaps a new path
	q.ackReqOut = false
	clear(q.stash)
	e.releaseScheme(q)
	for i := range q.res {
		q.res[i] = resource{}
	}
}

// flush completes every outstanding work request with WR_FLUSH_ERR
// (IBA §10.3.1: entering ERR flushes both queues) and stops the QP.
func (e *Engine) flush(q *QP) {
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Stop(&q.rnrTimer)
	e.wheel.Stop(&q.rxTimer)
	for w := q.sq.Front(); w != nil; w = q.sq.Front() {
		e.pushWC(q.sendCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(w.wr.Opcode), QPNum: q.qpn})
		q.sq.Pop()
	}
	q.sqStart, q.cur = q.sq.Head(), q.sq.Head()
	for w := q.rq.Front(); w != nil; w = q.rq.Front() {
		e.pushWC(q.recvCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
		q.rq.Pop()
	}
	for q.respQ.Len() > 0 {
		q.respQ.Pop()
	}
	q.msg = respMsg{}
	q.rdAtomics = 0
	clear(q.stash)
}

// QueryQP returns q's attributes.
func (e *Engine) QueryQP(q *QP) QPAttr {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touch(q, false)
	return QPAttr{
		State: q.state, CurState: q.state, AccessFlags: q.access, AV: q.av,
		PathMTU: mtuEnum(q.mtu), DestQPN: q.destQPN, RQPSN: q.ePSN, SQPSN: q.nextPSN,
		MaxDestRdAtomic: uint8(q.maxDestRdAtomic), MaxRdAtomic: uint8(q.maxRdAtomic),
		MinRNRTimer: q.minRNRTimer, Timeout: q.timeoutCode, RetryCnt: q.retryCnt, RNRRetry: q.rnrRetry,
	}
}

func mtuEnum(b uint32) qp.MTU {
	m, _ := qp.MTUFromBytes(int(b))
	return m
}

// DestroyQP removes q. Outstanding work is dropped without completions,
// as ibv_destroy_qp does. Its queues are released (deep ones, in
// mappings of their own, go back to the system at once): the engine
// keeps no reference to q after it (timers stopped, off the ready list,
// the context cache and the scheme's pools), and a call on the destroyed
// q finds it gone (ErrBadQP) or its queues empty.
func (e *Engine) DestroyQP(q *QP) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qps[q.qpn] != q {
		return ErrBadQP
	}
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Stop(&q.rnrTimer)
	e.wheel.Stop(&q.rxTimer)
	delete(e.qps, q.qpn)
	e.releaseScheme(q)
	e.cache.Remove(&q.cache)
	e.pds[q.pd]--
	for i := e.readyHead; i < len(e.ready); i++ {
		if e.ready[i] == q {
			n := len(e.ready) - 1
			copy(e.ready[i:], e.ready[i+1:])
			e.ready[n] = nil // no stale reference to a QP behind the slice's end
			e.ready = e.ready[:n]
			break
		}
	}
	q.queued = false
	q.state = qp.Err
	q.sendCQ.users--
	q.recvCQ.users--
	q.sq.Release()
	q.rq.Release()
	q.respQ.Release()
	return nil
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
