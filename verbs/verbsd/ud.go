package verbsd

import (
	"fmt"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// Address handles (UD, protocol version 6). A client names an AH by a
// handle of its connection in create_ah and destroy_ah; its send work
// requests carry the engine's number for it (qp.SendWR.AH), which the
// engine checks against the sending QP's PD, as it checks an lkey: a
// client reaches only AHs of its own PDs.

type ahObj struct {
	h  uint32
	pd *pdObj
	ah *dataplane.AH
}

// createAH makes an AH in the client's PD. A zero destination MAC is
// resolved from the engine's neighbours (the embedded fabric's hosts; a
// daemon on a real port has none, and its clients resolve the MAC from
// the kernel's neighbours first), or the AH is refused.
func (s *Server) createAH(c *client, a proto.CreateAHArgs) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := c.pds[a.PD]
	if pd == nil {
		return nil, reply{}, badHandle("PD", a.PD)
	}
	if err := s.count(len(c.ahs), s.lim.AHs, "address handles", "max-ahs"); err != nil {
		return nil, reply{}, err
	}
	av := dataplane.AddressVector{DGID: a.DGID, DMAC: a.DMAC, TrafficClass: a.TrafficClass, HopLimit: a.HopLimit,
		FlowLabel: a.FlowLabel, SGIDIndex: a.SGIDIndex}
	if av.DMAC == ([6]byte{}) && av.DGID.IsValid() {
		mac, ok := s.e.Neighbor(av.DGID)
		if !ok {
			return nil, reply{}, fmt.Errorf("%w: %v", dataplane.ErrNoNeighbor, av.DGID)
		}
		av.DMAC = mac
	}
	ah, err := s.e.CreateAH(pd.id, av)
	if err != nil {
		return nil, reply{}, err
	}
	if c.ahs == nil {
		c.ahs = map[uint32]*ahObj{}
	}
	o := &ahObj{h: c.handle(), pd: pd, ah: ah}
	c.ahs[o.h] = o
	return proto.CreateAHResult{Handle: o.h, AH: ah.Handle(), DMAC: av.DMAC}, reply{}, nil
}

func (s *Server) destroyAH(c *client, h uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := c.ahs[h]
	if o == nil {
		return badHandle("AH", h)
	}
	if err := s.e.DestroyAH(o.ah); err != nil {
		return err
	}
	delete(c.ahs, h)
	return nil
}

// dropAHs destroys c's AHs (Server.mu held): a client's teardown, after
// its QPs, before its PDs.
func (s *Server) dropAHs(c *client) {
	for h, o := range c.ahs {
		if err := s.e.DestroyAH(o.ah); err != nil {
			c.log.Warn("destroy AH", "ah", h, "err", err)
		}
		delete(c.ahs, h)
	}
}
