package dataplane

import (
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The driver of a StaR server QP (StaR §3.3, docs/star.md
// "Server driver"): host software, not the NIC. The server application's
// work requests do not go to the NIC: the driver pushes each one to the
// client as a WQEP with its own driver sequence number, keeps it until
// the client acknowledges it (EA) and completes it (CQEP), resends it when
// the acknowledgement does not come, and turns CQEPs into completions in
// posting order per queue. The NIC hands CQEPs and EAs to the driver
// without a context lookup (star.go); what the driver keeps per
// connection is in host memory, never in the context cache.

// newStarDriver makes the driver of a server QP, on a NIC that serves
// StaR's stateless packets (Config.StarServer); its context never comes on
// chip.
func newStarDriver(at onNIC) (*starDriver, error) {
	if at.e.star == nil {
		return nil, ErrStarServerOff
	}
	d := &starDriver{onNIC: at}
	d.initTimer()
	at.q.cache.HostOnly = true
	at.e.star.drivers[at.q.qpn] = d
	return d, nil
}

// receive drops what comes for the QP through the NIC's QP lookup: a
// server QP takes only the CQEPs and EAs its NIC hands it (fromClient).
func (d *starDriver) receive(*bth.Packet) { d.e.cnt.RcvdBadOpcode++ }

func (d *starDriver) misaddressed(bth.Opcode) {}

// marked, cnp, setCC: the driver sends nothing a CNP could throttle and
// receives nothing but CQEPs and EAs; it runs no congestion control.
func (d *starDriver) marked()            {}
func (d *starDriver) cnp() bool          { return false }
func (d *starDriver) setCC(cc.Algorithm) {}

func (d *starDriver) congestionControl() string { return cc.None }

func (d *starDriver) serve(budget int) (int, bool) { return d.serveDriver(budget) }

func (d *starDriver) postSend(wrs []qp.SendWR) (int, error) { return d.driverPostSend(wrs) }

func (d *starDriver) postRecv(wrs []qp.RecvWR) (int, error) { return d.driverPostRecv(wrs) }

// enter: RESET forgets the connection, RTR sends the server's memory
// table (StaR §3.2: the server's word on its memory, in band), ERR
// flushes.
func (d *starDriver) enter(from, to qp.State) {
	switch to {
	case qp.Reset:
		d.e.wheel.Stop(&d.resend)
		d.driverState = driverState{}
	case qp.RTR:
		if from == qp.Init {
			d.driverPushTable()
		}
	case qp.Err:
		d.e.wheel.Stop(&d.resend)
		d.driverFlush()
	}
}

// setScheme records the QP's scheme: the driver runs none of it (the
// client recovers both directions), but its halves are there for what
// reads a QP's (QPRTT).
func (d *starDriver) setScheme(s recovery.Scheme) error {
	d.q.scheme, d.q.sender, d.q.receiver = s, s.NewSender(), s.NewReceiver()
	return nil
}

func (d *starDriver) destroy() {
	d.e.wheel.Stop(&d.resend)
	delete(d.e.star.drivers, d.q.qpn)
}

func (d *starDriver) serverTable() []StarRegion {
	e, q := d.e, d.q
	var t []StarRegion
	for _, m := range e.mem.mrs {
		if m == nil || m.PD != q.pd || m.Access&(qp.AccessRemoteWrite|qp.AccessRemoteRead) == 0 {
			continue
		}
		t = append(t, StarRegion{RKey: m.RKey, VA: m.Addr, Length: uint64(len(m.buf)), Access: m.Access & (qp.AccessRemoteWrite | qp.AccessRemoteRead)})
	}
	return t
}

// driverPostRecv pushes receive work requests to the client. The buffer
// of one (at most one SGE: a WQEP names one range) must be registered with
// local write; the client's SEND writes it through RDPs.
func (d *starDriver) driverPostRecv(wrs []qp.RecvWR) (int, error) {
	e, q := d.e, d.q
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > 1 {
			return i, errorf(q, "WR %d: %w: %s", i, ErrBadWR, oneWQEPRange)
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.recvCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			continue
		}
		if d.recvs >= q.rq.Cap() {
			return i, errorf(q, "%w: %d receive WRs outstanding", ErrQueueFull, d.recvs)
		}
		f := bth.WQEPETHFields{Kind: bth.WQEPRecv, WRID: wr.WRID}
		if !d.wqepRange(&f, wr.SGEs(), true) {
			return i, errorf(q, "WR %d: %w: receive buffer not registered with local write", i, ErrBadWR)
		}
		d.driverPush(f, true, true)
	}
	return len(wrs), nil
}

// driverPostSend pushes SENDs to the client, which pulls their data with
// GDs. The server's own WRITEs and READs are not built.
func (d *starDriver) driverPostSend(wrs []qp.SendWR) (int, error) {
	e, q := d.e, d.q
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
		if d.sends >= q.sq.Cap() {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, d.sends)
		}
		f := bth.WQEPETHFields{Kind: kind, WRID: wr.WRID, Imm: wr.ImmData}
		if !d.wqepRange(&f, wr.SGEs(), false) {
			return i, errorf(q, "WR %d: %w: send buffer not registered", i, ErrBadWR)
		}
		if wr.Flags&qp.SendSolicited != 0 {
			f.Flags |= bth.WQEPSolicited
		}
		signaled := q.sigAll || wr.Flags&qp.SendSignaled != 0
		if signaled {
			f.Flags |= bth.WQEPSignaled
		}
		d.driverPush(f, false, signaled)
	}
	return len(wrs), nil
}

// oneWQEPRange is why a StaR server's work request takes at most one SGE.
const oneWQEPRange = "a StaR server's work request names at most one buffer (one WQEP range)"

// wqepRange puts the buffer of a server work request (its one SGE, or
// none) in f's Local fields; false when it is not registered (with local
// write, if write).
func (d *starDriver) wqepRange(f *bth.WQEPETHFields, sgl []qp.SGE, write bool) bool {
	e, q := d.e, d.q
	if len(sgl) == 0 {
		return true
	}
	s := &sgl[0]
	if _, ok := e.mem.localSlice(q.pd, s, 0, s.Length, write); !ok && s.Length > 0 {
		return false
	}
	f.LocalVA, f.LocalKey, f.Length = s.Addr, s.LKey, s.Length
	return true
}

func (d *starDriver) driverPush(f bth.WQEPETHFields, recv, signaled bool) {
	e, q := d.e, d.q
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
func (d *starDriver) serveDriver(budget int) (sent int, more bool) {
	e, q := d.e, d.q
	if q.state != qp.RTR && q.state != qp.RTS && q.state != qp.SQD {
		return 0, false
	}
	for sent < budget && len(d.eas) > 0 {
		if !d.sendEA(bth.EACQEP, d.eas[0]) {
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
	if d.driverUnacked() {
		e.wheel.Schedule(&d.resend, e.now+d.driverTimeout())
	}
	return sent, false
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

func (d *starDriver) driverUnacked() bool {

	for i := range d.ws {
		if !d.ws[i].acked {
			return true
		}
	}
	return false
}

// onDriverTimeout resends every WQEP the client has not acknowledged.
func (d *starDriver) onDriverTimeout() {
	e, q := d.e, d.q
	if d.driverResend() > 0 {
		e.schedule(q)
	}
}

// driverResend puts every WQEP on the wire that the client has not
// acknowledged back to be sent, counts them in star_wqep_resent and
// returns how many.
func (d *starDriver) driverResend() int {
	e := d.e
	n := 0
	for i := range d.ws {
		if w := &d.ws[i]; !w.acked && w.sent {
			w.sent = false
			n++
		}
	}
	e.cnt.StarWQEPResent += uint64(n)
	return n
}

// fromClient takes a CQEP or an EA (of a WQEP) from the client: the
// NIC passes it to the driver by the destination QP number, a lookup in
// the driver's own table in host memory (starServer.drivers), without the
// context cache.
func (d *starDriver) fromClient(f *bth.Frame) {
	e, q := d.e, d.q
	pkt := &f.Pkt
	if f.SrcAddr() != q.av.DGID {
		e.cnt.RcvdBadAddr++
		return
	}
	defer d.driverHeard()
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
		d.driverDeliver()
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
	d.driverDeliver()
}

// driverHeard runs after the driver took a packet from the client: the
// first one says that the client's QP listens, so what the driver sent
// before it and the client has not acknowledged was dropped (a QP before
// RTR drops what comes) and goes again at once, the rest after it.
func (d *starDriver) driverHeard() {
	e, q := d.e, d.q
	if d.heard {
		return
	}
	d.heard = true
	d.driverResend()
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
func (d *starDriver) driverFlush() {
	q := d.q
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
	d.driverDeliver()
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
func (d *starDriver) driverDeliver() {
	e, q := d.e, d.q
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
	if !d.driverUnacked() {
		e.wheel.Stop(&d.resend)
	}
}

// driverPushTable sends the server's memory table to the client as it
// stands when the QP reaches RTR: one MR_REG WQEP per region of the QP's
// protection domain with remote write or read, the last marked
// WQEPTableDone (a lone empty MR_REG when there is none). The table
// travels in band, in the driver's reliable sequence: only the server's
// driver writes a client's table (StaR §3.2), and nothing the client's
// application does reaches it.
func (d *starDriver) driverPushTable() {

	t := d.serverTable()
	if len(t) == 0 {
		d.driverPush(bth.WQEPETHFields{Kind: bth.WQEPMRReg, Flags: bth.WQEPTableDone}, false, false)
		return
	}
	for i, r := range t {
		f := regionWQEP(bth.WQEPMRReg, r)
		if i == len(t)-1 {
			f.Flags |= bth.WQEPTableDone
		}
		d.driverPush(f, false, false)
	}
}

// memoryChanged tells the client of a connected server QP that m, a
// region of its protection domain, was registered (MR_REG) or
// deregistered (MR_DEREG), when m grants remote write or read.
func (d *starDriver) memoryChanged(m *MR, registered bool) {
	q := d.q
	if m.Access&(qp.AccessRemoteWrite|qp.AccessRemoteRead) == 0 || q.state != qp.RTR && q.state != qp.RTS && q.state != qp.SQD {
		return
	}
	kind := bth.WQEPMRReg
	if !registered {
		kind = bth.WQEPMRDereg
	}
	r := StarRegion{RKey: m.RKey, VA: m.Addr, Length: uint64(len(m.buf)), Access: m.Access & (qp.AccessRemoteWrite | qp.AccessRemoteRead)}
	d.driverPush(regionWQEP(kind, r), false, false)
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

// starDriver is a StaR server QP's transport: host software that keeps
// every piece of the QP's state in host memory.
type starDriver struct {
	onNIC
	resend timer.Timer // resends the WQEPs the client has not acknowledged
	driverState
}

// driverState is what the driver keeps per connection; RESET forgets it.
type driverState struct {
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
	// heard is whether anything came from the client: until then the
	// driver sends only its oldest WQEP, a probe, as the client's QP may
	// not be ready for it (docs/star.md "Connection start").
	heard bool
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

// A StaR server driver's one timer, resend, resends the WQEPs the client
// has not acknowledged (serve arms it, onTimeout resends).
func (d *starDriver) initTimer() {
	d.resend.Init(func(time.Duration) { d.onDriverTimeout() })
}
