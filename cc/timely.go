package cc

import (
	"math"
	"time"
)

// Timely is TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control
// for the Datacenter", SIGCOMM 2015): a QP's rate follows the gradient of
// its round-trip time, measured by the NIC, with no help from switches (no
// ECN, no CNPs). For each RTT sample (Timely's Algorithm 1):
//
//	new_rtt_diff = rtt - prev_rtt;  prev_rtt = rtt
//	rtt_diff = (1-alpha)·rtt_diff + alpha·new_rtt_diff   (an EWMA)
//	gradient = rtt_diff / min_rtt                        (normalised)
//	rtt < T_low:   rate += delta
//	rtt > T_high:  rate *= 1 - beta·(1 - T_high/rtt)
//	gradient <= 0: rate += N·delta, N = 5 after 5 negative gradients in a
//	               row (hyperactive increase, HAI), else 1
//	otherwise:     rate *= 1 - beta·gradient
//
// The rate starts at line rate (as IRN §4.1 runs Timely), never passes it
// and never falls below a minimum rate.
//
// Where softnic departs or chooses (docs/cc.md has the parameters and
// their sources):
//
//   - Samples: Timely takes one per completion event of a 16-64 KB
//     segment; softnic's engine takes one per round trip (a timed packet
//     sent once and its acknowledgement, Karn's rule), and each is a rate
//     update.
//   - The first sample only sets prev_rtt: there is no gradient yet.
//   - The count of negative gradients in a row is kept on every sample,
//     the T_low and T_high ones included; a gradient that is not negative
//     ends the run.
//   - A decrease factor below 0 (gradient above 1/beta) is taken as 0: the
//     rate goes to the minimum. A cut rate is rounded to the bit/s.
//
// This file uses only package cc's exported API (Register, the knob
// declarations, Sender, NoLimit, NoCNP, Counter): a second algorithm is
// one file, as issue 23 asks.
const Timely = "timely"

// Timely's knobs; docs/cc.md has each default's source.
var (
	timelyTLow      = DurationKnob(Timely, "t_low", 50*time.Microsecond, 0, time.Second, "T_low: below it the rate rises by delta whatever the gradient (Timely, 50µs)")
	timelyTHigh     = DurationKnob(Timely, "t_high", 500*time.Microsecond, 0, time.Second, "T_high: above it the rate is cut by beta·(1-T_high/rtt) (Timely, 500µs)")
	timelyMinRTT    = DurationKnob(Timely, "min_rtt", 20*time.Microsecond, time.Nanosecond, time.Second, "min RTT, the gradient's normaliser (Timely, 20µs)")
	timelyAlpha     = FloatKnob(Timely, "alpha", "0.875", 0, 1, "EWMA weight of a new RTT difference (Timely, 0.875)")
	timelyBeta      = FloatKnob(Timely, "beta", "0.8", 0, 1, "multiplicative decrease factor (Timely, 0.8)")
	timelyDelta     = RateKnob(Timely, "delta", 10_000_000, 0, 1e12, "delta: additive increase step (Timely, 10Mbit)")
	timelyHAIAfter  = IntKnob(Timely, "hai_after", 5, 1, 1000, "negative gradients in a row before hyperactive increase (Timely, 5)")
	timelyHAIFactor = IntKnob(Timely, "hai_factor", 5, 1, 1000, "N: hyperactive increase adds N·delta (Timely, 5)")
	timelyMinRate   = RateKnob(Timely, "min_rate", 10_000_000, 1, 1e15, "the lowest rate a cut leaves (softnic's choice, one delta: Timely states none)")
)

func init() {
	Register(Timely, func(p Params) Algorithm {
		return &timelyAlgorithm{
			p:         p,
			line:      p.LineRate,
			tLow:      timelyTLow(p),
			tHigh:     timelyTHigh(p),
			minRTT:    timelyMinRTT(p),
			alpha:     timelyAlpha(p),
			beta:      timelyBeta(p),
			delta:     timelyDelta(p),
			haiAfter:  timelyHAIAfter(p),
			haiFactor: uint64(timelyHAIFactor(p)),
			minRate:   min(timelyMinRate(p), p.LineRate),
		}
	})
}

// timelyAlgorithm is Timely on one NIC: its parameters, and the counts its
// QPs' senders add to.
type timelyAlgorithm struct {
	p                   Params
	line                uint64
	tLow, tHigh, minRTT time.Duration
	alpha, beta         float64
	delta               uint64
	haiAfter            int
	haiFactor           uint64
	minRate             uint64
	// What the counters report.
	tLowIncreases, additive, hai, gradientCuts, tHighCuts uint64
}

func (a *timelyAlgorithm) Name() string          { return Timely }
func (a *timelyAlgorithm) Params() Params        { return a.p }
func (a *timelyAlgorithm) Caps() Caps            { return Caps{} }
func (a *timelyAlgorithm) NewReceiver() Receiver { return NoCNP{} }

func (a *timelyAlgorithm) NewSender() Sender {
	s := &timelySender{a: a}
	s.Reset(0)
	return s
}

func (a *timelyAlgorithm) Counters() []Counter {
	return []Counter{
		{Name: "timely_tlow_increases", Help: "Timely rate increases by delta for an RTT below T_low.", Value: a.tLowIncreases},
		{Name: "timely_additive_increases", Help: "Timely rate increases by delta for an RTT gradient at or below 0.", Value: a.additive},
		{Name: "timely_hai_increases", Help: "Timely hyperactive increases (N·delta) after negative RTT gradients in a row.", Value: a.hai},
		{Name: "timely_gradient_decreases", Help: "Timely rate cuts by beta·gradient for a positive RTT gradient.", Value: a.gradientCuts},
		{Name: "timely_thigh_decreases", Help: "Timely rate cuts by beta·(1-T_high/rtt) for an RTT above T_high.", Value: a.tHighCuts},
	}
}

// timelySender is Timely for one QP: NoLimit's quiet answers (no timer,
// CNPs ignored, bytes not counted) but for its rate and its RTT samples.
type timelySender struct {
	NoLimit
	a        *timelyAlgorithm
	rate     uint64 // bit/s
	prevRTT  time.Duration
	havePrev bool
	rttDiff  float64 // ns, the EWMA of RTT differences
	negRun   int     // negative gradients in a row
}

func (s *timelySender) Reset(Time) { *s = timelySender{a: s.a, rate: s.a.line} }

func (s *timelySender) Rate() uint64 { return s.rate }

func (s *timelySender) OnRTT(_ Time, rtt time.Duration) {
	a := s.a
	if !s.havePrev {
		s.prevRTT, s.havePrev = rtt, true
		return
	}
	newDiff := float64(rtt - s.prevRTT)
	s.prevRTT = rtt
	s.rttDiff = (1-a.alpha)*s.rttDiff + a.alpha*newDiff
	gradient := s.rttDiff / float64(a.minRTT)
	if gradient < 0 {
		s.negRun++
	} else {
		s.negRun = 0
	}
	switch {
	case rtt < a.tLow:
		s.increase(a.delta)
		a.tLowIncreases++
	case rtt > a.tHigh:
		s.cut(1 - a.beta*(1-float64(a.tHigh)/float64(rtt)))
		a.tHighCuts++
	case gradient <= 0 && s.negRun >= a.haiAfter:
		s.increase(a.haiFactor * a.delta)
		a.hai++
	case gradient <= 0:
		s.increase(a.delta)
		a.additive++
	default:
		s.cut(1 - a.beta*gradient)
		a.gradientCuts++
	}
}

func (s *timelySender) increase(step uint64) { s.rate = min(s.rate+step, s.a.line) }

func (s *timelySender) cut(factor float64) {
	s.rate = max(uint64(math.Round(float64(s.rate)*max(factor, 0))), s.a.minRate)
}
