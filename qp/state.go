package qp

import "fmt"

// State is the IB QP state (IBA §10.3.1, enum ibv_qp_state).
type State uint8

const (
	Reset State = iota
	Init
	RTR // ready to receive
	RTS // ready to send
	SQD // send queue drained
	SQE // send queue error
	Err
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// CanReceive reports whether the responder accepts requests in s
// (IBA §10.3.1: RTR and later, except the error states).
func (s State) CanReceive() bool { return s == RTR || s == RTS || s == SQD || s == SQE }

// CanSend reports whether the requester may transmit in s.
func (s State) CanSend() bool { return s == RTS }

// transitions lists the legal modify-QP moves for RC (ibv_modify_qp(3),
// IBA Figure 124). Any state may go to RESET or ERR.
var transitions = map[State][]State{
	Reset: {Init},
	Init:  {Init, RTR},
	RTR:   {RTS},
	RTS:   {RTS, SQD},
	SQD:   {SQD, RTS},
	SQE:   {RTS},
	Err:   {},
}

// CanTransition reports whether a modify from `from` to `to` is legal.
func CanTransition(from, to State) bool {
	if to == Reset || to == Err {
		return from <= Err
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// AttrMask names the attributes a modify carries (enum ibv_qp_attr_mask).
type AttrMask uint32

const (
	AttrState AttrMask = 1 << iota
	AttrCurState
	AttrEnSQDAsyncNotify
	AttrAccessFlags
	AttrPKeyIndex
	AttrPort
	AttrQKey
	AttrAV
	AttrPathMTU
	AttrTimeout
	AttrRetryCnt
	AttrRNRRetry
	AttrRQPSN
	AttrMaxQPRdAtomic
	AttrAltPath
	AttrMinRNRTimer
	AttrSQPSN
	AttrMaxDestRdAtomic
	AttrPathMigState
	AttrCap
	AttrDestQPN
)

// RequiredAttrs returns the attributes an RC modify from → to must carry
// (ibv_modify_qp(3), "Required attributes" table). The state itself is
// always required.
func RequiredAttrs(from, to State) AttrMask {
	switch {
	case from == Reset && to == Init:
		return AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags
	case from == Init && to == RTR:
		return AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN |
			AttrMaxDestRdAtomic | AttrMinRNRTimer
	case from == RTR && to == RTS:
		return AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt |
			AttrRNRRetry | AttrMaxQPRdAtomic
	}
	return AttrState
}

// AllowedAttrs returns what a modify from → to may carry besides the
// required ones (same table, "Optional attributes").
func AllowedAttrs(from, to State) AttrMask {
	common := AttrState | AttrCurState
	switch {
	case from == Reset && to == Init, from == Init && to == Init:
		return common | AttrPKeyIndex | AttrPort | AttrAccessFlags
	case from == Init && to == RTR:
		return RequiredAttrs(from, to) | AttrPKeyIndex | AttrAccessFlags | AttrAltPath
	case from == RTR && to == RTS:
		return RequiredAttrs(from, to) | AttrCurState | AttrAccessFlags | AttrMinRNRTimer | AttrAltPath | AttrPathMigState
	case from == RTS && to == RTS, from == SQE && to == RTS:
		return common | AttrAccessFlags | AttrMinRNRTimer | AttrAltPath | AttrPathMigState
	case from == SQD && (to == SQD || to == RTS):
		return common | AttrAccessFlags | AttrMinRNRTimer | AttrAltPath | AttrPathMigState |
			AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | AttrPathMTU
	case to == SQD:
		return common | AttrEnSQDAsyncNotify
	}
	return common
}
