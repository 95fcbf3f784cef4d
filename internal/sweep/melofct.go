package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// WebSearchCDF is the web search flow-size distribution (DCTCP, Alizadeh
// et al., SIGCOMM 2010, Fig. 4; the points HPCC's traffic generator
// uses): flow size in bytes and the fraction of flows at most that size,
// linear between points. MELO's Fig. 5b samples flow sizes from it (§4.1.2).
var WebSearchCDF = [][2]float64{
	{0, 0}, {10e3, 0.15}, {20e3, 0.20}, {30e3, 0.30}, {50e3, 0.40}, {80e3, 0.53}, {200e3, 0.60},
	{1e6, 0.70}, {2e6, 0.80}, {5e6, 0.90}, {10e6, 0.97}, {30e6, 1},
}

// webSearchSize draws a flow size (at least one byte).
func webSearchSize(r *rand.Rand) int {
	u := r.Float64()
	for i := 1; i < len(WebSearchCDF); i++ {
		a, b := WebSearchCDF[i-1], WebSearchCDF[i]
		if u <= b[1] {
			return max(1, int(a[0]+(u-a[1])/(b[1]-a[1])*(b[0]-a[0])))
		}
	}
	return int(WebSearchCDF[len(WebSearchCDF)-1][0])
}

// WebSearchMean is the distribution's mean flow size, bytes.
func WebSearchMean() float64 {
	var m float64
	for i := 1; i < len(WebSearchCDF); i++ {
		a, b := WebSearchCDF[i-1], WebSearchCDF[i]
		m += (b[1] - a[1]) * (a[0] + b[0]) / 2
	}
	return m
}

// MeloFCTConfig is one point of MELO's Fig. 5b: flows with web search
// sizes arriving as a Poisson process at Load of the link, each a WRITE
// on a QP of its own from NIC A to NIC B; the QPs are spread over Paths
// paths (ECMP over the spines) and the flows of one path in Lossy see
// Loss in both directions.
type MeloFCTConfig struct {
	Scheme  string
	Load    float64
	Flows   int
	Loss    float64
	Paths   int // flows are hashed on QPN over this many paths; path 0 is lossy
	QPs     int // QPs that carry flows; a flow waits for a free one
	Timeout uint8
	Seed    uint64
	// Window caps the packets each QP has in flight, the same on both
	// schemes: MELO's BDPPackets and go-back-N's gbn.window (MELO §4 runs
	// both over DCQCN; softnic has none). 0: the schemes' defaults, MELO
	// 128 packets and go-back-N none.
	Window int
}

// MeloFCTResult is what one point measured.
type MeloFCTResult struct {
	MeloFCTConfig
	P50, P99    time.Duration // flow completion times, all flows
	P99Lossy    time.Duration // the flows on the lossy path
	WaitP99     time.Duration // how long flows waited for a free QP (not in their FCT)
	Timeouts    uint64
	Retransmits uint64
	Fallbacks   uint64
	Wall        time.Duration
	// Records: every flow, in arrival order.
	Records []MeloFlowRecord
}

// MeloFlowRecord is one flow of a Fig. 5b point: its size, when it
// arrived, when its WRITE was posted (a QP free) and when it completed.
// Its FCT is Done - Posted.
type MeloFlowRecord struct {
	Size                  int
	Arrived, Posted, Done time.Duration
}

const meloFCTMaxFlow = 30_000_000

// RunMeloFCT runs one point in simulated time: 40 Gb/s, 16 µs RTT (MELO
// §4's base RTT), MTU 1024, the schemes' defaults with a 1 Kb pool.
func RunMeloFCT(c MeloFCTConfig) (MeloFCTResult, error) {
	wall := time.Now()
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	dropRng := rand.New(rand.NewPCG(c.Seed, 0xd409))
	lossy := func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			return false
		}
		return int(f.Pkt.BTH().DestQPN())%c.Paths == 0 && dropRng.Float64() < c.Loss
	}
	link := fabric.LinkConfig{RateBps: MeloLinkBps, Delay: 8 * time.Microsecond, QueueFrames: 1024, Drop: lossy}
	params := recovery.Params{Knobs: MeloKnobs()}
	if c.Window > 0 {
		params.BDPPackets = c.Window
		params.Knobs["gbn.window"] = strconv.Itoa(c.Window)
	}
	s, err := sim.New(sim.Config{Seed: c.Seed, AtoB: link, BtoA: link, SchemeA: c.Scheme, SchemeB: c.Scheme,
		SchemeParams: params})
	if err != nil {
		return MeloFCTResult{}, err
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := s.A.AllocPD(), s.B.AllocPD()
	mrA, err := s.A.RegMR(pdA, make([]byte, meloFCTMaxFlow), 0, access)
	if err != nil {
		return MeloFCTResult{}, err
	}
	mrB, err := s.B.RegMR(pdB, make([]byte, meloFCTMaxFlow), 0, access)
	if err != nil {
		return MeloFCTResult{}, err
	}
	cqA, _ := s.A.CreateCQ(2*c.QPs+64, nil)
	cqB, _ := s.B.CreateCQ(64, nil)
	qps := make([]*dataplane.QP, c.QPs)
	for i := range qps {
		qa, err := s.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			return MeloFCTResult{}, err
		}
		qb, err := s.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			return MeloFCTResult{}, err
		}
		if err := dataplane.Connect(s.A, qa, s.B, qb, dataplane.ConnParams{MTU: qp.MTU1024, Timeout: c.Timeout}); err != nil {
			return MeloFCTResult{}, err
		}
		qps[i] = qa
	}
	// Arrivals: Poisson at Load of the link's rate in flow bytes.
	rate := c.Load * MeloLinkBps / 8 / WebSearchMean() // flows per second
	type flow struct {
		size   int
		at     time.Duration // arrival
		posted time.Duration // its WRITE posted: a QP was free
		lossy  bool
	}
	flows := make([]flow, c.Flows)
	var t float64
	for i := range flows {
		t += rng.ExpFloat64() / rate
		flows[i] = flow{size: webSearchSize(rng), at: time.Duration(t * 1e9)}
	}
	busy := make([]int, c.QPs) // flow index + 1 on each QP, 0 when free
	var waiting []int
	next, done := 0, 0
	fct := make([]time.Duration, 0, c.Flows)
	var lossyFCT, waits []time.Duration
	records := make([]MeloFlowRecord, c.Flows)
	var runErr error
	started := 0
	start := func(qi, fi int) {
		f := &flows[fi]
		f.lossy = int(qps[qi].QPN())%c.Paths == 0
		f.posted = s.Now()
		records[fi] = MeloFlowRecord{Size: f.size, Arrived: f.at, Posted: f.posted}
		waits = append(waits, f.posted-f.at)
		w := qp.SendWR{WRID: uint64(qi), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RKey: mrB.RKey, RemoteAddr: mrB.Addr}
		w.SGL[0] = qp.SGE{Addr: mrA.Addr, Length: uint32(f.size), LKey: mrA.LKey}
		if _, err := s.A.PostSend(qps[qi], []qp.SendWR{w}); err != nil {
			runErr = err
		}
		busy[qi] = fi + 1
		started++
	}
	free := func() int {
		// A free QP, taken in turn from a rotating start so that flows
		// spread over the paths as ECMP spreads them.
		for k := range c.QPs {
			if qi := (next + k) % c.QPs; busy[qi] == 0 {
				return qi
			}
		}
		return -1
	}
	wcs := make([]qp.WC, 64)
	// at is when the completions polled next were made: StepTo and Step
	// drain the engines at the clock's time and then move it to the next
	// event, so what they completed completed at the time before the move.
	at := s.Now()
	step := func() bool {
		for {
			n, err := s.A.PollCQ(cqA, wcs)
			if err != nil {
				runErr = err
				return true
			}
			for _, wc := range wcs[:n] {
				if wc.Status != qp.WCSuccess {
					runErr = fmt.Errorf("sweep: fct QP %d: %v", wc.WRID, wc.Status)
					return true
				}
				qi := int(wc.WRID)
				f := flows[busy[qi]-1]
				d := at - f.posted // from the flow's first post (the wait for a QP is in waits)
				records[busy[qi]-1].Done = at
				fct = append(fct, d)
				if f.lossy {
					lossyFCT = append(lossyFCT, d)
				}
				busy[qi] = 0
				done++
				if len(waiting) > 0 {
					start(qi, waiting[0])
					waiting = waiting[1:]
				}
			}
			if n == 0 {
				break
			}
		}
		for next < len(flows) && flows[next].at <= s.Now() {
			if qi := free(); qi >= 0 {
				start(qi, next)
			} else {
				waiting = append(waiting, next)
			}
			next++
		}
		return runErr != nil || done == len(flows)
	}
	for !step() {
		// Run to the next arrival exactly, then start it; after the last
		// arrival, until the flows in flight finish. A step that finds
		// nothing pending may still have completed a flow and so started
		// one that waited for its QP.
		at = s.Now()
		if next < len(flows) {
			s.StepTo(flows[next].at)
		} else if !s.Step() {
			before := started
			if step() {
				break
			}
			if started == before {
				return MeloFCTResult{}, fmt.Errorf("sweep: fct: %d of %d flows completed, nothing pending", done, len(flows))
			}
		}
	}
	if runErr != nil {
		return MeloFCTResult{}, runErr
	}
	a, b := s.A.Counters(), s.B.Counters()
	return MeloFCTResult{MeloFCTConfig: c, P50: percentile(fct, 0.5), P99: percentile(fct, 0.99), P99Lossy: percentile(lossyFCT, 0.99), WaitP99: percentile(waits, 0.99), Records: records,
		Timeouts: a.LocalAckTimeout, Retransmits: a.Retransmits, Fallbacks: a.SchemeCounter("sr_pool_fallbacks") + b.SchemeCounter("sr_pool_fallbacks"), Wall: time.Since(wall)}, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)]
}

// WriteMeloFCTCSV writes MELO Fig. 5b's rows.
func WriteMeloFCTCSV(w io.Writer, rs []MeloFCTResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "load", "loss", "flows", "fct_p50_us", "fct_p99_us", "fct_p99_lossy_path_us", "ack_timeouts", "retransmits", "fallbacks",
		"window_pkts", "qp_wait_p99_us"})
	for _, r := range rs {
		cw.Write([]string{r.Scheme, strconv.FormatFloat(r.Load, 'g', -1, 64), strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.Itoa(r.Flows),
			strconv.FormatInt(r.P50.Microseconds(), 10), strconv.FormatInt(r.P99.Microseconds(), 10), strconv.FormatInt(r.P99Lossy.Microseconds(), 10),
			strconv.FormatUint(r.Timeouts, 10), strconv.FormatUint(r.Retransmits, 10), strconv.FormatUint(r.Fallbacks, 10),
			strconv.Itoa(r.Window), strconv.FormatInt(r.WaitP99.Microseconds(), 10)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveMeloFCT writes <dir>/<name>.csv.
func SaveMeloFCT(dir, name string, rs []MeloFCTResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteMeloFCTCSV(w, rs) })
}
