package inject

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
)

var (
	hostA = netip.MustParseAddr("198.18.0.1")
	hostB = netip.MustParseAddr("198.18.0.2")
)

// pkt describes a test frame.
type pkt struct {
	op      bth.Opcode
	src     netip.Addr // default hostA
	dst     netip.Addr // default hostB
	qpn     uint32
	psn     uint32
	ackReq  bool
	syn     bth.Syndrome
	msn     uint32
	payload int
	tos     uint8
}

// build encodes p as softnic's transmit path would: the headers with the
// FrameHeader, the BTH and AETH with their Encode, every other extension
// header zero, the payload counting up, and the ICRC.
func (p pkt) build(tb testing.TB) []byte {
	tb.Helper()
	if !p.src.IsValid() {
		p.src = hostA
	}
	if !p.dst.IsValid() {
		p.dst = hostB
	}
	info := bth.Lookup(p.op)
	if info == nil {
		tb.Fatalf("no opcode %v", p.op)
	}
	h := bth.FrameHeader{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: p.src, Dst: p.dst, SrcPort: 0xc000, TOS: p.tos}
	roceLen := info.PacketLen(p.payload)
	frame := make([]byte, h.Len()+roceLen)
	off := h.Encode(frame, roceLen)
	bth.BTH(frame[off:]).Encode(&bth.BTHFields{Opcode: p.op, PadCount: uint8(bth.PadFor(p.payload)),
		PKey: 0xffff, DestQPN: p.qpn, AckReq: p.ackReq, PSN: p.psn})
	if info.AETHOff >= 0 {
		bth.AETH(frame[off+info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: p.syn, MSN: p.msn})
	}
	for i := range p.payload {
		frame[off+info.Length+i] = byte(i + 1)
	}
	bth.FinishFrame(frame, &h)
	return frame
}

func TestClassify(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for _, c := range []struct {
		name string
		p    pkt
		kind Kind
	}{
		{"write first", pkt{op: bth.RCWriteFirst, payload: 1024}, KindData},
		{"write middle", pkt{op: bth.RCWriteMiddle, payload: 1024}, KindData},
		{"send only", pkt{op: bth.RCSendOnly, payload: 3, ackReq: true}, KindData},
		{"read request", pkt{op: bth.RCReadRequest}, KindData},
		{"fetch add", pkt{op: bth.RCFetchAdd}, KindData},
		{"write first ooo", pkt{op: bth.RCWriteFirstOOO, payload: 64}, KindData},
		{"read response first", pkt{op: bth.RCReadResponseFirst, payload: 64, syn: bth.AckSyndrome(31), msn: 9}, KindReadResp},
		{"read response middle", pkt{op: bth.RCReadResponseMiddle, payload: 64}, KindReadResp},
		{"atomic ack", pkt{op: bth.RCAtomicAcknowledge, syn: bth.AckSyndrome(0), msn: 4}, KindAtomicAck},
		{"ack", pkt{op: bth.RCAcknowledge, syn: bth.AckSyndrome(31), msn: 77}, KindAck},
		{"sack", pkt{op: bth.RCAcknowledgeSACK, syn: bth.AckSyndrome(0)}, KindAck},
		{"sack overflow", pkt{op: bth.RCAcknowledgeSACKOverflow, syn: bth.NakSyndrome(bth.NakPSNSeqError)}, KindAck},
		{"nak", pkt{op: bth.RCAcknowledge, syn: bth.NakSyndrome(bth.NakPSNSeqError), msn: 3}, KindNak},
		{"rnr nak", pkt{op: bth.RCAcknowledge, syn: bth.RNRNakSyndrome(5)}, KindNak},
		{"fnack", pkt{op: bth.RCAcknowledgeFNACK, syn: bth.AckSyndrome(0)}, KindNak},
		{"holes", pkt{op: bth.RCAcknowledgeHoles, syn: bth.AckSyndrome(0)}, KindNak},
		{"cnp", pkt{op: bth.CNP}, KindCNP},
		{"ud send", pkt{op: bth.UDSendOnly, payload: 8}, KindOther},
		{"star rdp", pkt{op: bth.StarRDP, payload: 8}, KindOther},
		{"ipv6 write", pkt{op: bth.RCWriteLast, payload: 100, src: v6a, dst: v6b}, KindData},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.p.qpn, c.p.psn, c.p.tos = 0x123456, 0xfffffe, 0b10
			frame := c.p.build(t)
			s := Classify(frame)
			want := Summary{Kind: c.kind, Len: len(frame)}
			if c.kind != KindOther {
				src, dst := c.p.src, c.p.dst
				if !src.IsValid() {
					src, dst = hostA, hostB
				}
				want = Summary{Kind: c.kind, Opcode: uint8(c.p.op), Src: src, Dst: dst, SrcPort: 0xc000,
					DstQPN: 0x123456, PSN: 0xfffffe, AckReq: c.p.ackReq, Syndrome: uint8(c.p.syn), MSN: c.p.msn, ECN: 0b10, Len: len(frame)}
				if bth.Lookup(c.p.op).AETHOff < 0 {
					want.Syndrome, want.MSN = 0, 0
				}
			}
			if s != want {
				t.Fatalf("Classify = %+v\nwant       %+v", s, want)
			}
		})
	}
	for _, junk := range [][]byte{nil, {1, 2, 3}, make([]byte, 60), pkt{op: bth.RCSendOnly}.build(t)[:50]} {
		if s := Classify(junk); s != (Summary{Kind: KindOther, Len: len(junk)}) {
			t.Errorf("Classify(%d junk bytes) = %+v", len(junk), s)
		}
	}
	f := pkt{op: bth.RCWriteMiddle, payload: 64}.build(t)
	if n := testing.AllocsPerRun(100, func() { Classify(f) }); n != 0 {
		t.Fatalf("Classify allocates %v times", n)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(pkt{op: bth.RCWriteFirst, payload: 16}.build(f))
	f.Add(pkt{op: bth.RCAcknowledge, syn: bth.NakSyndrome(0)}.build(f))
	f.Add(pkt{op: bth.CNP}.build(f))
	set, err := Parse([]byte(`{"rules": [{"match": {"kind": "any"}, "packet": {"nth": 1}, "action": "corrupt", "count": 1000000}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := Classify(b)
		if s.Len != len(b) {
			t.Fatalf("Len %d of %d bytes", s.Len, len(b))
		}
		set.Decide(0, 0, b) // corrupts in place: must not panic either
	})
}

func TestKindAndActionNames(t *testing.T) {
	for _, name := range []string{"data", "read_resp", "atomic_ack", "ack", "nak", "cnp", "any"} {
		k, ok := ParseKind(name)
		if !ok || k.String() != name {
			t.Errorf("ParseKind(%q) = %v, %v", name, k, ok)
		}
	}
	if _, ok := ParseKind("other"); ok {
		t.Error(`ParseKind("other") accepted`)
	}
	for _, name := range []string{"drop", "ecn", "corrupt", "delay", "duplicate"} {
		a, ok := ParseAction(name)
		if !ok || a.String() != name {
			t.Errorf("ParseAction(%q) = %v, %v", name, a, ok)
		}
	}
}

const goodFile = `{"rules": [
  {"name": "drop-mid-write",
   "match": {"src": "198.18.0.1", "dst": "198.18.1.1", "dst_qpn": 17, "kind": "data", "opcode": "RC_RDMA_WRITE_MIDDLE"},
   "packet": {"nth": 3},
   "action": "drop", "count": 1},
  {"name": "drop-retx", "match": {"kind": "data"}, "packet": {"psn_offset": 5, "iteration": 2}, "action": "drop"},
  {"name": "late", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "delay", "delay": "100us"},
  {"name": "by-number", "match": {"opcode": 129, "dst": "2001:db8::2"}, "packet": {"psn_offset": 0}, "action": "ecn", "count": 3},
  {"packet": {"nth": 2}, "action": "duplicate"}
]}`

func TestParseGood(t *testing.T) {
	s, err := Parse([]byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Name: "drop-mid-write", Match: Match{Src: hostA, Dst: netip.MustParseAddr("198.18.1.1"), DstQPN: 17, HasDstQPN: true,
			Kind: KindData, Opcode: uint8(bth.RCWriteMiddle), HasOpcode: true}, Packet: Position{Nth: 3}, Action: ActDrop, Count: 1},
		{Name: "drop-retx", Match: Match{Kind: KindData}, Packet: Position{PSNOffset: 5, Iteration: 2}, Action: ActDrop, Count: 1},
		{Name: "late", Match: Match{Kind: KindAck}, Packet: Position{Nth: 1}, Action: ActDelay, Delay: 100 * time.Microsecond, Count: 1},
		{Name: "by-number", Match: Match{Kind: KindAny, Dst: netip.MustParseAddr("2001:db8::2"), Opcode: uint8(bth.CNP), HasOpcode: true},
			Packet: Position{PSNOffset: 0, Iteration: 1}, Action: ActMark, Count: 3},
		{Match: Match{Kind: KindAny}, Packet: Position{Nth: 2}, Action: ActDuplicate, Count: 1},
	}
	got := s.Rules()
	if len(got) != len(want) {
		t.Fatalf("%d rules, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d: %+v\nwant    %+v", i, got[i], want[i])
		}
	}
	// The canonical form reads back to the same rules, and is a fixed point.
	canon := s.String()
	again, err := Parse([]byte(canon))
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
	}
	for i, r := range again.Rules() {
		if r != want[i] {
			t.Errorf("round trip rule %d: %+v\nwant %+v", i, r, want[i])
		}
	}
	if again.String() != canon {
		t.Errorf("canonical form not a fixed point:\n%s\n%s", canon, again.String())
	}
	if !strings.Contains(canon, `{"name":"late","match":{"kind":"ack"},"packet":{"nth":1},"action":"delay","delay":"100µs","count":1}`) {
		t.Errorf("canonical form:\n%s", canon)
	}
	js, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON, err := Parse(js); err != nil || len(fromJSON.Rules()) != len(want) {
		t.Fatalf("MarshalJSON does not parse back: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	rule := func(r string) string {
		return `{"rules": [{"name": "ok", "packet": {"nth": 1}, "action": "drop"}, ` + r + `]}`
	}
	for _, c := range []struct{ file, want string }{
		{``, `empty: want {"rules": [...]}`},
		{`{`, `not JSON: it ends early`},
		{`{"rules": [}`, `not JSON at byte 12: invalid character '}' looking for beginning of value`},
		{`{}`, `no "rules" list`},
		{`{"rule": []}`, `unknown field "rule"`},
		{`{"rules": {}}`, `rules: want a list, not object`},
		{`{"rules": []} x`, `data after the rules`},
		{rule(`{"name": "late", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "dealy", "delay": "100us"}`),
			`rule 1 ("late"): action "dealy": want drop, ecn, corrupt, delay or duplicate`},
		{rule(`{"name": "x", "packet": {"nth": 1}}`), `rule 1 ("x"): action: missing: want drop, ecn, corrupt, delay or duplicate`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "drop", "colour": 1}`), `rule 1 ("x"): unknown field "colour"`},
		{rule(`{"name": "x", "match": {"qpn": 1}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: unknown field "qpn"`},
		{rule(`{"name": "x", "packet": {"nth": 1, "when": 2}, "action": "drop"}`), `rule 1 ("x"): packet: unknown field "when"`},
		{rule(`{"name": "x", "action": "drop"}`), `rule 1 ("x"): packet: missing: want {"nth": N} or {"psn_offset": N}`},
		{rule(`{"name": "x", "packet": {}, "action": "drop"}`), `rule 1 ("x"): packet: missing: want nth or psn_offset`},
		{rule(`{"name": "x", "packet": {"nth": 1, "psn_offset": 2}, "action": "drop"}`), `rule 1 ("x"): packet: both nth and psn_offset: want one`},
		{rule(`{"name": "x", "packet": {"nth": 0}, "action": "drop"}`), `rule 1 ("x"): packet: nth 0: want 1 or more`},
		{rule(`{"name": "x", "packet": {"nth": 2, "iteration": 2}, "action": "drop"}`), `rule 1 ("x"): packet: iteration: only with psn_offset`},
		{rule(`{"name": "x", "packet": {"psn_offset": 2, "iteration": 0}, "action": "drop"}`), `rule 1 ("x"): packet: iteration 0: want 1 or more`},
		{rule(`{"name": "x", "packet": {"psn_offset": 16777216}, "action": "drop"}`), `rule 1 ("x"): packet: psn_offset 16777216: want less than 2^24`},
		{rule(`{"name": "x", "packet": {"nth": "3"}, "action": "drop"}`), `rule 1 ("x"): packet: nth: want a whole number, not string`},
		{rule(`{"name": "x", "match": {"src": "198.18.0"}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: src "198.18.0": want an IPv4 or IPv6 address`},
		{rule(`{"name": "x", "match": {"dst": "host"}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: dst "host": want an IPv4 or IPv6 address`},
		{rule(`{"name": "x", "match": {"kind": "acks"}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: kind "acks": want data, read_resp, atomic_ack, ack, nak, cnp or any`},
		{rule(`{"name": "x", "match": {"opcode": "RC_WRITE_MIDDLE"}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: opcode "RC_WRITE_MIDDLE": not an opcode name softnic knows (e.g. RC_RDMA_WRITE_MIDDLE)`},
		{rule(`{"name": "x", "match": {"opcode": 21}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: opcode 21: not an opcode softnic knows`},
		{rule(`{"name": "x", "match": {"opcode": 256}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: opcode 256: want an opcode name or a number from 0 to 255`},
		{rule(`{"name": "x", "match": {"dst_qpn": 16777216}, "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("x"): match: dst_qpn 16777216: want a 24-bit QPN`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "drop", "delay": "1ms"}`), `rule 1 ("x"): delay: only for action delay, not drop`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "delay"}`), `rule 1 ("x"): delay: missing: action delay wants one, e.g. "100us"`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "delay", "delay": "soon"}`), `rule 1 ("x"): delay "soon": want a Go duration, e.g. "100us"`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "delay", "delay": "0s"}`), `rule 1 ("x"): delay "0s": want more than 0`},
		{rule(`{"name": "x", "packet": {"nth": 1}, "action": "drop", "count": 0}`), `rule 1 ("x"): count 0: want 1 or more`},
		{rule(`{"name": "ok", "packet": {"nth": 1}, "action": "drop"}`), `rule 1 ("ok"): name: rule 0 has it too`},
		{rule(`{"packet": {"nth": 1}, "action": "explode"}`), `rule 1: action "explode": want drop, ecn, corrupt, delay or duplicate`},
	} {
		_, err := Parse([]byte(c.file))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%s)\n  = %v\nwant %s", c.file, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error of more than one line: %q", err)
		}
	}
}

// decideAll runs frames through s at 1 µs apart and returns the actions.
func decideAll(s *Set, frames [][]byte) []Action {
	var got []Action
	for i, f := range frames {
		got = append(got, s.Decide(time.Duration(i)*time.Microsecond, 1, f).Action)
	}
	return got
}

func mustParse(t *testing.T, file string) *Set {
	t.Helper()
	s, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	s.TraceCap = 1 << 10
	return s
}

// writes returns WRITE MIDDLE frames of the PSNs given, from A to B.
func writes(t *testing.T, psns ...uint32) [][]byte {
	var fs [][]byte
	for _, p := range psns {
		fs = append(fs, pkt{op: bth.RCWriteMiddle, qpn: 17, psn: p, payload: 16}.build(t))
	}
	return fs
}

func TestNth(t *testing.T) {
	ack := pkt{op: bth.RCAcknowledge, src: hostB, dst: hostA, syn: bth.AckSyndrome(31)}.build(t)
	w := writes(t, 10, 11, 12, 13, 14, 15)
	// Acks interleaved do not count for a data rule; the 3rd and 4th
	// data packets are the hits.
	frames := [][]byte{w[0], ack, w[1], ack, w[2], w[3], ack, w[4], w[5]}
	s := mustParse(t, `{"rules": [{"name": "d", "match": {"kind": "data", "dst_qpn": 17}, "packet": {"nth": 3}, "action": "drop", "count": 2}]}`)
	got := decideAll(s, frames)
	want := []Action{0, 0, 0, 0, ActDrop, ActDrop, 0, 0, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	ev := s.Events()
	if len(ev) != 2 || ev[0].Pkt.PSN != 12 || ev[1].Pkt.PSN != 13 || ev[0].Seq != 4 || ev[1].Seq != 5 ||
		ev[0].At != 4*time.Microsecond || ev[0].Name != "d" || ev[0].Rule != 0 || ev[0].Action != ActDrop {
		t.Fatalf("events %+v", ev)
	}
	tr := s.Trace()
	if len(tr) != len(frames) {
		t.Fatalf("trace of %d records, want %d", len(tr), len(frames))
	}
	for i, r := range tr {
		if r.Seq != uint64(i) || r.InPort != 1 || r.Action != want[i] || (r.Rule >= 0) != (want[i] != 0) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	// A frame that is not RoCE is neither traced nor counted.
	if d := s.Decide(0, 0, make([]byte, 64)); d != (Decision{Rule: -1}) {
		t.Fatalf("junk: %+v", d)
	}
	if len(s.Trace()) != len(frames) {
		t.Fatal("junk traced")
	}
}

func TestPSNOffsetIteration(t *testing.T) {
	// ISN 0xfffffd: offset 5 is PSN 2, past the wrap. The stream: the
	// original 0xfffffd..3, then go-back-N from 1 twice.
	stream := []uint32{0xfffffd, 0xfffffe, 0xffffff, 0, 1, 2, 3, 1, 2, 3, 1, 2, 3}
	for _, c := range []struct {
		packet string
		count  int
		want   []int // indexes of the stream hit
	}{
		{`{"psn_offset": 5}`, 1, []int{5}},
		{`{"psn_offset": 5, "iteration": 1}`, 2, []int{5, 8}},
		{`{"psn_offset": 5, "iteration": 2}`, 1, []int{8}},
		{`{"psn_offset": 5, "iteration": 3}`, 5, []int{11}},
		{`{"psn_offset": 5, "iteration": 4}`, 1, nil},
		{`{"psn_offset": 0}`, 1, []int{0}},
		{`{"psn_offset": 3}`, 3, []int{3}}, // PSN 0 arrives once
		{`{"psn_offset": 2}`, 1, []int{2}},
		{`{"nth": 12}`, 3, []int{11, 12}},
	} {
		file := `{"rules": [{"name": "r", "match": {"kind": "data"}, "packet": ` + c.packet + `, "action": "drop", "count": ` + strconv.Itoa(c.count) + `}]}`
		s := mustParse(t, file)
		got := decideAll(s, writes(t, stream...))
		var hits []int
		for i, a := range got {
			if a == ActDrop {
				hits = append(hits, i)
			}
		}
		if !slices.Equal(hits, c.want) {
			t.Errorf("%s count %d: hits %v, want %v", c.packet, c.count, hits, c.want)
		}
		for i, e := range s.Events() {
			if e.Seq != uint64(c.want[i]) || e.Pkt.PSN != stream[c.want[i]] {
				t.Errorf("%s: event %d: %+v", c.packet, i, e)
			}
		}
	}
}

// TestRulesCountEveryPacket: a packet both rules hit goes to the first;
// the second counts it all the same, and acts on its next hit.
func TestRulesCountEveryPacket(t *testing.T) {
	s := mustParse(t, `{"rules": [
		{"name": "a", "packet": {"nth": 2}, "action": "drop"},
		{"name": "b", "packet": {"nth": 2}, "action": "duplicate", "count": 2}]}`)
	got := decideAll(s, writes(t, 1, 2, 3, 4))
	if want := []Action{0, ActDrop, ActDuplicate, 0}; !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if ev := s.Events(); len(ev) != 2 || ev[0].Rule != 0 || ev[1].Rule != 1 || ev[1].Name != "b" {
		t.Fatalf("events %+v", ev)
	}
}

func ipv4ChecksumOK(h []byte) bool {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum>>16 + sum&0xffff
	}
	return sum == 0xffff
}

func TestECNForcesCE(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for _, tos := range []uint8{0b00, 0b01, 0b10, 0b11, 0xb8} {
		for _, six := range []bool{false, true} {
			p := pkt{op: bth.RCWriteMiddle, payload: 32, tos: tos}
			if six {
				p.src, p.dst = v6a, v6b
			}
			f := p.build(t)
			s := mustParse(t, `{"rules": [{"packet": {"nth": 1}, "action": "ecn"}]}`)
			if d := s.Decide(0, 0, f); d.Action != ActMark {
				t.Fatalf("decision %+v", d)
			}
			fr, err := bth.ParseFrame(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := fr.TrafficClass(); got != tos|0b11 {
				t.Errorf("tos %#x ipv6 %v: traffic class %#x after, want %#x", tos, six, got, tos|0b11)
			}
			if !six && !ipv4ChecksumOK(f[14:34]) {
				t.Errorf("tos %#x: IPv4 checksum wrong after marking", tos)
			}
			if !fr.VerifyICRC() {
				t.Errorf("tos %#x ipv6 %v: the mark broke the ICRC (it masks the ECN field)", tos, six)
			}
			if e := s.Events(); len(e) != 1 || e[0].Pkt.ECN != tos&3 {
				t.Errorf("event %+v: want the ECN as it arrived", e)
			}
		}
	}
}

func TestCorruptBreaksICRC(t *testing.T) {
	for _, p := range []pkt{
		{op: bth.RCWriteMiddle, payload: 32},
		{op: bth.RCSendOnly, payload: 1},
		{op: bth.RCAcknowledge, syn: bth.AckSyndrome(31), ackReq: true},
		{op: bth.RCReadRequest},
	} {
		f := p.build(t)
		before := Classify(f)
		s := mustParse(t, `{"rules": [{"packet": {"nth": 1}, "action": "corrupt"}]}`)
		if d := s.Decide(0, 0, f); d.Action != ActCorrupt {
			t.Fatalf("%v: decision %+v", p.op, d)
		}
		fr, err := bth.ParseFrame(f)
		if err != nil {
			t.Fatalf("%v: corrupted frame does not parse: %v", p.op, err)
		}
		if fr.VerifyICRC() {
			t.Errorf("%v: ICRC still verifies after corrupt", p.op)
		}
		if after := Classify(f); after != before {
			t.Errorf("%v: corrupt changed what the headers say: %+v, was %+v", p.op, after, before)
		}
	}
}

func TestTraceCap(t *testing.T) {
	s := mustParse(t, `{"rules": [{"packet": {"nth": 1}, "action": "drop"}]}`)
	s.TraceCap = 3
	decideAll(s, writes(t, 1, 2, 3, 4, 5))
	if len(s.Trace()) != 3 || cap(s.Trace()) != 3 || s.TraceDropped() != 2 {
		t.Fatalf("trace %d (cap %d), dropped %d", len(s.Trace()), cap(s.Trace()), s.TraceDropped())
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	s := mustParse(t, `{"rules": [
		{"name": "none", "match": {"kind": "cnp"}, "packet": {"nth": 1}, "action": "drop"},
		{"name": "all", "match": {"dst_qpn": 17}, "packet": {"nth": 1}, "action": "ecn", "count": 1000000}]}`)
	s.TraceCap = 1 << 12
	hit := writes(t, 1)[0]
	miss := pkt{op: bth.RCAcknowledge, src: hostB, dst: hostA, qpn: 5, syn: bth.AckSyndrome(31)}.build(t)
	s.Decide(0, 0, miss) // the first call allocates the trace and the log
	if n := testing.AllocsPerRun(200, func() { s.Decide(0, 0, miss) }); n != 0 {
		t.Errorf("Decide on a frame no rule matches: %v allocations", n)
	}
	if n := testing.AllocsPerRun(200, func() { s.Decide(0, 0, hit) }); n != 0 {
		t.Errorf("Decide on a frame a rule acts on: %v allocations", n)
	}
	if len(s.Events()) != 201 {
		t.Errorf("%d events, want 201", len(s.Events()))
	}
}

// TestPrepareBeforeFirstPacket: after Prepare (a switch calls it before
// it serves), even the first Decide allocates nothing: on real wires the
// first packet once waited for the whole trace's page faults.
func TestPrepareBeforeFirstPacket(t *testing.T) {
	s := mustParse(t, `{"rules": [{"match": {"dst_qpn": 17}, "packet": {"nth": 1}, "action": "drop"}]}`)
	s.TraceCap = 1 << 12
	s.Prepare()
	if len(s.Trace()) != 0 || cap(s.Trace()) != 1<<12 {
		t.Fatalf("after Prepare: trace %d records (cap %d), want 0 (cap %d)", len(s.Trace()), cap(s.Trace()), 1<<12)
	}
	hit := writes(t, 1)[0]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := s.Decide(0, 0, hit)
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Errorf("first Decide after Prepare: %d allocations", n)
	}
	if d.Action != ActDrop || len(s.Trace()) != 1 || s.Trace()[0].Seq != 0 || len(s.Events()) != 1 {
		t.Errorf("decision %+v, trace %+v, events %d", d, s.Trace(), len(s.Events()))
	}
}

func TestNewSetChecks(t *testing.T) {
	if _, err := NewSet([]Rule{{Name: "x", Packet: Position{Nth: 1}, Action: ActDelay, Count: 1}}); err == nil ||
		err.Error() != `rule 0 ("x"): delay 0s: want more than 0` {
		t.Fatalf("err %v", err)
	}
	if _, err := NewSet([]Rule{{Packet: Position{PSNOffset: 3, Iteration: 1}, Action: ActDrop, Count: 1}}); err != nil {
		t.Fatal(err)
	}
}
