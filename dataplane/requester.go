package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// maxOutstandingPSNs keeps the requester well inside the half of the PSN
// space that the responder treats as "ahead" (IBA §9.7.1).
const maxOutstandingPSNs = 1 << 22

// PostSend queues send work requests (ibv_post_send). It returns how many
// were queued; on error the request at that index was not.
func (e *Engine) PostSend(q *QP, wrs []qp.SendWR) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qps[q.qpn] != q {
		return 0, ErrBadQP
	}
	switch q.state {
	case qp.RTS, qp.SQD, qp.SQE, qp.Err:
	default:
		return 0, errorf(q, "%w: post send in %v (needs RTS)", ErrPostState, q.state)
	}
	return q.tr.postSend(wrs)
}

// canStart reports whether the next posted WQE may get PSNs now.
func (rc *rcTransport) canStart() bool {
	q := rc.q
	if q.sqStart == q.sq.Tail() {
		return false
	}
	w := q.sq.At(q.sqStart)
	if w.isReadOrAtomic() && q.rdAtomics >= q.maxRdAtomic {
		return false // IBA: at most max_rd_atomic outstanding at the responder
	}
	if w.wr.Flags&qp.SendFence != 0 && q.rdAtomics > 0 {
		return false // IBV_SEND_FENCE waits for earlier READs and atomics
	}
	if rc.hooks != nil && !rc.hooks.canStart(w) {
		return false // a StaR SEND waits for its server RECV (starclient.go)
	}
	return uint32(q.nextPSN.Diff(q.unacked))+q.packets(w) < maxOutstandingPSNs
}

// requestReady reports whether q's requester has a packet to send now: a
// retransmission the scheme asks for, or new data within its window.
func (rc *rcTransport) requestReady() bool {
	q := rc.q
	if q.state != qp.RTS || q.rnrWait {
		return false
	}
	if _, ok := q.sender.NextRetransmit(); ok || q.stPending != 0 {
		return true // a retransmission or ST copy does not add to what is in flight
	}
	return !q.windowFull() && (q.curPSN != q.nextPSN || rc.canStart())
}

// startWQE gives the next posted WQE its PSNs. A bad local SGL completes it
// with LOC_PROT_ERR and moves the QP to ERR, as an RNIC does.
func (rc *rcTransport) startWQE() bool {
	e, q := rc.e, rc.q
	idx := q.sqStart
	w := q.sq.At(idx)
	writesLocal := w.isReadOrAtomic()
	if _, ok := e.mem.checkSGL(q.pd, w.wr.SGEs(), writesLocal); !ok {
		rc.failAt(idx, qp.WCLocProtErr)
		return false
	}
	if rc.hooks != nil && !rc.hooks.start(idx, w) {
		return false
	}
	n := q.packets(w)
	w.firstPSN = q.nextPSN
	w.lastPSN = q.nextPSN.Add(n - 1)
	q.nextPSN = w.lastPSN.Next()
	if w.isReadOrAtomic() {
		q.rdAtomics++
	}
	if w.consumesRecvWQE() {
		w.recvSN = q.nextRecvSN
		q.nextRecvSN = (q.nextRecvSN + 1) & qp.PSNMask
	}
	q.sqStart++
	q.cur = idx
	return true
}

// sendRequest transmits one request packet: a retransmission the scheme
// asks for, else the packet under the send cursor.
func (rc *rcTransport) sendRequest() bool {
	e, q := rc.e, rc.q
	if q.stPending != 0 {
		// The second copy of a message's last packet (ST) found the ring
		// full: it goes first now, or not at all if already acknowledged.
		psn := q.stPending - 1
		if w := q.wqeAt(psn); w != nil && !psn.Before(q.unacked) && psn.Before(q.maxSentPSN) {
			return rc.sendPacket(w, psn, 1)
		}
		q.stPending = 0
		e.cnt.STCopySkipped++ // acknowledged before there was room: counted, never silent
	}
	if psn, ok := q.sender.NextRetransmit(); ok {
		w := q.wqeAt(psn)
		if w != nil && !psn.Before(q.unacked) && psn.Before(q.maxSentPSN) {
			if !rc.sendPacket(w, psn, 0) {
				return false
			}
			q.sender.RetransmittedAt(e.now, psn, q.maxSentPSN)
			return true
		}
		q.sender.Retransmitted(psn) // acknowledged meanwhile: nothing to resend
	}
	if q.windowFull() {
		return false
	}
	if q.curPSN == q.nextPSN {
		if !rc.canStart() || !rc.startWQE() {
			return false
		}
	}
	w := q.sq.At(q.cur)
	for !w.contains(q.curPSN) {
		q.cur++
		w = q.sq.At(q.cur)
	}
	psn := q.curPSN
	if !rc.sendPacket(w, psn, 0) {
		return false
	}
	q.curPSN = q.covers(w, psn).Next() // in order, a READ request covers the rest of the READ
	return true
}

// sendPacket builds and transmits the packet of w with PSN psn.
// copies is how many times to send it; 0 asks the scheme (ST).
func (rc *rcTransport) sendPacket(w *sendWQE, psn qp.PSN, copies int) bool {
	e, q := rc.e, rc.q
	i := uint32(psn.Diff(w.firstPSN))
	n := q.packets(w)
	off := i * q.mtu
	last := i == n-1
	t := &rc.tx // not on the stack: the hook is an interface call
	*t = txPacket{}
	respond := true // the responder answers this packet at once (RTT timing)
	switch {
	case rc.hooks != nil:
		// The transport's own request (StaR's RDP or GD, answered at once
		// by an RA or an SDP).
		if !rc.hooks.beginRequest(t, w, psn, off) {
			return false
		}
	case w.wr.Opcode == qp.WRRDMARead:
		if !e.beginTx(t, q, bth.RCReadRequest, psn, false, 0) {
			return false
		}
		bth.RETH(t.roce[t.info.RETHOff:]).Encode(&bth.RETHFields{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: q.readLength(w, off)})
		last = true
	case w.wr.Opcode.IsAtomic():
		op := bth.RCFetchAdd
		if w.wr.Opcode == qp.WRAtomicCmpAndSwp {
			op = bth.RCCompareSwap
		}
		if !e.beginTx(t, q, op, psn, true, 0) {
			return false
		}
		bth.AtomicETH(t.roce[t.info.AtomicETHOff:]).Encode(&bth.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: swapAdd(&w.wr), Compare: w.wr.CompareAdd})
	default:
		op := q.requestOpcode(w, i, n)
		size := min(q.mtu, w.length-off)
		ackReq := q.asksAck(last, psn)
		if !e.beginTx(t, q, op, psn, ackReq, int(size)) {
			return false
		}
		if t.info.RETHOff >= 0 {
			// The message's RETH; with out-of-order placement on every
			// packet, where past the first the DMA length counts the
			// message's bytes up to this packet's end, which tells the
			// responder the packet's offset (docs/wire.md).
			dmaLen := w.length
			if i > 0 {
				dmaLen = off + size
			}
			bth.RETH(t.roce[t.info.RETHOff:]).Encode(&bth.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: dmaLen})
		}
		if t.info.ImmOff >= 0 {
			bth.ImmDt(t.roce[t.info.ImmOff:]).SetImm(w.wr.ImmData)
		}
		if t.info.PETHOff >= 0 { // a SEND's: its receive WQE and its place in the message
			bth.PETH(t.roce[t.info.PETHOff:]).Encode(&bth.PETHFields{RecvSN: w.recvSN, Index: i})
		}
		if t.info.RWSNETHOff >= 0 { // the last packet of a WRITE with immediate: its receive WQE
			bth.RWSNETH(t.roce[t.info.RWSNETHOff:]).SetRecvSN(w.recvSN)
		}
		if last && w.wr.Flags&qp.SendSolicited != 0 {
			bth.BTH(t.roce).SetSolicitedEvent(true)
		}
		if !e.mem.copySGL(q.pd, w.wr.SGEs(), off, t.payload, false) {
			rc.failAt(q.sq.Head(), qp.WCLocProtErr) // region deregistered under us
			return false
		}
		if ackReq {
			q.noAck = 0
		} else {
			q.noAck++
		}
		respond = ackReq
	}
	dup := copies == 1 && q.stPending == psn+1
	if copies == 0 {
		// ST: the last packet of every message, READ and atomic requests
		// included (a departure, docs/recovery.md "gbn and igbn").
		copies = q.sender.Copies(last)
	}
	q.stPending = 0
	if sent := e.endTx(q, t, copies); sent < copies {
		q.stPending = psn + 1 // the ring filled up between the copies
	}
	if dup {
		return true // ST's second copy: neither new nor a retransmission
	}
	if q.nakHeld == psn+1 {
		q.nakHeld = 0 // the NAKed packet is out again: a new NAK for it is news
	}
	if respond {
		// What the answer must reach: an in-order READ request is answered
		// by responses up to its last PSN, and the timer waits for them all.
		answered := q.covers(w, psn)
		if !q.ackReqOutstanding() || q.lastAckReq.Before(answered) {
			q.lastAckReq, q.ackReqOut = answered, true // armRetry: the timer waits for its answer
		}
	}
	if psn.Before(q.maxSentPSN) {
		e.cnt.Retransmits++
		rc.rttResent(psn)
	} else {
		rc.rttSent(psn, respond)
		q.maxSentPSN = q.covers(w, psn).Next()
	}
	rc.armRetry()
	return true
}

func swapAdd(wr *qp.SendWR) uint64 {
	if wr.Opcode == qp.WRAtomicCmpAndSwp {
		return wr.Swap
	}
	return wr.CompareAdd
}

// scheduleIfReady schedules q if its requester has something to send.
func (rc *rcTransport) scheduleIfReady() {
	e, q := rc.e, rc.q
	if rc.requestReady() {
		e.schedule(q)
	}
}
