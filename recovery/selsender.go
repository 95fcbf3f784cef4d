package recovery

import (
	"time"

	"github.com/softnic/softnic/qp"
)

// selSender is the requester half shared by MELO and FaSR: selective
// repeat whose record of what the responder holds beyond the cumulative
// acknowledgement costs no per-QP bitmap. It has two parts:
//
//   - a run: every PSN after base and before runEnd is acknowledged
//     selectively. A single loss leaves exactly this shape (the hole at
//     base, a run of packets after it), so FaSR's fast path needs nothing
//     more (§III-B2), and the same run is its compression-cnt once a
//     bitmap is needed (§III-D, "bitmap acceleration").
//   - a chain of blocks from the scheme's shared pool for the rest
//     (MELO §3.2.4: "a MELO sender also maintains a bitmap for each
//     connection using the shared bits pool mechanism"; FaSR's slow path).
//
// A PSN is lost when it is not acknowledged and a later one is (below
// lossEdge): it is resent once per round, a round being scanned by a
// cursor from base, restarted by a timeout (or FaSR's FNACK). A PSN whose
// acknowledgement could not be recorded, because the pool was empty, is
// simply resent, as go-back-N would: correct, only slower.
//
// READ and atomic requests the responder holds out of order (SackKind
// Held) are not recorded: the scan may resend such a request once and the
// responder drops the duplicate (docs/recovery.md).
type selSender struct {
	pool   *BlockPool
	window int

	rtoLow, rtoHigh time.Duration
	lowThreshold    int

	base     qp.PSN // cumulative acknowledgement
	run      span   // acknowledged selectively, no bits needed
	bits     chain  // acknowledged selectively, beyond what the run says
	bitsHigh qp.PSN // the highest PSN set in bits
	lossEdge qp.PSN // PSNs before it not acknowledged are lost
	rtxNext  qp.PSN // the round's scan cursor
	recovery bool
	recSeq   qp.PSN // the highest PSN sent when recovery began
	// presumed are PSNs not to resend in this round though not
	// acknowledged (FaSR: a gap whose SACKs, not packets, were lost).
	presumed [4]span

	// The lost-retransmission rule (docs/recovery.md, "Lost
	// retransmissions"): now is the time of the latest event the
	// transport reported, rtxAt when the cumulative acknowledgement's
	// packet was last resent in this round, or became the cumulative
	// acknowledgement after the round had resent it, and rtxHold how long
	// such a retransmission may go unacknowledged before it is taken for
	// lost (max(G, 4·RTTVAR), or RTO_low/8 without an estimate).
	// rtxSent is one past the highest PSN sent by then (the transport's
	// sent), lastSent the latest sent reported.
	now, rtxAt        Time
	rtxHold           time.Duration
	rtxSent, lastSent qp.PSN

	stats *SchemeStats
}

// span is the PSNs from start up to (not including) end; empty when equal.
type span struct{ start, end qp.PSN }

func (r span) empty() bool       { return r.start == r.end }
func (r span) has(p qp.PSN) bool { return !r.empty() && !p.Before(r.start) && p.Before(r.end) }
func (r span) len() int          { return int(r.end.Diff(r.start)) }
func emptySpan(at qp.PSN) span   { return span{at, at} }

// extend reports whether p touches a non-empty span at either end.
func (r span) extend(p qp.PSN) bool { return !r.empty() && (p == r.end || p.Next() == r.start) }

// add grows the span by p, which touches it (or starts an empty one).
func (r *span) add(p qp.PSN) {
	switch {
	case r.empty():
		*r = span{p, p.Next()}
	case p == r.end:
		r.end = p.Next()
	case p.Next() == r.start:
		r.start = p
	}
}

func (s *selSender) reset(start qp.PSN) {
	s.bits.release(s.pool)
	s.bits = newChain()
	s.base, s.lossEdge, s.rtxNext = start, start, start
	s.run = emptySpan(start)
	s.recovery = false
	s.presumed = [4]span{}
	s.rtxAt, s.rtxSent, s.lastSent = s.now, start, start
}

// acked reports whether psn is acknowledged selectively.
func (s *selSender) acked(psn qp.PSN) bool { return s.run.has(psn) || s.bits.get(s.pool, psn) }

// mark records psn (at or after base) as acknowledged, in the run while
// psn touches it and no bits are in use; otherwise the bits take over,
// starting after the run when it is long enough to be worth compressing
// (FaSR's compression-cnt, §III-D) and absorbing it when not. It returns
// false, counting it, when the pool is short: that PSN will be resent.
func (s *selSender) mark(psn qp.PSN) bool {
	if psn.Before(s.base) || s.run.has(psn) {
		return true
	}
	if s.bits.empty() {
		if s.run.empty() || s.run.extend(psn) {
			s.run.add(psn)
			return true
		}
		if psn.After(s.run.end) && s.run.len() >= s.pool.BlockBits() {
			s.bits.start(s.run.end) // compressed: the run stays a count
		} else {
			from := s.run.start
			if psn.Before(from) {
				from = psn
			}
			s.bits.start(from)
			for p := s.run.start; p != s.run.end; p = p.Next() {
				s.setBit(p)
			}
			s.run = emptySpan(s.base)
		}
	}
	if psn.Before(s.bits.first) && (s.run.empty() || s.run.extend(psn)) {
		s.run.add(psn) // before the bits, e.g. the answer to a READ at base
		return true
	}
	return s.setBit(psn)
}

func (s *selSender) setBit(p qp.PSN) bool {
	fresh := s.bits.empty()
	if !fresh && p.Before(s.bits.first) && !s.bits.prepend(s.pool, p) {
		s.stats.SenderUnrecorded++
		return false
	}
	if !s.bits.set(s.pool, p) {
		s.stats.SenderUnrecorded++
		return false
	}
	if fresh || p.After(s.bitsHigh) {
		s.bitsHigh = p
	}
	return true
}

// ack moves the cumulative acknowledgement to unacked and over what was
// acknowledged selectively; it returns the new base.
func (s *selSender) ack(unacked qp.PSN) qp.PSN {
	old := s.base
	if unacked.After(s.base) {
		s.base = unacked
	}
	for {
		if s.run.has(s.base) {
			s.base = s.run.end
		} else if s.bits.get(s.pool, s.base) {
			s.base = s.base.Next()
		} else {
			break
		}
	}
	if !s.run.empty() && !s.run.end.After(s.base) {
		s.run = emptySpan(s.base)
	}
	s.bits.advance(s.pool, s.base)
	if !s.bits.empty() && s.base.After(s.bitsHigh) {
		s.bits.release(s.pool) // nothing recorded beyond base: all blocks go back
	}
	if s.bits.empty() {
		s.bits = newChain()
	}
	for i, r := range s.presumed {
		if !r.empty() && !r.end.After(s.base) {
			s.presumed[i] = span{}
		}
	}
	if s.lossEdge.Before(s.base) {
		s.lossEdge = s.base
	}
	if s.rtxNext.Before(s.base) {
		s.rtxNext = s.base
	}
	if s.recovery && s.base.After(s.recSeq) {
		s.recovery = false
	}
	if s.base != old {
		// The new one's retransmission, if any, is no older, and went out
		// before anything sent from now on.
		s.rtxAt, s.rtxSent = s.now, s.lastSent
	}
	return s.base
}

func (s *selSender) raiseLossEdge(edge qp.PSN) {
	if edge.After(s.lossEdge) {
		s.lossEdge = edge
	}
}

// enterRecovery starts a round from base unless one is on.
func (s *selSender) enterRecovery(sent qp.PSN) {
	if s.recovery {
		return
	}
	s.recovery, s.recSeq = true, sent.Prev()
	s.rtxNext = s.base
	s.raiseLossEdge(s.base.Next())
}

// restart begins a new round from base: a timeout or an FNACK says that a
// retransmission was lost too.
func (s *selSender) restart(sent qp.PSN) {
	s.presumed = [4]span{}
	s.recovery = false
	s.enterRecovery(sent)
}

// holeBefore reports whether some PSN from base up to p is neither
// acknowledged, held, nor resent in this round.
func (s *selSender) holeBefore(p qp.PSN) bool {
	for q := s.base; q.Before(p); q = q.Next() {
		if !s.acked(q) && !s.isPresumed(q) && !(s.recovery && q.Before(s.rtxNext)) {
			return true
		}
	}
	return false
}

// sack records from..to as acknowledged (Received or Answered), or as held
// (a READ or atomic request the responder keeps: not resent in this round,
// but completed only by its response), and enters recovery when that
// leaves a hole.
func (s *selSender) sack(from, to qp.PSN, kind SackKind, sent qp.PSN) {
	if from.Before(s.base) {
		from = s.base
	}
	if to.Before(from) || int(to.Diff(s.base)) >= s.window {
		return
	}
	hole := s.holeBefore(from)
	for p := from; ; p = p.Next() {
		if kind == Held {
			s.hold(p)
		} else {
			s.mark(p)
		}
		if p == to {
			break
		}
	}
	s.raiseLossEdge(to.Next())
	if hole {
		s.enterRecovery(sent)
	}
}

func (s *selSender) nextRetransmit() (qp.PSN, bool) {
	if !s.recovery {
		return 0, false
	}
	for s.rtxNext.Before(s.lossEdge) {
		if !s.acked(s.rtxNext) && !s.isPresumed(s.rtxNext) {
			return s.rtxNext, true
		}
		s.rtxNext = s.rtxNext.Next()
	}
	return 0, false
}

func (s *selSender) retransmitted(psn qp.PSN) {
	if psn == s.base {
		s.rtxAt, s.rtxSent = s.now, s.lastSent
	}
	if !psn.Before(s.rtxNext) {
		s.rtxNext = psn.Next()
	}
}

// RetransmittedAt is Retransmitted with the time the packet went out and
// one past the highest PSN sent by then (recovery.TimedRetransmitter).
func (s *selSender) RetransmittedAt(now Time, psn, sent qp.PSN) {
	s.tick(now, sent)
	s.retransmitted(psn)
}

// tick records the time of an event and what had been sent by then.
func (s *selSender) tick(now Time, sent qp.PSN) {
	if now > s.now {
		s.now = now
	}
	if sent.After(s.lastSent) {
		s.lastSent = sent
	}
}

func (s *selSender) timeout(base time.Duration, inflight int, rtt RTT) time.Duration {
	s.rtxHold = holdFor(rtt, s.rtoLow)
	return rtoFor(rtt, base, s.rtoLow, s.rtoHigh, inflight, s.lowThreshold)
}

// holdFor is how long a retransmission may go unacknowledged before the
// lost-retransmission rule takes it for lost, given a packet sent after it
// that arrived: an allowance for reordering between the two, which is
// RFC 6298's allowance for variation, max(G, 4·RTTVAR), when the QP has
// an estimate, else an eighth of RTO_low (the daemon's 1 ms gives
// 125 µs). (The whole RTO, SRTT included, left fasr with the daemon's
// adaptive timeouts waiting for the timer.) It must be short: the
// rule needs evidence from the responder after it, and once BDP-FC's
// window is full behind the lost retransmission that evidence stops (a
// quarter of RTO_low left most lost retransmissions to the timer on
// issue 10's link). A round started too soon costs duplicates, never a
// retry (docs/recovery.md, "Lost retransmissions").
func holdFor(rtt RTT, rtoLow time.Duration) time.Duration {
	if rtt.Valid {
		return rtt.margin()
	}
	return max(RTTGranularity, rtoLow/8)
}

// lostRetransmission reports whether the retransmission of the cumulative
// acknowledgement's packet is to be taken for lost, now that the
// responder acknowledged psn selectively (or FaSR's FNACK named it): this
// round resent the cumulative acknowledgement's packet at least a hold
// ago, it has not arrived, and psn went out after it — new data first
// sent after it, or (after says so) a PSN this round resent after it —
// so that psn passed the same queues. The hold is the allowance for
// reordering between the two. The caller then starts a new round, which
// resets both, so the rule fires at most once per hold.
func (s *selSender) lostRetransmission(psn qp.PSN, after bool) bool {
	if !s.recovery || s.rtxHold <= 0 || !s.base.Before(s.rtxNext) || s.now-s.rtxAt < s.rtxHold {
		return false
	}
	return after || !psn.Before(s.rtxSent)
}

// evict returns the chain's blocks; they come back on the next access.
func (s *selSender) evict() { s.bits.spill(s.pool) }

// hold records psn as held by the responder: presumed, growing the latest
// span when psn follows it.
func (s *selSender) hold(psn qp.PSN) {
	if s.isPresumed(psn) {
		return
	}
	if s.presumed[0].extend(psn) {
		s.presumed[0].add(psn)
		return
	}
	s.presume(span{psn, psn.Next()})
}

// presume records r as not to be resent in this round, forgetting the
// oldest such span if all four are in use.
func (s *selSender) presume(r span) {
	copy(s.presumed[1:], s.presumed[:3])
	s.presumed[0] = r
}

func (s *selSender) isPresumed(p qp.PSN) bool {
	for _, r := range s.presumed {
		if r.has(p) {
			return true
		}
	}
	return false
}
