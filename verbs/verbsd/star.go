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
	if q.eq.Star() == dataplane.StarNone {
		return nil, reply{}, fmt.Errorf("verbsd: QP %#x is not a StaR QP: it has no memory table", q.eq.QPN())
	}
	t := s.e.StarTable(q.eq)
	if len(t) > proto.MaxStarRegions {
		return nil, reply{}, fmt.Errorf("verbsd: QP %#x: the memory table has %d regions, at most %d travel", q.eq.QPN(), len(t), proto.MaxStarRegions)
	}
	return proto.StarTableResult{Regions: protoconv.FromStarTable(t)}, reply{}, nil
}
