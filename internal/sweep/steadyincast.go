package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
)

// SteadyIncastConfig is a perftest-style incast on a star: every host but
// the last runs write_bw (one QP, TxDepth WRITEs of Size bytes
// outstanding) into the last host through one switch, for Warmup and then
// Measure; goodput is what each sender's completions carried during
// Measure. It is the embedded twin of scripts/testbed-incast.sh, which
// runs the same on the N-host testbed with softnic's switch.
type SteadyIncastConfig struct {
	Hosts  int // >= 2: Hosts-1 senders into host Hosts-1
	Scheme string
	CC     string // "none", "dcqcn", "timely"
	// CCKnobs are the algorithm's knobs ({"dcqcn.rai": "5Mbit"}); its
	// line rate is the link's.
	CCKnobs cc.KnobValues
	Link    fabric.LinkParams
	Switch  fabric.SwitchConfig
	Size    int // write_bw -s (default 65536)
	TxDepth int // write_bw -t (default 16)
	MTU     qp.MTU
	Warmup  time.Duration
	Measure time.Duration
	Seed    uint64
}

// SteadyIncastFlow is one sender's goodput, and how its QP ended: a QP
// that fails (RETRY_EXC_ERR: its retries spent without progress) stops
// there, as perftest would, and its goodput counts what it completed.
type SteadyIncastFlow struct {
	Src    int
	Gbps   float64
	Status qp.WCStatus
}

// SteadyIncastResult is one run: per-flow goodput and the switch's and
// NICs' counters over the whole run, with the receiver's queue p99 over
// Measure only (after convergence).
type SteadyIncastResult struct {
	SteadyIncastConfig
	Flows         []SteadyIncastFlow
	Jain          float64 // Jain's fairness index of the goodputs
	Drops, Pauses uint64  // the switch's drops, pause frames it sent
	PausesRecv    uint64  // pause frames the hosts received
	ECNMarks      uint64
	CNPs          uint64 // np_cnp_sent, summed over the hosts
	Retransmits   uint64
	Timeouts      uint64
	QueueP99Bytes int // the receiver's egress port, arrivals during Measure
	QueueMaxBytes int // over the whole run
	Wall          time.Duration
}

// SteadyIncastSwitch is the switch of the testbed incast at rateBps and a
// link delay: buffer, ECN and PFC thresholds in one place for the two
// twins (the testbed's `softnic switch` flags print from it): a shallow
// buffer of 300 KB per egress queue (2.4 ms at 1 Gbit/s), PFC's XOFF at
// 150 KB per ingress port with HeadroomFor the link above it, and ECN
// marking from 5 KB to 20 KB, well below XOFF, so that with DCQCN the
// queue settles under the PFC threshold. DCQCN's 200 KB Kmax is for
// 40 Gbit/s; at 1 Gbit/s it lets the queue swing to PFC.
func SteadyIncastSwitch(rateBps uint64, delay time.Duration, pfc, ecn bool) fabric.SwitchConfig {
	const port = 300_000
	head := netsw.HeadroomFor(rateBps, delay, 4096)
	c := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: port}}
	if ecn {
		c.ECN = netsw.ECN{Enabled: true, KminBytes: 5_000, KmaxBytes: 20_000, Pmax: 0.01}
	}
	if pfc {
		xoff := 150_000
		c.PFC = netsw.PFC{Enabled: true, XOFFBytes: xoff, XONBytes: xoff - max(head, 20_000), HeadroomBytes: head, Quanta: netsw.DefaultQuanta}
	}
	return c
}

// RunSteadyIncast runs one point in simulated time.
func RunSteadyIncast(c SteadyIncastConfig) (SteadyIncastResult, error) {
	wall := time.Now()
	if c.Hosts < 2 {
		return SteadyIncastResult{}, fmt.Errorf("sweep: incast needs 2 hosts or more, have %d", c.Hosts)
	}
	if c.Size == 0 {
		c.Size = 65536
	}
	if c.TxDepth == 0 {
		c.TxDepth = 16
	}
	if c.MTU == 0 {
		c.MTU = qp.MTU1024
	}
	eng := dataplane.Config{Scheme: c.Scheme, RTO: dataplane.RTOAdaptive, CC: c.CC, CCParams: cc.Params{LineRate: c.Link.RateBps, Knobs: c.CCKnobs}}
	s, err := sim.NewNet(sim.NetConfig{Engine: eng, Network: func(clk fabric.Clock) (*fabric.Network, error) {
		return fabric.Star(clk, c.Hosts, fabric.TopologyConfig{Link: c.Link, Switch: c.Switch, Seed: c.Seed})
	}})
	if err != nil {
		return SteadyIncastResult{}, err
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	dst := c.Hosts - 1
	d := s.Engines[dst]
	pdD := d.AllocPD()
	cqD, err := d.CreateCQ(64, nil)
	if err != nil {
		return SteadyIncastResult{}, err
	}
	type sender struct {
		e            *dataplane.Engine
		q            *dataplane.QP
		cq           *dataplane.CQ
		src, to      *dataplane.MR
		posted, done int
		bytes        int64 // completed during Measure
		failed       qp.WCStatus
	}
	ss := make([]sender, dst)
	for i := range ss {
		e := s.Engines[i]
		pd := e.AllocPD()
		snd := sender{e: e}
		if snd.src, err = e.RegMR(pd, make([]byte, c.Size*c.TxDepth), 0, access); err != nil {
			return SteadyIncastResult{}, err
		}
		if snd.to, err = d.RegMR(pdD, make([]byte, c.Size*c.TxDepth), 0, access); err != nil {
			return SteadyIncastResult{}, err
		}
		if snd.cq, err = e.CreateCQ(c.TxDepth+64, nil); err != nil {
			return SteadyIncastResult{}, err
		}
		if snd.q, err = e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: snd.cq, RecvCQ: snd.cq, MaxSendWR: c.TxDepth, MaxRecvWR: 1}); err != nil {
			return SteadyIncastResult{}, err
		}
		qd, err := d.CreateQP(pdD, dataplane.QPInitAttr{SendCQ: cqD, RecvCQ: cqD, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			return SteadyIncastResult{}, err
		}
		if err := dataplane.Connect(e, snd.q, d, qd, dataplane.ConnParams{MTU: c.MTU}); err != nil {
			return SteadyIncastResult{}, err
		}
		ss[i] = snd
	}
	post := func(snd *sender) error {
		for snd.failed == qp.WCSuccess && snd.posted-snd.done < c.TxDepth {
			slot := snd.posted % c.TxDepth
			w := qp.SendWR{WRID: uint64(snd.posted), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1,
				RemoteAddr: snd.to.Addr + uint64(slot*c.Size), RKey: snd.to.RKey}
			w.SGL[0] = qp.SGE{Addr: snd.src.Addr + uint64(slot*c.Size), Length: uint32(c.Size), LKey: snd.src.LKey}
			if _, err := snd.e.PostSend(snd.q, []qp.SendWR{w}); err != nil {
				return err
			}
			snd.posted++
		}
		return nil
	}
	start := s.Now()
	warm, end := start+c.Warmup, start+c.Warmup+c.Measure
	for i := range ss {
		if err := post(&ss[i]); err != nil {
			return SteadyIncastResult{}, err
		}
	}
	wcs := make([]qp.WC, 64)
	var runErr error
	reset := false
	cond := func() bool {
		now := s.Now()
		if !reset && now >= warm {
			s.Network.Switches()[0].Queues().ResetOccupancy()
			reset = true
		}
		for i := range ss {
			snd := &ss[i]
			for {
				n, err := snd.e.PollCQ(snd.cq, wcs)
				if err != nil {
					runErr = err
					return true
				}
				for _, wc := range wcs[:n] {
					if wc.Status != qp.WCSuccess {
						if snd.failed == qp.WCSuccess {
							snd.failed = wc.Status
						}
						continue
					}
					snd.done++
					if now > warm && now <= end {
						snd.bytes += int64(c.Size)
					}
				}
				if n < len(wcs) {
					break
				}
			}
			if err := post(snd); err != nil {
				runErr = err
				return true
			}
		}
		return now >= end
	}
	s.RunUntilReact(cond, c.Warmup+c.Measure+time.Second)
	if runErr != nil {
		return SteadyIncastResult{}, runErr
	}
	r := SteadyIncastResult{SteadyIncastConfig: c}
	for i := range ss {
		r.Flows = append(r.Flows, SteadyIncastFlow{Src: i, Gbps: float64(ss[i].bytes) * 8 / c.Measure.Seconds() / 1e9, Status: ss[i].failed})
	}
	r.Jain = JainIndex(r.Flows)
	tot := s.Network.Totals()
	r.Drops, r.Pauses, r.ECNMarks = tot.Dropped, tot.PausesSent, tot.ECNMarked
	for _, h := range s.Network.Hosts() {
		r.PausesRecv += h.Stats().PausesReceived
	}
	for _, e := range s.Engines {
		ct := e.Counters()
		r.CNPs += ct.NPCNPSent
		r.Retransmits += ct.Retransmits
		r.Timeouts += ct.LocalAckTimeout
	}
	q := s.Network.Switches()[0].Queues()
	r.QueueP99Bytes = q.OccupancyQuantile(dst, 0.99)
	r.QueueMaxBytes = q.Stats(dst).MaxQueueBytes
	r.Wall = time.Since(wall)
	return r, nil
}

// JainIndex is Jain's fairness index of the flows' goodputs:
// (sum x)^2 / (n * sum x^2), 1 when all are equal, 1/n when one has all.
func JainIndex(fs []SteadyIncastFlow) float64 {
	var sum, sq float64
	for _, f := range fs {
		sum += f.Gbps
		sq += f.Gbps * f.Gbps
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(fs)) * sq)
}

// TestbedIncastCSVHeader is docs/results/testbed-incast.csv's header: the
// issue's columns after `network` (testbed or embedded), and the flow's
// status last (ok, or how its QP or client failed).
var TestbedIncastCSVHeader = []string{"network", "hosts", "scheme", "cc", "pfc", "flow", "goodput_gbps", "drops", "pauses", "cnps", "ecn_marks", "queue_p99_bytes", "status"}

// WriteSteadyIncastCSV writes rs, one row per flow, network "embedded",
// with the header if header is set.
func WriteSteadyIncastCSV(w io.Writer, rs []SteadyIncastResult, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(TestbedIncastCSVHeader); err != nil {
			return err
		}
	}
	for _, r := range rs {
		pfc := "off"
		if r.Switch.PFC.Enabled {
			pfc = "on"
		}
		for _, f := range r.Flows {
			row := []string{"embedded", strconv.Itoa(r.Hosts), r.Scheme, CCName(r.CC), pfc, HostLetter(f.Src),
				strconv.FormatFloat(f.Gbps, 'f', 4, 64), strconv.FormatUint(r.Drops, 10), strconv.FormatUint(r.Pauses, 10),
				strconv.FormatUint(r.CNPs, 10), strconv.FormatUint(r.ECNMarks, 10), strconv.Itoa(r.QueueP99Bytes), flowStatus(f.Status)}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// HostLetter names host i as the testbed does: a, b, c, ...
func HostLetter(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return "h" + strconv.Itoa(i)
}

// flowStatus is a flow's status as the CSV writes it.
func flowStatus(s qp.WCStatus) string {
	if s == qp.WCSuccess {
		return "ok"
	}
	return s.String()
}
