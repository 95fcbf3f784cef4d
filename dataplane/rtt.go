package dataplane

import (
	"math"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Timeouts that follow the path (docs/recovery.md): with Config.RTO
// adaptive every QP measures its round trip from its own ACKs and the
// scheme derives its timeouts from the estimate (recovery.RTT).
//
// Measurement is TCP's without timestamps: one PSN per QP is timed at a
// time, the next new packet that asks for a response (AckReq, a READ or
// an atomic) when none is; its sample is the engine's time when the
// cumulative acknowledgement passes it (an ACK, a NAK's implied ACK, a
// READ response, an atomic ACK) less the time it was sent. Karn's rule:
// when any PSN up to and including the timed one is sent again, the
// timing is dropped (counted in rtt_karn_skipped), so no sample comes
// from a retransmitted packet, nor from an acknowledgement that a
// retransmission of an earlier packet released. The state is three words
// of the on-chip context (rttOnChipBytes) and costs nothing per packet
// but a compare. A timeout backs the RTO off until the next sample
// (Karn's algorithm, rttTimedOut), on top of Config.RTOBackoff.

// rttOnChipBytes is what the estimate adds to an adaptive QP's on-chip
// context, as a NIC would keep it: SRTT and RTTVAR in 4 bytes of
// nanoseconds each, the timed PSN in 3 and its send time in 4, one byte
// for the valid flag and Karn's backoff.
const rttOnChipBytes = 4 + 4 + 3 + 4 + 1

// rttSent: psn went out for the first time; respond says its receipt will
// be answered at once (AckReq, a READ, an atomic).
func (e *Engine) rttSent(q *QP, psn qp.PSN, respond bool) {
	if e.cfg.RTO == RTOAdaptive && respond && q.rttPSN == 0 {
		q.rttPSN, q.rttSentAt = psn+1, e.now
	}
}

// rttResent: psn went out again. Karn: if the timed PSN or one before it
// is resent, its acknowledgement is ambiguous.
func (e *Engine) rttResent(q *QP, psn qp.PSN) {
	if q.rttPSN != 0 && !(q.rttPSN - 1).Before(psn) {
		q.rttPSN = 0
		e.cnt.RTTKarnSkipped++
	}
}

// rttAcked runs when unacked moved: a sample if it passed the timed PSN.
func (e *Engine) rttAcked(q *QP) {
	if q.rttPSN == 0 || !(q.rttPSN - 1).Before(q.unacked) {
		return
	}
	m := max(e.now-q.rttSentAt, 0)
	q.rtt.Sample(m)
	q.rttPSN, q.rttBackoff = 0, 0
	e.cnt.RTTSamples++
	e.cnt.RTTSampleNs += uint64(m)
}

// rttTimedOut: the retransmission timer fired. Karn's algorithm (RFC 6298
// §5.5, §5.7): the RTO doubles and stays doubled, over later packets too,
// until a packet sent once is acknowledged and gives a sample. Without it
// a path that got slower than the RTO would never be measured again:
// every timed packet would time out, be resent and lose its sample.
func (e *Engine) rttTimedOut(q *QP) {
	if e.cfg.RTO == RTOAdaptive && q.rttBackoff < maxRTOBackoffShift {
		q.rttBackoff++
	}
}

// noteRTO keeps the engine's smallest and largest retransmission timeout
// chosen (before backoff).
func (e *Engine) noteRTO(rto time.Duration) {
	v := uint64(max(rto, 0))
	if e.cnt.RTOMinNs == 0 || v < e.cnt.RTOMinNs {
		e.cnt.RTOMinNs = v
	}
	e.cnt.RTOMaxNs = max(e.cnt.RTOMaxNs, v)
}

// RTTInfo is one QP's round-trip estimate and the timeouts it gives now.
type RTTInfo struct {
	recovery.RTT
	// Timing: a PSN is being timed now.
	Timing bool
	// RTOFew and RTOMany are the retransmission timeouts the QP's scheme
	// arms with one packet and with very many packets in flight (IRN's
	// RTO_low and RTO_high; go-back-N's one timeout twice), before
	// backoff; 0 when the QP has no ACK timeout.
	RTOFew, RTOMany time.Duration
}

// QPRTT returns q's round-trip estimate.
func (e *Engine) QPRTT(q *QP) RTTInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touch(q, false)
	info := RTTInfo{RTT: q.rtt, Timing: q.rttPSN != 0}
	if base, ok := ackTimeout(q.timeoutCode); ok {
		info.RTOFew = q.sender.Timeout(base, 1, q.rtt)
		info.RTOMany = q.sender.Timeout(base, math.MaxInt32, q.rtt)
	}
	return info
}

// maxRTOBackoffShift caps Config.RTOBackoff, and Karn's backoff of an
// adaptive RTO, at 16 times the timeout.
const maxRTOBackoffShift = 4
