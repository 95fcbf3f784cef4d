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
	if q.drv != nil {
		return e.driverPostSend(q, wrs)
	}
	e.touch(q, false) // the doorbell makes the NIC read the context
	for i := range wrs {
		wr := &wrs[i]
		if err := checkSendWR(wr); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		if err := checkStarWR(q, wr); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.sendCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(wr.Opcode), QPNum: q.qpn})
			continue
		}
		w := q.sq.Push()
		if w == nil {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, q.sq.Cap())
		}
		w.wr = *wr
		for _, s := range wr.SGEs() {
			w.length += s.Length
		}
	}
	if e.requestReady(q) {
		e.schedule(q)
		e.ring()
	}
	return len(wrs), nil
}

// canStart reports whether the next posted WQE may get PSNs now.
func (e *Engine) canStart(q *QP) bool {
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
	if !q.shadowCanStart(w) {
		return false // a StaR SEND waits for its server RECV (starqp.go)
	}
	return uint32(q.nextPSN.Diff(q.unacked))+q.packets(w) < maxOutstandingPSNs
}

// requestReady reports whether q's requester has a packet to send now: a
// retransmission the scheme asks for, or new data within its window.
func (e *Engine) requestReady(q *QP) bool {
	if q.state != qp.RTS || q.rnrWait {
		return false
	}
	if _, ok := q.sender.NextRetransmit(); ok || q.stPending != 0 {
		return true // a retransmission or ST copy does not add to what is in flight
	}
	return !q.windowFull() && (q.curPSN != q.nextPSN || e.canStart(q))
}

// startWQE gives the next posted WQE its PSNs. A bad local SGL completes it
// with LOC_PROT_ERR and moves the QP to ERR, as an RNIC does.
func (e *Engine) startWQE(q *QP) bool {
	idx := q.sqStart
	w := q.sq.At(idx)
	writesLocal := w.isReadOrAtomic()
	if _, ok := e.checkSGL(q, w.wr.SGEs(), writesLocal); !ok {
		e.failAt(q, idx, qp.WCLocProtErr)
		return false
	}
	if !e.shadowStart(q, idx, w) {
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
func (e *Engine) sendRequest(q *QP) bool {
	if q.stPending != 0 {
		// The second copy of a message's last packet (ST) found the ring
		// full: it goes first now, or not at all if already acknowledged.
		psn := q.stPending - 1
		if w := q.wqeAt(psn); w != nil && !psn.Before(q.unacked) && psn.Before(q.maxSentPSN) {
			return e.sendPacket(q, w, psn, 1)
		}
		q.stPending = 0
		e.cnt.STCopySkipped++ // acknowledged before there was room: counted, never silent
	}
	if psn, ok := q.sender.NextRetransmit(); ok {
		w := q.wqeAt(psn)
		if w != nil && !psn.Before(q.unacked) && psn.Before(q.maxSentPSN) {
			if !e.sendPacket(q, w, psn, 0) {
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
		if !e.canStart(q) || !e.startWQE(q) {
			return false
		}
	}
	w := q.sq.At(q.cur)
	for !w.contains(q.curPSN) {
		q.cur++
		w = q.sq.At(q.cur)
	}
	psn := q.curPSN
	if !e.sendPacket(q, w, psn, 0) {
		return false
	}
	if w.wr.Opcode == qp.WRRDMARead && !q.ooo {
		q.curPSN = w.lastPSN.Next() // one request covers the rest of the READ
	} else {
		q.curPSN = psn.Next()
	}
	return true
}

// Opcode selection for SEND and WRITE by position in the message
// (IBA Table 35).
// With out-of-order placement every packet is softnic's extension of the
// same opcode (docs/wire.md).
var (
	sendOps  = [2][4]bth.Opcode{{bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCSendOnly}, {bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLastImm, bth.RCSendOnlyImm}}
	writeOps = [2][4]bth.Opcode{{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteOnly}, {bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLastImm, bth.RCWriteOnlyImm}}

	sendOpsOOO  = [2][4]bth.Opcode{{bth.RCSendFirstOOO, bth.RCSendMiddleOOO, bth.RCSendLastOOO, bth.RCSendOnlyOOO}, {bth.RCSendFirstOOO, bth.RCSendMiddleOOO, bth.RCSendLastImmOOO, bth.RCSendOnlyImmOOO}}
	writeOpsOOO = [2][4]bth.Opcode{{bth.RCWriteFirstOOO, bth.RCWriteMiddleOOO, bth.RCWriteLastOOO, bth.RCWriteOnlyOOO}, {bth.RCWriteFirstOOO, bth.RCWriteMiddleOOO, bth.RCWriteLastImmOOO, bth.RCWriteOnlyImmOOO}}
)

const (
	posFirst = iota
	posMiddle
	posLast
	posOnly
)

func position(i, n uint32) int {
	switch {
	case n == 1:
		return posOnly
	case i == 0:
		return posFirst
	case i == n-1:
		return posLast
	}
	return posMiddle
}

// sendPacket builds and transmits the packet of w with PSN psn.
// copies is how many times to send it; 0 asks the scheme (ST).
func (e *Engine) sendPacket(q *QP, w *sendWQE, psn qp.PSN, copies int) bool {
	i := uint32(psn.Diff(w.firstPSN))
	n := q.packets(w)
	off := i * q.mtu
	last := i == n-1
	var t txPacket
	respond := true // the responder answers this packet at once (RTT timing)
	switch {
	case q.star == StarClient:
		// An RDP or a GD, answered at once by an RA or an SDP.
		if !e.beginStar(&t, q, w, psn, off) {
			return false
		}
	case w.wr.Opcode == qp.WRRDMARead:
		// A retried READ asks only for what is missing (IBA §9.7.5.1.4).
		// With out-of-order placement every READ request asks for one
		// response packet, so that the request and its response share
		// one PSN that the scheme tracks like any other (docs/recovery.md).
		length := w.length - off
		if q.ooo {
			length = min(q.mtu, length)
		}
		if !e.beginTx(&t, q, bth.RCReadRequest, psn, false, 0) {
			return false
		}
		bth.RETH(t.roce[t.info.RETHOff:]).Encode(&bth.RETHFields{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: length})
		last = true
	case w.wr.Opcode.IsAtomic():
		op := bth.RCFetchAdd
		if w.wr.Opcode == qp.WRAtomicCmpAndSwp {
			op = bth.RCCompareSwap
		}
		if !e.beginTx(&t, q, op, psn, true, 0) {
			return false
		}
		bth.AtomicETH(t.roce[t.info.AtomicETHOff:]).Encode(&bth.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: swapAdd(&w.wr), Compare: w.wr.CompareAdd})
	default:
		imm := 0
		if w.wr.Opcode == qp.WRSendWithImm || w.wr.Opcode == qp.WRRDMAWriteWithImm {
			imm = 1
		}
		pos := position(i, n)
		write := w.wr.Opcode == qp.WRRDMAWrite || w.wr.Opcode == qp.WRRDMAWriteWithImm
		var op bth.Opcode
		switch {
		case q.ooo && write:
			op = writeOpsOOO[imm][pos]
		case q.ooo:
			op = sendOpsOOO[imm][pos]
		case write:
			op = writeOps[imm][pos]
		default:
			op = sendOps[imm][pos]
		}
		size := min(q.mtu, w.length-off)
		// A selective retransmission asks for an ACK: in recovery the
		// requester must learn that the hole is filled (IRN §5.2 ACKs every
		// packet; softnic coalesces, so it asks where it matters).
		ackReq := last || q.noAck+1 >= q.ackReqInterval() || q.ooo && psn.Before(q.maxSentPSN)
		if !e.beginTx(&t, q, op, psn, ackReq, int(size)) {
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
		if !e.copySGL(q, w.wr.SGEs(), off, t.payload, false) {
			e.failAt(q, q.sq.Head(), qp.WCLocProtErr) // region deregistered under us
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
	if sent := e.endTx(q, &t, copies); sent < copies {
		q.stPending = psn + 1 // the ring filled up between the copies
	}
	if dup {
		return true // ST's second copy: neither new nor a retransmission
	}
	if q.nakHeld == psn+1 {
		q.nakHeld = 0 // the NAKed packet is out again: a new NAK for it is news
	}
	if respond {
		// What the answer must reach: a go-back-N READ request is answered
		// by responses up to its last PSN, and the timer waits for them all.
		answered := psn
		if w.wr.Opcode == qp.WRRDMARead && !q.ooo {
			answered = w.lastPSN
		}
		if !q.ackReqOutstanding() || q.lastAckReq.Before(answered) {
			q.lastAckReq, q.ackReqOut = answered, true // armRetry: the timer waits for its answer
		}
	}
	if psn.Before(q.maxSentPSN) {
		e.cnt.Retransmits++
		e.rttResent(q, psn)
	} else {
		e.rttSent(q, psn, respond)
		q.maxSentPSN = psn.Next()
		if w.wr.Opcode == qp.WRRDMARead && !q.ooo {
			q.maxSentPSN = w.lastPSN.Next()
		}
	}
	e.armRetry(q)
	return true
}

func swapAdd(wr *qp.SendWR) uint64 {
	if wr.Opcode == qp.WRAtomicCmpAndSwp {
		return wr.Swap
	}
	return wr.CompareAdd
}

// scheduleIfReady schedules q if its requester has something to send.
func (e *Engine) scheduleIfReady(q *QP) {
	if e.requestReady(q) {
		e.schedule(q)
	}
}
