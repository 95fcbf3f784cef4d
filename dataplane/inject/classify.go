package inject

import (
	"fmt"

	"github.com/softnic/softnic/bth"
)

// KindAny is not a packet's kind: in a rule's match it stands for every
// RoCEv2 kind (every Kind but KindOther).
const KindAny Kind = 0xff

// kindNames are the names rule files and reports use.
var kindNames = [...]string{
	KindOther:     "other",
	KindData:      "data",
	KindReadResp:  "read_resp",
	KindAtomicAck: "atomic_ack",
	KindAck:       "ack",
	KindNak:       "nak",
	KindCNP:       "cnp",
}

// String returns the kind's name: "data", "read_resp", "atomic_ack",
// "ack", "nak", "cnp", "other" or "any".
func (k Kind) String() string {
	if k == KindAny {
		return "any"
	}
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind_%d", uint8(k))
}

// ParseKind returns the kind named s (Kind.String's names; "other"
// excepted, which no rule can match).
func ParseKind(s string) (Kind, bool) {
	if s == "any" {
		return KindAny, true
	}
	for k, name := range kindNames {
		if name == s && Kind(k) != KindOther {
			return Kind(k), true
		}
	}
	return 0, false
}

// String returns the action's name as rule files spell it: "none",
// "drop", "ecn", "corrupt", "delay" or "duplicate".
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action_%d", uint8(a))
}

var actionNames = [...]string{
	ActNone:      "none",
	ActDrop:      "drop",
	ActMark:      "ecn",
	ActCorrupt:   "corrupt",
	ActDelay:     "delay",
	ActDuplicate: "duplicate",
}

// ParseAction returns the action named s (Action.String's names, "none"
// excepted).
func ParseAction(s string) (Action, bool) {
	for a, name := range actionNames {
		if name == s && Action(a) != ActNone {
			return Action(a), true
		}
	}
	return ActNone, false
}

// Classify parses an Ethernet frame as a RoCEv2 packet and summarizes it
// for the rules: its kind, opcode, addresses, UDP source port, destination
// QP, PSN, AckReq, the AETH's syndrome and MSN where it has one, and the
// IP ECN field. A frame that is not RoCEv2, does not parse (bth.ParseFrame),
// or is RoCEv2 but neither RC nor a CNP (UD, StaR's stateless opcodes) is
// KindOther with only Len set.
//
// The kinds: KindData is a request of an RC QP (SEND, RDMA WRITE, RDMA
// READ request, atomic; softnic's out-of-order variants 0xC0-0xCB too);
// KindReadResp an RDMA READ response; KindAtomicAck an ATOMIC
// ACKNOWLEDGE; KindAck an ACKNOWLEDGE whose syndrome is an ACK, and a SACK
// (0xD1, 0xD2) whatever its syndrome; KindNak an ACKNOWLEDGE with a NAK,
// RNR NAK or reserved syndrome, an FNACK (0xD3) and MELO's NACK (0xD4);
// KindCNP a congestion notification packet (0x81).
//
// Classify never allocates and never panics, whatever the bytes.
func Classify(frame []byte) Summary {
	s, _, _ := classify(frame)
	return s
}

// classify is Classify that also returns the parsed frame, ok false for
// KindOther.
func classify(frame []byte) (Summary, bth.Frame, bool) {
	s := Summary{Len: len(frame)}
	f, err := bth.ParseFrame(frame)
	if err != nil {
		return s, bth.Frame{}, false
	}
	pkt := &f.Pkt
	op := pkt.Opcode()
	flags := pkt.Info.Flags
	switch {
	case op == bth.CNP:
		s.Kind = KindCNP
	case op.IsStar() || op>>5 != 0 && !op.IsExtension():
		// UD (0x60-0x7f) and StaR: no rule names them.
		return s, bth.Frame{}, false
	case flags&bth.IsRequest != 0:
		s.Kind = KindData
	case flags&bth.IsResponse != 0 && flags&bth.IsRead != 0:
		s.Kind = KindReadResp
	case op == bth.RCAtomicAcknowledge:
		s.Kind = KindAtomicAck
	case op == bth.RCAcknowledgeSACK || op == bth.RCAcknowledgeSACKOverflow:
		s.Kind = KindAck
	case op == bth.RCAcknowledgeFNACK || op == bth.RCAcknowledgeHoles:
		s.Kind = KindNak
	case op == bth.RCAcknowledge:
		s.Kind = KindNak
		if pkt.AETH().Syndrome().Kind() == bth.AckKind {
			s.Kind = KindAck
		}
	default:
		return s, bth.Frame{}, false
	}
	h := pkt.BTH()
	s.Opcode = uint8(op)
	s.Src, s.Dst = f.SrcAddr(), f.DstAddr()
	s.SrcPort = f.SrcPort()
	s.DstQPN = h.DestQPN()
	s.PSN = h.PSN()
	s.AckReq = h.AckReq()
	if a := pkt.AETH(); a != nil {
		s.Syndrome = uint8(a.Syndrome())
		s.MSN = a.MSN()
	}
	s.ECN = f.TrafficClass() & ecnMask
	return s, f, true
}

// ecnMask is the IP ECN field in the traffic class (RFC 3168 §5).
const ecnMask = 0b11
