// Package cc holds softnic's congestion-control algorithms behind one small
// interface, as package recovery holds its loss-recovery schemes. An
// algorithm never touches frames, sockets or timers: the engine tells it
// what happened to a QP — a packet went out, a CNP came back, a round trip
// was measured, a packet arrived marked Congestion Experienced — and the
// algorithm answers with a rate to pace the QP to, whether to send a CNP,
// and when it wants its timer. Time is passed in (a Duration since the
// engine's epoch), so a fake clock drives it exactly; there are no
// goroutines and no Go timers.
//
// Each QP has two halves, built by the Algorithm chosen for it:
//
//   - the Sender is DCQCN's reaction point (RP): the rate the requester
//     paces the QP to (Rate, in bit/s; 0 is no limit), moved by CNPs
//     (OnCNP), bytes sent (OnSent: DCQCN's byte counter), round-trip
//     samples (OnRTT: Timely) and its own timer (Deadline, OnTimer);
//   - the Receiver is the notification point (NP): for each packet that
//     arrives with CE in its IP header it says whether to send a CNP now
//     (OnCE).
//
// A Pacer (pacer.go) turns the rate into send times: a per-QP virtual
// clock, as the emulated link's bucket in package dataplane.
//
// Algorithms are registered by name (Register) and built per NIC from
// Params (New); their parameters are knobs of their own (knobs.go),
// declared in their file and set as algorithm.knob=value. "none" is the
// default: no rate limit, never a CNP, no timer. Each algorithm is one
// file: "dcqcn" is DCQCN (Zhu et al., SIGCOMM 2015, as Mellanox NICs
// implement it) and "timely" is TIMELY (Mittal et al., SIGCOMM 2015),
// written on the exported API alone. docs/cc.md has each parameter with
// its default and source.
//
// # What the engine calls, and when
//
// The engine owns the wire (CNPs, ECN bits), the timer wheel and the
// counters named after mlx5's; it calls:
//
//   - once per NIC: New(name, Params{LineRate: the port's rate, Knobs:
//     ...}); Algorithm.Caps says whether data frames must carry ECT.
//   - per QP: NewSender and NewReceiver when the QP is made; Sender.Reset
//     at modify to RTS, Receiver.Reset at modify to RTR.
//   - before the QP sends a packet that carries payload (a request, a
//     READ response; not an ACK, NAK or CNP): the packet may go when its
//     Pacer is Open; otherwise the QP waits until Pacer.At.
//   - after it sent one: Pacer.NextSend(now, wire bytes, Sender.Rate()),
//     then Sender.OnSent(now, wire bytes), both with the frame's bytes
//     on the wire (dataplane.WireBytes).
//   - a CNP arrived for the QP: Sender.OnCNP(now); it reports whether
//     the algorithm acted on it (mlx5's rp_cnp_handled) or not
//     (rp_cnp_ignored).
//   - an RTT sample was taken (one per round trip, dataplane's rttAcked):
//     Sender.OnRTT(now, rtt).
//   - the QP's cc timer: after Reset, OnCNP, OnRTT and OnTimer (not
//     OnSent, which never brings a deadline earlier) the engine reads
//     Sender.Deadline and arms one wheel timer at it, or stops it; when
//     it fires, Sender.OnTimer(now). OnTimer may come late or early: it
//     does what is due at now and nothing else.
//   - a packet for the QP arrived with CE (np_ecn_marked_roce_packets):
//     if Receiver.OnCE(now), send a CNP to the QP's peer (np_cnp_sent).
//   - for stats: Algorithm.Counters, added to the NIC's by name.
//
// Every call on the data path is allocation-free, for every algorithm.
package cc

import (
	"fmt"
	"sort"
	"time"
)

// Time is monotonic time since the engine's epoch, as in package
// recovery; every call takes it explicitly so that tests can drive a
// fake clock.
type Time = time.Duration

// Params are what the engine tells an algorithm about the NIC, and each
// algorithm's own knobs.
type Params struct {
	// LineRate is the port's rate in bit/s: where a rate-based algorithm
	// starts a QP (DCQCN's flows start at line rate, and IRN §4.1 starts
	// them so under every congestion control it runs) and
	// the most it ever gives one. 0 takes DefaultLineRate.
	LineRate uint64
	// Knobs are the algorithms' own knobs (Knob), by algorithm.knob, as
	// users write them: {"dcqcn.rai": "40Mbit"}. A knob not set has its
	// default; New checks them all.
	Knobs KnobValues
}

// DefaultLineRate is 40 Gbit/s, the line rate of DCQCN's testbed and of
// IRN's default scenario (IRN §4.1).
const DefaultLineRate = 40_000_000_000

// WithDefaults fills zero fields.
func (p Params) WithDefaults() Params {
	if p.LineRate == 0 {
		p.LineRate = DefaultLineRate
	}
	return p
}

// Caps are what an algorithm asks of the engine beyond the Sender and
// Receiver calls.
type Caps struct {
	// ECN: the QP's data frames carry ECT in their IP header (RFC 3168),
	// so that a switch marks them CE instead of dropping them, and the
	// receiving NIC's notification point sees congestion (DCQCN §3).
	ECN bool
}

// Algorithm builds the per-QP halves of one congestion-control algorithm
// on one NIC and keeps what they count.
type Algorithm interface {
	Name() string
	Params() Params
	Caps() Caps
	NewSender() Sender
	NewReceiver() Receiver
	// Counters are the algorithm's counters on this NIC, summed over its
	// QPs: the same names in the same order at every call, zeros
	// included, from when it is built. The engine adds them to its own by
	// name, as it does a recovery scheme's.
	Counters() []Counter
}

// Sender is the reaction point of one QP: the rate its requester is paced
// to.
type Sender interface {
	// Reset starts the QP afresh at now (modify to RTS): line rate, no
	// congestion seen, no timer.
	Reset(now Time)
	// Rate is the rate, in bit/s of wire bytes, the QP may send at now;
	// 0 means no limit of the algorithm's own.
	Rate() uint64
	// OnSent reports a packet of bytes (its wire bytes) sent at now.
	OnSent(now Time, bytes int)
	// OnCNP reports a congestion notification packet for the QP at now;
	// handled says whether the algorithm acted on it (mlx5 counts one it
	// did as rp_cnp_handled, one it did not as rp_cnp_ignored).
	OnCNP(now Time) (handled bool)
	// OnRTT reports a round-trip sample rtt taken at now (one per round
	// trip: a packet sent once and its acknowledgement).
	OnRTT(now Time, rtt time.Duration)
	// Deadline is when the sender wants OnTimer called; ok false when it
	// wants nothing. It moves only with Reset, OnCNP, OnRTT and OnTimer,
	// and OnSent may only move it later or clear it.
	Deadline() (at Time, ok bool)
	// OnTimer does what is due at now: the engine calls it at or after
	// Deadline (a call with nothing due does nothing).
	OnTimer(now Time)
}

// Receiver is the notification point of one QP.
type Receiver interface {
	// Reset starts the QP afresh at now (modify to RTR).
	Reset(now Time)
	// OnCE reports a packet for the QP that arrived at now with CE in its
	// IP header; sendCNP asks the engine to send the QP's peer a CNP now.
	OnCE(now Time) (sendCNP bool)
}

// Counter is one of an algorithm's counters on one NIC, in the shape of
// recovery.Counter: the engine prints Name and Value in `softnic stats`
// and exports softnic_<Name>_total with Help. Names are lower case, words
// joined by '_', with no unit and no _total; nothing outside the
// algorithm's file names them.
type Counter struct {
	Name  string
	Help  string
	Value uint64
}

// AllCounters are the counters of every registered algorithm, as one just
// built reports them (every value 0), each name once: algorithms in
// Names' order, each one's counters in its own. It is what a NIC can
// report, for the tools that list or document counters.
func AllCounters() []Counter {
	var all []Counter
	for _, name := range Names() {
		a, err := New(name, Params{})
		if err != nil {
			panic(err) // every registered algorithm builds with the defaults
		}
	next:
		for _, c := range a.Counters() {
			for _, have := range all {
				if have.Name == c.Name {
					continue next
				}
			}
			all = append(all, c)
		}
	}
	return all
}

// Factory builds an algorithm for one NIC from its Params, defaults
// filled and knobs checked.
type Factory func(Params) Algorithm

var registry = map[string]Factory{}

// Register makes an algorithm selectable by name; it panics on a
// duplicate name (a programming error at init time).
func Register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("cc: algorithm registered twice: " + name)
	}
	registry[name] = f
}

// New returns the named algorithm for one NIC.
func New(name string, p Params) (Algorithm, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("cc: unknown algorithm %q (have %v)", name, Names())
	}
	if err := p.Knobs.Check(); err != nil {
		return nil, fmt.Errorf("cc: %w", err)
	}
	return f(p.WithDefaults()), nil
}

// Names lists the registered algorithms, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
