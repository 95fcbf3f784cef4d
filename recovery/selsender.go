package recovery

import (
	"time"

	"github.com/softnic/softnic/qp"
)

// selSender is the requester half shared by MELO and FaSR: the
// selective-repeat core (srSender) whose record of what the responder
// holds beyond the cumulative acknowledgement costs no per-QP bitmap
// (poolRecord), and the lost-retransmission rule.
type selSender struct {
	srSender
	pooled *poolRecord // the core's record

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
}

// selCounts are the counters of a scheme's selective senders (MELO's,
// FaSR's), which the scheme reports with its own (counters).
type selCounts struct {
	// lostRetransmits counts rounds a sender restarted because the
	// retransmission of its cumulative acknowledgement went
	// unacknowledged for a hold while the responder kept acknowledging
	// others (the lost-retransmission rule, docs/recovery.md).
	lostRetransmits uint64
	// unrecorded counts selective acknowledgements a sender could not
	// record for want of blocks (those packets are resent).
	unrecorded uint64
}

// counters are c's, as a scheme reports them (Scheme.Counters).
func (c *selCounts) counters() []Counter {
	return []Counter{
		{"sr_lost_retransmits", "Rounds restarted for a lost retransmission of the cumulative acknowledgement's packet (MELO, FaSR).", c.lostRetransmits},
		{"sr_sender_unrecorded", "Selective ACKs a sender could not record (resent instead).", c.unrecorded},
	}
}

// newSelSender is a selective sender of window packets whose record
// takes its blocks from pool and counts in stats.
func newSelSender(pool *BlockPool, window int, p Params, stats *selCounts) selSender {
	r := &poolRecord{pool: pool, window: window, stats: stats, bits: newChain()}
	return selSender{srSender: srSender{rec: r, window: window, rtoLow: p.RTOLow, rtoHigh: p.RTOHigh,
		lowThreshold: p.RTOLowThreshold}, pooled: r}
}

// poolRecord is MELO's and FaSR's record (srRecord) of what the responder
// holds beyond the cumulative acknowledgement. It has two parts:
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
// A PSN whose acknowledgement could not be recorded, because the pool was
// empty, is simply resent, as go-back-N would: correct, only slower.
//
// READ and atomic requests the responder holds out of order (SackKind
// Held) are presumed, not recorded: not resent in this round, forgotten
// when the round restarts. So are FaSR's gaps whose SACKs, not packets,
// were lost.
// What the scan has resent is the core's cursor: no bitmap either.
type poolRecord struct {
	pool   *BlockPool
	window int
	stats  *selCounts

	run      span   // acknowledged selectively, no bits needed
	bits     chain  // acknowledged selectively, beyond what the run says
	bitsHigh qp.PSN // the highest PSN set in bits
	// presumed are PSNs not to resend in this round though not
	// acknowledged (held requests; FaSR: a gap whose SACKs, not packets,
	// were lost).
	presumed [4]span
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
	s.srSender.reset(start)
	s.rtxAt, s.rtxSent, s.lastSent = s.now, start, start
}

func (r *poolRecord) reset(start qp.PSN) {
	r.bits.release(r.pool)
	r.bits = newChain()
	r.run = emptySpan(start)
	r.presumed = [4]span{}
}

// acked reports whether psn is acknowledged selectively.
func (r *poolRecord) acked(psn qp.PSN) bool { return r.run.has(psn) || r.bits.get(r.pool, psn) }

// mark records psn (at or after base) as acknowledged, in the run while
// psn touches it and no bits are in use; otherwise the bits take over,
// starting after the run when it is long enough to be worth compressing
// (FaSR's compression-cnt, §III-D) and absorbing it when not. It returns
// false, counting it, when the pool is short: that PSN will be resent.
func (r *poolRecord) mark(base, psn qp.PSN) bool {
	if psn.Before(base) || r.run.has(psn) {
		return true
	}
	if r.bits.empty() {
		if r.run.empty() || r.run.extend(psn) {
			r.run.add(psn)
			return true
		}
		if psn.After(r.run.end) && r.run.len() >= r.pool.BlockBits() {
			r.bits.start(r.run.end) // compressed: the run stays a count
		} else {
			from := r.run.start
			if psn.Before(from) {
				from = psn
			}
			r.bits.start(from)
			for p := r.run.start; p != r.run.end; p = p.Next() {
				r.setBit(p)
			}
			r.run = emptySpan(base)
		}
	}
	if psn.Before(r.bits.first) && (r.run.empty() || r.run.extend(psn)) {
		r.run.add(psn) // before the bits, e.g. the answer to a READ at base
		return true
	}
	return r.setBit(psn)
}

func (r *poolRecord) setBit(p qp.PSN) bool {
	fresh := r.bits.empty()
	if !fresh && p.Before(r.bits.first) && !r.bits.prepend(r.pool, p) {
		r.stats.unrecorded++
		return false
	}
	if !r.bits.set(r.pool, p) {
		r.stats.unrecorded++
		return false
	}
	if fresh || p.After(r.bitsHigh) {
		r.bitsHigh = p
	}
	return true
}

// advance moves the cumulative acknowledgement over the run and the bits,
// giving back the blocks it passes (all of them once nothing is recorded
// beyond it), and forgets the presumed spans it passes.
func (r *poolRecord) advance(base, unacked qp.PSN) qp.PSN {
	if unacked.After(base) {
		base = unacked
	}
	for {
		if r.run.has(base) {
			base = r.run.end
		} else if r.bits.get(r.pool, base) {
			base = base.Next()
		} else {
			break
		}
	}
	if !r.run.empty() && !r.run.end.After(base) {
		r.run = emptySpan(base)
	}
	r.bits.advance(r.pool, base)
	if !r.bits.empty() && base.After(r.bitsHigh) {
		r.bits.release(r.pool) // nothing recorded beyond base: all blocks go back
	}
	if r.bits.empty() {
		r.bits = newChain()
	}
	for i, p := range r.presumed {
		if !p.empty() && !p.end.After(base) {
			r.presumed[i] = span{}
		}
	}
	return base
}

// settled: acknowledged or presumed. What the round resent is the core's
// cursor.
func (r *poolRecord) settled(psn qp.PSN) bool { return r.acked(psn) || r.isPresumed(psn) }

func (r *poolRecord) fits(base, _, to qp.PSN) bool { return int(to.Diff(base)) < r.window }

// answered: held requests are presumed for the round, not recorded, so
// there is nothing to forget before an answer.
func (r *poolRecord) answered(_, _ qp.PSN) (qp.PSN, bool) { return 0, false }

// record marks from..to as acknowledged (Received or Answered), or as held
// (a READ or atomic request the responder keeps: not resent in this round,
// but completed only by its response).
func (r *poolRecord) record(base, from, to qp.PSN, kind SackKind) qp.PSN {
	for p := from; ; p = p.Next() {
		if kind == Held {
			r.hold(p)
		} else {
			r.mark(base, p)
		}
		if p == to {
			break
		}
	}
	return to.Next()
}

// newRound forgets the presumed spans when a timeout or an FNACK restarts
// the round.
func (r *poolRecord) newRound(restart bool) {
	if restart {
		r.presumed = [4]span{}
	}
}

// ack moves the cumulative acknowledgement (srSender.ack) and restarts
// the lost-retransmission hold when it moved.
func (s *selSender) ack(unacked qp.PSN) qp.PSN {
	old := s.base
	s.srSender.ack(unacked)
	if s.base != old {
		// The new one's retransmission, if any, is no older, and went out
		// before anything sent from now on.
		s.rtxAt, s.rtxSent = s.now, s.lastSent
	}
	return s.base
}

// Retransmitted moves the round's scan past psn; the retransmission of the
// cumulative acknowledgement's packet starts the lost-retransmission hold.
func (s *selSender) Retransmitted(psn qp.PSN) {
	if psn == s.base {
		s.rtxAt, s.rtxSent = s.now, s.lastSent
	}
	if !psn.Before(s.rtxNext) {
		s.rtxNext = psn.Next()
	}
}

// RetransmittedAt is Retransmitted with the time the packet went out and
// one past the highest PSN sent by then.
func (s *selSender) RetransmittedAt(now Time, psn, sent qp.PSN) {
	s.tick(now, sent)
	s.Retransmitted(psn)
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

// Timeout is the core's (srSender.Timeout); it also sets the
// lost-retransmission hold for the same estimate.
func (s *selSender) Timeout(base time.Duration, inflight int, rtt RTT) time.Duration {
	s.rtxHold = holdFor(rtt, s.rtoLow)
	return s.srSender.Timeout(base, inflight, rtt)
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
func (s *selSender) evict() { s.pooled.bits.spill(s.pooled.pool) }

// hold records psn as held by the responder: presumed, growing the latest
// span when psn follows it.
func (r *poolRecord) hold(psn qp.PSN) {
	if r.isPresumed(psn) {
		return
	}
	if r.presumed[0].extend(psn) {
		r.presumed[0].add(psn)
		return
	}
	r.presume(span{psn, psn.Next()})
}

// presume records sp as not to be resent in this round, forgetting the
// oldest such span if all four are in use.
func (r *poolRecord) presume(sp span) {
	copy(r.presumed[1:], r.presumed[:3])
	r.presumed[0] = sp
}

func (r *poolRecord) isPresumed(p qp.PSN) bool {
	for _, sp := range r.presumed {
		if sp.has(p) {
			return true
		}
	}
	return false
}
