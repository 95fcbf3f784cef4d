// Package recovery holds softnic's loss-recovery schemes behind one small
// interface. A scheme never touches frames, sockets or timers: the
// transport (package dataplane) tells it what happened — a request arrived
// out of sequence, the cumulative ACK moved, a NAK or a timeout came — and
// the scheme answers with a decision: drop or keep the packet, NAK now or
// not, go back to this PSN, retransmit this one PSN, how many packets may be
// in flight, when its receiver-side timer should fire next. The transport
// carries the decision out. This is the split of gVisor's
// sack_recovery.go / reno_recovery.go and quic-go's SendMode: the protocol
// machinery stays in one place and a new scheme is one file.
//
// Each scheme also reports the on-chip bytes it needs, per QP and in shared
// pools, because softnic emulates a NIC whose SRAM is small: a scheme's
// memory appetite is part of what is being measured.
package recovery

import (
	"fmt"
	"sort"
	"time"

	"github.com/softnic/softnic/qp"
)

// Time is monotonic time since the engine's epoch; every call takes it
// explicitly so that tests can drive a fake clock.
type Time = time.Duration

// Params are the knobs shared by the schemes, and each scheme's own
// (Knobs). Zero values take the defaults below.
type Params struct {
	// NakInterval bounds how often a receiver may NAK: at most one
	// PSN-sequence-error NAK per interval (RoCEv2 "NAK interval";
	// Improved go-back-N Table I uses 500 µs).
	NakInterval time.Duration
	// AckReqInterval makes the requester set AckReq on every Nth packet of
	// a long message besides the last one (rxe: RXE_MAX_PKT_PER_ACK = 64;
	// the Improved go-back-N paper requests an ACK every 256 KB).
	AckReqInterval int
	// BDPPackets is IRN's BDP-FC cap (IRN §3.2): the most packets a QP
	// keeps in flight, the bandwidth-delay product of the longest path
	// divided by the MTU. It also sizes IRN's bitmaps (§6.1), so it bounds
	// how far ahead of the expected PSN a receiver keeps packets (at most
	// MaxBDPPackets). Both ends of a connection use the same value.
	BDPPackets int
	// RTOLow is IRN's short retransmission timeout (IRN §3.1), armed while
	// at most RTOLowThreshold packets are in flight.
	RTOLow time.Duration
	// RTOHigh is IRN's retransmission timeout otherwise, an estimate of
	// the longest round trip with one congested link (IRN §4.1). A QP
	// whose negotiated local ACK timeout is shorter uses that instead.
	RTOHigh time.Duration
	// RTOLowThreshold is IRN's N: RTOLow applies with at most this many
	// packets in flight.
	RTOLowThreshold int
	// Host is the NIC's host-memory path, which a scheme that keeps state
	// in host memory (SRNIC's bitmaps) charges its accesses to; the
	// engine sets it for the schemes it builds.
	Host *HostMemory
	// Knobs are the schemes' own knobs (Knob), by scheme.knob, as users
	// write them: {"melo.pool_bits": "2048"}. A knob not set has its
	// default; New checks them all.
	Knobs KnobValues
}

// Defaults for Params. IRN's follow the paper's default scenario (§4.1):
// RTO_low 100 µs with N = 3, RTO_high 320 µs, and 128-bit bitmaps (§6.1),
// a BDP cap a bit above its 110 packets.
const (
	DefaultNakInterval     = 500 * time.Microsecond
	DefaultAckReqInterval  = 64
	DefaultBDPPackets      = 128
	DefaultRTOLow          = 100 * time.Microsecond
	DefaultRTOHigh         = 320 * time.Microsecond
	DefaultRTOLowThreshold = 3
)

// WithDefaults fills zero fields.
func (p Params) WithDefaults() Params {
	if p.NakInterval <= 0 {
		p.NakInterval = DefaultNakInterval
	}
	if p.AckReqInterval <= 0 {
		p.AckReqInterval = DefaultAckReqInterval
	}
	if p.BDPPackets <= 0 {
		p.BDPPackets = DefaultBDPPackets
	}
	if p.RTOLow <= 0 {
		p.RTOLow = DefaultRTOLow
	}
	if p.RTOHigh <= 0 {
		p.RTOHigh = DefaultRTOHigh
	}
	if p.RTOLowThreshold <= 0 {
		p.RTOLowThreshold = DefaultRTOLowThreshold
	}
	return p
}

// Scheme builds the per-QP sender and receiver halves of one recovery
// algorithm and owns the pools they share.
type Scheme interface {
	Name() string
	Params() Params
	NewSender() Sender
	NewReceiver() Receiver
	// SharedOnChipBytes is the size of the scheme's shared on-chip pools
	// (0 when it has none), charged once per NIC.
	SharedOnChipBytes() int
	// ReorderWindow is how many PSNs past the expected one the receiver
	// may keep out of order; 0 means it keeps none (go-back-N). When it is
	// not 0 the transport places packets out of order (IRN §5.3): requests
	// carry softnic's placement headers, the responder NAKs with selective
	// acknowledgements, and the requester places READ responses by PSN.
	ReorderWindow() int
	// Caps declares what else the scheme asks of the transport.
	Caps() Caps
	// Counters are the scheme's counters on this NIC (Counter): what its
	// halves did, summed over its QPs. A scheme reports the same names
	// in the same order at every call, zeros included, from when it is
	// built. One without counters embeds NoStats.
	Counters() []Counter
	// Pools are the scheme's shared on-chip pools, as they are now (nil
	// for none).
	Pools() []PoolStats
}

// Resume is a sender decision after a NAK or a timeout.
type Resume struct {
	// GoBack asks the transport to rewind its send cursor to GoBackTo and
	// resend everything from there (go-back-N).
	GoBack   bool
	GoBackTo qp.PSN
}

// SackKind says what a selective acknowledgement acknowledges.
type SackKind uint8

const (
	// Received: the responder has the request, a SEND or RDMA WRITE packet,
	// which is then complete.
	Received SackKind = iota
	// Held: the responder has the READ or atomic request and answers it in
	// turn; it needs no resending, but only its response completes it.
	Held
	// Answered: the response of the READ or atomic request arrived.
	Answered
)

// Sender is the requester half of a scheme, one per QP.
//
// sent, where a method takes it, is one past the highest PSN the requester
// has ever sent: IRN's recovery sequence is the PSN before it (§3.1).
type Sender interface {
	// Reset starts a fresh connection at PSN start (modify to RTS).
	Reset(start qp.PSN)
	// Window is the most packets the scheme lets be in flight (BDP-FC);
	// 0 means no limit of its own.
	Window() int
	// Copies is how many times the transport sends a packet: 1, or 2 for
	// the last packet of a message under Improved go-back-N's ST.
	Copies(lastOfMessage bool) int
	// OnReply takes one reply of the responder on a connection that keeps
	// packets out of order, whole and once per packet (quic-go's
	// ReceivedAck): an ACK, a SACK, FNACK or holes NACK, a READ response or
	// atomic ACK that answers its own PSN, StaR's RA or SDP (Ack). It
	// returns the first PSN not acknowledged, the new cumulative
	// acknowledgement, and whether to go back. A scheme reads it with
	// ReadReply, the reading every scheme here shares, which calls the
	// methods below in a fixed order; the transport calls them itself only
	// on a connection in order, and OnFeedback for a sequence NAK.
	OnReply(now Time, a *Ack) (cum qp.PSN, r Resume)
	// OnAck reports that the cumulative acknowledgement moved: every PSN
	// before unacked is acknowledged. It returns the first PSN that is not,
	// which is past unacked when the PSNs that follow it were acknowledged
	// selectively before (OnSack); a scheme without selective
	// acknowledgements returns unacked.
	OnAck(now Time, unacked qp.PSN) qp.PSN
	// OnFeedback reports a reply of the responder to requests out of
	// sequence (Feedback.Kind, never ReplyNone): a PSN-sequence-error
	// NAK, an IRN NACK or FaSR SACK, FaSR's FNACK or MELO's holes NACK.
	// What the reply's cumulative acknowledgement acknowledges has been
	// reported already (OnSack, OnAck: ReadReply, or the transport on a
	// connection in order); after it the cumulative acknowledgement is
	// read again (OnAck) on a connection that keeps packets out of order,
	// and the transport goes back if asked.
	OnFeedback(now Time, fb Feedback) Resume
	// OnSack reports that the PSNs from through to (inclusive, at or after
	// the cumulative acknowledgement) are acknowledged selectively, in the
	// way kind says: an IRN NACK names the packet that triggered it, an
	// ACK covers the requests before it that follow a READ still waiting
	// for its response, a READ response or atomic ACK answers its own PSN.
	OnSack(now Time, from, to qp.PSN, kind SackKind, sent qp.PSN)
	// OnTimeout reports that the retransmission timer fired with unacked
	// the oldest unacknowledged PSN.
	OnTimeout(now Time, unacked, sent qp.PSN) Resume
	// NextRetransmit returns the PSN a selective scheme wants resent next,
	// before any new data and regardless of Window; ok is false when there
	// is none. It does not consume it: the same PSN comes back until
	// Retransmitted reports it sent, so that a full transmit ring loses
	// nothing.
	NextRetransmit() (psn qp.PSN, ok bool)
	// RetransmittedAt reports that psn, returned by NextRetransmit, was
	// sent again at now, with sent one past the highest PSN sent by then.
	RetransmittedAt(now Time, psn, sent qp.PSN)
	// Retransmitted consumes psn, returned by NextRetransmit, without
	// sending it: it was acknowledged meanwhile. (A sender that keeps no
	// time implements RetransmittedAt with it.)
	Retransmitted(psn qp.PSN)
	// Timeout is the retransmission timeout to arm with inflight packets
	// outstanding; base is the QP's negotiated ACK timeout and rtt the
	// QP's round-trip estimate (without a sample, rtt.Valid false, the
	// scheme's fixed timeouts apply).
	Timeout(base time.Duration, inflight int, rtt RTT) time.Duration
	// OnChipBytes is the per-QP on-chip state this half needs.
	OnChipBytes() int
	// OnEvict reports that the QP's context was evicted from the NIC's
	// context cache: a half that holds blocks or units of a shared
	// on-chip pool gives them back (MELO §3.2.5) and takes them again on
	// its next call. A half that holds none embeds NoEvict.
	OnEvict()
}

// NoEvict is embedded by a sender or receiver that holds nothing of a
// shared pool: its OnEvict does nothing.
type NoEvict struct{}

// OnEvict does nothing.
func (NoEvict) OnEvict() {}

// Reply is the kind of answer a receiver gives to an out-of-sequence
// request, and so the kind of feedback its sender gets back (Feedback).
// Each kind beyond the sequence NAK has its own opcode and extension
// header on the wire (docs/wire.md), spoken only by connections whose
// scheme keeps packets out of order (ReorderWindow not 0).
type Reply uint8

const (
	// ReplyNone: no answer.
	ReplyNone Reply = iota
	// ReplySeqNak: a PSN-sequence-error NAK naming the expected PSN.
	ReplySeqNak
	// ReplySack: a NAK naming the expected PSN that also names psn as held
	// by the receiver, kept now or before (an IRN NACK, §3.1; a FaSR SACK
	// with its lost-cnt, §III-B1).
	ReplySack
	// ReplyFNACK: psn was a retransmission that skipped a lost one (FaSR's
	// FNACK, §III-D); the reply names psn.
	ReplyFNACK
	// ReplyHoles: a NACK carrying the receiver's highest PSN received and
	// its most recent holes (MELO §3.2.4).
	ReplyHoles
)

// Decision is a receiver decision about an out-of-sequence request: keep
// it or not, and the reply with its data.
type Decision struct {
	// Keep: the packet is accepted out of order (placed or buffered) by a
	// selective scheme; false drops it, as go-back-N does. The transport
	// asks only about packets it can keep: a packet that would fail its
	// checks is discarded without asking (IRN Appendix B.3, B.4).
	Keep bool
	// Reply is the answer to send now.
	Reply Reply
	// ReplySack: LostCnt is FaSR's lost-cnt (§III-B1); Overflow says it
	// overflowed its 3 bits and no longer counts.
	LostCnt  uint8
	Overflow bool
	// ReplyHoles: High is the highest PSN received (RCV.HIGH) and Holes
	// the three most recent holes, most recent first; unused entries have
	// Len 0.
	High  qp.PSN
	Holes [3]Hole
}

// MaxLostCnt is the largest lost-cnt FaSR's 3-bit field carries (§III-D).
const MaxLostCnt = 7

// Hole is a run of missing PSNs, Len of them from Start.
type Hole struct {
	Start qp.PSN
	Len   uint32
}

// Ack is one decoded reply on a connection that keeps packets out of
// order, as the sender gets it (Sender.OnReply, ReadReply): its
// Feedback (Kind ReplyNone for an ACK or a response), and what the
// transport adds of its own state.
type Ack struct {
	Feedback
	// Own: the reply acknowledges its own PSN (Feedback.PSN) in the way
	// Feedback.SackKind says: a READ response or atomic ACK (Answered),
	// StaR's RA (Received) or SDP (Answered).
	Own bool
	// Alone: the reply says nothing of the PSNs before its own (StaR's
	// stateless server answers each packet alone, in no order); Cum is
	// then not read.
	Alone bool
	// Unacked is the requester's cumulative acknowledgement before the
	// reply: the first PSN not acknowledged.
	Unacked qp.PSN
}

// Feedback is a reply of the responder, as the sender gets it
// (Sender.OnFeedback). The transport has checked it: the PSNs it names are
// at or after the cumulative acknowledgement and before sent.
type Feedback struct {
	// Kind is the reply: ReplySeqNak, ReplySack, ReplyFNACK or ReplyHoles.
	Kind Reply
	// Cum is the responder's expected PSN, the cumulative acknowledgement
	// the reply carries (for a sequence NAK, the PSN it names), already
	// reported through OnSack and OnAck as far as it acknowledges
	// anything: a READ before it completes only with its response.
	Cum qp.PSN
	// PSN: ReplySack, the PSN the responder now holds, held in the way
	// SackKind says (as for OnSack); ReplyFNACK, the retransmission it
	// dropped.
	PSN      qp.PSN
	SackKind SackKind
	// ReplySack: FaSR's lost-cnt and whether it overflowed (§III-B1).
	LostCnt  uint8
	Overflow bool
	// ReplyHoles: High is the highest PSN the responder received, Holes
	// its (at most three) most recent holes, oldest first, each before
	// High and none overlapping; unused entries have Len 0. What lies
	// between the holes, and between the last one and High, the
	// responder holds.
	High  qp.PSN
	Holes [3]Hole
	// Messages says which request each PSN the requester has sent
	// belongs to (for the holes and for what Cum acknowledges).
	Messages Messages
	// Sent is one past the highest PSN sent (see Sender).
	Sent qp.PSN
}

// Messages is the requester's map of its PSNs to its requests.
type Messages interface {
	// Message returns the last PSN of the request psn belongs to and how
	// the responder holds it once it has it: Received for a SEND or RDMA
	// WRITE, Held for a READ or atomic. ok is false when no request
	// outstanding has psn.
	Message(psn qp.PSN) (last qp.PSN, kind SackKind, ok bool)
}

// Caps are what a scheme asks of the transport beyond the Sender and
// Receiver calls.
type Caps struct {
	// BuffersOutOfOrder: out-of-order packets are kept in an off-chip
	// reorder buffer and delivered to application memory when the hole
	// before them fills (MELO §3.2.2), instead of placed on arrival.
	// Only with a ReorderWindow.
	BuffersOutOfOrder bool
}

// Receiver is the responder half of a scheme, one per QP.
type Receiver interface {
	// Reset starts a fresh connection expecting PSN start (modify to RTR).
	Reset(start qp.PSN)
	// OnOutOfSequence reports a request with PSN psn while epsn is
	// expected (psn after epsn); last says whether psn ends its message
	// and msgLast is then that PSN.
	OnOutOfSequence(now Time, epsn, psn qp.PSN, last bool) Decision
	// OnInSequence reports that the expected PSN advanced to epsn.
	OnInSequence(now Time, epsn qp.PSN)
	// Kept reports whether the request with PSN psn was kept out of order
	// and whether it ended its message (IRN's 2-bitmap, §5.3.3). The
	// transport asks for the PSN it expects next after in-sequence
	// progress, walking forward through the packets that arrived early so
	// that their last-packet actions run in order; it reports the walk's
	// end with OnInSequence.
	Kept(psn qp.PSN) (kept, last bool)
	// Deadline is when the receiver wants OnTimer called (Improved
	// go-back-N's CE timer); ok false when it wants nothing.
	Deadline() (at Time, ok bool)
	// OnTimer is called at or after Deadline; nak asks the transport to
	// send a PSN-sequence-error NAK for epsn.
	OnTimer(now Time, epsn qp.PSN) (nak bool)
	// OnChipBytes is the per-QP on-chip state this half needs.
	OnChipBytes() int
	// OnEvict is the Sender's.
	OnEvict()
	// NakOutstanding reports whether the receiver has sent a
	// PSN-sequence-error NAK for the expected PSN and the expected PSN
	// has not arrived since. The transport reads it only to sort the ACK
	// timeouts of a scheme without a reorder window by the Improved
	// go-back-N paper's reasons (its Fig. 3: was the NAK lost, or the
	// retransmission it asked for?); a receiver that sends no sequence
	// NAKs returns false.
	NakOutstanding() bool
}

// Factory builds a scheme from shared parameters.
type Factory func(Params) Scheme

var registry = map[string]Factory{}

// Register makes a scheme selectable by name; it panics on a duplicate
// name (a programming error at init time).
func Register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("recovery: scheme registered twice: " + name)
	}
	registry[name] = f
}

// New returns the named scheme.
func New(name string, p Params) (Scheme, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("recovery: unknown scheme %q (have %v)", name, Names())
	}
	if err := p.Knobs.Check(); err != nil {
		return nil, fmt.Errorf("recovery: %w", err)
	}
	return f(p.WithDefaults()), nil
}

// Names lists the registered schemes, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
