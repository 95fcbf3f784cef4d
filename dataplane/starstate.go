package dataplane

import (
	"fmt"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// The state StaR's stateless mode keeps per QP (docs/star.md): its types
// only, which the QP context (qpctx.go) holds; what acts on them is in
// starqp.go (the client's data path and security table, a server's driver,
// a client's shadow of its server's work queue).

// StarRole is a QP's part in StaR's stateless mode.
type StarRole uint8

const (
	StarNone   StarRole = iota // an ordinary RC QP
	StarServer                 // the stateless side: its context is never on chip
	StarClient                 // the stateful side: the transport of both directions
)

var starRoleNames = [...]string{StarNone: "none", StarServer: "server", StarClient: "client"}

// String returns "none", "server" or "client".
func (r StarRole) String() string {
	if int(r) < len(starRoleNames) {
		return starRoleNames[r]
	}
	return fmt.Sprintf("StarRole(%d)", uint8(r))
}

// StarRegion is one entry of a StaR server's memory table: what a client
// may name of the server's memory (StaR §3.2). The server installs it;
// the client's NIC only reads it.
type StarRegion struct {
	RKey   uint32
	VA     uint64
	Length uint64
	Access qp.Access // remote write, remote read
}

// starDriver is a server QP's host-software state.
type starDriver struct {
	seq uint32      // the next WQEP's driver sequence number
	ws  []driverWQE // WQEPs pushed, oldest first, until acknowledged and completed
	eas []uint32    // CQEPs to acknowledge
	// The application's work requests among ws not retired (completion
	// delivered) yet, per queue: at most the QP's queue capacity each
	// (ErrQueueFull past it), so that a daemon's client cannot grow ws
	// without bound (QueueDepths reports them, and the daemon releases
	// ring slots by them). Retired entries stay in ws only behind an
	// unacknowledged WQEP, within the window (at most maxEarlyWQEPs).
	sends, recvs int
	// heard is whether anything came from the client: until then the
	// driver sends only its oldest WQEP, a probe, as the client's QP may
	// not be ready for it (docs/star.md "Connection start").
	heard bool
}

// driverWQE is one work request the driver pushed.
type driverWQE struct {
	f         bth.WQEPETHFields
	table     bool // an MR_REG or MR_DEREG: done once acknowledged, no completion
	recv      bool
	signaled  bool
	sent      bool // on the wire since the last timeout
	acked     bool // the client has it (EA or CQEP)
	done      bool // its CQEP came: wc holds its completion
	delivered bool // wc is in the CQ (or needed none)
	wc        qp.WC
}

// sendStarPull marks the internal READ that pulls a server SEND into a
// client RECV (never a flag an application can post: checkStarWR).
const sendStarPull qp.SendFlags = 1 << 30

// sendStarSignaled marks a pull whose server SEND is signaled: its CQEP
// is sent when it succeeds, not only when it fails.
const sendStarSignaled qp.SendFlags = 1 << 29

// starShadow is a client QP's copy of its server's work queue and the
// state of its WQEP/CQEP exchange.
type starShadow struct {
	next       uint32              // the driver sequence number expected next
	early      []bth.WQEPETHFields // WQEPs past a gap, kept (sorted) until it fills
	tableDone  bool                // the server's memory table as of the connection has come (WQEPTableDone)
	recvs      []bth.WQEPETHFields // server RECVs no SEND has taken yet
	sends      []bth.WQEPETHFields // server SENDs not pulled yet
	recvsTaken int                 // client RECVs that pulls in flight hold, from the RQ's head
	eas        []uint32            // WQEPs past a gap to acknowledge, one EA each
	// eaSent is the driver sequence number past the WQEPs the driver has
	// been told of: by a cumulative EA, or by a CQEP, which implies every
	// WQEP up to the one it completes (docs/star.md "Acknowledgements").
	// WQEPs from eaSent to next are acknowledged late: by the next CQEP,
	// or by a cumulative EA when eaTimer fires, eaNow is set, or half
	// the driver's window waits.
	eaSent uint32
	eaNow  bool
	cqeps  []bth.CQEPETHFields // completions to push, until acknowledged
	sent   int                 // cqeps[:sent] are on the wire
	// hello is set when a StaR packet came before the QP reached RTR and
	// was dropped (the driver's probe): at RTR an EA for nothing yet
	// tells the driver that the client listens now and what it lacks.
	// answered is set when the first WQEP has been acknowledged at once,
	// so that the driver hears the client without waiting for a CQEP
	// (docs/star.md "Connection start").
	hello, answered bool
}

// maxEarlyWQEPs is how far past a gap in the driver's sequence a client
// keeps WQEPs; one further is dropped, and the driver resends it.
const maxEarlyWQEPs = 64
