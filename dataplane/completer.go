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
func (rc *rcTransport) complete(pkt *bth.Packet) {
	e := rc.e
	psn := qp.PSN(pkt.BTH().PSN())
	op := pkt.Opcode()
	reply := bth.ReplyOf(op) // softnic's acknowledgements: SACK, FNACK, HOLES
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
			rc.mode.ack(rc, psn)
		case bth.RNRNakKind:
			rc.onRNRNak(psn, syn.RNRTimer())
		case bth.NakKind:
			rc.onNak(psn, syn.NakCode())
		default:
			e.cnt.RcvdBadResponse++
		}
	case reply != bth.ReplyNone:
		r, ok := pkt.Reply()
		rc.onReply(psn, pkt, &r, ok)
	default: // a READ response or an atomic ACK
		rc.mode.response(rc, psn, pkt)
	}
}

// responseInWindow classifies a response PSN: stale (already
// acknowledged), beyond what was ever sent (bogus), or current.
func (rc *rcTransport) responseInWindow(psn qp.PSN) bool {
	e, q := rc.e, rc.q
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
func (rc *rcTransport) onAck(psn qp.PSN) {

	if !rc.responseInWindow(psn) {
		return
	}
	rc.ackThrough(psn.Next())
}

// ackThrough retires every SEND/WRITE WQE wholly before upto and moves
// unacked. READs and atomics complete only through their responses, so an
// acknowledgement that passes one that has not completed means its
// response was lost: an implied NAK (rxe check_psn), answered by
// going back to it once.
func (rc *rcTransport) ackThrough(upto qp.PSN) {
	e, q := rc.e, rc.q
	progressed := false
	for q.sq.Head() != q.sqStart {
		w := q.sq.Front()
		if w.isReadOrAtomic() {
			// Only an acknowledgement that passes the whole READ/atomic
			// implies its response was lost; the READ's own responses
			// (upto inside it) do not.
			if w.lastPSN.Before(upto) {
				rc.impliedNak()
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
		rc.retire(qp.WCSuccess)
		progressed = true
	}
	if progressed {
		q.sender.OnAck(e.now, q.unacked)
		rc.onProgress()
	}
}

// impliedNak answers a response that passes the oldest unfinished READ or
// atomic response (IBA §9.7.5.1.2: an implied NAK, the missing response
// was lost) by going back to it, once per hole (impliedAt). Inside a
// go-back round that is still working (inRound) it spends no retry: the
// responses of the streams in flight before the round keep arriving out
// of order for a while, and the round's own go-back spent one already.
func (rc *rcTransport) impliedNak() {
	e, q := rc.e, rc.q
	if q.impliedAt == q.unacked+1 {
		return
	}
	q.impliedAt = q.unacked + 1 // +1: the zero value means "none"
	e.cnt.ImpliedNakSeqErr++
	if rc.inRound() || rc.countRetry() {
		rc.goBack(q.unacked)
		rc.startRound()
	}
}

// startRound notes a go-back round: it resends up to maxSentPSN.
func (rc *rcTransport) startRound() {
	e, q := rc.e, rc.q
	q.recoverPSN, q.goBackAt = q.maxSentPSN+1, e.now
}

// inRound reports whether a go-back round is still working
// (docs/transport.md, "Retries inside a go-back round"): the requester
// went back less than a hold ago, and the responses to what was
// outstanding then have not all arrived. A go-back inside it spends no
// retry. The hold is one RTO of the estimate (SRTT + max(G, 4·RTTVAR)),
// or 1/64 of the ACK timeout without one; the retransmission timer still
// counts a round that does not deliver.
func (rc *rcTransport) inRound() bool {
	e, q := rc.e, rc.q
	if q.recoverPSN == 0 {
		return false
	}
	if !q.unacked.Before(q.recoverPSN-1) || e.now-q.goBackAt >= rc.goBackHold() {
		q.recoverPSN = 0
		return false
	}
	e.cnt.GoBackFree++
	return true
}

func (rc *rcTransport) goBackHold() time.Duration {
	q := rc.q
	if q.rtt.Valid {
		return q.rtt.RTO()
	}
	base, ok := ackTimeout(q.timeoutCode)
	if !ok {
		return 0
	}
	return q.sender.Timeout(base, 1, q.rtt) / 64
}

// acknowledgeSelective: the responder has every request before psn (a
// NAK's or an RNR NAK's PSN), on a connection with selective
// acknowledgements.
func (rc *rcTransport) acknowledgeSelective(psn qp.PSN) {
	rc.ack = recovery.Ack{Feedback: recovery.Feedback{Cum: psn}}
	rc.received(&rc.ack)
}

// responseInOrder reports whether a READ response or atomic ACK at psn is
// the one the requester waits for (psn == unacked). A later one means
// the awaited response is missing, or late: the requester goes back to it
// (impliedNak; rxe check_psn treats both kinds so). Dropping it and
// waiting instead left every later response of the window dropped too,
// until the retransmission timer (TestAtomicReorderNoStall).
func (rc *rcTransport) responseInOrder(psn qp.PSN) bool {
	q := rc.q
	if !rc.responseInWindow(psn) {
		return false
	}
	if psn != q.unacked {
		rc.impliedNak()
		return false
	}
	return true
}

// onReadResponse places one READ response packet.
func (rc *rcTransport) onReadResponse(psn qp.PSN, pkt *bth.Packet) {
	e, q := rc.e, rc.q
	if !rc.responseInOrder(psn) {
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
	if !e.mem.copySGL(q.pd, w.wr.SGEs(), off, payload, true) {
		rc.failAt(q.sq.Head(), qp.WCLocProtErr)
		return
	}
	q.unacked = psn.Next()
	if psn == w.lastPSN {
		rc.retire(qp.WCSuccess)
	}
	q.sender.OnAck(e.now, q.unacked)
	rc.onProgress()
}

// onAtomicAck completes the atomic at psn with the original remote value.
func (rc *rcTransport) onAtomicAck(psn qp.PSN, orig uint64) {
	e, q := rc.e, rc.q
	if !rc.responseInOrder(psn) {
		return
	}
	w := q.sq.Front()
	if q.state != qp.RTS && q.state != qp.SQD || w == nil || !w.wr.Opcode.IsAtomic() || w.firstPSN != psn {
		e.cnt.RcvdBadResponse++
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], orig) // host order, as the CPU reads it
	if !e.mem.copySGL(q.pd, w.wr.SGEs(), 0, b[:], true) {
		rc.failAt(q.sq.Head(), qp.WCLocProtErr)
		return
	}
	q.unacked = psn.Next()
	rc.retire(qp.WCSuccess)
	q.sender.OnAck(e.now, q.unacked)
	rc.onProgress()
}

// onNak handles a NAK naming psn: every earlier request is acknowledged;
// a sequence error is recovered by the scheme, the others are fatal.
func (rc *rcTransport) onNak(psn qp.PSN, code bth.NakCode) {
	e, q := rc.e, rc.q
	if psn.Before(q.unacked) {
		e.cnt.RcvdStaleAck++
		return
	}
	if !psn.Before(q.maxSentPSN) {
		e.cnt.RcvdBadResponse++
		return
	}
	before := q.unacked
	rc.mode.acknowledge(rc, psn)
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
		rc.mode.seqNak(rc, psn, progressed)
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
	rc.failAt(q.sq.Head(), status)
}

// onSeqNak handles a PSN-sequence-error NAK for psn on a connection in
// order, after acknowledge: go back to psn (or to the READ or atomic
// before it whose response it implies lost), spending a retry only on a
// stall.
func (rc *rcTransport) onSeqNak(psn qp.PSN, progressed bool) {
	e, q := rc.e, rc.q
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
		case rc.inRound(): // counts go_back_free itself
		case !rc.countRetry():
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
		rc.goBack(to)
		rc.startRound()
	}
	e.schedule(q)
}

// onSeqNakSelective handles a PSN-sequence-error NAK on a connection with
// selective acknowledgements, after acknowledgeSelective. IRN treats it as
// a loss signal, not an error (Appendix B.4): recovery, no retry spent, no
// going back. MELO and FaSR receivers NAK so only when their pools ran
// out, and their senders go back (go-back-N fallback).
func (rc *rcTransport) onSeqNakSelective(psn qp.PSN) {
	e, q := rc.e, rc.q
	if r := q.sender.OnFeedback(e.now, seqNak(psn, q.maxSentPSN)); r.GoBack {
		rc.goBack(r.GoBackTo)
	}
	rc.scheduleIfReady()
}

// seqNak is a PSN-sequence-error NAK naming psn, as the sender gets it.
func seqNak(psn, sent qp.PSN) recovery.Feedback {
	return recovery.Feedback{Kind: recovery.ReplySeqNak, Cum: psn, Sent: sent}
}

// onRNRNak: the responder had no receive WQE; wait the RNR delay and
// resend from psn, within rnr_retry (7 = forever).
func (rc *rcTransport) onRNRNak(psn qp.PSN, code uint8) {
	e, q := rc.e, rc.q
	if !rc.responseInWindow(psn) {
		return
	}
	e.cnt.RcvdRNRErr++
	rc.mode.acknowledge(rc, psn)
	if q.state == qp.Err {
		return
	}
	if q.rnrRetry != 7 {
		if q.rnrLeft == 0 {
			e.cnt.RNRNakRetryErr++
			rc.failAt(q.sq.Head(), qp.WCRNRRetryExcErr)
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
	rc.goBack(to)
	q.rnrWait = true
	e.wheel.Stop(&rc.timers.retry)
	e.wheel.Schedule(&rc.timers.rnr, e.now+RNRDelay(code))
}

func (rc *rcTransport) onRNRTimer(_ time.Duration) {
	e, q := rc.e, rc.q
	e.touch(q, true)
	q.rnrWait = false
	if rc.requestReady() {
		e.schedule(q)
	}
}

// onRetryTimeout is the local ACK timeout (IBA §9.7.6.1.3).
func (rc *rcTransport) onRetryTimeout(now time.Duration) {
	e, q := rc.e, rc.q
	e.touch(q, true)
	if q.state != qp.RTS && q.state != qp.SQD || q.unacked == q.maxSentPSN {
		return
	}
	e.cnt.LocalAckTimeout++
	rc.timeoutReason()
	rc.rttTimedOut()
	if !rc.spendsRetry(now) {
		e.cnt.CompleterRetry++ // a retransmission round all the same
	} else if !rc.countRetry() {
		return
	}
	q.impliedAt = 0
	if r := q.sender.OnTimeout(now, q.unacked, q.maxSentPSN); r.GoBack {
		rc.goBack(r.GoBackTo)
		rc.startRound()
	}
	e.schedule(q)
}

// spendsRetry reports whether the retransmission timer that fired at now
// spends one of retry_cnt. IBA §9.7.6.1.3 counts a retry each time the
// transport timer, the negotiated local ACK timeout, expires without
// progress. In fixed mode every timeout counts, as it always has. An
// adaptive timeout shorter than the ACK timeout is softnic's own (IRN
// §3.1's RTO_low and RTO_high, scaled to the path): it resends, but
// spends a retry only once the timer has run the ACK timeout, which
// Karn's backoff reaches after a few timeouts without a sample
// (karnBackoff). So the adaptive timer never fails a QP that the
// negotiated one would keep: behind a 12 ms queue a 320 µs RTO, backed
// off to 16x at most, had spent all seven retries in 41 ms.
func (rc *rcTransport) spendsRetry(now time.Duration) bool {
	e, q := rc.e, rc.q
	if e.cfg.RTO != RTOAdaptive {
		return true
	}
	base, ok := ackTimeout(q.timeoutCode)
	return !ok || now-q.retryStart >= base
}

// countRetry spends one retry or, when none are left, fails the oldest
// request with RETRY_EXC_ERR. retry_cnt is a plain count (IBA §9.7.6.1.3;
// only rnr_retry gives 7 the meaning "forever"): rxe retries forever at 7,
// which leaves a requester whose responder died in ERR retrying for ever.
func (rc *rcTransport) countRetry() bool {
	e, q := rc.e, rc.q
	e.cnt.CompleterRetry++
	if q.retryLeft == 0 {
		e.cnt.RetryExceededErr++
		rc.failAt(q.sq.Head(), qp.WCRetryExcErr)
		return false
	}
	q.retryLeft--
	return true
}

// goBack moves the send cursor back to psn (never forward, never before
// unacked).
func (rc *rcTransport) goBack(psn qp.PSN) {
	e, q := rc.e, rc.q
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
func (rc *rcTransport) onProgress() {
	e, q := rc.e, rc.q
	rc.rttAcked()
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
	e.wheel.Stop(&rc.timers.retry)
	rc.armRetry()
	if rc.requestReady() {
		e.schedule(q)
	}
}

// The Improved go-back-N paper finds four reasons for a go-back-N ACK
// timeout (§III-A, Fig. 3/4): (1) the last packet of the message is lost,
// (2) the ACK of the last packet is lost, (3) a NAK is lost, (4) the same
// packet is lost twice. Telling them apart takes both ends' view at the
// moment the timer fires: the responder's expected PSN and whether it has
// NAKed it, and whether that NAK reached the requester. A NIC sees only
// its own half; the embedded fabric has both engines in one process, so
// SetTimeoutPeer lets a requester read its peer's responder state when its
// timer fires, as the paper's simulator traces a flow through both nodes.
// Without a peer no timeout is classified (local_ack_timeout_err still
// counts it).

// SetTimeoutPeer names the engine at the other end of the fabric, whose
// responders this engine's requesters consult to classify their ACK
// timeouts. Only for simulations, where both run on one goroutine.
func (e *Engine) SetTimeoutPeer(peer *Engine) { e.timeoutPeer = peer }

// timeoutReason counts q's ACK timeout under one of the paper's reasons.
func (rc *rcTransport) timeoutReason() {
	e, q := rc.e, rc.q
	if e.timeoutPeer == nil || q.ooo {
		return
	}
	r := e.timeoutPeer.qps[q.destQPN]
	if r == nil || r.destQPN != q.qpn {
		return
	}
	if r.ePSN == q.maxSentPSN { // every request arrived: the ACK was lost
		e.cnt.AckTimeoutAckLost++
		return
	}
	switch {
	case !r.receiver.NakOutstanding():
		// Nothing after the expected PSN arrived to draw a NAK: the tail of
		// the message, its last packet with it, was lost.
		e.cnt.AckTimeoutLastLost++
	case q.nakBackTo == r.ePSN+1:
		// The requester heard the NAK and went back: the resent packet was
		// lost again.
		e.cnt.AckTimeoutLostTwice++
	default:
		e.cnt.AckTimeoutNakLost++
	}
}

// onSelectiveAck: an ACK with PSN psn says the responder holds every
// request up to psn.
func (rc *rcTransport) onSelectiveAck(psn qp.PSN) {
	if !rc.responseInWindow(psn) {
		return
	}
	rc.ack = recovery.Ack{Feedback: recovery.Feedback{Cum: psn.Next()}}
	rc.received(&rc.ack)
}

// sackNakValid checks a NAK with a selective acknowledgement naming sack
// while the responder expects psn.
func (rc *rcTransport) sackNakValid(psn, sack qp.PSN, pkt *bth.Packet) bool {
	e, q := rc.e, rc.q
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

// onReply handles softnic's selective replies, all in one way: an IRN
// NACK or a FaSR SACK (the responder expects psn and holds the PSN the
// SACK names, FaSR's with its lost-cnt: IRN §3.1, FaSR §III-B2), FaSR's
// FNACK (it dropped the retransmission it names because one before it
// was lost, §III-D) and MELO's NACK (it expects psn, has received up to
// High, and lacks the at most three most recent holes; what lies between
// them, and between the last one and High, it holds; what lies before
// the oldest hole, if that hole does not start at psn, it does not say:
// §3.2.4). ok is false for a holes NACK that Reply could not read (a hole
// past High, or two overlapping).
func (rc *rcTransport) onReply(psn qp.PSN, pkt *bth.Packet, r *bth.Reply, ok bool) {
	e, q := rc.e, rc.q
	a := &rc.ack // (not on the stack: it goes through an interface call)
	*a = recovery.Ack{Feedback: recovery.Feedback{Cum: psn}}
	named := qp.PSN(r.SACK.PSN) // the PSN the reply names
	switch r.Kind {
	case bth.ReplySack:
		a.Kind, a.PSN, a.LostCnt, a.Overflow = recovery.ReplySack, named, r.SACK.LostCnt, r.Overflow
	case bth.ReplyFNACK:
		a.Kind, a.PSN = recovery.ReplyFNACK, named
	case bth.ReplyHoles:
		named = qp.PSN(r.Holes.High)
		a.Kind, a.High = recovery.ReplyHoles, named
	}
	if !rc.sackNakValid(psn, named, pkt) {
		return
	}
	switch r.Kind {
	case bth.ReplySack:
		a.SackKind = q.sackKind(named)
		e.cnt.RcvdSackNak++
	case bth.ReplyFNACK:
		e.cnt.RcvdFNACK++
	case bth.ReplyHoles:
		if !ok {
			e.cnt.RcvdBadResponse++
			return
		}
		a.Holes = schemeHoles(&r.Holes)
		e.cnt.RcvdHolesNak++
	}
	rc.received(a)
}

// received hands one reply that acknowledges selectively to the sender,
// once and whole (recovery.Sender.OnReply), and carries out what it
// says: the WQEs before the new cumulative acknowledgement retire, the
// send cursor goes back if asked, progress resets the retry budget and
// restarts the timer (onProgress), and the QP is scheduled if it can
// send. a is rc.ack, filled by the caller with the reply.
func (rc *rcTransport) received(a *recovery.Ack) {
	e, q := rc.e, rc.q
	before := q.unacked
	a.Unacked, a.Sent, a.Messages = before, q.maxSentPSN, (*qpMessages)(q)
	cum, r := q.sender.OnReply(e.now, a)
	if cum != q.unacked {
		q.unacked = cum
		for q.sq.Head() != q.sqStart && q.sq.Front().lastPSN.Before(cum) {
			rc.retire(qp.WCSuccess)
		}
	}
	if r.GoBack {
		rc.goBack(r.GoBackTo)
	}
	if q.unacked != before {
		rc.onProgress()
	}
	rc.scheduleIfReady()
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

// onResponseOutOfOrder places a READ response or an atomic ACK by its PSN,
// in whatever order it arrives. It acknowledges its own request (IRN §5.2's
// read ACK, folded into the response) and says that the responder executed
// everything before it.
func (rc *rcTransport) onResponseOutOfOrder(psn qp.PSN, pkt *bth.Packet) {
	e, q := rc.e, rc.q
	if !rc.responseInWindow(psn) {
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
		if !e.mem.copySGL(q.pd, w.wr.SGEs(), 0, b[:], true) {
			rc.failAt(idx, qp.WCLocProtErr)
			return
		}
	} else {
		off := uint32(psn.Diff(w.firstPSN)) * q.mtu
		payload := pkt.Payload()
		if w.wr.Opcode != qp.WRRDMARead || uint32(len(payload)) != min(q.mtu, w.length-off) {
			e.cnt.RcvdBadResponse++
			return
		}
		if !e.mem.copySGL(q.pd, w.wr.SGEs(), off, payload, true) {
			rc.failAt(idx, qp.WCLocProtErr)
			return
		}
	}
	if psn != q.unacked {
		e.cnt.OOOResponses++
	}
	rc.ack = recovery.Ack{Feedback: recovery.Feedback{Cum: psn, PSN: psn, SackKind: recovery.Answered}, Own: true}
	rc.received(&rc.ack)
}
