package inject

import (
	"net/netip"
	"time"
)

// Kind classifies a RoCEv2 packet as the rules and the report see it.
type Kind uint8

const (
	KindOther     Kind = iota // not RoCEv2, or not parsed
	KindData                  // a request carrying or asking for data: SEND, WRITE, READ request, atomic
	KindReadResp              // RDMA READ response (first, middle, last, only)
	KindAtomicAck             // ATOMIC ACKNOWLEDGE
	KindAck                   // ACKNOWLEDGE with an ACK syndrome, or a SACK (0xD1, 0xD2)
	KindNak                   // ACKNOWLEDGE with a NAK syndrome (PSN sequence error, ...), FNACK (0xD3), or an RNR NAK
	KindCNP                   // congestion notification packet (0x81)
)

// Summary is what the rules and the report read of a frame: parsed once,
// without allocating, by Classify.
type Summary struct {
	Kind     Kind
	Opcode   uint8
	Src, Dst netip.Addr
	SrcPort  uint16 // UDP source port (RoCEv2's entropy)
	DstQPN   uint32
	PSN      uint32
	AckReq   bool
	Syndrome uint8 // AETH syndrome, for KindAck/KindNak/KindAtomicAck
	MSN      uint32
	ECN      uint8 // the IP ECN field as it arrived (before any rule)
	Len      int   // the frame's length
}

// Action is what a rule does to the packet it names.
type Action uint8

const (
	ActNone      Action = iota
	ActDrop             // the packet is not forwarded
	ActMark             // the IP ECN field is set to CE (11), whatever it was
	ActCorrupt          // one payload byte is flipped: the ICRC no longer holds
	ActDelay            // the packet is held for Rule.Delay, then forwarded
	ActDuplicate        // the packet is forwarded twice, back to back
)

// Counts counts the actions a switch's rules took, by action.
type Counts struct {
	Dropped, Marked, Corrupted, Delayed, Duplicated uint64
}

// Count counts one action a rule took (ActNone counts nothing).
func (c *Counts) Count(a Action) {
	switch a {
	case ActDrop:
		c.Dropped++
	case ActMark:
		c.Marked++
	case ActCorrupt:
		c.Corrupted++
	case ActDelay:
		c.Delayed++
	case ActDuplicate:
		c.Duplicated++
	}
}

// Event is one application of a rule, as the switch logs it.
type Event struct {
	At     time.Duration // the switch's clock when the packet arrived
	Rule   int           // index of the rule in its Set
	Name   string        // the rule's name
	Action Action
	Pkt    Summary // the packet as it arrived
	// Seq is the packet's index in the switch's trace (Record.Seq).
	Seq uint64
}

// Record is one packet as the switch saw it arrive (the mirror of Lumina:
// every packet of the traced flows, both directions, timestamped at the
// switch's ingress).
type Record struct {
	Seq    uint64 // arrival order at the switch, from 0
	At     time.Duration
	InPort int
	Pkt    Summary
	Action Action // what a rule did to it (ActNone: forwarded as it came)
	Rule   int    // the rule that acted, -1 if none
}
