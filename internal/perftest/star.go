package perftest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// This file is StaR's stateless mode in the benchmarks (Config.Star;
// docs/star.md): the server's QPs are stateless StaR servers, whose NIC
// keeps no per-connection state, and the client's are StaR clients, which
// run the transport of both directions. The server's RECVs and SENDs go to
// its driver, which pushes them to the client as WQEPs; its own WRITEs and
// READs are not built. So write_bw, read_bw, read_lat, send_bw, send_lat
// and rpc_lat run, and write_lat (the server WRITEs back) does not.

// StarSchemes lists the schemes a StaR client QP can run: those that
// place out of order, since a stateless server answers every packet on
// its own, in no order (recovery.Scheme.ReorderWindow not 0).
func StarSchemes() []string {
	var out []string
	for _, name := range recovery.Names() {
		if s, err := recovery.New(name, recovery.Params{}); err == nil && s.ReorderWindow() > 0 {
			out = append(out, name)
		}
	}
	return out
}

// CheckStar refuses what a StaR run cannot do (Config.Star): the tests
// that need the server's own work requests, and -b.
func (c *Config) CheckStar() error {
	if !c.Star {
		return nil
	}
	switch c.Test {
	case WriteBW, ReadBW, ReadLat, SendBW, SendLat, RPCLat:
	case WriteLat:
		return errors.New("perftest: --star: write_lat needs the server to WRITE back, and a stateless server's own WRITEs are not built (its driver pushes only SENDs and RECVs as WQEPs; docs/star.md); write_bw, read_bw, read_lat, send_bw, send_lat and rpc_lat run")
	case AtomicBW:
		return errors.New("perftest: --star: atomics are refused on StaR QPs: a stateless server cannot execute them exactly once (docs/star.md)")
	default:
		return fmt.Errorf("perftest: --star: %v does not run on StaR QPs (docs/star.md); write_bw, read_bw, read_lat, send_bw, send_lat and rpc_lat run", c.Test)
	}
	if c.Bidirectional {
		// write_bw -b needs the server's own WRITEs (not built); send_bw -b
		// would let the client's pulls of the server's SENDs (internal READs
		// in its send queue) take the slots its own SENDs were posted into.
		return errors.New("perftest: --star: -b (bidirectional) does not run on StaR QPs: the server's own WRITEs and READs are not built, and a client pulls the server's SENDs through its own send queue (docs/star.md)")
	}
	return nil
}

// starRole is the StaR role of this side's QPs.
func (s *session) starRole() verbs.StarRole {
	switch {
	case !s.cfg.Star:
		return verbs.StarNone
	case s.role == Server:
		return verbs.StarServer
	}
	return verbs.StarClient
}

// starOffered narrows this side's scheme list to those a StaR client can
// run. With none given, both sides offer every such scheme, the NIC's
// default first if it is one, so that a client's choice always pairs; the
// server's QPs run the agreed scheme too, though a stateless server uses
// none.
func (s *session) starOffered(list []string) ([]string, error) {
	star := StarSchemes()
	if len(s.cfg.Schemes) == 0 {
		list = star
		if d := s.dev.Scheme; slices.Contains(star, d) {
			list = append([]string{d}, slices.DeleteFunc(slices.Clone(star), func(n string) bool { return n == d })...)
		}
		if len(s.dev.Schemes) > 0 {
			list = slices.DeleteFunc(list, func(n string) bool { return !slices.Contains(s.dev.Schemes, n) })
		}
	} else {
		list = slices.DeleteFunc(slices.Clone(list), func(n string) bool { return !slices.Contains(star, n) })
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("perftest: --star: StaR client QPs need a scheme that places out of order (%s), and this side offers %v", strings.Join(star, ", "), s.cfg.Schemes)
	}
	return list, nil
}

// checkStarDevice fails a StaR server run early on a NIC that does not
// serve StaR packets.
func (s *session) checkStarDevice() error {
	if s.starRole() != verbs.StarServer {
		return nil
	}
	dev, err := s.dev.Ctx.QueryDevice()
	if err != nil {
		return fmt.Errorf("perftest: query device: %w", err)
	}
	if !dev.StarServer {
		return fmt.Errorf("perftest: --star server: the NIC %s does not serve StaR packets: run its daemon with softnic run --star-server", dev.Name)
	}
	return nil
}

// starTable puts the server's memory table in this side's endpoints (the
// same for every QP: the QPs share one protection domain).
func (s *session) starTable() error {
	if s.starRole() != verbs.StarServer || len(s.qps) == 0 {
		return nil
	}
	t, err := s.qps[0].StarTable()
	if err != nil {
		return fmt.Errorf("perftest: the StaR server's memory table: %w", err)
	}
	for i := range s.local {
		s.local[i].StarTable = t
	}
	return nil
}

// agreeStar checks the two sides' roles right after the exchange, before
// any QP moves.
func (s *session) agreeStar(remote []cm.Endpoint) error {
	if err := cm.AgreeStar(s.local[0].Star, remote[0].Star); err != nil {
		return fmt.Errorf("perftest: %w (run both sides with --star, the server with --star server, the client with --star client)", err)
	}
	return nil
}
