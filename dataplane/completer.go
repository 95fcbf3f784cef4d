package dataplane

import (
	"encoding/binary"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The completer (rxe_comp.c): ACKs, NAKs, read responses and atomic ACKs
// move q.unacked forward and retire WQEs from the head of the send queue;
// sequence errors, timeouts and RNR NAKs rewind the send cursor; fatal
// NAKs complete the WQE they name with an error and move the QP to ERR.

// nakStatus maps NAK codes to the status of the failed work request
// (IBA §9.7.5.2.x, Table 44; rxe_comp.c).
var nakStatus = map[bth.NakCode]qp.WCStatus{
	bth.NakInvalidRequest:         qp.WCRemInvReqErr,
	bth.NakRemoteAccessError:      qp.WCRemAccessErr,
	bth.NakRemoteOperationalError: qp.WCRemOpErr,
	bth.NakInvalidRDRequest:       qp.WCRemInvReqErr,
}

// complete handles one response packet for q.
func (e *Engine) complete(q *QP, pkt *bth.Packet) {
	psn := qp.PSN(pkt.BTH().PSN())
	op := pkt.Opcode()
	reply := bth.ReplyOf(op) // softnic's acknowledgements: SACK, FNAK, HOLES
	nakOp := op == bth.RCAcknowledge || reply != bth.ReplyNone
	if !nakOp && pkt.Info.AETHOff >= 0 && pkt.AETH().Syndrome().Kind() != bth.AckKind {
		e.cnt.RcvdBadResponse++ // read responses and atomic ACKs always carry an ACK syndrome
		return
	}
	switch {
	case op == bth.RCAcknowledge:
		syn := pkt.AETH().Syndrome()
		switch syn.Kind() {
		case bth.AckKind:
			if q.ooo {
				e.onSelectiveAck(q, psn)
			} else {
				e.onAck(q, psn)
			}
		case bth.RNRNakKind:
			e.onRNRNak(q, psn, syn.RNRTimer())
		case bth.NakKind:
			e.onNak(q, psn, syn.NakCode())
		default:
			e.cnt.RcvdBadResponse++
		}
	case reply != bth.ReplyNone:
		r, ok := pkt.Reply()
		switch r.Kind {
		case bth.ReplySack:
			e.onSackNak(q, psn, pkt, &r)
		case bth.ReplyFNak:
			e.onFNak(q, psn, pkt, &r)
		case bth.ReplyHoles:
			e.onHolesNak(q, psn, pkt, &r, ok)
		}
	case q.ooo:
		e.onResponseOutOfOrder(q, psn, pkt)
	case op == bth.RCAtomicAcknowledge:
		e.onAtomicAck(q, psn, pkt.AtomicAck().OrigData())
	default: // read response
		e.onReadResponse(q, psn, pkt)
	}
}

// responseInWindow classifies a response PSN: stale (already
// acknowledged), beyond what was ever sent (bogus), or current.
func (e *Engine) responseInWindow(q *QP, psn qp.PSN) bool {
	if psn.Before(q.unacked) {
		e.cnt.RcvdStaleAck++
		return false
	}
	if !psn.Before(q.maxSentPSN) {
		e.cnt.RcvdBadResponse++
		return false
	}
	return true
}

// onAck: an ACK with PSN psn acknowledges every request up to psn.
func (e *Engine) onAck(q *QP, psn qp.PSN) {
	if !e.responseInWindow(q, psn) {
		return
	}
	e.ackThrough(q, psn.Next())
}

// ackThrough retires every SEND/WRITE WQE wholly before upto and moves
// unacked. READs and atomics complete only through their responses, so an
// acknowledgement that passes one that has not completed means its
// response was lost: an implied NAK (rxe check_psn), answered by
// going back to it once.
func (e *Engine) ackThrough(q *QP, upto qp.PSN) {
	progressed := false
	for q.sq.Head() != q.sqStart {
		w := q.sq.Front()
		if w.isReadOrAtomic() {
			// Only an acknowledgement that passes the whole READ/atomic
			// implies its response was lost; the READ's own responses
			// (upto inside it) do not.
			if w.lastPSN.Before(upto) {
				e.impliedNak(q)
			}
			break
		}
		if !w.lastPSN.Before(upto) {
			if q.unacked.Before(upto) {
				q.unacked = upto // part of a long message
				progressed = true
			}
			break
		}
		q.unacked = w.lastPSN.Next()
		e.retire(q, qp.WCSuccess)
		progressed = true
	}
	if progressed {
		q.sender.OnAck(e.now, q.unacked)
		e.onProgress(q)
	}
}

// impliedNak answers a response that passes the oldest unfinished READ or
// atomic response (IBA §9.7.5.1.2: an implied NAK, the missing response
// was lost) by going back to it, once per hole (impliedAt). Inside a
// go-back round that is still working (inRound) it spends no retry: the
// responses of the streams in flight before the round keep arriving out
// of order for a while, and the round's own go-back spent one already.
func (e *Engine) impliedNak(q *QP) {
	if q.impliedAt == q.unacked+1 {
		return
	}
	q.impliedAt = q.unacked + 1 // +1: the zero value means "none"
	e.cnt.ImpliedNakSeqErr++
	if e.inRound(q) || e.countRetry(q) {
		e.goBack(q, q.unacked)
		e.startRound(q)
	}
}

// startRound notes a go-back round: it resends up to maxSentPSN.
func (e *Engine) startRound(q *QP) {
	q.recoverPSN, q.goBackAt = q.maxSentPSN+1, e.now
}

// inRound reports whether a go-back round is still working
// (docs/transport.md, "Retries inside a go-back round"): the requester
// went back less than a hold ago, and the responses to what was
// outstanding then have not all arrived. A go-back inside it spends no
// retry. The hold is one RTO of the estimate (SRTT + max(G, 4·RTTVAR)),
// or 1/64 of the ACK timeout without one; the retransmission timer still
// counts a round that does not deliver.
func (e *Engine) inRound(q *QP) bool {
	if q.recoverPSN == 0 {
		return false
	}
	if !q.unacked.Before(q.recoverPSN-1) || e.now-q.goBackAt >= e.goBackHold(q) {
		q.recoverPSN = 0
		return false
	}
	e.cnt.GoBackFree++
	return true
}

func (e *Engine) goBackHold(q *QP) time.Duration {
	if q.rtt.Valid {
		return q.rtt.RTO()
	}
	base, ok := ackTimeout(q.timeoutCode)
	if !ok {
		return 0
	}
	return q.sender.Timeout(base, 1, q.rtt) / 64
}

// acknowledge: the responder has every request before psn (a NAK's or an
// RNR NAK's PSN).
func (e *Engine) acknowledge(q *QP, psn qp.PSN) {
	if q.ooo {
		before := q.unacked
		e.sackThrough(q, psn)
		e.settle(q, before)
	} else {
		e.ackThrough(q, psn)
	}
}

// responseInOrder reports whether a READ response or atomic ACK at psn is
// the one the requester waits for (psn == unacked). A later one means
// the awaited response is missing, or late: the requester goes back to it
// (impliedNak; rxe check_psn treats both kinds so). Dropping it and
// waiting instead left every later response of the window dropped too,
// until the retransmission timer (TestAtomicReorderNoStall).
func (e *Engine) responseInOrder(q *QP, psn qp.PSN) bool {
	if !e.responseInWindow(q, psn) {
		return false
	}
	if psn != q.unacked {
		e.impliedNak(q)
		return false
	}
	return true
}

// onReadResponse places one READ response packet.
func (e *Engine) onReadResponse(q *QP, psn qp.PSN, pkt *bth.Packet) {
	if !e.responseInOrder(q, psn) {
		return // (in order: every earlier request is acknowledged already)
	}
	w := q.sq.Front()
	if q.state != qp.RTS && q.state != qp.SQD || w == nil || w.wr.Opcode != qp.WRRDMARead || !w.contains(psn) {
		e.cnt.RcvdBadResponse++
		return
	}
	off := uint32(psn.Diff(w.firstPSN)) * q.mtu
	payload := pkt.Payload()
	if uint32(len(payload)) != min(q.mtu, w.length-off) {
		e.cnt.RcvdBadResponse++
		return
	}
	if !e.copySGL(q, w.wr.SGEs(), off, payload, true) {
		e.failAt(q, q.sq.Head(), qp.WCLocProtErr)
		return
	}
	q.unacked = psn.Next()
	if psn == w.lastPSN {
		e.retire(q, qp.WCSuccess)
	}
	q.sender.OnAck(e.now, q.unacked)
	e.onProgress(q)
}

// onAtomicAck completes the atomic at psn with the original remote value.
func (e *Engine) onAtomicAck(q *QP, psn qp.PSN, orig uint64) {
	if !e.responseInOrder(q, psn) {
		return
	}
	w := q.sq.Front()
	if q.state != qp.RTS && q.state != qp.SQD || w == nil || !w.wr.Opcode.IsAtomic() || w.firstPSN != psn {
		e.cnt.RcvdBadResponse++
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], orig) // host order, as the CPU reads it
	if !e.copySGL(q, w.wr.SGEs(), 0, b[:], true) {
		e.failAt(q, q.sq.Head(), qp.WCLocProtErr)
		return
	}
	q.unacked = psn.Next()
	e.retire(q, qp.WCSuccess)
	q.sender.OnAck(e.now, q.unacked)
	e.onProgress(q)
}

// onNak handles a NAK naming psn: every earlier request is acknowledged;
// a sequence error is recovered by the scheme, the others are fatal.
func (e *Engine) onNak(q *QP, psn qp.PSN, code bth.NakCode) {
	if psn.Before(q.unacked) {
		e.cnt.RcvdStaleAck++
		return
	}
	if !psn.Before(q.maxSentPSN) {
		e.cnt.RcvdBadResponse++
		return
	}
	before := q.unacked
	e.acknowledge(q, psn)
	if q.state == qp.Err {
		return
	}
	// retry_cnt counts stalls: a NAK that acknowledged new packets moved
	// the connection forward, restored the budget as an ACK does
	// (onProgress), and does not spend it. Only a NAK that brings no
	// progress (the responder still waits at the same PSN) is a retry.
	// IBA §9.7.5.1.3 decrements the counter per NAK-triggered retry; a
	// retry_cnt of 7 then ends a transfer behind a hop whose queue drops
	// every go-back's burst again, though each NAK shows the responder
	// moving on (docs/transport.md, "Retries count stalls").
	progressed := q.unacked != before
	if code == bth.NakPSNSeqError {
		e.cnt.RcvdSeqErr++
		if q.ooo {
			// IRN treats a sequence error as a loss signal, not an error
			// (Appendix B.4): recovery, no retry spent, no going back.
			// MELO and FaSR receivers NAK so only when their pools ran
			// out, and their senders go back (go-back-N fallback).
			if r := q.sender.OnFeedback(e.now, seqNak(psn, q.maxSentPSN)); r.GoBack {
				e.goBack(q, r.GoBackTo)
			}
			e.scheduleIfReady(q)
			return
		}
		// NAKs for a PSN we have gone back to but not resent yet are
		// stale copies (a responder NAKs again each NAK interval, and a
		// busy one may send several at once): one go-back, one retry.
		if q.nakHeld == psn+1 {
			return
		}
		// The requests that followed an RNR-NAKed one reach the
		// responder out of sequence and draw a sequence NAK for the
		// PSN the requester already waits to resend (onRNRNak): the
		// same news, not a new stall.
		if q.rnrWait {
			return
		}
		// Inside a go-back round that is still working, a NAK without
		// progress goes back again (the responder dropped a resent
		// request that arrived out of sequence) but spends no retry: it
		// may have waited at the responder behind READ responses, and
		// the round's go-back spent one already.
		// A NAK that repeats the one the last go-back answered, with
		// no progress since, is the same news too (docs/transport.md,
		// "A repeated NAK"): behind a deep queue the resent packet
		// reaches the responder milliseconds later, and until then it
		// NAKs the same PSN again (igbn's CE each NAK interval). It goes
		// back again, as the resent packet may have been lost too, but
		// spends no retry; the retransmission timer counts a stall.
		if !progressed {
			switch {
			case q.nakBackTo == psn+1: // a repeat
				e.cnt.GoBackFree++
			case e.inRound(q): // counts go_back_free itself
			case !e.countRetry(q):
				return
			}
		}
		q.nakHeld, q.nakBackTo = psn+1, psn+1
		if r := q.sender.OnFeedback(e.now, seqNak(psn, q.maxSentPSN)); r.GoBack {
			// The NAK acknowledged everything before psn, but unacked
			// stays at a READ or atomic before psn whose response never
			// came (ackThrough): that acknowledgement implies the
			// response was lost (IBA §9.7.5.1.2), so the request must go
			// out again too. Going back only to psn, once the implied
			// NAK for that hole was spent, left the READ unasked and
			// every further NAK spent a retry
			// (TestSeqNakBehindLostReadResponse).
			to := r.GoBackTo
			if q.unacked.Before(to) {
				to = q.unacked
			}
			e.goBack(q, to)
			e.startRound(q)
		}
		e.schedule(q)
		return
	}
	status, ok := nakStatus[code]
	if !ok {
		status = qp.WCBadRespErr
	}
	switch code {
	case bth.NakRemoteAccessError:
		e.cnt.ReqRemoteAccess++
	case bth.NakInvalidRequest:
		e.cnt.ReqRemoteInvalid++
	}
	e.failAt(q, q.sq.Head(), status)
}

// seqNak is a PSN-sequence-error NAK naming psn, as the sender gets it.
func seqNak(psn, sent qp.PSN) recovery.Feedback {
	return recovery.Feedback{Kind: recovery.ReplySeqNak, Cum: psn, Sent: sent}
}

// onRNRNak: the responder had no receive WQE; wait the RNR delay and
// resend from psn, within rnr_retry (7 = forever).
func (e *Engine) onRNRNak(q *QP, psn qp.PSN, code uint8) {
	if !e.responseInWindow(q, psn) {
		return
	}
	e.cnt.RcvdRNRErr++
	e.acknowledge(q, psn)
	if q.state == qp.Err {
		return
	}
	if q.rnrRetry != 7 {
		if q.rnrLeft == 0 {
			e.cnt.RNRNakRetryErr++
			e.failAt(q, q.sq.Head(), qp.WCRNRRetryExcErr)
			return
		}
		q.rnrLeft--
	}
	// Back to the NAKed request, or, in order, to an earlier READ or
	// atomic whose response the NAK implies was lost (as for a sequence
	// NAK, onNak): once the implied NAK for that hole is spent, going back
	// to psn alone left the READ unasked until the ACK timeout
	// (TestRNRNakBehindLostReadResponse). A selective scheme's loss rule
	// asks for it again itself.
	to := psn
	if !q.ooo && q.unacked.Before(to) {
		to = q.unacked
	}
	e.goBack(q, to)
	q.rnrWait = true
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Schedule(&q.rnrTimer, e.now+RNRDelay(code))
}

func (e *Engine) onRNRTimer(q *QP, _ time.Duration) {
	e.touch(q, true)
	q.rnrWait = false
	if e.requestReady(q) {
		e.schedule(q)
	}
}

// onRetryTimeout is the local ACK timeout (IBA §9.7.6.1.3).
func (e *Engine) onRetryTimeout(q *QP, now time.Duration) {
	if q.drv != nil {
		e.onDriverTimeout(q) // a StaR server's driver resends its WQEPs
		return
	}
	e.touch(q, true)
	if q.state != qp.RTS && q.state != qp.SQD || q.unacked == q.maxSentPSN {
		return
	}
	e.cnt.LocalAckTimeout++
	e.timeoutReason(q)
	e.rttTimedOut(q)
	if !e.countRetry(q) {
		return
	}
	q.impliedAt = 0
	if r := q.sender.OnTimeout(now, q.unacked, q.maxSentPSN); r.GoBack {
		e.goBack(q, r.GoBackTo)
		e.startRound(q)
	}
	e.schedule(q)
}

// countRetry spends one retry or, when none are left, fails the oldest
// request with RETRY_EXC_ERR. retry_cnt is a plain count (IBA §9.7.6.1.3;
// only rnr_retry gives 7 the meaning "forever"): rxe retries forever at 7,
// which leaves a requester whose responder died in ERR retrying for ever.
func (e *Engine) countRetry(q *QP) bool {
	e.cnt.CompleterRetry++
	if q.retryLeft == 0 {
		e.cnt.RetryExceededErr++
		e.failAt(q, q.sq.Head(), qp.WCRetryExcErr)
		return false
	}
	q.retryLeft--
	return true
}

// goBack moves the send cursor back to psn (never forward, never before
// unacked).
func (e *Engine) goBack(q *QP, psn qp.PSN) {
	if psn.Before(q.unacked) {
		psn = q.unacked
	}
	if psn.Before(q.curPSN) {
		q.seekCursor(psn)
	}
	q.noAck = 0
	e.schedule(q)
}

// onProgress runs when unacked moved, once per response packet, after the
// scheme has heard it (OnAck): fresh retry budget, restarted timer, and a
// cursor that never points at acknowledged PSNs.
func (e *Engine) onProgress(q *QP) {
	e.rttAcked(q)
	q.retryLeft, q.rnrLeft = q.retryCnt, q.rnrRetry
	q.impliedAt = 0
	if q.nakHeld != 0 && (q.nakHeld - 1).Before(q.unacked) {
		q.nakHeld = 0 // the NAKed PSN has been acknowledged
	}
	if q.nakBackTo != 0 && (q.nakBackTo - 1).Before(q.unacked) {
		q.nakBackTo = 0
	}
	if q.curPSN.Before(q.unacked) {
		q.seekCursor(q.unacked)
	}
	e.wheel.Stop(&q.retryTimer)
	e.armRetry(q)
	if e.requestReady(q) {
		e.schedule(q)
	}
}

// armRetry starts the retransmission timer if packets are outstanding and
// it is not running, and keeps its deadline in step with the scheme's
// timeout for what is in flight now: IRN's RTO_low holds only while at most
// N packets are out (§3.1), so a timer started for one packet moves to
// RTO_high as more follow.
//
// The timer waits for an acknowledgement, and only a packet the responder
// answers brings one: one sent with AckReq, a READ request, an atomic
// (IBA §9.7.6.1.3 starts the transport timer on a request that requires
// an ACK). While every packet out was sent without AckReq (the middle of a
// long message, between AckReqs), the timer stays off: the requester is
// still sending, and its next AckReq, at the latest the message's last
// packet or ackReqInterval packets on, starts it. A timer run from the
// last progress would count the time the requester takes to reach that
// AckReq (64 packets, 380 µs at 1.5 Gb/s) against a timeout fitted to the
// round trip, and fire with nothing lost.
func (e *Engine) armRetry(q *QP) {
	if q.unacked == q.maxSentPSN {
		return
	}
	if !q.ackReqOutstanding() {
		e.wheel.Stop(&q.retryTimer)
		return
	}
	base, ok := ackTimeout(q.timeoutCode)
	if !ok {
		return
	}
	if !q.retryTimer.Armed() {
		q.retryStart = e.now
	}
	rto := q.sender.Timeout(base, int(q.maxSentPSN.Diff(q.unacked)), q.rtt)
	if q.rtt.Valid && e.cfg.RTOMin > 0 {
		rto = max(rto, min(e.cfg.RTOMin, base)) // Config.RTOMin, never past the ACK timeout
	}
	e.noteRTO(rto)
	shift := q.rttBackoff // Karn (adaptive RTO): until the next sample
	if e.cfg.RTOBackoff && q.retryLeft < q.retryCnt {
		shift = max(shift, q.retryCnt-q.retryLeft)
	}
	rto <<= min(shift, maxRTOBackoffShift)
	at := q.retryStart + rto
	if !q.retryTimer.Armed() || q.retryTimer.Deadline() != at {
		e.wheel.Schedule(&q.retryTimer, at)
	}
}

// retire completes the head WQE.
func (e *Engine) retire(q *QP, status qp.WCStatus) {
	w := q.sq.Front()
	head := q.sq.Head()
	if head != q.sqStart && w.isReadOrAtomic() {
		q.rdAtomics--
	}
	pulled := q.shadow != nil && e.shadowRetire(q, w, status) // a pull completes its RECV (starqp.go)
	if !pulled && (status != qp.WCSuccess || q.sigAll || w.wr.Flags&qp.SendSignaled != 0) {
		wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: qp.WCOpcodeFor(w.wr.Opcode), QPNum: q.qpn}
		if status == qp.WCSuccess {
			wc.ByteLen = w.length
		}
		e.pushWC(q.sendCQ, wc)
	}
	if status != qp.WCWRFlushErr && (w.wr.Opcode == qp.WRSend || w.wr.Opcode == qp.WRSendWithImm) {
		e.cnt.RDMASends++ // rxe's rdma_sends: SENDs the completer retired
	}
	if q.sqStart == head { // failing a WQE that never started
		q.sqStart++
	}
	if q.cur == head {
		q.cur++
	}
	q.sq.Pop()
	if q.shadow != nil && len(q.shadow.sends) > 0 {
		e.starPull(q) // room in the send queue for a server SEND waiting
	}
}

// failAt completes the WQEs before idx as flushed, the one at idx with
// status, and moves q to ERR, which flushes the rest (IBA §10.8.3.3).
func (e *Engine) failAt(q *QP, idx uint32, status qp.WCStatus) {
	for q.sq.Len() > 0 && q.sq.Head() != idx {
		e.retire(q, qp.WCWRFlushErr)
	}
	if q.sq.Len() > 0 {
		e.retire(q, status)
	}
	e.setState(q, qp.Err)
}
