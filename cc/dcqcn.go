package cc

import (
	"math"
	"time"
)

// DCQCN is the congestion control of RoCEv2 NICs (Zhu et al., "Congestion
// Control for Large-Scale RDMA Deployments", SIGCOMM 2015, cited as DCQCN
// §n), as Mellanox ConnectX NICs implement it. A switch marks ECT packets
// CE with a RED-like probability (the congestion point, CP); the receiving
// NIC, the notification point (NP), turns marks into CNPs, at most one per
// interval per QP; the sending NIC, the reaction point (RP), cuts the QP's
// rate on each CNP by a factor that tracks how often CNPs come (alpha) and
// raises it again in stages, driven by a timer and a byte counter.
//
// RP, per QP, with RC the current rate and RT the target (DCQCN §3):
//
//   - a CNP: RT = RC, RC = RC·(1 - alpha/2) (at least the minimum rate),
//     alpha = (1-g)·alpha + g; the rate timer and byte counter restart and
//     their expiry counts T and BC go back to 0.
//   - alpha timer: for every K without a CNP, alpha = (1-g)·alpha.
//   - rate timer (every T after a cut) and byte counter (every B bytes
//     sent after a cut): each expiry adds one to its count and is an
//     increase event, whose stage the counts choose: fast recovery while
//     neither count is past F (RC = (RT+RC)/2); additive increase once one
//     is (RT += R_AI, then the same average); hyper increase once both are
//     (RT += R_HAI, the same average). RT never passes the line rate; when
//     RC reaches it the QP is unthrottled and the timer stops.
//
// NP, per QP (DCQCN §3): a packet marked CE gets a CNP at once unless the
// QP sent one less than the CNP interval ago.
//
// Where softnic chooses (docs/cc.md has the table with each default's
// source):
//
//   - Alpha is kept lazily: the K-periods that passed since it was last
//     brought up to date are applied together, (1-g)^n, whenever the sender
//     is called (OnCNP, OnSent, OnTimer), which is what a timer firing
//     every K would have left (to the last bits of a float: (1-g)^n is
//     taken by squaring), and alpha matters only at the next cut; so the
//     alpha timer costs the engine no wakeups, and Deadline is the rate
//     timer alone, running only while the QP is throttled.
//   - A late OnTimer applies every expiry due by then, each at its own
//     time (the timer restarts from its due time, not from the call), so
//     a coarse wheel gives the rates a punctual one would; OnSent and
//     OnCNP apply due expiries before their own event.
//   - Hyper increase adds a constant R_HAI, as Mellanox's rpg_hai_rate and
//     the HPCC repository's rdma-hw do; QCN (802.1Qau) and the DCQCN
//     authors' simulator grow the step with each hyper event (i·R_HAI).
//   - RT = RC on every CNP (the paper's rule; Mellanox's clamp_tgt_rate
//     options do it only in some stages), and no cut waits for a
//     rate-reduce monitor period (Mellanox's 4 µs): the NP's interval
//     already spaces CNPs.
//   - The NP sends its CNP for the marked packet that opens an interval and
//     none for marks inside it (as Mellanox's min_time_between_cnps); it
//     does not send one at the interval's end for marks that came inside.
//   - Rates are whole bit/s: a cut rounds to the nearest, the average
//     rounds up, so that RC reaches RT exactly.
const DCQCN = "dcqcn"

// DCQCN's knobs; each default and its source is in docs/cc.md.
var (
	dcqcnG            = FloatKnob(DCQCN, "g", "1/256", 0, 1, "g: alpha's gain (DCQCN §3, 1/256)")
	dcqcnInitialAlpha = FloatKnob(DCQCN, "initial_alpha", "1", 0, 1, "alpha before the first CNP: 1, the first cut halves the rate (Mellanox initial_alpha_value 1023/1024)")
	dcqcnAlphaTimer   = DurationKnob(DCQCN, "alpha_timer", 55*time.Microsecond, time.Microsecond, time.Second, "K: alpha decays once per K without a CNP (DCQCN §3, 55µs)")
	dcqcnRateTimer    = DurationKnob(DCQCN, "rate_timer", 55*time.Microsecond, time.Microsecond, time.Second, "T: rate-increase timer period (DCQCN's 55µs; ConnectX rpg_time_reset 300µs)")
	dcqcnByteCounter  = IntKnob(DCQCN, "byte_counter", 10_000_000, 0, 1<<40, "B: bytes sent per byte-counter increase event, 0 off (DCQCN's 10MB)")
	dcqcnFastRecovery = IntKnob(DCQCN, "fast_recovery", 5, 0, 1000, "F: increase events of fast recovery (DCQCN §3, 5)")
	dcqcnRAI          = RateKnob(DCQCN, "rai", 40_000_000, 0, 1e12, "R_AI: additive-increase step (DCQCN's 40Mbit at 40 Gbit/s)")
	dcqcnRHAI         = RateKnob(DCQCN, "rhai", 200_000_000, 0, 1e12, "R_HAI: hyper-increase step (the DCQCN authors' simulator, 200Mbit)")
	dcqcnMinRate      = RateKnob(DCQCN, "min_rate", 1_000_000, 1, maxRate, "the lowest rate a cut leaves (ConnectX rpg_min_rate, 1Mbit)")
	dcqcnCNPInterval  = DurationKnob(DCQCN, "cnp_interval", 50*time.Microsecond, 0, time.Second, "N: at most one CNP per QP per interval (DCQCN §3, 50µs)")
)

func init() {
	Register(DCQCN, func(p Params) Algorithm {
		return &dcqcnAlgorithm{
			p:            p,
			line:         p.LineRate,
			g:            dcqcnG(p),
			initialAlpha: dcqcnInitialAlpha(p),
			alphaTimer:   dcqcnAlphaTimer(p),
			rateTimer:    dcqcnRateTimer(p),
			byteCounter:  uint64(dcqcnByteCounter(p)),
			fastRecovery: dcqcnFastRecovery(p),
			rai:          dcqcnRAI(p),
			rhai:         dcqcnRHAI(p),
			minRate:      min(dcqcnMinRate(p), p.LineRate),
			cnpInterval:  dcqcnCNPInterval(p),
		}
	})
}

// dcqcnAlgorithm is DCQCN on one NIC: its parameters, and the counts its
// QPs' halves add to.
type dcqcnAlgorithm struct {
	p                     Params
	line                  uint64
	g, initialAlpha       float64
	alphaTimer, rateTimer time.Duration
	byteCounter           uint64
	fastRecovery          int
	rai, rhai, minRate    uint64
	cnpInterval           time.Duration
	n                     dcqcnCounts
}

// dcqcnCounts are what the counters report.
type dcqcnCounts struct {
	cuts, alphaUpdates                 uint64
	fastRecovery, additive, hyper      uint64
	timerExpiries, byteCounterExpiries uint64
	cnpsCoalesced                      uint64
}

func (a *dcqcnAlgorithm) Name() string   { return DCQCN }
func (a *dcqcnAlgorithm) Params() Params { return a.p }
func (a *dcqcnAlgorithm) Caps() Caps     { return Caps{ECN: true} }

func (a *dcqcnAlgorithm) NewSender() Sender {
	s := &dcqcnSender{a: a}
	s.Reset(0)
	return s
}

func (a *dcqcnAlgorithm) NewReceiver() Receiver { return &dcqcnReceiver{a: a} }

func (a *dcqcnAlgorithm) Counters() []Counter {
	n := &a.n
	return []Counter{
		{"dcqcn_rate_cuts", "CNPs that lowered a QP's rate (DCQCN reaction point: RC = RC(1-alpha/2)).", n.cuts},
		{"dcqcn_alpha_updates", "DCQCN alpha decays, one per alpha-timer period without a CNP, counted when applied.", n.alphaUpdates},
		{"dcqcn_fast_recovery", "DCQCN rate-increase events in fast recovery (RC = (RT+RC)/2).", n.fastRecovery},
		{"dcqcn_additive_increase", "DCQCN rate-increase events in additive increase (RT += R_AI).", n.additive},
		{"dcqcn_hyper_increase", "DCQCN rate-increase events in hyper increase (RT += R_HAI).", n.hyper},
		{"dcqcn_rate_timer_expiries", "DCQCN rate-increase timer expiries, each an increase event.", n.timerExpiries},
		{"dcqcn_byte_counter_expiries", "DCQCN byte-counter expiries (B bytes sent since a cut or the last), each an increase event.", n.byteCounterExpiries},
		{"dcqcn_cnps_coalesced", "CE-marked packets that got no CNP because their QP had sent one within the CNP interval (DCQCN notification point).", n.cnpsCoalesced},
	}
}

// dcqcnSender is DCQCN's reaction point for one QP.
type dcqcnSender struct {
	a      *dcqcnAlgorithm
	rc, rt uint64 // current and target rate, bit/s; rc <= rt
	alpha  float64
	// The alpha timer runs from the first CNP on: alphaAt is its next
	// expiry, applied lazily (decayAlpha).
	alphaOn bool
	alphaAt Time
	// throttled: a cut has not been recovered from; the rate timer
	// (next expiry rateAt) and the byte counter (bytes since it last
	// expired) run, and T and BC count their expiries since the cut.
	throttled bool
	rateAt    Time
	bytes     uint64
	t, bc     int
}

func (s *dcqcnSender) Reset(Time) {
	*s = dcqcnSender{a: s.a, rc: s.a.line, rt: s.a.line, alpha: s.a.initialAlpha}
}

func (s *dcqcnSender) Rate() uint64 { return s.rc }

func (s *dcqcnSender) OnCNP(now Time) bool {
	a := s.a
	s.advance(now)
	s.rt = s.rc
	s.rc = max(uint64(math.Round(float64(s.rc)*(1-s.alpha/2))), a.minRate)
	if s.rc < s.rt {
		a.n.cuts++
	}
	s.alpha = (1-a.g)*s.alpha + a.g
	s.alphaOn, s.alphaAt = true, now+a.alphaTimer
	s.throttled, s.rateAt = true, now+a.rateTimer
	s.bytes, s.t, s.bc = 0, 0, 0
	return true
}

func (s *dcqcnSender) OnSent(now Time, bytes int) {
	if !s.throttled || s.a.byteCounter == 0 {
		return
	}
	s.advance(now) // timer expiries due before these bytes come first
	s.bytes += uint64(max(bytes, 0))
	for s.throttled && s.bytes >= s.a.byteCounter {
		s.bytes -= s.a.byteCounter
		s.bc++
		s.a.n.byteCounterExpiries++
		s.increase()
	}
}

func (s *dcqcnSender) OnRTT(Time, time.Duration) {}

func (s *dcqcnSender) Deadline() (Time, bool) { return s.rateAt, s.throttled }

func (s *dcqcnSender) OnTimer(now Time) { s.advance(now) }

// advance applies every timer expiry due at or before now, each at its
// own time, so that a late call leaves what calls on time would have.
func (s *dcqcnSender) advance(now Time) {
	for s.throttled && s.rateAt <= now {
		s.rateAt += s.a.rateTimer
		s.t++
		s.a.n.timerExpiries++
		s.increase()
	}
	s.decayAlpha(now)
}

// decayAlpha applies the alpha-timer expiries due at or before now: one
// (1-g) for each K that passed without a CNP (DCQCN §3).
func (s *dcqcnSender) decayAlpha(now Time) {
	if !s.alphaOn || s.alphaAt > now {
		return
	}
	k := s.a.alphaTimer
	n := uint64((now-s.alphaAt)/k) + 1
	s.alpha *= powUint(1-s.a.g, n)
	s.alphaAt += Time(n) * k
	s.a.n.alphaUpdates += n
}

// increase is one rate-increase event, in the stage that the expiry
// counts T and BC choose (DCQCN §3).
func (s *dcqcnSender) increase() {
	a := s.a
	f := a.fastRecovery
	switch {
	case max(s.t, s.bc) <= f:
		a.n.fastRecovery++
	case min(s.t, s.bc) > f:
		s.rt = min(s.rt+a.rhai, a.line)
		a.n.hyper++
	default:
		s.rt = min(s.rt+a.rai, a.line)
		a.n.additive++
	}
	s.rc = (s.rt + s.rc + 1) / 2
	if s.rc >= a.line { // recovered: unthrottled, the timer stops
		s.rc, s.rt = a.line, a.line
		s.throttled, s.bytes = false, 0
	}
}

// powUint is x^n by squaring; x^1 is x exactly.
func powUint(x float64, n uint64) float64 {
	r := 1.0
	for n > 0 {
		if n&1 == 1 {
			r *= x
		}
		x *= x
		n >>= 1
	}
	return r
}

// dcqcnReceiver is DCQCN's notification point for one QP.
type dcqcnReceiver struct {
	a    *dcqcnAlgorithm
	sent bool // a CNP was sent, at last
	last Time
}

func (r *dcqcnReceiver) Reset(Time) { r.sent = false }

func (r *dcqcnReceiver) OnCE(now Time) bool {
	if r.sent && now-r.last < r.a.cnpInterval {
		r.a.n.cnpsCoalesced++
		return false
	}
	r.sent, r.last = true, now
	return true
}
