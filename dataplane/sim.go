package dataplane

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/recovery"
)

// Sim joins two engines, A and B, by the in-memory fabric and runs them on
// a fake clock in one goroutine: a discrete-event simulation in which time
// jumps straight to the next frame delivery or timer. It is the embedded
// mode's wire and the harness of every protocol test: exact, fast and,
// for a given seed, the same on every run.
type Sim struct {
	Clock  *fabric.FakeClock
	Fabric *fabric.Fabric
	A, B   *Engine
	group  Group
	bell   atomic.Pointer[doorbell.Doorbell] // RunRealtime's, while it runs
}

// SimConfig configures a Sim. Zero links are lossless with no delay.
type SimConfig struct {
	Seed       uint64
	AtoB, BtoA fabric.LinkConfig
	// SchemeA and SchemeB name the engines' loss recovery ("": gbn);
	// SchemeParams are both engines' scheme parameters (see Config).
	SchemeA, SchemeB string
	SchemeParams     recovery.Params
	// MaxFrame is the largest frame (default: room for a 4096-byte MTU).
	MaxFrame int
	IPv6     bool
	// SRAMBytes and FetchPenalty configure both NICs' context cache (see
	// Config).
	SRAMBytes    int
	FetchPenalty time.Duration
	RTOBackoff   bool    // both NICs (see Config)
	RTO          RTOMode // both NICs (see Config)
	// LinkRate and LinkBurst pace both NICs' transmission (see Config);
	// the fabric's links have their own rate (LinkConfig.RateBps).
	LinkRate  uint64
	LinkBurst int
	// LinkDelay holds each NIC's received frames (see Config), on top of
	// the fabric's own delay.
	LinkDelay      time.Duration
	LinkDelaySlots int
	// Netem impairs each NIC's received frames (see Config); B's stage
	// draws from the seed after A's, so the two decide independently.
	Netem impair.Spec
}

// Addresses of the simulated hosts, from the benchmarking range.
var (
	SimAddrA   = netip.MustParseAddr("198.18.0.1")
	SimAddrB   = netip.MustParseAddr("198.18.1.1")
	SimAddr6A  = netip.MustParseAddr("2001:db8:a::1")
	SimAddr6B  = netip.MustParseAddr("2001:db8:b::1")
	SimMACA    = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0a}
	SimMACB    = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0b}
	simMaxFrme = 4096 + 128
)

// NewSim builds the two engines and the fabric between them.
func NewSim(cfg SimConfig) (*Sim, error) {
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = simMaxFrme
	}
	clock := &fabric.FakeClock{}
	f := fabric.New(clock, cfg.Seed, cfg.AtoB, cfg.BtoA, cfg.MaxFrame)
	addrA, addrB := SimAddrA, SimAddrB
	netemB := cfg.Netem
	netemB.Seed++
	if cfg.IPv6 {
		addrA, addrB = SimAddr6A, SimAddr6B
	}
	a, err := NewEngine(Config{MAC: SimMACA, Addr: addrA, Scheme: cfg.SchemeA, SchemeParams: cfg.SchemeParams, SRAMBytes: cfg.SRAMBytes, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: cfg.Netem}, f.A())
	if err != nil {
		return nil, err
	}
	b, err := NewEngine(Config{MAC: SimMACB, Addr: addrB, Scheme: cfg.SchemeB, SchemeParams: cfg.SchemeParams, SRAMBytes: cfg.SRAMBytes, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: netemB}, f.B())
	if err != nil {
		return nil, err
	}
	// Each port's frame deliveries are events besides the engines' own.
	group := Group{Engines: []*Engine{a, b}, Events: []func() (time.Duration, bool){f.A().NextDelivery, f.B().NextDelivery}}
	return &Sim{Clock: clock, Fabric: f, A: a, B: b, group: group}, nil
}

// Now is the simulated time.
func (s *Sim) Now() time.Duration { return s.Clock.Now() }

// Step polls both engines until neither has anything to do at the
// current time, then moves the clock to the next event (Group.Step). It
// returns false when nothing at all is pending (no frame in flight, no
// timer armed).
func (s *Sim) Step() bool { return s.group.Step(s.Clock) }

// RunUntil steps until cond holds, returning false if the simulation went
// idle or simulated time passed limit first.
func (s *Sim) RunUntil(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntil(s.Clock, cond, limit)
}

// RunFor advances simulated time by d, processing every event on the way.
func (s *Sim) RunFor(d time.Duration) { s.group.RunFor(s.Clock, d) }
