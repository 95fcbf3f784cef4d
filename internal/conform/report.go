package conform

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/qp"
)

// Options tune Analyze.
type Options struct {
	// RateWindow is the window over which a flow's data rate is measured
	// before an ECN mark and after the CNP that answers it (0:
	// DefaultRateWindow).
	RateWindow time.Duration
}

// DefaultRateWindow is Options.RateWindow's default.
const DefaultRateWindow = 50 * time.Microsecond

// Flow is one direction of a QP as the switch sees it: the packets from
// Src to Dst for the destination QP DstQPN. Its replies travel the other
// way with the peer's QPN, so the report matches them by address alone.
type Flow struct {
	Src    netip.Addr `json:"src"`
	Dst    netip.Addr `json:"dst"`
	DstQPN uint32     `json:"dst_qpn"`
}

func (f Flow) String() string { return fmt.Sprintf("%v>%v/%#x", f.Src, f.Dst, f.DstQPN) }

func flowOf(s *inject.Summary) Flow { return Flow{Src: s.Src, Dst: s.Dst, DstQPN: s.DstQPN} }

// PSNRange is the PSNs First to Last, both included.
type PSNRange struct {
	First uint32 `json:"first"`
	Last  uint32 `json:"last"`
}

func (r PSNRange) String() string {
	if r.First == r.Last {
		return fmt.Sprint(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Row is what followed one rule application (one inject.Event). Times
// are at the switch's ingress, in nanoseconds; a metric that does not
// apply to the event, or whose packet never came, is null (nil).
type Row struct {
	Event  int    `json:"event"`  // index in the events given to Analyze
	Name   string `json:"name"`   // the rule's name
	Action string `json:"action"` // drop, ecn, corrupt, delay, duplicate
	Flow   Flow   `json:"flow"`
	Kind   string `json:"kind"` // the packet's kind (data, read_resp, ack, nak, cnp, ...)
	Opcode string `json:"opcode"`
	PSN    uint32 `json:"psn"`
	At     int64  `json:"at_ns"`

	// Loss of a request or READ response (drop, corrupt).
	TriggerAt *int64 `json:"trigger_at_ns"` // the first later packet of the flow past PSN that came after the loss
	// Signal is the loss signal: NAK (PSN sequence error), SACK, FNACK,
	// HOLES (MELO's NACK), or for a READ response the repeated READ
	// request; SignalPSN is its BTH PSN (the expected PSN of a NAK).
	Signal        string `json:"signal,omitempty"`
	SignalPSN     *int64 `json:"signal_psn"`
	SignalLatency *int64 `json:"signal_latency_ns"` // signal arrival - trigger arrival
	RetxLatency   *int64 `json:"retx_latency_ns"`   // first re-arrival of PSN - signal arrival (or - the loss, when Timeout)
	// Timeout: the PSN came again without any loss signal since the
	// loss, which is what an ACK timeout (or a sender's own guess) does.
	Timeout bool `json:"timeout"`
	// Resent is what the retransmission resent (PSNs that came a second
	// or later time, from its start until a PSN beyond everything sent
	// before it), ResentPackets how many packets that took, and Penalty
	// how many of the PSNs had arrived fine the first time (go-back-N's
	// cost).
	Resent        []PSNRange `json:"resent"`
	ResentPackets *int64     `json:"resent_packets"`
	Penalty       *int64     `json:"penalty"`
	// RecoveryLatency: from the loss to the flow's next progress: a reply
	// that acknowledges the lost packet (or, for a lost reply, what it
	// acknowledged; for a lost READ response, its re-arrival; for a lost
	// CNP, the next CNP).
	RecoveryLatency *int64 `json:"recovery_latency_ns"`
	Followed        string `json:"followed,omitempty"` // what made that progress

	// ECN mark.
	CNPLatency *int64   `json:"cnp_latency_ns"` // first CNP back - mark
	CNPSpacing *Spacing `json:"cnp_spacing"`    // between the flow's CNPs over the whole trace
	RateBefore *float64 `json:"rate_before_gbps"`
	RateAfter  *float64 `json:"rate_after_gbps"`

	// Delay, duplicate (and every other action): the next reply.
	NextReply        string `json:"next_reply,omitempty"`
	NextReplyPSN     *int64 `json:"next_reply_psn"`
	NextReplyLatency *int64 `json:"next_reply_latency_ns"`
}

// Spacing is the intervals between consecutive packets, in nanoseconds;
// with an even count the median is the upper of the two middle ones.
type Spacing struct {
	Count  int   `json:"count"` // intervals
	Min    int64 `json:"min_ns"`
	Median int64 `json:"median_ns"`
	Max    int64 `json:"max_ns"`
}

// Counters sum up a trace.
type Counters struct {
	Records    int `json:"records"`
	Events     int `json:"events"`
	Drops      int `json:"drops"`
	Corrupts   int `json:"corrupts"`
	Marks      int `json:"marks"`
	Delays     int `json:"delays"`
	Duplicates int `json:"duplicates"`
	// Replies in the trace by kind.
	ACKs   int `json:"acks"`
	NAKs   int `json:"naks"`
	SACKs  int `json:"sacks"`
	FNACKs int `json:"fnacks"`
	Holes  int `json:"holes"`
	CNPs   int `json:"cnps"`
	// Retransmissions counts re-arrivals of request and READ response
	// PSNs (a PSN at or before the highest of its flow seen before).
	Retransmissions int `json:"retransmissions"`
	// TimeoutFirings counts rows with Timeout.
	TimeoutFirings int   `json:"timeout_firings"`
	Penalty        int64 `json:"penalty"` // summed over the rows
}

// Report is Analyze's result.
type Report struct {
	Rows    []Row    `json:"rows"`
	Summary Counters `json:"summary"`
}

// Analyze measures what followed each event of a switch's trace (see
// Row for the metrics). Everything is timed at the switch's ingress
// (Record.At); "after" is the trace's arrival order (Record.Seq).
//
// Loss of a request or READ response p (drop or corrupt: a corrupted
// packet fails its ICRC and the receiver discards it) on flow F at t_d:
// the trigger is F's first packet with a PSN after p arriving after the
// loss (t_t); the loss signal is the first packet the other way (source
// and destination swapped, any QPN) after the trigger (after the loss if
// there is none) that is a NAK (PSN sequence error), SACK (0xD1, 0xD2),
// FNACK (0xD3) or MELO's NACK (0xD4), or, for a READ response, a READ
// request at or before p; signal latency = its arrival - t_t. The
// retransmission is F's first packet with PSN p after the loss:
// retransmission latency = its arrival - the arrival of the first signal
// that was not itself dropped or corrupted, or, when no such signal came
// before it, - t_d, and the row counts as a timeout firing (for a READ
// response, whose signal is the repeated request, latency from that
// request, and a timeout firing when no trigger came before it).
// The retransmitted range starts at that packet, or earlier at the first
// of the run of re-arrivals just before it (after the loss), and ends
// before the first PSN beyond the highest F sent before it; the penalty is
// how many of its PSNs had arrived the first time without being lost.
// Recovery latency: the first reply the other way that acknowledges p (an
// ACK of p or later, a NAK or SACK of a later expected PSN), or for a
// READ response p's re-arrival, - t_d.
//
// Loss of an ACK, NAK or atomic ACK (reply flow R, PSN q): recovery
// latency = R's first later reply that acknowledges q (an ACK of q or
// later, a NAK of a PSN past q; for a lost NAK of expected PSN e, an
// ACK of e or later) - t_d; a request or READ response the other way at
// or before q (or e) that arrives again after the loss and before that
// progress is the retransmission it caused (a timeout when R carried no
// loss signal before it; none when a signal for the same expected PSN
// came before the loss, which caused it). Loss of a CNP: recovery latency = the
// flow's next CNP - t_d.
//
// ECN mark at t_m on F: CNP latency = the first CNP the other way after
// it - t_m; CNP spacing over every CNP the other way in the trace; rate
// before = F's request and READ response bytes (frame lengths) in
// [t_m - W, t_m), rate after = in [t_cnp, t_cnp + W), W the rate window.
//
// Every row also has the next reply the other way after the packet and
// its latency: for a delayed or duplicated packet, what the receiver did.
func Analyze(trace []inject.Record, events []inject.Event, opt Options) Report {
	if opt.RateWindow <= 0 {
		opt.RateWindow = DefaultRateWindow
	}
	a := newAnalysis(trace)
	r := Report{Summary: a.counters(events)}
	for i := range events {
		row := a.row(i, &events[i], opt)
		if row.Timeout {
			r.Summary.TimeoutFirings++
		}
		if row.Penalty != nil {
			r.Summary.Penalty += *row.Penalty
		}
		r.Rows = append(r.Rows, row)
	}
	return r
}

type analysis struct {
	trace []inject.Record
	bySeq map[uint64]int // Record.Seq to index
	// again[i]: trace[i] is a request or READ response whose PSN is at or
	// before the highest of its flow that arrived before it.
	again []bool
}

func newAnalysis(trace []inject.Record) *analysis {
	a := &analysis{trace: trace, bySeq: make(map[uint64]int, len(trace)), again: make([]bool, len(trace))}
	high := map[Flow]qp.PSN{}
	for i := range trace {
		a.bySeq[trace[i].Seq] = i
		p := &trace[i].Pkt
		if !carriesData(p) {
			continue
		}
		f := flowOf(p)
		h, seen := high[f]
		psn := qp.PSN(p.PSN)
		if seen && !psn.After(h) {
			a.again[i] = true
			continue
		}
		high[f] = psn
	}
	return a
}

func (a *analysis) counters(events []inject.Event) Counters {
	c := Counters{Records: len(a.trace), Events: len(events)}
	for i := range a.trace {
		p := &a.trace[i].Pkt
		switch {
		case a.again[i]:
			c.Retransmissions++
		case isACK(p):
			c.ACKs++
		case p.Opcode == uint8(bth.CNP):
			c.CNPs++
		}
		switch signalName(p) {
		case "NAK":
			c.NAKs++
		case "SACK":
			c.SACKs++
		case "FNACK":
			c.FNACKs++
		case "HOLES":
			c.Holes++
		}
	}
	for i := range events {
		switch events[i].Action {
		case inject.ActDrop:
			c.Drops++
		case inject.ActCorrupt:
			c.Corrupts++
		case inject.ActMark:
			c.Marks++
		case inject.ActDelay:
			c.Delays++
		case inject.ActDuplicate:
			c.Duplicates++
		}
	}
	return c
}

// carriesData: a request (SEND, WRITE, READ request, atomic) or a READ
// response, the packets whose loss is recovered by resending.
func carriesData(p *inject.Summary) bool {
	return p.Kind == inject.KindData || p.Kind == inject.KindReadResp
}

// Syndrome kinds in the AETH's top bits (IBA 9.3.5).
const (
	syndromeACK = 0
	syndromeNAK = 3
)

func syndromeKind(p *inject.Summary) uint8 { return p.Syndrome >> 5 & 3 }

// isACK: an RC ACKNOWLEDGE with an ACK syndrome, or an atomic ACK.
func isACK(p *inject.Summary) bool {
	switch bth.Opcode(p.Opcode) {
	case bth.RCAcknowledge:
		return syndromeKind(p) == syndromeACK
	case bth.RCAtomicAcknowledge:
		return true
	}
	return false
}

// signalName names a loss signal ("" for any other packet): a PSN
// sequence error NAK, or one of softnic's selective replies (docs/wire.md).
func signalName(p *inject.Summary) string {
	switch bth.Opcode(p.Opcode) {
	case bth.RCAcknowledge:
		if syndromeKind(p) == syndromeNAK && p.Syndrome&0x1f == 0 {
			return "NAK"
		}
	case bth.RCAcknowledgeSACK, bth.RCAcknowledgeSACKOverflow:
		return "SACK"
	case bth.RCAcknowledgeFNACK:
		return "FNACK"
	case bth.RCAcknowledgeHoles:
		return "HOLES"
	}
	return ""
}

// ackedThrough is the last PSN a reply acknowledges (an ACK, an atomic
// ACK or a READ response its own PSN; a NAK or selective reply, whose
// BTH PSN is the responder's expected PSN, the one before it) and false
// for a packet that acknowledges nothing.
func ackedThrough(p *inject.Summary) (qp.PSN, bool) {
	switch {
	case isACK(p), p.Kind == inject.KindReadResp:
		return qp.PSN(p.PSN), true
	case signalName(p) != "":
		return qp.PSN(p.PSN).Prev(), true
	}
	return 0, false
}

// isReply: a packet a responder sends back for requests (ACK, NAK,
// selective reply, atomic ACK).
func isReply(p *inject.Summary) bool {
	return bth.Opcode(p.Opcode) == bth.RCAcknowledge || bth.Opcode(p.Opcode) == bth.RCAtomicAcknowledge || signalName(p) != ""
}

func reverse(p *inject.Summary, q *inject.Summary) bool { return q.Src == p.Dst && q.Dst == p.Src }

// find returns the index of the first record after from that ok accepts,
// -1 if none.
func (a *analysis) find(from int, ok func(*inject.Summary) bool) int {
	for j := from + 1; j < len(a.trace); j++ {
		if ok(&a.trace[j].Pkt) {
			return j
		}
	}
	return -1
}

func (a *analysis) at(i int) time.Duration { return a.trace[i].At }

// lost reports whether a rule dropped or corrupted trace[i].
func (a *analysis) lost(i int) bool {
	act := a.trace[i].Action
	return act == inject.ActDrop || act == inject.ActCorrupt
}

func ns(d time.Duration) *int64 { v := int64(d); return &v }
func num(v int64) *int64        { return &v }

func (a *analysis) row(k int, e *inject.Event, opt Options) Row {
	p := e.Pkt
	row := Row{Event: k, Name: e.Name, Action: actionName(e.Action), Flow: flowOf(&p), Kind: kindName(p.Kind),
		Opcode: bth.Opcode(p.Opcode).String(), PSN: p.PSN, At: int64(e.At)}
	i, ok := a.bySeq[e.Seq]
	if !ok {
		return row // the trace does not hold the packet: nothing to measure
	}
	lost := e.Action == inject.ActDrop || e.Action == inject.ActCorrupt
	switch {
	case lost && carriesData(&p):
		a.dataLoss(&row, i, &p)
	case lost && isReply(&p):
		a.replyLoss(&row, i, &p)
	case lost && p.Opcode == uint8(bth.CNP):
		if j := a.find(i, func(q *inject.Summary) bool { return q.Opcode == uint8(bth.CNP) && flowOf(q) == row.Flow }); j >= 0 {
			row.RecoveryLatency, row.Followed = ns(a.at(j)-a.at(i)), "CNP"
		}
	case e.Action == inject.ActMark:
		a.mark(&row, i, &p, opt.RateWindow)
	}
	if j := a.find(i, func(q *inject.Summary) bool { return reverse(&p, q) && isReply(q) }); j >= 0 {
		q := &a.trace[j].Pkt
		row.NextReply, row.NextReplyPSN, row.NextReplyLatency = replyName(q), num(int64(q.PSN)), ns(a.at(j)-a.at(i))
	}
	return row
}

// replyName is a reply's name in a row: its loss signal, ACK, or its
// opcode.
func replyName(q *inject.Summary) string {
	if s := signalName(q); s != "" {
		return s
	}
	if isACK(q) {
		return "ACK"
	}
	return bth.Opcode(q.Opcode).String()
}

func (a *analysis) dataLoss(row *Row, i int, p *inject.Summary) {
	f := row.Flow
	psn := qp.PSN(p.PSN)
	readResp := p.Kind == inject.KindReadResp
	trig := a.find(i, func(q *inject.Summary) bool { return flowOf(q) == f && qp.PSN(q.PSN).After(psn) })
	from := i
	if trig >= 0 {
		row.TriggerAt = num(int64(a.at(trig)))
		from = trig
	}
	isSignal := func(q *inject.Summary) bool {
		if !reverse(p, q) {
			return false
		}
		if readResp {
			return bth.Opcode(q.Opcode) == bth.RCReadRequest && !qp.PSN(q.PSN).After(psn)
		}
		return signalName(q) != ""
	}
	sig := a.find(from, isSignal)
	// A signal the switch received in the same batch as the loss (one
	// timestamp on real wires) left its sender before the lost packet,
	// or any packet after it, could have reached that sender: an answer
	// to earlier packets, not to the loss.
	for sig >= 0 && a.at(sig) == a.at(i) {
		sig = a.find(sig, isSignal)
	}
	if sig >= 0 {
		q := &a.trace[sig].Pkt
		row.Signal, row.SignalPSN = signalName(q), num(int64(q.PSN))
		if readResp {
			row.Signal = "READ-REQ"
		}
		if trig >= 0 {
			row.SignalLatency = ns(a.at(sig) - a.at(trig))
		}
	}
	retx := a.find(i, func(q *inject.Summary) bool { return flowOf(q) == f && qp.PSN(q.PSN) == psn })
	if retx >= 0 {
		// The signal that reached the sender: one a rule dropped or
		// corrupted did not.
		heard := sig
		for heard >= 0 && a.lost(heard) {
			heard = a.find(heard, isSignal)
		}
		// A READ response is asked for again by the requester: on its
		// timer unless a later response revealed the gap first.
		timer := readResp && (trig < 0 || (heard >= 0 && heard < trig))
		if heard >= 0 && heard < retx {
			row.RetxLatency, row.Timeout = ns(a.at(retx)-a.at(heard)), timer
		} else {
			row.RetxLatency, row.Timeout = ns(a.at(retx)-a.at(i)), true
		}
		a.resent(row, i, retx)
	}
	if readResp {
		if retx >= 0 {
			row.RecoveryLatency, row.Followed = ns(a.at(retx)-a.at(i)), "READ response"
		}
		return
	}
	if j := a.find(i, func(q *inject.Summary) bool {
		t, ok := ackedThrough(q)
		return reverse(p, q) && ok && !t.Before(psn)
	}); j >= 0 {
		row.RecoveryLatency, row.Followed = ns(a.at(j)-a.at(i)), replyName(&a.trace[j].Pkt)
	}
}

// resent fills the retransmitted range of a loss at trace[lost] whose
// PSN came again at trace[retx].
func (a *analysis) resent(row *Row, lost, retx int) {
	f := row.Flow
	start := retx
	for j := retx - 1; j > lost; j-- {
		if flowOf(&a.trace[j].Pkt) != f {
			continue
		}
		if !a.again[j] {
			break
		}
		start = j
	}
	var high qp.PSN
	seen := false
	firstLost := map[qp.PSN]bool{} // PSN to: its first arrival was lost
	for j := 0; j < start; j++ {
		q := &a.trace[j].Pkt
		if flowOf(q) != f {
			continue
		}
		psn := qp.PSN(q.PSN)
		if !seen || psn.After(high) {
			high, seen = psn, true
		}
		if _, ok := firstLost[psn]; !ok {
			act := a.trace[j].Action
			firstLost[psn] = act == inject.ActDrop || act == inject.ActCorrupt
		}
	}
	set := map[qp.PSN]bool{}
	var packets int64
	for j := start; j < len(a.trace); j++ {
		q := &a.trace[j].Pkt
		if flowOf(q) != f {
			continue
		}
		psn := qp.PSN(q.PSN)
		if psn.After(high) {
			break
		}
		set[psn] = true
		packets++
	}
	psns := make([]qp.PSN, 0, len(set))
	var penalty int64
	for psn := range set {
		psns = append(psns, psn)
		if lost, ok := firstLost[psn]; ok && !lost {
			penalty++
		}
	}
	slices.SortFunc(psns, func(x, y qp.PSN) int { return int(x.Diff(y)) })
	row.Resent = ranges(psns)
	row.ResentPackets, row.Penalty = num(packets), num(penalty)
}

// ranges compresses sorted PSNs into ranges.
func ranges(psns []qp.PSN) []PSNRange {
	var rs []PSNRange
	for _, p := range psns {
		if n := len(rs); n > 0 && qp.PSN(rs[n-1].Last).Next() == p {
			rs[n-1].Last = uint32(p)
			continue
		}
		rs = append(rs, PSNRange{First: uint32(p), Last: uint32(p)})
	}
	return rs
}

func (a *analysis) replyLoss(row *Row, i int, p *inject.Summary) {
	f := row.Flow
	threshold := qp.PSN(p.PSN) // an ACK's own PSN, or a NAK's expected PSN
	cover := a.find(i, func(q *inject.Summary) bool {
		t, ok := ackedThrough(q)
		return flowOf(q) == f && ok && !t.Before(threshold)
	})
	if cover >= 0 {
		row.RecoveryLatency, row.Followed = ns(a.at(cover)-a.at(i)), replyName(&a.trace[cover].Pkt)
	}
	// The retransmission this loss caused: a request or response the
	// other way, at or before what the lost reply acknowledged or asked
	// for, that came again before the progress. Not when a loss signal
	// for the same expected PSN came before the loss: that one caused it.
	isSignal := func(q *inject.Summary) bool { return flowOf(q) == f && signalName(q) != "" }
	if signalName(p) != "" {
		for j := range i {
			if q := &a.trace[j].Pkt; isSignal(q) && q.PSN == p.PSN {
				return
			}
		}
	}
	isRetx := func(q *inject.Summary) bool {
		return reverse(p, q) && carriesData(q) && !qp.PSN(q.PSN).After(threshold)
	}
	retx := a.find(i, isRetx)
	for retx >= 0 && !a.again[retx] {
		retx = a.find(retx, isRetx)
	}
	if retx < 0 || (cover >= 0 && cover < retx) {
		return
	}
	sig := a.find(i, isSignal)
	for sig >= 0 && a.lost(sig) {
		sig = a.find(sig, isSignal)
	}
	if sig >= 0 && sig < retx {
		row.Signal, row.SignalPSN = signalName(&a.trace[sig].Pkt), num(int64(a.trace[sig].Pkt.PSN))
		row.RetxLatency = ns(a.at(retx) - a.at(sig))
	} else {
		row.RetxLatency, row.Timeout = ns(a.at(retx)-a.at(i)), true
	}
}

func (a *analysis) mark(row *Row, i int, p *inject.Summary, w time.Duration) {
	isCNP := func(q *inject.Summary) bool { return reverse(p, q) && q.Opcode == uint8(bth.CNP) }
	var cnps []time.Duration
	for j := range a.trace {
		if isCNP(&a.trace[j].Pkt) {
			cnps = append(cnps, a.at(j))
		}
	}
	row.CNPSpacing = spacing(cnps)
	f := row.Flow
	rate := func(from, to time.Duration) *float64 {
		var bytes int64
		for j := range a.trace {
			q := &a.trace[j].Pkt
			if t := a.at(j); t >= from && t < to && flowOf(q) == f && carriesData(q) {
				bytes += int64(q.Len)
			}
		}
		g := float64(bytes) * 8 / float64(to-from) // bits per ns: Gb/s
		return &g
	}
	tm := a.at(i)
	row.RateBefore = rate(tm-w, tm)
	if j := a.find(i, isCNP); j >= 0 {
		row.CNPLatency = ns(a.at(j) - tm)
		row.RateAfter = rate(a.at(j), a.at(j)+w)
	}
}

func spacing(ts []time.Duration) *Spacing {
	if len(ts) < 2 {
		return nil
	}
	gaps := make([]int64, 0, len(ts)-1)
	for k := 1; k < len(ts); k++ {
		gaps = append(gaps, int64(ts[k]-ts[k-1]))
	}
	slices.Sort(gaps)
	return &Spacing{Count: len(gaps), Min: gaps[0], Median: gaps[len(gaps)/2], Max: gaps[len(gaps)-1]}
}

// WriteTable writes the rows as aligned columns, times in µs, "-" where a
// metric does not apply, then the counters.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event\taction\tflow\tkind\tpsn\tat(us)\tsignal\tsignal(us)\tretx(us)\ttimeout\tresent\tpenalty\trecovery(us)\tcnp(us)\tcnp gap min/med/max(us)\trate before/after(Gb/s)\tnext reply(us)\t")
	for _, row := range r.Rows {
		timeout := "-"
		if row.RetxLatency != nil {
			timeout = fmt.Sprint(row.Timeout)
		}
		resent := "-"
		if row.Resent != nil {
			parts := make([]string, len(row.Resent))
			for k, rg := range row.Resent {
				parts[k] = rg.String()
			}
			resent = strings.Join(parts, ",")
		}
		signal := "-"
		if row.Signal != "" {
			signal = fmt.Sprintf("%s %d", row.Signal, *row.SignalPSN)
		}
		gap := "-"
		if s := row.CNPSpacing; s != nil {
			gap = fmt.Sprintf("%s/%s/%s", micros(&s.Min), micros(&s.Median), micros(&s.Max))
		}
		rate := "-"
		if row.RateBefore != nil {
			rate = fmt.Sprintf("%.2f/%s", *row.RateBefore, gbps(row.RateAfter))
		}
		next := "-"
		if row.NextReply != "" {
			next = fmt.Sprintf("%s %d %s", row.NextReply, *row.NextReplyPSN, micros(row.NextReplyLatency))
		}
		name := row.Name
		if name == "" {
			name = fmt.Sprint(row.Event)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			name, row.Action, row.Flow, row.Kind, row.PSN, micros(&row.At), signal, micros(row.SignalLatency),
			micros(row.RetxLatency), timeout, resent, count(row.Penalty), micros(row.RecoveryLatency), micros(row.CNPLatency),
			gap, rate, next)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := r.Summary
	_, err := fmt.Fprintf(w, "records %d, events %d (drop %d, corrupt %d, ecn %d, delay %d, duplicate %d); ACK %d, NAK %d, SACK %d, FNACK %d, HOLES %d, CNP %d; retransmissions %d, timeout firings %d, go-back-N penalty %d\n",
		s.Records, s.Events, s.Drops, s.Corrupts, s.Marks, s.Delays, s.Duplicates, s.ACKs, s.NAKs, s.SACKs, s.FNACKs, s.Holes, s.CNPs,
		s.Retransmissions, s.TimeoutFirings, s.Penalty)
	return err
}

// micros formats nanoseconds as µs with three decimals, "-" for nil.
func micros(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(*v)/1e3)
}

func count(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func gbps(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func kindName(k inject.Kind) string { return k.String() }

func actionName(a inject.Action) string { return a.String() }
