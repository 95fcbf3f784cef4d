package conform

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/qp"
)

// Observation is what one run of a case leaves to judge, in a form both
// worlds have: the switch's trace and events and their report, the
// workload's completions and data check, and the two NICs' counters.
// The embedded fabric fills it (a Run's Observation), and so does the
// testbed runner (testbed.go) from softnic switch's trace file and the
// daemons' `softnic stats`.
//
// Two things only the fabric has change how a check is judged, never
// what it means: Wire, the links' exact parameters, without which a
// check that compares a latency with the wire time takes its real-wire
// form (an ordering in the trace: the answer came before any timeout
// could have fired); and ReasonsCounted, the requester's classification
// of its ACK timeouts by the peer's state (dataplane.Engine.
// SetTimeoutPeer), without which the reason is read from the trace.
type Observation struct {
	// Addresses of the requester and the responder.
	Requester, Responder netip.Addr
	Trace                []inject.Record
	Events               []inject.Event
	Report               Report
	// ISN is the requester's first PSN (the first request in the trace).
	ISN uint32
	// The work completions (the requester's, then for SEND the
	// responder's receive), whether every one came, in posting order,
	// and whether every destination byte is the source's.
	Statuses  []qp.WCStatus
	Completed bool
	InOrder   bool
	DataOK    bool
	Elapsed   time.Duration // from the post to the last completion
	// The requester's and the responder's NIC counters.
	ReqCounters, RespCounters dataplane.Counters
	// SwitchDrops are a real-wire switch's own drops, by counter (not
	// the rules'): frames the run lost besides the case's.
	SwitchDrops map[string]uint64 `json:",omitempty"`
	// AckTimeout is the QPs' local ACK timeout, NakInterval the
	// go-back-N NAK interval (0: recovery.DefaultNakInterval).
	AckTimeout  time.Duration
	NakInterval time.Duration
	// Wire is the fabric's links, nil on real wires.
	Wire *Wire
	// ReasonsCounted: the requester's local_ack_timeout_{last_lost,
	// ack_lost,nak_lost,lost_twice} classify its timeouts.
	ReasonsCounted bool
}

// Wire is the two links of the fabric's switch, whose time a frame takes
// exactly (the simulated NIC takes none).
type Wire struct {
	Requester, Responder fabric.LinkParams
}

// Succeeded reports whether every work request completed with SUCCESS.
func (o *Observation) Succeeded() bool {
	if !o.Completed {
		return false
	}
	for _, st := range o.Statuses {
		if st != qp.WCSuccess {
			return false
		}
	}
	return true
}

// Judge judges an observation of case c run with scheme: the same checks
// on the fabric and on real wires (see Observation).
func Judge(scheme string, c Case, o *Observation) ([]Check, error) {
	class, err := classify(scheme)
	if err != nil {
		return nil, err
	}
	return judge(class, c, o), nil
}

// isnOf is the first PSN of the requester's requests in trace.
func isnOf(trace []inject.Record, requester netip.Addr) uint32 {
	for _, rec := range trace {
		if rec.Pkt.Kind == inject.KindData && rec.Pkt.Src == requester {
			return rec.Pkt.PSN
		}
	}
	return 0
}

// judgedCounters are the counters the checks read, by their `softnic
// stats` names (dataplane.Counters.Each), with where each goes.
var judgedCounters = map[string]func(*dataplane.Counters) *uint64{
	"local_ack_timeout_err":        func(c *dataplane.Counters) *uint64 { return &c.LocalAckTimeout },
	"local_ack_timeout_last_lost":  func(c *dataplane.Counters) *uint64 { return &c.AckTimeoutLastLost },
	"local_ack_timeout_ack_lost":   func(c *dataplane.Counters) *uint64 { return &c.AckTimeoutAckLost },
	"local_ack_timeout_nak_lost":   func(c *dataplane.Counters) *uint64 { return &c.AckTimeoutNakLost },
	"local_ack_timeout_lost_twice": func(c *dataplane.Counters) *uint64 { return &c.AckTimeoutLostTwice },
	"retransmitted_pkts":           func(c *dataplane.Counters) *uint64 { return &c.Retransmits },
	"ooo_kept":                     func(c *dataplane.Counters) *uint64 { return &c.OOOKept },
	"rob_delivered":                func(c *dataplane.Counters) *uint64 { return &c.ROBDelivered },
	"rcvd_icrc_err":                func(c *dataplane.Counters) *uint64 { return &c.RcvdICRCErr },
	"np_cnp_sent":                  func(c *dataplane.Counters) *uint64 { return &c.NPCNPSent },
	"rp_cnp_handled":               func(c *dataplane.Counters) *uint64 { return &c.RPCNPHandled },
	"sent_pkts":                    func(c *dataplane.Counters) *uint64 { return &c.SentPkts },
	"rcvd_pkts":                    func(c *dataplane.Counters) *uint64 { return &c.RcvdPkts },
}

// CountersFromStats fills the counters the checks read from a NIC's
// statistics by name (`softnic stats`, verbs.Context.Stats); a judged
// counter missing from stats is an error (a renamed counter must not
// pass as 0).
func CountersFromStats(stats map[string]uint64) (dataplane.Counters, error) {
	var c dataplane.Counters
	for name, field := range judgedCounters {
		v, ok := stats[name]
		if !ok {
			return c, fmt.Errorf("conform: no counter %s in the NIC's statistics", name)
		}
		*field(&c) = v
	}
	return c, nil
}

// firstRearrival is the trace index of the first packet of the lost
// packet's flow, after the loss, with a PSN that had arrived before (a
// retransmission), -1 if none. Under ST the second copy of a message's
// last packet is not one: it is the first repeat of the flow's packet
// just before it. The fabric sends the copies back to back, at one
// instant; a daemon whose transmit ring filled between them sends the
// copy later.
func (j *judgement) firstRearrival(row Row) int {
	var high, prev qp.PSN
	seen, prevFirst := false, false
	for i, rec := range j.o.Trace {
		if flowOf(&rec.Pkt) != row.Flow {
			continue
		}
		p := qp.PSN(rec.Pkt.PSN)
		stCopy := j.class.st && seen && p == prev && prevFirst
		if seen && !p.After(high) && rec.At > time.Duration(row.At) && !stCopy {
			return i
		}
		prevFirst = !seen || p.After(high)
		prev = p
		if prevFirst {
			high, seen = p, true
		}
	}
	return -1
}

// rearrivalString says where an answer (trace index i) came against the
// first later packet it must precede (k, -1 for none).
func rearrivalString(i, k int) string {
	if k < 0 {
		return fmt.Sprintf("record %d, nothing it must precede", i)
	}
	return fmt.Sprintf("record %d, the first it must precede %d", i, k)
}

// reason reports an ACK timeout's reason: the requester's own count of
// it where it classifies its timeouts (the fabric), else what the trace
// shows (inTrace: the retransmission came with no loss signal after the
// case's loss).
func (j *judgement) reason(counted uint64, inTrace bool) bool {
	if j.o.ReasonsCounted {
		return counted == 1
	}
	return inTrace
}

func (j *judgement) reasonString(name string, counted uint64, inTrace bool) string {
	if j.o.ReasonsCounted {
		return fmt.Sprintf("%s %d", name, counted)
	}
	return fmt.Sprintf("%s from the trace %v", name, inTrace)
}

// signalDropped reports whether a rule dropped a loss signal (a NAK,
// SACK or HOLES) in the run.
func (j *judgement) signalDropped() bool {
	for _, row := range j.o.Report.Rows {
		if row.Action == "drop" && (row.Kind == "nak" || row.Kind == "sack" || row.Opcode == "RC_ACKNOWLEDGE_SACK" || row.Opcode == "RC_ACKNOWLEDGE_HOLES") {
			return true
		}
	}
	return false
}
