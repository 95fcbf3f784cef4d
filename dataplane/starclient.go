package dataplane

import (
	"slices"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is StaR's client (StaR §3, docs/star.md "Client shadow QP"):
// the QP that keeps every piece of a connection's transport state, so
// that its server keeps none. It runs RC's requester (rcTransport) with
// its own request packets (rcHooks): a client's RDMA WRITE leaves as RDPs,
// one per MTU, each naming the server memory it goes to and answered by
// its own RA; its RDMA READ leaves as GDs, one per MTU as every READ
// request with out-of-order placement, each answered by one SDP. Every
// RDP and GD has its own PSN, and the QP's selective scheme recovers them:
// an RA or SDP acknowledges its own PSN and nothing before it (the server
// answers each packet alone, in no order), so a PSN left behind one that
// was answered is a loss signal to the scheme, and a timeout resends what
// is still missing. Before a request leaves, the security table (StaR
// §3.2) checks it against the memory table the server installed for the
// connection.
//
// The client also keeps a shadow of its server's work queue: the
// server's driver (stardriver.go) pushes each of its work requests in a
// WQEP, and the client runs them. A server RECV waits in the shadow until
// a SEND of the client's takes it: the SEND's RDPs go into the RECV's
// buffer (RDPToRecv), and when they are all acknowledged a CQEP carries
// the RECV's completion back. A server SEND is pulled: the client takes
// its next RECV and reads the SEND's buffer into it with GDs
// (GDFromSend), as an RDMA READ of its own, then completes its RECV and
// sends the SEND's CQEP. The client acknowledges every WQEP with an EA and
// resends every CQEP until its EA comes.

// newTransport makes the transport a QP of StaR role r runs: RC for an
// ordinary QP; StaR's two sides run transports of their own
// (docs/star.md).
func newTransport(at onNIC, r StarRole) (transport, error) {
	switch r {
	case StarServer:
		return newStarDriver(at)
	case StarClient:
		return newStarClient(at), nil
	}
	return newRC(at), r.check()
}

// starClient is a StaR client QP's transport.
type starClient struct {
	*rcTransport
	shadow       *starShadow
	table        []StarRegion // the security table: the server's memory table
	shadowTimers starClientTimers
}

func newStarClient(at onNIC) *starClient {
	sc := &starClient{rcTransport: newRC(at), shadow: &starShadow{}}
	sc.hooks = sc
	sc.shadowTimers.init(sc)
	return sc
}

// receive takes StaR's answers and WQEPs; anything else is RC's to check.
func (sc *starClient) receive(pkt *bth.Packet) {
	if pkt.Opcode().IsStar() {
		sc.starComplete(pkt)
		return
	}
	sc.rcTransport.receive(pkt)
}

// misaddressed: a StaR packet that came before the QP had its peer was
// the driver's probe, too early; at RTR the client says it listens now.
func (sc *starClient) misaddressed(op bth.Opcode) {
	if op.IsStar() && (sc.q.state == qp.Init || sc.q.state == qp.Reset) {
		sc.shadow.hello = true
	}
}

// serve sends the shadow's EAs and CQEPs first, then what RC's responder
// and requester have.
func (sc *starClient) serve(budget int) (sent int, more bool) {
	sc.e.touch(sc.q, true)
	n, m := sc.serveShadow(budget)
	if m {
		return n, true
	}
	sent, more = sc.serveRC(budget - n)
	return n + sent, more
}

func (sc *starClient) postRecv(wrs []qp.RecvWR) (int, error) {
	n, err := sc.rcTransport.postRecv(wrs)
	if err == nil && len(sc.shadow.sends) > 0 {
		sc.starPull() // a server SEND was waiting for a RECV
	}
	return n, err
}

func (sc *starClient) enter(from, to qp.State) {
	sc.rcTransport.enter(from, to)
	switch to {
	case qp.Reset:
		sc.shadowTimers.stop(sc.e.wheel)
		sc.shadow, sc.table = &starShadow{}, nil
	case qp.RTR:
		if from == qp.Init && sc.shadow.hello {
			sc.e.schedule(sc.q) // tell the driver the client listens now
		}
	case qp.Err:
		sc.shadowTimers.stop(sc.e.wheel)
	}
}

// setScheme: one RA or SDP answers each packet, in any order, which only
// a scheme that places out of order recovers.
func (sc *starClient) setScheme(s recovery.Scheme) error {
	if s.ReorderWindow() == 0 {
		return ErrStarScheme
	}
	return sc.rcTransport.setScheme(s)
}

func (sc *starClient) destroy() {
	sc.shadowTimers.stop(sc.e.wheel)
	sc.rcTransport.destroy()
}

// popped: room in the send queue for a server SEND waiting.
func (sc *starClient) popped() {
	if len(sc.shadow.sends) > 0 {
		sc.starPull()
	}
}

// checkWR refuses what a StaR client cannot run.
func (sc *starClient) checkWR(wr *qp.SendWR) error {
	switch {
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
	switch t := q.tr.(type) {
	case *starClient:
		return append([]StarRegion(nil), t.table...)
	case *starDriver:
		return t.serverTable()
	}
	return nil
}

// starAllowed is the security table's match (StaR §3.2): [va, va+n) of
// key rkey lies inside one region the server installed with access need.
func (sc *starClient) starAllowed(rkey uint32, va uint64, n uint32, need qp.Access) bool {
	if n == 0 {
		return true // names no memory, as a zero-length RDMA WRITE
	}
	end := va + uint64(n)
	if end < va {
		return false
	}
	for i := range sc.table {
		r := &sc.table[i]
		if r.RKey == rkey && r.Access&need == need && va >= r.VA && end <= r.VA+r.Length {
			return true
		}
	}
	return false
}

// beginRequest builds a StaR client's request for the packet of w at PSN
// psn and offset off: an RDP carrying one MTU of a WRITE, or a GD asking
// for one MTU of a READ. A range outside the security table never
// leaves: it is counted in star_security_drops and its work request completes
// with a local protection error (the QP moves to ERR, as for any local
// protection error).
func (sc *starClient) beginRequest(t *txPacket, w *sendWQE, psn qp.PSN, off uint32) bool {
	e, q := sc.e, sc.q
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
	case !sc.starAllowed(w.wr.RKey, va, size, need):
		e.cnt.StarSecurityDrops++
		if idx, ok := q.wqeIndex(psn); ok {
			sc.failAt(idx, qp.WCLocProtErr)
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
	if !e.mem.copySGL(q.pd, w.wr.SGEs(), off, t.payload, false) {
		sc.failAt(q.sq.Head(), qp.WCLocProtErr) // region deregistered under us
		return false
	}
	e.cnt.StarRDPSent++
	return true
}

// starComplete takes an RA or an SDP for a StaR client QP. Either answers
// its own PSN and says nothing of the PSNs before it.
func (sc *starClient) starComplete(pkt *bth.Packet) {
	e, q := sc.e, sc.q
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
		sc.shadowWQEP(pkt)
		return
	case bth.StarEA:
		sc.shadowEA(pkt)
		return
	}
	psn := qp.PSN(pkt.BTH().PSN())
	if !sc.responseInWindow(psn) {
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
		if !e.mem.copySGL(q.pd, w.wr.SGEs(), off, payload, true) {
			sc.failAt(idx, qp.WCLocProtErr)
			return
		}
		sc.starAnswered(psn, recovery.Answered)
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
		sc.starAnswered(psn, recovery.Received)
	case bth.NakKind:
		// The server refused the RDP or GD (bad key, range or length):
		// its work request fails, and the QP with it, as for a fatal NAK.
		st, ok := nakStatus[syn.NakCode()]
		if !ok {
			e.cnt.RcvdBadResponse++
			return
		}
		sc.failAt(idx, st)
	default:
		e.cnt.RcvdBadResponse++
	}
}

// starAnswered reports psn acknowledged by its own answer, and nothing
// before it (recovery.Ack.Alone): the scheme moves the cumulative
// acknowledgement over it when it was the oldest, and takes a PSN it
// leaves unanswered before it as a loss signal otherwise.
func (sc *starClient) starAnswered(psn qp.PSN, kind recovery.SackKind) {
	e, q := sc.e, sc.q
	if psn != q.unacked {
		e.cnt.OOOResponses++
	}
	sc.ack = recovery.Ack{Feedback: recovery.Feedback{PSN: psn, SackKind: kind}, Own: true, Alone: true}
	sc.received(&sc.ack)
}

// shadowWQEP takes a WQEP for a client QP and acknowledges it. The
// driver's sequence is run in order: a WQEP past a gap waits (up to
// maxEarlyWQEPs) until the gap fills; a repeat is acknowledged again.
func (sc *starClient) shadowWQEP(pkt *bth.Packet) {
	e, q := sc.e, sc.q
	s := sc.shadow
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
	sc.shadowRun(f)
	for len(s.early) > 0 && s.early[0].DriverSeq == s.next {
		f := s.early[0]
		s.early = s.early[1:]
		sc.shadowRun(f)
	}
	s.eas = slices.DeleteFunc(s.eas, func(seq uint32) bool { return int32(seq-s.next) < 0 }) // in order now
	sc.scheduleIfReady()
	if int32(s.next-s.eaSent) >= maxEarlyWQEPs/2 || !s.answered {
		// Half the driver's window waits: do not stall it. Or this is the
		// connection's first WQEP: the driver sends no more until it
		// hears from the client.
		s.eaNow, s.answered = true, true
	}
	e.schedule(q)
}

// shadowRun takes the next WQEP of the driver's sequence into the shadow.
func (sc *starClient) shadowRun(f bth.WQEPETHFields) {
	e := sc.e
	s := sc.shadow
	s.next++
	switch f.Kind {
	case bth.WQEPRecv:
		s.recvs = append(s.recvs, f)
	case bth.WQEPSend, bth.WQEPSendWithImm:
		s.sends = append(s.sends, f)
		sc.starPull()
	case bth.WQEPMRReg, bth.WQEPMRDereg:
		// The server's memory table, in its driver's own sequence from its
		// address (receive checked both): the only writer of the table.
		sc.table = slices.DeleteFunc(sc.table, func(r StarRegion) bool { return r.RKey == f.LocalKey })
		if f.Kind == bth.WQEPMRReg && f.Length > 0 {
			r := StarRegion{RKey: f.LocalKey, VA: f.LocalVA, Length: uint64(f.Length)}
			if f.Flags&bth.WQEPRemoteWrite != 0 {
				r.Access |= qp.AccessRemoteWrite
			}
			if f.Flags&bth.WQEPRemoteRead != 0 {
				r.Access |= qp.AccessRemoteRead
			}
			sc.table = append(sc.table, r)
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
func (sc *starClient) shadowEA(pkt *bth.Packet) {
	e := sc.e
	ea := pkt.EAETH()
	if ea.Kind() != bth.EACQEP {
		e.cnt.RcvdBadOpcode++
		return
	}
	e.cnt.StarEARcvd++
	s := sc.shadow
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
		e.wheel.Stop(&sc.shadowTimers.cqep)
	}
}

// canStart: a SEND starts only once a server RECV is there to take
// it, a WRITE or READ only once the server's memory table has come.
func (sc *starClient) canStart(w *sendWQE) bool {
	switch {
	case w.wr.Flags&sendStarPull != 0:
		return true
	case w.consumesRecvWQE():
		return len(sc.shadow.recvs) > 0
	}
	return sc.shadow.tableDone
}

// start gives a starting SEND the server RECV at the head of the
// shadow: its buffer becomes the SEND's destination (the WR's unused
// remote address and key; its sequence number and length in the unused
// atomic operands). A SEND longer than the RECV fails here, and the RECV
// completes with a local length error, as an RC responder's would.
func (sc *starClient) start(idx uint32, w *sendWQE) bool {

	if !w.consumesRecvWQE() || w.wr.Flags&sendStarPull != 0 {
		return true
	}
	s := sc.shadow
	r := s.recvs[0]
	s.recvs = s.recvs[1:]
	w.wr.RemoteAddr, w.wr.RKey = r.LocalVA, r.LocalKey
	w.wr.CompareAdd, w.wr.Swap = uint64(r.DriverSeq), uint64(r.Length)
	if w.length > r.Length {
		sc.shadowComplete(bth.CQEPETHFields{DriverSeq: r.DriverSeq, Status: qp.WCLocLenErr, Opcode: qp.WCRecv})
		sc.failAt(idx, qp.WCRemInvReqErr)
		return false
	}
	return true
}

// starPull starts pulling the server SENDs at the shadow's head, each
// into the client's next RECV, while RECVs and send-queue room last.
func (sc *starClient) starPull() {
	e, q := sc.e, sc.q
	s := sc.shadow
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
			sc.popRecv()
			sc.shadowComplete(bth.CQEPETHFields{DriverSeq: f.DriverSeq, Status: qp.WCRemInvReqErr, Opcode: qp.WCSend})
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
		sc.scheduleIfReady()
	}
}

// retired finishes what a retiring client WQE owes its server: a
// SEND's CQEP for the RECV it filled; a pull's RECV completion here and
// its SEND's CQEP there. It reports whether the WQE was a pull, whose
// completion is the RECV's, not a send completion.
func (sc *starClient) retired(w *sendWQE, status qp.WCStatus) bool {
	e, q := sc.e, sc.q
	if w.wr.Flags&sendStarPull != 0 {
		s := sc.shadow
		wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: qp.WCRecv, QPNum: q.qpn, SrcQP: q.destQPN}
		if status == qp.WCSuccess {
			wc.ByteLen = w.length
			if w.wr.Swap != 0 {
				wc.ImmData, wc.Flags = w.wr.ImmData, qp.WCWithImm
			}
		}
		e.pushWC(q.recvCQ, wc)
		sc.popRecv()
		s.recvsTaken--
		if status == qp.WCSuccess && w.wr.Flags&sendStarSignaled == 0 {
			e.schedule(q)
			return true // the driver learns of it from a later SEND's CQEP (unsignaledDone)
		}
		c := bth.CQEPETHFields{DriverSeq: uint32(w.wr.CompareAdd), Status: status, Opcode: qp.WCSend}
		if status == qp.WCSuccess {
			c.ByteLen = w.length
		}
		sc.shadowComplete(c)
		return true
	}
	if w.consumesRecvWQE() && status == qp.WCSuccess {
		c := bth.CQEPETHFields{DriverSeq: uint32(w.wr.CompareAdd), Status: qp.WCSuccess, Opcode: qp.WCRecv, ByteLen: w.length}
		if w.wr.Opcode == qp.WRSendWithImm {
			c.Flags, c.Imm = bth.CQEPWithImm, w.wr.ImmData
		}
		sc.shadowComplete(c)
	}
	return false
}

func (sc *starClient) shadowComplete(c bth.CQEPETHFields) {
	e, q := sc.e, sc.q
	sc.shadow.cqeps = append(sc.shadow.cqeps, c)
	e.schedule(q)
}

// serveShadow sends the client's EAs and the CQEPs not on the wire. The
// WQEPs that came in order are acknowledged late and together
// (docs/star.md "Acknowledgements"): a CQEP for one implies every WQEP up
// to it, so most need no EA of their own; the rest get one cumulative EA
// when eaTimer fires, at once when the driver resent one (eaNow), or when
// half the driver's window waits.
func (sc *starClient) serveShadow(budget int) (sent int, more bool) {
	e, q := sc.e, sc.q
	s := sc.shadow
	if s.hello && q.state != qp.Init {
		if budget == 0 || !sc.sendEA(bth.EAWQEPUpTo, s.next-1) { // up to before the next: none yet
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
				if !sc.sendEA(bth.EAWQEP, s.eas[0]) {
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
			if !sc.sendEA(bth.EAWQEPUpTo, s.next-1) {
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
	if len(s.cqeps) > 0 && !sc.shadowTimers.cqep.Armed() {
		e.wheel.Schedule(&sc.shadowTimers.cqep, e.now+sc.driverTimeout())
	}
	switch {
	case s.eaSent == s.next && len(s.eas) == 0:
		e.wheel.Stop(&sc.shadowTimers.ea)
	case !sc.shadowTimers.ea.Armed():
		e.wheel.Schedule(&sc.shadowTimers.ea, e.now+sc.eaDelay())
	}
	return sent, false
}

// eaDelay is how long a client holds the acknowledgement of a WQEP that
// came in order, waiting for a CQEP to carry it: a quarter of the
// driver's resend timeout, so that the EA is there long before the
// driver would resend.
func (sc *starClient) eaDelay() time.Duration { return sc.driverTimeout() / 4 }

// onEATimer sends the cumulative EA that no CQEP carried in time.
func (sc *starClient) onEATimer() {
	e, q := sc.e, sc.q
	if s := sc.shadow; (s.eaSent != s.next || len(s.eas) > 0) && q.state != qp.Err && q.state != qp.Reset {
		s.eaNow = true
		e.schedule(q)
	}
}

// onShadowTimer resends every CQEP whose EA has not come.
func (sc *starClient) onShadowTimer() {
	e, q := sc.e, sc.q
	s := sc.shadow
	if len(s.cqeps) == 0 {
		return
	}
	e.cnt.StarCQEPResent += uint64(s.sent)
	s.sent = 0
	e.schedule(q)
}

// sendStarPull marks the internal READ that pulls a server SEND into a
// client RECV (never a flag an application can post: checkStarWR).
const sendStarPull = nicSendFlags & (1 << 30)

// sendStarSignaled marks a pull whose server SEND is signaled: its CQEP
// is sent when it succeeds, not only when it fails.
const sendStarSignaled = nicSendFlags & (1 << 29)

// starShadow is a client QP's copy of its server's work queue and the
// state of its WQEP/CQEP exchange.
type starShadow struct {
	next       uint32              // the driver sequence number expected next
	early      []bth.WQEPETHFields // WQEPs past a gap, kept (sorted) until it fills
	tableDone  bool                // the server's memory table as of the connection has come (WQEPTableDone)
	recvs      []bth.WQEPETHFields // server RECVs no SEND has taken yet
	sends      []bth.WQEPETHFields // server SENDs not pulled yet
	recvsTaken int                 // client RECVs that pulls in flight hold, from the RQ's head
	eas        []uint32            // WQEPs past a gap to acknowledge, one EA each
	// eaSent is the driver sequence number past the WQEPs the driver has
	// been told of: by a cumulative EA, or by a CQEP, which implies every
	// WQEP up to the one it completes (docs/star.md "Acknowledgements").
	// WQEPs from eaSent to next are acknowledged late: by the next CQEP,
	// or by a cumulative EA when eaTimer fires, eaNow is set, or half
	// the driver's window waits.
	eaSent uint32
	eaNow  bool
	cqeps  []bth.CQEPETHFields // completions to push, until acknowledged
	sent   int                 // cqeps[:sent] are on the wire
	// hello is set when a StaR packet came before the QP reached RTR and
	// was dropped (the driver's probe): at RTR an EA for nothing yet
	// tells the driver that the client listens now and what it lacks.
	// answered is set when the first WQEP has been acknowledged at once,
	// so that the driver hears the client without waiting for a CQEP
	// (docs/star.md "Connection start").
	hello, answered bool
}

// starClientTimers are a StaR client's own, besides its RC requester's:
//   - cqep resends the CQEPs whose EA has not come (serveShadow arms it,
//     onShadowTimer resends);
//   - ea sends the cumulative EA that no CQEP carried in time
//     (serveShadow, onEATimer).
type starClientTimers struct {
	cqep, ea timer.Timer
}

func (t *starClientTimers) init(sc *starClient) {
	t.cqep.Init(func(time.Duration) { sc.onShadowTimer() })
	t.ea.Init(func(time.Duration) { sc.onEATimer() })
}

func (t *starClientTimers) stop(w *timer.Wheel) {
	w.Stop(&t.cqep)
	w.Stop(&t.ea)
}
