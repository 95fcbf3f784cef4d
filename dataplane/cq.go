package dataplane

import (
	"errors"

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

// ErrCQDestroyed is returned for a CQ that DestroyCQ released.
var ErrCQDestroyed = errors.New("dataplane: completion queue destroyed")
