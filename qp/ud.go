package qp

import "fmt"

// Unreliable Datagram (IBA Volume 1 §9.8.4, §10.2; ibv_create_qp with
// IBV_QPT_UD): the QP types, UD's modify-QP masks and the receive side's
// 40-byte GRH area.

// QPType is enum ibv_qp_type, same values. The zero value is RC, so that
// every caller that predates QP types makes the RC QP it always made.
type QPType uint8

const (
	QPTypeRC QPType = 2 // IBV_QPT_RC
	QPTypeUD QPType = 4 // IBV_QPT_UD
)

// IsUD reports whether t is UD (the zero value and QPTypeRC are RC).
func (t QPType) IsUD() bool { return t == QPTypeUD }

func (t QPType) String() string {
	switch t {
	case 0, QPTypeRC:
		return "RC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// GRHLen is the Global Route Header area that begins every UD receive
// buffer (IBA §11.4.1.2: the first 40 bytes of the receive WQE's buffer
// hold the GRH, whether the datagram carried one or not). For RoCEv2 the
// "GRH" is the IP header: an IPv6 header fills the 40 bytes, an IPv4
// header its last 20 (rdma-core's and rxe's layout).
const GRHLen = 40

// WCGRH is IBV_WC_GRH: the first 40 bytes of the receive buffer hold the
// GRH (every UD receive completion on RoCE has it).
const WCGRH WCFlags = 1 << 0

// QKeyUseQP is the bit of a send work request's Q_Key that says "use the
// QP's own Q_Key" (IBA §10.2.5, C10-15: a Q_Key with its high-order bit
// set in a UD work request means the QP context's Q_Key).
const QKeyUseQP = 1 << 31

// RequiredAttrsUD returns the attributes a UD modify from → to must carry
// (ibv_modify_qp(3), the UD column): RESET → INIT the P_Key index, port
// and Q_Key; RTR → RTS the send PSN. A UD QP has no destination, path,
// MTU or responder resources.
func RequiredAttrsUD(from, to State) AttrMask {
	switch {
	case from == Reset && to == Init:
		return AttrState | AttrPKeyIndex | AttrPort | AttrQKey
	case from == RTR && to == RTS:
		return AttrState | AttrSQPSN
	}
	return AttrState
}

// AllowedAttrsUD returns what a UD modify from → to may carry besides
// the required ones.
func AllowedAttrsUD(from, to State) AttrMask {
	common := AttrState | AttrCurState
	switch {
	case from == Reset && to == Init, from == Init && to == Init:
		return common | AttrPKeyIndex | AttrPort | AttrQKey
	case from == Init && to == RTR:
		return common | AttrPKeyIndex | AttrQKey
	case from == RTR && to == RTS:
		return RequiredAttrsUD(from, to) | AttrCurState | AttrQKey
	case from == RTS && to == RTS, from == SQE && to == RTS, from == SQD && (to == SQD || to == RTS):
		return common | AttrQKey
	case to == SQD:
		return common | AttrEnSQDAsyncNotify
	}
	return common
}
