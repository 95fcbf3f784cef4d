package conform

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/inject"
)

var (
	hostA = netip.MustParseAddr("198.18.0.1")
	hostB = netip.MustParseAddr("198.18.0.2")
)

// traceBuilder writes a synthetic switch trace: A requests of QP 0x11 at
// B, B's replies to A's QP 0x22.
type traceBuilder struct {
	records []inject.Record
	events  []inject.Event
}

const (
	synNAK = 3 << 5 // PSN sequence error
	synACK = 0x1f   // ACK, credits invalid
)

func (b *traceBuilder) add(at time.Duration, s inject.Summary, act inject.Action, name string) {
	seq := uint64(len(b.records))
	rule := -1
	if act != inject.ActNone {
		rule = len(b.events)
		b.events = append(b.events, inject.Event{At: at, Rule: rule, Name: name, Action: act, Pkt: s, Seq: seq})
	}
	b.records = append(b.records, inject.Record{Seq: seq, At: at, Pkt: s, Action: act, Rule: rule})
}

// data is a WRITE MIDDLE of 1000 bytes from A (or a READ request, op).
func (b *traceBuilder) data(at time.Duration, psn uint32, act ...inject.Action) {
	b.req(at, bth.RCWriteMiddle, psn, act...)
}

func (b *traceBuilder) req(at time.Duration, op bth.Opcode, psn uint32, act ...inject.Action) {
	s := inject.Summary{Kind: inject.KindData, Opcode: uint8(op), Src: hostA, Dst: hostB, DstQPN: 0x11, PSN: psn, Len: 1000}
	b.add(at, s, first(act), "req")
}

func (b *traceBuilder) reply(at time.Duration, op bth.Opcode, syndrome uint8, psn uint32, act ...inject.Action) {
	k := inject.KindAck
	switch {
	case op == bth.CNP:
		k = inject.KindCNP
	case op == bth.RCReadResponseMiddle:
		k = inject.KindReadResp
	case syndrome>>5 == 3 || op == bth.RCAcknowledgeFNACK:
		k = inject.KindNak
	}
	s := inject.Summary{Kind: k, Opcode: uint8(op), Src: hostB, Dst: hostA, DstQPN: 0x22, PSN: psn, Syndrome: syndrome, Len: 62}
	if k == inject.KindReadResp {
		s.Len = 1000
	}
	b.add(at, s, first(act), "reply")
}

func first(act []inject.Action) inject.Action {
	if len(act) == 0 {
		return inject.ActNone
	}
	return act[0]
}

func i64(v int64) *int64 { return &v }

// checkRow compares the metrics of a row that the test states.
func checkRow(t *testing.T, got Row, want Row) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gm, wm map[string]any
	json.Unmarshal(g, &gm)
	json.Unmarshal(w, &wm)
	for k, v := range wm {
		switch k {
		case "event", "name", "action", "flow", "kind", "opcode", "psn", "at_ns":
			continue // identity, checked by the caller when it matters
		}
		if !reflect.DeepEqual(gm[k], v) {
			t.Errorf("row %d (%s psn %d): %s = %v, want %v", got.Event, got.Action, got.PSN, k, gm[k], v)
		}
	}
}

// TestAnalyzeGoBackN: a dropped WRITE packet NAKed and resent from its
// PSN, a dropped ACK recovered by a timeout, an ECN mark and its CNPs.
func TestAnalyzeGoBackN(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(100, 1)
	b.data(200, 2, inject.ActDrop) // event 0
	b.data(300, 3)                 // trigger
	b.data(400, 4)
	b.reply(1300, bth.RCAcknowledge, synNAK, 2) // NAK: expected 2
	b.data(2000, 2)                             // go back to 2
	b.data(2100, 3)
	b.data(2200, 4)
	b.data(2300, 5) // new: the range ends
	b.reply(3300, bth.RCAcknowledge, synACK, 5)
	b.data(3400, 6)
	b.reply(4000, bth.RCAcknowledge, synACK, 6, inject.ActDrop) // event 1
	b.data(10000, 6)                                            // timeout
	b.reply(11000, bth.RCAcknowledge, synACK, 6)
	b.data(20000, 7, inject.ActMark) // event 2
	b.reply(21000, bth.CNP, 0, 0)
	b.data(22000, 8)
	b.reply(80000, bth.CNP, 0, 0)
	b.reply(90000, bth.CNP, 0, 0)

	r := Analyze(b.records, b.events, Options{})
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	checkRow(t, r.Rows[0], Row{TriggerAt: i64(300), Signal: "NAK", SignalPSN: i64(2), SignalLatency: i64(1000),
		RetxLatency: i64(700), Resent: []PSNRange{{2, 4}}, ResentPackets: i64(3), Penalty: i64(2),
		RecoveryLatency: i64(3100), Followed: "ACK", NextReply: "NAK", NextReplyPSN: i64(2), NextReplyLatency: i64(1100)})
	checkRow(t, r.Rows[1], Row{RetxLatency: i64(6000), Timeout: true, RecoveryLatency: i64(7000), Followed: "ACK"})
	before, after := 11*1000*8/50000.0, 1000*8/50000.0 // 11 data packets in [-30 µs, 20 µs), one in [21, 71 µs)
	checkRow(t, r.Rows[2], Row{CNPLatency: i64(1000), CNPSpacing: &Spacing{Count: 2, Min: 10000, Median: 59000, Max: 59000},
		RateBefore: &before, RateAfter: &after})
	s := r.Summary
	if s.Drops != 2 || s.Marks != 1 || s.NAKs != 1 || s.CNPs != 3 || s.ACKs != 3 || s.Retransmissions != 4 || s.TimeoutFirings != 1 || s.Penalty != 2 {
		t.Errorf("summary %+v", s)
	}
}

// TestAnalyzeSelectiveTail: a corrupted last packet that no later packet
// reveals comes again on the timer alone, and nothing else is resent.
func TestAnalyzeSelectiveTail(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(100, 1)
	b.data(200, 2, inject.ActCorrupt)
	b.data(300200, 2) // RTO
	b.reply(301200, bth.RCAcknowledge, synACK, 2)
	r := Analyze(b.records, b.events, Options{})
	checkRow(t, r.Rows[0], Row{RetxLatency: i64(300000), Timeout: true, Resent: []PSNRange{{2, 2}}, ResentPackets: i64(1),
		Penalty: i64(0), RecoveryLatency: i64(301000), Followed: "ACK", NextReply: "ACK", NextReplyPSN: i64(2), NextReplyLatency: i64(301000)})
	if r.Summary.Corrupts != 1 || r.Summary.TimeoutFirings != 1 {
		t.Errorf("summary %+v", r.Summary)
	}
}

// TestAnalyzeSACK: a middle packet lost, SACKed, resent alone, while new
// packets keep coming; and a lost SACK.
func TestAnalyzeSACK(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(100, 1, inject.ActDrop)
	b.data(200, 2)
	b.data(300, 3)
	b.reply(700, bth.RCAcknowledgeSACK, synNAK, 1)                 // for 2
	b.reply(800, bth.RCAcknowledgeSACK, synNAK, 1, inject.ActDrop) // for 3, lost
	b.data(1000, 1)                                                // resent alone
	b.data(1100, 4)                                                // new
	b.reply(1500, bth.RCAcknowledge, synACK, 4)
	r := Analyze(b.records, b.events, Options{})
	checkRow(t, r.Rows[0], Row{TriggerAt: i64(200), Signal: "SACK", SignalPSN: i64(1), SignalLatency: i64(500),
		RetxLatency: i64(300), Resent: []PSNRange{{1, 1}}, ResentPackets: i64(1), Penalty: i64(0),
		RecoveryLatency: i64(1400), Followed: "ACK", NextReply: "SACK", NextReplyPSN: i64(1), NextReplyLatency: i64(600)})
	// The lost SACK (expected 1): the ACK of 4 is the next progress; the
	// data resent meanwhile was the first SACK's doing.
	checkRow(t, r.Rows[1], Row{RecoveryLatency: i64(700), Followed: "ACK"})
	if r.Summary.SACKs != 2 {
		t.Errorf("summary %+v", r.Summary)
	}
}

// TestAnalyzeReadResponse: a lost READ response, the repeated READ
// request that asks for it again, and what go-back-N asks for.
func TestAnalyzeReadResponse(t *testing.T) {
	var b traceBuilder
	b.req(0, bth.RCReadRequest, 10)
	b.reply(1000, bth.RCReadResponseMiddle, 0, 10)
	b.reply(1100, bth.RCReadResponseMiddle, 0, 11)
	b.reply(1200, bth.RCReadResponseMiddle, 0, 12, inject.ActDrop)
	b.reply(1300, bth.RCReadResponseMiddle, 0, 13)
	b.req(2300, bth.RCReadRequest, 12)
	b.reply(3300, bth.RCReadResponseMiddle, 0, 12)
	b.reply(3400, bth.RCReadResponseMiddle, 0, 13)
	r := Analyze(b.records, b.events, Options{})
	checkRow(t, r.Rows[0], Row{TriggerAt: i64(1300), Signal: "READ-REQ", SignalPSN: i64(12), SignalLatency: i64(1000),
		RetxLatency: i64(1000), Resent: []PSNRange{{12, 13}}, ResentPackets: i64(2), Penalty: i64(1),
		RecoveryLatency: i64(2100), Followed: "READ response"})
}

// TestAnalyzeDuplicate: the next reply after a duplicated packet.
func TestAnalyzeDuplicate(t *testing.T) {
	var b traceBuilder
	b.data(0, 20, inject.ActDuplicate)
	b.reply(500, bth.RCAcknowledge, synACK, 20)
	r := Analyze(b.records, b.events, Options{})
	checkRow(t, r.Rows[0], Row{NextReply: "ACK", NextReplyPSN: i64(20), NextReplyLatency: i64(500)})
	if r.Rows[0].RetxLatency != nil || r.Summary.Duplicates != 1 {
		t.Errorf("row %+v summary %+v", r.Rows[0], r.Summary)
	}
}

// TestAnalyzeNAKLost: a lost NAK; the requester learns of the hole only
// from its timer.
func TestAnalyzeNAKLost(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(100, 1, inject.ActDrop)
	b.data(200, 2)
	b.reply(1200, bth.RCAcknowledge, synNAK, 1, inject.ActDrop)
	b.data(50000, 0) // timeout: back to the oldest unacknowledged
	b.data(50100, 1)
	b.data(50200, 2)
	b.reply(51200, bth.RCAcknowledge, synACK, 2)
	r := Analyze(b.records, b.events, Options{})
	checkRow(t, r.Rows[0], Row{TriggerAt: i64(200), Signal: "NAK", SignalPSN: i64(1), SignalLatency: i64(1000),
		RetxLatency: i64(50100 - 100), Timeout: true, Resent: []PSNRange{{0, 2}}, ResentPackets: i64(3), Penalty: i64(2),
		RecoveryLatency: i64(51100), Followed: "ACK", NextReply: "NAK", NextReplyPSN: i64(1), NextReplyLatency: i64(1100)})
	checkRow(t, r.Rows[1], Row{RetxLatency: i64(50000 - 1200), Timeout: true, RecoveryLatency: i64(50000), Followed: "ACK"})
}

func TestWriteTable(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(1000, 1, inject.ActDrop)
	b.data(2000, 2)
	b.reply(3500, bth.RCAcknowledge, synNAK, 1)
	b.data(5000, 1)
	r := Analyze(b.records, b.events, Options{})
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"signal(us)", "NAK 1", "1.500", "timeout"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	js, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(js), `"signal_latency_ns":1500`) {
		t.Errorf("JSON %s %v", js, err)
	}
}

func TestTraceRoundTrip(t *testing.T) {
	var b traceBuilder
	b.data(0, 0)
	b.data(100, 1, inject.ActDrop)
	b.reply(500, bth.RCAcknowledge, synNAK, 1)
	b.reply(600, bth.CNP, 0, 0, inject.ActMark)
	b.records[1].InPort = 3
	b.records[0].Pkt.AckReq, b.records[0].Pkt.ECN, b.records[0].Pkt.SrcPort, b.records[0].Pkt.MSN = true, 2, 49152, 7
	b.records = append(b.records, inject.Record{Seq: 4, At: 700, Rule: -1, Pkt: inject.Summary{Kind: inject.KindOther, Len: 60}})
	var buf bytes.Buffer
	if err := WriteTrace(&buf, b.records, b.events); err != nil {
		t.Fatal(err)
	}
	recs, evs, err := ReadTrace(strings.NewReader(buf.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(recs, b.records) || !reflect.DeepEqual(evs, b.events) {
		t.Errorf("round trip:\n got %+v\n %+v\nwant %+v\n %+v", recs, evs, b.records, b.events)
	}
	for _, bad := range []string{`{"type":"packet","action":"none","pkt":{"kind":"data"}}`, `{"type":"record","action":"zap","pkt":{"kind":"data"}}`,
		`{"type":"record","action":"none","pkt":{"kind":"any"}}`, `{`} {
		if _, _, err := ReadTrace(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ReadTrace(%s): %v", bad, err)
		}
	}
}
