package proto

import "github.com/softnic/softnic/qp"

// Shared receive queues (ibv_create_srq ...) and asynchronous events
// (ibv_get_async_event). An SRQ's receive work requests go through the
// receive ring of its ring file, as a QP's do; post_srq_recv carries
// them in a request instead.

// SRQAttr is struct ibv_srq_attr: create_srq's arguments (with PD) and
// result (with Handle), modify_srq's (with SRQ and Mask), query_srq's
// result.
type SRQAttr struct {
	Handle uint32 `json:"handle,omitempty"`
	PD     uint32 `json:"pd,omitempty"`
	SRQ    uint32 `json:"srq,omitempty"`
	MaxWR  int    `json:"max_wr"`
	MaxSGE int    `json:"max_sge"`
	Limit  int    `json:"srq_limit"`
	Mask   int    `json:"mask,omitempty"` // enum ibv_srq_attr_mask
	// Size is create_srq's ring file size (shm.NewQPLayout(1, max_wr)),
	// whose memfd comes with the result.
	Size int `json:"size,omitempty"`
}

// PostSRQRecvArgs are post_srq_recv's arguments.
type PostSRQRecvArgs struct {
	SRQ uint32      `json:"srq"`
	WRs []qp.RecvWR `json:"wrs"`
}

// PostSRQRecvResult says how many were posted and why the next was not.
type PostSRQRecvResult struct {
	Posted int    `json:"posted"`
	Error  *Error `json:"error,omitempty"`
}

// AsyncEvent is one asynchronous event: its type (enum ibv_event_type)
// and the handle of the QP, CQ or SRQ it names, or the port.
type AsyncEvent struct {
	Type   int    `json:"type"`
	Handle uint32 `json:"handle,omitempty"`
	Port   int    `json:"port,omitempty"`
}

// AsyncEventsResult is get_async_events' result: the events the daemon
// holds for the connection, oldest first. async_fd's result comes with
// one descriptor, an eventfd in semaphore mode whose count is the events
// not yet fetched.
type AsyncEventsResult struct {
	Events []AsyncEvent `json:"events"`
	Lost   uint64       `json:"lost,omitempty"`
}
