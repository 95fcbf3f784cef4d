package dataplane

import (
	"fmt"

	"github.com/softnic/softnic/qp"
)

// Asynchronous events (ibv_get_async_event; IBA §11.6.3, "affiliated and
// unaffiliated asynchronous events"). The NIC reports what happens to a
// QP, CQ, SRQ or port outside any work request's completion into one
// bounded engine-level queue; the verbs layer drains it (PollEvents) and
// delivers each event to the process that owns the object it names.
// When the queue is full an event is lost and counted
// (async_events_lost), as a full event queue loses them on a real NIC.
// Which event fires when follows IBA and Linux rxe:
//
//   - QP_FATAL: the NIC moved a QP to ERR on its own as requester: retry
//     or RNR retry exceeded, a NAK'ed request, a local protection error
//     (rc.failAt).
//   - QP_REQ_ERR, QP_ACCESS_ERR: the responder found an invalid request
//     (or a SEND longer than its receive WQE) or a remote access
//     violation, NAK'ed it and moved the QP to ERR (classC); a remote
//     operational error (the receive WQE's memory gone) is QP_FATAL.
//   - COMM_EST: the first request a QP receives while in RTR.
//   - SQ_DRAINED: a QP in SQD has no request left outstanding.
//   - QP_LAST_WQE_REACHED: a QP attached to an SRQ entered ERR: no
//     further receive WQE will be taken from the SRQ for it.
//   - SRQ_LIMIT_REACHED: an armed SRQ fell below its limit (srq.go).
//   - CQ_ERR: a CQ overran (a completion was lost).
//
// PORT_ACTIVE is the verbs layer's (a context opens on an active port);
// the engine has one port and it is always up.

// EventType is enum ibv_event_type, with its values.
type EventType int

const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
)

var eventNames = map[EventType]string{
	EventCQErr: "IBV_EVENT_CQ_ERR", EventQPFatal: "IBV_EVENT_QP_FATAL", EventQPReqErr: "IBV_EVENT_QP_REQ_ERR",
	EventQPAccessErr: "IBV_EVENT_QP_ACCESS_ERR", EventCommEst: "IBV_EVENT_COMM_EST", EventSQDrained: "IBV_EVENT_SQ_DRAINED",
	EventPortActive: "IBV_EVENT_PORT_ACTIVE", EventPortErr: "IBV_EVENT_PORT_ERR", EventSRQErr: "IBV_EVENT_SRQ_ERR",
	EventSRQLimitReached: "IBV_EVENT_SRQ_LIMIT_REACHED", EventQPLastWQEReached: "IBV_EVENT_QP_LAST_WQE_REACHED",
}

func (t EventType) String() string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return fmt.Sprintf("IBV_EVENT_%d", int(t))
}

// Event is one asynchronous event and the object it names: QP for the QP
// events, CQ for CQ_ERR, SRQ for the SRQ events, Port (1) for the port
// events; the others are nil (0).
type Event struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
	Port int
}

// EventQueueLen is how many events the engine holds undrained.
const EventQueueLen = 1024

// eventQueue is the engine's event queue: a ring made once (NewEngine's
// first event), so raising an event does not allocate.
type eventQueue struct {
	ring   *qp.Ring[Event]
	notify func()
	lost   uint64
	raised uint64
}

// raise queues ev (engine lock held) and calls the notify hook.
func (e *Engine) raise(ev Event) {
	if e.ev.ring == nil {
		e.ev.ring = qp.NewRing[Event](EventQueueLen)
	}
	slot := e.ev.ring.Push()
	if slot == nil {
		e.ev.lost++
		return
	}
	*slot = ev
	e.ev.raised++
	if e.ev.notify != nil {
		e.ev.notify()
	}
}

// raiseQP raises a QP's event.
func (e *Engine) raiseQP(t EventType, q *QP) { e.raise(Event{Type: t, QP: q}) }

// SetEventNotify installs fn, called with the engine lock held (it must
// not block or call back into the engine) after each event is queued:
// the verbs layer wakes whoever drains the queue.
func (e *Engine) SetEventNotify(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev.notify = fn
}

// PollEvents moves up to len(evs) queued events into evs, oldest first.
// It does not allocate.
func (e *Engine) PollEvents(evs []Event) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ev.ring == nil {
		return 0
	}
	n := 0
	for n < len(evs) {
		ev := e.ev.ring.Front()
		if ev == nil {
			break
		}
		evs[n] = *ev
		*ev = Event{} // no reference to a destroyed object left in the ring
		e.ev.ring.Pop()
		n++
	}
	return n
}

// EventStats are the event queue's totals.
type EventStats struct {
	Raised, Lost uint64
}

// EventStats returns how many events were queued and lost.
func (e *Engine) EventStats() EventStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EventStats{Raised: e.ev.raised, Lost: e.ev.lost}
}

// The QP-side hooks, called by the transports.

// nicError: the NIC moved q to ERR by itself (as requester): QP_FATAL.
func (e *Engine) nicError(q *QP) {
	e.raiseQP(EventQPFatal, q)
}

// enteredErr: q entered ERR (by the NIC or a modify): a QP on an SRQ
// reports that it takes no more receive WQEs from it.
func (e *Engine) enteredErr(q *QP, from qp.State) {
	if q.srq != nil && from != qp.Err {
		e.raiseQP(EventQPLastWQEReached, q)
	}
}

// receivedInRTR: the first request received in RTR establishes the
// connection (COMM_EST), once per connection.
func (e *Engine) receivedInRTR(q *QP) {
	if !q.commEst {
		q.commEst = true
		e.raiseQP(EventCommEst, q)
	}
}

// drained reports SQ_DRAINED once a QP in SQD has nothing outstanding.
func (e *Engine) drained(q *QP) {
	if q.state == qp.SQD && !q.sqdDone && q.sq.Head() == q.sqStart {
		q.sqdDone = true
		e.raiseQP(EventSQDrained, q)
	}
}

// cqOverrun: a completion for cq was lost: CQ_ERR, once per overrun (the
// CQ stays overrun; a consumer destroys it).
func (e *Engine) cqOverrun(cq *CQ) {
	e.raise(Event{Type: EventCQErr, CQ: cq})
}
