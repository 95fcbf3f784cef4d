package sweep

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
)

// FlowRunConfig is one run of a flow workload on a sim.Net.
type FlowRunConfig struct {
	Network func(fabric.Clock) (*fabric.Network, error)
	// PathLinks is how many links the path from host src to host dst
	// crosses (FatTreeLinks, 2 on a Star), for the flow's ideal time.
	PathLinks func(src, dst int) int
	Link      fabric.LinkParams // every link's (the ideal time assumes one rate and delay)
	Engine    dataplane.Config
	Conn      dataplane.ConnParams
	Flows     []Flow
	// Verify gives every flow a destination region of its own and checks
	// its bytes after the run (a test's: it costs a region per flow).
	// Without it the flows to one host share one region, which the WRITEs
	// overwrite; the transport's work is the same.
	Verify bool
	// Drain is how long the run may go on after the last arrival before
	// flows still open count as unfinished (0: 1 s simulated).
	Drain time.Duration
}

// FlowResult is one flow's outcome.
type FlowResult struct {
	Flow
	Done     bool
	Status   qp.WCStatus
	FCT      time.Duration // post to the sender's completion
	Ideal    time.Duration // alone at line rate on its path: FlowIdeal
	Slowdown float64       // FCT / Ideal
}

// FlowRunResult is a run's flows and totals.
type FlowRunResult struct {
	Flows  []FlowResult
	NFlows int // how many flows the run had
	// IRN's three summaries (§4.1 "Metrics") over the flows, those
	// unfinished at the end with their FCT so far (lower bounds then).
	AvgSlowdown    float64
	AvgFCT, P99FCT time.Duration
	Unfinished     int       // not completed by the last arrival + Drain
	Failed         int       // completed with an error status
	Drops, Pauses  uint64    // the switches': frames dropped, pause frames sent
	ECNMarks       uint64    // frames the switches marked CE
	DroppedBy      [5]uint64 // Drops by netsw.DropReason
	CNPs           uint64    // np_cnp_sent, summed over the hosts
	Retransmits    uint64    // retransmitted_pkts, summed
	// QueueP99Bytes is the largest, over the switches' egress ports, of
	// the port's 99th-percentile queue as arriving frames found it
	// (netsw's histogram); QueueMaxBytes the largest queue any port held.
	QueueP99Bytes, QueueMaxBytes int
	QPs                          int           // QPs created per side (the pools' sizes summed)
	SimEnd                       time.Duration // the last completion
	Wall                         time.Duration
}

// Frame sizes as the fabric serializes them (no FCS, preamble or gap,
// which its links do not charge): Ethernet, IPv4, UDP, BTH, then RETH on
// a WRITE's first packet, the payload and the ICRC; an ACK carries an
// AETH.
const (
	roceHdr      = 14 + 20 + 8 + 12
	rethLen      = 16
	icrcLen      = 4
	ackFrameLen  = roceHdr + 4 + icrcLen
	flowMTUBytes = 1024
)

// FlowIdeal is the time a WRITE of size bytes takes alone on a path of
// links links of rate bps and delay each: its packets back to back on the
// first link, the last one stored and forwarded by every switch, and the
// ACK of the last packet back over the same links; the engines take no
// time. IRN's slowdown divides by "the time it would have taken to
// traverse its path at line rate in an empty network" (§4.1), taken here
// as that round trip since FCT ends at the sender's completion.
func FlowIdeal(size, links int, bps float64, delay time.Duration) time.Duration {
	ser := func(b int) float64 { return float64(b) * 8 / bps }
	pkts := max(1, (size+flowMTUBytes-1)/flowMTUBytes)
	total := float64(size + pkts*(roceHdr+icrcLen) + rethLen)
	last := size - (pkts-1)*flowMTUBytes + roceHdr + icrcLen
	if pkts == 1 {
		last += rethLen
	}
	sec := ser(int(total)) + float64(links-1)*ser(last) + float64(links)*ser(ackFrameLen) + 2*float64(links)*delay.Seconds()
	return time.Duration(math.Ceil(sec * 1e9))
}

// FatTreeLinks is the path length between two hosts of FatTree(k): 2
// under one edge switch, 4 in one pod, 6 across pods.
func FatTreeLinks(k int) func(src, dst int) int {
	h := k / 2
	return func(s, d int) int {
		switch {
		case s/h == d/h:
			return 2
		case s/(h*h) == d/(h*h):
			return 4
		}
		return 6
	}
}

// RunFlows runs the flows: each is one signaled RDMA WRITE, posted at its
// arrival time on an idle QP of its (src, dst) pair's pool, a new QP
// connected on the spot when every QP of the pair is busy. So no flow
// ever waits behind another on a QP, as with IRN's QP per flow, and the
// QPs created are the pairs' peak concurrencies rather than one per flow
// (thousands of contexts and their regions). FCT runs from the post to
// the sender's completion, seen when the engines finish the simulated
// instant it happened at.
func RunFlows(cfg FlowRunConfig) (FlowRunResult, error) {
	wallStart := time.Now()
	s, err := sim.NewNet(sim.NetConfig{Network: cfg.Network, Engine: cfg.Engine})
	if err != nil {
		return FlowRunResult{}, err
	}
	hosts := len(s.Engines)
	if cfg.Drain == 0 {
		cfg.Drain = time.Second
	}
	// Each host's regions are as large as its largest flow out and in.
	maxOut, maxIn := make([]int, hosts), make([]int, hosts)
	for _, f := range cfg.Flows {
		if f.Src < 0 || f.Src >= hosts || f.Dst < 0 || f.Dst >= hosts || f.Src == f.Dst || f.Size <= 0 {
			return FlowRunResult{}, fmt.Errorf("sweep: bad flow %+v on %d hosts", f, hosts)
		}
		maxOut[f.Src] = max(maxOut[f.Src], f.Size)
		maxIn[f.Dst] = max(maxIn[f.Dst], f.Size)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	type host struct {
		e   *dataplane.Engine
		pd  uint32
		cq  *dataplane.CQ
		src *dataplane.MR
		dst *dataplane.MR // shared by every flow into the host (not Verify)
	}
	hs := make([]host, hosts)
	for i, e := range s.Engines {
		h := host{e: e, pd: e.AllocPD()}
		if h.cq, err = e.CreateCQ(1<<14, nil); err != nil {
			return FlowRunResult{}, err
		}
		if maxOut[i] > 0 {
			buf := make([]byte, maxOut[i])
			for j := range buf {
				buf[j] = byte(i*31 + j*7 + j>>8)
			}
			if h.src, err = e.RegMR(h.pd, buf, 0, all); err != nil {
				return FlowRunResult{}, err
			}
		}
		if !cfg.Verify && maxIn[i] > 0 {
			if h.dst, err = e.RegMR(h.pd, make([]byte, maxIn[i]), 0, all); err != nil {
				return FlowRunResult{}, err
			}
		}
		hs[i] = h
	}
	idle := make([][]*dataplane.QP, hosts*hosts)
	busy := make([]*dataplane.QP, len(cfg.Flows))
	dsts := make([]*dataplane.MR, len(cfg.Flows))
	res := FlowRunResult{Flows: make([]FlowResult, len(cfg.Flows)), NFlows: len(cfg.Flows)}
	post := func(i int) error {
		f := cfg.Flows[i]
		res.Flows[i].Flow = f
		res.Flows[i].Ideal = FlowIdeal(f.Size, cfg.PathLinks(f.Src, f.Dst), float64(cfg.Link.RateBps), cfg.Link.Delay)
		a, b := hs[f.Src], hs[f.Dst]
		pair := f.Src*hosts + f.Dst
		var q *dataplane.QP
		if n := len(idle[pair]); n > 0 {
			q, idle[pair] = idle[pair][n-1], idle[pair][:n-1]
		} else {
			var err error
			if q, err = a.e.CreateQP(a.pd, dataplane.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, MaxSendWR: 4, MaxRecvWR: 1}); err != nil {
				return err
			}
			qd, err := b.e.CreateQP(b.pd, dataplane.QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, MaxSendWR: 1, MaxRecvWR: 1})
			if err != nil {
				return err
			}
			if err := dataplane.Connect(a.e, q, b.e, qd, cfg.Conn); err != nil {
				return err
			}
			res.QPs++
		}
		busy[i] = q
		to := b.dst
		if cfg.Verify {
			var err error
			if to, err = b.e.RegMR(b.pd, make([]byte, f.Size), 0, all); err != nil {
				return err
			}
			dsts[i] = to
		}
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: to.Addr, RKey: to.RKey}
		wr.SGL[0] = qp.SGE{Addr: a.src.Addr, Length: uint32(f.Size), LKey: a.src.LKey}
		_, err := a.e.PostSend(q, []qp.SendWR{wr})
		return err
	}
	wcs := make([]qp.WC, 64)
	open, next := 0, 0
	lastArrive := time.Duration(0)
	if n := len(cfg.Flows); n > 0 {
		lastArrive = cfg.Flows[n-1].Arrive
	}
	limit := lastArrive + cfg.Drain
	for {
		now := s.Now()
		for next < len(cfg.Flows) && cfg.Flows[next].Arrive <= now {
			if err := post(next); err != nil {
				return res, fmt.Errorf("sweep: flow %d: %w", next, err)
			}
			next++
			open++
		}
		if next == len(cfg.Flows) && open == 0 {
			break
		}
		if now > limit {
			break
		}
		to := limit + 1
		if next < len(cfg.Flows) {
			to = cfg.Flows[next].Arrive
		}
		s.StepTo(to) // drains the engines at now, then moves the clock
		for hi := range hs {
			for {
				n, err := hs[hi].e.PollCQ(hs[hi].cq, wcs)
				if err != nil {
					return res, err
				}
				for _, wc := range wcs[:n] {
					i := int(wc.WRID)
					fr := &res.Flows[i]
					q := busy[i]
					busy[i], fr.Status = nil, wc.Status
					if wc.Status != qp.WCSuccess {
						// The QP is in error (RETRY_EXC_ERR: retry_cnt
						// timeouts or NAKs without progress): the
						// application posts the WRITE again on another
						// QP, and the flow's FCT runs on.
						res.Failed++
						if err := post(i); err != nil {
							return res, fmt.Errorf("sweep: flow %d again: %w", i, err)
						}
						continue
					}
					fr.Done = true
					fr.FCT = now - fr.Arrive
					res.SimEnd = now
					fr.Slowdown = float64(fr.FCT) / float64(fr.Ideal)
					open--
					f := cfg.Flows[i]
					idle[f.Src*hosts+f.Dst] = append(idle[f.Src*hosts+f.Dst], q)
				}
				if n < len(wcs) {
					break
				}
			}
		}
	}
	end := s.Now()
	for i := range res.Flows {
		if fr := &res.Flows[i]; !fr.Done && i < next {
			// Censored at the run's end: its FCT is at least this, and
			// the summaries count it so (a lower bound on them).
			res.Unfinished++
			fr.FCT = end - fr.Arrive
			fr.Slowdown = float64(fr.FCT) / float64(fr.Ideal)
			res.SimEnd = end
		}
	}
	if cfg.Verify {
		for i, f := range cfg.Flows {
			if res.Flows[i].Done && res.Flows[i].Status == qp.WCSuccess {
				if string(hs[f.Src].src.Bytes()[:f.Size]) != string(dsts[i].Bytes()) {
					return res, fmt.Errorf("sweep: flow %d (%d -> %d, %d B) arrived wrong", i, f.Src, f.Dst, f.Size)
				}
			}
		}
	}
	tot := s.Network.Totals()
	res.Drops, res.Pauses, res.ECNMarks = tot.Dropped, tot.PausesSent, tot.ECNMarked
	for _, e := range s.Engines {
		c := e.Counters()
		res.CNPs += c.NPCNPSent
		res.Retransmits += c.Retransmits
	}
	res.summarize()
	for _, sw := range s.Network.Switches() {
		qs := sw.Queues()
		for p := range qs.Ports() {
			res.QueueP99Bytes = max(res.QueueP99Bytes, qs.OccupancyQuantile(p, 0.99))
			st := qs.Stats(p)
			res.QueueMaxBytes = max(res.QueueMaxBytes, st.MaxQueueBytes)
			for i, n := range st.DroppedBy {
				res.DroppedBy[i] += n
			}
		}
	}
	res.Wall = time.Since(wallStart)
	return res, nil
}

// summarize sets IRN's three summaries over the successful flows.
func (r *FlowRunResult) summarize() {
	var fcts []time.Duration
	var slow float64
	var sum time.Duration
	for _, f := range r.Flows {
		if f.FCT > 0 {
			fcts = append(fcts, f.FCT)
			sum += f.FCT
			slow += f.Slowdown
		}
	}
	if len(fcts) == 0 {
		return
	}
	r.AvgSlowdown = slow / float64(len(fcts))
	r.AvgFCT = sum / time.Duration(len(fcts))
	r.P99FCT = Percentile(fcts, 0.99)
}

// Percentile is the q-quantile of ds by the nearest rank (ds is sorted
// in place).
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	k := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}
