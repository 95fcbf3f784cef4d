// Package sim is the simulator: two engines of package dataplane, A and
// B, joined by the in-memory fabric of package dataplane/fabric and run on
// a fake clock in one goroutine, a discrete-event simulation in which time
// jumps straight to the next frame delivery or timer. It is the embedded
// mode's wire and the harness of every protocol test: exact, fast and,
// for a given seed, the same on every run.
//
// The simulator moves time with dataplane.Group, the engines' own poll
// loop and event step: Step, RunUntil and RunFor are the group's in
// simulated time, RunRealtime is its poll loop (Engine.Run's) on the wall
// clock. Package dataplane's own tests cannot import this package (it
// imports dataplane), so they build the same pair in a small harness of
// their own (dataplane/sim_test.go) on the same Group.
package sim

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/recovery"
)

// Sim is two engines, A and B, on the fabric and its fake clock.
type Sim struct {
	Clock  *fabric.FakeClock
	Fabric *fabric.Fabric
	A, B   *dataplane.Engine
	group  dataplane.Group
	bell   atomic.Pointer[doorbell.Doorbell] // RunRealtime's, while it runs
}

// Config configures a Sim. Zero links are lossless with no delay.
type Config struct {
	Seed       uint64
	AtoB, BtoA fabric.LinkConfig
	// SchemeA and SchemeB name the engines' loss recovery ("": gbn);
	// SchemeParams are both engines' scheme parameters (see
	// dataplane.Config).
	SchemeA, SchemeB string
	SchemeParams     recovery.Params
	// MaxFrame is the largest frame (default: room for a 4096-byte MTU).
	MaxFrame int
	IPv6     bool
	// SRAMBytes and FetchPenalty configure both NICs' context cache (see
	// dataplane.Config).
	SRAMBytes    int
	FetchPenalty time.Duration
	// SRAMBytesB, when not 0, is B's budget alone (A keeps SRAMBytes):
	// StaR's setup budgets the server and leaves the clients, which stand
	// for many machines, unlimited.
	SRAMBytesB int
	// StarServerB makes B serve StaR's stateless packets (see
	// dataplane.Config.StarServer).
	StarServerB bool
	RTOBackoff  bool              // both NICs (see dataplane.Config)
	RTO         dataplane.RTOMode // both NICs (see dataplane.Config)
	// TxBurst is how many packets a QP sends before the next QP's turn,
	// both NICs (0: dataplane's default, 16; see dataplane.Config).
	TxBurst int
	// LinkRate and LinkBurst pace both NICs' transmission (see
	// dataplane.Config); the fabric's links have their own rate
	// (LinkConfig.RateBps).
	LinkRate  uint64
	LinkBurst int
	// ServiceRate gives both NICs' receive pipelines a service time (see
	// dataplane.Config; 0: none).
	ServiceRate uint64
	// RTTOffChip leaves both NICs' round-trip estimates out of their
	// contexts' on-chip size (see dataplane.Config).
	RTTOffChip bool
	// LinkDelay holds each NIC's received frames (see dataplane.Config),
	// on top of the fabric's own delay.
	LinkDelay      time.Duration
	LinkDelaySlots int
	// Netem impairs each NIC's received frames (see dataplane.Config); B's
	// stage draws from the seed after A's, so the two decide independently.
	Netem impair.Spec
	// CC is both NICs' congestion control (dataplane.Config.CC; "" none).
	CC string
	// MaxUnackedPSNs is both engines' bound on a QP's unacknowledged PSNs
	// (dataplane.Config.MaxUnackedPSNs; 0: none).
	MaxUnackedPSNs int
}

// Addresses of the simulated hosts, from the benchmarking range.
var (
	AddrA  = netip.MustParseAddr("198.18.0.1")
	AddrB  = netip.MustParseAddr("198.18.1.1")
	Addr6A = netip.MustParseAddr("2001:db8:a::1")
	Addr6B = netip.MustParseAddr("2001:db8:b::1")
	MACA   = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0a}
	MACB   = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0b}
)

const maxFrame = 4096 + 128

// New builds the two engines and the fabric between them.
func New(cfg Config) (*Sim, error) {
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = maxFrame
	}
	clock := &fabric.FakeClock{}
	f := fabric.New(clock, cfg.Seed, cfg.AtoB, cfg.BtoA, cfg.MaxFrame)
	addrA, addrB := AddrA, AddrB
	netemB := cfg.Netem
	netemB.Seed++
	if cfg.IPv6 {
		addrA, addrB = Addr6A, Addr6B
	}
	a, err := dataplane.NewEngine(dataplane.Config{MAC: MACA, Addr: addrA, Scheme: cfg.SchemeA, SchemeParams: cfg.SchemeParams, SRAMBytes: cfg.SRAMBytes, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO, TxBurst: cfg.TxBurst,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: cfg.Netem, CC: cfg.CC, MaxUnackedPSNs: cfg.MaxUnackedPSNs, ServiceRate: cfg.ServiceRate, RTTOffChip: cfg.RTTOffChip}, f.A())
	if err != nil {
		return nil, err
	}
	sramB := cfg.SRAMBytes
	if cfg.SRAMBytesB != 0 {
		sramB = cfg.SRAMBytesB
	}
	b, err := dataplane.NewEngine(dataplane.Config{MAC: MACB, Addr: addrB, Scheme: cfg.SchemeB, SchemeParams: cfg.SchemeParams, SRAMBytes: sramB, StarServer: cfg.StarServerB, FetchPenalty: cfg.FetchPenalty, RTOBackoff: cfg.RTOBackoff, RTO: cfg.RTO, TxBurst: cfg.TxBurst,
		LinkRate: cfg.LinkRate, LinkBurst: cfg.LinkBurst, LinkDelay: cfg.LinkDelay, LinkDelaySlots: cfg.LinkDelaySlots, Netem: netemB, CC: cfg.CC, MaxUnackedPSNs: cfg.MaxUnackedPSNs, ServiceRate: cfg.ServiceRate, RTTOffChip: cfg.RTTOffChip}, f.B())
	if err != nil {
		return nil, err
	}
	// Each host knows the other's MAC, as a kernel's neighbour table
	// would (what an address handle resolves; ud.go).
	a.AddNeighbor(b.Addr(), b.MAC())
	b.AddNeighbor(a.Addr(), a.MAC())
	// Each port's frame deliveries are events besides the engines' own.
	group := dataplane.Group{
		Engines: []*dataplane.Engine{a, b},
		Events:  []func() (time.Duration, bool){f.A().NextDelivery, f.B().NextDelivery},
	}
	return &Sim{Clock: clock, Fabric: f, A: a, B: b, group: group}, nil
}

// Now is the simulated time.
func (s *Sim) Now() time.Duration { return s.Clock.Now() }

// Step polls both engines until neither has anything to do at the
// current time, then moves the clock to the next event (dataplane's
// Group.Step). It returns false when nothing at all is pending (no frame
// in flight, no timer armed).
func (s *Sim) Step() bool { return s.group.Step(s.Clock) }

// RunUntil steps until cond holds, returning false if the simulation went
// idle or simulated time passed limit first.
func (s *Sim) RunUntil(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntil(s.Clock, cond, limit)
}

// RunUntilReact is RunUntil with cond checked as soon as both engines are
// idle, before the clock moves to the next event (dataplane's
// Group.RunUntilReact).
func (s *Sim) RunUntilReact(cond func() bool, limit time.Duration) bool {
	return s.group.RunUntilReact(s.Clock, cond, limit)
}

// StepTo is Step that never moves the clock past t (dataplane's
// Group.StepTo): false, with the clock at t, when nothing is due before.
func (s *Sim) StepTo(t time.Duration) bool { return s.group.StepTo(s.Clock, t) }

// RunFor advances simulated time by d, processing every event on the way.
func (s *Sim) RunFor(d time.Duration) { s.group.RunFor(s.Clock, d) }

// RunRealtime runs the Sim against the wall clock instead of jumping from
// event to event: the fabric's delays and rates then take real time, and
// other goroutines (a verbs server, a benchmark client) can post work
// while it runs. It is the engines' own poll loop (dataplane's Group.Run,
// which Engine.Run is for one engine), so all of rc applies as it does to
// a daemon's engine; each round first moves the simulated clock to the
// wall clock's time since the call (plus the simulated time it started
// at). The loop blocks in ppoll on an eventfd that Wake writes, with a
// nanosecond timeout: a Go timer shorter than a millisecond would round
// up to about one. It returns when ctx ends.
func (s *Sim) RunRealtime(ctx context.Context, rc dataplane.RunConfig) {
	bell, err := doorbell.New()
	if err != nil {
		panic(fmt.Sprintf("sim: RunRealtime: %v", err)) // eventfd(2) failing means no descriptors left
	}
	s.bell.Store(bell)
	defer func() {
		s.bell.Store(nil)
		bell.Close()
	}()
	start, base := time.Now(), s.Clock.Now()
	now := func() time.Duration {
		t := base + time.Since(start)
		s.Clock.Set(t)
		return t
	}
	s.group.Run(ctx, bell, now, rc)
}

// Wake wakes RunRealtime's loop. Safe from any goroutine.
func (s *Sim) Wake() {
	if b := s.bell.Load(); b != nil {
		b.Wake()
	}
}
