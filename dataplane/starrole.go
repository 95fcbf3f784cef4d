package dataplane

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/qp"
)

// A QP's part in StaR's stateless mode (docs/star.md "Roles"), chosen when
// it is made (QPInitAttr.Star): an ordinary RC QP, the stateless server
// (stardriver.go; its NIC's data path is star.go) or the client that
// keeps both directions' state (starclient.go).

// StarRole is a QP's part in StaR's stateless mode.
type StarRole uint8

var starRoleNames = [...]string{StarNone: "none", StarServer: "server", StarClient: "client"}

// check refuses a role that is none of the three.
func (r StarRole) check() error {
	if r > StarClient {
		return fmt.Errorf("dataplane: unknown StaR role %d", uint8(r))
	}
	return nil
}

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

const (
	StarNone   StarRole = iota // an ordinary RC QP
	StarServer                 // the stateless side: its context is never on chip
	StarClient                 // the stateful side: the transport of both directions
)

var (
	ErrStarServerOff = errors.New("dataplane: a StaR server QP needs a NIC with StarServer on (softnic run --star-server)")
	ErrStarScheme    = errors.New("dataplane: a StaR client QP needs a scheme that places out of order (irn, melo, fasr, srnic): one RA or SDP answers each packet, in any order")
	ErrStarServerWR  = errors.New("dataplane: a StaR server QP's driver pushes SENDs and RECVs only: its own WRITEs, READs and atomics are not built (docs/star.md)")
	ErrStarAtomic    = errors.New("dataplane: atomics are refused on a StaR client QP: a stateless server cannot execute them exactly once (docs/star.md)")
	ErrStarOpcode    = errors.New("dataplane: a write with immediate on a StaR client QP is not built (docs/star.md)")
	ErrStarPeer      = errors.New("dataplane: a StaR server QP pairs only with a StaR client QP")
)
