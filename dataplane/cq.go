package dataplane

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/qp"
)

// CQ is a completion queue: a ring of work completions the engine fills
// and the application drains with PollCQ.
type CQ struct {
	ring     *qp.Ring[qp.WC]
	overflow bool
	notify   func(wc *qp.WC) // optional: called when a completion is added
	users    int             // QP queues that complete into it (engine lock)
	dead     bool            // destroyed: the ring is released (engine lock)
}

// ErrCQOverflow reports that completions were lost because the CQ was full
// (IBV_EVENT_CQ_ERR).
var ErrCQOverflow = errors.New("dataplane: completion queue overflowed; completions were lost")

// CreateCQ returns a completion queue holding at least depth entries.
// notify, if not nil, is called with each completion added (with the
// engine lock held: it must not call back into the engine, nor keep wc);
// a completion channel (package verbs) hangs its event on it.
func (e *Engine) CreateCQ(depth int, notify func(wc *qp.WC)) (*CQ, error) {
	if depth < 1 || depth > 1<<22 {
		return nil, errors.New("dataplane: CQ depth must be 1 to 4194304")
	}
	return &CQ{ring: qp.NewRing[qp.WC](depth), notify: notify}, nil
}

// ErrCQDestroyed is returned for a CQ that DestroyCQ released.
var ErrCQDestroyed = errors.New("dataplane: completion queue destroyed")

// DestroyCQ releases cq's ring (ibv_destroy_cq): a deep one, which lives
// in a mapping of its own (qp.OffHeapBytes), is returned to the system at
// once. A CQ that a QP still uses (as its send or receive CQ) is busy.
func (e *Engine) DestroyCQ(cq *CQ) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cq.dead {
		return ErrCQDestroyed
	}
	if cq.users > 0 {
		return fmt.Errorf("%w: completion queue is used by %d QP queues", ErrBusy, cq.users)
	}
	cq.dead = true
	cq.ring.Release()
	return nil
}

// PollCQ moves up to len(wcs) completions into wcs, oldest first.
func (e *Engine) PollCQ(cq *CQ, wcs []qp.WC) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cq.dead {
		return 0, ErrCQDestroyed
	}
	n := 0
	for n < len(wcs) {
		wc := cq.ring.Front()
		if wc == nil {
			break
		}
		wcs[n] = *wc
		cq.ring.Pop()
		n++
	}
	if n == 0 && cq.overflow {
		return 0, ErrCQOverflow
	}
	return n, nil
}

func (e *Engine) pushWC(cq *CQ, wc qp.WC) {
	slot := cq.ring.Push()
	if slot == nil {
		cq.overflow = true
		e.cnt.CQOverflow++
		return
	}
	*slot = wc
	if cq.notify != nil {
		cq.notify(slot)
	}
}
