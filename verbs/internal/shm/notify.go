package shm

import (
	"sync/atomic"

	"github.com/softnic/softnic/qp"
)

// Notify is a CQ's completion-event state (ibv_req_notify_cq), two words
// that the CQ's consumer and its producer share: in the CQ file of a
// daemon context (CQLayout.Notify), in the CQ itself on an embedded one.
//
// Arm is written by the consumer (Request) and cleared by the producer
// when it fires (Trigger):
//
//	bit 0      armed: the next qualifying completion fires one event
//	bit 1      solicited only: only a solicited or unsuccessful completion qualifies
//	bits 2-31  arm sequence, counted up by every Request
//
// The sequence makes every Request a new value, so that the producer's
// CompareAndSwap from the value it judged can never consume an arm the
// consumer made after that judgement (with other flags). Events counts
// the events fired; the consumer compares it with the count it has
// taken to learn which CQs of a channel fired.
//
// Ordering: the producer publishes completions, then reads Arm; the
// consumer writes Arm, then polls. With sequentially consistent atomics
// on both sides, a completion published around the arm is either seen by
// the consumer's poll or fires the event: arm, then poll again, and
// sleep only if that poll was empty.
type Notify struct {
	Arm    *atomic.Uint32
	Events *atomic.Uint32
}

// Arm word bits.
const (
	ArmArmed     = 1 << 0
	ArmSolicited = 1 << 1
	armSeqStep   = 1 << 2
)

// Request arms the CQ for one event (consumer). A CQ already armed stays
// armed; asking for any completion widens an arm for solicited ones, as
// ibverbs does, and asking for solicited ones does not narrow an arm for
// any.
func (n Notify) Request(solicitedOnly bool) {
	for {
		w := n.Arm.Load()
		nw := (w&^(ArmArmed|ArmSolicited) + armSeqStep) | ArmArmed
		if solicitedOnly && (w&ArmArmed == 0 || w&ArmSolicited != 0) {
			nw |= ArmSolicited
		}
		if n.Arm.CompareAndSwap(w, nw) {
			return
		}
	}
}

// Armed reports whether an event is requested, and for solicited
// completions only.
func (n Notify) Armed() (armed, solicitedOnly bool) {
	w := n.Arm.Load()
	return w&ArmArmed != 0, w&ArmSolicited != 0
}

// Trigger is called by the producer after it published completions;
// solicited says whether one of them qualifies for a solicited-only arm
// (a receive completion of a solicited message, or an error). It
// disarms the CQ and counts an event if the arm asked for these
// completions, and reports whether it did: the caller then signals the
// channel. An unarmed CQ costs one atomic load.
func (n Notify) Trigger(solicited bool) bool {
	for {
		w := n.Arm.Load()
		if w&ArmArmed == 0 || w&ArmSolicited != 0 && !solicited {
			return false
		}
		if n.Arm.CompareAndSwap(w, w&^(ArmArmed|ArmSolicited)) {
			n.Events.Add(1)
			return true
		}
	}
}

// Disarm clears an arm (the producer, when a CQ goes away).
func (n Notify) Disarm() {
	for {
		w := n.Arm.Load()
		if w&ArmArmed == 0 || n.Arm.CompareAndSwap(w, w&^(ArmArmed|ArmSolicited)) {
			return
		}
	}
}

// Solicited reports whether wc qualifies for a solicited-only arm: a
// receive completion of a message sent with the solicited-event bit, or
// any unsuccessful completion (ibv_req_notify_cq(3)).
func Solicited(wc *qp.WC) bool {
	return wc.Status != qp.WCSuccess || wc.Flags&qp.WCSolicited != 0
}
