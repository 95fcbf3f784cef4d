package sweep

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// MELO's simulations (§4): 40 Gb/s server links, 1 KB MTU, a 1 Kb bits
// pool.
const (
	MeloLinkBps  = 40e9
	MeloPoolBits = 1024
)

// MeloFig6bWindow is the in-flight cap of Fig. 6b's connections, shared
// among them (§4.2.2): what DCQCN's line rate and the 200 µs RTT put in
// flight, 40 Gb/s x 200 µs = 1 MB, in 1 KB packets. The paper's single
// connection peaks at 96.9% of its 1024-bit pool at every loss rate, so
// its flow never held more than that span; with this cap one connection's
// chain spans at most 123 of the pool's 128 blocks.
const MeloFig6bWindow = 976 // MeloLinkBps/8 x 200 µs / 1024 B = 976.6

// MeloKnobs set MELO's pool to MeloPoolBits (recovery.Params.Knobs).
func MeloKnobs() recovery.KnobValues {
	return recovery.KnobValues{"melo.pool_bits": strconv.Itoa(MeloPoolBits)}
}

// MeloPoolConfig is one point of MELO's Fig. 6b: Conns connections from
// one server to another, each writing Size-byte messages two at a time
// (a stream at full speed), over a 200 µs RTT path lossy in both
// directions.
type MeloPoolConfig struct {
	Conns   int
	Loss    float64
	RTT     time.Duration
	Size    int
	Window  int // packets in flight per connection (the BDP cap)
	Warmup  time.Duration
	Measure time.Duration
	Seed    uint64
	// Ring, if above 0, bounds what the A-to-B link holds to its one-way
	// pipe (in 1 KB frames) plus Ring frames queued: the sender is held
	// to the line rate with at most a transmit ring's worth of standing
	// queue, as DCQCN paces one flow at line rate (melo-fig6a). 0: 4096
	// frames, more than the windows put in flight.
	Ring int
}

// MeloPoolResult is what one point measured: the receivers' bits pool at
// its fullest, and what found it empty.
type MeloPoolResult struct {
	MeloPoolConfig
	GoodputGbps float64
	PoolSlots   int // blocks of 8 bits in the receiver's pool
	PoolPeak    int // most blocks in use at once (receiver)
	TxPoolPeak  int // most blocks in use at once (sender)
	Exhausted   uint64
	Fallbacks   uint64 // recoveries that fell back to go-back-N (both NICs)
	PoolDrops   uint64 // packets dropped for want of bits (receiver)
	Retransmits uint64
	Wall        time.Duration
	// ROBBytes and ROBPackets: the out-of-order payload B copied from its
	// reorder buffer to the application in the measured time
	// (rob_delivered_bytes, rob_delivered; MELO Fig. 6a's trace).
	ROBBytes, ROBPackets uint64
}

// Usage is the receiver's peak pool usage, a fraction.
func (r MeloPoolResult) Usage() float64 {
	if r.PoolSlots == 0 {
		return 0
	}
	return float64(r.PoolPeak) / float64(r.PoolSlots)
}

// RunMeloPool measures one point in simulated time.
func RunMeloPool(c MeloPoolConfig) (MeloPoolResult, error) {
	wall := time.Now()
	link := fabric.LinkConfig{RateBps: MeloLinkBps, Delay: c.RTT / 2, Loss: c.Loss, QueueFrames: 4096}
	atob := link
	if c.Ring > 0 {
		atob.QueueFrames = int(math.Ceil(link.Delay.Seconds()*MeloLinkBps/8/1024)) + c.Ring
	}
	params := recovery.Params{BDPPackets: c.Window, Knobs: MeloKnobs(), RTOLow: c.RTT + c.RTT/2, RTOHigh: 3 * c.RTT}
	s, err := sim.New(sim.Config{Seed: c.Seed, AtoB: atob, BtoA: link, SchemeA: recovery.MELO, SchemeB: recovery.MELO, SchemeParams: params})
	if err != nil {
		return MeloPoolResult{}, err
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := s.A.AllocPD(), s.B.AllocPD()
	mrA, err := s.A.RegMR(pdA, make([]byte, c.Size), 0, access)
	if err != nil {
		return MeloPoolResult{}, err
	}
	mrB, err := s.B.RegMR(pdB, make([]byte, c.Size), 0, access)
	if err != nil {
		return MeloPoolResult{}, err
	}
	cqA, _ := s.A.CreateCQ(4*c.Conns+64, nil)
	cqB, _ := s.B.CreateCQ(64, nil)
	qps := make([]*dataplane.QP, c.Conns)
	wrs := make([][]qp.SendWR, c.Conns)
	for i := range qps {
		qa, err := s.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 1})
		if err != nil {
			return MeloPoolResult{}, err
		}
		qb, err := s.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			return MeloPoolResult{}, err
		}
		if err := dataplane.Connect(s.A, qa, s.B, qb, dataplane.ConnParams{MTU: qp.MTU1024, Timeout: 12}); err != nil {
			return MeloPoolResult{}, err
		}
		w := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RKey: mrB.RKey, RemoteAddr: mrB.Addr}
		w.SGL[0] = qp.SGE{Addr: mrA.Addr, Length: uint32(c.Size), LKey: mrA.LKey}
		qps[i], wrs[i] = qa, []qp.SendWR{w}
	}
	for i := range qps {
		if _, err := s.A.PostSend(qps[i], []qp.SendWR{wrs[i][0], wrs[i][0]}); err != nil { // two in flight
			return MeloPoolResult{}, err
		}
	}
	l := &writeLoop{e: s.A, cq: cqA, qps: qps, wrs: wrs, what: "melo QP"}
	run := func(d time.Duration) {
		end := s.Now() + d
		cond := func() bool { return l.repost() || s.Now() >= end }
		for !cond() {
			before, at := l.done, s.Now()
			if s.RunUntil(cond, d+time.Second) || l.done == before && s.Now() == at {
				return
			}
		}
	}
	run(c.Warmup)
	d0, t0 := l.done, s.Now()
	b0 := s.B.Counters()
	run(c.Measure)
	if l.err != nil {
		return MeloPoolResult{}, l.err
	}
	r := MeloPoolResult{MeloPoolConfig: c, Wall: time.Since(wall)}
	r.GoodputGbps = float64(l.done-d0) * float64(c.Size) * 8 / (s.Now() - t0).Seconds() / 1e9
	a, b := s.A.Counters(), s.B.Counters()
	for _, p := range b.Pools {
		if p.Name == "melo_rx_bits" {
			r.PoolSlots, r.PoolPeak, r.Exhausted = p.Slots, p.Peak, p.Exhausted
		}
	}
	for _, p := range a.Pools {
		if p.Name == "melo_tx_bits" {
			r.TxPoolPeak = p.Peak
		}
	}
	r.Fallbacks = a.SchemeCounter("sr_pool_fallbacks") + b.SchemeCounter("sr_pool_fallbacks")
	r.PoolDrops = b.SchemeCounter("sr_pool_drops")
	r.Retransmits = a.Retransmits
	r.ROBBytes, r.ROBPackets = b.ROBDeliveredBytes-b0.ROBDeliveredBytes, b.ROBDelivered-b0.ROBDelivered
	return r, nil
}

// WriteMeloPoolCSV writes MELO Fig. 6b's rows.
func WriteMeloPoolCSV(w io.Writer, rs []MeloPoolResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"connections", "loss", "rtt_us", "window_pkts", "pool_bits", "pool_peak_bits", "pool_usage", "tx_pool_peak_bits",
		"pool_exhausted", "fallbacks", "pool_drops", "goodput_gbps", "retransmits"})
	for _, r := range rs {
		cw.Write([]string{strconv.Itoa(r.Conns), strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.FormatInt(r.RTT.Microseconds(), 10),
			strconv.Itoa(r.Window), strconv.Itoa(8 * r.PoolSlots), strconv.Itoa(8 * r.PoolPeak), strconv.FormatFloat(r.Usage(), 'f', 4, 64),
			strconv.Itoa(8 * r.TxPoolPeak), strconv.FormatUint(r.Exhausted, 10), strconv.FormatUint(r.Fallbacks, 10),
			strconv.FormatUint(r.PoolDrops, 10), strconv.FormatFloat(r.GoodputGbps, 'f', 3, 64), strconv.FormatUint(r.Retransmits, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveMeloPool writes <dir>/<name>.csv.
func SaveMeloPool(dir, name string, rs []MeloPoolResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteMeloPoolCSV(w, rs) })
}
