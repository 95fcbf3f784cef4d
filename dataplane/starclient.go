package dataplane

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is the client half of StaR's stateless mode (StaR §3,
// docs/star.md "Client shadow QP"): the QP that keeps every piece of a
// connection's transport state, so that its server keeps none. A client's
// RDMA WRITE leaves as RDPs, one per MTU, each naming the server memory it
// goes to and answered by its own RA; its RDMA READ leaves as GDs, one per
// MTU as every READ request with out-of-order placement, each answered by
// one SDP. Every RDP and GD has its own PSN, and the QP's selective
// scheme recovers them: an RA or SDP acknowledges its own PSN and nothing
// before it (the server answers each packet alone, in no order), so a
// PSN left behind one that was answered is a loss signal to the scheme,
// and a timeout resends what is still missing. Before a request leaves,
// the security table (StaR §3.2) checks it against the memory table the
// server installed for the connection.

// StarRole is a QP's part in StaR's stateless mode.
type StarRole uint8

const (
	StarNone   StarRole = iota // an ordinary RC QP
	StarServer                 // the stateless side: its context is never on chip
	StarClient                 // the stateful side: the transport of both directions
)

var starRoleNames = [...]string{StarNone: "none", StarServer: "server", StarClient: "client"}

// String returns "none", "server" or "client".
func (r StarRole) String() string {
	if int(r) < len(starRoleNames) {
		return starRoleNames[r]
	}
	return fmt.Sprintf("StarRole(%d)", uint8(r))
}

// Star returns q's StaR role (QPInitAttr.Star), fixed when q was made.
func (q *QP) Star() StarRole { return q.star }

// StarRegion is one entry of a StaR server's memory table: what a client
// may name of the server's memory (StaR §3.2). The server installs it;
// the client's NIC only reads it.
type StarRegion struct {
	RKey   uint32
	VA     uint64
	Length uint64
	Access qp.Access // remote write, remote read
}

var (
	ErrStarServerOff = errors.New("dataplane: a StaR server QP needs a NIC with StarServer on (softnic run --star-server)")
	ErrStarScheme    = errors.New("dataplane: a StaR client QP needs a scheme that places out of order (irn, melo, fasr, srnic): one RA or SDP answers each packet, in any order")
	ErrStarServerWR  = errors.New("dataplane: a StaR server QP's driver pushes SENDs and RECVs only: its own WRITEs, READs and atomics are not built (docs/star.md)")
	ErrStarAtomic    = errors.New("dataplane: atomics are refused on a StaR client QP: a stateless server cannot execute them exactly once (docs/star.md)")
	ErrStarOpcode    = errors.New("dataplane: a write with immediate on a StaR client QP is not built (docs/star.md)")
	ErrStarPeer      = errors.New("dataplane: a StaR server QP pairs only with a StaR client QP")
)

// checkStarRole checks a new QP's role against its NIC and scheme.
func (e *Engine) checkStarRole(r StarRole, s recovery.Scheme) error {
	switch r {
	case StarNone:
	case StarServer:
		if !e.cfg.StarServer {
			return ErrStarServerOff
		}
	case StarClient:
		if s.ReorderWindow() == 0 {
			return ErrStarScheme
		}
	default:
		return fmt.Errorf("dataplane: unknown StaR role %d", uint8(r))
	}
	return nil
}

// checkStarWR refuses what a StaR QP cannot run.
func checkStarWR(q *QP, wr *qp.SendWR) error {
	switch {
	case wr.Flags&sendStarPull != 0:
		return fmt.Errorf("%w: send flags %#x", ErrBadWR, uint32(wr.Flags))
	case q.star != StarClient:
		return nil
	case wr.Opcode.IsAtomic():
		return ErrStarAtomic
	case wr.Opcode == qp.WRRDMAWriteWithImm:
		return ErrStarOpcode
	}
	return nil
}

// StarTable returns the memory table of a StaR server QP: every region of
// its protection domain that grants remote write or remote read. The
// server's driver sends it to the client in MR_REG WQEPs when the QP
// reaches RTR, and every later registration and deregistration in the
// same way (StaR §3.2; stardriver.go); for a client QP it is the table
// its server sent so far.
func (e *Engine) StarTable(q *QP) []StarRegion {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q.star == StarClient {
		return append([]StarRegion(nil), q.starTable...)
	}
	return e.serverTable(q)
}

func (e *Engine) serverTable(q *QP) []StarRegion {
	var t []StarRegion
	for _, m := range e.mrs {
		if m == nil || m.PD != q.pd || m.Access&(qp.AccessRemoteWrite|qp.AccessRemoteRead) == 0 {
			continue
		}
		t = append(t, StarRegion{RKey: m.RKey, VA: m.Addr, Length: uint64(len(m.buf)), Access: m.Access & (qp.AccessRemoteWrite | qp.AccessRemoteRead)})
	}
	return t
}

// starAllowed is the security table's match (StaR §3.2): [va, va+n) of
// key rkey lies inside one region the server installed with access need.
func (q *QP) starAllowed(rkey uint32, va uint64, n uint32, need qp.Access) bool {
	if n == 0 {
		return true // names no memory, as a zero-length RDMA WRITE
	}
	end := va + uint64(n)
	if end < va {
		return false
	}
	for i := range q.starTable {
		r := &q.starTable[i]
		if r.RKey == rkey && r.Access&need == need && va >= r.VA && end <= r.VA+r.Length {
			return true
		}
	}
	return false
}

// beginStar builds a StaR client's request for the packet of w at PSN
// psn and offset off: an RDP carrying one MTU of a WRITE, or a GD asking
// for one MTU of a READ. A range outside the security table never
// leaves: it is counted in star_security_drops and its work request completes
// with a local protection error (the QP moves to ERR, as for any local
// protection error).
func (e *Engine) beginStar(t *txPacket, q *QP, w *sendWQE, psn qp.PSN, off uint32) bool {
	size := min(q.mtu, w.length-off)
	va := w.wr.RemoteAddr + uint64(off)
	read := w.wr.Opcode == qp.WRRDMARead
	need := qp.AccessRemoteWrite
	if read {
		need = qp.AccessRemoteRead
	}
	// A SEND goes into the server RECV it took, a pull reads the server
	// SEND it serves: ranges the server pushed in their WQEPs, and only
	// those (shadowStart, starPull), not the memory table's.
	var rdpFlags bth.RDPFlags
	var gdFlags uint8
	switch {
	case w.wr.Flags&sendStarPull != 0:
		gdFlags = bth.GDFromSend
	case w.consumesRecvWQE():
		rdpFlags = bth.RDPToRecv
	case !q.starAllowed(w.wr.RKey, va, size, need):
		e.cnt.StarSecurityDrops++
		if idx, ok := q.wqeIndex(psn); ok {
			e.failAt(q, idx, qp.WCLocProtErr)
		}
		return false
	}
	if read {
		if !e.beginTx(t, q, bth.StarGD, psn, false, 0) {
			return false
		}
		bth.GDETH(t.roce[t.info.GDETHOff:]).Encode(&bth.GDETHFields{VA: va, RKey: w.wr.RKey, Length: uint16(size), MTU: mtuEnum(q.mtu), Flags: gdFlags, ReplyQP: q.qpn})
		e.cnt.StarGDSent++
		return true
	}
	if !e.beginTx(t, q, bth.StarRDP, psn, false, int(size)) {
		return false
	}
	fl := rdpFlags
	if off+size == w.length {
		fl |= bth.RDPLast
	}
	bth.RDPETH(t.roce[t.info.RDPETHOff:]).Encode(&bth.RDPETHFields{VA: va, RKey: w.wr.RKey, Length: uint16(size), Flags: fl, ReplyQP: q.qpn})
	if !e.copySGL(q, w.wr.SGEs(), off, t.payload, false) {
		e.failAt(q, q.sq.Head(), qp.WCLocProtErr) // region deregistered under us
		return false
	}
	e.cnt.StarRDPSent++
	return true
}

// starComplete takes an RA or an SDP for a StaR client QP. Either answers
// its own PSN and says nothing of the PSNs before it.
func (e *Engine) starComplete(q *QP, pkt *bth.Packet) {
	op := pkt.Opcode()
	if q.star != StarClient || op != bth.StarRA && op != bth.StarSDP && op != bth.StarWQEP && op != bth.StarEA {
		e.cnt.RcvdBadOpcode++
		return
	}
	if q.state != qp.RTS && q.state != qp.SQD && q.state != qp.SQE && (op != bth.StarWQEP || q.state != qp.RTR) {
		e.cnt.RcvdBadState++
		return
	}
	switch op {
	case bth.StarWQEP:
		e.shadowWQEP(q, pkt)
		return
	case bth.StarEA:
		e.shadowEA(q, pkt)
		return
	}
	psn := qp.PSN(pkt.BTH().PSN())
	if !e.responseInWindow(q, psn) {
		return
	}
	idx, ok := q.wqeIndex(psn)
	if !ok {
		e.cnt.RcvdBadResponse++
		return
	}
	w := q.sq.At(idx)
	read := w.wr.Opcode == qp.WRRDMARead
	if op == bth.StarSDP {
		e.cnt.StarSDPRcvd++
		off := uint32(psn.Diff(w.firstPSN)) * q.mtu
		payload := pkt.Payload()
		if !read || pkt.SDPETH().Offset() != 0 || uint32(len(payload)) != min(q.mtu, w.length-off) {
			e.cnt.RcvdBadResponse++
			return
		}
		if !e.copySGL(q, w.wr.SGEs(), off, payload, true) {
			e.failAt(q, idx, qp.WCLocProtErr)
			return
		}
		e.starAnswered(q, psn, recovery.Answered)
		return
	}
	e.cnt.StarRARcvd++
	syn := pkt.AETH().Syndrome()
	switch syn.Kind() {
	case bth.AckKind:
		if read { // a GD is answered by SDPs; an RA only refuses it
			e.cnt.RcvdBadResponse++
			return
		}
		e.starAnswered(q, psn, recovery.Received)
	case bth.NakKind:
		// The server refused the RDP or GD (bad key, range or length):
		// its work request fails, and the QP with it, as for a fatal NAK.
		st, ok := nakStatus[syn.NakCode()]
		if !ok {
			e.cnt.RcvdBadResponse++
			return
		}
		e.failAt(q, idx, st)
	default:
		e.cnt.RcvdBadResponse++
	}
}

// starAnswered reports psn acknowledged by its own answer, then settles
// the packet: the scheme moves the cumulative acknowledgement over it
// when it was the oldest, and takes a PSN it leaves unanswered before it
// as a loss signal otherwise (recovery.Sender.OnSack).
func (e *Engine) starAnswered(q *QP, psn qp.PSN, kind recovery.SackKind) {
	if psn != q.unacked {
		e.cnt.OOOResponses++
	}
	before := q.unacked
	q.sender.OnSack(e.now, psn, psn, kind, q.maxSentPSN)
	e.settle(q, before)
}
