package dataplane

// SendQueueCap is the most send work requests q holds at once, posted
// and not yet retired: the size of its send queue, MaxSendWR rounded up
// to a power of two. PostSend refuses one more with ErrQueueFull.
func (e *Engine) SendQueueCap(q *QP) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return q.sq.Cap()
}
