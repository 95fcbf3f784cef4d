package verbs

// SendQueueCap is the most send work requests the QP holds at once:
// posted and not yet retired (completed, flushed, or for an unsignaled
// one acknowledged), what PostSend takes before it refuses one with
// dataplane.ErrQueueFull. It is at least QPInitAttr.MaxSendWR (the
// queues are powers of two). On a daemon context it is the size of the
// shared send ring, whose slots the daemon frees only as the engine
// retires their WQEs, so that a WQE posted SendQueueCap posts before
// this one's is retired once this one is in the ring: the drop-in
// libibverbs sizes its inline-data slots by it (docs/ibverbs.md).
func (q *QP) SendQueueCap() int {
	if q.ring != nil {
		return int(q.ring.sq.Cap())
	}
	return q.pd.ctx.e.SendQueueCap(q.q)
}
