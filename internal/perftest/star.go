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
// run the transport of both directions. A stateless server takes no work
// requests of its own (they would travel as WQEPs, not built), so only
// the tests in which the server is passive run: write_bw, read_bw and
// read_lat.

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
	case WriteBW, ReadBW, ReadLat:
	case WriteLat:
		return errors.New("perftest: --star: write_lat needs the server to WRITE back, and a stateless server's own work requests travel as WQEPs, not built (docs/star.md); write_bw, read_bw and read_lat run")
	case AtomicBW:
		return errors.New("perftest: --star: atomics are refused on StaR QPs: a stateless server cannot execute them exactly once (docs/star.md)")
	default:
		return fmt.Errorf("perftest: --star: %v needs the server's receive queue, which travels as WQEPs, not built (docs/star.md); write_bw, read_bw and read_lat run", c.Test)
	}
	if c.Bidirectional {
		return errors.New("perftest: --star: a stateless server posts nothing of its own, so -b (bidirectional) cannot run")
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
