package dataplane

import (
	"encoding/binary"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Out-of-order placement and selective acknowledgement, for connections
// whose scheme keeps packets that arrive early (recovery.Scheme's
// ReorderWindow is not 0: IRN §3.1, §5.3). Such a connection speaks
// softnic's extension opcodes (docs/wire.md), and docs/recovery.md records
// the choices made where the paper leaves room.
//
//   - Every SEND and RDMA WRITE packet carries what placing it needs: a
//     RETH on every WRITE packet (past the first, its DMA length counts
//     the message's bytes up to the packet's end, which gives the offset),
//     the receive WQE sequence number on the last packet of a WRITE with
//     immediate (RWSNETH), and on every SEND packet a PETH with the
//     receive WQE sequence number and the packet's index in its message
//     (offset = index x path MTU). A packet is checked and placed in
//     application memory whatever arrived before it (§5.3.1, §5.3.2).
//   - READ and atomic requests that arrive early wait in the stash, IRN's
//     Read WQE buffer, and execute when the expected PSN reaches them: a
//     READ must see every WRITE before it, and an atomic executes once and
//     in order (§5.3.2, Appendix B.1).
//   - Last-packet actions (the MSN, a receive completion) run in PSN order
//     as the expected PSN walks over the packets kept early (the scheme's
//     2-bitmap, §5.3.3): no completion reaches the application early.
//   - Each packet kept early is answered by a NAK carrying the cumulative
//     acknowledgement and its own PSN (RC_ACKNOWLEDGE_SACK, §3.1). In-order
//     packets are acknowledged as usual, and once more whenever the walk
//     moved the expected PSN over packets kept early.
//   - Every READ request asks for one response packet, so a READ response
//     acknowledges its own PSN and lands by PSN wherever it arrives; the
//     requester's scheme asks again for what is missing like for any lost
//     packet.
//
// A packet that would fail its checks is discarded out of order without a
// NAK (Appendix B.3, B.4): it comes again and fails, or succeeds, in order.
// The checks and the placement are the responder's own (admit, place and
// finish in responder.go: the in-order path is this one with a window of
// one); this file holds what only packets out of order need: keeping
// them, the walk over them, READ pulls, and the requester's side of the
// selective acknowledgements.

// walkKept moves the expected PSN over the requests that were kept out of
// order and now follow it, running their in-order actions; it reports
// whether it moved. A buffering scheme's packets come out of the reorder
// buffer and run as if they had just arrived in order (MELO §3.2.2: copied
// to the application when the hole fills).
func (e *Engine) walkKept(q *QP) bool {
	walked := false
	for !q.goError {
		kept, last := q.receiver.Kept(q.ePSN)
		if !kept {
			break
		}
		psn := q.ePSN
		if q.buffers {
			pkt, ok := e.robTake(q, psn)
			if !ok || e.executeOne(q, &pkt, psn) == 0 {
				break // not there (it comes again) or refused
			}
			e.cnt.ROBDelivered++
		} else if s := q.stashSlot(psn); s.used && s.psn == psn {
			s.used = false
			switch f := bth.Lookup(s.op).Flags; {
			case f&bth.IsRead != 0:
				e.pushReadPull(q, psn, s.reth)
				e.endMessage(q)
			case f&bth.IsAtomic != 0:
				if !e.atomic(q, s.op, s.atomic, psn) {
					return walked
				}
			default: // the last packet of a SEND or WRITE, placed already
				e.finish(q, psn, true)
			}
		} else {
			e.finish(q, psn, last)
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
func (e *Engine) keepOutOfOrder(q *QP, pkt *bth.Packet, psn qp.PSN) {
	var pl placement
	if q.ooo { // a scheme without a reorder window keeps nothing: no checks to run
		if e.admit(q, pkt, false, &pl) != admitted {
			e.cnt.OOODiscarded++ // IRN Appendix B.3, B.4: no NAK, it comes again
			return
		}
		if q.buffers && e.rob != nil && e.rob.full() {
			e.cnt.ROBFull++ // no room off chip: it comes again
			return
		}
	}
	f := pkt.Info.Flags
	act := q.receiver.OnOutOfSequence(e.now, q.ePSN, psn, f&bth.IsLast != 0)
	if act.Keep && q.ooo {
		e.cnt.OOOKept++
		switch {
		case q.buffers:
			e.robPut(q, pkt, psn)
		case f&bth.IsRead != 0:
			*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode(), reth: pkt.RETH().Fields()}
		case f&bth.IsAtomic != 0:
			*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode(), atomic: pkt.AtomicETH().Fields()}
		default:
			e.place(q, pkt, psn, &pl) // admit checked its scatter list
			if f&bth.IsLast != 0 {
				// Its last-packet actions wait for their turn; the stash,
				// in host memory, remembers them for schemes that keep
				// no last-of-message bit on chip (FaSR).
				*q.stashSlot(psn) = stashedReq{used: true, psn: psn, op: pkt.Opcode()}
			}
		}
	}
	switch {
	case act.Reply == recovery.ReplyNone:
	case act.Reply == recovery.ReplySeqNak || !q.ooo: // without the extension opcodes, every reply is the sequence NAK
		e.seqNak(q)
	default:
		e.pushResp(q, respItem{kind: respReply, psn: q.ePSN, reply: wireReply(&act, psn)})
		switch act.Reply {
		case recovery.ReplySack:
			e.cnt.SackNakSent++
		case recovery.ReplyFNack:
			e.cnt.FNakSent++
		case recovery.ReplyHoles:
			e.cnt.HolesNakSent++
		}
	}
	e.armReceiverTimer(q)
}

// pushReadPull queues the one response packet of a READ request.
func (e *Engine) pushReadPull(q *QP, psn qp.PSN, r bth.RETHFields) {
	e.pushResp(q, respItem{kind: respReadPull, psn: psn, va: r.VA, rkey: r.RKey, length: r.DMALen})
}

// repeatRead answers a duplicate READ request by reading again (IBA
// §9.7.5.1.3). A READ request asks for one response packet here, so its
// own RETH says everything, and the access check runs when the response
// is built.
func (e *Engine) repeatRead(q *QP, pkt *bth.Packet, psn qp.PSN) {
	if r := pkt.RETH().Fields(); r.DMALen <= q.mtu {
		e.pushReadPull(q, psn, r)
	}
}

// sendReadPull sends a READ request's response packet.
func (e *Engine) sendReadPull(q *QP, it *respItem) bool {
	psn := it.psn
	src, ok := e.remoteSlice(q, it.rkey, it.va, it.length, qp.AccessRemoteRead)
	if !ok { // the region went away since the request was checked
		q.respQ.Pop()
		e.cnt.RespRemoteAccess++
		e.classC(q, psn, bth.NakRemoteAccessError)
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

// The requester.

// onSelectiveAck: an ACK with PSN psn says the responder holds every
// request up to psn.
func (e *Engine) onSelectiveAck(q *QP, psn qp.PSN) {
	if !e.responseInWindow(q, psn) {
		return
	}
	before := q.unacked
	e.sackThrough(q, psn.Next())
	e.settle(q, before)
}

// sackNakValid checks a NAK with a selective acknowledgement naming sack
// while the responder expects psn.
func (e *Engine) sackNakValid(q *QP, psn, sack qp.PSN, pkt *bth.Packet) bool {
	syn := pkt.AETH().Syndrome()
	switch {
	case syn.Kind() != bth.NakKind || syn.NakCode() != bth.NakPSNSeqError || !sack.After(psn) || !sack.Before(q.maxSentPSN):
		e.cnt.RcvdBadResponse++
		return false
	case psn.Before(q.unacked):
		e.cnt.RcvdStaleAck++
		return false
	}
	return true
}

// sackKind is how a selective acknowledgement of psn counts: a READ or
// atomic request is only held until its response comes.
func (q *QP) sackKind(psn qp.PSN) recovery.SackKind {
	if w := q.wqeAt(psn); w != nil && w.isReadOrAtomic() {
		return recovery.Held
	}
	return recovery.Received
}

// onSackNak handles an IRN NACK or a FaSR SACK: the responder expects psn
// and holds sack (IRN §3.1; FaSR §III-B2 with its lost-cnt).
func (e *Engine) onSackNak(q *QP, psn qp.PSN, pkt *bth.Packet, r *bth.Reply) {
	sack := qp.PSN(r.SACK.PSN)
	if !e.sackNakValid(q, psn, sack, pkt) {
		return
	}
	e.cnt.RcvdSackNak++
	before := q.unacked
	e.sackThrough(q, psn)
	e.advanceSelective(q) // the scheme hears the cumulative acknowledgement first
	e.feedback(q, before, recovery.Feedback{Kind: recovery.ReplySack, Cum: psn, PSN: sack, SackKind: q.sackKind(sack),
		LostCnt: r.SACK.LostCnt, Overflow: r.Overflow})
}

// onFNak handles FaSR's FNACK: the responder dropped the retransmission
// sack because one before it was lost (§III-D).
func (e *Engine) onFNak(q *QP, psn qp.PSN, pkt *bth.Packet, r *bth.Reply) {
	sack := qp.PSN(r.SACK.PSN)
	if !e.sackNakValid(q, psn, sack, pkt) {
		return
	}
	e.cnt.RcvdFNak++
	before := q.unacked
	e.sackThrough(q, psn)
	e.advanceSelective(q) // the scheme hears the cumulative acknowledgement first
	e.feedback(q, before, recovery.Feedback{Kind: recovery.ReplyFNack, Cum: psn, PSN: sack})
}

// onHolesNak handles MELO's NACK (§3.2.4): the responder expects psn, has
// received up to high, and lacks the (at most three) most recent holes.
// What lies between the holes, and between the last hole and high, it
// holds; what lies before the oldest reported hole, if that hole does not
// start at psn, this NACK does not say.
func (e *Engine) onHolesNak(q *QP, psn qp.PSN, pkt *bth.Packet, r *bth.Reply, ok bool) {
	high := qp.PSN(r.Holes.High)
	if !e.sackNakValid(q, psn, high, pkt) {
		return
	}
	if !ok { // a hole past high, or two overlapping (bth.HolesETH.Fields)
		e.cnt.RcvdBadResponse++
		return
	}
	holes := schemeHoles(&r.Holes)
	e.cnt.RcvdHolesNak++
	before := q.unacked
	e.sackThrough(q, psn)
	e.advanceSelective(q) // the scheme hears the cumulative acknowledgement first
	e.feedback(q, before, recovery.Feedback{Kind: recovery.ReplyHoles, Cum: psn, High: high, Holes: holes, Messages: (*qpMessages)(q)})
}

// feedback hands a checked reply to the sender (recovery.Sender.OnFeedback),
// which has heard the cumulative acknowledgement the reply carries
// (sackThrough, advanceSelective), and carries out its decision: the send
// cursor goes back if asked; then the packet settles (settle, once since
// before).
func (e *Engine) feedback(q *QP, before qp.PSN, fb recovery.Feedback) {
	fb.Sent = q.maxSentPSN
	if r := q.sender.OnFeedback(e.now, fb); r.GoBack {
		e.goBack(q, r.GoBackTo)
	}
	e.settle(q, before)
}

// qpMessages is a QP's send queue as recovery.Messages: a WQE is a request,
// its SENDs and WRITEs received when held, its READs and atomics held.
type qpMessages QP

func (m *qpMessages) Message(psn qp.PSN) (qp.PSN, recovery.SackKind, bool) {
	w := (*QP)(m).wqeAt(psn)
	if w == nil {
		return 0, 0, false
	}
	if w.isReadOrAtomic() {
		return w.lastPSN, recovery.Held, true
	}
	return w.lastPSN, recovery.Received, true
}

// sackThrough: the responder has every request before peerCum. Its SENDs
// and WRITEs are acknowledged; its READs and atomics were executed and
// answered before this news, and only their responses acknowledge them:
// one that has not come by the time a later packet is acknowledged was
// lost, which is IRN's loss rule and IBA's implied NAK (§9.7.5.1.2) at once.
// It only tells the scheme; the handler settles the packet (settle).
func (e *Engine) sackThrough(q *QP, peerCum qp.PSN) {
	for i := q.sq.Head(); i != q.sqStart; i++ {
		w := q.sq.At(i)
		if !w.firstPSN.Before(peerCum) {
			break
		}
		if w.isReadOrAtomic() {
			continue
		}
		from, to := w.firstPSN, w.lastPSN
		if from.Before(q.unacked) {
			from = q.unacked
		}
		if !to.Before(peerCum) {
			to = peerCum.Prev()
		}
		q.sender.OnSack(e.now, from, to, recovery.Received, q.maxSentPSN)
	}
}

// advanceSelective moves unacked to the scheme's cumulative
// acknowledgement and retires every WQE wholly before it.
func (e *Engine) advanceSelective(q *QP) {
	cum := q.sender.OnAck(e.now, q.unacked)
	if cum == q.unacked {
		return
	}
	q.unacked = cum
	for q.sq.Head() != q.sqStart && q.sq.Front().lastPSN.Before(cum) {
		e.retire(q, qp.WCSuccess)
	}
}

// settle ends the handling of one response on a selective connection,
// once per packet whatever it carried: the scheme's cumulative
// acknowledgement is taken (advanceSelective), progress since before
// resets the retry budget and rearms the timer (onProgress), and q is
// scheduled if it can send.
func (e *Engine) settle(q *QP, before qp.PSN) {
	e.advanceSelective(q)
	if q.unacked != before {
		e.onProgress(q)
	}
	e.scheduleIfReady(q)
}

// onResponseOutOfOrder places a READ response or an atomic ACK by its PSN,
// in whatever order it arrives. It acknowledges its own request (IRN §5.2's
// read ACK, folded into the response) and says that the responder executed
// everything before it.
func (e *Engine) onResponseOutOfOrder(q *QP, psn qp.PSN, pkt *bth.Packet) {
	if !e.responseInWindow(q, psn) {
		return
	}
	idx, ok := q.wqeIndex(psn)
	if q.state != qp.RTS && q.state != qp.SQD || !ok {
		e.cnt.RcvdBadResponse++
		return
	}
	w := q.sq.At(idx)
	if pkt.Opcode() == bth.RCAtomicAcknowledge {
		if !w.wr.Opcode.IsAtomic() {
			e.cnt.RcvdBadResponse++
			return
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], pkt.AtomicAck().OrigData()) // host order, as the CPU reads it
		if !e.copySGL(q, w.wr.SGEs(), 0, b[:], true) {
			e.failAt(q, idx, qp.WCLocProtErr)
			return
		}
	} else {
		off := uint32(psn.Diff(w.firstPSN)) * q.mtu
		payload := pkt.Payload()
		if w.wr.Opcode != qp.WRRDMARead || uint32(len(payload)) != min(q.mtu, w.length-off) {
			e.cnt.RcvdBadResponse++
			return
		}
		if !e.copySGL(q, w.wr.SGEs(), off, payload, true) {
			e.failAt(q, idx, qp.WCLocProtErr)
			return
		}
	}
	if psn != q.unacked {
		e.cnt.OOOResponses++
	}
	before := q.unacked
	e.sackThrough(q, psn)
	e.advanceSelective(q)
	q.sender.OnSack(e.now, psn, psn, recovery.Answered, q.maxSentPSN)
	e.settle(q, before)
}

// put stores pkt for q's PSN psn; false if the buffer is full.
func (e *Engine) robPut(q *QP, pkt *bth.Packet, psn qp.PSN) bool {
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
func (e *Engine) robTake(q *QP, psn qp.PSN) (bth.Packet, bool) {
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
