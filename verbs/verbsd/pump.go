package verbsd

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// qpObj is a client's QP: the engine's QP and the server's side of its
// shared rings. The consumers' private heads count the WQEs moved into
// the engine; the retired indices, published to the client, count those
// the engine has also retired, so that the ring's capacity bounds
// outstanding work as the engine's own queue does.
type qpObj struct {
	h              uint32
	owner          *client
	cost           int64 // ring bytes, counted in client.ringBytes
	pd             *pdObj
	eq             *dataplane.QP
	sendCQ, recvCQ *cqObj
	mem            shm.Mapping
	sq             shm.Consumer[qp.SendWR]
	rq             shm.Consumer[qp.RecvWR]
	sqRetired      uint32
	rqRetired      uint32
	broken         bool   // a ring index was corrupt: the QP is in ERR and its rings are ignored
	sigAll         bool   // every send WQE completes with a CQE
	slot           uint32 // doorbell slot
	pending        bool   // on Server.pending: work is left in its rings
	watched        bool   // on Server.watch: unsignaled send WQEs may retire with no CQE
	stamp          uint64 // Server.gen when last retired for a completion batch
}

// cqObj is a client's CQ: the engine's CQ and the producer side of the
// shared completion ring.
type cqObj struct {
	h        uint32
	owner    *client
	cost     int64 // ring bytes (file and engine ring), counted in client.ringBytes
	ecq      *dataplane.CQ
	mem      shm.Mapping
	ring     shm.Producer[qp.WC]
	layout   shm.CQLayout
	users    int  // QPs using it
	overflow bool // a completion was lost; the flag in the ring is set
	// ch is the completion channel the CQ's events go to (nil: none);
	// notify is the arm and event words in the CQ file.
	ch     *chanObj
	notify shm.Notify
}

// Pump moves work and completions between the clients' shared rings and
// the engine: published send and receive WQEs into the engine's queues,
// retired slots back to the clients, then completions from the engine's
// CQs into the completion rings. It runs on the engine's poll goroutine
// (dataplane.RunConfig.Pump), outside the engine lock, and reports
// whether it moved anything. It does not allocate (once its lists have
// grown to the number of QPs).
//
// A round costs what moved, not the number of QPs: it looks at the rings
// of the QPs whose doorbell bits their clients set (a version-1 client,
// which has no doorbell file, gets all its QPs looked at), and retires
// the WQEs of the QPs that completions name. The engine retires a WQE
// with a completion, except a send WQE posted unsignaled: QPs that have
// such WQEs in the engine are looked at every round until they have
// retired them.
//
// Retired indices are published before completions, so that a client
// that has seen a completion finds its WQE's slot free, as it would in
// embedded mode.
//
// Two servers on one loop (a Sim's two engines) must both pump every
// round: compose them as `a := sA.Pump(); b := sB.Pump(); return a || b`,
// never with a short-circuiting ||.
func (s *Server) Pump() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	recheck := s.recheck
	s.recheck = false
	s.deliverEvents() // asynchronous events to their owners (srq.go)
	moved := s.pumpSRQs()
	s.looked = 0
	// Work an earlier round could not move (an engine queue was full).
	if len(s.pending) > 0 {
		work := s.pending
		s.pending = s.pendingSpare[:0]
		for _, q := range work {
			q.pending = false
			if s.pumpQP(q) {
				moved = true
			}
		}
		clear(work)
		s.pendingSpare = work[:0]
	}
	for c := range s.clients {
		if s.pumpClient(c) {
			moved = true
		}
	}
	for i := 0; i < len(s.watch); {
		q := s.watch[i]
		s.retire(q)
		if q.sq.Head() != q.sqRetired {
			i++
			continue
		}
		q.watched = false
		s.watch[i] = s.watch[len(s.watch)-1]
		s.watch[len(s.watch)-1] = nil
		s.watch = s.watch[:len(s.watch)-1]
	}
	for _, c := range s.cqs {
		if s.moveCompletions(c) {
			moved = true
		}
	}
	// The loop is awake. Clear the flag unless this is the last look
	// before sleeping (BeforeWait's recheck found nothing): then the flag
	// must stay up while the loop sleeps.
	if (moved || !recheck) && s.needWakeup.Load() != 0 {
		s.needWakeup.Store(0)
	}
	return moved
}

// BeforeWait raises the need-wakeup flag before the poll loop sleeps.
// The loop then pumps once more: anything a client published before it
// saw the flag is found by that pump, anything after makes the client
// ring its doorbell.
func (s *Server) BeforeWait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.needWakeup.Store(1)
	s.recheck = true
	if s.o.Wake == nil && !s.warned {
		s.warned = true
		s.log.Warn("verbsd: no Wake function: doorbells cannot wake the poll loop")
	}
}

// pumpClient moves the work of c's QPs whose doorbell bits are set, or
// of all its QPs for a client without a doorbell file (s.mu held).
func (s *Server) pumpClient(c *client) bool {
	moved := false
	if !c.bells.Valid() {
		for _, q := range c.qps {
			if s.pumpQP(q) {
				moved = true
			}
		}
		return moved
	}
	for k := range shm.Summaries {
		for sum := c.bells.Take(k); sum != 0; {
			var j int
			j, sum = shm.NextBit(sum)
			w := k*64 + j
			for word := c.bells.TakeWord(w); word != 0; {
				var i int
				i, word = shm.NextBit(word)
				if slot := w*64 + i; slot < len(c.slots) {
					if q := c.slots[slot]; q != nil && s.pumpQP(q) {
						moved = true
					}
				}
			}
		}
	}
	return moved
}

// pumpQP moves q's published work into the engine and remembers q for
// the next round if some is left (s.mu held).
func (s *Server) pumpQP(q *qpObj) bool {
	s.looked++
	moved, left := s.moveWork(q)
	if left && !q.pending {
		q.pending = true
		s.pending = append(s.pending, q)
	}
	return moved
}

// moveWork moves q's published WQEs into the engine (s.mu held), and
// reports whether it moved any and whether some are left in the rings.
// Entries are copied out of the shared slots into the server's own batch
// before the engine sees them: the client can rewrite a slot at any time,
// and the engine must validate and use one unchanging copy.
func (s *Server) moveWork(q *qpObj) (moved, left bool) {
	if q.broken {
		return false, false
	}
	n, err := q.sq.Available()
	if err != nil {
		s.breakQP(q, "send ring", err)
		return false, false
	}
	for n > 0 {
		k := min(n, pumpBatch)
		for i := range k {
			s.sendBatch[i] = *q.sq.At(i)
		}
		posted, err := s.e.PostSend(q.eq, s.sendBatch[:k])
		q.sq.Advance(uint32(posted))
		n -= uint32(posted)
		moved = moved || posted > 0
		if !q.sigAll && !q.watched {
			// No completion will say when an unsignaled WQE retires.
			for i := range posted {
				if s.sendBatch[i].Flags&qp.SendSignaled == 0 {
					q.watched = true
					s.watch = append(s.watch, q)
					break
				}
			}
		}
		if err != nil {
			if errors.Is(err, dataplane.ErrQueueFull) {
				left = true
				break // only a client that forged its ring indices gets here; the rest waits
			}
			s.refuseSend(q, &s.sendBatch[posted], err)
			q.sq.Advance(1)
			n--
			moved = true
		}
	}
	n, err = q.rq.Available()
	if err != nil {
		s.breakQP(q, "receive ring", err)
		return moved, false
	}
	for n > 0 {
		k := min(n, pumpBatch)
		for i := range k {
			s.recvBatch[i] = *q.rq.At(i)
		}
		posted, err := s.e.PostRecv(q.eq, s.recvBatch[:k])
		q.rq.Advance(uint32(posted))
		n -= uint32(posted)
		moved = moved || posted > 0
		if err != nil {
			if errors.Is(err, dataplane.ErrQueueFull) {
				left = true
				break
			}
			s.refuseRecv(q, &s.recvBatch[posted], err)
			q.rq.Advance(1)
			n--
			moved = true
		}
	}
	return moved, left && !q.broken
}

// retire publishes how many of q's moved WQEs the engine has retired.
func (s *Server) retire(q *qpObj) {
	if q.sq.Head() == q.sqRetired && q.rq.Head() == q.rqRetired {
		return // nothing outstanding: skip the engine lock
	}
	sl, rl := s.e.QueueDepths(q.eq)
	if r := q.sq.Head() - uint32(sl); r != q.sqRetired {
		q.sqRetired = r
		q.sq.Release(r)
	}
	if r := q.rq.Head() - uint32(rl); r != q.rqRetired {
		q.rqRetired = r
		q.rq.Release(r)
	}
}

// moveCompletions drains c's engine CQ into its shared ring. A ring the
// client let fill up loses the completion and raises the overflow flag:
// a full CQ overflows, as the engine's own CQ does in embedded mode.
func (s *Server) moveCompletions(c *cqObj) bool {
	moved := false
	for {
		n, err := s.e.PollCQ(c.ecq, s.wcBatch[:])
		if err != nil {
			s.cqOverflow(c) // the engine's CQ itself overflowed between pumps
			// Lost completions retired WQEs that nothing else names.
			for _, q := range s.qps {
				if q.sendCQ == c || q.recvCQ == c {
					s.retire(q)
				}
			}
		}
		// Retire the WQEs of the QPs these completions belong to before
		// the client can see the completions (once per QP and batch).
		s.gen++
		for i := range n {
			if q := s.byQPN[s.wcBatch[i].QPNum]; q != nil && q.stamp != s.gen {
				q.stamp = s.gen
				s.retire(q)
			}
		}
		pushed := 0
		for i := range n {
			if c.ring.Free() == 0 {
				s.cqOverflow(c)
				continue
			}
			c.ring.Push(&s.wcBatch[i])
			pushed++
		}
		if pushed > 0 {
			c.ring.Publish()
			if c.ch != nil {
				s.notify(c, n)
			}
		}
		moved = moved || n > 0
		if n < pumpBatch {
			return moved
		}
	}
}

// notify fires c's completion event if the client armed c for one of
// the n completions just published (s.mu held). The arm word is read
// after the ring's producer index was stored: a client that armed after
// that store polls again and finds the completions itself (Notify). The
// eventfd is written only for an armed CQ: a client that does not wait
// for events costs one atomic load per batch, and no system call.
func (s *Server) notify(c *cqObj, n int) {
	armed, solicitedOnly := c.notify.Armed()
	if !armed {
		return
	}
	sol := !solicitedOnly
	for i := 0; i < n && !sol; i++ {
		sol = shm.Solicited(&s.wcBatch[i])
	}
	if c.notify.Trigger(sol) {
		// EAGAIN (the counter is saturated) means an event is pending
		// anyway.
		unix.Write(c.ch.fd, eventValue[:])
	}
}

var eventValue = [8]byte{1} // eventfd adds this little-endian 1

func (s *Server) cqOverflow(c *cqObj) {
	if c.overflow {
		return
	}
	c.overflow = true
	c.layout.Overflow(c.mem.Bytes).Store(1)
	c.owner.queueEvent(proto.AsyncEvent{Type: int(dataplane.EventCQErr), Handle: c.h}) // CQ_ERR, once (srq.go)
	c.owner.log.Warn("completion queue overflowed: completions were lost", "cq", c.h)
}

// breakQP handles a ring index no correct client writes: the QP goes to
// ERR (flushing what the engine holds) and its rings are ignored from
// now on. Only this client's QP suffers.
func (s *Server) breakQP(q *qpObj, ring string, err error) {
	q.broken = true
	q.owner.log.Warn("corrupt ring: QP moved to ERR", "qp", q.h, "qpn", q.eq.QPN(), "ring", ring, "err", err)
	s.toErr(q)
}

// refuseSend handles a WQE the engine refused although the client library
// checks what the engine checks: a client that bypassed its library, or
// raced a deregistration. As a NIC does with a malformed WQE, the QP
// moves to ERR; the WQE completes as flushed under its own WRID, so the
// application still hears of it.
func (s *Server) refuseSend(q *qpObj, wr *qp.SendWR, err error) {
	q.owner.log.Warn("send WQE refused: QP moved to ERR", "qp", q.h, "qpn", q.eq.QPN(), "wr_id", wr.WRID, "err", err)
	s.toErr(q)
	flush := [1]qp.SendWR{{WRID: wr.WRID, Opcode: qp.WRSend}}
	s.e.PostSend(q.eq, flush[:])
}

func (s *Server) refuseRecv(q *qpObj, wr *qp.RecvWR, err error) {
	q.owner.log.Warn("receive WQE refused: QP moved to ERR", "qp", q.h, "qpn", q.eq.QPN(), "wr_id", wr.WRID, "err", err)
	s.toErr(q)
	flush := [1]qp.RecvWR{{WRID: wr.WRID}}
	s.e.PostRecv(q.eq, flush[:])
}

func (s *Server) toErr(q *qpObj) {
	a := dataplane.QPAttr{State: qp.Err}
	if err := s.e.ModifyQP(q.eq, &a, qp.AttrState); err != nil {
		q.owner.log.Warn("modify QP to ERR", "qp", q.h, "err", err)
	}
}
