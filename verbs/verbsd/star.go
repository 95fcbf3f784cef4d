package verbsd

import (
	"fmt"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
)

// starTable answers star_table: the memory table of one of the client's
// StaR server QPs, what the connection exchange sends to its StaR client
// (StaR §3.2; docs/star.md).
func (s *Server) starTable(c *client, h uint32) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := c.qps[h]
	if q == nil {
		return nil, reply{}, badHandle("QP", h)
	}
	if r := q.eq.Star(); r != dataplane.StarServer {
		return nil, reply{}, fmt.Errorf("verbsd: QP %#x is a StaR %v QP: only a StaR server QP has a memory table to send", q.eq.QPN(), r)
	}
	t := s.e.StarTable(q.eq)
	if len(t) > proto.MaxStarRegions {
		return nil, reply{}, fmt.Errorf("verbsd: QP %#x: the memory table has %d regions, at most %d travel", q.eq.QPN(), len(t), proto.MaxStarRegions)
	}
	return proto.StarTableResult{Regions: protoconv.FromStarTable(t)}, reply{}, nil
}

// setStarTable installs the memory table a StaR client QP's server sent.
// The client's connection manager makes this call with what it received
// in the exchange (package verbs/cm); the engine refuses it for any QP but
// a StaR client, and a table entry no server could have granted.
func (s *Server) setStarTable(c *client, a proto.SetStarTableArgs) error {
	if len(a.Regions) > proto.MaxStarRegions {
		return fmt.Errorf("%w: a memory table of %d regions, at most %d", proto.ErrProtocol, len(a.Regions), proto.MaxStarRegions)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := c.qps[a.QP]
	if q == nil {
		return badHandle("QP", a.QP)
	}
	return s.e.SetStarTable(q.eq, protoconv.ToStarTable(a.Regions))
}
