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

// StarTable returns a StaR QP's memory table: a server QP's is every
// region of its protection domain with remote write or remote read; a
// client QP's is what its server's driver sent so far, in MR_REG and
// MR_DEREG WQEPs (StaR §3.2), which its NIC lets out StaR packets only
// inside. Nothing in verbs writes a table: only the server's driver does,
// in band.
func (q *QP) StarTable() ([]StarRegion, error) {
	if q.dead {
		return nil, ErrClosed
	}
	if q.star == StarNone {
		return nil, fmt.Errorf("verbs: QP %#x is not a StaR QP: it has no memory table", q.qpn)
	}
	return q.pd.ctx.b.starTable(q)
}

func (b *embedded) starTable(q *QP) ([]StarRegion, error) { return b.e.StarTable(q.q), nil }

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
