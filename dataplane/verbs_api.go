package dataplane

import "github.com/softnic/softnic/qp"

// This file is what the verbs layer needs of the engine beyond the
// ibverbs-shaped calls: the daemon's verbs server (verbs/verbsd) moves
// work requests from shared-memory rings into the engine and must know
// when the engine retires them, and the client library checks work
// requests before they enter a ring, exactly as PostSend would.

// CheckSendWR is the check PostSend applies to each send work request
// (SGE count, message length, opcode, atomic operand), so that a verbs
// client posting through a shared ring refuses the same requests with
// the same errors.
func CheckSendWR(wr *qp.SendWR) error { return checkSendWR(wr) }

// QueueDepths reports how many send and receive work requests q holds:
// posted and not yet retired by a completion (or by a flush). The verbs
// server releases shared ring slots by it, so that a client's ring bounds
// outstanding work exactly as the engine's own queues do.
func (e *Engine) QueueDepths(q *QP) (send, recv int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return q.sq.Len(), q.rq.Len()
}

// Resources counts the engine's live protection domains, memory regions
// and queue pairs: what a test checks to prove that a client's objects
// were torn down.
type Resources struct {
	PDs, MRs, QPs int
}

// Resources returns the live object counts.
func (e *Engine) Resources() Resources {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Resources{PDs: len(e.pds), QPs: len(e.qps)}
	for _, m := range e.mrs {
		if m != nil {
			r.MRs++
		}
	}
	return r
}

// QueueBytes is the memory CreateQP allocates for the send and receive
// queues of a QP of these depths, and CQBytes what CreateCQ allocates for
// a CQ's completion ring: the verbs server counts them against a client's
// ring limit. Queues of qp.OffHeapBytes or more are mappings of their
// own, released by DestroyQP and DestroyCQ.
func QueueBytes(maxSendWR, maxRecvWR int) int64 {
	return qp.RingBytes[sendWQE](maxSendWR) + qp.RingBytes[recvWQE](maxRecvWR)
}

// CQBytes: see QueueBytes.
func CQBytes(depth int) int64 { return qp.RingBytes[qp.WC](depth) }
