package xswitch

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
)

// memPort is an in-memory port: frames to receive are pushed into rx, and
// transmitted ones are kept in tx (or only counted, with discard).
type memPort struct {
	rx       [][]byte
	tx       [][]byte
	txTimes  []time.Duration // the test's clock when each was transmitted
	now      *time.Duration
	ring     int // transmitted and not flushed; TxBuffer refuses at cap
	cap      int // 0: no limit
	discard  bool
	sent     int
	buf      []byte
	maxFrame int
}

func newMemPort(now *time.Duration) *memPort {
	return &memPort{now: now, maxFrame: 1514, buf: make([]byte, 1514)}
}

func (p *memPort) Receive(frames [][]byte) int {
	n := copy(frames, p.rx)
	p.rx = p.rx[:copy(p.rx, p.rx[n:])]
	return n
}

func (p *memPort) TxBuffer() []byte {
	if p.cap > 0 && p.ring >= p.cap {
		return nil
	}
	return p.buf
}

func (p *memPort) Transmit(n int) {
	p.ring++
	p.sent++
	if p.discard {
		return
	}
	p.tx = append(p.tx, bytes.Clone(p.buf[:n]))
	p.txTimes = append(p.txTimes, *p.now)
}

func (p *memPort) Flush()        { p.ring = 0 }
func (p *memPort) MaxFrame() int { return p.maxFrame }

var (
	macA      = [6]byte{0x02, 0, 0, 0, 0, 0xa}
	macB      = [6]byte{0x02, 0, 0, 0, 0, 0xb}
	macSw     = [3][6]byte{{0x02, 0x5e, 0, 0, 0, 0}, {0x02, 0x5e, 0, 0, 0, 1}, {0x02, 0x5e, 0, 0, 0, 2}}
	hostA     = netip.MustParseAddr("198.18.0.2")
	hostB     = netip.MustParseAddr("198.18.1.2")
	hostA6    = netip.MustParseAddr("2001:db8::2")
	hostB6    = netip.MustParseAddr("2001:db8:1::2")
	netB      = netip.MustParsePrefix("198.18.1.0/24")
	netA      = netip.MustParsePrefix("198.18.0.0/24")
	netB6     = netip.MustParsePrefix("2001:db8:1::/64")
	testRoute = []Route{{Prefix: netA, Port: 0, MAC: macA, HasMAC: true}, {Prefix: netB, Port: 1, MAC: macB, HasMAC: true},
		{Prefix: netB6, Port: 1, MAC: macB, HasMAC: true}}
)

// roceFrame is a valid RoCEv2 SEND Only frame from A to dst with payload
// bytes, its IP ECN field ecn, addressed to the switch's port 0.
func roceFrame(tb testing.TB, src, dst netip.Addr, payload int, ecn uint8, ttl uint8) []byte {
	tb.Helper()
	h := bth.FrameHeader{SrcMAC: macA, DstMAC: macSw[0], Src: src, Dst: dst, SrcPort: 49152, TOS: 0x68 | ecn, TTL: ttl, FlowLabel: 0x12345}
	pad := bth.PadFor(payload)
	roce := bth.BTHLen + payload + pad + bth.ICRCLen
	f := make([]byte, h.Len()+roce)
	off := h.Encode(f, roce)
	bth.BTH(f[off:]).Encode(&bth.BTHFields{Opcode: bth.RCSendOnly, PadCount: uint8(pad), PKey: 0xffff, DestQPN: 0x11, PSN: 7})
	for i := range payload {
		f[off+bth.BTHLen+i] = byte(i)
	}
	bth.FinishFrame(f, &h)
	return f
}

type rig struct {
	now   time.Duration
	ports []*memPort
	sw    *Switch
}

func newRig(tb testing.TB, n int, q netsw.Config, rates []uint64, mod func(*Config)) *rig {
	tb.Helper()
	r := &rig{}
	cfg := Config{Routes: testRoute, Queues: q, Priority: DefaultPriority}
	for i := range n {
		p := newMemPort(&r.now)
		r.ports = append(r.ports, p)
		var rate uint64
		if i < len(rates) {
			rate = rates[i]
		}
		cfg.Ports = append(cfg.Ports, PortConfig{Port: p, MAC: macSw[i], RateBps: rate})
	}
	if mod != nil {
		mod(&cfg)
	}
	sw, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	r.sw = sw
	return r
}

// bigBuffer queues without PFC or ECN: 10 MB per port, egress charged.
func bigBuffer() netsw.Config {
	return netsw.Config{Buffer: netsw.Buffer{PortBytes: 10_000_000}}
}

// run polls at every deadline Poll asks for until it has nothing due, or
// until the clock passes end.
func (r *rig) run(end time.Duration) {
	for {
		next := r.sw.Poll(r.now)
		if next == Never || next > end {
			return
		}
		r.now = max(next, r.now)
	}
}

// ipv4ChecksumOK verifies the IPv4 header checksum of an untagged frame.
func ipv4ChecksumOK(f []byte) bool {
	ihl := int(f[14]&0x0f) * 4
	var sum uint32
	for i := 14; i < 14+ihl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

func TestForwardRewritesIPv4(t *testing.T) {
	r := newRig(t, 2, bigBuffer(), nil, nil)
	in := roceFrame(t, hostA, hostB, 256, 0, 64)
	r.ports[0].rx = append(r.ports[0].rx, bytes.Clone(in))
	r.run(0)
	if len(r.ports[1].tx) != 1 {
		t.Fatalf("port 1 sent %d frames, want 1", len(r.ports[1].tx))
	}
	out := r.ports[1].tx[0]
	if [6]byte(out[0:6]) != macB || [6]byte(out[6:12]) != macSw[1] {
		t.Errorf("MACs dst %x src %x, want %x %x", out[0:6], out[6:12], macB, macSw[1])
	}
	if out[14+8] != 63 {
		t.Errorf("TTL %d, want 63", out[14+8])
	}
	if !ipv4ChecksumOK(out) {
		t.Errorf("IPv4 header checksum %#04x does not verify", binary.BigEndian.Uint16(out[24:]))
	}
	// Only the MACs, the TTL and the checksum changed.
	want := bytes.Clone(in)
	copy(want[0:12], out[0:12])
	want[22] = 63
	copy(want[24:26], out[24:26])
	if !bytes.Equal(out, want) {
		t.Errorf("other bytes changed:\n got %x\nwant %x", out, want)
	}
	f, err := bth.ParseFrame(out)
	if err != nil {
		t.Fatal(err)
	}
	if !f.VerifyICRC() {
		t.Error("ICRC does not hold after forwarding")
	}
	c := r.sw.Snapshot()
	if c.Total.RxFrames != 1 || c.Total.TxFrames != 1 || c.Ports[0].RxFrames != 1 || c.Ports[1].TxFrames != 1 || c.Ports[1].Queue.Enqueued != 1 {
		t.Errorf("counters %+v", c.Total)
	}
}

func TestForwardRewritesIPv6(t *testing.T) {
	r := newRig(t, 2, bigBuffer(), nil, nil)
	in := roceFrame(t, hostA6, hostB6, 100, 0, 2)
	r.ports[0].rx = append(r.ports[0].rx, bytes.Clone(in))
	r.run(0)
	if len(r.ports[1].tx) != 1 {
		t.Fatalf("port 1 sent %d frames, want 1", len(r.ports[1].tx))
	}
	out := r.ports[1].tx[0]
	want := bytes.Clone(in)
	copy(want[0:6], macB[:])
	copy(want[6:12], macSw[1][:])
	want[14+7] = 1
	if !bytes.Equal(out, want) {
		t.Errorf("got %x\nwant %x", out, want)
	}
	f, err := bth.ParseFrame(out)
	if err != nil {
		t.Fatal(err)
	}
	if !f.VerifyICRC() {
		t.Error("ICRC does not hold after forwarding")
	}
	// The hop limit is not in UDP's pseudo-header: the checksum holds.
	ip := out[14:]
	sum := uint32(17) + uint32(binary.BigEndian.Uint16(ip[4:]))
	for i := 8; i < len(ip); i += 2 {
		if i+1 < len(ip) {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		} else {
			sum += uint32(ip[i]) << 8
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv6 UDP checksum does not verify (sum %#x)", sum)
	}
}

func TestLongestPrefixMatch(t *testing.T) {
	routes := []Route{
		{Prefix: netip.MustParsePrefix("198.18.0.0/15"), Port: 0, MAC: macA, HasMAC: true},
		{Prefix: netip.MustParsePrefix("198.18.1.128/25"), Port: 2, MAC: macB, HasMAC: true},
		{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Port: 1, MAC: macB, HasMAC: true},
	}
	r := newRig(t, 3, bigBuffer(), nil, func(c *Config) { c.Routes = routes })
	for _, tc := range []struct {
		dst  string
		port int
	}{{"198.18.1.2", 1}, {"198.18.1.200", 2}, {"198.19.7.7", 0}, {"198.18.1.127", 1}} {
		before := [3]int{len(r.ports[0].tx), len(r.ports[1].tx), len(r.ports[2].tx)}
		r.ports[1].rx = append(r.ports[1].rx, roceFrame(t, hostA, netip.MustParseAddr(tc.dst), 8, 0, 64))
		r.run(r.now)
		for p := range 3 {
			got := len(r.ports[p].tx) - before[p]
			if want := map[bool]int{true: 1}[p == tc.port]; got != want {
				t.Errorf("%s: port %d sent %d, want %d", tc.dst, p, got, want)
			}
		}
	}
	r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, netip.MustParseAddr("10.0.0.1"), 8, 0, 64))
	r.run(r.now)
	if c := r.sw.Snapshot(); c.Total.NoRoute != 1 || c.Ports[0].NoRoute != 1 {
		t.Errorf("no_route %d (port 0: %d), want 1", c.Total.NoRoute, c.Ports[0].NoRoute)
	}
}

func TestDropsByReason(t *testing.T) {
	known := map[netip.Addr][6]byte{hostB: macB}
	var asked []netip.Addr
	r := newRig(t, 2, bigBuffer(), nil, func(c *Config) {
		c.Routes = []Route{{Prefix: netB, Port: 1}, {Prefix: netA, Port: 0}}
		c.Neighbour = func(port int, a netip.Addr) ([6]byte, bool) {
			asked = append(asked, a)
			m, ok := known[a]
			return m, ok
		}
	})
	send := func(f []byte) { r.ports[0].rx = append(r.ports[0].rx, f); r.run(r.now) }
	send(roceFrame(t, hostA, hostB, 8, 0, 1))                                // TTL expired
	send(roceFrame(t, hostA, hostB, 8, 0, 0))                                // TTL 0 is encoded as 64 by bth: forwarded
	send(roceFrame(t, hostA, netip.MustParseAddr("198.18.1.9"), 8, 0, 64))   // no neighbour
	send([]byte{1, 2, 3})                                                    // malformed
	send(append(make([]byte, 12), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1))       // ARP: not IP
	send(append(make([]byte, 12), 0x88, 0x08, 0x00, 0x01, 0, 0, 0xff, 0xff)) // 802.3x PAUSE
	r.ports[1].maxFrame = 100
	send(roceFrame(t, hostA, hostB, 100, 0, 64)) // too big for port 1
	c := r.sw.Snapshot().Ports[0]
	if c.TooBig != 1 || c.TTLExpired != 1 || c.NoNeighbour != 1 || c.Malformed != 1 || c.NotIP != 1 || c.MACControlOther != 1 {
		t.Errorf("counters %+v", c)
	}
	if len(r.ports[1].tx) != 1 {
		t.Errorf("port 1 sent %d, want 1", len(r.ports[1].tx))
	}
	if len(asked) != 2 || asked[1] != netip.MustParseAddr("198.18.1.9") {
		t.Errorf("neighbour lookups %v", asked)
	}
}

func TestChecksumUpdate(t *testing.T) {
	// Every TTL from 2 to 255 with a few other headers: the incremental
	// update equals a full recomputation.
	for _, tos := range []uint8{0, 2, 0xff} {
		for ttl := 2; ttl < 256; ttl++ {
			f := roceFrame(t, hostA, netip.AddrFrom4([4]byte{198, 18, 1, byte(ttl)}), ttl, tos&3, uint8(ttl))
			ip := f[14:34]
			old := binary.BigEndian.Uint16(ip[8:])
			ip[8]--
			sum := netsw.ChecksumUpdate(binary.BigEndian.Uint16(ip[10:]), old, binary.BigEndian.Uint16(ip[8:]))
			binary.BigEndian.PutUint16(ip[10:], 0)
			var full uint32
			for i := 0; i < 20; i += 2 {
				full += uint32(binary.BigEndian.Uint16(ip[i:]))
			}
			for full>>16 != 0 {
				full = full&0xffff + full>>16
			}
			if want := ^uint16(full); sum != want {
				t.Fatalf("ttl %d: incremental %#04x, full %#04x", ttl, sum, want)
			}
		}
	}
}

// TestPacingRate: 200 frames queued at once leave port 1 exactly at its
// rate, each frame costing its wire bytes (preamble, FCS, gap, padding).
func TestPacingRate(t *testing.T) {
	const rate = 1_000_000_000
	r := newRig(t, 2, bigBuffer(), []uint64{0, rate}, nil)
	const n = 200
	sizes := []int{8, 1000, 200} // a 60-byte frame is padded to 64
	var wantBits []uint64
	var bits uint64
	for i := range n {
		f := roceFrame(t, hostA, hostB, sizes[i%len(sizes)], 0, 64)
		r.ports[0].rx = append(r.ports[0].rx, f)
		wantBits = append(wantBits, bits)
		bits += uint64(dataplane.WireBytes(len(f))) * 8
	}
	r.now = time.Millisecond
	r.run(time.Second)
	p := r.ports[1]
	if len(p.tx) != n {
		t.Fatalf("sent %d, want %d", len(p.tx), n)
	}
	for i, at := range p.txTimes {
		// Frame i starts when the bits before it have left: rounded up
		// to the nanosecond.
		want := time.Millisecond + time.Duration((wantBits[i]*1e9+rate-1)/rate)
		if at != want {
			t.Fatalf("frame %d left at %v, want %v", i, at, want)
		}
	}
	if r.sw.Poll(r.now) != Never {
		t.Error("nothing queued, yet Poll asks to run")
	}
}

// TestPacingLateLoop: a loop that wakes late still sends at the rate
// (it catches up back to back), as long as it is within catchUp.
func TestPacingLateLoop(t *testing.T) {
	const rate = 10_000_000_000
	r := newRig(t, 2, bigBuffer(), []uint64{0, rate}, nil)
	var bits uint64
	for range 400 {
		f := roceFrame(t, hostA, hostB, 1000, 0, 64)
		r.ports[0].rx = append(r.ports[0].rx, f)
		bits += uint64(dataplane.WireBytes(len(f))) * 8
	}
	for r.sw.Poll(r.now) != Never {
		r.now += 7 * time.Microsecond // every poll 7 µs apart, whatever it asked
	}
	end := time.Duration(bits * 1e9 / rate)
	if r.now > end+7*time.Microsecond {
		t.Errorf("400 frames took %v, the line %v", r.now, end)
	}
}

func TestPFCPauseAndResume(t *testing.T) {
	q := netsw.Config{Buffer: netsw.Buffer{PortBytes: 100_000, Ingress: true},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 10_000, XONBytes: 4_000, HeadroomBytes: 20_000, Quanta: 1234}}
	const rate = 1_000_000_000
	r := newRig(t, 2, q, []uint64{rate, rate}, nil)
	f := roceFrame(t, hostA, hostB, 1000, 0, 64) // 1074 bytes
	for range 12 {
		r.ports[0].rx = append(r.ports[0].rx, bytes.Clone(f))
	}
	r.sw.Poll(0)
	// One went out at once; 11 queued (11814 bytes) passed XOFF.
	a := r.ports[0]
	if len(a.tx) != 1 {
		t.Fatalf("port 0 sent %d frames, want a pause", len(a.tx))
	}
	pf, err := netsw.ParsePFC(a.tx[0])
	if err != nil {
		t.Fatal(err)
	}
	if pf.Src != macSw[0] || pf.Enable != 1<<3 || pf.Quanta[3] != 1234 {
		t.Errorf("pause %+v, want from %x, priority 3, 1234 quanta", pf, macSw[0])
	}
	r.run(time.Second)
	if len(a.tx) != 2 {
		t.Fatalf("port 0 sent %d frames, want a pause and a resume", len(a.tx))
	}
	pf, err = netsw.ParsePFC(a.tx[1])
	if err != nil || pf.Enable != 1<<3 || pf.Quanta[3] != 0 {
		t.Errorf("resume %+v, %v", pf, err)
	}
	// The resume goes when the port's ingress bytes fall to XON: 3
	// frames (3222 bytes) left, so after the 9th frame started.
	if got, want := a.txTimes[1], r.ports[1].txTimes[8]; got != want {
		t.Errorf("resume at %v, want %v (9th frame)", got, want)
	}
	if c := r.sw.Snapshot().Ports[0]; c.Queue.PausesSent != 1 || c.Queue.ResumesSent != 1 || c.PFCTxFrames != 2 {
		t.Errorf("counters %+v", c)
	}
}

// TestPFCRefresh: a pause in force is sent again at half its time.
func TestPFCRefresh(t *testing.T) {
	q := netsw.Config{Buffer: netsw.Buffer{PortBytes: 100_000, Ingress: true},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 1_000, XONBytes: 500, HeadroomBytes: 50_000, Quanta: 100}}
	const rate = 1_000_000_000
	r := newRig(t, 2, q, []uint64{rate, rate}, nil)
	// Port 1 is paused by its partner for a long time: nothing drains.
	r.ports[1].rx = append(r.ports[1].rx, pfcFrame(0xffff))
	for range 3 {
		r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 1000, 0, 64))
	}
	r.sw.Poll(0)
	half := netsw.QuantaTime(100, rate) / 2
	if next := r.sw.Poll(0); next != half {
		t.Fatalf("next %v, want the refresh at %v", next, half)
	}
	r.now = half
	r.sw.Poll(r.now)
	if n := len(r.ports[0].tx); n != 2 {
		t.Fatalf("port 0 sent %d PFC frames, want 2", n)
	}
}

func pfcFrame(quanta uint16) []byte {
	pf := netsw.PausePriority(macB, DefaultPriority, quanta)
	b := make([]byte, netsw.PFCFrameLen)
	pf.Encode(b)
	return b
}

// TestPauseReceived: a PFC frame received on port 1 stops its egress for
// exactly quanta × 512 bit times at its rate; a resume ends it early.
func TestPauseReceived(t *testing.T) {
	const rate = 1_000_000_000
	r := newRig(t, 2, bigBuffer(), []uint64{0, rate}, nil)
	r.now = 5 * time.Microsecond
	r.ports[1].rx = append(r.ports[1].rx, pfcFrame(1000))
	r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 100, 0, 64))
	next := r.sw.Poll(r.now)
	until := r.now + netsw.QuantaTime(1000, rate) // 512 µs
	if next != until || len(r.ports[1].tx) != 0 {
		t.Fatalf("next %v, sent %d; want %v, 0", next, len(r.ports[1].tx), until)
	}
	r.now = until - 1
	r.sw.Poll(r.now)
	if len(r.ports[1].tx) != 0 {
		t.Fatal("sent before the pause ended")
	}
	r.now = until
	r.sw.Poll(r.now)
	if len(r.ports[1].tx) != 1 {
		t.Fatal("not sent when the pause ended")
	}
	// A pause for another priority is ignored; a resume ends a pause.
	other := netsw.PausePriority(macB, 5, 0xffff)
	ob := make([]byte, 60)
	other.Encode(ob)
	r.ports[1].rx = append(r.ports[1].rx, ob, pfcFrame(0xffff))
	r.sw.Poll(r.now)
	r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 100, 0, 64))
	r.now += 10 * time.Microsecond // the line is free again, the pause holds
	if r.sw.Poll(r.now); len(r.ports[1].tx) != 1 {
		t.Fatal("sent while paused")
	}
	r.ports[1].rx = append(r.ports[1].rx, pfcFrame(0))
	r.sw.Poll(r.now)
	if len(r.ports[1].tx) != 2 {
		t.Errorf("not sent after the resume")
	}
	c := r.sw.Snapshot().Ports[1]
	if c.Queue.PausesReceived != 2 || c.Queue.ResumesReceived != 1 || c.PFCOtherPriority != 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestECNMarking: netsw marks ECT frames that find the queue above Kmax.
func TestECNMarking(t *testing.T) {
	q := bigBuffer()
	q.ECN = netsw.ECN{Enabled: true, KminBytes: 1000, KmaxBytes: 2000, Pmax: 1}
	r := newRig(t, 2, q, []uint64{0, 1_000_000_000}, nil)
	for range 5 {
		r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 1000, 2, 64)) // ECT(0)
	}
	r.run(time.Second)
	var marks []uint8
	for _, f := range r.ports[1].tx {
		marks = append(marks, f[15]&3)
		if !ipv4ChecksumOK(f) {
			t.Error("checksum broken by marking")
		}
		pf, _ := bth.ParseFrame(f)
		if !pf.VerifyICRC() {
			t.Error("ICRC broken by marking")
		}
	}
	// All five are queued in one poll: the first finds the queue empty
	// (not marked), the second 1074 bytes (between Kmin and Kmax: marked
	// with probability 7.4%), the others more than Kmax (marked).
	if marks[0] != 2 || marks[2] != 3 || marks[3] != 3 || marks[4] != 3 {
		t.Errorf("ECN fields %v", marks)
	}
	if c := r.sw.Snapshot().Total; c.Queue.ECNMarked < 3 {
		t.Errorf("ecn_marked %d", c.Queue.ECNMarked)
	}
}

func TestInject(t *testing.T) {
	set, err := inject.NewSet([]inject.Rule{
		{Name: "drop", Packet: inject.Position{Nth: 1}, Action: inject.ActDrop, Count: 1},
		{Name: "dup", Packet: inject.Position{Nth: 2}, Action: inject.ActDuplicate, Count: 1},
		{Name: "late", Packet: inject.Position{Nth: 3}, Action: inject.ActDelay, Delay: 10 * time.Microsecond, Count: 1},
		{Name: "ce", Packet: inject.Position{Nth: 4}, Action: inject.ActMark, Count: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 2, bigBuffer(), []uint64{0, 0}, func(c *Config) { c.Inject = set })
	for range 4 {
		r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 10, 0, 64))
	}
	next := r.sw.Poll(0)
	if len(r.ports[1].tx) != 3 || next != 10*time.Microsecond {
		t.Fatalf("sent %d, next %v: want the duplicate pair and the marked one, then 10µs", len(r.ports[1].tx), next)
	}
	if ecn := r.ports[1].tx[2][15] & 3; ecn != 3 || !ipv4ChecksumOK(r.ports[1].tx[2]) {
		t.Errorf("4th frame: ECN %d, checksum ok %v", ecn, ipv4ChecksumOK(r.ports[1].tx[2]))
	}
	r.now = next
	r.sw.Poll(r.now)
	if len(r.ports[1].tx) != 4 || r.ports[1].txTimes[3] != 10*time.Microsecond {
		t.Errorf("delayed frame not sent at 10µs")
	}
	c := r.sw.Snapshot().Total
	if c.InjectDropped != 1 || c.InjectDuplicated != 1 || c.InjectDelayed != 1 || c.InjectMarked != 1 {
		t.Errorf("counters %+v", c)
	}
	if len(set.Events()) != 4 || len(set.Trace()) != 4 || set.Trace()[0].InPort != 0 {
		t.Errorf("events %d, trace %d", len(set.Events()), len(set.Trace()))
	}
}

func TestTxRingFull(t *testing.T) {
	r := newRig(t, 2, bigBuffer(), nil, nil)
	r.ports[1].cap = 1
	for range 3 {
		r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 10, 0, 64))
	}
	next := r.sw.Poll(0)
	if len(r.ports[1].tx) != 1 || next != txBlockedRetry {
		t.Fatalf("sent %d, next %v", len(r.ports[1].tx), next)
	}
	r.run(time.Second)
	if len(r.ports[1].tx) != 3 {
		t.Errorf("sent %d, want 3", len(r.ports[1].tx))
	}
}

func TestCountersAll(t *testing.T) {
	r := newRig(t, 2, bigBuffer(), nil, nil)
	r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 10, 0, 64))
	r.run(0)
	c := r.sw.Snapshot()
	got := map[string]uint64{}
	for name, v := range c.All() {
		if _, dup := got[name]; dup {
			t.Errorf("%s twice", name)
		}
		got[name] = v
	}
	for name, want := range map[string]uint64{"rx_frames": 1, "tx_frames": 1, "forwarded": 1, "port0_rx_frames": 1,
		"port1_tx_frames": 1, "port1_forwarded": 1, "no_route": 0, "ttl_expired": 0, "pauses_sent": 0, "ecn_marked": 0} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %d (present %v), want %d", name, v, ok, want)
		}
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	q := bigBuffer()
	q.ECN = netsw.DefaultECN()
	r := newRig(t, 2, q, []uint64{0, 100_000_000_000}, nil)
	r.ports[1].discard = true
	f := roceFrame(t, hostA, hostB, 1024, 2, 64)
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = bytes.Clone(f)
	}
	step := func() {
		for _, b := range batch {
			b[22] = 64 // the TTL, as it arrived
			r.ports[0].rx = append(r.ports[0].rx, b)
		}
		for {
			next := r.sw.Poll(r.now)
			if next == Never {
				break
			}
			r.now = max(next, r.now)
		}
	}
	for range 10 {
		step()
	}
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("%v allocations per 16 frames", n)
	}
}

// BenchmarkForward is one frame through the core: received on port 0,
// routed, rewritten, queued, dequeued and copied to port 1 (unpaced).
func BenchmarkForward(b *testing.B) {
	q := bigBuffer()
	q.ECN = netsw.DefaultECN()
	r := newRig(b, 2, q, nil, nil)
	r.ports[1].discard = true
	f := roceFrame(b, hostA, hostB, 1024, 2, 64)
	batch := make([][]byte, RxBatch)
	for i := range batch {
		batch[i] = bytes.Clone(f)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	b.ResetTimer()
	for i := 0; i < b.N; i += RxBatch {
		for _, fr := range batch {
			fr[22] = 64
		}
		r.ports[0].rx = append(r.ports[0].rx[:0], batch...)
		r.sw.Poll(r.now)
	}
}

// TestOccupancyAfter: the queue percentiles count only the frames that
// arrive OccupancyAfter after the first was queued. Five frames queued at
// once find 0..4 frames ahead (p99 about 4 frames); after the reset, two
// frames into an empty queue find 0 and 1 frame.
func TestOccupancyAfter(t *testing.T) {
	r := newRig(t, 2, bigBuffer(), []uint64{0, 1_000_000_000}, func(c *Config) { c.OccupancyAfter = time.Millisecond })
	for range 5 {
		r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 1000, 0, 64))
	}
	r.run(time.Second)
	before := r.sw.Snapshot().Ports[1].QueueP99Bytes
	if before < 4*1000 {
		t.Fatalf("p99 before the reset %d B, want 4 frames or more", before)
	}
	r.now = 2 * time.Millisecond
	r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 1000, 0, 64), roceFrame(t, hostA, hostB, 1000, 0, 64))
	r.run(time.Second)
	c := r.sw.Snapshot()
	if got := c.Ports[1].QueueP99Bytes; got < 1000 || got >= 2000 {
		t.Errorf("p99 after the reset %d B, want one frame's bytes (two frames into an empty queue)", got)
	}
	if c.Ports[1].Queue.Enqueued != 7 {
		t.Errorf("forwarded %d, want 7: the reset must not touch the counters", c.Ports[1].Queue.Enqueued)
	}
}

// TestCatchUpBound: a late loop catches up at most 64 full frames' time
// (or 50 µs on a fast port): at 200 Mbit/s 64 frames of 1538 wire bytes
// take 3.93728 ms; at 100 Gbit/s 7.9 µs, so 50 µs.
func TestCatchUpBound(t *testing.T) {
	if got, want := catchUp(200_000_000), 3937280*time.Nanosecond; got != want {
		t.Errorf("200 Mbit/s: %v, want %v", got, want)
	}
	if got := catchUp(100_000_000_000); got != minCatchUp {
		t.Errorf("100 Gbit/s: %v, want %v", got, minCatchUp)
	}
	// A loop asleep 2 ms on a backlogged 200 Mbit/s port loses nothing.
	const rate = 200_000_000
	r := newRig(t, 2, bigBuffer(), []uint64{0, rate}, nil)
	var bits uint64
	for range 100 {
		f := roceFrame(t, hostA, hostB, 1000, 0, 64)
		r.ports[0].rx = append(r.ports[0].rx, f)
		bits += uint64(dataplane.WireBytes(len(f))) * 8
	}
	for r.sw.Poll(r.now) != Never {
		r.now += 2 * time.Millisecond
	}
	end := time.Duration(bits * 1e9 / rate)
	if r.now > end+2*time.Millisecond {
		t.Errorf("100 frames polled every 2 ms took %v, the line %v", r.now, end)
	}
}

// TestRxOrderTurns: frames that several ports hold at one Poll are
// queued one port's at a time in turn, from a port that turns every Poll,
// so that no port's frames always find the shorter queue. Ports 0 and 2
// each hold two frames for B (port 1) per Poll (10 and 200 bytes of
// payload); at port 1 they interleave, and which of the two comes first
// is not always the same.
func TestRxOrderTurns(t *testing.T) {
	r := newRig(t, 3, bigBuffer(), nil, nil)
	firsts := map[int]int{}
	for range 6 {
		for range 2 {
			r.ports[0].rx = append(r.ports[0].rx, roceFrame(t, hostA, hostB, 10, 0, 64))
			r.ports[2].rx = append(r.ports[2].rx, roceFrame(t, hostA, hostB, 200, 0, 64))
		}
		before := len(r.ports[1].tx)
		r.sw.Poll(r.now)
		var order []int
		for _, f := range r.ports[1].tx[before:] {
			if len(f) < 100 { // the 10-byte payload came in on port 0
				order = append(order, 0)
			} else {
				order = append(order, 2)
			}
		}
		if len(order) != 4 || order[0] == order[1] || order[1] == order[2] || order[2] == order[3] {
			t.Fatalf("one Poll queued %v: want the two ports interleaved", order)
		}
		firsts[order[0]]++
	}
	if firsts[0] == 0 || firsts[2] == 0 {
		t.Errorf("the same port came first in every Poll: %v", firsts)
	}
}
