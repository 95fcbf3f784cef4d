package dataplane

import (
	"slices"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// This file is a StaR client's shadow of its server's work queue (StaR
// §3, docs/star.md "Client shadow QP"): the server's driver pushes each
// of its work requests in a WQEP, and the client runs them. A server RECV
// waits in the shadow until a SEND of the client's takes it: the SEND's
// RDPs go into the RECV's buffer (RDPToRecv), and when they are all
// acknowledged a CQEP carries the RECV's completion back. A server SEND
// is pulled: the client takes its next RECV and reads the SEND's buffer
// into it with GDs (GDFromSend), as an RDMA READ of its own, then
// completes its RECV and sends the SEND's CQEP. The client acknowledges
// every WQEP with an EA and resends every CQEP until its EA comes.

// sendStarPull marks the internal READ that pulls a server SEND into a
// client RECV (never a flag an application can post: checkStarWR).
const sendStarPull qp.SendFlags = 1 << 30

// starShadow is a client QP's copy of its server's work queue and the
// state of its WQEP/CQEP exchange.
type starShadow struct {
	next       uint32              // the driver sequence number expected next
	early      []bth.WQEPETHFields // WQEPs past a gap, kept (sorted) until it fills
	tableDone  bool                // the server's memory table as of the connection has come (WQEPTableDone)
	recvs      []bth.WQEPETHFields // server RECVs no SEND has taken yet
	sends      []bth.WQEPETHFields // server SENDs not pulled yet
	recvsTaken int                 // client RECVs that pulls in flight hold, from the RQ's head
	eas        []uint32            // WQEPs to acknowledge
	cqeps      []bth.CQEPETHFields // completions to push, until acknowledged
	sent       int                 // cqeps[:sent] are on the wire
}

// maxEarlyWQEPs is how far past a gap in the driver's sequence a client
// keeps WQEPs; one further is dropped, and the driver resends it.
const maxEarlyWQEPs = 64

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
	default:
		e.shadowRun(q, f)
		for len(s.early) > 0 && s.early[0].DriverSeq == s.next {
			f := s.early[0]
			s.early = s.early[1:]
			e.shadowRun(q, f)
		}
		e.scheduleIfReady(q)
	}
	s.eas = append(s.eas, f.DriverSeq)
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

// serveShadow sends the client's EAs and the CQEPs not on the wire.
func (e *Engine) serveShadow(q *QP, budget int) (sent int, more bool) {
	s := q.shadow
	for sent < budget && len(s.eas) > 0 {
		if !e.sendEA(q, bth.EAWQEP, s.eas[0]) {
			return sent, true
		}
		s.eas = s.eas[1:]
		sent++
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
	}
	if len(s.cqeps) > 0 && !q.starTimer.Armed() {
		e.wheel.Schedule(&q.starTimer, e.now+e.driverTimeout(q))
	}
	return sent, false
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
