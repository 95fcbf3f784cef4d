package verbs

import (
	"fmt"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
)

// StarRole is a QP's role in StaR's stateless mode (QPInitAttr.Star;
// docs/star.md). ibverbs has no such attribute: like QPInitAttr.Scheme,
// it is a softnic extension.
type StarRole = dataplane.StarRole

// The StaR roles.
const (
	StarNone   = dataplane.StarNone   // an ordinary RC QP
	StarServer = dataplane.StarServer // the stateless side: its NIC keeps no state for it
	StarClient = dataplane.StarClient // the side that keeps the transport state of both
)

// StarRegion is one entry of a StaR server's memory table: a key, a range
// and the remote access the server grants to its clients (StaR §3.2).
type StarRegion = dataplane.StarRegion

// Star returns the QP's StaR role (QPInitAttr.Star).
func (q *QP) Star() StarRole { return q.star }

// StarTable returns the memory table of a StaR server QP: every region
// of its protection domain with remote write or remote read. The
// connection manager sends it to the QP's StaR client (package cm), whose
// NIC lets out only StaR packets that stay inside it. Only a server QP
// has one.
func (q *QP) StarTable() ([]StarRegion, error) {
	if q.dead {
		return nil, ErrClosed
	}
	if q.star != StarServer {
		return nil, fmt.Errorf("verbs: QP %#x is a StaR %v QP: only a StaR server QP has a memory table to send", q.qpn, q.star)
	}
	return q.pd.ctx.b.starTable(q)
}

// SetStarTable installs on a StaR client QP the memory table its server
// sent in the connection exchange, replacing the one it had: the client's
// NIC then lets out only RDPs and GDs inside it (StaR §3.2). It is the
// connection manager's call (package cm calls it between RTR and RTS with
// what the server's side sent): the table stands for the server's word
// on what its clients may touch, and an application must never fill it
// itself. Only a client QP takes one; at most 1024 regions.
func (q *QP) SetStarTable(t []StarRegion) error {
	if q.dead {
		return ErrClosed
	}
	if q.star != StarClient {
		return fmt.Errorf("verbs: QP %#x is a StaR %v QP: a memory table goes only to a StaR client QP", q.qpn, q.star)
	}
	if len(t) > proto.MaxStarRegions {
		return fmt.Errorf("verbs: a memory table of %d regions, at most %d", len(t), proto.MaxStarRegions)
	}
	return q.pd.ctx.b.setStarTable(q, t)
}

func (b *embedded) starTable(q *QP) ([]StarRegion, error) { return b.e.StarTable(q.q), nil }
func (b *embedded) setStarTable(q *QP, t []StarRegion) error {
	return b.e.SetStarTable(q.q, t)
}

func (r *remote) starTable(q *QP) ([]StarRegion, error) {
	var res proto.StarTableResult
	if _, err := r.call(proto.OpStarTable, proto.Handle{Handle: q.h}, nil, &res); err != nil {
		return nil, err
	}
	if len(res.Regions) > proto.MaxStarRegions {
		return nil, fmt.Errorf("%w: a memory table of %d regions, at most %d", proto.ErrProtocol, len(res.Regions), proto.MaxStarRegions)
	}
	return protoconv.ToStarTable(res.Regions), nil
}

func (r *remote) setStarTable(q *QP, t []StarRegion) error {
	_, err := r.call(proto.OpSetStarTable, proto.SetStarTableArgs{QP: q.h, Regions: protoconv.FromStarTable(t)}, nil, nil)
	return err
}
