package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// A transport is what one QP runs: chosen when the QP is made
// (QPInitAttr.Star) and fixed for its life. The engine is the NIC: it
// checks every frame in one place (receive in engine.go) and hands the
// ones addressed to the QP to its transport, lets the transport send when
// the QP is on the ready list, and passes it the verbs. What a transport
// needs of the NIC it calls on the Engine: the context cache, the timer
// wheel, building and sending frames, completions, memory, counters
// (nic.go, memory.go).
//
// Four transports exist: RC (rc.go and the stages it is made of:
// requester.go, responder.go, completer.go), StaR's client (starclient.go:
// RC's requester with StaR's request packets and a shadow of its
// server's work queue) and StaR's server driver (stardriver.go: host
// software that pushes the server's work requests to the client, with no
// NIC context at all) and Unreliable Datagram (ud.go: one packet per
// message through an address handle, nothing acknowledged; chosen by
// QPInitAttr.Type).
type transport interface {
	// receive takes a packet for the QP that passed the NIC's checks:
	// parse, ICRC, P_Key, QP number, addresses. The transport checks its
	// opcode class and the QP's state itself.
	receive(pkt *bth.Packet)
	// misaddressed tells the transport that a packet for its QP failed
	// the address check and was dropped.
	misaddressed(op bth.Opcode)
	// marked tells the transport that a packet for its QP came with
	// congestion experienced (ECN CE), before it is received: the
	// notification point may answer with a CNP (docs/cc.md).
	marked()
	// cnp takes a CNP from the QP's peer and reports whether the QP's
	// congestion control reacted to it (the reaction point).
	cnp() (handled bool)
	// serve sends up to budget packets and reports whether the QP has
	// more to send.
	serve(budget int) (sent int, more bool)
	// postSend and postRecv queue work requests (ibv_post_send,
	// ibv_post_recv) once the engine has checked the QP and its state.
	postSend(wrs []qp.SendWR) (int, error)
	postRecv(wrs []qp.RecvWR) (int, error)
	// enter does what entering state to (from from) means for the
	// transport (Engine.setState has changed q.state already).
	enter(from, to qp.State)
	// setScheme gives the QP a loss-recovery scheme (create, and
	// SetQPScheme in RESET or INIT).
	setScheme(s recovery.Scheme) error
	// setCC gives the QP a congestion control (create), and
	// congestionControl names it.
	setCC(a cc.Algorithm)
	congestionControl() string
	// depths are the work requests the QP holds, per queue
	// (Engine.QueueDepths).
	depths() (send, recv int)
	// memoryChanged tells the transport that region m of its protection
	// domain was registered (or deregistered).
	memoryChanged(m *MR, registered bool)
	// destroy stops the transport's timers and gives back what it holds
	// (Engine.DestroyQP).
	destroy()
}
