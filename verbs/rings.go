package verbs

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// This file is the data path of a daemon context: a QP's send and receive
// rings and a CQ's completion ring, mapped from memfds the daemon created.
// The client is the only producer of the work rings and the only
// consumer of the completion ring; a mutex per ring makes the verbs calls
// safe from several goroutines (as libibverbs' are) without breaking the
// single-producer single-consumer discipline. An uncontended mutex is
// two atomic operations, no system call.

// qpRing is the client side of a QP's rings.
type qpRing struct {
	r    *remote
	qpn  uint32
	pd   uint32 // the QP's PD handle: receive SGEs must be in its regions
	slot uint32 // the QP's doorbell bit
	// state is the QP state as this client last set or read it: posting
	// is checked against it, as the engine checks its own state. The
	// engine may since have moved the QP to SQE or ERR by itself; both
	// still accept posts (completing them as flushed), so a stale RTS
	// admits exactly what the engine would.
	state atomic.Uint32

	mu   sync.Mutex
	dead bool
	mem  shm.Mapping
	sq   shm.Producer[qp.SendWR]
	rq   shm.Producer[qp.RecvWR]
	// ud: a UD QP, whose sends the client checks as the engine does
	// (udCheck, ud.go) against the port's MTU udMTU.
	ud    bool
	udMTU int
}

// postSend copies wrs into the send ring after the checks the engine's
// PostSend makes, publishes them, sets the QP's doorbell bit (so that the
// daemon's pump looks at this QP), and rings the doorbell eventfd only if
// the daemon asked for it.
func (q *qpRing) postSend(wrs []SendWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return &PostError{Index: 0, Err: dataplane.ErrBadQP} // as the engine answers for a destroyed QP
	}
	switch st := qp.State(q.state.Load()); st {
	case qp.RTS, qp.SQD, qp.SQE, qp.Err:
	default:
		return &PostError{Index: 0, Err: fmt.Errorf("dataplane: QP %#x: %w: post send in %v (needs RTS)", q.qpn, dataplane.ErrPostState, st)}
	}
	var perr error
	for i := range wrs {
		if err := dataplane.CheckSendWR(&wrs[i]); err != nil {
			perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: WR %d: %w", q.qpn, i, err)}
			break
		}
		if q.ud {
			if err := q.udCheck(&wrs[i]); err != nil {
				perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: WR %d: %w", q.qpn, i, err)}
				break
			}
		}
		if q.sq.Free() == 0 {
			perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: %w: %d send WRs outstanding", q.qpn, dataplane.ErrQueueFull, q.sq.Cap())}
			break
		}
		q.sq.Push(&wrs[i])
	}
	q.sq.Publish()
	q.r.bells.Ring(q.slot)
	q.r.kick()
	return perr
}

// postRecv is postSend for the receive ring. The engine checks receive
// SGEs against the registered regions when they are posted, so the client
// does the same against its own table of regions.
func (q *qpRing) postRecv(wrs []RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return &PostError{Index: 0, Err: dataplane.ErrBadQP}
	}
	st := qp.State(q.state.Load())
	if st == qp.Reset {
		return &PostError{Index: 0, Err: fmt.Errorf("dataplane: QP %#x: %w: post receive in RESET", q.qpn, dataplane.ErrPostState)}
	}
	var perr error
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > qp.MaxSGE {
			perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: WR %d: %w: %d SGEs", q.qpn, i, dataplane.ErrBadWR, wr.NumSGE)}
			break
		}
		if st != qp.Err && !q.r.recvSGLOK(q.pd, wr.SGEs()) {
			perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: WR %d: %w: SGE not in a locally writable region", q.qpn, i, dataplane.ErrBadWR)}
			break
		}
		if q.rq.Free() == 0 {
			perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: QP %#x: %w: %d receive WRs outstanding", q.qpn, dataplane.ErrQueueFull, q.rq.Cap())}
			break
		}
		q.rq.Push(wr)
	}
	q.rq.Publish()
	q.r.bells.Ring(q.slot)
	q.r.kick()
	return perr
}

// unmap ends the data path: later posts fail with ErrClosed.
func (q *qpRing) unmap() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.dead {
		q.dead = true
		q.mem.Unmap()
	}
}

// cqRing is the client side of a CQ's completion ring.
type cqRing struct {
	mu       sync.Mutex
	dead     bool
	mem      shm.Mapping
	ring     shm.Consumer[qp.WC]
	overflow *atomic.Uint32
}

// poll copies up to len(wcs) completions out of the ring and releases
// their slots. After completions were lost (the ring was full), an empty
// poll reports ErrCQOverflow, as the engine's PollCQ does.
func (c *cqRing) poll(wcs []WC) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return 0, ErrClosed
	}
	avail, err := c.ring.Available()
	if err != nil {
		return 0, err
	}
	n := min(int(avail), len(wcs))
	for i := range n {
		wcs[i] = *c.ring.At(uint32(i))
	}
	if n > 0 {
		c.ring.Advance(uint32(n))
		c.ring.Release(c.ring.Head())
		return n, nil
	}
	if c.overflow.Load() != 0 {
		return 0, dataplane.ErrCQOverflow
	}
	return 0, nil
}

// reqNotify arms the CQ in its file (Notify.Request) unless the ring is
// unmapped.
func (c *cqRing) reqNotify(n shm.Notify, solicitedOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return ErrClosed
	}
	n.Request(solicitedOnly)
	return nil
}

func (c *cqRing) unmap() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		c.mem.Unmap()
	}
}
