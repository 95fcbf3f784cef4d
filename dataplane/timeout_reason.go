package dataplane

// The Improved go-back-N paper finds four reasons for a go-back-N ACK
// timeout (§III-A, Fig. 3/4): (1) the last packet of the message is lost,
// (2) the ACK of the last packet is lost, (3) a NAK is lost, (4) the same
// packet is lost twice. Telling them apart takes both ends' view at the
// moment the timer fires: the responder's expected PSN and whether it has
// NAKed it, and whether that NAK reached the requester. A NIC sees only
// its own half; the embedded fabric has both engines in one process, so
// SetTimeoutPeer lets a requester read its peer's responder state when its
// timer fires, as the paper's simulator traces a flow through both nodes.
// Without a peer no timeout is classified (local_ack_timeout_err still
// counts it).

// SetTimeoutPeer names the engine at the other end of the fabric, whose
// responders this engine's requesters consult to classify their ACK
// timeouts. Only for simulations, where both run on one goroutine.
func (e *Engine) SetTimeoutPeer(peer *Engine) { e.timeoutPeer = peer }

// timeoutReason counts q's ACK timeout under one of the paper's reasons.
func (e *Engine) timeoutReason(q *QP) {
	if e.timeoutPeer == nil || q.ooo {
		return
	}
	r := e.timeoutPeer.qps[q.destQPN]
	if r == nil || r.destQPN != q.qpn {
		return
	}
	if r.ePSN == q.maxSentPSN { // every request arrived: the ACK was lost
		e.cnt.AckTimeoutAckLost++
		return
	}
	switch {
	case !r.receiver.NakOutstanding():
		// Nothing after the expected PSN arrived to draw a NAK: the tail of
		// the message, its last packet with it, was lost.
		e.cnt.AckTimeoutLastLost++
	case q.nakBackTo == r.ePSN+1:
		// The requester heard the NAK and went back: the resent packet was
		// lost again.
		e.cnt.AckTimeoutLostTwice++
	default:
		e.cnt.AckTimeoutNakLost++
	}
}
