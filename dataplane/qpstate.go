package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is a QP's state machine (setState: what entering each state
// does: reset, connect, flush) and what giving back a QP's resources
// means, used by the verbs (qpverbs.go) and by the stages that move a QP
// to ERR.

// releaseScheme gives back what q's halves hold of the scheme's shared
// pools and of the reorder buffer (reset, destroy, a new scheme).
func (e *Engine) releaseScheme(q *QP) {
	if q.sender != nil {
		q.sender.Reset(0)
		q.receiver.Reset(0)
	}
	e.robClear(q)
}

// setState is the one place QP state changes (STYLE: wireguard-go
// changeState). Entering a state does what the state means.
func (e *Engine) setState(q *QP, to qp.State) {
	from := q.state
	q.state = to
	switch to {
	case qp.Reset:
		e.resetQP(q)
		e.wheel.Stop(&q.starTimer)
		e.wheel.Stop(&q.eaTimer)
		switch q.star {
		case StarServer:
			q.drv = &starDriver{}
		case StarClient:
			q.shadow, q.starTable = &starShadow{}, nil
		}
	case qp.RTR:
		if from == qp.Init {
			q.hdr = bth.FrameHeader{
				SrcMAC: e.cfg.MAC, DstMAC: q.av.DMAC,
				Src: e.cfg.Addr, Dst: q.av.DGID,
				SrcPort: udpSourcePort(q.qpn, q.destQPN),
				TOS:     q.av.TrafficClass, TTL: q.av.HopLimit, FlowLabel: q.av.FlowLabel,
			}
			q.receiver.Reset(q.ePSN)
			if q.drv != nil {
				e.driverPushTable(q) // StaR §3.2: the server's word on its memory, in band
			}
			if q.shadow != nil && q.shadow.hello {
				e.schedule(q) // tell the driver the client listens now
			}
		}
	case qp.RTS:
		if from == qp.RTR {
			q.retryLeft, q.rnrLeft = q.retryCnt, q.rnrRetry
			q.sender.Reset(q.nextPSN)
		}
		if e.requestReady(q) {
			e.schedule(q)
		}
	case qp.Err:
		e.flush(q)
	}
}

// resetQP returns q to its just-created state.
func (e *Engine) resetQP(q *QP) {
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Stop(&q.rnrTimer)
	e.wheel.Stop(&q.rxTimer)
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
	clear(q.stash)
	e.releaseScheme(q)
	for i := range q.res {
		q.res[i] = resource{}
	}
}

// flush completes every outstanding work request with WR_FLUSH_ERR
// (IBA §10.3.1: entering ERR flushes both queues) and stops the QP.
func (e *Engine) flush(q *QP) {
	e.wheel.Stop(&q.retryTimer)
	e.wheel.Stop(&q.rnrTimer)
	e.wheel.Stop(&q.rxTimer)
	e.wheel.Stop(&q.eaTimer)
	if q.drv != nil {
		e.driverFlush(q) // a StaR server's work requests are its driver's
	}
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
func (e *Engine) robClear(q *QP) {
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
