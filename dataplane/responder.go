package dataplane

import (
	"encoding/binary"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
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
	if q.drv != nil {
		return e.driverPostRecv(q, wrs)
	}
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > qp.MaxSGE {
			return i, errorf(q, "WR %d: %w: %d SGEs", i, ErrBadWR, wr.NumSGE)
		}
		if q.state == qp.Err {
			e.pushWC(q.recvCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			continue
		}
		total, ok := e.checkSGL(q, wr.SGEs(), true)
		if !ok {
			return i, errorf(q, "WR %d: %w: SGE not in a locally writable region", i, ErrBadWR)
		}
		w := q.rq.Push()
		if w == nil {
			return i, errorf(q, "%w: %d receive WRs outstanding", ErrQueueFull, q.rq.Cap())
		}
		w.wr, w.length = *wr, total
	}
	if q.shadow != nil && len(q.shadow.sends) > 0 {
		e.starPull(q) // a server SEND was waiting for a RECV
	}
	e.ring() // a responder waiting to RNR-retry has nothing to do, but CQ flushes (and a StaR pull) may
	return len(wrs), nil
}

// respond handles one request packet for q.
func (e *Engine) respond(q *QP, pkt *bth.Packet) {
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
		e.keepOutOfOrder(q, pkt, psn)
	case d < 0:
		e.cnt.DuplicateRequest++
		e.duplicate(q, pkt, psn)
	default:
		e.execute(q, pkt, psn)
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

// placement is where an admitted SEND or WRITE packet goes.
type placement struct {
	rwqe  *recvWQE // SEND: the buffer; WRITE with immediate: the WQE its completion consumes
	off   uint32   // the payload's offset in its message
	dst   []byte   // WRITE: the target bytes
	reth  bth.RETHFields
	total uint32 // the message's length, for its completion
}

// execute runs the request with the expected PSN, then the ones kept
// out of order after it (a window of one when the scheme keeps none).
func (e *Engine) execute(q *QP, pkt *bth.Packet, psn qp.PSN) {
	n := e.executeOne(q, pkt, psn)
	if n == 0 {
		return
	}
	q.ePSN = psn.Add(n)
	walked := q.ooo && e.walkKept(q) // a scheme with no window keeps nothing
	q.receiver.OnInSequence(e.now, q.ePSN)
	e.armReceiverTimer(q)
	// An ACK when asked, and whenever the walk moved the expected PSN over
	// packets kept early (cumulative: they are all in order now). A READ
	// or atomic request is answered by its response; with in-order
	// placement it is acknowledged by nothing else.
	asked := pkt.BTH().AckReq() && (q.ooo || pkt.Info.Flags&(bth.IsSend|bth.IsWrite) != 0)
	if walked || asked {
		e.queueAck(q, q.ePSN.Prev())
	}
}

// executeOne runs the request with the expected PSN psn: checked, then
// executed or placed. It returns how many PSNs it took (a go-back-N READ
// takes one per response packet), or 0 when it was refused or could not
// run and the expected PSN must stay.
func (e *Engine) executeOne(q *QP, pkt *bth.Packet, psn qp.PSN) uint32 {
	var pl placement
	if v := e.admit(q, pkt, true, &pl); v != admitted {
		e.refuse(q, pkt, psn, v, &pl)
		return 0
	}
	f := pkt.Info.Flags
	switch {
	case f&bth.IsRead != 0 && q.ooo:
		e.pushReadPull(q, psn, pkt.RETH().Fields())
		e.endMessage(q)
	case f&bth.IsRead != 0:
		return e.read(q, psn, pkt.RETH().Fields())
	case f&bth.IsAtomic != 0:
		if !e.atomic(q, pkt.Opcode(), pkt.AtomicETH().Fields(), psn) {
			return 0
		}
	default:
		if !e.place(q, pkt, psn, &pl) {
			e.refuse(q, pkt, psn, refusedLocalProtection, &pl)
			return 0
		}
		e.finish(q, psn, f&bth.IsLast != 0)
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
func (e *Engine) admit(q *QP, pkt *bth.Packet, inOrder bool, pl *placement) verdict {
	f := pkt.Info.Flags
	if !q.ooo {
		// Opcode sequence (rxe check_op_seq): a message in progress
		// continues with MIDDLE or LAST of its own kind; otherwise only a
		// FIRST, ONLY, READ or atomic may come.
		if q.msg.active {
			kind := bth.IsSend
			if q.msg.write {
				kind = bth.IsWrite
			}
			if f&kind == 0 || f&bth.IsFirst != 0 {
				return refusedInvalid
			}
		} else if f&(bth.IsSend|bth.IsWrite) != 0 && f&bth.IsFirst == 0 {
			return refusedInvalid
		}
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
		if q.ooo && r.DMALen() > q.mtu { // one response packet per READ request
			return refusedInvalid
		}
		if _, ok := e.remoteSlice(q, r.RKey(), r.VA(), r.DMALen(), qp.AccessRemoteRead); !ok {
			return refusedAccess
		}
		return admitted
	case f&bth.IsAtomic != 0:
		a := pkt.AtomicETH()
		if a.VA()&7 != 0 { // atomics need an 8-byte aligned address (rxe RESPST_ERR_MISALIGNED_ATOMIC)
			return refusedInvalid
		}
		if _, ok := e.remoteSlice(q, a.RKey(), a.VA(), 8, qp.AccessRemoteAtomic); !ok {
			return refusedAccess
		}
		return admitted
	case f&(bth.IsSend|bth.IsWrite) == 0:
		return refusedInvalid
	}
	// SEND or WRITE: where it goes in its message.
	var ahead uint32 // receive WQEs past the head that its own is
	first, last := f&bth.IsFirst != 0, f&bth.IsLast != 0
	n := uint32(len(pkt.Payload()))
	switch {
	case q.ooo && f&bth.IsWrite != 0:
		// Every packet's RETH; past the first, its DMA length counts the
		// message's bytes up to the packet's end, so the packet starts at
		// DMA length - payload (left 0 if that is negative: a MIDDLE or
		// LAST at offset 0 is refused below).
		pl.reth = pkt.RETH().Fields()
		if !first && pl.reth.DMALen >= n {
			pl.off = pl.reth.DMALen - n
		}
		if h := pkt.RWSNETH(); h != nil {
			ahead = (h.RecvSN() - q.recvSN) & qp.PSNMask
		}
	case q.ooo:
		p := pkt.PETH()
		off, ok := p.Offset(q.mtu)
		if !ok {
			return refusedInvalid // past any message
		}
		pl.off, ahead = off, (p.RecvSN()-q.recvSN)&qp.PSNMask
	default:
		if q.msg.active {
			pl.off, pl.reth = q.msg.off, bth.RETHFields{VA: q.msg.va, RKey: q.msg.rkey, DMALen: q.msg.dmaLen}
		}
		if f&bth.IsWrite != 0 && first {
			pl.reth = pkt.RETH().Fields()
		}
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
		whole, ok := e.remoteSlice(q, r.RKey, r.VA, r.DMALen, qp.AccessRemoteWrite)
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
	// (IRN §5.3.2).
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
	// A SEND placed by its PETH, kept out of order perhaps, is checked
	// whole before anything is written; in order without one, the copy
	// checks as it goes (place), as rxe's copy_data does, which spares a
	// second walk over the scatter list per packet.
	if q.ooo {
		if _, ok := e.checkSGL(q, w.wr.SGEs(), true); !ok {
			return refusedLocalProtection
		}
	}
	pl.total = uint32(end)
	return admitted
}

// refuse answers an in-order request that failed admit: RNR NAK, or a
// class C NAK that moves the QP to ERR (rxe do_class_ac_error).
func (e *Engine) refuse(q *QP, pkt *bth.Packet, psn qp.PSN, v verdict, pl *placement) {
	switch v {
	case refusedRNR:
		e.rnrNak(q, psn)
	case refusedInvalid:
		e.classC(q, psn, bth.NakInvalidRequest)
	case refusedAccess:
		e.cnt.RespRemoteAccess++
		e.classC(q, psn, bth.NakRemoteAccessError)
	case refusedLength:
		e.cnt.RespLocalLength++
		e.completeRecv(q, pl.rwqe, qp.WCLocLenErr, qp.WCRecv, 0, pkt)
		e.classC(q, psn, bth.NakInvalidRequest)
	case refusedLocalProtection:
		e.completeRecv(q, pl.rwqe, qp.WCLocProtErr, qp.WCRecv, 0, pkt)
		e.classC(q, psn, bth.NakRemoteOperationalError)
	}
}

// place writes an admitted SEND or WRITE packet's payload. The last packet
// of a message that consumes a receive WQE prepares its completion there,
// and finish delivers it in order; without out-of-order placement the
// packet is in order, so the completion goes out at once and the message
// in progress moves on. It reports false when the copy found the receive
// WQE's memory gone (only possible without out-of-order placement: admit
// checked the scatter list otherwise).
func (e *Engine) place(q *QP, pkt *bth.Packet, psn qp.PSN, pl *placement) bool {
	f := pkt.Info.Flags
	write, last := f&bth.IsWrite != 0, f&bth.IsLast != 0
	payload := pkt.Payload()
	if write {
		copy(pl.dst, payload)
	} else if !e.copySGL(q, pl.rwqe.wr.SGEs(), pl.off, payload, true) {
		return false // in order without a PETH: its receive WQE's memory is gone (admit)
	}
	if !q.ooo {
		r := &pl.reth
		q.msg = respMsg{active: !last, write: write, off: pl.off + uint32(len(payload)), va: r.VA, rkey: r.RKey, dmaLen: r.DMALen}
	}
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
	if !q.ooo {
		// In order, its turn is now: no need to keep it for finish.
		e.pushWC(q.recvCQ, wc)
		e.popRecv(q)
		e.cnt.RDMARecvs++
		return true
	}
	w.ready, w.lastPSN, w.wc = true, psn, wc
	return true
}

// finish runs the in-order actions of the SEND or WRITE packet psn that
// ends its message (IRN §5.3.3): the MSN moves, and the receive WQE whose
// message ends here completes.
func (e *Engine) finish(q *QP, psn qp.PSN, last bool) {
	if !last {
		return
	}
	if w := q.rq.Front(); w != nil && w.ready && w.lastPSN == psn {
		e.pushWC(q.recvCQ, w.wc)
		e.popRecv(q)
		e.cnt.RDMARecvs++
	}
	e.endMessage(q)
}

// read queues the responses of an admitted go-back-N READ request, one
// per MTU of its length, in the responder resources ring (rxe's
// resources, max_dest_rd_atomic of them); it returns how many PSNs the
// request takes.
func (e *Engine) read(q *QP, psn qp.PSN, reth bth.RETHFields) uint32 {
	npkts := max(1, (reth.DMALen+q.mtu-1)/q.mtu)
	r, idx := e.newResource(q)
	*r = resource{kind: resRead, firstPSN: psn, lastPSN: psn.Add(npkts - 1), va: reth.VA, rkey: reth.RKey, length: reth.DMALen, gen: r.gen + 1, start: psn, next: psn}
	e.queueRead(q, idx)
	e.endMessage(q)
	return npkts
}

// atomic executes a COMPARE SWAP or FETCH ADD and queues its ACK; it
// reports whether it did (false: a class C NAK is queued).
func (e *Engine) atomic(q *QP, op bth.Opcode, a bth.AtomicETHFields, psn qp.PSN) bool {
	if a.VA&7 != 0 { // atomics need an 8-byte aligned address (rxe RESPST_ERR_MISALIGNED_ATOMIC)
		e.classC(q, psn, bth.NakInvalidRequest)
		return false
	}
	mem, ok := e.remoteSlice(q, a.RKey, a.VA, 8, qp.AccessRemoteAtomic)
	if !ok {
		e.cnt.RespRemoteAccess++
		e.classC(q, psn, bth.NakRemoteAccessError)
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
	r, idx := e.newResource(q)
	*r = resource{kind: resAtomic, firstPSN: psn, lastPSN: psn, orig: orig, gen: r.gen + 1}
	r.queued = e.pushResp(q, respItem{kind: respAtomic, res: idx, gen: r.gen})
	e.endMessage(q)
	return true
}

// duplicate answers a request the responder has already executed
// (IBA §9.7.5.1.3, rxe duplicate_request).
func (e *Engine) duplicate(q *QP, pkt *bth.Packet, psn qp.PSN) {
	f := pkt.Info.Flags
	switch {
	case f&bth.IsRead != 0 && q.ooo:
		e.repeatRead(q, pkt, psn)
	case f&bth.IsRead != 0:
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
				e.abandonAfter(q, psn)
				e.queueRead(q, i)
			}
			return
		}
	case f&bth.IsAtomic != 0:
		for i := range q.res {
			r := &q.res[i]
			if r.kind == resAtomic && r.firstPSN == psn {
				if !r.queued { // answer with the saved result; never execute twice
					e.abandonAfter(q, psn)
					r.queued = e.pushResp(q, respItem{kind: respAtomic, res: i, gen: r.gen})
				}
				return
			}
		}
	default: // SEND or WRITE: acknowledge again (C9-105)
		e.ackDuplicate(q, psn)
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
func (e *Engine) abandonAfter(q *QP, psn qp.PSN) {
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
func (e *Engine) ackDuplicate(q *QP, psn qp.PSN) {
	latest := q.ePSN.Prev()
	if psn == latest && q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respAck && tail.psn == latest {
			e.pushResp(q, respItem{kind: respAck, psn: latest})
			return
		}
	}
	e.queueAck(q, latest)
}

// newResource takes the oldest slot of the resources ring.
func (e *Engine) newResource(q *QP) (*resource, int) {
	idx := q.resNext
	q.resNext = (q.resNext + 1) % len(q.res)
	r := &q.res[idx]
	r.queued = false
	return r, idx
}

func (e *Engine) queueRead(q *QP, idx int) {
	r := &q.res[idx]
	r.queued = e.pushResp(q, respItem{kind: respRead, res: idx, gen: r.gen})
}

func (e *Engine) endMessage(q *QP) {
	q.msn = q.msn.Next()
}

// completeRecv retires the head receive WQE w.
func (e *Engine) completeRecv(q *QP, w *recvWQE, status qp.WCStatus, op qp.WCOpcode, n uint32, pkt *bth.Packet) {
	wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: op, ByteLen: n, QPNum: q.qpn, SrcQP: q.destQPN}
	if status == qp.WCSuccess && pkt.Info.Flags&bth.HasImm != 0 {
		wc.ImmData = pkt.Imm().Imm()
		wc.Flags |= qp.WCWithImm
	}
	if pkt.BTH().SolicitedEvent() {
		wc.Flags |= qp.WCSolicited
	}
	e.pushWC(q.recvCQ, wc)
	e.popRecv(q)
}

// popRecv retires the head receive WQE; the next one has the next receive
// WQE sequence number.
func (e *Engine) popRecv(q *QP) {
	q.rq.Pop()
	q.recvSN = (q.recvSN + 1) & qp.PSNMask
}

// rnrNak refuses a request for want of a receive WQE; the expected PSN
// does not move, so the requester resends the same packet later.
func (e *Engine) rnrNak(q *QP, psn qp.PSN) {
	e.cnt.SendRNRErr++
	e.queueNak(q, psn, bth.RNRNakSyndrome(q.minRNRTimer), false)
}

// classC is a fatal responder error (IBA §9.9.3.1.2 class C / rxe
// do_class_ac_error): NAK with the code and move to ERR once it is sent.
func (e *Engine) classC(q *QP, psn qp.PSN, code bth.NakCode) {
	if code == bth.NakInvalidRequest {
		e.cnt.RespInvalidReq++
	}
	e.queueNak(q, psn, bth.NakSyndrome(code), true)
	q.goError = true
}

func (e *Engine) queueAck(q *QP, psn qp.PSN) {
	if q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respAck {
			tail.psn = psn // coalesce: one ACK covers both
			return
		}
	}
	e.pushResp(q, respItem{kind: respAck, psn: psn})
}

func (e *Engine) queueNak(q *QP, psn qp.PSN, syn bth.Syndrome, thenError bool) {
	if q.respQ.Len() > 0 {
		if tail := q.respQ.At(q.respQ.Tail() - 1); tail.kind == respNak && tail.psn == psn && tail.syn == syn {
			tail.thenError = tail.thenError || thenError // the same NAK is already waiting
			return
		}
	}
	e.pushResp(q, respItem{kind: respNak, psn: psn, syn: syn, thenError: thenError})
}

// seqNak queues a PSN-sequence-error NAK for the expected PSN.
func (e *Engine) seqNak(q *QP) {
	e.queueNak(q, q.ePSN, bth.NakSyndrome(bth.NakPSNSeqError), false)
	e.cnt.SeqNakSent++
}

func (e *Engine) pushResp(q *QP, it respItem) bool {
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
func (e *Engine) sendResponse(q *QP) bool {
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
			e.setState(q, qp.Err)
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
		return e.sendReadPull(q, it)
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
	return e.sendReadResponse(q, it)
}

// sendReadResponse sends the next packet of a READ response stream.
func (e *Engine) sendReadResponse(q *QP, it *respItem) bool {
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
	src, ok := e.remoteSlice(q, r.rkey, r.va+uint64(off), n, qp.AccessRemoteRead)
	if !ok { // region deregistered while the response streams
		r.queued = false
		q.respQ.Pop()
		e.cnt.RespRemoteAccess++
		e.classC(q, r.next, bth.NakRemoteAccessError)
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
	e.endTx(q, &t, 1)
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
func (e *Engine) armReceiverTimer(q *QP) {
	if at, ok := q.receiver.Deadline(); ok {
		e.wheel.Schedule(&q.rxTimer, at)
	} else {
		e.wheel.Stop(&q.rxTimer)
	}
}

func (e *Engine) onReceiverTimer(q *QP, now time.Duration) {
	e.touch(q, true)
	if !q.state.CanReceive() || q.goError {
		return
	}
	if q.receiver.OnTimer(now, q.ePSN) {
		e.seqNak(q)
	}
	e.armReceiverTimer(q)
}
