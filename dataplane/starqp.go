package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is StaR's stateless mode on a QP (its state types are in
// starstate.go; the server NIC's stateless data path in star.go): first the
// client half (StaR §3,
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

// Star returns q's StaR role (QPInitAttr.Star), fixed when q was made.
func (q *QP) Star() StarRole { return q.star }

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
	case wr.Flags&(sendStarPull|sendStarSignaled) != 0:
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
// same way (StaR §3.2; starqp.go); for a client QP it is the table
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
		bth.BTH(t.roce).SetDestQPN(q.qpn) // the SDPs come back to this QP: the server has none to name
		bth.GDETH(t.roce[t.info.GDETHOff:]).Encode(&bth.GDETHFields{VA: va, RKey: w.wr.RKey, Length: uint16(size), MTU: mtuEnum(q.mtu), Flags: gdFlags})
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
	bth.BTH(t.roce).SetDestQPN(q.qpn) // the RA comes back to this QP: the server has none to name
	bth.RDPETH(t.roce[t.info.RDPETHOff:]).Encode(&bth.RDPETHFields{VA: va, RKey: w.wr.RKey, Flags: fl})
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

// The driver of a StaR server QP (StaR §3.3, docs/star.md
// "Server driver"): host software, not the NIC. The server application's
// work requests do not go to the NIC: the driver pushes each one to the
// client as a WQEP with its own driver sequence number, keeps it until
// the client acknowledges it (EA) and completes it (CQEP), resends it when
// the acknowledgement does not come, and turns CQEPs into completions in
// posting order per queue. The NIC hands CQEPs and EAs to the driver
// without a context lookup; what the driver keeps per connection is in
// host memory (QP.drv), never in the context cache.

// driverPostRecv pushes receive work requests to the client. The buffer
// of one (at most one SGE: a WQEP names one range) must be registered with
// local write; the client's SEND writes it through RDPs.
func (e *Engine) driverPostRecv(q *QP, wrs []qp.RecvWR) (int, error) {
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > 1 {
			return i, errorf(q, "WR %d: %w: %s", i, ErrBadWR, oneWQEPRange)
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.recvCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			continue
		}
		if q.drv.recvs >= q.rq.Cap() {
			return i, errorf(q, "%w: %d receive WRs outstanding", ErrQueueFull, q.drv.recvs)
		}
		f := bth.WQEPETHFields{Kind: bth.WQEPRecv, WRID: wr.WRID}
		if !e.wqepRange(q, &f, wr.SGEs(), true) {
			return i, errorf(q, "WR %d: %w: receive buffer not registered with local write", i, ErrBadWR)
		}
		e.driverPush(q, f, true, true)
	}
	return len(wrs), nil
}

// driverPostSend pushes SENDs to the client, which pulls their data with
// GDs. The server's own WRITEs and READs are not built.
func (e *Engine) driverPostSend(q *QP, wrs []qp.SendWR) (int, error) {
	for i := range wrs {
		wr := &wrs[i]
		if err := checkSendWR(wr); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		var kind bth.WQEPKind
		switch wr.Opcode {
		case qp.WRSend:
			kind = bth.WQEPSend
		case qp.WRSendWithImm:
			kind = bth.WQEPSendWithImm
		default:
			return i, errorf(q, "WR %d: %w", i, ErrStarServerWR)
		}
		if wr.NumSGE > 1 {
			return i, errorf(q, "WR %d: %w: %s", i, ErrBadWR, oneWQEPRange)
		}
		if q.state == qp.Err {
			e.pushWC(q.sendCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(wr.Opcode), QPNum: q.qpn})
			continue
		}
		if q.drv.sends >= q.sq.Cap() {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, q.drv.sends)
		}
		f := bth.WQEPETHFields{Kind: kind, WRID: wr.WRID, Imm: wr.ImmData}
		if !e.wqepRange(q, &f, wr.SGEs(), false) {
			return i, errorf(q, "WR %d: %w: send buffer not registered", i, ErrBadWR)
		}
		if wr.Flags&qp.SendSolicited != 0 {
			f.Flags |= bth.WQEPSolicited
		}
		signaled := q.sigAll || wr.Flags&qp.SendSignaled != 0
		if signaled {
			f.Flags |= bth.WQEPSignaled
		}
		e.driverPush(q, f, false, signaled)
	}
	return len(wrs), nil
}

// oneWQEPRange is why a StaR server's work request takes at most one SGE.
const oneWQEPRange = "a StaR server's work request names at most one buffer (one WQEP range)"

// wqepRange puts the buffer of a server work request (its one SGE, or
// none) in f's Local fields; false when it is not registered (with local
// write, if write).
func (e *Engine) wqepRange(q *QP, f *bth.WQEPETHFields, sgl []qp.SGE, write bool) bool {
	if len(sgl) == 0 {
		return true
	}
	s := &sgl[0]
	if _, ok := e.localSlice(q, s, 0, s.Length, write); !ok && s.Length > 0 {
		return false
	}
	f.LocalVA, f.LocalKey, f.Length = s.Addr, s.LKey, s.Length
	return true
}

func (e *Engine) driverPush(q *QP, f bth.WQEPETHFields, recv, signaled bool) {
	d := q.drv
	f.DriverSeq = d.seq
	d.seq++
	table := f.Kind == bth.WQEPMRReg || f.Kind == bth.WQEPMRDereg
	d.ws = append(d.ws, driverWQE{f: f, recv: recv, signaled: signaled, table: table, done: table, delivered: table})
	d.count(&d.ws[len(d.ws)-1], 1)
	e.schedule(q)
	e.ring()
}

// serveDriver sends what the driver has for the client: EAs for CQEPs
// first, then WQEPs not on the wire, in order.
func (e *Engine) serveDriver(q *QP, budget int) (sent int, more bool) {
	d := q.drv
	if q.state != qp.RTR && q.state != qp.RTS && q.state != qp.SQD {
		return 0, false
	}
	for sent < budget && len(d.eas) > 0 {
		if !e.sendEA(q, bth.EACQEP, d.eas[0]) {
			return sent, true
		}
		d.eas = d.eas[1:]
		sent++
	}
	base, open := d.window()
	for i := range d.ws {
		w := &d.ws[i]
		if w.sent || w.acked {
			continue
		}
		if open && int32(w.f.DriverSeq-base) > maxEarlyWQEPs {
			break // past the client's reorder window: an EA opens it (driverReceive)
		}
		if !d.heard && w.f.DriverSeq != base {
			break // the client may not listen yet: only the oldest, a probe
		}
		if sent >= budget {
			return sent, true
		}
		var t txPacket
		if !e.beginTx(&t, q, bth.StarWQEP, qp.PSN(w.f.DriverSeq&qp.PSNMask), false, 0) {
			return sent, true
		}
		bth.WQEPETH(t.roce[t.info.WQEPETHOff:]).Encode(&w.f)
		e.endTx(q, &t, 1)
		w.sent = true
		e.cnt.StarWQEPSent++
		sent++
	}
	if e.driverUnacked(q) {
		e.wheel.Schedule(&q.retryTimer, e.now+e.driverTimeout(q))
	}
	return sent, false
}

// sendEA sends one EA of kind k for driver sequence number seq from q.
func (e *Engine) sendEA(q *QP, k bth.EAKind, seq uint32) bool {
	var t txPacket
	if !e.beginTx(&t, q, bth.StarEA, qp.PSN(seq&qp.PSNMask), false, 0) {
		return false
	}
	bth.EAETH(t.roce[t.info.EAETHOff:]).Encode(&bth.EAETHFields{Kind: k, DriverSeq: seq})
	e.endTx(q, &t, 1)
	e.cnt.StarEASent++
	return true
}

// window returns the driver sequence number of the oldest WQEP the client
// has not acknowledged. The driver sends WQEPs only up to maxEarlyWQEPs
// past it: the client keeps no more past a gap, so a WQEP further on would
// be dropped had an earlier one been lost, and a burst of every posted
// RECV (a benchmark posts hundreds per QP at once) would queue the
// server's RAs and SDPs behind it past the client's retransmission
// timeout. ok is false when every WQEP is acknowledged.
func (d *starDriver) window() (base uint32, ok bool) {
	for i := range d.ws {
		if !d.ws[i].acked {
			return d.ws[i].f.DriverSeq, true
		}
	}
	return 0, false
}

func (e *Engine) driverUnacked(q *QP) bool {
	for i := range q.drv.ws {
		if !q.drv.ws[i].acked {
			return true
		}
	}
	return false
}

// driverTimeout is how long the driver waits for a WQEP's EA: the QP's
// local ACK timeout, or 1 ms without one.
func (e *Engine) driverTimeout(q *QP) time.Duration {
	if d, ok := ackTimeout(q.timeoutCode); ok {
		return d
	}
	return time.Millisecond
}

// onDriverTimeout resends every WQEP the client has not acknowledged.
func (e *Engine) onDriverTimeout(q *QP) {
	if e.driverResend(q) > 0 {
		e.schedule(q)
	}
}

// driverResend puts every WQEP on the wire that the client has not
// acknowledged back to be sent, counts them in star_wqep_resent and
// returns how many.
func (e *Engine) driverResend(q *QP) int {
	n := 0
	for i := range q.drv.ws {
		if w := &q.drv.ws[i]; !w.acked && w.sent {
			w.sent = false
			n++
		}
	}
	e.cnt.StarWQEPResent += uint64(n)
	return n
}

// driverReceive takes a CQEP or an EA (of a WQEP) for a server QP: the
// NIC passes it to the driver by the destination QP number, a lookup in
// the driver's own table in host memory, without the context cache.
func (e *Engine) driverReceive(f *bth.Frame) {
	pkt := &f.Pkt
	q := e.qps[pkt.BTH().DestQPN()]
	if q == nil || q.drv == nil {
		e.cnt.StarDropped++
		return
	}
	if f.SrcAddr() != q.av.DGID {
		e.cnt.RcvdBadAddr++
		return
	}
	d := q.drv
	defer e.driverHeard(q)
	if pkt.Opcode() == bth.StarEA {
		ea := pkt.EAETH()
		switch ea.Kind() {
		case bth.EAWQEP:
			if w := d.find(ea.DriverSeq()); w != nil && !w.acked {
				w.acked = true
				e.schedule(q) // the window may have moved
			}
		case bth.EAWQEPUpTo:
			if d.ackUpTo(ea.DriverSeq()) {
				e.schedule(q) // the window may have moved
			}
		default:
			e.cnt.StarDropped++
			return
		}
		e.cnt.StarEARcvd++
		e.driverDeliver(q)
		return
	}
	c := pkt.CQEPETH().Fields()
	e.cnt.StarCQEPRcvd++
	d.eas = append(d.eas, c.DriverSeq) // a repeat is acknowledged again
	e.schedule(q)
	// The client runs WQEPs in the driver's order, so a CQEP implies that
	// every WQEP up to the one it completes has come: an EA up to it.
	d.ackUpTo(c.DriverSeq)
	if w := d.find(c.DriverSeq); w != nil && !w.done && !w.table {
		w.done = true
		op := qp.WCSend
		if w.recv {
			op = qp.WCRecv
		}
		w.wc = qp.WC{WRID: w.f.WRID, Status: c.Status, Opcode: op, QPNum: q.qpn, SrcQP: q.destQPN}
		if c.Status == qp.WCSuccess {
			w.wc.ByteLen = c.ByteLen
			if w.recv && c.Flags&bth.CQEPWithImm != 0 {
				w.wc.ImmData, w.wc.Flags = c.Imm, qp.WCWithImm
			}
			if !w.recv {
				d.unsignaledDone(c.DriverSeq)
			}
		}
	}
	e.driverDeliver(q)
}

// driverHeard runs after the driver took a packet from the client: the
// first one says that the client's QP listens, so what the driver sent
// before it and the client has not acknowledged was dropped (a QP before
// RTR drops what comes) and goes again at once, the rest after it.
func (e *Engine) driverHeard(q *QP) {
	if q.drv.heard {
		return
	}
	q.drv.heard = true
	e.driverResend(q)
	e.schedule(q)
}

// ackUpTo marks every WQEP up to and including seq acknowledged and
// reports whether one was not before.
func (d *starDriver) ackUpTo(seq uint32) (moved bool) {
	for i := range d.ws {
		w := &d.ws[i]
		if int32(w.f.DriverSeq-seq) > 0 {
			break
		}
		moved = moved || !w.acked
		w.acked = true
	}
	return moved
}

// unsignaledDone completes the unsignaled SENDs before seq: the client
// sends no CQEP for an unsignaled SEND that succeeds, and pulls the
// server's SENDs in posting order, so a SEND that succeeded after them
// says they did too (an RC send queue's rule for unsignaled work
// requests; docs/star.md "Acknowledgements").
func (d *starDriver) unsignaledDone(seq uint32) {
	for i := range d.ws {
		w := &d.ws[i]
		if int32(w.f.DriverSeq-seq) >= 0 {
			break
		}
		if !w.recv && !w.table && !w.signaled && !w.done {
			w.done = true
			w.wc = qp.WC{WRID: w.f.WRID, Status: qp.WCSuccess, Opcode: qp.WCSend} // retired, never delivered
		}
	}
}

// count adds k to w's queue's count of outstanding work requests.
func (d *starDriver) count(w *driverWQE, k int) {
	switch {
	case w.table:
	case w.recv:
		d.recvs += k
	default:
		d.sends += k
	}
}

// depths are the driver's outstanding send and receive work requests:
// a server QP's queues (Engine.QueueDepths).
func (d *starDriver) depths() (send, recv int) { return d.sends, d.recvs }

// driverFlush completes every work request the driver holds as flushed
// when its QP enters ERR (IBA §10.3.1), in posting order per queue, and
// stops resending: the QP sends nothing more.
func (e *Engine) driverFlush(q *QP) {
	d := q.drv
	for i := range d.ws {
		w := &d.ws[i]
		w.acked = true
		if !w.done {
			w.done = true
			op := qp.WCSend
			if w.recv {
				op = qp.WCRecv
			}
			w.wc = qp.WC{WRID: w.f.WRID, Status: qp.WCWRFlushErr, Opcode: op, QPNum: q.qpn}
		}
	}
	d.eas = nil
	e.driverDeliver(q)
}

func (d *starDriver) find(seq uint32) *driverWQE {
	if len(d.ws) == 0 {
		return nil
	}
	i := int(seq - d.ws[0].f.DriverSeq)
	if i < 0 || i >= len(d.ws) {
		return nil
	}
	return &d.ws[i]
}

// driverDeliver moves completions to the CQs, in posting order per queue
// (a receive completion never passes an earlier receive's), and forgets
// the WQEPs acknowledged and completed at the head.
func (e *Engine) driverDeliver(q *QP) {
	d := q.drv
	var blocked [2]bool // send, receive
	for i := range d.ws {
		w := &d.ws[i]
		k := 0
		if w.recv {
			k = 1
		}
		if w.delivered || blocked[k] {
			continue
		}
		if !w.done {
			blocked[k] = true
			continue
		}
		w.delivered = true
		d.count(w, -1) // retired: its queue slot is free, its ring slot too
		switch {
		case w.recv:
			e.pushWC(q.recvCQ, w.wc)
		case w.signaled || w.wc.Status != qp.WCSuccess:
			e.pushWC(q.sendCQ, w.wc)
		}
	}
	n := 0
	for n < len(d.ws) && d.ws[n].acked && d.ws[n].delivered {
		n++
	}
	if n > 0 {
		d.ws = append(d.ws[:0], d.ws[n:]...)
	}
	if !e.driverUnacked(q) {
		e.wheel.Stop(&q.retryTimer)
	}
}

// starForServer reports whether a StaR packet is the server's: an RDP or
// GD for its NIC, a CQEP or an EA of a WQEP for its driver. WQEPs, EAs of
// CQEPs, RAs and SDPs are a client QP's.
func starForServer(pkt *bth.Packet) bool {
	switch pkt.Opcode() {
	case bth.StarRDP, bth.StarGD, bth.StarCQEP:
		return true
	case bth.StarEA:
		return pkt.EAETH().Kind() != bth.EACQEP // an unknown kind is the driver's to drop
	}
	return false
}

// driverPushTable sends the server's memory table to the client as it
// stands when the QP reaches RTR: one MR_REG WQEP per region of the QP's
// protection domain with remote write or read, the last marked
// WQEPTableDone (a lone empty MR_REG when there is none). The table
// travels in band, in the driver's reliable sequence: only the server's
// driver writes a client's table (StaR §3.2), and nothing the client's
// application does reaches it.
func (e *Engine) driverPushTable(q *QP) {
	t := e.serverTable(q)
	if len(t) == 0 {
		e.driverPush(q, bth.WQEPETHFields{Kind: bth.WQEPMRReg, Flags: bth.WQEPTableDone}, false, false)
		return
	}
	for i, r := range t {
		f := regionWQEP(bth.WQEPMRReg, r)
		if i == len(t)-1 {
			f.Flags |= bth.WQEPTableDone
		}
		e.driverPush(q, f, false, false)
	}
}

// driverMR tells every connected StaR server QP of m's protection domain
// that m was registered (MR_REG) or deregistered (MR_DEREG), when m grants
// remote write or read.
func (e *Engine) driverMR(m *MR, kind bth.WQEPKind) {
	if !e.cfg.StarServer || m.Access&(qp.AccessRemoteWrite|qp.AccessRemoteRead) == 0 {
		return
	}
	r := StarRegion{RKey: m.RKey, VA: m.Addr, Length: uint64(len(m.buf)), Access: m.Access & (qp.AccessRemoteWrite | qp.AccessRemoteRead)}
	for _, q := range e.qps {
		if q.drv != nil && q.pd == m.PD && (q.state == qp.RTR || q.state == qp.RTS || q.state == qp.SQD) {
			e.driverPush(q, regionWQEP(kind, r), false, false)
		}
	}
}

// regionWQEP is the MR_REG or MR_DEREG WQEP of r. A WQEP's Length is 32
// bits: a region of 4 GiB or more is announced as its first 4 GiB - 1.
func regionWQEP(kind bth.WQEPKind, r StarRegion) bth.WQEPETHFields {
	f := bth.WQEPETHFields{Kind: kind, LocalVA: r.VA, LocalKey: r.RKey, Length: uint32(min(r.Length, 1<<32-1))}
	if r.Access&qp.AccessRemoteWrite != 0 {
		f.Flags |= bth.WQEPRemoteWrite
	}
	if r.Access&qp.AccessRemoteRead != 0 {
		f.Flags |= bth.WQEPRemoteRead
	}
	return f
}

// A StaR client's shadow of its server's work queue (StaR
// §3, docs/star.md "Client shadow QP"): the server's driver pushes each
// of its work requests in a WQEP, and the client runs them. A server RECV
// waits in the shadow until a SEND of the client's takes it: the SEND's
// RDPs go into the RECV's buffer (RDPToRecv), and when they are all
// acknowledged a CQEP carries the RECV's completion back. A server SEND
// is pulled: the client takes its next RECV and reads the SEND's buffer
// into it with GDs (GDFromSend), as an RDMA READ of its own, then
// completes its RECV and sends the SEND's CQEP. The client acknowledges
// every WQEP with an EA and resends every CQEP until its EA comes.

// shadowWQEP takes a WQEP for a client QP and acknowledges it. The
// driver's sequence is run in order: a WQEP past a gap waits (up to
// maxEarlyWQEPs) until the gap fills; a repeat is acknowledged again.
func (e *Engine) shadowWQEP(q *QP, pkt *bth.Packet) {
	s := q.shadow
	f := pkt.WQEPETH().Fields()
	e.cnt.StarWQEPRcvd++
	d := int32(f.DriverSeq - s.next)
	switch {
	case d < 0:
		// A repeat: the driver timed out, so what it was told was lost
		// or came too late. Tell it now.
		if int32(f.DriverSeq-s.eaSent) < 0 {
			s.eaSent = f.DriverSeq // what we sent for it was lost
		}
		s.eaNow = true
		e.schedule(q)
		return
	case d > maxEarlyWQEPs:
		e.cnt.StarWQEPDropped++
		return
	case d > 0:
		i := 0
		for i < len(s.early) && int32(s.early[i].DriverSeq-f.DriverSeq) < 0 {
			i++
		}
		if i == len(s.early) || s.early[i].DriverSeq != f.DriverSeq {
			s.early = append(s.early, bth.WQEPETHFields{})
			copy(s.early[i+1:], s.early[i:])
			s.early[i] = f
		}
		// Past a gap: acknowledged with the rest when the gap fills, or
		// alone if it has not when eaTimer fires (a WQEP was lost, and the
		// driver then resends only that one).
		s.eas = append(s.eas, f.DriverSeq)
		e.schedule(q)
		return
	}
	e.shadowRun(q, f)
	for len(s.early) > 0 && s.early[0].DriverSeq == s.next {
		f := s.early[0]
		s.early = s.early[1:]
		e.shadowRun(q, f)
	}
	s.eas = slices.DeleteFunc(s.eas, func(seq uint32) bool { return int32(seq-s.next) < 0 }) // in order now
	e.scheduleIfReady(q)
	if int32(s.next-s.eaSent) >= maxEarlyWQEPs/2 || !s.answered {
		// Half the driver's window waits: do not stall it. Or this is the
		// connection's first WQEP: the driver sends no more until it
		// hears from the client.
		s.eaNow, s.answered = true, true
	}
	e.schedule(q)
}

// shadowRun takes the next WQEP of the driver's sequence into the shadow.
func (e *Engine) shadowRun(q *QP, f bth.WQEPETHFields) {
	s := q.shadow
	s.next++
	switch f.Kind {
	case bth.WQEPRecv:
		s.recvs = append(s.recvs, f)
	case bth.WQEPSend, bth.WQEPSendWithImm:
		s.sends = append(s.sends, f)
		e.starPull(q)
	case bth.WQEPMRReg, bth.WQEPMRDereg:
		// The server's memory table, in its driver's own sequence from its
		// address (receive checked both): the only writer of the table.
		q.starTable = slices.DeleteFunc(q.starTable, func(r StarRegion) bool { return r.RKey == f.LocalKey })
		if f.Kind == bth.WQEPMRReg && f.Length > 0 {
			r := StarRegion{RKey: f.LocalKey, VA: f.LocalVA, Length: uint64(f.Length)}
			if f.Flags&bth.WQEPRemoteWrite != 0 {
				r.Access |= qp.AccessRemoteWrite
			}
			if f.Flags&bth.WQEPRemoteRead != 0 {
				r.Access |= qp.AccessRemoteRead
			}
			q.starTable = append(q.starTable, r)
		}
		if f.Flags&bth.WQEPTableDone != 0 {
			s.tableDone = true
		}
	default:
		// The server's WRITEs, READs and memory-table updates are not
		// built: the work request completes with an error at the server.
		e.cnt.StarWQEPDropped++
		s.cqeps = append(s.cqeps, bth.CQEPETHFields{DriverSeq: f.DriverSeq, Status: qp.WCRemOpErr, Opcode: qp.WCSend})
	}
}

// shadowEA takes the driver's EA of a CQEP: it need not be sent again.
func (e *Engine) shadowEA(q *QP, pkt *bth.Packet) {
	ea := pkt.EAETH()
	if ea.Kind() != bth.EACQEP {
		e.cnt.RcvdBadOpcode++
		return
	}
	e.cnt.StarEARcvd++
	s := q.shadow
	for i := range s.cqeps {
		if s.cqeps[i].DriverSeq == ea.DriverSeq() {
			s.cqeps = append(s.cqeps[:i], s.cqeps[i+1:]...)
			if i < s.sent {
				s.sent--
			}
			break
		}
	}
	if len(s.cqeps) == 0 {
		e.wheel.Stop(&q.starTimer)
	}
}

// shadowCanStart: a SEND starts only once a server RECV is there to take
// it, a WRITE or READ only once the server's memory table has come.
func (q *QP) shadowCanStart(w *sendWQE) bool {
	switch {
	case q.shadow == nil || w.wr.Flags&sendStarPull != 0:
		return true
	case w.consumesRecvWQE():
		return len(q.shadow.recvs) > 0
	}
	return q.shadow.tableDone
}

// shadowStart gives a starting SEND the server RECV at the head of the
// shadow: its buffer becomes the SEND's destination (the WR's unused
// remote address and key; its sequence number and length in the unused
// atomic operands). A SEND longer than the RECV fails here, and the RECV
// completes with a local length error, as an RC responder's would.
func (e *Engine) shadowStart(q *QP, idx uint32, w *sendWQE) bool {
	if q.shadow == nil || !w.consumesRecvWQE() || w.wr.Flags&sendStarPull != 0 {
		return true
	}
	s := q.shadow
	r := s.recvs[0]
	s.recvs = s.recvs[1:]
	w.wr.RemoteAddr, w.wr.RKey = r.LocalVA, r.LocalKey
	w.wr.CompareAdd, w.wr.Swap = uint64(r.DriverSeq), uint64(r.Length)
	if w.length > r.Length {
		e.shadowComplete(q, bth.CQEPETHFields{DriverSeq: r.DriverSeq, Status: qp.WCLocLenErr, Opcode: qp.WCRecv})
		e.failAt(q, idx, qp.WCRemInvReqErr)
		return false
	}
	return true
}

// starPull starts pulling the server SENDs at the shadow's head, each
// into the client's next RECV, while RECVs and send-queue room last.
func (e *Engine) starPull(q *QP) {
	s := q.shadow
	for len(s.sends) > 0 && s.recvsTaken < q.rq.Len() {
		f := s.sends[0]
		rw := q.rq.At(q.rq.Head() + uint32(s.recvsTaken))
		if f.Length > rw.length {
			// The SEND does not fit: the RECV completes with a local
			// length error here, the SEND with a remote one there.
			if s.recvsTaken > 0 {
				return // only the head RECV may complete now
			}
			s.sends = s.sends[1:]
			e.pushWC(q.recvCQ, qp.WC{WRID: rw.wr.WRID, Status: qp.WCLocLenErr, Opcode: qp.WCRecv, QPNum: q.qpn, SrcQP: q.destQPN})
			e.popRecv(q)
			e.shadowComplete(q, bth.CQEPETHFields{DriverSeq: f.DriverSeq, Status: qp.WCRemInvReqErr, Opcode: qp.WCSend})
			continue
		}
		w := q.sq.Push()
		if w == nil {
			return // the send queue is full: a retirement calls again
		}
		s.sends = s.sends[1:]
		s.recvsTaken++
		*w = sendWQE{}
		w.wr = qp.SendWR{WRID: rw.wr.WRID, Opcode: qp.WRRDMARead, Flags: sendStarPull, NumSGE: rw.wr.NumSGE, SGL: rw.wr.SGL,
			RemoteAddr: f.LocalVA, RKey: f.LocalKey, CompareAdd: uint64(f.DriverSeq), ImmData: f.Imm}
		if f.Kind == bth.WQEPSendWithImm {
			w.wr.Swap = 1 // the RECV's completion carries Imm
		}
		if f.Flags&bth.WQEPSignaled != 0 {
			w.wr.Flags |= sendStarSignaled
		}
		w.length = f.Length
		e.scheduleIfReady(q)
	}
}

// shadowRetire finishes what a retiring client WQE owes its server: a
// SEND's CQEP for the RECV it filled; a pull's RECV completion here and
// its SEND's CQEP there. It reports whether the WQE was a pull, whose
// completion is the RECV's, not a send completion.
func (e *Engine) shadowRetire(q *QP, w *sendWQE, status qp.WCStatus) bool {
	if w.wr.Flags&sendStarPull != 0 {
		s := q.shadow
		wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: qp.WCRecv, QPNum: q.qpn, SrcQP: q.destQPN}
		if status == qp.WCSuccess {
			wc.ByteLen = w.length
			if w.wr.Swap != 0 {
				wc.ImmData, wc.Flags = w.wr.ImmData, qp.WCWithImm
			}
		}
		e.pushWC(q.recvCQ, wc)
		e.popRecv(q)
		s.recvsTaken--
		if status == qp.WCSuccess && w.wr.Flags&sendStarSignaled == 0 {
			e.schedule(q)
			return true // the driver learns of it from a later SEND's CQEP (unsignaledDone)
		}
		c := bth.CQEPETHFields{DriverSeq: uint32(w.wr.CompareAdd), Status: status, Opcode: qp.WCSend}
		if status == qp.WCSuccess {
			c.ByteLen = w.length
		}
		e.shadowComplete(q, c)
		return true
	}
	if w.consumesRecvWQE() && status == qp.WCSuccess {
		c := bth.CQEPETHFields{DriverSeq: uint32(w.wr.CompareAdd), Status: qp.WCSuccess, Opcode: qp.WCRecv, ByteLen: w.length}
		if w.wr.Opcode == qp.WRSendWithImm {
			c.Flags, c.Imm = bth.CQEPWithImm, w.wr.ImmData
		}
		e.shadowComplete(q, c)
	}
	return false
}

func (e *Engine) shadowComplete(q *QP, c bth.CQEPETHFields) {
	q.shadow.cqeps = append(q.shadow.cqeps, c)
	e.schedule(q)
}

// serveShadow sends the client's EAs and the CQEPs not on the wire. The
// WQEPs that came in order are acknowledged late and together
// (docs/star.md "Acknowledgements"): a CQEP for one implies every WQEP up
// to it, so most need no EA of their own; the rest get one cumulative EA
// when eaTimer fires, at once when the driver resent one (eaNow), or when
// half the driver's window waits.
func (e *Engine) serveShadow(q *QP, budget int) (sent int, more bool) {
	s := q.shadow
	if s.hello && q.state != qp.Init {
		if budget == 0 || !e.sendEA(q, bth.EAWQEPUpTo, s.next-1) { // up to before the next: none yet
			return 0, true
		}
		s.hello, s.eaSent = false, s.next
		sent++
	}
	if s.eaNow {
		for len(s.eas) > 0 { // still past a gap: one EA each
			if sent >= budget {
				return sent, true
			}
			if int32(s.eas[0]-s.next) >= 0 {
				if !e.sendEA(q, bth.EAWQEP, s.eas[0]) {
					return sent, true
				}
				sent++
			}
			s.eas = s.eas[1:]
		}
		if s.eaSent != s.next {
			if sent >= budget {
				return sent, true
			}
			if !e.sendEA(q, bth.EAWQEPUpTo, s.next-1) {
				return sent, true
			}
			s.eaSent = s.next
			sent++
		}
		s.eaNow = false
	}
	for ; s.sent < len(s.cqeps); s.sent++ {
		if sent >= budget {
			return sent, true
		}
		var t txPacket
		c := &s.cqeps[s.sent]
		if !e.beginTx(&t, q, bth.StarCQEP, qp.PSN(c.DriverSeq&qp.PSNMask), false, 0) {
			return sent, true
		}
		bth.CQEPETH(t.roce[t.info.CQEPETHOff:]).Encode(c)
		e.endTx(q, &t, 1)
		e.cnt.StarCQEPSent++
		sent++
		if int32(c.DriverSeq+1-s.eaSent) > 0 {
			s.eaSent = c.DriverSeq + 1 // the driver takes it as an EA up to c's WQEP
		}
	}
	if len(s.cqeps) > 0 && !q.starTimer.Armed() {
		e.wheel.Schedule(&q.starTimer, e.now+e.driverTimeout(q))
	}
	switch {
	case s.eaSent == s.next && len(s.eas) == 0:
		e.wheel.Stop(&q.eaTimer)
	case !q.eaTimer.Armed():
		e.wheel.Schedule(&q.eaTimer, e.now+e.eaDelay(q))
	}
	return sent, false
}

// eaDelay is how long a client holds the acknowledgement of a WQEP that
// came in order, waiting for a CQEP to carry it: a quarter of the
// driver's resend timeout, so that the EA is there long before the
// driver would resend.
func (e *Engine) eaDelay(q *QP) time.Duration { return e.driverTimeout(q) / 4 }

// onEATimer sends the cumulative EA that no CQEP carried in time.
func (e *Engine) onEATimer(q *QP) {
	if s := q.shadow; s != nil && (s.eaSent != s.next || len(s.eas) > 0) && q.state != qp.Err && q.state != qp.Reset {
		s.eaNow = true
		e.schedule(q)
	}
}

// onShadowTimer resends every CQEP whose EA has not come.
func (e *Engine) onShadowTimer(q *QP) {
	s := q.shadow
	if s == nil || len(s.cqeps) == 0 {
		return
	}
	e.cnt.StarCQEPResent += uint64(s.sent)
	s.sent = 0
	e.schedule(q)
}
