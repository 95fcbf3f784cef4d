package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/recovery"
)

// IRN's default scenario (IRN §4.1) on the embedded fabric: a fat tree of
// K-port switches, 40 Gb/s and 2 µs per link, IRN's buffers (240 KB per
// input port) and, with PFC, its threshold (220 KB, the buffer less a
// 20 KB headroom), IRN's workload at Load for Horizon of arrivals, then
// until every flow completes. A scheme runs "irn" (RTO_low 100 µs with
// N = 3, RTO_high 320 µs, BDP-FC 110 packets) or "gbn" (RoCE's go-back-N,
// a fixed timeout near RTO_high); with PFC the ACK timeout is off, as the
// paper disables timeouts under PFC.
type IRNPoint struct {
	Scheme string
	// Variant is one of IRN's factor analysis (§4.3, Fig. 7) for Scheme
	// "irn": IRNGoBackN or IRNNoBDPFC; "" is IRN itself.
	Variant string
	PFC     bool
	CC      string // "" or "none": none; "dcqcn", "timely"
	Load    float64
	Seed    uint64
	K       int           // fat tree's k
	Horizon time.Duration // flows arrive over [0, Horizon)
	// Drain bounds the run: flows still open this long after the last
	// arrival are censored there (FlowRunConfig.Drain; 0: 1 s).
	Drain time.Duration
}

// IRN's factor analysis (§4.3, Fig. 7): IRN with its loss recovery
// replaced by go-back-N, BDP-FC kept (go-back-N's gbn.window at IRN's
// BDP cap, RoCE's fixed timeout); and IRN without BDP-FC (its window, and
// so its bitmaps, IRNNoBDPFCPackets: more than the largest flow of the
// workload has packets, so that no flow is ever capped).
const (
	IRNGoBackN = "gbn"
	IRNNoBDPFC = "nobdpfc"
	// IRNTimeoutAll is IRN with recovery's irn.timeout_all=1: a timeout
	// resends every packet out (the incast's tail, Fig. 9).
	IRNTimeoutAll = "timeoutall"
	// IRNNoBDPFCPackets is above the 2,930 packets of IRN's largest flow
	// (3 MB in 1 KB packets).
	IRNNoBDPFCPackets = 4096
)

// Label is the point's name in CSVs and charts: the scheme, or for a
// variant of IRN "irn-gbn" and "irn-nobdpfc".
func (p IRNPoint) Label() string {
	if p.Variant == "" {
		return p.Scheme
	}
	return p.Scheme + "-" + p.Variant
}

// IRNLink is IRN's link: 40 Gb/s, 2 µs.
var IRNLink = fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}

// IRN's ACK timeout codes (4.096 µs × 2^code). irn's must not be below
// RTO_high, or the QP's shorter local ACK timeout would replace it:
// code 7, 524 µs. gbn without PFC stands for RoCE with "a fixed timeout
// value of RTO_high" (§4.1): 320 µs is no code's; code 6, 262 µs, is the
// nearest (code 7's 524 µs is 204 µs further off).
const (
	IRNTimeoutCode = 7
	GBNTimeoutCode = 6
)

// IRNConfig is the run of p.
func IRNConfig(p IRNPoint) FlowRunConfig {
	sw := fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()}
	conn := dataplane.ConnParams{Timeout: IRNTimeoutCode}
	if p.Scheme != "irn" {
		conn.Timeout = GBNTimeoutCode
	}
	if p.PFC {
		sw.PFC = IRNPFC()
		conn = dataplane.ConnParams{TimeoutDisabled: true}
	}
	cc := p.CC
	if cc == "none" {
		cc = ""
	}
	if cc != "" {
		sw.ECN = netsw.DefaultECN()
	}
	scheme, params := p.Scheme, IRNSchemeParams()
	switch p.Variant {
	case "":
	case IRNGoBackN:
		scheme = recovery.GBN
		params.Knobs = recovery.KnobValues{"gbn.window": strconv.Itoa(params.BDPPackets)}
		if !p.PFC {
			conn.Timeout = GBNTimeoutCode
		}
	case IRNNoBDPFC:
		params.BDPPackets = IRNNoBDPFCPackets
	case IRNTimeoutAll:
		params.Knobs = recovery.KnobValues{"irn.timeout_all": "1"}
	default:
		panic("sweep: IRN variant " + p.Variant)
	}
	hosts := p.K * p.K * p.K / 4
	return FlowRunConfig{
		Network: func(c fabric.Clock) (*fabric.Network, error) {
			return fabric.FatTree(c, p.K, fabric.TopologyConfig{Link: IRNLink, Switch: sw, Seed: p.Seed})
		},
		PathLinks: FatTreeLinks(p.K), Link: IRNLink,
		Engine: dataplane.Config{Scheme: scheme, SchemeParams: params, CC: cc},
		Conn:   conn,
		Flows:  IRNFlows(hosts, p.Load, float64(IRNLink.RateBps), p.Horizon, p.Seed),
		Drain:  p.Drain,
	}
}

// IRNPFC is IRN's PFC (§4.1: the threshold is the buffer less a
// headroom of the upstream link's bandwidth-delay product) with the
// headroom netsw.HeadroomFor computes for the link and the largest
// frame the workload sends (a 1 KB MTU frame): IRN's 20 KB plus the pause
// frame and two frames, 22,256 B, so XOFF at 217,744 B of the 240 KB
// where the paper rounds to 220 KB. With IRN's round 20 KB the fabric's
// ingress ports overrun the headroom and drop (DropHeadroom), which a
// PFC run must not; XON one headroom below XOFF, as netsw's default.
func IRNPFC() netsw.PFC {
	h := netsw.HeadroomFor(IRNLink.RateBps, IRNLink.Delay, IRNMaxFrame)
	xoff := netsw.DefaultPortBytes - h
	return netsw.PFC{Enabled: true, XOFFBytes: xoff, XONBytes: xoff - netsw.DefaultHeadroomBytes, HeadroomBytes: h, Quanta: netsw.DefaultQuanta}
}

// IRNMaxFrame is the largest frame of the workload: a 1024-byte payload
// with RoCEv2's headers, RETH and ICRC.
const IRNMaxFrame = roceHdr + rethLen + flowMTUBytes + icrcLen

// IRNResult is one row of an IRN figure's CSV.
type IRNResult struct {
	IRNPoint
	FlowRunResult
}

// RunIRN runs p.
func RunIRN(p IRNPoint) (IRNResult, error) {
	r, err := RunFlows(IRNConfig(p))
	if err != nil {
		return IRNResult{}, fmt.Errorf("sweep: IRN %s pfc=%v cc=%q seed %d: %w", p.Label(), p.PFC, p.CC, p.Seed, err)
	}
	r.Flows = nil // the summaries are what the CSV keeps
	return IRNResult{p, r}, nil
}

// IRNCSVHeader is the CSV's columns: the issue's, then what says how
// the run went.
var IRNCSVHeader = []string{"scheme", "pfc", "cc", "load", "seed", "avg_slowdown", "avg_fct_us", "p99_fct_us", "drops", "pauses", "cnps", "ecn_marks",
	"queue_p99_bytes", "retransmits", "flows", "unfinished", "failed", "qps", "k", "horizon_ms", "sim_ms", "wall_s"}

// WriteIRNCSV writes the rows.
func WriteIRNCSV(w io.Writer, rs []IRNResult) error {
	cw := csv.NewWriter(w)
	cw.Write(IRNCSVHeader)
	f := func(v float64, d int) string { return strconv.FormatFloat(v, 'f', d, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	us := func(d time.Duration) string { return f(float64(d)/float64(time.Microsecond), 1) }
	for _, r := range rs {
		cw.Write([]string{r.Label(), PFCName(r.PFC), CCName(r.CC), f(r.Load, 2), u(r.Seed), f(r.AvgSlowdown, 3), us(r.AvgFCT), us(r.P99FCT),
			u(r.Drops), u(r.Pauses), u(r.CNPs), u(r.ECNMarks), strconv.Itoa(r.QueueP99Bytes), u(r.Retransmits),
			strconv.Itoa(r.NFlows), strconv.Itoa(r.Unfinished), strconv.Itoa(r.Failed), strconv.Itoa(r.QPs), strconv.Itoa(r.K),
			f(r.Horizon.Seconds()*1e3, 3), f(r.SimEnd.Seconds()*1e3, 3), f(r.Wall.Seconds(), 2)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveIRN writes <dir>/<name>.csv and returns its path.
func SaveIRN(dir, name string, rs []IRNResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIRNCSV(w, rs) })
}
