package dataplane

import (
	"time"

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
	q.buffers = q.ooo && scheme.Caps().BuffersOutOfOrder
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
	if err := e.checkStarRole(attr.Star, scheme); err != nil {
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
		star:   attr.Star,
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
		q.sender.OnEvict()
		q.receiver.OnEvict()
	}
	q.retryTimer.Init(func(now time.Duration) { e.onRetryTimeout(q, now) })
	q.rnrTimer.Init(func(now time.Duration) { e.onRNRTimer(q, now) })
	q.rxTimer.Init(func(now time.Duration) { e.onReceiverTimer(q, now) })
	q.starTimer.Init(func(time.Duration) { e.onShadowTimer(q) })
	q.eaTimer.Init(func(time.Duration) { e.onEATimer(q) })
	switch q.star {
	case StarServer:
		q.drv = &starDriver{}
	case StarClient:
		q.shadow = &starShadow{}
	}
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
	e.wheel.Stop(&q.starTimer)
	e.wheel.Stop(&q.eaTimer)
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
