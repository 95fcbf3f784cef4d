package sim

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
)

// Net is the simulator for N engines: one per host port of a
// fabric.Network (switches with queues, ECN marking, PFC and ECMP), on
// one fake clock, stepped as Sim is by dataplane.Group, whose events are
// the engines' deadlines and the network's next event. It needs nothing
// of package dataplane that Sim does not: a Group holds any number of
// engines, and each engine has a port of its own.
type Net struct {
	Clock   *fabric.FakeClock
	Network *fabric.Network
	Engines []*dataplane.Engine // Engines[i] on Network.Hosts()[i]
	group   dataplane.Group
}

// NetConfig configures a Net.
type NetConfig struct {
	// Network builds the network on the simulator's clock, e.g.
	// func(c fabric.Clock) (*fabric.Network, error) { return fabric.FatTree(c, 6, cfg) }.
	Network func(fabric.Clock) (*fabric.Network, error)
	// Engine is every engine's configuration, but MAC and Addr, which are
	// host i's (fabric.HostMAC, and fabric.HostAddr or, with IPv6,
	// HostAddr6), and Netem's seed, which is Engine.Netem.Seed+i so that
	// the engines decide independently (as Sim's A and B).
	Engine dataplane.Config
	IPv6   bool
}

// NewNet builds the network and one engine per host.
func NewNet(cfg NetConfig) (*Net, error) {
	clock := &fabric.FakeClock{}
	n, err := cfg.Network(clock)
	if err != nil {
		return nil, err
	}
	s := &Net{Clock: clock, Network: n}
	for i, h := range n.Hosts() {
		ec := cfg.Engine
		ec.MAC = fabric.HostMAC(i)
		ec.Addr = fabric.HostAddr(i)
		if cfg.IPv6 {
			ec.Addr = fabric.HostAddr6(i)
		}
		ec.Netem.Seed += uint64(i)
		e, err := dataplane.NewEngine(ec, h)
		if err != nil {
			return nil, fmt.Errorf("sim: host %d: %w", i, err)
		}
		s.Engines = append(s.Engines, e)
	}
	s.group = dataplane.Group{Engines: s.Engines, Events: []func() (time.Duration, bool){n.NextEvent}}
	return s, nil
}

// Now is the simulated time.
func (s *Net) Now() time.Duration { return s.Clock.Now() }

// Step polls the engines until none has anything to do at the current
// time, then moves the clock to the next event (Sim.Step).
func (s *Net) Step() bool { return s.group.Step(s.Clock) }

// RunUntil steps until cond holds (Sim.RunUntil).
func (s *Net) RunUntil(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntil(s.Clock, cond, limit)
}

// RunUntilReact is RunUntil with cond checked as soon as the engines are
// idle (Sim.RunUntilReact).
func (s *Net) RunUntilReact(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntilReact(s.Clock, cond, limit)
}

// StepTo is Step that never moves the clock past t (Sim.StepTo).
func (s *Net) StepTo(t time.Duration) bool { return s.group.StepTo(s.Clock, t) }

// RunFor advances simulated time by d (Sim.RunFor).
func (s *Net) RunFor(d time.Duration) { s.group.RunFor(s.Clock, d) }
