package recovery

import "time"

// RTT is one QP's smoothed round-trip estimate, RFC 6298 §2 (SRTT and
// RTTVAR, alpha 1/8, beta 1/4). The transport keeps it in the QP context
// and takes its samples (Karn's rule is the transport's business: it
// times only packets sent once); the schemes turn it into timeouts
// (Sender.Timeout). The zero value has no sample, and a scheme given it
// uses its fixed timeouts: that is both "before the first sample" and the
// fixed-timeout mode, in which the transport never samples.
//
// docs/recovery.md, "Timeouts that follow the path", has the rule.
type RTT struct {
	SRTT   time.Duration
	RTTVar time.Duration
	// MinRTT is the least sample: the path's round trip without a queue,
	// which IRN's multipliers scale (SRTT already holds the queue they
	// allow for).
	MinRTT time.Duration
	Valid  bool // at least one sample was taken
}

// RTTGranularity is G of RFC 6298: the least margin an RTO keeps over
// SRTT. It is 4.096 µs, the unit in which IBA states the local ACK
// timeout (4.096 µs·2^code, §9.7.6.1.3), so the finest timer an RNIC is
// asked to keep. It also makes IRN's rule below give the paper's RTO_low
// exactly at its fixed point (4·24 µs + 4.096 µs = 100 µs).
const RTTGranularity = 4096 * time.Nanosecond

// Multipliers of the base round trip in IRN's two timeouts (IRN §3.1,
// §4.1), fitted to the paper's default scenario: a 24 µs base round trip
// (a 120 KB BDP at 40 Gb/s over six 2 µs hops) gives RTO_low = 4·24 +
// 4.096 ≈ 100 µs and RTO_high = 13·24 + 4.096 ≈ 316 µs, the paper's 100
// and "about 320" µs. They scale MinRTT, the base round trip: the paper's
// 13 allows for one congested link's queue on top of it, and a software
// NIC's SRTT under load already holds that queue (a QP that keeps the
// BDP cap in flight measures the cap's drain time), so 13·SRTT came out
// at several milliseconds on the testbed and stalled every lost
// retransmission that long. Neither timeout is below SRTT + margin,
// RFC 6298's RTO, so a path that got slower than its minimum is still
// followed.
const (
	rttLowFactor  = 4
	rttHighFactor = 13
)

// Sample folds one measurement m into the estimate (RFC 6298 §2.2, §2.3;
// RTTVAR is updated with the old SRTT).
func (r *RTT) Sample(m time.Duration) {
	if m < 0 {
		m = 0
	}
	if !r.Valid {
		r.SRTT, r.RTTVar, r.MinRTT, r.Valid = m, m/2, m, true
		return
	}
	r.MinRTT = min(r.MinRTT, m)
	d := r.SRTT - m
	if d < 0 {
		d = -d
	}
	r.RTTVar = (3*r.RTTVar + d + 2) / 4
	r.SRTT = (7*r.SRTT + m + 4) / 8
}

// margin is max(G, 4·RTTVAR), RFC 6298's allowance for variation.
func (r RTT) margin() time.Duration { return max(RTTGranularity, 4*r.RTTVar) }

// RTO is RFC 6298's retransmission timeout: SRTT + max(G, 4·RTTVAR),
// without RFC 6298's 1 s minimum (a datacenter path is microseconds).
func (r RTT) RTO() time.Duration { return r.SRTT + r.margin() }

// RTOLow is IRN's RTO_low (§3.1) for this path:
// max(4·MinRTT, SRTT) + max(G, 4·RTTVAR).
func (r RTT) RTOLow() time.Duration { return max(rttLowFactor*r.MinRTT, r.SRTT) + r.margin() }

// RTOHigh is IRN's RTO_high (§4.1, "the maximum round trip with one
// congested link") for this path: max(13·MinRTT, SRTT) + max(G, 4·RTTVAR).
func (r RTT) RTOHigh() time.Duration { return max(rttHighFactor*r.MinRTT, r.SRTT) + r.margin() }

// rtoFor is a selective scheme's two timeouts: the fixed ones until
// the path has been measured, then IRN's rule on the estimate; either way
// no longer than the QP's negotiated ACK timeout base.
func rtoFor(rtt RTT, base, fixedLow, fixedHigh time.Duration, inflight, lowThreshold int) time.Duration {
	low, high := fixedLow, fixedHigh
	if rtt.Valid {
		low, high = rtt.RTOLow(), rtt.RTOHigh()
	}
	if inflight <= lowThreshold {
		return min(low, base)
	}
	return min(high, base)
}
