package dataplane

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/qp"
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

// ConnParams are what a connection exchange agrees on (perftest's
// defaults where it has them). Connect and package verbs/cm's ConnectQP
// both fill zero fields with WithDefaults.
type ConnParams struct {
	MTU             qp.MTU // default 1024
	PSNA, PSNB      qp.PSN // initial send PSNs of A and B
	Timeout         uint8  // default 14 (67 ms, perftest)
	RetryCnt        uint8  // default 7
	RNRRetry        uint8  // default 7
	MinRNRTimer     uint8  // default 12 (0.64 ms)
	MaxRdAtomic     uint8  // default MaxRdAtomic (16); larger values are clamped to it
	Access          qp.Access
	RetryCntSet     bool // use RetryCnt even when 0
	RNRRetrySet     bool // use RNRRetry even when 0
	TimeoutDisabled bool // Timeout 0: no local ACK timeout
}

// WithDefaults returns p with its zero fields set as perftest's
// ctx_connect sets them: path MTU 1024, local ACK timeout 14 (4.096 µs *
// 2^14 = 67 ms) unless TimeoutDisabled, retry count 7 and RNR retry 7
// (infinite) unless RetryCntSet or RNRRetrySet, minimum RNR NAK timer 12
// (0.64 ms), MaxRdAtomic outstanding RDMA READs and atomics each way, and
// every access right. A MaxRdAtomic above the device's (MaxRdAtomic) is
// clamped to it; other out-of-range values are left for ModifyQP to
// refuse.
func (p ConnParams) WithDefaults() ConnParams {
	if p.MTU == 0 {
		p.MTU = qp.MTU1024
	}
	if p.Timeout == 0 && !p.TimeoutDisabled {
		p.Timeout = 14
	}
	if p.RetryCnt == 0 && !p.RetryCntSet {
		p.RetryCnt = 7
	}
	if p.RNRRetry == 0 && !p.RNRRetrySet {
		p.RNRRetry = 7
	}
	if p.MinRNRTimer == 0 {
		p.MinRNRTimer = 12
	}
	if p.MaxRdAtomic == 0 || p.MaxRdAtomic > MaxRdAtomic {
		p.MaxRdAtomic = MaxRdAtomic
	}
	if p.Access == 0 {
		p.Access = qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	}
	return p
}

// Connect moves qa (on engine ea) and qb (on eb) from RESET to RTS
// pointing at each other: what the connection exchange of perftest does.
func Connect(ea *Engine, qa *QP, eb *Engine, qb *QP, p ConnParams) error {
	p = p.WithDefaults()
	for _, side := range []struct {
		e, peer *Engine
		q, pq   *QP
		sq, rq  qp.PSN
	}{{ea, eb, qa, qb, p.PSNA, p.PSNB}, {eb, ea, qb, qa, p.PSNB, p.PSNA}} {
		steps := []struct {
			a    QPAttr
			mask qp.AttrMask
		}{
			{QPAttr{State: qp.Init, AccessFlags: p.Access, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
			{QPAttr{State: qp.RTR, AV: AddressVector{DGID: side.peer.Addr(), DMAC: side.peer.MAC(), HopLimit: 64},
				PathMTU: p.MTU, DestQPN: side.pq.QPN(), RQPSN: side.rq, MaxDestRdAtomic: p.MaxRdAtomic, MinRNRTimer: p.MinRNRTimer},
				qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		}
		for _, st := range steps {
			if err := side.e.ModifyQP(side.q, &st.a, st.mask); err != nil {
				return fmt.Errorf("connect: %w", err)
			}
		}
	}
	for _, side := range []struct {
		e  *Engine
		q  *QP
		sq qp.PSN
	}{{ea, qa, p.PSNA}, {eb, qb, p.PSNB}} {
		a := QPAttr{State: qp.RTS, SQPSN: side.sq, Timeout: p.Timeout, RetryCnt: p.RetryCnt, RNRRetry: p.RNRRetry, MaxRdAtomic: p.MaxRdAtomic}
		if err := side.e.ModifyQP(side.q, &a, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	return nil
}
