package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The RC transport's wire format: what differs on the wire between a
// connection that places in order (IBA's RC) and one whose scheme places
// out of order (softnic's extension opcodes, docs/wire.md), and the
// choices behind it.
//
// Out-of-order placement and selective acknowledgement, for connections
// whose scheme keeps packets that arrive early (recovery.Scheme's
// ReorderWindow is not 0: IRN §3.1, §5.3). Such a connection speaks
// softnic's extension opcodes (docs/wire.md), and docs/recovery.md records
// the choices made where the paper leaves room.
//
//   - Every SEND and RDMA WRITE packet carries what placing it needs: a
//     RETH on every WRITE packet (past the first, its DMA length counts
//     the message's bytes up to the packet's end, which gives the offset),
//     the receive WQE sequence number on the last packet of a WRITE with
//     immediate (RWSNETH), and on every SEND packet a PETH with the
//     receive WQE sequence number and the packet's index in its message
//     (offset = index x path MTU). A packet is checked and placed in
//     application memory whatever arrived before it (§5.3.1, §5.3.2).
//   - READ and atomic requests that arrive early wait in the stash, IRN's
//     Read WQE buffer, and execute when the expected PSN reaches them: a
//     READ must see every WRITE before it, and an atomic executes once and
//     in order (§5.3.2, Appendix B.1).
//   - Last-packet actions (the MSN, a receive completion) run in PSN order
//     as the expected PSN walks over the packets kept early (the scheme's
//     2-bitmap, §5.3.3): no completion reaches the application early.
//   - Each packet kept early is answered by a NAK carrying the cumulative
//     acknowledgement and its own PSN (RC_ACKNOWLEDGE_SACK, §3.1). In-order
//     packets are acknowledged as usual, and once more whenever the walk
//     moved the expected PSN over packets kept early.
//   - Every READ request asks for one response packet, so a READ response
//     acknowledges its own PSN and lands by PSN wherever it arrives; the
//     requester's scheme asks again for what is missing like for any lost
//     packet.
//
// A packet that would fail its checks is discarded out of order without a
// NAK (Appendix B.3, B.4): it comes again and fails, or succeeds, in order.
// The checks and the placement are the responder's own (admit, place and
// finish in responder.go: the in-order path is this one with a window of
// one); what only packets out of order need (keeping them, the walk
// over them, READ pulls) is in responder.go, and the requester's side of
// the selective acknowledgements in completer.go.

// accepts reports whether an RC packet's opcode belongs on q's
// connection: softnic's extension opcodes belong to connections that
// place out of order, negotiated with their scheme: there every SEND and
// WRITE is an extension opcode (a SEND with a PETH, a WRITE with a RETH
// on every packet), elsewhere no packet is (no PETH, RWSNETH, SACKETH or
// HolesETH).
func (q *QP) accepts(op bth.Opcode, flags bth.OpFlags) bool {
	if q.ooo {
		return flags&(bth.IsSend|bth.IsWrite) == 0 || op.IsExtension()
	}
	return !op.IsExtension()
}

func position(i, n uint32) int {
	switch {
	case n == 1:
		return posOnly
	case i == 0:
		return posFirst
	case i == n-1:
		return posLast
	}
	return posMiddle
}

// setPlacement fixes the QP's wire format from its scheme: one that keeps
// packets out of order (a reorder window) speaks the extension opcodes,
// needs room for a window of READ and atomic requests kept early (the
// stash) and, if it buffers them (MELO), slots of the reorder buffer.
func (q *QP) setPlacement(scheme recovery.Scheme) {
	window := scheme.ReorderWindow()
	q.ooo = window > 0
	q.stash, q.rob = nil, nil
	if q.ooo {
		q.stash = newStash(window)
	}
	q.buffers = q.ooo && scheme.Caps().BuffersOutOfOrder
}

// Opcode selection for SEND and WRITE by position in the message
// (IBA Table 35).
// With out-of-order placement every packet is softnic's extension of the
// same opcode (docs/wire.md).
var (
	sendOps  = [2][4]bth.Opcode{{bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast, bth.RCSendOnly}, {bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLastImm, bth.RCSendOnlyImm}}
	writeOps = [2][4]bth.Opcode{{bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLast, bth.RCWriteOnly}, {bth.RCWriteFirst, bth.RCWriteMiddle, bth.RCWriteLastImm, bth.RCWriteOnlyImm}}

	sendOpsOOO  = [2][4]bth.Opcode{{bth.RCSendFirstOOO, bth.RCSendMiddleOOO, bth.RCSendLastOOO, bth.RCSendOnlyOOO}, {bth.RCSendFirstOOO, bth.RCSendMiddleOOO, bth.RCSendLastImmOOO, bth.RCSendOnlyImmOOO}}
	writeOpsOOO = [2][4]bth.Opcode{{bth.RCWriteFirstOOO, bth.RCWriteMiddleOOO, bth.RCWriteLastOOO, bth.RCWriteOnlyOOO}, {bth.RCWriteFirstOOO, bth.RCWriteMiddleOOO, bth.RCWriteLastImmOOO, bth.RCWriteOnlyImmOOO}}
)

const (
	posFirst = iota
	posMiddle
	posLast
	posOnly
)

// requestOpcode is the opcode of packet i of n of w, a SEND or WRITE.
func (q *QP) requestOpcode(w *sendWQE, i, n uint32) bth.Opcode {
	imm := 0
	if w.wr.Opcode == qp.WRSendWithImm || w.wr.Opcode == qp.WRRDMAWriteWithImm {
		imm = 1
	}
	pos := position(i, n)
	write := w.wr.Opcode == qp.WRRDMAWrite || w.wr.Opcode == qp.WRRDMAWriteWithImm
	switch {
	case q.ooo && write:
		return writeOpsOOO[imm][pos]
	case q.ooo:
		return sendOpsOOO[imm][pos]
	case write:
		return writeOps[imm][pos]
	}
	return sendOps[imm][pos]
}

// covers is the last PSN that the request packet of w at psn stands for.
// In order a READ request stands for every response PSN to the READ's
// end (one request, a stream of responses). With out-of-order placement
// every READ request asks for one response packet, so that the request
// and its response share one PSN that the scheme tracks like any other
// (docs/recovery.md); every other request is one PSN anyway.
func (q *QP) covers(w *sendWQE, psn qp.PSN) qp.PSN {
	if w.wr.Opcode == qp.WRRDMARead && !q.ooo {
		return w.lastPSN
	}
	return psn
}

// readLength is the DMA length of w's READ request at offset off: a
// retried READ asks only for what is missing (IBA §9.7.5.1.4), and with
// out-of-order placement for one response packet of it.
func (q *QP) readLength(w *sendWQE, off uint32) uint32 {
	if q.ooo {
		return min(q.mtu, w.length-off)
	}
	return w.length - off
}

// asksAck reports whether a SEND or WRITE packet at psn asks for an ACK:
// the last of its message, one every ackReqInterval, and with selective
// acknowledgements every retransmission (in recovery the requester must
// learn that the hole is filled: IRN §5.2 ACKs every packet; softnic
// coalesces, so it asks where it matters).
func (q *QP) asksAck(last bool, psn qp.PSN) bool {
	return last || q.noAck+1 >= q.ackReqInterval() || q.ooo && psn.Before(q.maxSentPSN)
}

// acksRequest reports whether the responder acknowledges a request that
// asks for it (AckReq) with an ACK of its own: in order a READ or atomic
// request is answered by its response and acknowledged by nothing else;
// with out-of-order placement every request that asks is.
func (q *QP) acksRequest(pkt *bth.Packet) bool {
	return pkt.BTH().AckReq() && (q.ooo || pkt.Info.Flags&(bth.IsSend|bth.IsWrite) != 0)
}

// inSequence checks a request's opcode against the message in progress
// (rxe check_op_seq): a message continues with MIDDLE or LAST of its own
// kind; otherwise only a FIRST, ONLY, READ or atomic may come. With
// out-of-order placement every packet says where it goes, and there is no
// sequence to keep.
func (q *QP) inSequence(f bth.OpFlags) bool {
	switch {
	case q.ooo:
		return true
	case q.msg.active:
		kind := bth.IsSend
		if q.msg.write {
			kind = bth.IsWrite
		}
		return f&kind != 0 && f&bth.IsFirst == 0
	}
	return f&(bth.IsSend|bth.IsWrite) == 0 || f&bth.IsFirst != 0
}

// readFits reports whether a READ request asks for a length its wire
// format allows: with out-of-order placement one response packet.
func (q *QP) readFits(dmaLen uint32) bool { return !q.ooo || dmaLen <= q.mtu }

// locate says where a SEND or WRITE packet goes in its message: its offset
// and (a WRITE's) RETH in pl, and how many receive WQEs past the head its
// own is (a SEND, or a WRITE with immediate's last packet). With
// out-of-order placement the packet says so itself (a WRITE's RETH on
// every packet, whose DMA length past the first counts the message's
// bytes up to the packet's end, and its RWSNETH; a SEND's PETH); in
// order the message in progress (q.msg) does. ok is false for a PETH
// that places the packet past any message.
func (q *QP) locate(pkt *bth.Packet, pl *placement) (ahead uint32, ok bool) {
	f := pkt.Info.Flags
	first := f&bth.IsFirst != 0
	n := uint32(len(pkt.Payload()))
	switch {
	case q.ooo && f&bth.IsWrite != 0:
		// Past the first the packet starts at DMA length - payload (left 0
		// if that is negative: a MIDDLE or LAST at offset 0 is refused).
		pl.reth = pkt.RETH().Fields()
		if !first && pl.reth.DMALen >= n {
			pl.off = pl.reth.DMALen - n
		}
		if h := pkt.RWSNETH(); h != nil {
			ahead = (h.RecvSN() - q.recvSN) & qp.PSNMask
		}
	case q.ooo:
		p := pkt.PETH()
		off, ok := p.Offset(q.mtu)
		if !ok {
			return 0, false
		}
		pl.off, ahead = off, (p.RecvSN()-q.recvSN)&qp.PSNMask
	default:
		if q.msg.active {
			pl.off, pl.reth = q.msg.off, bth.RETHFields{VA: q.msg.va, RKey: q.msg.rkey, DMALen: q.msg.dmaLen}
		}
		if f&bth.IsWrite != 0 && first {
			pl.reth = pkt.RETH().Fields()
		}
	}
	return ahead, true
}

// placed moves the message in progress on over a packet placed in order
// (n bytes at pl.off; the message ends with the last). With out-of-order
// placement each packet places itself, and there is none.
func (q *QP) placed(f bth.OpFlags, pl *placement, n uint32) {
	if q.ooo {
		return
	}
	r := &pl.reth
	q.msg = respMsg{active: f&bth.IsLast == 0, write: f&bth.IsWrite != 0, off: pl.off + n, va: r.VA, rkey: r.RKey, dmaLen: r.DMALen}
}

// replyFor is the reply a receiver's decision r puts on the wire: without
// the extension opcodes the only reply is the sequence NAK.
func (q *QP) replyFor(r recovery.Reply) recovery.Reply {
	if !q.ooo && r != recovery.ReplyNone {
		return recovery.ReplySeqNak
	}
	return r
}

// placement is where an admitted SEND or WRITE packet goes.
type placement struct {
	rwqe  *recvWQE // SEND: the buffer; WRITE with immediate: the WQE its completion consumes
	off   uint32   // the payload's offset in its message
	dst   []byte   // WRITE: the target bytes
	reth  bth.RETHFields
	total uint32 // the message's length, for its completion
}
