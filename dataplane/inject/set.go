package inject

import (
	"fmt"
	"slices"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/netsw"
)

// DefaultTraceCap is a Set's trace capacity with TraceCap 0: 262,144
// packets, about 34 MB of records (a conformance case needs hundreds; a
// longer capture sets TraceCap).
const DefaultTraceCap = 1 << 18

// maxEventPrealloc bounds the event log allocated up front; past it the log
// grows (a rule file whose counts add up to more than this applies its
// actions rarely enough that growing costs nothing that matters).
const maxEventPrealloc = 4096

// Set is a rule file's rules with their state at one switch: each rule's
// count of the packets it matched (for nth), its ISN and its target PSN's
// arrivals (for psn_offset), the log of every application (Events) and the
// trace of every RoCEv2 packet the switch saw (Trace).
//
// A Set is not safe for concurrent use: a switch decides its packets one
// at a time, in arrival order, which is what nth and iteration count.
type Set struct {
	// TraceCap bounds the trace in records (0: DefaultTraceCap). The
	// trace is allocated at this capacity by Prepare or the first Decide;
	// past it, records are counted (TraceDropped) and not kept. Set it
	// before either.
	TraceCap int

	rules        []Rule
	state        []ruleState
	ready        bool
	seq          uint64
	events       []Event
	trace        []Record
	traceDropped uint64
}

// ruleState is what a rule has seen.
type ruleState struct {
	matched  uint64 // packets that matched (nth counts these)
	haveISN  bool
	target   uint32 // ISN + PSNOffset, mod 2^24
	arrivals uint64 // arrivals of the target PSN (iteration counts these)
}

// Decision is what Decide did or asks the caller to do with a packet.
type Decision struct {
	Action Action        // ActNone: forward it as it is
	Delay  time.Duration // ActDelay: forward it this much later
	Rule   int           // the rule that acted, -1 if none
}

// NewSet returns a Set of rules built in code, checked as Parse checks a
// file's. A rule's zero Match.Kind matches every kind (as KindAny).
func NewSet(rules []Rule) (*Set, error) {
	for i := range rules {
		if err := rules[i].validate(); err != nil {
			return nil, fmt.Errorf("rule %d%s: %v", i, quoteName(rules[i].Name), err)
		}
	}
	return &Set{rules: slices.Clone(rules), state: make([]ruleState, len(rules))}, nil
}

// Rules returns a copy of the set's rules.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Events returns the log of every action applied, in order. The slice is
// the Set's, not a copy; a later Decide may append to the log.
func (s *Set) Events() []Event { return s.events }

// Trace returns the record of every RoCEv2 packet decided on, up to
// TraceCap, in arrival order. The slice is the Set's.
func (s *Set) Trace() []Record { return s.trace }

// TraceDropped counts the packets past TraceCap, not kept in the trace.
func (s *Set) TraceDropped() uint64 { return s.traceDropped }

// Prepare allocates the trace and the event log, and touches every page
// of the trace, so that the first packets do not pay for them; a switch
// calls it before it serves. Without it the first Decide prepares, and
// on real wires that first packet then waits for the page faults of the
// whole trace: 34 MB at DefaultTraceCap, about 30 ms on the two-core
// testbed, during which the switch forwarded nothing and every timer of
// a conformance case kept running (docs/conform.md). Later calls do
// nothing.
func (s *Set) Prepare() {
	if s.ready {
		return
	}
	c := s.TraceCap
	if c <= 0 {
		c = DefaultTraceCap
	}
	s.trace = make([]Record, c)
	clear(s.trace) // writing faults every page in; make's fresh pages are not yet
	s.trace = s.trace[:0]
	total := 0
	for i := range s.rules {
		total = min(total+s.rules[i].Count, maxEventPrealloc)
	}
	s.events = make([]Event, 0, total)
	s.ready = true
}

// Decide is a switch's injection step for one arriving frame: it
// classifies the frame (Classify), counts it for every rule that matches
// it, and if a rule hits it, the first such rule acts. An ecn or corrupt
// action is applied here, in place on frame; drop, delay and duplicate are
// the caller's to carry out as the Decision says. Either way the action
// is logged (Events). A rule that also hits the packet after the first
// one counts it but does not act on it (one action per packet). Every
// RoCEv2 frame (Kind not KindOther) is appended to the trace with the
// action taken; other frames are neither traced nor matched.
//
// now is the switch's clock and inPort the port the frame arrived on,
// both only recorded. Decide does not allocate after Prepare (or the
// first call, which prepares).
func (s *Set) Decide(now time.Duration, inPort int, frame []byte) Decision {
	d := Decision{Rule: -1}
	sum, f, ok := classify(frame)
	if !ok {
		return d
	}
	if !s.ready {
		s.Prepare()
	}
	seq := s.seq
	s.seq++
	for i := range s.rules {
		r := &s.rules[i]
		if !r.Match.matches(&sum) || !s.state[i].hit(r, sum.PSN) || d.Rule >= 0 {
			continue
		}
		d = Decision{Action: r.Action, Delay: r.Delay, Rule: i}
	}
	if d.Rule >= 0 {
		switch d.Action {
		case ActMark:
			netsw.SetCE(f.Buf)
		case ActCorrupt:
			corrupt(&f.Pkt)
		}
		s.events = append(s.events, Event{At: now, Rule: d.Rule, Name: s.rules[d.Rule].Name, Action: d.Action, Pkt: sum, Seq: seq})
	}
	if len(s.trace) < cap(s.trace) {
		s.trace = append(s.trace, Record{Seq: seq, At: now, InPort: inPort, Pkt: sum, Action: d.Action, Rule: d.Rule})
	} else {
		s.traceDropped++
	}
	return d
}

// hit counts a packet r matched, of PSN psn, and reports whether r's
// position names it: the nth..nth+count-1 matching packet, or the
// iteration..iteration+count-1 arrival of the target PSN.
func (st *ruleState) hit(r *Rule, psn uint32) bool {
	count := uint64(r.Count)
	if n := uint64(r.Packet.Nth); n > 0 {
		st.matched++
		return st.matched >= n && st.matched-n < count
	}
	if !st.haveISN {
		st.haveISN = true
		st.target = (psn + r.Packet.PSNOffset) & (psnMod - 1)
	}
	if psn != st.target {
		return false
	}
	st.arrivals++
	it := uint64(r.Packet.Iteration)
	return st.arrivals >= it && st.arrivals-it < count
}

// ForceCE sets a RoCEv2 frame's IP ECN field to CE (11) whatever it was
// (netsw.MarkCE marks only ECN-capable frames, as a router does; an
// injected mark is the experimenter's), fixing the IPv4 header checksum
// incrementally (RFC 1624 eqn. 3). It reports false, leaving the frame
// alone, if the frame is not RoCEv2.
func ForceCE(frame []byte) bool {
	if _, err := bth.ParseFrame(frame); err != nil {
		return false
	}
	return netsw.SetCE(frame)
}

// corrupt flips one byte the ICRC covers, so the receiver drops the packet
// as rcvd_icrc_err: the first payload byte, or, for a packet without
// payload, the seven reserved bits of BTH byte 8 (beside AckReq; the ICRC
// masks only byte 4, IBA Annex A17.4), which keeps every field a receiver
// reads before its ICRC check.
func corrupt(p *bth.Packet) {
	if pl := p.Payload(); len(pl) > 0 {
		pl[0] ^= 0xff
		return
	}
	p.Buf[8] ^= 0x7f
}
