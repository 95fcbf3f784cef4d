package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/internal/depcheck"
	"github.com/softnic/softnic/recovery"
)

// This package's tests cannot import package dataplane/sim, which imports
// dataplane: Sim, SimConfig and NewSim here are its simulator for them.
// NewSim repeats sim.New's fan-out of the configuration to the two engines
// on the fabric (package sim's TestHarness checks that SimConfig has
// sim.Config's fields); time moves by the same Group.Step as in package
// sim. The wall-clock mode is tested in package sim.

// Sim is sim.Sim.
type Sim struct {
	Clock  *fabric.FakeClock
	Fabric *fabric.Fabric
	A, B   *Engine
	group  Group
}

// SimConfig is sim.Config.
type SimConfig struct {
	Seed             uint64
	AtoB, BtoA       fabric.LinkConfig
	SchemeA, SchemeB string
	SchemeParams     recovery.Params
	IPv6             bool
	SRAMBytes        int
	FetchPenalty     time.Duration
	SRAMBytesB       int
	StarServerB      bool
	RTOBackoff       bool
	RTO              RTOMode
	TxBurst          int
	LinkRate         uint64
	LinkBurst        int
	LinkDelay        time.Duration
	LinkDelaySlots   int
	Netem            impair.Spec
	CC               string // both engines' congestion control (Config.CC)
	MaxUnackedPSNs   int    // both engines' Config.MaxUnackedPSNs
	ServiceRate      uint64 // both engines' Config.ServiceRate
	ServiceRateB     uint64 // when not 0, B's alone (A keeps ServiceRate)
	RTTOffChip       bool   // both engines' Config.RTTOffChip
}

// sim.AddrA, sim.AddrB, sim.Addr6A, sim.Addr6B, sim.MACA, sim.MACB.
var (
	SimAddrA  = netip.MustParseAddr("198.18.0.1")
	SimAddrB  = netip.MustParseAddr("198.18.1.1")
	SimAddr6A = netip.MustParseAddr("2001:db8:a::1")
	SimAddr6B = netip.MustParseAddr("2001:db8:b::1")
	SimMACA   = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0a}
	SimMACB   = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0b}
)

// NewSim is sim.New.
func NewSim(cfg SimConfig) (*Sim, error) {
	clock := &fabric.FakeClock{}
	f := fabric.New(clock, cfg.Seed, cfg.AtoB, cfg.BtoA, 4096+128)
	addrA, addrB := SimAddrA, SimAddrB
	netemB := cfg.Netem
	netemB.Seed++
	if cfg.IPv6 {
		addrA, addrB = SimAddr6A, SimAddr6B
	}
	a, err := NewEngine(Config{MAC: SimMACA, Addr: addrA, Scheme: cfg.SchemeA, SchemeParams: cfg.SchemeParams, SRAMBytes: cfg.SRAMBytes, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO, TxBurst: cfg.TxBurst,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: cfg.Netem, CC: cfg.CC, MaxUnackedPSNs: cfg.MaxUnackedPSNs, ServiceRate: cfg.ServiceRate, RTTOffChip: cfg.RTTOffChip}, f.A())
	if err != nil {
		return nil, err
	}
	sramB := cfg.SRAMBytes
	if cfg.SRAMBytesB != 0 {
		sramB = cfg.SRAMBytesB
	}
	serviceB := cfg.ServiceRate
	if cfg.ServiceRateB != 0 {
		serviceB = cfg.ServiceRateB
	}
	b, err := NewEngine(Config{MAC: SimMACB, Addr: addrB, Scheme: cfg.SchemeB, SchemeParams: cfg.SchemeParams, SRAMBytes: sramB, StarServer: cfg.StarServerB, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO, TxBurst: cfg.TxBurst,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: netemB, CC: cfg.CC, MaxUnackedPSNs: cfg.MaxUnackedPSNs, ServiceRate: serviceB, RTTOffChip: cfg.RTTOffChip}, f.B())
	if err != nil {
		return nil, err
	}
	// Each host knows the other's MAC, as a kernel's neighbour table
	// would (what an address handle resolves; ud.go).
	a.AddNeighbor(b.Addr(), b.MAC())
	b.AddNeighbor(a.Addr(), a.MAC())
	group := Group{Engines: []*Engine{a, b}, Events: []func() (time.Duration, bool){f.A().NextDelivery, f.B().NextDelivery}}
	return &Sim{Clock: clock, Fabric: f, A: a, B: b, group: group}, nil
}

func (s *Sim) Now() time.Duration     { return s.Clock.Now() }
func (s *Sim) Step() bool             { return s.group.Step(s.Clock) }
func (s *Sim) RunFor(d time.Duration) { s.group.RunFor(s.Clock, d) }

// RunTo processes every event up to t and stops the clock at t, where
// RunFor goes on to the first event past its end.
func (s *Sim) RunTo(t time.Duration) {
	for s.group.StepTo(s.Clock, t) {
	}
}
func (s *Sim) RunUntil(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntil(s.Clock, cond, limit)
}
func (s *Sim) RunUntilReact(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntilReact(s.Clock, cond, limit)
}

// TestNoFabric: the engine does not link the in-memory fabric (or the
// simulator): they are in packages dataplane/fabric and dataplane/sim.
func TestNoFabric(t *testing.T) {
	depcheck.Forbid(t, func(p string) bool {
		return p == "github.com/softnic/softnic/dataplane/fabric" || p == "github.com/softnic/softnic/dataplane/sim"
	})
}
