package dataplane

import (
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// rcTransport is the reliable-connected transport of one QP (IBA Volume 1
// chapter 9), organised like Linux rxe: the requester (requester.go,
// rxe_req.c), the responder (responder.go, rxe_resp.c) and the completer
// (completer.go, rxe_comp.c) are its methods, and their per-packet state
// is the QP's hardware context (qpctx.go: hwContext's req, resp and comp
// parts), which the context cache copies as one value. This file is what
// the engine calls (the transport interface), the QP's state machine as
// RC sees it, its timers (rcTimers, the one list of them), the retry
// timer's arming, completions and the round-trip estimate.
type rcTransport struct {
	onNIC
	// hooks is what a transport built on this requester changes in it
	// (StaR's client, starclient.go); nil for a plain RC QP.
	hooks  rcHooks
	timers rcTimers
	// Congestion control (docs/cc.md): the reaction point's sender, which
	// sets the rate pacer holds the requester to, and the notification
	// point's receiver, which decides when a CE mark is answered by a CNP
	// (cnpDue, sent first by serve); the algorithm says whether the QP's
	// frames are ECN-capable.
	cc     cc.Algorithm
	ccs    cc.Sender
	ccr    cc.Receiver
	pacer  cc.Pacer
	cnpDue bool
	tx     txPacket     // the request sendPacket builds
	early  placement    // where a request ahead of the expected PSN goes (keepOutOfOrder)
	ack    recovery.Ack // the reply received hands the sender
	mode   rcMode       // in order, or out of order: chosen with the scheme
}

// rcMode is what RC does differently on a connection whose scheme places
// out of order (softnic's extension opcodes, rcwire.go): chosen once,
// with the scheme (applyScheme), so that no stage asks. "The in-order
// path is the out-of-order path with a window of one" holds for the
// checks and the placement (admit, place and finish serve both); what
// differs is how READ requests are answered and how acknowledgements are
// read.
type rcMode interface {
	// ack takes an ACK for psn.
	ack(rc *rcTransport, psn qp.PSN)
	// response takes a READ response or an atomic ACK.
	response(rc *rcTransport, psn qp.PSN, pkt *bth.Packet)
	// acknowledge: a NAK or RNR NAK for psn says the responder has every
	// request before it.
	acknowledge(rc *rcTransport, psn qp.PSN)
	// seqNak takes a PSN-sequence-error NAK for psn, after acknowledge;
	// progressed says whether it acknowledged anything new.
	seqNak(rc *rcTransport, psn qp.PSN, progressed bool)
	// executeRead runs an admitted READ request in order and returns the
	// PSNs it takes.
	executeRead(rc *rcTransport, psn qp.PSN, reth bth.RETHFields) uint32
	// duplicateRead answers a duplicate READ request.
	duplicateRead(rc *rcTransport, pkt *bth.Packet, psn qp.PSN)
	// checkRecvSGL checks a SEND's receive buffer before anything is
	// written.
	checkRecvSGL(rc *rcTransport, w *recvWQE) bool
	// admitEarly checks a request that came ahead of the expected PSN
	// before the scheme hears of it; pl is where it goes.
	admitEarly(rc *rcTransport, pkt *bth.Packet, pl *placement) bool
}

// inOrder is IBA's RC: cumulative acknowledgements, READ responses
// streamed from the responder resources, nothing kept early.
type inOrder struct{}

func (inOrder) ack(rc *rcTransport, psn qp.PSN)                     { rc.onAck(psn) }
func (inOrder) acknowledge(rc *rcTransport, psn qp.PSN)             { rc.ackThrough(psn) }
func (inOrder) seqNak(rc *rcTransport, psn qp.PSN, progressed bool) { rc.onSeqNak(psn, progressed) }
func (inOrder) duplicateRead(rc *rcTransport, pkt *bth.Packet, psn qp.PSN) {
	rc.duplicateStream(pkt, psn)
}

func (inOrder) response(rc *rcTransport, psn qp.PSN, pkt *bth.Packet) {
	if pkt.Opcode() == bth.RCAtomicAcknowledge {
		rc.onAtomicAck(psn, pkt.AtomicAck().OrigData())
		return
	}
	rc.onReadResponse(psn, pkt)
}

func (inOrder) executeRead(rc *rcTransport, psn qp.PSN, reth bth.RETHFields) uint32 {
	return rc.read(psn, reth)
}

// checkRecvSGL: in order the copy checks as it goes (place), as rxe's
// copy_data does, which spares a second walk over the scatter list per
// packet.
func (inOrder) checkRecvSGL(*rcTransport, *recvWQE) bool { return true }

// admitEarly: a connection in order keeps nothing early and checks
// nothing; the scheme decides the reply.
func (inOrder) admitEarly(*rcTransport, *bth.Packet, *placement) bool { return true }

// outOfOrder is a connection whose scheme keeps packets that arrive early
// (IRN §3.1, §5.3; rcwire.go): selective acknowledgements, and READ
// requests of one response packet each.
type outOfOrder struct{}

func (outOfOrder) ack(rc *rcTransport, psn qp.PSN)            { rc.onSelectiveAck(psn) }
func (outOfOrder) acknowledge(rc *rcTransport, psn qp.PSN)    { rc.acknowledgeSelective(psn) }
func (outOfOrder) seqNak(rc *rcTransport, psn qp.PSN, _ bool) { rc.onSeqNakSelective(psn) }
func (outOfOrder) response(rc *rcTransport, psn qp.PSN, pkt *bth.Packet) {
	rc.onResponseOutOfOrder(psn, pkt)
}

// duplicateRead reads again (repeatRead): the request's own RETH says
// everything.
func (outOfOrder) duplicateRead(rc *rcTransport, pkt *bth.Packet, psn qp.PSN) {
	rc.repeatRead(pkt, psn)
}

// executeRead: the READ request asks for one response packet, pulled as
// it stands; it takes one PSN.
func (outOfOrder) executeRead(rc *rcTransport, psn qp.PSN, reth bth.RETHFields) uint32 {
	rc.pushReadPull(psn, reth)
	rc.endMessage()
	return 1
}

// checkRecvSGL: a SEND placed by its PETH, kept early perhaps, is checked
// whole before anything is written.
func (outOfOrder) checkRecvSGL(rc *rcTransport, w *recvWQE) bool {
	_, ok := rc.e.mem.checkSGL(rc.q.pd, w.wr.SGEs(), true)
	return ok
}

// admitEarly: an early packet must pass every check an in-order packet
// passes (IRN Appendix B.3, B.4: one that would fail is discarded without
// a NAK, and comes again), and a buffering scheme needs room in the
// reorder buffer.
func (outOfOrder) admitEarly(rc *rcTransport, pkt *bth.Packet, pl *placement) bool {
	e, q := rc.e, rc.q
	if rc.admit(pkt, false, pl) != admitted {
		e.cnt.OOODiscarded++
		return false
	}
	if q.buffers && e.rob != nil && e.rob.full() {
		e.cnt.ROBFull++ // no room off chip: it comes again
		return false
	}
	return true
}

// rcHooks is what a transport that runs RC's requester with its own
// request packets plugs into it: StaR's client, whose WRITEs and READs
// leave as RDPs and GDs and whose SENDs and RECVs meet its server's
// through a shadow of the server's work queue (starclient.go).
type rcHooks interface {
	// checkWR refuses a send work request the transport cannot run, as
	// it is posted.
	checkWR(wr *qp.SendWR) error
	// canStart reports whether the posted WQE w may get its PSNs now.
	canStart(w *sendWQE) bool
	// start prepares w, at ring index idx, as it gets its PSNs; false
	// when it failed (and was completed).
	start(idx uint32, w *sendWQE) bool
	// beginRequest builds the packet of w at PSN psn and offset off in
	// t, in place of RC's request; false when it could not.
	beginRequest(t *txPacket, w *sendWQE, psn qp.PSN, off uint32) bool
	// retired finishes what w owes as it retires with status; done
	// reports that its completion has been delivered already.
	retired(w *sendWQE, status qp.WCStatus) (done bool)
	// popped runs when a WQE has left the send queue.
	popped()
}

// ccBurst is how far ahead of its congestion-control rate a QP may run
// from idle (cc.Pacer.Burst): a few packets back to back, as a NIC's rate
// limiter lets go, instead of a timer per packet.
const ccBurst = 5 * time.Microsecond

func newRC(at onNIC) *rcTransport {
	rc := &rcTransport{onNIC: at, pacer: cc.Pacer{Burst: ccBurst}}
	rc.timers.init(rc)
	return rc
}

// receive checks an RC packet's opcode class and the QP's state and hands
// it to the responder (a request) or the completer (a response).
func (rc *rcTransport) receive(pkt *bth.Packet) {
	e, q := rc.e, rc.q
	flags := pkt.Info.Flags
	if flags&(bth.IsRequest|bth.IsResponse) == 0 || flags&bth.HasDETH != 0 {
		e.cnt.RcvdBadOpcode++
		return
	}
	if !q.accepts(pkt.Opcode(), flags) {
		e.cnt.RcvdBadOpcode++
		return
	}
	if flags&bth.IsRequest != 0 {
		if !q.state.CanReceive() {
			e.cnt.RcvdBadState++
			return
		}
		if q.state == qp.RTR && !q.commEst {
			e.receivedInRTR(q) // COMM_EST (events.go)
		}
		rc.respond(pkt)
		return
	}
	if q.state != qp.RTS && q.state != qp.SQD && q.state != qp.SQE {
		e.cnt.RcvdBadState++
		return
	}
	rc.complete(pkt)
}

func (rc *rcTransport) misaddressed(bth.Opcode) {}

// setCC gives the QP its congestion control's halves.
func (rc *rcTransport) setCC(a cc.Algorithm) {
	rc.cc, rc.ccs, rc.ccr = a, a.NewSender(), a.NewReceiver()
}

func (rc *rcTransport) congestionControl() string { return rc.cc.Name() }

// marked: a packet for the QP came CE-marked; the notification point
// answers with a CNP at most once per its interval.
func (rc *rcTransport) marked() {
	if rc.ccr.OnCE(rc.e.now) && !rc.cnpDue {
		rc.cnpDue = true
		rc.e.schedule(rc.q)
	}
}

// cnp: the reaction point takes a CNP from the peer.
func (rc *rcTransport) cnp() bool {
	e, q := rc.e, rc.q
	if !rc.ccs.OnCNP(e.now) {
		return false
	}
	e.touch(q, true) // the rate is the QP's context
	rc.armCC()
	return true
}

// sendCNP sends the CNP the notification point owes the peer's QP
// (docs/wire.md, "CNP": BECN set, PSN 0, 16 reserved bytes of zero).
func (rc *rcTransport) sendCNP() bool {
	e, q := rc.e, rc.q
	var t txPacket
	if !e.beginTx(&t, q, bth.CNP, 0, false, 0) {
		return false
	}
	bth.BTH(t.roce).SetBECN(true)
	clear(t.roce[t.info.CNPReservedOff : t.info.CNPReservedOff+bth.CNPReservedLen])
	e.endTx(q, &t, 1)
	e.cnt.NPCNPSent++
	rc.cnpDue = false
	return true
}

// armCC follows the congestion control's own timer (DCQCN's rate
// increase) after every call that may move it.
func (rc *rcTransport) armCC() {
	if at, ok := rc.ccs.Deadline(); ok {
		rc.e.wheel.Schedule(&rc.timers.cc, at)
	} else {
		rc.e.wheel.Stop(&rc.timers.cc)
	}
}

func (rc *rcTransport) onCCTimer(now time.Duration) {
	rc.e.touch(rc.q, true)
	rc.ccs.OnTimer(now)
	rc.armCC()
}

// paced reports whether the pacer lets the next request go now; if not,
// the pace timer schedules the QP when it opens.
func (rc *rcTransport) paced() bool {
	if rc.pacer.Open(rc.e.now) {
		return true
	}
	if !rc.timers.pace.Armed() {
		rc.e.wheel.Schedule(&rc.timers.pace, rc.pacer.At())
	}
	return false
}

func (rc *rcTransport) onPaceTimer(time.Duration) {
	if rc.requestReady() {
		rc.e.schedule(rc.q)
	}
}

// serve lets the QP send up to budget packets: responses first (they free
// the peer's requester), then requests.
func (rc *rcTransport) serve(budget int) (sent int, more bool) {
	rc.e.touch(rc.q, true)
	return rc.serveRC(budget)
}

func (rc *rcTransport) serveRC(budget int) (sent int, more bool) {
	e, q := rc.e, rc.q
	if rc.cnpDue && budget > 0 {
		if !rc.sendCNP() {
			return 0, true
		}
		sent++
	}
	for sent < budget && !e.txStall && q.respQ.Len() > 0 {
		if !rc.sendResponse() {
			break
		}
		sent++
	}
	for sent < budget && !e.txStall && rc.requestReady() && rc.paced() {
		wire := e.cnt.TxWireBytes
		if !rc.sendRequest() {
			break
		}
		n := int(e.cnt.TxWireBytes - wire) // the request and any copies of it
		rc.pacer.NextSend(e.now, n, rc.ccs.Rate())
		rc.ccs.OnSent(e.now, n)
		sent++
	}
	return sent, q.respQ.Len() > 0 || rc.cnpDue || rc.requestReady() && rc.paced()
}

func (rc *rcTransport) postSend(wrs []qp.SendWR) (int, error) {
	e, q := rc.e, rc.q
	e.touch(q, false) // the doorbell makes the NIC read the context
	for i := range wrs {
		wr := &wrs[i]
		if err := checkSendWR(wr); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		if rc.hooks != nil {
			if err := rc.hooks.checkWR(wr); err != nil {
				return i, errorf(q, "WR %d: %w", i, err)
			}
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.sendCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(wr.Opcode), QPNum: q.qpn})
			continue
		}
		w := q.sq.Push()
		if w == nil {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, q.sq.Cap())
		}
		w.wr = *wr
		for _, s := range wr.SGEs() {
			w.length += s.Length
		}
	}
	if rc.requestReady() {
		e.schedule(q)
		e.ring()
	}
	return len(wrs), nil
}

func (rc *rcTransport) postRecv(wrs []qp.RecvWR) (int, error) {
	// A responder waiting to RNR-retry has nothing to do, but CQ flushes
	// (and a StaR pull) may.
	return postRecvWRs(rc.e, rc.q, &rc.e.mem, wrs)
}

// postRecvWRs queues receive WRs on q's own receive queue (RC and UD):
// each checked against mem (the NIC's regions, or QP1's own), flushed at
// once in ERR; then the poll loop is woken.
func postRecvWRs(e *Engine, q *QP, mem *memTable, wrs []qp.RecvWR) (int, error) {
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > qp.MaxSGE {
			return i, errorf(q, "WR %d: %w: %d SGEs", i, ErrBadWR, wr.NumSGE)
		}
		if q.state == qp.Err {
			e.pushWC(q.recvCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			continue
		}
		total, ok := mem.checkSGL(q.pd, wr.SGEs(), true)
		if !ok {
			return i, errorf(q, "WR %d: %w: SGE not in a locally writable region", i, ErrBadWR)
		}
		w := q.rq.Push()
		if w == nil {
			return i, errorf(q, "%w: %d receive WRs outstanding", ErrQueueFull, q.rq.Cap())
		}
		w.wr, w.length = *wr, total
	}
	e.ring()
	return len(wrs), nil
}

// enter is what entering each state means for RC: RESET forgets the
// connection, RTR starts the responder, RTS the requester, ERR flushes.
func (rc *rcTransport) enter(from, to qp.State) {
	e, q := rc.e, rc.q
	switch to {
	case qp.Reset:
		rc.resetQP()
	case qp.RTR:
		if from == qp.Init {
			q.receiver.Reset(q.ePSN)
			rc.ccr.Reset(e.now)
			if rc.cc.Caps().ECN { // ECN-capable: a congested switch marks, not drops (RFC 3168)
				q.hdr.TOS = q.hdr.TOS&^ecnMask | ecnECT0
			}
		}
	case qp.RTS:
		if from == qp.RTR {
			q.retryLeft, q.rnrLeft = q.retryCnt, q.rnrRetry
			q.sender.Reset(q.nextPSN)
			rc.ccs.Reset(e.now)
			rc.pacer = cc.Pacer{Burst: rc.pacer.Burst}
			rc.armCC()
		}
		if rc.requestReady() {
			e.schedule(q)
		}
	case qp.SQD:
		if from != qp.SQD {
			q.sqdDone = false
		}
		e.drained(q) // SQ_DRAINED at once if nothing is outstanding
	case qp.Err:
		rc.flush()
		e.enteredErr(q, from) // LAST_WQE_REACHED on an SRQ (events.go)
	}
}

func (rc *rcTransport) setScheme(s recovery.Scheme) error {
	rc.applyScheme(s)
	return nil
}

func (rc *rcTransport) depths() (send, recv int) {
	if rc.q.srq != nil {
		return rc.q.sq.Len(), 0 // its receive WQEs were posted to the SRQ (srq.go)
	}
	return rc.q.sq.Len(), rc.q.rq.Len()
}

func (rc *rcTransport) memoryChanged(*MR, bool) {}

func (rc *rcTransport) destroy() {
	rc.timers.stop(rc.e.wheel)
	rc.releaseScheme()
	rc.q.respQ.Release()
}

// applyScheme gives q the scheme's halves and what its reorder window
// needs: a scheme that keeps packets out of order needs room for a window
// of them (READ and atomic requests wait in the stash, each one is
// answered by a NAK with a selective acknowledgement), and the QP's
// on-chip context is the base context plus the scheme's per-QP bytes.
func (rc *rcTransport) applyScheme(scheme recovery.Scheme) {
	e, q := rc.e, rc.q
	rc.releaseScheme()
	window := scheme.ReorderWindow()
	if q.respQ != nil {
		q.respQ.Release() // a new scheme's replaces it
	}
	q.respQ = qp.NewRing[respItem](maxRespQueue + 2*window)
	q.setPlacement(scheme)
	rc.mode = inOrder{}
	if q.ooo {
		rc.mode = outOfOrder{}
	}
	q.scheme = scheme
	q.sender = scheme.NewSender()
	q.receiver = scheme.NewReceiver()
	sr := q.sender.OnChipBytes() + q.receiver.OnChipBytes()
	base := e.cfg.QPContextBytes
	if e.cfg.RTO == RTOAdaptive && !e.cfg.RTTOffChip {
		base += rttOnChipBytes
	}
	e.cache.SetSize(&q.cache, base+sr, sr)
}

// rcTimers are an RC QP's timers:
//   - retry, the local ACK timeout (IBA §9.7.6.1.3): armRetry
//     (completer.go) keeps it in step with the scheme's timeout for
//     what is in flight; onRetryTimeout goes back;
//   - rnr, the wait after an RNR NAK (onRNRNak); onRNRTimer resumes;
//   - rx, the scheme's receiver timer (Improved go-back-N's CE):
//     armReceiverTimer (responder.go) follows recovery.Receiver.Deadline.
type rcTimers struct {
	retry, rnr, rx timer.Timer
	cc, pace       timer.Timer
}

func (t *rcTimers) init(rc *rcTransport) {
	t.retry.Init(rc.onRetryTimeout)
	t.rnr.Init(rc.onRNRTimer)
	t.rx.Init(rc.onReceiverTimer)
	t.cc.Init(rc.onCCTimer)
	t.pace.Init(rc.onPaceTimer)
}

func (t *rcTimers) stop(w *timer.Wheel) {
	w.Stop(&t.retry)
	w.Stop(&t.rnr)
	w.Stop(&t.rx)
	w.Stop(&t.cc)
	w.Stop(&t.pace)
}

// armRetry starts the retransmission timer if packets are outstanding and
// it is not running, and keeps its deadline in step with the scheme's
// timeout for what is in flight now: IRN's RTO_low holds only while at most
// N packets are out (§3.1), so a timer started for one packet moves to
// RTO_high as more follow.
//
// The timer waits for an acknowledgement, and only a packet the responder
// answers brings one: one sent with AckReq, a READ request, an atomic
// (IBA §9.7.6.1.3 starts the transport timer on a request that requires
// an ACK). While every packet out was sent without AckReq (the middle of a
// long message, between AckReqs), the timer stays off: the requester is
// still sending, and its next AckReq, at the latest the message's last
// packet or ackReqInterval packets on, starts it. A timer run from the
// last progress would count the time the requester takes to reach that
// AckReq (64 packets, 380 µs at 1.5 Gb/s) against a timeout fitted to the
// round trip, and fire with nothing lost.
func (rc *rcTransport) armRetry() {
	e, q := rc.e, rc.q
	if q.unacked == q.maxSentPSN {
		return
	}
	if !q.ackReqOutstanding() && !q.windowOut() {
		// Nothing out asks to be answered: the timer waits for the next
		// request that does. But a full window sends nothing more, so
		// with packets out and none of them asking it runs regardless:
		// otherwise, were they all lost (or all arrived in order, which
		// the responder answers only when asked), the QP would wait for
		// ever (TestWindowFullTimerArmed).
		e.wheel.Stop(&rc.timers.retry)
		return
	}
	base, ok := ackTimeout(q.timeoutCode)
	if !ok {
		return
	}
	if !rc.timers.retry.Armed() {
		q.retryStart = e.now
	}
	rto := q.sender.Timeout(base, int(q.maxSentPSN.Diff(q.unacked)), q.rtt)
	if q.rtt.Valid && e.cfg.RTOMin > 0 {
		rto = max(rto, min(e.cfg.RTOMin, base)) // Config.RTOMin, never past the ACK timeout
	}
	rc.noteRTO(rto)
	shift := q.rttBackoff // Karn (adaptive RTO): until the next sample
	if e.cfg.RTOBackoff && q.retryLeft < q.retryCnt {
		shift = max(shift, q.retryCnt-q.retryLeft)
	}
	rto <<= min(shift, maxRTOBackoffShift)
	if e.cfg.RTO == RTOAdaptive {
		rto = karnBackoff(rto, base, q.rttBackoff)
	}
	at := q.retryStart + rto
	if !rc.timers.retry.Armed() || rc.timers.retry.Deadline() != at {
		e.wheel.Schedule(&rc.timers.retry, at)
	}
}

// retire completes the head WQE.
func (rc *rcTransport) retire(status qp.WCStatus) {
	e, q := rc.e, rc.q
	w := q.sq.Front()
	head := q.sq.Head()
	if head != q.sqStart && w.isReadOrAtomic() {
		q.rdAtomics--
	}
	pulled := rc.hooks != nil && rc.hooks.retired(w, status) // a StaR pull completes its RECV (starclient.go)
	if !pulled && (status != qp.WCSuccess || q.sigAll || w.wr.Flags&qp.SendSignaled != 0) {
		wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: qp.WCOpcodeFor(w.wr.Opcode), QPNum: q.qpn}
		if status == qp.WCSuccess {
			wc.ByteLen = w.length
		}
		e.pushWC(q.sendCQ, wc)
	}
	if status != qp.WCWRFlushErr && (w.wr.Opcode == qp.WRSend || w.wr.Opcode == qp.WRSendWithImm) {
		e.cnt.RDMASends++ // rxe's rdma_sends: SENDs the completer retired
	}
	if q.sqStart == head { // failing a WQE that never started
		q.sqStart++
	}
	if q.cur == head {
		q.cur++
	}
	q.sq.Pop()
	if rc.hooks != nil {
		rc.hooks.popped()
	}
	if q.state == qp.SQD {
		e.drained(q)
	}
}

// failAt completes the WQEs before idx as flushed, the one at idx with
// status, and moves q to ERR, which flushes the rest (IBA §10.8.3.3).
func (rc *rcTransport) failAt(idx uint32, status qp.WCStatus) {
	e, q := rc.e, rc.q
	for q.sq.Len() > 0 && q.sq.Head() != idx {
		rc.retire(qp.WCWRFlushErr)
	}
	if q.sq.Len() > 0 {
		rc.retire(status)
	}
	was := q.state
	e.setState(q, qp.Err)
	if was != qp.Err {
		e.nicError(q) // QP_FATAL (events.go)
	}
}

// releaseScheme gives back what q's halves hold of the scheme's shared
// pools and of the reorder buffer (reset, destroy, a new scheme).
func (rc *rcTransport) releaseScheme() {
	q := rc.q
	if q.sender != nil {
		q.sender.Reset(0)
		q.receiver.Reset(0)
	}
	rc.robClear()
}

// resetQP returns q to its just-created state.
func (rc *rcTransport) resetQP() {
	e, q := rc.e, rc.q
	rc.timers.stop(e.wheel)
	rc.cnpDue = false
	for q.sq.Len() > 0 {
		q.sq.Pop()
	}
	for q.rq.Len() > 0 {
		q.rq.Pop()
	}
	for q.respQ.Len() > 0 {
		q.respQ.Pop()
	}
	q.sqStart, q.cur = q.sq.Head(), q.sq.Head()
	q.noAck, q.rdAtomics, q.rnrWait, q.goError = 0, 0, false, false
	q.msg = respMsg{}
	q.msn = 0
	q.nextRecvSN, q.recvSN = 0, 0
	q.rtt, q.rttPSN, q.rttBackoff = recovery.RTT{}, 0, 0 // a new connection, perhaps a new path
	q.ackReqOut = false
	q.commEst, q.sqdDone = false, false
	clear(q.stash)
	rc.releaseScheme()
	for i := range q.res {
		q.res[i] = resource{}
	}
}

// flush completes every outstanding work request with WR_FLUSH_ERR
// (IBA §10.3.1: entering ERR flushes both queues) and stops the QP.
func (rc *rcTransport) flush() {
	e, q := rc.e, rc.q
	rc.timers.stop(e.wheel)
	rc.cnpDue = false
	for w := q.sq.Front(); w != nil; w = q.sq.Front() {
		e.pushWC(q.sendCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCOpcodeFor(w.wr.Opcode), QPNum: q.qpn})
		q.sq.Pop()
	}
	q.sqStart, q.cur = q.sq.Head(), q.sq.Head()
	for w := q.rq.Front(); w != nil; w = q.rq.Front() {
		e.pushWC(q.recvCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
		q.rq.Pop()
	}
	for q.respQ.Len() > 0 {
		q.respQ.Pop()
	}
	q.msg = respMsg{}
	q.rdAtomics = 0
	clear(q.stash)
}

// robClear frees every slot q holds (reset, destroy).
func (rc *rcTransport) robClear() {
	e, q := rc.e, rc.q
	if e.rob == nil {
		return
	}
	for i, s := range q.rob {
		if s != 0 {
			e.rob.release(s - 1)
			q.rob[i] = 0
		}
	}
}

// Timeouts that follow the path (docs/recovery.md): with Config.RTO
// adaptive every QP measures its round trip from its own ACKs and the
// scheme derives its timeouts from the estimate (recovery.RTT).
//
// Measurement is TCP's without timestamps: one PSN per QP is timed at a
// time, the next new packet that asks for a response (AckReq, a READ or
// an atomic) when none is; its sample is the engine's time when the
// cumulative acknowledgement passes it (an ACK, a NAK's implied ACK, a
// READ response, an atomic ACK) less the time it was sent. Karn's rule:
// when any PSN up to and including the timed one is sent again, the
// timing is dropped (counted in rtt_karn_skipped), so no sample comes
// from a retransmitted packet, nor from an acknowledgement that a
// retransmission of an earlier packet released. The state is three words
// of the on-chip context (rttOnChipBytes) and costs nothing per packet
// but a compare. A timeout backs the RTO off until the next sample
// (Karn's algorithm, rttTimedOut), on top of Config.RTOBackoff.

// rttOnChipBytes is what the estimate adds to an adaptive QP's on-chip
// context, as a NIC would keep it: SRTT and RTTVAR in 4 bytes of
// nanoseconds each, the timed PSN in 3 and its send time in 4, one byte
// for the valid flag and Karn's backoff.
const rttOnChipBytes = 4 + 4 + 3 + 4 + 1

// rttSent: psn went out for the first time; respond says its receipt will
// be answered at once (AckReq, a READ, an atomic).
func (rc *rcTransport) rttSent(psn qp.PSN, respond bool) {
	e, q := rc.e, rc.q
	if e.cfg.RTO == RTOAdaptive && respond && q.rttPSN == 0 {
		q.rttPSN, q.rttSentAt = psn+1, e.now
	}
}

// rttResent: psn went out again. Karn: if the timed PSN or one before it
// is resent, its acknowledgement is ambiguous.
func (rc *rcTransport) rttResent(psn qp.PSN) {
	e, q := rc.e, rc.q
	if q.rttPSN != 0 && !(q.rttPSN - 1).Before(psn) {
		q.rttPSN = 0
		e.cnt.RTTKarnSkipped++
	}
}

// rttAcked runs when unacked moved: a sample if it passed the timed PSN.
func (rc *rcTransport) rttAcked() {
	e, q := rc.e, rc.q
	if q.rttPSN == 0 || !(q.rttPSN - 1).Before(q.unacked) {
		return
	}
	m := max(e.now-q.rttSentAt, 0)
	q.rtt.Sample(m)
	q.rttPSN, q.rttBackoff = 0, 0
	e.cnt.RTTSamples++
	e.cnt.RTTSampleNs += uint64(m)
	rc.ccs.OnRTT(e.now, m) // Timely's input
	rc.armCC()
}

// rttTimedOut: the retransmission timer fired. Karn's algorithm (RFC 6298
// §5.5, §5.7): the RTO doubles and stays doubled, over later packets too,
// until a packet sent once is acknowledged and gives a sample. Without it
// a path that got slower than the RTO would never be measured again:
// every timed packet would time out, be resent and lose its sample.
func (rc *rcTransport) rttTimedOut() {
	e, q := rc.e, rc.q
	if e.cfg.RTO == RTOAdaptive && q.rttBackoff < maxKarnShift {
		q.rttBackoff++
	}
}

// karnBackoff goes on doubling an adaptive timeout past the 16x of
// maxRTOBackoffShift, one doubling per timeout since the last sample
// (shift), while it is below the negotiated local ACK timeout base, and
// never past base: rto comes backed off by up to 16x already. RFC 6298
// §5.5 bounds the doubling only by its maximum RTO (§2.5, at least 60 s);
// an RNIC's is the ACK timeout the two ends agreed (IBA §9.7.6.1.3).
// Stopped at 16x, a QP behind a queue longer than 16 of its timeouts
// timed out before every acknowledgement, never took a sample (Karn) and
// resent its window every timeout, and each timeout spent a retry. A
// timeout already at base or above (go-back-N's) keeps the 16x cap.
func karnBackoff(rto, base time.Duration, shift uint8) time.Duration {
	for i := uint8(maxRTOBackoffShift); i < shift && rto < base; i++ {
		rto = min(2*rto, base)
	}
	return rto
}

// noteRTO keeps the engine's smallest and largest retransmission timeout
// chosen (before backoff).
func (rc *rcTransport) noteRTO(rto time.Duration) {
	e := rc.e
	v := uint64(max(rto, 0))
	if e.cnt.RTOMinNs == 0 || v < e.cnt.RTOMinNs {
		e.cnt.RTOMinNs = v
	}
	e.cnt.RTOMaxNs = max(e.cnt.RTOMaxNs, v)
}

// maxRTOBackoffShift caps Config.RTOBackoff at 16 times the timeout, and
// Karn's backoff of an adaptive RTO there too unless it is still below
// the ACK timeout (karnBackoff).
const maxRTOBackoffShift = 4

// maxKarnShift bounds Karn's count of timeouts since the last sample (5
// bits of the context's flag-and-backoff byte): 31 doublings take G, the
// least adaptive timeout, past the longest ACK timeout, 4.096 µs·2^31.
const maxKarnShift = 31
