package recovery

import (
	"time"

	"github.com/softnic/softnic/qp"
)

// srSender is the selective-repeat requester core shared by IRN, MELO and
// FaSR: the cumulative acknowledgement, BDP-FC's window, the loss rule, the
// recovery round and its retransmission scan, and IRN's two timeouts.
//
// A PSN is lost when it is not accounted for and a later one is
// acknowledged (it lies below lossEdge): it is resent once per round, a
// round being a scan by rtxNext from base. A round begins when an
// acknowledgement leaves a hole (or a NAK, for IRN) and none is on; it
// ends when the cumulative acknowledgement passes recoverSeq, the highest
// PSN sent when it began (IRN §3.1); a timeout (or FaSR's FNACK) restarts
// it.
//
// What the responder holds beyond the cumulative acknowledgement is the
// part each scheme supplies, rec: IRN keeps per-QP bitmaps (sackBitmaps),
// MELO and FaSR a run and a chain of shared pool blocks (poolRecord).
type srSender struct {
	rec srRecord

	window          int // BDP-FC: the most packets in flight
	rtoLow, rtoHigh time.Duration
	lowThreshold    int // IRN's N: RTO_low with at most this many in flight

	base       qp.PSN // cumulative acknowledgement: every PSN before it is acknowledged
	lossEdge   qp.PSN // the PSNs before it that are not accounted for are lost
	recovery   bool
	recoverSeq qp.PSN // the highest PSN sent when recovery began
	rtxNext    qp.PSN // the round's scan cursor: no PSN before it (from base) is waiting to be resent
}

// srRecord is a selective-repeat sender's record of what the responder
// holds beyond the cumulative acknowledgement, and of what needs no
// resending in the current round. base is always the sender's cumulative
// acknowledgement, passed in so that a record keeps no copy of it. The
// methods run on every acknowledgement and must not allocate.
type srRecord interface {
	// reset forgets everything: a fresh connection whose cumulative
	// acknowledgement is start.
	reset(start qp.PSN)
	// advance moves the cumulative acknowledgement from base to unacked
	// (when that is after it) and then over the PSNs acknowledged
	// selectively, forgets what lies before it, and returns it.
	advance(base, unacked qp.PSN) qp.PSN
	// settled reports whether psn (at or after base) needs no resending
	// in this round: acknowledged, held by the responder, or otherwise
	// not to be resent (IRN: resent already; FaSR: presumed).
	settled(psn qp.PSN) bool
	// fits reports whether a selective acknowledgement of from..to (from
	// at or after base, to not before from) can be recorded.
	fits(base, from, to qp.PSN) bool
	// answered is told that the response of from arrived (SackKind
	// Answered): a record that tracks held requests forgets those before
	// from, whose responses were lost, and returns the first of them
	// (ok), which the scan must revisit.
	answered(base, from qp.PSN) (rewind qp.PSN, ok bool)
	// record records from..to as acknowledged in the way kind says and
	// returns the loss edge that this acknowledgement sets.
	record(base, from, to qp.PSN, kind SackKind) (edge qp.PSN)
	// newRound is told that a round begins; restart says that a timeout
	// or an FNACK began it, after which nothing presumed (held, not
	// acknowledged) before stands.
	newRound(restart bool)
}

// reset starts a fresh connection at start.
func (c *srSender) reset(start qp.PSN) {
	c.rec.reset(start)
	c.base, c.lossEdge, c.rtxNext = start, start, start
	c.recovery = false
}

// Window is BDP-FC's cap (IRN §3.2).
func (c *srSender) Window() int { return c.window }

// Copies is 1: selective repeat sends every packet once.
func (c *srSender) Copies(bool) int { return 1 }

// Timeout is RTO_low with at most N packets in flight, RTO_high otherwise
// (IRN §3.1): the fixed values, or IRN's rule on the QP's round-trip
// estimate (RTT.RTOLow, RTT.RTOHigh); neither is longer than the QP's own
// ACK timeout.
func (c *srSender) Timeout(base time.Duration, inflight int, rtt RTT) time.Duration {
	return rtoFor(rtt, base, c.rtoLow, c.rtoHigh, inflight, c.lowThreshold)
}

// ack moves the cumulative acknowledgement to unacked and then over the
// PSNs already acknowledged selectively; recovery ends once it passes the
// recovery sequence (§3.1). It returns the new cumulative acknowledgement.
func (c *srSender) ack(unacked qp.PSN) qp.PSN {
	c.base = c.rec.advance(c.base, unacked)
	c.raiseLossEdge(c.base)
	if c.rtxNext.Before(c.base) {
		c.rtxNext = c.base
	}
	if c.recovery && c.base.After(c.recoverSeq) {
		c.recovery = false
	}
	return c.base
}

// sack records a selective acknowledgement of from..to (see
// Sender.OnSack) and enters recovery when it leaves a hole: a PSN before
// from that is not accounted for.
func (c *srSender) sack(from, to qp.PSN, kind SackKind, sent qp.PSN) {
	if from.Before(c.base) {
		from = c.base
	}
	if to.Before(from) || !c.rec.fits(c.base, from, to) {
		return
	}
	if kind == Answered {
		if p, ok := c.rec.answered(c.base, from); ok && p.Before(c.rtxNext) {
			c.rtxNext = p // the scan passed it while it was held
		}
	}
	hole := c.holeBefore(from)
	c.raiseLossEdge(c.rec.record(c.base, from, to, kind))
	if hole {
		c.enterRecovery(sent)
	}
}

// accounted reports whether psn needs no retransmission now: the record
// says so, or this round's scan has passed it. (IRN's record keeps what
// the scan resent itself, so the scan adds nothing there: it passes only
// accounted PSNs, and goes back when one stops being so.)
func (c *srSender) accounted(psn qp.PSN) bool {
	return c.rec.settled(psn) || c.recovery && psn.Before(c.rtxNext)
}

// holeBefore reports whether a PSN from base up to p is not accounted for.
func (c *srSender) holeBefore(p qp.PSN) bool {
	for q := c.base; q.Before(p); q = q.Next() {
		if !c.accounted(q) {
			return true
		}
	}
	return false
}

// raiseLossEdge makes the PSNs before edge that are not accounted for lost.
func (c *srSender) raiseLossEdge(edge qp.PSN) {
	if edge.After(c.lossEdge) {
		c.lossEdge = edge
	}
}

// enterRecovery starts a round unless one is on: the scan restarts at the
// cumulative acknowledgement, which is resent first (§3.1), and the
// recovery sequence is the highest PSN sent.
func (c *srSender) enterRecovery(sent qp.PSN) {
	if c.recovery {
		return
	}
	c.startRound(sent, false)
}

// restart begins a new round from base even if one is on: a timeout or an
// FNACK says that a retransmission was lost too.
func (c *srSender) restart(sent qp.PSN) {
	c.recovery = false
	c.startRound(sent, true)
}

func (c *srSender) startRound(sent qp.PSN, restart bool) {
	c.rec.newRound(restart)
	c.recovery, c.recoverSeq = true, sent.Prev()
	c.rtxNext = c.base
	c.raiseLossEdge(c.base.Next())
}

// NextRetransmit applies the loss rule (IRN §3.1): after the cumulative
// acknowledgement, a packet is lost only if a later one was acknowledged
// (or NAKed as missing); each is resent once per round.
func (c *srSender) NextRetransmit() (qp.PSN, bool) {
	if !c.recovery {
		return 0, false
	}
	for c.rtxNext.Before(c.lossEdge) {
		if !c.accounted(c.rtxNext) {
			return c.rtxNext, true
		}
		c.rtxNext = c.rtxNext.Next()
	}
	return 0, false
}
