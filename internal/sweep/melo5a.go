package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// MeloSwitchedConfig is MELO's Fig. 5a in its paper's setup (§4, §4.1.1):
// two servers under one leaf switch, 40 Gb/s links, a 16 µs base RTT (4
// µs per link), congestion control CC on both NICs (DCQCN in the paper)
// with the switch marking ECN (netsw.DefaultECN), and random loss at the
// leaf: each host drops Loss of the frames it receives, data and ACKs
// alike. One QP writes Iters messages of Size bytes, TxDepth outstanding,
// as perftest's write_bw.
type MeloSwitchedConfig struct {
	Scheme  string
	CC      string
	Loss    float64
	Size    int
	Iters   int
	TxDepth int
	Window  int   // the scheme's in-flight cap (recovery.Params.BDPPackets)
	Timeout uint8 // the QP's local ACK timeout code (0: perftest's 14)
	Seed    uint64
}

// TimeoutCode is the QP's local ACK timeout code, Timeout or its default.
func (c MeloSwitchedConfig) TimeoutCode() uint8 {
	return dataplane.ConnParams{Timeout: c.Timeout}.WithDefaults().Timeout
}

// MeloSwitchedResult is one point: goodput and what the network and the
// congestion control did.
type MeloSwitchedResult struct {
	MeloSwitchedConfig
	Gbps                   float64
	Retransmits, Timeouts  uint64
	ECNMarks, CNPs, CNPsRP uint64 // marked by the switch, sent by B, handled by A
	Drops                  uint64 // the switch's (queue) drops
	Elapsed, Wall          time.Duration
}

// MeloSwitchedLink is the paper's server link: 40 Gb/s, 4 µs, so that two
// links each way make the 16 µs base RTT.
var MeloSwitchedLink = fabric.LinkParams{RateBps: MeloLinkBps, Delay: 4 * time.Microsecond}

// RunMeloSwitched measures one point in simulated time.
func RunMeloSwitched(c MeloSwitchedConfig) (MeloSwitchedResult, error) {
	wall := time.Now()
	sw := fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()}
	if c.CC != "" && c.CC != "none" {
		sw.ECN = netsw.DefaultECN()
	}
	eng := dataplane.Config{Scheme: c.Scheme, CC: c.CC, SchemeParams: recovery.Params{BDPPackets: c.Window, Knobs: MeloKnobs()},
		Netem: impair.Spec{LossPct: 100 * c.Loss, Seed: c.Seed, HasSeed: true}}
	s, err := sim.NewNet(sim.NetConfig{Engine: eng, Network: func(clk fabric.Clock) (*fabric.Network, error) {
		return fabric.Star(clk, 2, fabric.TopologyConfig{Link: MeloSwitchedLink, Switch: sw, Seed: c.Seed})
	}})
	if err != nil {
		return MeloSwitchedResult{}, err
	}
	a, b := s.Engines[0], s.Engines[1]
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := a.AllocPD(), b.AllocPD()
	mrA, err := a.RegMR(pdA, make([]byte, c.Size*c.TxDepth), 0, access)
	if err != nil {
		return MeloSwitchedResult{}, err
	}
	mrB, err := b.RegMR(pdB, make([]byte, c.Size*c.TxDepth), 0, access)
	if err != nil {
		return MeloSwitchedResult{}, err
	}
	cqA, _ := a.CreateCQ(c.TxDepth+64, nil)
	cqB, _ := b.CreateCQ(64, nil)
	qa, err := a.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: c.TxDepth, MaxRecvWR: 1})
	if err != nil {
		return MeloSwitchedResult{}, err
	}
	qb, err := b.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 1, MaxRecvWR: 1})
	if err != nil {
		return MeloSwitchedResult{}, err
	}
	if err := dataplane.Connect(a, qa, b, qb, dataplane.ConnParams{MTU: qp.MTU1024, Timeout: c.Timeout}); err != nil {
		return MeloSwitchedResult{}, err
	}
	posted, done := 0, 0
	post := func() error {
		for posted < c.Iters && posted-done < c.TxDepth {
			slot := posted % c.TxDepth
			w := qp.SendWR{WRID: uint64(posted), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1,
				RemoteAddr: mrB.Addr + uint64(slot*c.Size), RKey: mrB.RKey}
			w.SGL[0] = qp.SGE{Addr: mrA.Addr + uint64(slot*c.Size), Length: uint32(c.Size), LKey: mrA.LKey}
			if _, err := a.PostSend(qa, []qp.SendWR{w}); err != nil {
				return err
			}
			posted++
		}
		return nil
	}
	start := s.Now()
	if err := post(); err != nil {
		return MeloSwitchedResult{}, err
	}
	wcs := make([]qp.WC, 64)
	var runErr error
	cond := func() bool {
		n, err := a.PollCQ(cqA, wcs)
		if err != nil {
			runErr = err
			return true
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				runErr = fmt.Errorf("sweep: MELO Fig. 5a %s loss %g: WRITE %d: %v", c.Scheme, c.Loss, wc.WRID, wc.Status)
				return true
			}
			done++
		}
		if err := post(); err != nil {
			runErr = err
			return true
		}
		return done == c.Iters
	}
	if !s.RunUntilReact(cond, time.Hour) && runErr == nil {
		return MeloSwitchedResult{}, fmt.Errorf("sweep: MELO Fig. 5a %s loss %g: %d of %d WRITEs completed", c.Scheme, c.Loss, done, c.Iters)
	}
	if runErr != nil {
		return MeloSwitchedResult{}, runErr
	}
	r := MeloSwitchedResult{MeloSwitchedConfig: c, Elapsed: s.Now() - start}
	r.Gbps = float64(c.Size) * float64(c.Iters) * 8 / r.Elapsed.Seconds() / 1e9
	ca, cb := a.Counters(), b.Counters()
	r.Retransmits, r.Timeouts = ca.Retransmits, ca.LocalAckTimeout
	r.CNPs, r.CNPsRP = cb.NPCNPSent, ca.RPCNPHandled
	tot := s.Network.Totals()
	r.ECNMarks, r.Drops = tot.ECNMarked, tot.Dropped
	r.Wall = time.Since(wall)
	return r, nil
}

// LossResult is r as a row of the loss sweep's CSV (sweepplot.Loss
// draws it; Relative is set by Relativize).
func (r MeloSwitchedResult) LossResult() LossResult {
	return LossResult{LossConfig: LossConfig{Scheme: r.Scheme, Loss: r.Loss, Size: r.Size, Iters: r.Iters, TxDepth: r.TxDepth, MTU: qp.MTU1024, Seed: r.Seed},
		Gbps: r.Gbps, Retransmits: r.Retransmits, Timeouts: r.Timeouts, Wall: r.Wall}
}

// MeloSwitchedCSVHeader is the columns of melo-fig5a-dcqcn.csv.
var MeloSwitchedCSVHeader = []string{"scheme", "cc", "loss", "size", "iterations", "timeout_code", "goodput_gbps", "relative",
	"retransmits", "ack_timeouts", "ecn_marks", "cnps_sent", "cnps_handled", "switch_drops"}

// SaveMeloSwitched writes <dir>/<name>.csv, relative to each scheme's
// lossless row of the same congestion control and timeout.
func SaveMeloSwitched(dir, name string, rs []MeloSwitchedResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error {
		cw := csv.NewWriter(w)
		cw.Write(MeloSwitchedCSVHeader)
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		for _, r := range rs {
			rel := ""
			for _, b := range rs {
				if b.Loss == 0 && b.Scheme == r.Scheme && b.CC == r.CC && b.Timeout == r.Timeout && b.Gbps > 0 {
					rel = strconv.FormatFloat(r.Gbps/b.Gbps, 'f', 4, 64)
				}
			}
			cw.Write([]string{r.Scheme, CCName(r.CC), strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.Itoa(r.Size), strconv.Itoa(r.Iters),
				strconv.Itoa(int(r.TimeoutCode())), strconv.FormatFloat(r.Gbps, 'f', 3, 64), rel, u(r.Retransmits), u(r.Timeouts),
				u(r.ECNMarks), u(r.CNPs), u(r.CNPsRP), u(r.Drops)})
		}
		cw.Flush()
		return cw.Error()
	})
}
