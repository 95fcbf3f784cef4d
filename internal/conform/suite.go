package conform

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Case is one conformance case: a workload on one QP and the rules the
// switch applies to it.
type Case struct {
	Name     string
	Doc      string
	Workload Workload
	CC       string // both NICs' congestion control ("": none)
	// Rules returns the rule file for a run whose requester is a and
	// responder b.
	Rules func(a, b netip.Addr) string
	// Lost: the case loses the request or READ response at PSN offset
	// LostOffset of the workload (its first row is that loss).
	Lost       bool
	LostOffset uint32
	kind       caseKind
}

type caseKind uint8

const (
	caseLoss    caseKind = iota // one request or READ response lost
	caseAck                     // the ACK lost
	caseSignal                  // a request and its first loss signal lost
	caseRetx                    // a request and its first retransmission lost
	caseECN                     // a request ECN-marked
	caseCorrupt                 // a request corrupted
)

// suitePackets is every case's message: 8 packets of 1 KiB, all on the
// wire before the first reply comes back (DefaultLink).
const suitePackets = 8

// dropRule is a rule file of one rule: drop (or act on) the packet of
// kind from src at PSN offset off, iterations it..it+count-1.
func psnRule(name string, src netip.Addr, kind string, off uint32, action string, count int) string {
	return fmt.Sprintf(`{"name":%q,"match":{"src":%q,"kind":%q},"packet":{"psn_offset":%d,"iteration":1},"action":%q,"count":%d}`,
		name, src, kind, off, action, count)
}

func ruleFile(rules ...string) string { return `{"rules":[` + strings.Join(rules, ",") + `]}` }

// Cases returns the suite's cases.
func Cases() []Case {
	last := uint32(suitePackets - 1)
	mid := uint32(suitePackets / 2)
	var cs []Case
	for _, op := range []Op{OpWrite, OpRead} {
		for _, pos := range []struct {
			name string
			off  uint32
		}{{"first", 0}, {"middle", mid}, {"last", last}} {
			kind, from := "data", "a"
			if op == OpRead {
				kind, from = "read_resp", "b"
			}
			name := fmt.Sprintf("%s-drop-%s", strings.ToLower(op.String()), pos.name)
			off := pos.off
			cs = append(cs, Case{Name: name, Workload: Workload{Op: op, Packets: suitePackets}, Lost: true, LostOffset: off,
				Doc: fmt.Sprintf("%s of %d packets, the %s %s packet dropped", op, suitePackets, pos.name, kind),
				Rules: func(a, b netip.Addr) string {
					src := a
					if from == "b" {
						src = b
					}
					return ruleFile(psnRule(name, src, kind, off, "drop", 1))
				}})
		}
	}
	cs = append(cs,
		Case{Name: "send-drop-middle", Workload: Workload{Op: OpSend, Packets: suitePackets}, Lost: true, LostOffset: mid,
			Doc: fmt.Sprintf("SEND of %d packets, the middle packet dropped", suitePackets),
			Rules: func(a, b netip.Addr) string {
				return ruleFile(psnRule("send-drop-middle", a, "data", mid, "drop", 1))
			}},
		Case{Name: "write-drop-ack", Workload: Workload{Op: OpWrite, Packets: suitePackets}, kind: caseAck,
			Doc: "WRITE, the ACK of its last packet dropped",
			Rules: func(a, b netip.Addr) string {
				return ruleFile(fmt.Sprintf(`{"name":"drop-ack","match":{"src":%q,"kind":"ack"},"packet":{"nth":1},"action":"drop"}`, b))
			}},
		Case{Name: "write-drop-signal", Workload: Workload{Op: OpWrite, Packets: suitePackets}, Lost: true, LostOffset: mid, kind: caseSignal,
			Doc: "WRITE, the middle packet dropped and the first loss signal too (NAK, HOLES, or SACK)",
			Rules: func(a, b netip.Addr) string {
				return ruleFile(psnRule("drop-middle", a, "data", mid, "drop", 1),
					fmt.Sprintf(`{"name":"drop-nak","match":{"src":%q,"kind":"nak"},"packet":{"nth":1},"action":"drop"}`, b),
					fmt.Sprintf(`{"name":"drop-sack","match":{"src":%q,"opcode":"RC_ACKNOWLEDGE_SACK"},"packet":{"nth":1},"action":"drop"}`, b))
			}},
		Case{Name: "write-drop-retx", Workload: Workload{Op: OpWrite, Packets: suitePackets}, Lost: true, LostOffset: mid, kind: caseRetx,
			Doc: "WRITE, the middle packet dropped and its first retransmission too (iterations 1 and 2)",
			Rules: func(a, b netip.Addr) string {
				return ruleFile(psnRule("drop-middle-twice", a, "data", mid, "drop", 2))
			}},
		Case{Name: "write-ecn", Workload: Workload{Op: OpWrite, Packets: suitePackets}, CC: cc.DCQCN, kind: caseECN,
			Doc: "WRITE with DCQCN, the middle packet ECN-marked (CE)",
			Rules: func(a, b netip.Addr) string {
				return ruleFile(psnRule("ecn-middle", a, "data", mid, "ecn", 1))
			}},
		Case{Name: "write-corrupt", Workload: Workload{Op: OpWrite, Packets: suitePackets}, Lost: true, LostOffset: mid, kind: caseCorrupt,
			Doc: "WRITE, the middle packet corrupted (its ICRC fails)",
			Rules: func(a, b netip.Addr) string {
				return ruleFile(psnRule("corrupt-middle", a, "data", mid, "corrupt", 1))
			}},
	)
	return cs
}

// Check is one judgement of one run.
type Check struct {
	Name     string `json:"name"`
	Doc      string `json:"doc"` // what is expected, and where it is written
	Pass     bool   `json:"pass"`
	Measured string `json:"measured"`
}

// CaseResult is one case run for one scheme.
type CaseResult struct {
	Case   string  `json:"case"`
	Doc    string  `json:"doc"`
	Rules  string  `json:"rules"`
	Checks []Check `json:"checks"`
	Report Report  `json:"report"`
	Run    *Run    `json:"-"`
}

// SchemeResult is every case for one scheme.
type SchemeResult struct {
	Scheme string       `json:"scheme"`
	Cases  []CaseResult `json:"cases"`
	Passed int          `json:"passed"`
	Failed int          `json:"failed"`
}

// SuiteResult is the suite's outcome.
type SuiteResult struct {
	Seed    uint64         `json:"seed"`
	Schemes []SchemeResult `json:"schemes"`
	Passed  int            `json:"passed"`
	Failed  int            `json:"failed"`
}

// SuiteOptions choose what RunSuite runs.
type SuiteOptions struct {
	Schemes []string // nil: every registered scheme (recovery.Names)
	Case    string   // "": every case
	Seed    uint64
}

// RunSuite runs the cases for the schemes and judges them.
func RunSuite(opt SuiteOptions) (*SuiteResult, error) {
	schemes := opt.Schemes
	if len(schemes) == 0 {
		schemes = recovery.Names()
	}
	var cases []Case
	for _, c := range Cases() {
		if opt.Case == "" || opt.Case == c.Name {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("conform: no case %q", opt.Case)
	}
	res := &SuiteResult{Seed: opt.Seed}
	for _, name := range schemes {
		class, err := classify(name)
		if err != nil {
			return nil, err
		}
		sr := SchemeResult{Scheme: name}
		for _, c := range cases {
			setup := Setup{Scheme: name, CC: c.CC, Seed: opt.Seed}
			run, err := RunCase(setup, c.Workload, c.Rules(hostAddr(0), hostAddr(1)))
			if err != nil {
				return nil, fmt.Errorf("conform: %s, case %s: %w", name, c.Name, err)
			}
			cr := CaseResult{Case: c.Name, Doc: c.Doc, Rules: run.Rules, Report: run.Report, Run: run}
			cr.Checks = judge(class, c, &run.Observation)
			for _, ch := range cr.Checks {
				if ch.Pass {
					sr.Passed++
				} else {
					sr.Failed++
				}
			}
			sr.Cases = append(sr.Cases, cr)
		}
		res.Passed += sr.Passed
		res.Failed += sr.Failed
		res.Schemes = append(res.Schemes, sr)
	}
	return res, nil
}

// schemeClass is what docs/recovery.md says a scheme does, as the checks
// need it.
type schemeClass struct {
	name    string
	goBackN bool   // drops out-of-order packets (ReorderWindow 0): gbn and its variants
	st      bool   // sends the last packet of every message twice (igbn, gbn-st)
	ce      bool   // repeats its NAK each NAK interval (igbn, gbn-ce)
	signal  string // its loss signal: NAK, SACK, HOLES ("": not known)
	params  recovery.Params
}

func classify(name string) (schemeClass, error) {
	s, err := recovery.New(name, recovery.Params{})
	if err != nil {
		return schemeClass{}, err
	}
	c := schemeClass{name: name, goBackN: s.ReorderWindow() == 0, params: recovery.Params{}.WithDefaults()}
	switch name {
	case recovery.IGBN:
		c.st, c.ce = true, true
	case recovery.GBNST:
		c.st = true
	case recovery.GBNCE:
		c.ce = true
	}
	switch {
	case c.goBackN:
		c.signal = "NAK"
	case name == recovery.MELO:
		c.signal = "HOLES"
	case name == recovery.IRN, name == recovery.SRNIC, name == recovery.FaSR:
		c.signal = "SACK"
	}
	return c, nil
}

func hostAddr(i int) netip.Addr { return fabric.HostAddr(i) }

// WriteTables writes one table per scheme: case, check, PASS or FAIL,
// what was measured; then the totals.
func (r *SuiteResult) WriteTables(w io.Writer) error {
	for _, s := range r.Schemes {
		fmt.Fprintf(w, "\n scheme %s: %d passed, %d failed\n", s.Scheme, s.Passed, s.Failed)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, " case\tcheck\tresult\tmeasured")
		for _, c := range s.Cases {
			for _, ch := range c.Checks {
				res := "pass"
				if !ch.Pass {
					res = "FAIL"
				}
				fmt.Fprintf(tw, " %s\t%s\t%s\t%s\n", c.Case, ch.Name, res, ch.Measured)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n%d checks passed, %d failed (seed %d)\n", r.Passed, r.Failed, r.Seed)
	if r.Failed > 0 {
		fmt.Fprintln(w, "failed:")
		for _, s := range r.Schemes {
			for _, c := range s.Cases {
				for _, ch := range c.Checks {
					if !ch.Pass {
						fmt.Fprintf(w, "  %s %s %s: %s\n    expected: %s\n", s.Scheme, c.Case, ch.Name, ch.Measured, ch.Doc)
					}
				}
			}
		}
	}
	return nil
}

// WriteJSON writes the result as one JSON document.
func (r *SuiteResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// The judge.

type judgement struct {
	class  schemeClass
	c      Case
	o      *Observation
	checks []Check
}

func (j *judgement) add(name, doc string, pass bool, measured string, args ...any) {
	j.checks = append(j.checks, Check{Name: name, Doc: doc, Pass: pass, Measured: fmt.Sprintf(measured, args...)})
}

func us(d time.Duration) string { return fmt.Sprintf("%.3fµs", float64(d)/1e3) }

func usp(v *int64) string {
	if v == nil {
		return "-"
	}
	return us(time.Duration(*v))
}

// Where the schemes' behaviour is written.
const (
	docIface   = "docs/recovery.md, The interface"
	docGBN     = "docs/recovery.md, gbn and igbn"
	docIRNRecv = "docs/recovery.md, irn, Receiver (IRN §3.1, §5.3)"
	docIRNSend = "docs/recovery.md, irn, Sender (IRN §3.1, §3.2)"
	docIRNRead = "docs/recovery.md, irn, READ: one request per response packet"
	docSRNIC   = "docs/recovery.md, srnic"
	docMELO    = "docs/recovery.md, melo"
	docFaSR    = "docs/recovery.md, fasr"
	docLostRtx = "docs/recovery.md, Lost retransmissions"
	docWire    = "docs/wire.md, Opcodes"
	docCC      = "docs/cc.md; cc/dcqcn.go (DCQCN §3)"
)

func judge(class schemeClass, c Case, o *Observation) []Check {
	j := &judgement{class: class, c: c, o: o}
	j.completes()
	switch c.kind {
	case caseLoss, caseCorrupt:
		j.loss()
	case caseAck:
		j.ackLost()
	case caseSignal:
		j.signalLost()
	case caseRetx:
		j.retxLost()
	case caseECN:
		j.ecn()
	}
	return j.checks
}

func (j *judgement) completes() {
	r := j.o
	j.add("completes", "IBA 9.7 (RC): every message completes with SUCCESS, in posting order, the data byte-exact",
		r.Succeeded() && r.InOrder && r.DataOK, "completed %v, statuses %v, in order %v, data exact %v, in %s",
		r.Completed, r.Statuses, r.InOrder, r.DataOK, us(r.Elapsed))
}

// lossRow is the report's row of the case's loss.
func (j *judgement) lossRow() (Row, bool) {
	want := (j.o.ISN + j.c.LostOffset) & qp.PSNMask
	for _, row := range j.o.Report.Rows {
		if (row.Action == "drop" || row.Action == "corrupt") && row.PSN == want && (row.Kind == "data" || row.Kind == "read_resp") {
			return row, true
		}
	}
	return Row{}, false
}

// highSent is the highest PSN of the lost packet's flow that arrived at
// the switch before its first retransmission.
func (j *judgement) highSent(row Row) uint32 {
	high := qp.PSN(row.PSN)
	for _, rec := range j.o.Trace {
		if flowOf(&rec.Pkt) != row.Flow {
			continue
		}
		if rec.At > time.Duration(row.At) && rec.Pkt.PSN == row.PSN {
			break
		}
		if p := qp.PSN(rec.Pkt.PSN); p.After(high) {
			high = p
		}
	}
	return uint32(high)
}

func rangesString(rs []PSNRange) string {
	if rs == nil {
		return "-"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (j *judgement) loss() {
	r, class := j.o, j.class
	row, ok := j.lossRow()
	if !ok {
		j.add("lost", "the rule dropped the packet", false, "no event for PSN offset %d", j.c.LostOffset)
		return
	}
	read := j.c.Workload.Op == OpRead
	last := j.c.LostOffset == suitePackets-1
	p := row.PSN
	if j.c.kind == caseCorrupt {
		j.add("icrc-error", "IBA 9.8.2 (Annex A17.4): a corrupted packet fails its ICRC, is counted and discarded as lost (rcvd_icrc_err)",
			r.RespCounters.RcvdICRCErr == 1 && row.RetxLatency != nil, "rcvd_icrc_err %d, resent after %s", r.RespCounters.RcvdICRCErr, usp(row.RetxLatency))
	}
	if class.goBackN {
		j.add("in-order-only", "IBA 9.7.5.1 and "+docIface+" (ReorderWindow 0): a go-back-N responder keeps nothing out of order",
			r.RespCounters.OOOKept == 0 && r.RespCounters.ROBDelivered == 0, "ooo_kept %d, rob_delivered %d", r.RespCounters.OOOKept, r.RespCounters.ROBDelivered)
	}
	if last {
		j.lastLost(row, read)
		return
	}
	if class.st && read {
		j.stRead(row)
		return
	}
	// The loss signal.
	if read {
		j.add("asks-again", "IBA 9.7.5.1 (implied NAK): the requester asks again for the missing response, from its PSN; "+docIRNRead,
			row.Signal == "READ-REQ" && row.SignalPSN != nil && *row.SignalPSN == int64(p), "signal %s %s", row.Signal, pstr(row.SignalPSN))
	} else {
		j.add("signal-psn", "IBA 9.7.5.2.1: a PSN sequence error NAK carries the expected PSN, which is the lost one; "+docWire+" (every loss signal carries the expected PSN)",
			row.SignalPSN != nil && *row.SignalPSN == int64(p), "%s PSN %s, lost %d", row.Signal, pstr(row.SignalPSN), p)
		if class.signal != "" {
			j.add("signal-kind", j.signalDoc(), row.Signal == class.signal, "%s", orDash(row.Signal))
		}
	}
	const signalDoc = "the responder answers the packet that reveals the gap at once (" + docIface + ": Receiver.OnOutOfSequence)"
	if sig, trig, ok := j.signalRecords(row); ok && r.Wire != nil {
		want := j.turnaround(trig, sig)
		j.add("signal-at-once", signalDoc+"; on the fabric, where the simulated NIC takes no time, signal latency = the trigger's wait and serialization at the switch, the link's delay, the signal's serialization and delay",
			row.SignalLatency != nil && time.Duration(*row.SignalLatency) == want, "%s, wire time %s", usp(row.SignalLatency), us(want))
	} else if ok {
		// Real wires: a NIC's time is not known in advance, but an
		// answer "at once" comes before anything a timer sends.
		retx := j.firstRearrival(row)
		j.add("signal-at-once", signalDoc+"; on real wires: the signal came, and before any timeout fired (before the flow's first retransmission at the switch)",
			retx < 0 || sig < retx, "%s after the trigger, %s", usp(row.SignalLatency), rearrivalString(sig, retx))
	}
	// The retransmission.
	if rt, heard, ok := j.retxRecords(row); ok {
		doc := "the requester resends at once on the signal (" + docIface + ": OnFeedback)"
		if r.Wire != nil {
			want := j.turnaround(heard, rt)
			doc += "; on the fabric: retransmission latency = the signal's and the resent packet's time on the wire"
			if class.name == recovery.SRNIC {
				doc += " (srnic's stall for collecting the PSN from the host bitmap delays the frames behind it, not it: " + docSRNIC + ")"
			}
			j.add("resend-at-once", doc, !row.Timeout && time.Duration(*row.RetxLatency) == want, "%s (timeout %v), wire time %s",
				usp(row.RetxLatency), row.Timeout, us(want))
		} else {
			j.add("resend-at-once", doc+"; on real wires: the retransmission followed the signal and no timeout fired (local_ack_timeout_err 0)",
				!row.Timeout && r.ReqCounters.LocalAckTimeout == 0, "%s after the signal (timeout %v), local_ack_timeout %d",
				usp(row.RetxLatency), row.Timeout, r.ReqCounters.LocalAckTimeout)
		}
		if !read {
			j.ackOnFill(row, rt)
		}
	} else {
		j.add("resend-at-once", "the requester resends the lost packet on the signal", false, "no retransmission after a signal (retx %s, timeout %v)", usp(row.RetxLatency), row.Timeout)
	}
	j.resentRange(row)
}

func pstr(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (j *judgement) signalDoc() string {
	switch j.class.signal {
	case "NAK":
		return "a go-back-N responder NAKs (PSN sequence error, " + docIface + ": ReplySeqNak)"
	case "HOLES":
		return "melo NACKs a new hole with RC_ACKNOWLEDGE_HOLES (" + docMELO + ", NACK §3.2.4)"
	}
	d := docIRNRecv
	if j.class.name == recovery.FaSR {
		d = docFaSR + ", SACK"
	}
	return "the responder NACKs each early packet with RC_ACKNOWLEDGE_SACK (" + d + ")"
}

// resentRange: go-back-N resends from the lost PSN to the highest sent;
// a selective scheme resends the lost packet alone.
func (j *judgement) resentRange(row Row) {
	p := row.PSN
	if j.class.goBackN {
		high := j.highSent(row)
		j.add("go-back-n", "go back to the NAKed PSN and resend everything after it ("+docIface+": OnFeedback, sequence NAK: go back to the PSN; IBA 9.7.4.1.5)",
			rangesString(row.Resent) == rangesString([]PSNRange{{p, high}}) && row.Penalty != nil && *row.Penalty == int64(qp.PSN(high).Diff(qp.PSN(p))),
			"resent %s, penalty %s (want [%d-%d], %d)", rangesString(row.Resent), pstr(row.Penalty), p, high, qp.PSN(high).Diff(qp.PSN(p)))
		return
	}
	doc := docIRNSend + ", Loss rule: only the lost packet is resent"
	switch j.class.name {
	case recovery.MELO:
		doc = docMELO + ": the sender resends the holes"
	case recovery.FaSR:
		doc = docFaSR + ", Sender (§III-B2): the first SACK marks lost what lies between UNACK and it"
	}
	j.add("selective", doc, rangesString(row.Resent) == rangesString([]PSNRange{{p, p}}) && row.Penalty != nil && *row.Penalty == 0,
		"resent %s, penalty %s (want [%d], 0)", rangesString(row.Resent), pstr(row.Penalty), p)
}

// ackOnFill: irn, srnic and fasr acknowledge at once when the resent
// packet fills the hole (srnic after its bitmap query).
func (j *judgement) ackOnFill(row Row, retx int) {
	var doc string
	var stall time.Duration
	switch j.class.name {
	case recovery.IRN:
		doc = docIRNRecv + ", ACKs: the responder ACKs whenever its walk moved the expected PSN over kept packets"
	case recovery.SRNIC:
		doc = docSRNIC + ": the responder stalls srnic.host_latency (1.2 µs) to query the host bitmap when a retransmission fills the hole (FaSR §II), then ACKs (irn's rule)"
		stall = recovery.DefaultHostLatency
	case recovery.FaSR:
		doc = docFaSR + ", ACK pacing: the responder acknowledges a filled hole"
	default:
		return
	}
	ack := -1
	for i := retx + 1; i < len(j.o.Trace); i++ {
		q := &j.o.Trace[i].Pkt
		if t, ok := ackedThrough(q); ok && isACK(q) && q.Src == row.Flow.Dst && !t.Before(qp.PSN(row.PSN)) {
			ack = i
			break
		}
	}
	if ack < 0 {
		j.add("ack-on-fill", doc, false, "no ACK of the filled hole")
		return
	}
	got := j.o.Trace[ack].At - j.o.Trace[retx].At
	if j.o.Wire == nil {
		// Real wires: at once is before anything else of the flow and
		// before any timeout.
		between := 0
		for i := retx + 1; i < ack; i++ {
			if flowOf(&j.o.Trace[i].Pkt) == row.Flow {
				between++
			}
		}
		j.add("ack-on-fill", doc+"; on real wires: the ACK came with no other request of the flow before it and no timeout fired",
			between == 0 && j.o.ReqCounters.LocalAckTimeout == 0, "ACK %d after %s, %d requests between, local_ack_timeout %d",
			j.o.Trace[ack].Pkt.PSN, us(got), between, j.o.ReqCounters.LocalAckTimeout)
		return
	}
	want := j.turnaround(retx, ack) + stall
	j.add("ack-on-fill", doc, got == want, "ACK %d after %s, wire time%s %s", j.o.Trace[ack].Pkt.PSN, us(got), map[bool]string{true: " + stall", false: ""}[stall > 0], us(want))
}

// signalRecords returns the trace indices of a loss's signal and
// trigger.
func (j *judgement) signalRecords(row Row) (sig, trig int, ok bool) {
	if row.TriggerAt == nil || row.SignalLatency == nil {
		return 0, 0, false
	}
	a := newAnalysis(j.o.Trace)
	trig = j.index(a, time.Duration(*row.TriggerAt), func(q *inject.Summary) bool { return flowOf(q) == row.Flow })
	sig = j.index(a, time.Duration(*row.TriggerAt+*row.SignalLatency), func(q *inject.Summary) bool {
		return q.Src == row.Flow.Dst && (signalName(q) != "" || bth.Opcode(q.Opcode) == bth.RCReadRequest)
	})
	return sig, trig, sig >= 0 && trig >= 0
}

// retxRecords returns the trace indices of a loss's retransmission and of
// the signal the requester heard before it.
func (j *judgement) retxRecords(row Row) (retx, heard int, ok bool) {
	if row.RetxLatency == nil || row.Timeout {
		return 0, 0, false
	}
	a := newAnalysis(j.o.Trace)
	retx = -1
	for i, rec := range j.o.Trace {
		if flowOf(&rec.Pkt) == row.Flow && rec.Pkt.PSN == row.PSN && rec.At > time.Duration(row.At) {
			retx = i
			break
		}
	}
	if retx < 0 {
		return 0, 0, false
	}
	heard = j.index(a, j.o.Trace[retx].At-time.Duration(*row.RetxLatency), func(q *inject.Summary) bool {
		return q.Src == row.Flow.Dst && (signalName(q) != "" || bth.Opcode(q.Opcode) == bth.RCReadRequest)
	})
	return retx, heard, heard >= 0
}

// index is the first record at time at that ok accepts, -1 if none.
func (j *judgement) index(a *analysis, at time.Duration, ok func(*inject.Summary) bool) int {
	for i := range a.trace {
		if a.trace[i].At == at && ok(&a.trace[i].Pkt) {
			return i
		}
	}
	return -1
}

// turnaround is the time from trace[i]'s arrival at the switch to the
// arrival of trace[k], the answer of the host i went to, if that host
// answered at once: i's wait for the switch's port (a FIFO of the frames
// to that host, each serialized at the link's rate; dropped frames do not
// take the port), its serialization, the link's delay, k's serialization
// and the delay back.
func (j *judgement) turnaround(i, k int) time.Duration {
	tr := j.o.Trace
	link := j.o.Wire.Requester
	if tr[i].Pkt.Dst == j.o.Responder {
		link = j.o.Wire.Responder
	}
	ser := func(n int) time.Duration { return serTime(link, n) }
	var free time.Duration // the switch's port towards the host
	start := tr[i].At
	for m := 0; m <= i; m++ {
		if tr[m].Pkt.Dst != tr[i].Pkt.Dst || tr[m].Action == inject.ActDrop {
			continue
		}
		start = max(tr[m].At, free)
		free = start + ser(tr[m].Pkt.Len)
	}
	return start - tr[i].At + ser(tr[i].Pkt.Len) + link.Delay + ser(tr[k].Pkt.Len) + link.Delay
}

// lastLost judges the loss of a message's last packet, which no later
// packet reveals.
func (j *judgement) lastLost(row Row, read bool) {
	r, class := j.o, j.class
	c := r.ReqCounters
	isn, p := r.ISN, row.PSN
	switch {
	case class.st:
		// The second copy of the last packet (of the READ request, whose
		// copy makes the responder send the response again) recovers it.
		j.add("second-copy", docGBN+": ST sends the last packet of every message twice, so its loss costs no timeout",
			c.LocalAckTimeout == 0 && row.RetxLatency != nil, "local_ack_timeout %d, re-arrival after %s", c.LocalAckTimeout, usp(row.RetxLatency))
	case class.goBackN && !read:
		ackTO := r.AckTimeout
		j.add("ack-timeout", docGBN+", Timeouts by reason: the ACK timer fires (reason 1, local_ack_timeout_last_lost) and the requester goes back to the oldest unacknowledged PSN ("+docIface+": OnTimeout)",
			c.LocalAckTimeout == 1 && j.reason(c.AckTimeoutLastLost, row.Timeout) && rangesString(row.Resent) == rangesString([]PSNRange{{isn, p}}),
			"local_ack_timeout %d (%s), retx %s (ACK timeout %s), resent %s", c.LocalAckTimeout, j.reasonString("last_lost", c.AckTimeoutLastLost, row.Timeout),
			usp(row.RetxLatency), us(ackTO), rangesString(row.Resent))
	case class.goBackN && read:
		j.add("ack-timeout", docGBN+": the ACK timer fires and the requester asks again for the missing response",
			c.LocalAckTimeout == 1 && row.Signal == "READ-REQ" && rangesString(row.Resent) == rangesString([]PSNRange{{p, p}}),
			"local_ack_timeout %d, signal %s %s, resent %s, recovered after %s", c.LocalAckTimeout, orDash(row.Signal), pstr(row.SignalPSN),
			rangesString(row.Resent), usp(row.RecoveryLatency))
	case class.name == recovery.FaSR && !read:
		j.add("timeout-go-back", docFaSR+", Sender: a timeout with lost-cnt 0 (no SACK at all) goes back to UNACK",
			c.LocalAckTimeout == 1 && rangesString(row.Resent) == rangesString([]PSNRange{{isn, p}}),
			"local_ack_timeout %d, retx %s, resent %s", c.LocalAckTimeout, usp(row.RetxLatency), rangesString(row.Resent))
	default:
		// IRN §3.1 as docs/recovery.md has it: RTO_low with at most N
		// packets in flight, RTO_high otherwise; a timeout resends the
		// first unacknowledged packet, and a lost tail costs one
		// timeout per packet.
		detail := func() (string, []any) {
			return "local_ack_timeout %d, recovered %s after the loss, resent %s (penalty %s), RTO_low %s, RTO_high %s", []any{c.LocalAckTimeout,
				usp(row.RecoveryLatency), rangesString(row.Resent), pstr(row.Penalty), us(class.params.RTOLow), us(class.params.RTOHigh)}
		}
		f, args := detail()
		switch {
		case read:
			j.add("one-timeout", docIRNRead+": a missing response is asked for again at the timeout, exactly that packet",
				c.LocalAckTimeout == 1 && rangesString(row.Resent) == rangesString([]PSNRange{{p, p}}), f, args...)
		case class.name == recovery.MELO:
			// MELO §3.2.3: the timeout resends every packet from the
			// front of the bitmap that it does not show held; with no
			// ACK before the lost last packet, the whole message.
			j.add("one-timeout", docMELO+", Sender: a timeout resends every unacknowledged packet from the front of the bitmap (MELO §3.2.3), so one timeout recovers the lost last packet, with the packets before it that no ACK covered",
				c.LocalAckTimeout == 1 && rangesString(row.Resent) == rangesString([]PSNRange{{isn, p}}), f, args...)
		default:
			// IRN §3.1 with softnic's coalesced ACKs: the first timeout
			// resends the cumulative acknowledgement's packet, whose
			// duplicate draws the ACK of all before the lost one; the
			// second (RTO_low) resends the lost one.
			j.add("two-timeouts", docIRNSend+", A lost last packet takes two timeouts: the first resends the cumulative acknowledgement's packet (IRN §3.1), whose duplicate is ACKed, the second the lost one",
				c.LocalAckTimeout == 2 && rangesString(row.Resent) == rangesString([]PSNRange{{isn, isn}, {p, p}}), f, args...)
		}
	}
}

// stRead: igbn and gbn-st send a READ request twice and the response's
// last packet twice (docs/recovery.md, gbn and igbn, Departure). On the
// fabric the copy reaches the responder after the first response has
// left, and it sends a second; on real wires it often comes while the
// first still streams, which the responder rewinds to it (IBA 9.7.5.1.3,
// docs/transport.md, Duplicates): fewer than two whole responses, the
// hole filled all the same, by the stream or by the last packet's copy.
func (j *judgement) stRead(row Row) {
	r := j.o
	responses := 0
	for _, rec := range r.Trace {
		if rec.Pkt.Kind == inject.KindReadResp {
			responses++
		}
	}
	const doc = docGBN + ", Departure: ST on every message: the READ request's second copy makes the responder send the response again, which fills the hole without a timeout"
	if r.Wire == nil {
		// On real wires the copy may reach the responder while it is
		// still sending the first response, which it then rewinds to
		// the copy's PSN: fewer than two whole responses, the hole
		// filled all the same.
		j.add("st-read", doc+"; on real wires: the lost response came again, and no timeout fired",
			r.ReqCounters.LocalAckTimeout == 0 && row.RetxLatency != nil && row.Retransmitted(row.PSN),
			"local_ack_timeout %d, %d READ responses for %d, hole filled after %s, resent %s", r.ReqCounters.LocalAckTimeout, responses,
			suitePackets, usp(row.RetxLatency), rangesString(row.Resent))
		return
	}
	j.add("st-read", doc,
		r.ReqCounters.LocalAckTimeout == 0 && row.RetxLatency != nil && responses >= 2*suitePackets,
		"local_ack_timeout %d, %d READ responses for %d, hole filled after %s, resent %s", r.ReqCounters.LocalAckTimeout, responses,
		suitePackets, usp(row.RetxLatency), rangesString(row.Resent))
}

func ackTimeout(code uint8) time.Duration { return 4096 * time.Nanosecond << code }

func (j *judgement) ackLost() {
	r, class := j.o, j.class
	c := r.ReqCounters
	var row Row
	for _, rr := range r.Report.Rows {
		if rr.Action == "drop" {
			row = rr
		}
	}
	switch {
	case class.st && r.Wire != nil:
		want := serTime(r.Wire.Requester, suiteLastLen(r))
		j.add("second-copy-acked", docGBN+": the last packet's second copy is a duplicate the responder ACKs again (IBA 9.7.5.1.1), covering the lost ACK without a timeout; on the fabric one packet's serialization after the lost ACK",
			c.LocalAckTimeout == 0 && row.RecoveryLatency != nil && time.Duration(*row.RecoveryLatency) == want,
			"local_ack_timeout %d, covered after %s (one packet's serialization %s)", c.LocalAckTimeout, usp(row.RecoveryLatency), us(want))
	case class.st:
		j.add("second-copy-acked", docGBN+": the last packet's second copy is a duplicate the responder ACKs again (IBA 9.7.5.1.1), covering the lost ACK without a timeout; on real wires: an ACK covered it and no timeout fired",
			c.LocalAckTimeout == 0 && row.RecoveryLatency != nil && row.Followed == "ACK" && !row.Timeout,
			"local_ack_timeout %d, covered by %s after %s", c.LocalAckTimeout, orDash(row.Followed), usp(row.RecoveryLatency))
	case class.goBackN:
		j.add("ack-timeout", docGBN+", Timeouts by reason: the ACK timer fires (reason 2, local_ack_timeout_ack_lost), the requester goes back and the responder ACKs the duplicates (IBA 9.7.5.1.1)",
			c.LocalAckTimeout == 1 && j.reason(c.AckTimeoutAckLost, row.Timeout) && row.Timeout && row.Followed == "ACK",
			"local_ack_timeout %d (%s), retx %s, next ACK after %s, resent %d", c.LocalAckTimeout, j.reasonString("ack_lost", c.AckTimeoutAckLost, row.Timeout),
			usp(row.RetxLatency), usp(row.RecoveryLatency), c.Retransmits)
	case class.name == recovery.FaSR:
		j.add("timeout-go-back", docFaSR+", Sender: a timeout with lost-cnt 0 goes back to UNACK; the duplicates are ACKed",
			c.LocalAckTimeout == 1 && c.Retransmits == suitePackets && row.Followed == "ACK",
			"local_ack_timeout %d, resent %d packets, next ACK after %s", c.LocalAckTimeout, c.Retransmits, usp(row.RecoveryLatency))
	case class.name == recovery.MELO:
		j.add("one-timeout", docMELO+", Sender: a timeout resends every unacknowledged packet from the front of the bitmap (MELO §3.2.3); with the last ACK lost that is the whole message, whose duplicates the responder ACKs",
			c.LocalAckTimeout == 1 && c.Retransmits == suitePackets && row.Followed == "ACK",
			"local_ack_timeout %d, resent %d packets, retx %s, next ACK after %s", c.LocalAckTimeout, c.Retransmits, usp(row.RetxLatency), usp(row.RecoveryLatency))
	default:
		j.add("one-timeout", docIRNSend+", Timeouts and Loss rule: the timer resends the cumulative acknowledgement's packet, whose duplicate the responder ACKs",
			c.LocalAckTimeout == 1 && c.Retransmits == 1 && row.Followed == "ACK",
			"local_ack_timeout %d, resent %d packets, retx %s, next ACK after %s", c.LocalAckTimeout, c.Retransmits, usp(row.RetxLatency), usp(row.RecoveryLatency))
	}
}

// suiteLastLen is the frame length of the workload's last request.
func suiteLastLen(r *Observation) int {
	n := 0
	for _, rec := range r.Trace {
		if rec.Pkt.Kind == inject.KindData && rec.Pkt.Src == r.Requester {
			n = rec.Pkt.Len
			break
		}
	}
	for _, rec := range r.Trace {
		if rec.Pkt.Kind == inject.KindData && rec.Pkt.Src == r.Requester && rec.Pkt.PSN == (r.ISN+suitePackets-1)&qp.PSNMask {
			return rec.Pkt.Len
		}
	}
	return n
}

// serTime is how long n bytes take on link, rounded up (the fabric's
// serializer from idle).
func serTime(link fabric.LinkParams, n int) time.Duration {
	if link.RateBps == 0 {
		return 0
	}
	return time.Duration((uint64(n)*8*uint64(time.Second) + link.RateBps - 1) / link.RateBps)
}

func (j *judgement) signalLost() {
	r, class := j.o, j.class
	c := r.ReqCounters
	row, _ := j.lossRow()
	switch {
	case class.ce:
		var naks []time.Duration
		for _, rec := range r.Trace {
			if signalName(&rec.Pkt) == "NAK" {
				naks = append(naks, rec.At)
			}
		}
		gap := time.Duration(-1)
		if len(naks) >= 2 {
			gap = naks[1] - naks[0]
		}
		doc := docGBN + ": CE repeats the NAK for the same expected PSN each NAK interval, so a lost NAK costs no timeout"
		interval := class.params.NakInterval
		if r.NakInterval > 0 {
			interval = r.NakInterval
		}
		repeated := gap == interval
		if r.Wire == nil {
			// The switch times the NAKs after the responder's
			// variable delay in sending them, so their gap there is
			// not the NIC's timer: the repeat must come, before the
			// ACK timer would.
			doc += "; on real wires: a second NAK came, before the ACK timeout"
			repeated = gap > 0 && gap < r.AckTimeout
		}
		j.add("ce-repeats-nak", doc, c.LocalAckTimeout == 0 && repeated, "local_ack_timeout %d, NAKs %d, second NAK %s after the first (NAK interval %s)",
			c.LocalAckTimeout, len(naks), us(gap), us(interval))
	case class.goBackN:
		j.add("ack-timeout", docGBN+", Timeouts by reason: the responder NAKed once and the NAK was lost, so the ACK timer fires (reason 3, local_ack_timeout_nak_lost)",
			c.LocalAckTimeout == 1 && j.reason(c.AckTimeoutNakLost, row.Timeout && j.signalDropped()), "local_ack_timeout %d (%s), retx %s, resent %s",
			c.LocalAckTimeout, j.reasonString("nak_lost", c.AckTimeoutNakLost, row.Timeout && j.signalDropped()), usp(row.RetxLatency), rangesString(row.Resent))
	case class.name == recovery.MELO:
		j.add("one-timeout", docMELO+": a NACK goes only with a new hole, so a lost one is found by the timer, which restarts the round (MELO: all packets starting from the front of the bitmap are retransmitted): one timeout resends the hole",
			c.LocalAckTimeout == 1 && row.Retransmitted(row.PSN), "local_ack_timeout %d, retx %s after the loss, resent %s (penalty %s)",
			c.LocalAckTimeout, usp(row.RetxLatency), rangesString(row.Resent), pstr(row.Penalty))
	default:
		d := docIRNRecv + ": a NACK for each early packet, so the next one reports the hole again"
		if class.name == recovery.FaSR {
			d = docFaSR + ", SACK: every early packet is answered with a SACK"
		}
		j.add("next-sack", d+"; no timeout", c.LocalAckTimeout == 0 && row.Retransmitted(row.PSN) && !row.Timeout,
			"local_ack_timeout %d, retx %s, resent %s (penalty %s)", c.LocalAckTimeout, usp(row.RetxLatency), rangesString(row.Resent), pstr(row.Penalty))
	}
}

// Retransmitted reports whether psn is in the row's resent ranges.
func (row Row) Retransmitted(psn uint32) bool {
	return slices.ContainsFunc(row.Resent, func(r PSNRange) bool {
		return !qp.PSN(psn).Before(qp.PSN(r.First)) && !qp.PSN(psn).After(qp.PSN(r.Last))
	})
}

func (j *judgement) retxLost() {
	r, class := j.o, j.class
	c := r.ReqCounters
	var second Row
	for _, rr := range r.Report.Rows {
		second = rr // the retransmission's loss is the second event
	}
	switch {
	case class.ce:
		j.add("ce-repeats-nak", docGBN+": CE repeats the NAK each NAK interval while the hole stays, so a lost retransmission costs no timeout",
			c.LocalAckTimeout == 0 && second.Signal == "NAK" && !second.Timeout, "local_ack_timeout %d, signal %s, retx %s after the NAK",
			c.LocalAckTimeout, orDash(second.Signal), usp(second.RetxLatency))
	case class.goBackN:
		j.add("ack-timeout", docGBN+", Timeouts by reason: the NAKed packet was resent and lost again, the NAK is not repeated within the NAK interval, the ACK timer fires (reason 4, local_ack_timeout_lost_twice)",
			c.LocalAckTimeout == 1 && j.reason(c.AckTimeoutLostTwice, second.Timeout), "local_ack_timeout %d (%s), retx %s", c.LocalAckTimeout,
			j.reasonString("lost_twice", c.AckTimeoutLostTwice, second.Timeout), usp(second.RetxLatency))
	default:
		d := docIRNSend + ", Loss rule: a retransmission that is lost again is found by the timer"
		switch class.name {
		case recovery.MELO, recovery.FaSR:
			d = docLostRtx + ": the rule needs a packet sent after the retransmission to be acknowledged; with none, the timer finds it"
		}
		alone := rangesString(second.Resent) == rangesString([]PSNRange{{second.PSN, second.PSN}})
		if class.name == recovery.MELO {
			// MELO §3.2.3: from the front of the bitmap (the lost
			// packet, the cumulative acknowledgement) every packet the
			// bitmap does not show held.
			d += ", and resends from the front of the bitmap (the lost packet) what it does not show held (docs/recovery.md, melo, Sender)"
			alone = len(second.Resent) > 0 && second.Resent[0].First == second.PSN
		} else {
			d += ", and resends it alone"
		}
		j.add("timer-finds-it", d, c.LocalAckTimeout == 1 && second.Timeout && alone,
			"local_ack_timeout %d, retx %s after the second loss, resent %s", c.LocalAckTimeout, usp(second.RetxLatency), rangesString(second.Resent))
	}
}

func (j *judgement) ecn() {
	r := j.o
	var row Row
	for _, rr := range r.Report.Rows {
		if rr.Action == "ecn" {
			row = rr
		}
	}
	interval := 50 * time.Microsecond // DCQCN §3's N, cc knob dcqcn.cnp_interval
	cnp := -1
	mark := -1
	for i, rec := range r.Trace {
		if rec.Action == inject.ActMark {
			mark = i
		}
		if mark >= 0 && cnp < 0 && rec.Pkt.Opcode == uint8(bth.CNP) {
			cnp = i
		}
	}
	if mark < 0 || cnp < 0 {
		j.add("cnp", docCC+": the NP answers a CE-marked packet with a CNP", false, "mark %d, CNP %d", mark, cnp)
		return
	}
	const cnpDoc = docCC + ": a CE-marked packet gets a CNP at once unless the QP sent one within the CNP interval (50 µs)"
	if r.Wire != nil {
		want := j.turnaround(mark, cnp)
		j.add("cnp-at-once", cnpDoc+"; on the fabric: CNP latency = the wire time",
			row.CNPLatency != nil && time.Duration(*row.CNPLatency) == want && want <= interval, "%s, wire time %s", usp(row.CNPLatency), us(want))
	} else {
		// Real wires: the NP answers the marked packet before the
		// packets after it, so its CNP comes before any reply that
		// acknowledges a later PSN.
		later := -1
		for i := mark + 1; i < len(r.Trace); i++ {
			q := &r.Trace[i].Pkt
			if t, ok := ackedThrough(q); ok && q.Src == r.Responder && t.After(qp.PSN(r.Trace[mark].Pkt.PSN)) {
				later = i
				break
			}
		}
		j.add("cnp-at-once", cnpDoc+"; on real wires: the CNP came before any reply acknowledging a packet after the marked one",
			row.CNPLatency != nil && (later < 0 || cnp < later), "%s after the mark, %s", usp(row.CNPLatency), rearrivalString(cnp, later))
	}
	j.add("one-cnp", docCC+": one mark, one CNP, which the requester's reaction point handles (np_cnp_sent, rp_cnp_handled)",
		r.Report.Summary.CNPs == 1 && r.RespCounters.NPCNPSent == 1 && r.ReqCounters.RPCNPHandled == 1,
		"CNPs %d, np_cnp_sent %d, rp_cnp_handled %d, rate before/after %s/%s Gb/s", r.Report.Summary.CNPs, r.RespCounters.NPCNPSent,
		r.ReqCounters.RPCNPHandled, gbps(row.RateBefore), gbps(row.RateAfter))
}
