package dataplane

// A QP's transmit turn under a service time. The transmit scheduler
// (Engine.transmit) gives each ready QP a turn of up to TxBurst packets.
// With a service time (Config.ServiceRate) the transmit pipeline takes one
// frame per slot, so every frame ends the round: a QP that had the rest of
// its turn to send went to the back of the ready list after one packet, and
// TxBurst had no effect (the scheduler interleaved the QPs packet by
// packet whatever it was). Here a turn that the busy pipeline cut short is
// kept: the QP goes back to the head of the ready list with what is left
// of its turn, and the next round continues it, as a NIC's scheduler that
// hands a QP a burst does. Without a service time nothing changes: a round
// ends on a full ring or an empty link bucket, and the QP goes to the back
// as it always has.

// turnBudget is the packets q may send now: the rest of a turn it kept, or
// a new turn of TxBurst.
func (e *Engine) turnBudget(q *QP) int {
	if n := q.turnLeft; n > 0 {
		q.turnLeft = 0
		return n
	}
	return e.cfg.TxBurst
}

// endTurn puts q, which has more to send after sending sent of budget
// packets, back on the ready list: at its head with the rest of its turn
// if the busy transmit pipeline ended the turn, at its tail otherwise.
func (e *Engine) endTurn(q *QP, budget, sent int) {
	if e.txPipe.rate > 0 && e.txStall && sent < budget {
		q.turnLeft = budget - sent
		e.unpop(q)
		return
	}
	e.schedule(q)
}

// unpop puts q back at the head of the ready list (q is not on it).
func (r *readyList) unpop(q *QP) {
	q.queued = true
	if r.readyHead > 0 {
		r.readyHead--
		r.ready[r.readyHead] = q
		return
	}
	r.ready = append(r.ready, nil)
	copy(r.ready[1:], r.ready)
	r.ready[0] = q
}
