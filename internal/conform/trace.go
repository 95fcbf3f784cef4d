package conform

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/softnic/softnic/dataplane/inject"
)

// The trace file: JSON lines, one object per line, records and events
// in any order (WriteTrace writes the records, then the events). A
// record is one packet as it arrived at the switch; an event one rule
// application:
//
//	{"type":"record","seq":0,"at_ns":12345,"in_port":0,"action":"none","rule":-1,"pkt":{...}}
//	{"type":"event","seq":3,"at_ns":15000,"rule":0,"name":"drop-mid","action":"drop","pkt":{...}}
//
// seq is the packet's arrival order at the switch from 0 (an event's seq
// is its packet's record), at_ns the switch's clock at ingress in
// nanoseconds, in_port the ingress port, rule the index of the rule that
// acted (-1: none), name the rule's name and action one of none, drop,
// ecn, corrupt, delay, duplicate. pkt is the packet as it arrived
// (inject.Summary):
//
//	{"kind":"data","opcode":7,"src":"198.18.0.1","dst":"198.18.0.2","src_port":49152,
//	 "dst_qpn":17,"psn":3,"ack_req":false,"syndrome":0,"msn":0,"ecn":2,"len":1082}
//
// kind is one of other, data, read_resp, atomic_ack, ack, nak, cnp;
// opcode the BTH opcode as a number, syndrome the AETH syndrome byte, ecn
// the IP ECN field (0-3) before any rule, len the frame's length in
// bytes. Readers ignore fields they do not know.
type traceLine struct {
	Type   string      `json:"type"`
	Seq    uint64      `json:"seq"`
	At     int64       `json:"at_ns"`
	InPort int         `json:"in_port"`
	Rule   int         `json:"rule"`
	Name   string      `json:"name,omitempty"`
	Action string      `json:"action"`
	Pkt    tracePacket `json:"pkt"`
}

type tracePacket struct {
	Kind     string     `json:"kind"`
	Opcode   uint8      `json:"opcode"`
	Src      netip.Addr `json:"src"`
	Dst      netip.Addr `json:"dst"`
	SrcPort  uint16     `json:"src_port"`
	DstQPN   uint32     `json:"dst_qpn"`
	PSN      uint32     `json:"psn"`
	AckReq   bool       `json:"ack_req"`
	Syndrome uint8      `json:"syndrome"`
	MSN      uint32     `json:"msn"`
	ECN      uint8      `json:"ecn"`
	Len      int        `json:"len"`
}

func packetLine(s *inject.Summary) tracePacket {
	return tracePacket{Kind: kindName(s.Kind), Opcode: s.Opcode, Src: s.Src, Dst: s.Dst, SrcPort: s.SrcPort, DstQPN: s.DstQPN,
		PSN: s.PSN, AckReq: s.AckReq, Syndrome: s.Syndrome, MSN: s.MSN, ECN: s.ECN, Len: s.Len}
}

func (t *tracePacket) summary() (inject.Summary, error) {
	k, ok := inject.ParseKind(t.Kind)
	if t.Kind == inject.KindOther.String() {
		k, ok = inject.KindOther, true
	}
	if !ok || k == inject.KindAny {
		return inject.Summary{}, fmt.Errorf("unknown kind %q", t.Kind)
	}
	return inject.Summary{Kind: k, Opcode: t.Opcode, Src: t.Src, Dst: t.Dst, SrcPort: t.SrcPort, DstQPN: t.DstQPN,
		PSN: t.PSN, AckReq: t.AckReq, Syndrome: t.Syndrome, MSN: t.MSN, ECN: t.ECN, Len: t.Len}, nil
}

// TraceWriter writes a trace file line by line, for a switch that
// streams its trace as it goes (WriteTrace writes one at once).
type TraceWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

// NewTraceWriter returns a TraceWriter on w; Flush when done.
func NewTraceWriter(w io.Writer) *TraceWriter {
	bw := bufio.NewWriter(w)
	return &TraceWriter{bw: bw, enc: json.NewEncoder(bw)}
}

// Record writes one record line.
func (t *TraceWriter) Record(r *inject.Record) error {
	return t.enc.Encode(&traceLine{Type: "record", Seq: r.Seq, At: int64(r.At), InPort: r.InPort, Rule: r.Rule,
		Action: actionName(r.Action), Pkt: packetLine(&r.Pkt)})
}

// Event writes one event line.
func (t *TraceWriter) Event(e *inject.Event) error {
	return t.enc.Encode(&traceLine{Type: "event", Seq: e.Seq, At: int64(e.At), Rule: e.Rule, Name: e.Name,
		Action: actionName(e.Action), Pkt: packetLine(&e.Pkt)})
}

// Flush writes out what is buffered.
func (t *TraceWriter) Flush() error { return t.bw.Flush() }

// WriteTrace writes records and events in the trace file format (above),
// the records first.
func WriteTrace(w io.Writer, records []inject.Record, events []inject.Event) error {
	t := NewTraceWriter(w)
	for i := range records {
		if err := t.Record(&records[i]); err != nil {
			return err
		}
	}
	for i := range events {
		if err := t.Event(&events[i]); err != nil {
			return err
		}
	}
	return t.Flush()
}

// ReadTrace reads a trace file (above): its records and events, each in
// the file's order. Blank lines are skipped; an unknown type, kind or
// action is an error naming the line.
func ReadTrace(r io.Reader) ([]inject.Record, []inject.Event, error) {
	var records []inject.Record
	var events []inject.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var l traceLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, nil, fmt.Errorf("conform: trace line %d: %w", n, err)
		}
		pkt, err := l.Pkt.summary()
		if err != nil {
			return nil, nil, fmt.Errorf("conform: trace line %d: %w", n, err)
		}
		act, ok := inject.ParseAction(l.Action)
		if l.Action == inject.ActNone.String() {
			act, ok = inject.ActNone, true
		}
		if !ok {
			return nil, nil, fmt.Errorf("conform: trace line %d: unknown action %q", n, l.Action)
		}
		switch l.Type {
		case "record":
			records = append(records, inject.Record{Seq: l.Seq, At: time.Duration(l.At), InPort: l.InPort, Pkt: pkt, Action: act, Rule: l.Rule})
		case "event":
			events = append(events, inject.Event{At: time.Duration(l.At), Rule: l.Rule, Name: l.Name, Action: act, Pkt: pkt, Seq: l.Seq})
		default:
			return nil, nil, fmt.Errorf("conform: trace line %d: unknown type %q", n, l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("conform: reading trace: %w", err)
	}
	return records, events, nil
}
