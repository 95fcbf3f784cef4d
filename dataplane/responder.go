package dataplane

import (
	"encoding/binary"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The responder (rxe_resp.c). A request is checked in a fixed order —
// PSN (in sequence, duplicate, or ahead), opcode sequence, QP access
// rights, packet length against the path MTU, then the resources it needs
// (receive WQE, R_Key, bounds) — and executed only when every check
// passed, so a rejected packet changes nothing. Everything the responder
// sends back (ACK, NAK, READ responses, atomic ACKs) goes through one
// ordered queue per QP, because the requester relies on responses
// arriving in PSN order; consecutive ACKs coalesce in that queue (but
// each copy of an ST pair gets its own, ackDuplicate).

// PostRecv queues receive work requests (ibv_post_recv).
func (e *Engine) PostRecv(q *QP, wrs []qp.RecvWR) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qps[q.qpn] != q {
		return 0, ErrBadQP
	}
	if q.state == qp.Reset {
		return 0, errorf(q, "%w: post receive in RESET", ErrPostState)
	}
	if q.srq != nil {
		return 0, errorf(q, "%w", ErrHasSRQ)
	}
	return q.tr.postRecv(wrs)
}

// respond handles one request packet for q.
func (rc *rcTransport) respond(pkt *bth.Packet) {
	e, q := rc.e, rc.q
	if q.goError {
		e.cnt.RcvdBadState++
		return
	}
	if q.respQ.Full() {
		e.cnt.RespQueueFull++ // the requester will retry; nothing changed
		return
	}
	psn := qp.PSN(pkt.BTH().PSN())
	switch d := psn.Diff(q.ePSN); {
	case d > 0:
		e.cnt.OutOfSeqRequest++
		rc.keepOutOfOrder(pkt, psn)
	case d < 0:
		e.cnt.DuplicateRequest++
		rc.duplicate(pkt, psn)
	default:
		rc.execute(pkt, psn)
	}
}

// verdict is the outcome of a request's checks.
type verdict uint8

const (
	admitted               verdict = iota
	refusedRNR                     // its receive WQE is not posted yet
	refusedInvalid                 // NAK invalid request
	refusedAccess                  // NAK remote access error
	refusedLength                  // longer than its receive WQE: local length error
	refusedLocalProtection         // its receive WQE's memory is gone: remote operational error
)

// execute runs the request with the expected PSN, then the ones kept
// out of order after it (a window of one when the scheme keeps none).
func (rc *rcTransport) execute(pkt *bth.Packet, psn qp.PSN) {
	e, q := rc.e, rc.q
	n := rc.executeOne(pkt, psn)
	if n == 0 {
		return
	}
	q.ePSN = psn.Add(n)
	walked := rc.walkKept() // (a scheme with no window keeps nothing: recovery.Scheme)
	q.receiver.OnInSequence(e.now, q.ePSN)
	rc.armReceiverTimer()
	// An ACK when asked, and whenever the walk moved the expected PSN over
	// packets kept early (cumulative: they are all in order now). A READ
	// or atomic request is answered by its response; with in-order
	// placement it is acknowledged by nothing else.
	if walked || q.acksRequest(pkt) {
		rc.queueAck(q.ePSN.Prev())
	}
}

// executeOne runs the request with the expected PSN psn: checked, then
// executed or placed. It returns how many PSNs it took (a go-back-N READ
// takes one per response packet), or 0 when it was refused or could not
// run and the expected PSN must stay.
func (rc *rcTransport) executeOne(pkt *bth.Packet, psn qp.PSN) uint32 {

	var pl placement
	if v := rc.admit(pkt, true, &pl); v != admitted {
		rc.refuse(pkt, psn, v, &pl)
		return 0
	}
	f := pkt.Info.Flags
	switch {
	case f&bth.IsRead != 0:
		return rc.mode.executeRead(rc, psn, pkt.RETH().Fields())
	case f&bth.IsAtomic != 0:
		if !rc.atomic(pkt.Opcode(), pkt.AtomicETH().Fields(), psn) {
			return 0
		}
	default:
		if !rc.place(pkt, psn, &pl) {
			rc.refuse(pkt, psn, refusedLocalProtection, &pl)
			return 0
		}
		rc.finish(psn, f&bth.IsLast != 0)
	}
	return 1
}

// admit checks a request completely before anything is written, in
// rxe's order: opcode sequence, QP access rights, length against the path
// MTU and the offset, R_Key and bounds, the receive WQE. inOrder is
// whether psn is the expected PSN. With out-of-order placement a SEND or
// WRITE packet says where it goes (a SEND's PETH, a WRITE's RETH, and the
// RWSNETH of a WRITE with immediate's last packet; docs/wire.md); in
// order without it, the message in progress (q.msg) does.
func (rc *rcTransport) admit(pkt *bth.Packet, inOrder bool, pl *placement) verdict {
	e, q := rc.e, rc.q
	f := pkt.Info.Flags
	if !q.inSequence(f) { // opcode sequence (rxe check_op_seq)
		return refusedInvalid
	}
	// QP access rights (rxe check_op_valid) and unsupported operations.
	switch {
	case f&bth.IsWrite != 0 && q.access&qp.AccessRemoteWrite == 0,
		f&bth.IsRead != 0 && q.access&qp.AccessRemoteRead == 0,
		f&bth.IsAtomic != 0 && q.access&qp.AccessRemoteAtomic == 0,
		f&bth.HasIETH != 0: // SEND with invalidate: no memory windows here
		return refusedInvalid
	case f&bth.IsRead != 0:
		r := pkt.RETH()
		if !q.readFits(r.DMALen()) {
			return refusedInvalid
		}
		if _, ok := e.mem.remoteSlice(q.pd, r.RKey(), r.VA(), r.DMALen(), qp.AccessRemoteRead); !ok {
			return refusedAccess
		}
		return admitted
	case f&bth.IsAtomic != 0:
		a := pkt.AtomicETH()
		if a.VA()&7 != 0 { // atomics need an 8-byte aligned address (rxe RESPST_ERR_MISALIGNED_ATOMIC)
			return refusedInvalid
		}
		if _, ok := e.mem.remoteSlice(q.pd, a.RKey(), a.VA(), 8, qp.AccessRemoteAtomic); !ok {
			return refusedAccess
		}
		return admitted
	case f&(bth.IsSend|bth.IsWrite) == 0:
		return refusedInvalid
	}
	// SEND or WRITE: where it goes in its message.
	first, last := f&bth.IsFirst != 0, f&bth.IsLast != 0
	n := uint32(len(pkt.Payload()))
	ahead, ok := q.locate(pkt, pl) // receive WQEs past the head that its own is
	if !ok {
		return refusedInvalid // past any message
	}
	// Length (rxe check_length): FIRST and MIDDLE carry one MTU, LAST
	// 1..MTU, ONLY 0..MTU; the offset starts a message at 0 and moves by
	// whole MTUs.
	switch {
	case first && last && n > q.mtu,
		first && !last && n != q.mtu,
		!first && !last && n != q.mtu,
		!first && last && (n == 0 || n > q.mtu),
		first != (pl.off == 0),
		pl.off%q.mtu != 0:
		return refusedInvalid
	}
	end := uint64(pl.off) + uint64(n)
	if f&bth.IsWrite != 0 {
		r := &pl.reth
		// Every packet checks the range its RETH names (overflow-safe), as
		// a FIRST packet does (rxe check_rkey), and is placed inside it:
		// the whole message for FIRST and ONLY, and for every packet of a
		// message in progress in order; with out-of-order placement a
		// MIDDLE or LAST checks the message up to its own end. A region
		// deregistered mid-message fails the packets after.
		whole, ok := e.mem.remoteSlice(q.pd, r.RKey, r.VA, r.DMALen, qp.AccessRemoteWrite)
		if !ok {
			return refusedAccess
		}
		if end > uint64(r.DMALen) || last && end != uint64(r.DMALen) {
			return refusedInvalid // payload must add up to the DMA length (rxe check_rkey)
		}
		// (With out-of-order placement a MIDDLE or LAST ends at its DMA
		// length by construction, and a LAST's is the message's.)
		pl.dst, pl.total = whole[pl.off:end], r.DMALen
		if f&bth.HasImm == 0 {
			return admitted
		}
	}
	// A SEND, or the last packet of a WRITE with immediate: its receive
	// WQE, the head one in order, found by sequence number out of order
	// (IRN §5.3.2). A QP on an SRQ takes the SRQ's head WQE when it
	// holds none (srq.go).
	if q.srq != nil && q.rq.Len() == 0 && !e.takeSRQ(q) {
		return refusedRNR
	}
	if int(ahead) >= q.rq.Len() {
		return refusedRNR
	}
	if inOrder && ahead != 0 {
		return refusedInvalid // in order, a message's receive WQE is the head one
	}
	w := q.rq.At(q.rq.Head() + ahead)
	pl.rwqe = w
	if f&bth.IsSend == 0 {
		return admitted
	}
	if end > uint64(w.length) {
		return refusedLength
	}
	if !rc.mode.checkRecvSGL(rc, w) {
		return refusedLocalProtection
	}
	pl.total = uint32(end)
	return admitted
}

// refuse answers an in-order request that failed admit: RNR NAK, or a
// class C NAK that moves the QP to ERR (rxe do_class_ac_error).
func (rc *rcTransport) refuse(pkt *bth.Packet, psn qp.PSN, v verdict, pl *placement) {
	e := rc.e
	switch v {
	case refusedRNR:
		rc.rnrNak(psn)
	case refusedInvalid:
		rc.classC(psn, bth.NakInvalidRequest)
	case refusedAccess:
		e.cnt.RespRemoteAccess++
		rc.classC(psn, bth.NakRemoteAccessError)
	case refusedLength:
		e.cnt.RespLocalLength++
		rc.completeRecv(pl.rwqe, qp.WCLocLenErr, qp.WCRecv, 0, pkt)
		rc.classC(psn, bth.NakInvalidRequest)
	case refusedLocalProtection:
		rc.completeRecv(pl.rwqe, qp.WCLocProtErr, qp.WCRecv, 0, pkt)
		rc.classC(psn, bth.NakRemoteOperationalError)
	}
}

// place writes an admitted SEND or WRITE packet's payload. The last packet
// of a message that consumes a receive WQE prepares its completion there,
// and finish delivers it in order; without out-of-order placement the
// packet is in order, so the completion goes out at once and the message
// in progress moves on. It reports false when the copy found the receive
// WQE's memory gone (only possible without out-of-order placement: admit
// checked the scatter list otherwise).
func (rc *rcTransport) place(pkt *bth.Packet, psn qp.PSN, pl *placement) bool {
	e, q := rc.e, rc.q
	f := pkt.Info.Flags
	write, last := f&bth.IsWrite != 0, f&bth.IsLast != 0
	payload := pkt.Payload()
	if write {
		copy(pl.dst, payload)
	} else if !e.mem.copySGL(q.pd, pl.rwqe.wr.SGEs(), pl.off, payload, true) {
		return false // in order without a PETH: its receive WQE's memory is gone (admit)
	}
	q.placed(f, pl, uint32(len(payload)))
	if !last || pl.rwqe == nil {
		return true
	}
	w := pl.rwqe
	op := qp.WCRecv
	if write {
		op = qp.WCRecvRDMAWithImm
	}
	wc := qp.WC{WRID: w.wr.WRID, Status: qp.WCSuccess, Opcode: op, ByteLen: pl.total, QPNum: q.qpn, SrcQP: q.destQPN}
	if f&bth.HasImm != 0 {
		wc.ImmData = pkt.Imm().Imm()
		wc.Flags |= qp.WCWithImm
	}
	if pkt.BTH().SolicitedEvent() {
		wc.Flags |= qp.WCSolicited
	}
	// Delivered when its turn comes (finish): at once in order, when the
	// expected PSN passes it out of order.
	w.ready, w.lastPSN, w.wc = true, psn, wc
	return true
}

// finish runs the in-order actions of the SEND or WRITE packet psn that
// ends its message (IRN §5.3.3): the MSN moves, and the receive WQE whose
// message ends here completes.
func (rc *rcTransport) finish(psn qp.PSN, last bool) {
	e, q := rc.e, rc.q
	if !last {
		return
	}
	if w := q.rq.Front(); w != nil && w.ready && w.lastPSN == psn {
		e.pushWC(q.recvCQ, w.wc)
		rc.popRecv()
		e.cnt.RDMARecvs++
	}
	rc.endMessage()
}

// read queues the responses of an admitted go-back-N READ request, one
// per MTU of its length, in the responder resources ring (rxe's
// resources, max_dest_rd_atomic of them); it returns how many PSNs the
// request takes.
func (rc *rcTransport) read(psn qp.PSN, reth bth.RETHFields) uint32 {
	q := rc.q
	npkts := max(1, (reth.DMALen+q.mtu-1)/q.mtu)
	r, idx := rc.newResource()
	*r = resource{kind: resRead, firstPSN: psn, lastPSN: psn.Add(npkts - 1), va: reth.VA, rkey: reth.RKey, length: reth.DMALen, gen: r.gen + 1, start: psn, next: psn}
	rc.queueRead(idx)
	rc.endMessage()
	return npkts
}

// atomic executes a COMPARE SWAP or FETCH ADD and queues its ACK; it
// reports whether it did (false: a class C NAK is queued).
func (rc *rcTransport) atomic(op bth.Opcode, a bth.AtomicETHFields, psn qp.PSN) bool {
	e, q := rc.e, rc.q
	if a.VA&7 != 0 { // atomics need an 8-byte aligned address (rxe RESPST_ERR_MISALIGNED_ATOMIC)
		rc.classC(psn, bth.NakInvalidRequest)
		return false
	}
	mem, ok := e.mem.remoteSlice(q.pd, a.RKey, a.VA, 8, qp.AccessRemoteAtomic)
	if !ok {
		e.cnt.RespRemoteAccess++
		rc.classC(psn, bth.NakRemoteAccessError)
		return false
	}
	// The engine is the only one executing atomics on its memory, so this
	// is atomic with respect to every NIC operation (IBV_ATOMIC_HCA).
	orig := binary.LittleEndian.Uint64(mem)
	if op == bth.RCCompareSwap {
		if orig == a.Compare {
			binary.LittleEndian.PutUint64(mem, a.SwapAdd)
		}
	} else {
		binary.LittleEndian.PutUint64(mem, orig+a.SwapAdd)
	}
	r, idx := rc.newResource()
	*r = resource{kind: resAtomic, firstPSN: psn, lastPSN: psn, orig: orig, gen: r.gen + 1}
	r.queued = rc.pushResp(respItem{kind: respAtomic, res: idx, gen: r.gen})
	rc.endMessage()
	return true
}

// duplicate answers a request the responder has already executed
// (IBA §9.7.5.1.3, rxe duplicate_request).
func (rc *rcTransport) duplicate(pkt *bth.Packet, psn qp.PSN) {
	q := rc.q
	f := pkt.Info.Flags
	switch {
	case f&bth.IsRead != 0:
		rc.mode.duplicateRead(rc, pkt, psn)
	case f&bth.IsAtomic != 0:
		for i := range q.res {
			r := &q.res[i]
			if r.kind == resAtomic && r.firstPSN == psn {
				if !r.queued { // answer with the saved result; never execute twice
					rc.abandonAfter(psn)
					r.queued = rc.pushResp(respItem{kind: respAtomic, res: i, gen: r.gen})
				}
				return
			}
		}
	default: // SEND or WRITE: acknowledge again (C9-105)
		rc.ackDuplicate(psn)
	}
}

// duplicateStream answers a duplicate READ request in order: the
// responder resource whose stream it asks for again rewinds to it.
func (rc *rcTransport) duplicateStream(pkt *bth.Packet, psn qp.PSN) {
	q := rc.q
	for i := range q.res {
		r := &q.res[i]
		if r.kind != resRead || !(psn.Diff(r.firstPSN) >= 0 && psn.Diff(r.lastPSN) <= 0) {
			continue
		}
		// A retried READ asks for the rest from psn: check it does.
		off := uint32(psn.Diff(r.firstPSN)) * q.mtu
		reth := pkt.RETH()
		if reth.VA() != r.va+uint64(off) || reth.DMALen() != r.length-off || reth.RKey() != r.rkey {
			return
		}
		r.start, r.next = psn, psn // re-read memory from psn (a duplicate READ is executed again)
		if !r.queued {
			rc.abandonAfter(psn)
			rc.queueRead(i)
		}
		return
	}
}

// abandonAfter stops the READ response streams and atomic responses still
// queued for requests after psn, before a duplicate READ or atomic at psn
// is answered: a duplicate comes from a requester that went back to psn
// and resends every request after it, so each of those is answered again,
// in order, when its own duplicate arrives (IBA §9.7.5.1.3: a responder
// re-executes a duplicate READ and need not finish the responses it was
// sending; rxe's duplicate_request replays the duplicate's resource in
// place of the one in progress). Queued behind them, the duplicate's
// response would reach the requester after every later response, each
// one out of order there: the requester went back on them again, and the
// responder queued one more full stream per duplicate (the read_bw
// retransmission storm, docs/transport.md). The abandoned entries are
// skipped when they reach the head of the queue (their generation no
// longer matches); a duplicate of a stream still queued rewinds it in
// place instead (duplicate), as the order is then already right.
func (rc *rcTransport) abandonAfter(psn qp.PSN) {
	e, q := rc.e, rc.q
	for i := range q.res {
		r := &q.res[i]
		if r.queued && (r.kind == resRead || r.kind == resAtomic) && psn.Before(r.firstPSN) {
			r.gen++
			r.queued = false
			e.cnt.RespAbandoned++
		}
	}
}

// ackDuplicate acknowledges a duplicate SEND or WRITE packet again. Like
// any ACK it folds into an ACK still waiting in the response queue, except
// when it repeats the most recent request and that request's own ACK is
// the one waiting: then it gets an ACK frame of its own. That is what
// Improved go-back-N's ST needs (the last packet of a message goes out
// twice so that one lost ACK does not cost a timeout): on a real port both
// copies usually arrive in one receive batch, before the first ACK is out,
// and one coalesced ACK would leave the requester as exposed to its loss
// as with a single copy. A go-back-N resend of many duplicates still
// costs one extra ACK at most, for the one that repeats the latest PSN.
// READ and atomic duplicates keep their own rules (duplicate).
func (rc *rcTransport) ackDuplicate(psn qp.PSN) {
	q := rc.q
	latest := q.ePSN.Prev()
	if psn == latest && q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respAck && tail.psn == latest {
			rc.pushResp(respItem{kind: respAck, psn: latest})
			return
		}
	}
	rc.queueAck(latest)
}

// newResource takes the oldest slot of the resources ring.
func (rc *rcTransport) newResource() (*resource, int) {
	q := rc.q
	idx := q.resNext
	q.resNext = (q.resNext + 1) % len(q.res)
	r := &q.res[idx]
	r.queued = false
	return r, idx
}

func (rc *rcTransport) queueRead(idx int) {
	q := rc.q
	r := &q.res[idx]
	r.queued = rc.pushResp(respItem{kind: respRead, res: idx, gen: r.gen})
}

func (rc *rcTransport) endMessage() {
	q := rc.q
	q.msn = q.msn.Next()
}

// completeRecv retires the head receive WQE w.
func (rc *rcTransport) completeRecv(w *recvWQE, status qp.WCStatus, op qp.WCOpcode, n uint32, pkt *bth.Packet) {
	e, q := rc.e, rc.q
	wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: op, ByteLen: n, QPNum: q.qpn, SrcQP: q.destQPN}
	if status == qp.WCSuccess && pkt.Info.Flags&bth.HasImm != 0 {
		wc.ImmData = pkt.Imm().Imm()
		wc.Flags |= qp.WCWithImm
	}
	if pkt.BTH().SolicitedEvent() {
		wc.Flags |= qp.WCSolicited
	}
	e.pushWC(q.recvCQ, wc)
	rc.popRecv()
}

// popRecv retires the head receive WQE; the next one has the next receive
// WQE sequence number.
func (rc *rcTransport) popRecv() {
	q := rc.q
	q.rq.Pop()
	q.recvSN = (q.recvSN + 1) & qp.PSNMask
}

// rnrNak refuses a request for want of a receive WQE; the expected PSN
// does not move, so the requester resends the same packet later.
func (rc *rcTransport) rnrNak(psn qp.PSN) {
	e, q := rc.e, rc.q
	e.cnt.SendRNRErr++
	rc.queueNak(psn, bth.RNRNakSyndrome(q.minRNRTimer), false)
}

// classC is a fatal responder error (IBA §9.9.3.1.2 class C / rxe
// do_class_ac_error): NAK with the code and move to ERR once it is sent.
func (rc *rcTransport) classC(psn qp.PSN, code bth.NakCode) {
	e, q := rc.e, rc.q
	if code == bth.NakInvalidRequest {
		e.cnt.RespInvalidReq++
	}
	rc.queueNak(psn, bth.NakSyndrome(code), true)
	q.goError = true
	switch code { // raised when the QP enters ERR (sendResponse)
	case bth.NakInvalidRequest:
		q.errEvent = EventQPReqErr
	case bth.NakRemoteAccessError:
		q.errEvent = EventQPAccessErr
	default:
		q.errEvent = EventQPFatal
	}
}

func (rc *rcTransport) queueAck(psn qp.PSN) {
	q := rc.q
	if q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respAck {
			tail.psn = psn // coalesce: one ACK covers both
			return
		}
	}
	rc.pushResp(respItem{kind: respAck, psn: psn})
}

func (rc *rcTransport) queueNak(psn qp.PSN, syn bth.Syndrome, thenError bool) {
	q := rc.q
	if q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respNak && tail.psn == psn && tail.syn == syn {
			tail.thenError = tail.thenError || thenError // the same NAK is already waiting
			return
		}
	}
	rc.pushResp(respItem{kind: respNak, psn: psn, syn: syn, thenError: thenError})
}

// seqNak queues a PSN-sequence-error NAK for the expected PSN.
func (rc *rcTransport) seqNak() {
	e, q := rc.e, rc.q
	rc.queueNak(q.ePSN, bth.NakSyndrome(bth.NakPSNSeqError), false)
	e.cnt.SeqNakSent++
}

func (rc *rcTransport) pushResp(it respItem) bool {
	e, q := rc.e, rc.q
	slot := q.respQ.Push()
	if slot == nil {
		e.cnt.RespQueueFull++
		return false
	}
	*slot = it
	e.schedule(q)
	return true
}

// sendResponse transmits the next packet of the response queue.
func (rc *rcTransport) sendResponse() bool {
	e, q := rc.e, rc.q
	it := q.respQ.Front()
	switch it.kind {
	case respAck, respNak:
		syn := it.syn
		if it.kind == respAck {
			syn = bth.AckSyndrome(bth.CreditCode(q.rq.Len()))
		}
		var t txPacket
		if !e.beginTx(&t, q, bth.RCAcknowledge, it.psn, false, 0) {
			return false
		}
		bth.AETH(t.roce[t.info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: syn, MSN: uint32(q.msn)})
		e.endTx(q, &t, 1)
		e.cnt.AcksSent++
		thenError := it.thenError
		q.respQ.Pop()
		if thenError {
			was := q.state
			e.setState(q, qp.Err)
			if was != qp.Err {
				e.raiseQP(q.errEvent, q)
			}
		}
		return true
	case respReply:
		var t txPacket
		if !e.beginTx(&t, q, it.reply.Opcode(), it.psn, false, 0) {
			return false
		}
		it.reply.Encode(t.roce, uint32(q.msn))
		e.endTx(q, &t, 1)
		e.cnt.AcksSent++
		q.respQ.Pop()
		return true
	case respReadPull:
		return rc.sendReadPull(it)
	case respAtomic:
		r := &q.res[it.res]
		if r.gen != it.gen || r.kind != resAtomic {
			q.respQ.Pop()
			return true
		}
		var t txPacket
		if !e.beginTx(&t, q, bth.RCAtomicAcknowledge, r.firstPSN, false, 0) {
			return false
		}
		bth.AETH(t.roce[t.info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: bth.AckSyndrome(bth.CreditCode(q.rq.Len())), MSN: uint32(q.msn)})
		bth.AtomicAckETH(t.roce[t.info.AtomicAckETHOff:]).SetOrigData(r.orig)
		e.endTx(q, &t, 1)
		r.queued = false
		q.respQ.Pop()
		return true
	}
	return rc.sendReadResponse(it)
}

// sendReadResponse sends the next packet of a READ response stream.
func (rc *rcTransport) sendReadResponse(it *respItem) bool {
	e, q := rc.e, rc.q
	r := &q.res[it.res]
	if r.gen != it.gen || r.kind != resRead {
		q.respQ.Pop()
		return true
	}
	i := uint32(r.next.Diff(r.firstPSN))
	off := i * q.mtu
	n := min(q.mtu, r.length-off)
	var op bth.Opcode
	switch {
	case r.start == r.lastPSN:
		op = bth.RCReadResponseOnly
	case r.next == r.start:
		op = bth.RCReadResponseFirst
	case r.next == r.lastPSN:
		op = bth.RCReadResponseLast
	default:
		op = bth.RCReadResponseMiddle
	}
	src, ok := e.mem.remoteSlice(q.pd, r.rkey, r.va+uint64(off), n, qp.AccessRemoteRead)
	if !ok { // region deregistered while the response streams
		r.queued = false
		q.respQ.Pop()
		e.cnt.RespRemoteAccess++
		rc.classC(r.next, bth.NakRemoteAccessError)
		return true
	}
	var t txPacket
	if !e.beginTx(&t, q, op, r.next, false, int(n)) {
		return false
	}
	if t.info.AETHOff >= 0 {
		bth.AETH(t.roce[t.info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: bth.AckSyndrome(bth.CreditCode(q.rq.Len())), MSN: uint32(q.msn)})
	}
	copy(t.payload, src)
	copies := 1
	if r.next == r.lastPSN {
		// ST (Improved go-back-N): the last packet of every message goes
		// twice, and a READ response is a message the responder sends;
		// its copy covers the loss of the response's tail, which no
		// later packet would reveal (docs/recovery.md, gbn and igbn).
		copies = q.sender.Copies(true)
	}
	e.endTx(q, &t, copies)
	if r.next == r.lastPSN {
		r.queued = false
		q.respQ.Pop()
	} else {
		r.next = r.next.Next()
	}
	return true
}

// armReceiverTimer follows the scheme's receiver deadline (Improved
// go-back-N's CE timer).
func (rc *rcTransport) armReceiverTimer() {
	e, q := rc.e, rc.q
	if at, ok := q.receiver.Deadline(); ok {
		e.wheel.Schedule(&rc.timers.rx, at)
	} else {
		e.wheel.Stop(&rc.timers.rx)
	}
}

func (rc *rcTransport) onReceiverTimer(now time.Duration) {
	e, q := rc.e, rc.q
	e.touch(q, true)
	if !q.state.CanReceive() || q.goError {
		return
	}
	if q.receiver.OnTimer(now, q.ePSN) {
		rc.seqNak()
	}
	rc.armReceiverTimer()
}

// walkKept moves the expected PSN over the requests that were kept out of
// order and now follow it, running their in-order actions; it reports
// whether it moved. A buffering scheme's packets come out of the reorder
// buffer and run as if they had just arrived in order (MELO §3.2.2: copied
// to the application when the hole fills).
func (rc *rcTransport) walkKept() bool {
	e, q := rc.e, rc.q
	walked := false
	for !q.goError {
		kept, last := q.receiver.Kept(q.ePSN)
		if !kept {
			break
		}
		psn := q.ePSN
		if q.buffers {
			pkt, ok := rc.robTake(psn)
			if !ok {
				break // not there: it comes again
			}
			n := len(pkt.Payload())
			if rc.executeOne(&pkt, psn) == 0 {
				break // refused
			}
			e.cnt.ROBDelivered++
			e.cnt.ROBDeliveredBytes += uint64(n)
		} else if s := q.stashSlot(psn); s.used && s.psn == psn {
			s.used = false
			switch f := bth.Lookup(s.op).Flags; {
			case f&bth.IsRead != 0:
				rc.pushReadPull(psn, s.reth)
				rc.endMessage()
			case f&bth.IsAtomic != 0:
				if !rc.atomic(s.op, s.atomic, psn) {
					return walked
				}
			default: // the last packet of a SEND or WRITE, placed already
				rc.finish(psn, true)
			}
		} else {
			rc.finish(psn, last)
		}
		q.ePSN = psn.Next()
		walked = true
	}
	return walked
}

// keepOutOfOrder handles a request ahead of the expected PSN: checked, then
// kept if the scheme says so (placed, stashed until its turn, or put in the
// reorder buffer) and answered as the scheme says: a NAK that acknowledges
// it selectively (IRN, FaSR), MELO's NACK with the latest holes, FaSR's
// FNACK, or a go-back-N NAK.
func (rc *rcTransport) keepOutOfOrder(pkt *bth.Packet, psn qp.PSN) {
	e, q := rc.e, rc.q
	pl := &rc.early // (not on the stack: it goes through rc.mode)
	*pl = placement{}
	if !rc.mode.admitEarly(rc, pkt, pl) {
		return
	}
	f := pkt.Info.Flags
	act := q.receiver.OnOutOfSequence(e.now, q.ePSN, psn, f&bth.IsLast != 0)
	if act.Keep { // (a scheme with no window keeps nothing: recovery.Scheme)
		e.cnt.OOOKept++
		switch {
		case q.buffers:
			rc.robPut(pkt, psn)
		case f&bth.IsRead != 0:
			*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode(), reth: pkt.RETH().Fields()}
		case f&bth.IsAtomic != 0:
			*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode(), atomic: pkt.AtomicETH().Fields()}
		default:
			rc.place(pkt, psn, pl) // admit checked its scatter list
			if f&bth.IsLast != 0 {
				// Its last-packet actions wait for their turn; the stash,
				// in host memory, remembers them for schemes that keep
				// no last-of-message bit on chip (FaSR).
				*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode()}
			}
		}
	}
	switch q.replyFor(act.Reply) {
	case recovery.ReplyNone:
	case recovery.ReplySeqNak:
		rc.seqNak()
	default:
		rc.pushResp(respItem{kind: respReply, psn: q.ePSN, reply: wireReply(&act, psn)})
		switch act.Reply {
		case recovery.ReplySack:
			e.cnt.SackNakSent++
		case recovery.ReplyFNACK:
			e.cnt.FNACKSent++
		case recovery.ReplyHoles:
			e.cnt.HolesNakSent++
		}
	}
	rc.armReceiverTimer()
}

// pushReadPull queues the one response packet of a READ request.
func (rc *rcTransport) pushReadPull(psn qp.PSN, r bth.RETHFields) {

	rc.pushResp(respItem{kind: respReadPull, psn: psn, va: r.VA, rkey: r.RKey, length: r.DMALen})
}

// repeatRead answers a duplicate READ request by reading again (IBA
// §9.7.5.1.3). A READ request asks for one response packet here, so its
// own RETH says everything, and the access check runs when the response
// is built.
func (rc *rcTransport) repeatRead(pkt *bth.Packet, psn qp.PSN) {
	q := rc.q
	if r := pkt.RETH().Fields(); r.DMALen <= q.mtu {
		rc.pushReadPull(psn, r)
	}
}

// sendReadPull sends a READ request's response packet.
func (rc *rcTransport) sendReadPull(it *respItem) bool {
	e, q := rc.e, rc.q
	psn := it.psn
	src, ok := e.mem.remoteSlice(q.pd, it.rkey, it.va, it.length, qp.AccessRemoteRead)
	if !ok { // the region went away since the request was checked
		q.respQ.Pop()
		e.cnt.RespRemoteAccess++
		rc.classC(psn, bth.NakRemoteAccessError)
		return true
	}
	var t txPacket
	if !e.beginTx(&t, q, bth.RCReadResponseOnly, psn, false, int(it.length)) {
		return false
	}
	bth.AETH(t.roce[t.info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: bth.AckSyndrome(bth.CreditCode(q.rq.Len())), MSN: uint32(q.msn)})
	copy(t.payload, src)
	e.endTx(q, &t, 1)
	q.respQ.Pop()
	return true
}

// put stores pkt for q's PSN psn; false if the buffer is full.
func (rc *rcTransport) robPut(pkt *bth.Packet, psn qp.PSN) bool {
	e, q := rc.e, rc.q
	if e.rob == nil {
		e.rob = newReorderBuffer(e.cfg.ReorderSlots)
	}
	b := e.rob
	if q.rob == nil {
		q.rob = make([]int32, len(q.stash))
	}
	i := uint32(psn) & uint32(len(q.rob)-1)
	if old := q.rob[i]; old != 0 { // a stale slot for an older PSN
		b.release(old - 1)
	}
	if b.full() {
		q.rob[i] = 0
		return false
	}
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	n := len(pkt.Buf) - bth.ICRCLen
	if b.slots[s] == nil {
		b.slots[s] = make([]byte, reorderSlotBytes)
	}
	b.slots[s] = b.slots[s][:n]
	copy(b.slots[s], pkt.Buf[:n])
	b.psn[s] = psn
	b.inUse++
	b.peak = max(b.peak, b.inUse)
	q.rob[i] = s + 1
	return true
}

// robTake returns the packet q keeps for psn, parsed, and frees its slot
// for reuse after the caller is done with it (the engine is single
// threaded: the slot is not reused before the next robPut).
func (rc *rcTransport) robTake(psn qp.PSN) (bth.Packet, bool) {
	e, q := rc.e, rc.q
	if q.rob == nil || e.rob == nil {
		return bth.Packet{}, false
	}
	i := uint32(psn) & uint32(len(q.rob)-1)
	s := q.rob[i] - 1
	if s < 0 || e.rob.psn[s] != psn {
		return bth.Packet{}, false
	}
	q.rob[i] = 0
	e.rob.release(s)
	buf := e.rob.slots[s]
	// The stored packet has no ICRC; Parse wants room for one. The slot's
	// capacity has it (its contents are not checked: the ICRC was checked
	// on arrival).
	pkt, err := bth.Parse(buf[:len(buf)+bth.ICRCLen])
	if err != nil {
		return bth.Packet{}, false
	}
	return pkt, true
}
