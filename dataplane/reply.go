package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// A scheme's reply kinds (recovery.Reply, what its Decision asks for and
// what its Feedback reports) and the wire's (bth.ReplyKind, which bth
// encodes with its opcode and extension header) meet here, and only here.

// replyKinds maps each recovery.Reply to its kind on the wire.
var replyKinds = [...]bth.ReplyKind{
	recovery.ReplyNone:   bth.ReplyNone,
	recovery.ReplySeqNak: bth.ReplySeqNak,
	recovery.ReplySack:   bth.ReplySack,
	recovery.ReplyFNACK:  bth.ReplyFNACK,
	recovery.ReplyHoles:  bth.ReplyHoles,
}

// wireReply is the reply a receiver's decision d about the request psn
// asks for, as bth encodes it: a SACK or an FNACK names psn, a holes NACK
// carries the receiver's RCV.HIGH and holes.
func wireReply(d *recovery.Decision, psn qp.PSN) bth.Reply {
	r := bth.Reply{Kind: replyKinds[d.Reply]}
	switch r.Kind {
	case bth.ReplySack:
		r.Overflow = d.Overflow
		r.SACK = bth.SACKETHFields{PSN: uint32(psn), LostCnt: d.LostCnt}
	case bth.ReplyFNACK:
		r.SACK = bth.SACKETHFields{PSN: uint32(psn)}
	case bth.ReplyHoles:
		r.Holes.High = uint32(d.High)
		for i, h := range d.Holes {
			r.Holes.Holes[i] = bth.Hole{Start: uint32(h.Start), Len: h.Len}
		}
	}
	return r
}

// schemeHoles are the holes of a holes NACK as the sender's Feedback has
// them.
func schemeHoles(h *bth.HolesETHFields) [bth.HolesETHEntries]recovery.Hole {
	var holes [bth.HolesETHEntries]recovery.Hole
	for i, x := range h.Holes {
		holes[i] = recovery.Hole{Start: qp.PSN(x.Start), Len: x.Len}
	}
	return holes
}
