// Package sweep runs softnic's parameter sweeps on the embedded fabric in
// simulated time and reads and writes their CSV files: the
// QP-scalability sweep of StaR (Fig. 1/5) and FaSR (Fig. 7b, 8b) here.
// It draws nothing: internal/sweepplot does, linked by softnic-sweep
// alone.
package sweep

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// QPConfig is one point of the QP sweep.
type QPConfig struct {
	Scheme  string
	QPs     int
	Size    int     // bytes per WRITE: 8 (StaR's stress test) or 8192 (bulk)
	Loss    float64 // probability, both directions
	SRAM    int     // on-chip bytes per NIC (0: unlimited)
	Penalty time.Duration
	Link    fabric.LinkConfig // rate and delay; Loss is set from Loss
	Warmup  time.Duration     // simulated
	Measure time.Duration     // simulated
	// MaxMessages, when not 0, also ends the measurement window once that
	// many messages completed in it, and the warm-up once half as many
	// completed in it: a bound on the CPU a point costs. Meant for
	// lossless points, whose rate is steady after a few rounds of the QPs;
	// a lossy point's rate is set by ACK timeouts of milliseconds and needs
	// the whole windows.
	MaxMessages uint64
	Seed        uint64
	// Params are the schemes' knobs (zero: defaults).
	Params recovery.Params
	// ServerSRAMOnly budgets the server (B) alone with SRAM and leaves the
	// clients (A) unlimited: StaR's setup (§4), where the clients stand
	// for many machines. Otherwise both NICs get SRAM.
	ServerSRAMOnly bool
	// Star makes every connection a StaR one (docs/star.md): A's QPs
	// clients running Scheme (a selective one), B's stateless servers.
	Star bool
	// Depth is how many WRITEs each QP keeps outstanding (0: 1, StaR's
	// stress test; perftest's write_bw pipelines its tx depth).
	Depth int
	// MTU is the path MTU (0: 4096).
	MTU qp.MTU
	// RTOBackoff doubles a QP's retransmission timeout after each timeout
	// without progress (dataplane.Config.RTOBackoff): with each scheme's
	// own timeouts, what keeps a QP that waits milliseconds for its turn
	// in a thrashing NIC from spending its retries.
	RTOBackoff bool
	// RTO chooses fixed timeouts (the scheme's, the default) or timeouts
	// adapted to each QP's measured round trip (dataplane.RTOAdaptive).
	RTO dataplane.RTOMode
	// Timeout is the QPs' local ACK timeout code (0: 12, 16.8 ms).
	Timeout uint8
	// TxBurst is how many packets a QP sends before the next QP's turn
	// (0: the engine's 16): 1 is a NIC scheduler that arbitrates among
	// its QPs packet by packet.
	TxBurst int
	// ServiceRate gives both NICs' receive pipelines a per-frame service
	// time at this rate (dataplane.Config.ServiceRate; 0: none).
	ServiceRate uint64
	// NICRate paces what each NIC transmits at this rate, as its MAC
	// would (dataplane.Config.LinkRate; 0: as fast as the fabric's link
	// takes frames, which queues them in the link up to its bound).
	NICRate uint64
	// RTTOffChip leaves the adaptive timeouts' round-trip estimate out of
	// each context's on-chip size (dataplane.Config.RTTOffChip).
	RTTOffChip bool
}

// On-chip budgets for QP contexts and recovery state (QPConfig.SRAM, the
// daemon's --sram):
const (
	// StaRBudget is qp.DefaultCacheBudget: 300 base contexts of 256 B,
	// StaR's RNIC (CX4-like).
	StaRBudget = qp.DefaultCacheBudget
	// FaSRBudget is the FaSR paper's (§V-A): 1.4 MB of its 3.2 MB SRAM
	// holds QP contexts.
	FaSRBudget = 1_400_000
)

// Budgets names the presets of `softnic-sweep qps -budget`.
var Budgets = map[string]int{"star": StaRBudget, "fasr": FaSRBudget}

// SRBytes is the on-chip loss-recovery state n QPs of scheme s need: each
// QP's sender and receiver halves (OnChipBytes, as the scheme reports them
// for fresh halves) plus the scheme's shared pools, charged once. It is
// what the QP sweeps plot against the QP count (FaSR Fig. 8b); it asks the
// scheme, so every registered scheme is charged by its own accounting.
func SRBytes(s recovery.Scheme, n int) int {
	return n*(s.NewSender().OnChipBytes()+s.NewReceiver().OnChipBytes()) + s.SharedOnChipBytes()
}

func durationNS(ns float64) time.Duration { return time.Duration(ns) }

// DefaultQPLink is StaR's simulation (§4): 100 Gb/s and a 12 µs base RTT.
var DefaultQPLink = fabric.LinkConfig{RateBps: 100e9, Delay: 6 * time.Microsecond, QueueFrames: 1024}

// QPResult is what one point measured.
type QPResult struct {
	QPConfig
	Messages    uint64  // completed in the measurement window
	MsgRate     float64 // messages per second (simulated time)
	GoodputGbps float64
	Misses      uint64 // context-cache misses at the server (B) in the window
	HitRate     float64
	PeakQPs     int // most contexts resident at once (B)
	SRBytes     int // on-chip SR bytes needed: per-QP state of every QP plus shared pools
	Retransmits uint64
	Timeouts    uint64 // the writer's (A) retransmission timeouts in the window (local_ack_timeout_err)
	// ServerOnChipPeak is the most context bytes the server (B) held on
	// chip at once (qpc_resident_bytes_peak).
	ServerOnChipPeak int
	// FaSR's fast and slow paths in the measurement window (Fig. 9b): the
	// receiver's (B) and the sender's (A) operations with and without a
	// bitmap, and the recoveries that fell back to go-back-N (B).
	RxFast, RxSlow, TxFast, TxSlow, Fallbacks uint64
	// ServerPools are B's shared SR pools over the whole run (their
	// peaks: FaSR Fig. 10).
	ServerPools []recovery.PoolStats
	Wall        time.Duration
}

// RunQPs runs the StaR stress test: c.QPs connections from NIC A to NIC B,
// each with one outstanding WRITE of c.Size bytes, reposted as soon as it
// completes; the aggregate completion rate is measured after a warm-up.
func RunQPs(c QPConfig) (QPResult, error) {
	wallStart := time.Now()
	link := c.Link
	link.Loss = c.Loss
	penalty := c.Penalty
	if penalty == 0 {
		penalty = -1
	}
	depth, mtu, timeout := max(c.Depth, 1), c.MTU, c.Timeout
	if mtu == 0 {
		mtu = qp.MTU4096
	}
	if timeout == 0 {
		timeout = 12
	}
	cfg := sim.Config{Seed: c.Seed, AtoB: link, BtoA: link, SchemeA: c.Scheme, SchemeB: c.Scheme, SchemeParams: c.Params, SRAMBytes: c.SRAM, FetchPenalty: penalty, StarServerB: c.Star, RTOBackoff: c.RTOBackoff, RTO: c.RTO, TxBurst: c.TxBurst, ServiceRate: c.ServiceRate, LinkRate: c.NICRate, RTTOffChip: c.RTTOffChip}
	if c.ServerSRAMOnly {
		cfg.SRAMBytes, cfg.SRAMBytesB = 0, c.SRAM
	}
	sim, err := sim.New(cfg)
	if err != nil {
		return QPResult{}, err
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	roleA, roleB := dataplane.StarNone, dataplane.StarNone
	if c.Star {
		roleA, roleB = dataplane.StarClient, dataplane.StarServer
	}
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	mrA, err := sim.A.RegMR(pdA, make([]byte, c.Size), 0, access)
	if err != nil {
		return QPResult{}, err
	}
	mrB, err := sim.B.RegMR(pdB, make([]byte, c.Size*min(c.QPs, 64)), 0, access)
	if err != nil {
		return QPResult{}, err
	}
	cqA, _ := sim.A.CreateCQ(2*depth*c.QPs+64, nil)
	cqB, _ := sim.B.CreateCQ(64, nil)
	qps := make([]*dataplane.QP, c.QPs)
	wrs := make([][]qp.SendWR, c.QPs)
	for i := range qps {
		qa, err := sim.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: depth + 1, MaxRecvWR: 1, Star: roleA})
		if err != nil {
			return QPResult{}, err
		}
		qb, err := sim.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 1, MaxRecvWR: 1, Star: roleB})
		if err != nil {
			return QPResult{}, err
		}
		// ACK timeout 12 (16.8 ms), the default: past the cache's knee a QP waits for
		// every other QP's context fetches before its turn (5000 QPs x a
		// few µs of stall), and a shorter timeout would fire spuriously
		// until retries ran out; perftest's 14 (67 ms) would leave a 1%-loss
		// run measuring little but timeouts.
		if err := dataplane.Connect(sim.A, qa, sim.B, qb, dataplane.ConnParams{MTU: mtu, Timeout: timeout}); err != nil {
			return QPResult{}, err
		}
		w := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RKey: mrB.RKey,
			RemoteAddr: mrB.Addr + uint64((i%64)*c.Size)}
		w.SGL[0] = qp.SGE{Addr: mrA.Addr, Length: uint32(c.Size), LKey: mrA.LKey}
		qps[i], wrs[i] = qa, []qp.SendWR{w}
	}
	for range depth {
		for i := range qps {
			if _, err := sim.A.PostSend(qps[i], wrs[i]); err != nil {
				return QPResult{}, err
			}
		}
	}
	l := &writeLoop{e: sim.A, cq: cqA, qps: qps, wrs: wrs, what: "QP"}
	// run runs one window. The simulation goes idle whenever every posted
	// WRITE has completed (always, with one QP): RunUntil then returns,
	// after its last look at cond has reposted them, and the window goes
	// on until its end; only a simulation that stays idle ends it early.
	run := func(d time.Duration, max uint64) {
		end, stop := sim.Now()+d, l.done+max
		cond := func() bool { return l.repost() || sim.Now() >= end || (max > 0 && l.done >= stop) }
		for !cond() {
			before, at := l.done, sim.Now()
			if sim.RunUntil(cond, d+time.Second) || l.done == before && sim.Now() == at {
				return
			}
		}
	}
	run(c.Warmup, c.MaxMessages/2)
	startDone, startCache, startA, startB := l.done, sim.B.CacheStats(), sim.A.Counters(), sim.B.Counters()
	startRetx := startA.Retransmits
	t0 := sim.Now()
	run(c.Measure, c.MaxMessages)
	if l.err != nil {
		return QPResult{}, l.err
	}
	el := (sim.Now() - t0).Seconds()
	cs := sim.B.CacheStats()
	r := QPResult{QPConfig: c, Messages: l.done - startDone, Wall: time.Since(wallStart)}
	r.MsgRate = float64(r.Messages) / el
	r.GoodputGbps = r.MsgRate * float64(c.Size) * 8 / 1e9
	r.Misses = cs.Misses - startCache.Misses
	if acc := r.Misses + cs.Hits - startCache.Hits; acc > 0 {
		r.HitRate = 1 - float64(r.Misses)/float64(acc)
	}
	r.PeakQPs = cs.PeakResident
	r.ServerOnChipPeak = cs.PeakResidentBytes
	r.SRBytes = SRBytes(sim.A.Scheme(), c.QPs)
	ca, cb := sim.A.Counters(), sim.B.Counters()
	r.Retransmits = ca.Retransmits - startRetx
	r.Timeouts = ca.LocalAckTimeout - startA.LocalAckTimeout
	// The schemes' counters (fasr's paths, the pools' fallbacks) over
	// the measurement window.
	moved := func(end, start dataplane.Counters, name string) uint64 {
		return end.SchemeCounter(name) - start.SchemeCounter(name)
	}
	r.RxFast, r.RxSlow = moved(cb, startB, "sr_rx_fast_path"), moved(cb, startB, "sr_rx_slow_path")
	r.TxFast, r.TxSlow = moved(ca, startA, "sr_tx_fast_path"), moved(ca, startA, "sr_tx_slow_path")
	r.Fallbacks = moved(cb, startB, "sr_pool_fallbacks")
	r.ServerPools = cb.Pools
	return r, nil
}

// writeLoop keeps WRITEs going on the QPs of one engine: each completion
// on cq is counted in done and reposts the work requests of its QP
// (wrs[WRID]).
type writeLoop struct {
	e    *dataplane.Engine
	cq   *dataplane.CQ
	qps  []*dataplane.QP
	wrs  [][]qp.SendWR
	what string // names a QP in an error: "QP", "melo QP"
	wcs  [256]qp.WC
	done uint64
	err  error
}

// repost polls cq until it is empty, reposting as it goes; true at the
// first error (in err).
func (l *writeLoop) repost() bool {
	for {
		n, err := l.e.PollCQ(l.cq, l.wcs[:])
		if err != nil {
			l.err = err
			return true
		}
		if n == 0 {
			return false
		}
		for _, wc := range l.wcs[:n] {
			if wc.Status != qp.WCSuccess {
				l.err = fmt.Errorf("sweep: %s %d: %v", l.what, wc.WRID, wc.Status)
				return true
			}
			l.done++
			if _, err := l.e.PostSend(l.qps[wc.WRID], l.wrs[wc.WRID]); err != nil {
				l.err = err
				return true
			}
		}
	}
}
