package dataplane

import (
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// This file is the driver of a StaR server QP (StaR §3.3, docs/star.md
// "Server driver"): host software, not the NIC. The server application's
// work requests do not go to the NIC: the driver pushes each one to the
// client as a WQEP with its own driver sequence number, keeps it until
// the client acknowledges it (EA) and completes it (CQEP), resends it when
// the acknowledgement does not come, and turns CQEPs into completions in
// posting order per queue. The NIC hands CQEPs and EAs to the driver
// without a context lookup; what the driver keeps per connection is in
// host memory (QP.drv), never in the context cache.

// starDriver is a server QP's host-software state.
type starDriver struct {
	seq uint32      // the next WQEP's driver sequence number
	ws  []driverWQE // WQEPs pushed, oldest first, until acknowledged and completed
	eas []uint32    // CQEPs to acknowledge
	// The application's work requests among ws not retired (completion
	// delivered) yet, per queue: at most the QP's queue capacity each
	// (ErrQueueFull past it), so that a daemon's client cannot grow ws
	// without bound (QueueDepths reports them, and the daemon releases
	// ring slots by them). Retired entries stay in ws only behind an
	// unacknowledged WQEP, within the window (at most maxEarlyWQEPs).
	sends, recvs int
}

// driverWQE is one work request the driver pushed.
type driverWQE struct {
	f         bth.WQEPETHFields
	table     bool // an MR_REG or MR_DEREG: done once acknowledged, no completion
	recv      bool
	signaled  bool
	sent      bool // on the wire since the last timeout
	acked     bool // the client has it (EA or CQEP)
	done      bool // its CQEP came: wc holds its completion
	delivered bool // wc is in the CQ (or needed none)
	wc        qp.WC
}

// driverPostRecv pushes receive work requests to the client. The buffer
// of one (at most one SGE: a WQEP names one range) must be registered with
// local write; the client's SEND writes it through RDPs.
func (e *Engine) driverPostRecv(q *QP, wrs []qp.RecvWR) (int, error) {
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > 1 {
			return i, errorf(q, "WR %d: %w: a StaR server's work request names at most one buffer (one WQEP range)", i, ErrBadWR)
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.recvCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			continue
		}
		if q.drv.recvs >= q.rq.Cap() {
			return i, errorf(q, "%w: %d receive WRs outstanding", ErrQueueFull, q.drv.recvs)
		}
		f := bth.WQEPETHFields{Kind: bth.WQEPRecv, WRID: wr.WRID}
		if wr.NumSGE == 1 {
			s := &wr.SGL[0]
			if _, ok := e.localSlice(q, s, 0, s.Length, true); !ok && s.Length > 0 {
				return i, errorf(q, "WR %d: %w: receive buffer not registered with local write", i, ErrBadWR)
			}
			f.LocalVA, f.LocalKey, f.Length = s.Addr, s.LKey, s.Length
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
			return i, errorf(q, "WR %d: %w: a StaR server's work request names at most one buffer (one WQEP range)", i, ErrBadWR)
		}
		if q.state == qp.Err {
			e.pushWC(q.sendCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(wr.Opcode), QPNum: q.qpn})
			continue
		}
		if q.drv.sends >= q.sq.Cap() {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, q.drv.sends)
		}
		f := bth.WQEPETHFields{Kind: kind, WRID: wr.WRID, Imm: wr.ImmData}
		if wr.NumSGE == 1 {
			s := &wr.SGL[0]
			if _, ok := e.localSlice(q, s, 0, s.Length, false); !ok && s.Length > 0 {
				return i, errorf(q, "WR %d: %w: send buffer not registered", i, ErrBadWR)
			}
			f.LocalVA, f.LocalKey, f.Length = s.Addr, s.LKey, s.Length
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
	n := 0
	for i := range q.drv.ws {
		if w := &q.drv.ws[i]; !w.acked && w.sent {
			w.sent = false
			n++
		}
	}
	if n > 0 {
		e.cnt.StarWQEPResent += uint64(n)
		e.schedule(q)
	}
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
	if pkt.Opcode() == bth.StarEA {
		ea := pkt.EAETH()
		if ea.Kind() != bth.EAWQEP {
			e.cnt.StarDropped++
			return
		}
		e.cnt.StarEARcvd++
		if w := d.find(ea.DriverSeq()); w != nil && !w.acked {
			w.acked = true
			e.schedule(q) // the window may have moved
		}
		e.driverDeliver(q)
		return
	}
	c := pkt.CQEPETH().Fields()
	e.cnt.StarCQEPRcvd++
	d.eas = append(d.eas, c.DriverSeq) // a repeat is acknowledged again
	e.schedule(q)
	if w := d.find(c.DriverSeq); w != nil && !w.done {
		w.acked, w.done = true, true
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
		}
	}
	e.driverDeliver(q)
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
		return pkt.EAETH().Kind() == bth.EAWQEP
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
