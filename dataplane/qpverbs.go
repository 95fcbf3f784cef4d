package dataplane

import (
	"fmt"
	"math"
	"time"

	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is the QP verbs (ibv_create_qp, ibv_modify_qp, ibv_query_qp,
// ibv_destroy_qp) and the choice of a QP's loss-recovery scheme. The
// pipeline never calls them.

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

// ccFor returns the engine's instance of the named congestion control
// ("" is Config.CC), making it on first use.
func (e *Engine) ccFor(name string) (cc.Algorithm, error) {
	if name == "" {
		name = e.cfg.CC
	}
	if a, ok := e.cc[name]; ok {
		return a, nil
	}
	a, err := cc.New(name, e.cfg.CCParams)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	e.cc[name] = a
	return a, nil
}

// CreateQP makes a QP in RESET.
func (e *Engine) CreateQP(pd uint32, attr QPInitAttr) (*QP, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, ErrBadCQ
	}
	if attr.SRQ != nil {
		attr.MaxRecvWR = 1 // ignored with an SRQ: the ring holds the WQE of the message in progress (srq.go)
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
	alg, err := e.ccFor(attr.CC)
	if err != nil {
		return nil, err
	}
	maxUnacked := attr.MaxUnackedPSNs
	if maxUnacked == 0 {
		maxUnacked = e.cfg.MaxUnackedPSNs
	}
	if maxUnacked < 0 || maxUnacked > MaxUnackedLimit {
		return nil, ErrMaxUnacked
	}
	for e.qps[e.nextQP] != nil || e.nextQP < 0x10 {
		e.nextQP = (e.nextQP + 1) & qp.PSNMask
	}
	q := &QP{
		qpn:        e.nextQP,
		pd:         pd,
		sendCQ:     attr.SendCQ,
		recvCQ:     attr.RecvCQ,
		sigAll:     attr.SigAll,
		star:       attr.Star,
		maxUnacked: maxUnacked,
		sq:         qp.NewRing[sendWQE](attr.MaxSendWR),
		rq:         qp.NewRing[recvWQE](attr.MaxRecvWR),
	}
	if attr.SRQ != nil {
		if attr.Type.IsUD() {
			return nil, fmt.Errorf("%w: an SRQ on a UD QP", ErrUDQP)
		}
		if err := attachSRQ(q, attr.SRQ, scheme); err != nil {
			return nil, err
		}
		q.srq = attr.SRQ
	}
	if attr.Type.IsUD() {
		if q.star != StarNone {
			return nil, fmt.Errorf("%w: a StaR role on a UD QP", ErrUDQP)
		}
		q.qpType, q.tr = qp.QPTypeUD, newUD(onNIC{e, q})
	} else if attr.Type != 0 && attr.Type != qp.QPTypeRC {
		return nil, fmt.Errorf("%w: QP type %v", ErrUDQP, attr.Type)
	} else if q.tr, err = newTransport(onNIC{e, q}, q.star); err != nil {
		return nil, err
	}
	if err := q.tr.setScheme(scheme); err != nil {
		return nil, err
	}
	q.tr.setCC(alg)
	e.nextQP = (e.nextQP + 1) & qp.PSNMask
	q.host = q.hwContext
	q.cache.Spill = func() { q.host = q.hwContext }
	q.cache.Fill = func() { q.hwContext = q.host }
	q.cache.Evicted = func() {
		q.hwContext = poisoned
		if q.sender != nil { // a UD QP has no scheme halves
			q.sender.OnEvict()
			q.receiver.OnEvict()
		}
	}
	e.qps[q.qpn] = q
	e.pds[pd]++
	q.sendCQ.users++
	q.recvCQ.users++
	if q.srq != nil {
		q.srq.users++
	}
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
	required, allowed := qp.RequiredAttrs, qp.AllowedAttrs
	if q.qpType.IsUD() {
		required, allowed = qp.RequiredAttrsUD, qp.AllowedAttrsUD
	}
	if to != qp.Reset && to != qp.Err {
		if req := required(from, to); mask&req != req {
			return errorf(q, "%w: %v -> %v needs mask %#x, got %#x", ErrAttrs, from, to, req, mask)
		}
		if extra := mask &^ (allowed(from, to) | required(from, to)); extra != 0 {
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
	if mask&qp.AttrQKey != 0 {
		q.qkey = a.QKey
	}
	e.setState(q, to)
	return nil
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
		QKey: q.qkey,
	}
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
	q.tr.destroy()
	delete(e.qps, q.qpn)
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
	if q.srq != nil {
		q.srq.users--
	}
	q.sq.Release()
	q.rq.Release()
	return nil
}

// RTTInfo is one QP's round-trip estimate and the timeouts it gives now.
type RTTInfo struct {
	recovery.RTT
	// Timing: a PSN is being timed now.
	Timing bool
	// RTOFew and RTOMany are the retransmission timeouts the QP's scheme
	// arms with one packet and with very many packets in flight (IRN's
	// RTO_low and RTO_high; go-back-N's one timeout twice), before
	// backoff; 0 when the QP has no ACK timeout.
	RTOFew, RTOMany time.Duration
}

// QPRTT returns q's round-trip estimate.
func (e *Engine) QPRTT(q *QP) RTTInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touch(q, false)
	info := RTTInfo{RTT: q.rtt, Timing: q.rttPSN != 0}
	if base, ok := ackTimeout(q.timeoutCode); ok {
		info.RTOFew = q.sender.Timeout(base, 1, q.rtt)
		info.RTOMany = q.sender.Timeout(base, math.MaxInt32, q.rtt)
	}
	return info
}
