package dataplane

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// starBench is a StaR server engine on port B of a lossless fabric, and a
// client played by hand on port A: it builds StaR frames with bth's
// encoders, sends them, polls the server and collects what comes back.
// The server has one stateful QP at RTS, connected to the client's
// address, whose number the StaR packets carry: without StarServer they
// reach it, and with it they must not touch it.
type starBench struct {
	tb         testing.TB
	clock      fabric.FakeClock
	f          *fabric.Fabric
	e          *Engine
	q          *QP
	rw, ro, wo *MR             // remote write and read; remote read only; remote write only
	hdr        bth.FrameHeader // client -> server
	frames     [][]byte
}

type starOpts struct {
	off        bool // StarServer off
	ipv6       bool
	queue      int // B->A frames in flight (0: the fabric's default)
	maxFrame   int // 0: 4096+128, as NewSim
	linkRate   uint64
	linkBurst  int
	egress     int // Config.StarEgressFrames
	clientPort uint16
}

const (
	starReplyQP = 0x0ABCDE
	starMRSize  = 256 << 10
)

func newStarBench(tb testing.TB, o starOpts) *starBench {
	tb.Helper()
	if o.maxFrame == 0 {
		o.maxFrame = 4096 + 128
	}
	b := &starBench{tb: tb, frames: make([][]byte, 128)}
	b.f = fabric.New(&b.clock, 1, fabric.LinkConfig{}, fabric.LinkConfig{QueueFrames: o.queue}, o.maxFrame)
	client, server := SimAddrA, SimAddrB
	if o.ipv6 {
		client, server = SimAddr6A, SimAddr6B
	}
	e, err := NewEngine(Config{MAC: SimMACB, Addr: server, StarServer: !o.off, LinkRate: o.linkRate, LinkBurst: o.linkBurst, StarEgressFrames: o.egress}, b.f.B())
	if err != nil {
		tb.Fatal(err)
	}
	b.e = e
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	pd := e.AllocPD()
	reg := func(access qp.Access, seed uint64) *MR {
		buf := make([]byte, starMRSize)
		fillRandom(buf, seed)
		m, err := e.RegMR(pd, buf, 0, access)
		must(err)
		return m
	}
	b.rw = reg(qp.AccessLocalWrite|qp.AccessRemoteWrite|qp.AccessRemoteRead, 1)
	b.ro = reg(qp.AccessRemoteRead, 2)
	b.wo = reg(qp.AccessLocalWrite|qp.AccessRemoteWrite, 3)
	cq, err := e.CreateCQ(16, nil)
	must(err)
	b.q, err = e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
	must(err)
	must(e.ModifyQP(b.q, &QPAttr{State: qp.Init, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	must(e.ModifyQP(b.q, &QPAttr{State: qp.RTR, AV: AddressVector{DGID: client, DMAC: SimMACA, HopLimit: 64}, PathMTU: qp.MTU1024, DestQPN: 0x11},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer))
	must(e.ModifyQP(b.q, &QPAttr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic))
	if o.clientPort == 0 {
		o.clientPort = 0xC5A1
	}
	// DSCP 26 with a CE mark: the answers must carry ECT(0).
	b.hdr = bth.FrameHeader{SrcMAC: SimMACA, DstMAC: SimMACB, Src: client, Dst: server, SrcPort: o.clientPort, TOS: 26<<2 | 3, TTL: 33, FlowLabel: 0x5A5A5}
	return b
}

// starFrame builds a client frame to the server's QP: BTH, the opcode's
// header as ext writes it (at byte 12, as for every StaR header), payload,
// ICRC.
func (b *starBench) starFrame(op bth.Opcode, psn uint32, ext func([]byte), payload []byte) []byte {
	info := bth.Lookup(op)
	pad := bth.PadFor(len(payload))
	roceLen := info.Length + len(payload) + pad + bth.ICRCLen
	buf := make([]byte, b.hdr.Len()+roceLen)
	off := b.hdr.Encode(buf, roceLen)
	roce := buf[off:]
	// RDP and GD name the client's QP, where the answers go: the server
	// has none to name. The other packets name the server's QP.
	dest := b.q.QPN()
	if op == bth.StarRDP || op == bth.StarGD {
		dest = starReplyQP
	}
	bth.BTH(roce).Encode(&bth.BTHFields{Opcode: op, PadCount: uint8(pad), PKey: defaultPKey, DestQPN: dest, AckReq: true, PSN: psn})
	if ext != nil {
		ext(roce[bth.BTHLen:info.Length])
	}
	copy(roce[info.Length:], payload)
	bth.FinishFrame(buf, &b.hdr)
	return buf
}

func (b *starBench) rdp(psn uint32, f bth.RDPETHFields, payload []byte) []byte {
	return b.starFrame(bth.StarRDP, psn, func(h []byte) { bth.RDPETH(h).Encode(&f) }, payload)
}

func (b *starBench) gd(psn uint32, f bth.GDETHFields) []byte {
	return b.starFrame(bth.StarGD, psn, func(h []byte) { bth.GDETH(h).Encode(&f) }, nil)
}

// exchange sends frames to the server, lets it poll, and returns what it
// sent back (valid until the next exchange).
func (b *starBench) exchange(frames ...[]byte) [][]byte {
	for _, fr := range frames {
		buf := b.f.A().TxBuffer()
		if buf == nil {
			b.tb.Fatal("client's transmit queue full")
		}
		b.f.A().Transmit(copy(buf, fr))
	}
	b.clock.Advance(time.Microsecond)
	for b.e.Poll(b.clock.Now()) {
		b.clock.Advance(time.Microsecond)
	}
	n := b.f.A().Receive(b.frames)
	return b.frames[:n]
}

// snapshot copies every region's bytes.
func (b *starBench) snapshot() [][]byte {
	return [][]byte{bytes.Clone(b.rw.Bytes()), bytes.Clone(b.ro.Bytes()), bytes.Clone(b.wo.Bytes())}
}

func (b *starBench) untouched(before [][]byte) {
	b.tb.Helper()
	for i, m := range []*MR{b.rw, b.ro, b.wo} {
		if !bytes.Equal(before[i], m.Bytes()) {
			b.tb.Fatalf("region %d changed", i)
		}
	}
}

// replyHeader is the addressing every answer must have: the request's
// swapped, its UDP source port, DSCP 26 with ECT(0), hop limit 64, and
// its flow label (IPv6).
func (b *starBench) replyHeader() bth.FrameHeader {
	return bth.FrameHeader{SrcMAC: SimMACB, DstMAC: SimMACA, Src: b.hdr.Dst, Dst: b.hdr.Src, SrcPort: b.hdr.SrcPort, TOS: 26<<2 | 2, FlowLabel: b.hdr.FlowLabel}
}

// wantRA checks that frame is, byte for byte, the STAR_RA with syn to
// starReplyQP with psn, built independently here, and that it parses and
// carries a valid ICRC.
func (b *starBench) wantRA(frame []byte, psn uint32, syn bth.Syndrome) {
	b.tb.Helper()
	f, err := bth.ParseFrame(frame)
	if err != nil {
		b.tb.Fatalf("RA does not parse: %v", err)
	}
	if !f.VerifyICRC() {
		b.tb.Fatal("RA's ICRC is wrong")
	}
	h := b.replyHeader()
	if got := f.Header(); got.SrcMAC != h.SrcMAC || got.DstMAC != h.DstMAC || got.Src != h.Src || got.Dst != h.Dst ||
		got.SrcPort != h.SrcPort || got.TOS != h.TOS || got.TTL != 64 || (f.IPv6 && got.FlowLabel != h.FlowLabel) {
		b.tb.Fatalf("RA's addressing %+v, want %+v", got, h)
	}
	if got, want := f.Pkt.BTH().Fields(), (bth.BTHFields{Opcode: bth.StarRA, PKey: defaultPKey, DestQPN: starReplyQP, PSN: psn}); got != want {
		b.tb.Fatalf("RA's BTH %+v, want %+v", got, want)
	}
	if got := f.Pkt.AETH().Fields(); got != (bth.AETHFields{Syndrome: syn}) {
		b.tb.Fatalf("RA's AETH %v MSN %d, want %v MSN 0", got.Syndrome, got.MSN, syn)
	}
	want := make([]byte, h.Len()+bth.BTHLen+bth.AETHLen+bth.ICRCLen)
	off := h.Encode(want, len(want)-h.Len())
	bth.BTH(want[off:]).Encode(&bth.BTHFields{Opcode: bth.StarRA, PKey: defaultPKey, DestQPN: starReplyQP, PSN: psn})
	bth.AETH(want[off+bth.BTHLen:]).Encode(&bth.AETHFields{Syndrome: syn})
	bth.FinishFrame(want, &h)
	if !bytes.Equal(frame, want) {
		b.tb.Fatalf("RA\n% x\nwant\n% x", frame, want)
	}
}

var (
	starACK       = bth.AckSyndrome(bth.CreditInvalid)
	starNakAccess = bth.NakSyndrome(bth.NakRemoteAccessError)
	starNakInv    = bth.NakSyndrome(bth.NakInvalidRequest)
)

// TestStarRDP: an RDP's payload lands at its VA, and the RA is the RDP's
// frame answered: every field, over IPv4 and IPv6, with a PSN at the
// 24-bit edge and a payload that needs padding.
func TestStarRDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := newStarBench(t, starOpts{ipv6: v6})
		before := b.e.Counters()
		for i, n := range []int{61, 1024, 4096} {
			payload := make([]byte, n)
			fillRandom(payload, uint64(100+i))
			off := 1000 + 7*i
			psn := uint32(0xFFFFFF - i)
			got := b.exchange(b.rdp(psn, bth.RDPETHFields{VA: b.rw.Addr + uint64(off), RKey: b.rw.RKey, Flags: bth.RDPLast}, payload))
			if len(got) != 1 {
				t.Fatalf("%d frames back, want one RA", len(got))
			}
			b.wantRA(got[0], psn, starACK)
			mustEqual(t, "placed payload", b.rw.Bytes()[off:off+n], payload)
		}
		c := b.e.Counters()
		if c.StarRDPRcvd-before.StarRDPRcvd != 3 || c.StarRASent-before.StarRASent != 3 || c.StarNakSent != 0 || c.SentPkts-before.SentPkts != 3 {
			t.Fatalf("counters %+v", c)
		}
	}
}

// TestStarRDPRefused: an RDP with a bad key, a range past its region or a
// region without remote write is NAKed with the RDP's PSN, to the client
// QP its BTH DestQP names, and memory stays as it was.
func TestStarRDPRefused(t *testing.T) {
	b := newStarBench(t, starOpts{})
	payload := make([]byte, 100)
	fillRandom(payload, 7)
	good := bth.RDPETHFields{VA: b.rw.Addr, RKey: b.rw.RKey}
	for _, c := range []struct {
		name string
		edit func(*bth.RDPETHFields)
		want bth.Syndrome
	}{
		{"bad key", func(r *bth.RDPETHFields) { r.RKey ^= 0x1 }, starNakAccess},
		{"unknown region", func(r *bth.RDPETHFields) { r.RKey = 0x7F01 }, starNakAccess},
		{"read-only region", func(r *bth.RDPETHFields) { r.VA, r.RKey = b.ro.Addr, b.ro.RKey }, starNakAccess},
		{"past the end", func(r *bth.RDPETHFields) { r.VA = b.rw.Addr + starMRSize - 99 }, starNakAccess},
		{"before the start", func(r *bth.RDPETHFields) { r.VA = b.rw.Addr - 1 }, starNakAccess},
		{"another region's range", func(r *bth.RDPETHFields) { r.VA = b.wo.Addr }, starNakAccess},
	} {
		r := good
		c.edit(&r)
		before, cnt := b.snapshot(), b.e.Counters()
		got := b.exchange(b.rdp(0x42, r, payload))
		if len(got) != 1 {
			t.Fatalf("%s: %d frames back, want one RA", c.name, len(got))
		}
		b.wantRA(got[0], 0x42, c.want)
		b.untouched(before)
		if after := b.e.Counters(); after.StarNakSent != cnt.StarNakSent+1 || after.StarRASent != cnt.StarRASent+1 {
			t.Fatalf("%s: star_nak_sent %d -> %d, star_ra_sent %d -> %d", c.name, cnt.StarNakSent, after.StarNakSent, cnt.StarRASent, after.StarRASent)
		}
	}
	// A zero-length RDP needs no key (IBA §9.4.3, as for an RDMA WRITE).
	got := b.exchange(b.rdp(0x43, bth.RDPETHFields{RKey: 0xDEAD}, nil))
	if len(got) != 1 {
		t.Fatalf("zero-length RDP: %d frames back", len(got))
	}
	b.wantRA(got[0], 0x43, starACK)
	// A deregistered region's key no longer works.
	if err := b.e.DeregMR(b.wo); err != nil {
		t.Fatal(err)
	}
	before := b.snapshot()
	got = b.exchange(b.rdp(0x44, bth.RDPETHFields{VA: b.wo.Addr, RKey: b.wo.RKey}, payload))
	if len(got) != 1 {
		t.Fatalf("deregistered: %d frames back", len(got))
	}
	b.wantRA(got[0], 0x44, starNakAccess)
	b.untouched(before)
}

// wantSDPs checks that frames are the SDPs of a GD for data in packets of
// mtu from psn: PSNs, offsets, payloads, the addressing and BTH of every
// one, each parsing with a valid ICRC.
func (b *starBench) wantSDPs(frames [][]byte, psn uint32, mtu int, data []byte) {
	b.tb.Helper()
	n := max(1, (len(data)+mtu-1)/mtu) // a GD for 0 bytes gets one empty SDP
	if len(frames) != n {
		b.tb.Fatalf("%d SDPs, want %d", len(frames), n)
	}
	h := b.replyHeader()
	for i, frame := range frames {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			b.tb.Fatalf("SDP %d does not parse: %v", i, err)
		}
		if !f.VerifyICRC() {
			b.tb.Fatalf("SDP %d: ICRC is wrong", i)
		}
		if got := f.Header(); got.SrcMAC != h.SrcMAC || got.DstMAC != h.DstMAC || got.Src != h.Src || got.Dst != h.Dst ||
			got.SrcPort != h.SrcPort || got.TOS != h.TOS || got.TTL != 64 || (f.IPv6 && got.FlowLabel != h.FlowLabel) {
			b.tb.Fatalf("SDP %d's addressing %+v, want %+v", i, got, h)
		}
		off := i * mtu
		k := min(mtu, len(data)-off)
		wantPSN := uint32(qp.PSN(psn).Add(uint32(i)))
		if got, want := f.Pkt.BTH().Fields(), (bth.BTHFields{Opcode: bth.StarSDP, PKey: defaultPKey, DestQPN: starReplyQP, PSN: wantPSN, PadCount: uint8(bth.PadFor(k))}); got != want {
			b.tb.Fatalf("SDP %d's BTH %+v, want %+v", i, got, want)
		}
		if got := f.Pkt.SDPETH().Offset(); got != uint32(off) {
			b.tb.Fatalf("SDP %d's offset %d, want %d", i, got, off)
		}
		mustEqual(b.tb, "SDP payload", f.Pkt.Payload(), data[off:off+k])
		if want := h.Len() + bth.BTHLen + bth.SDPETHLen + k + bth.PadFor(k) + bth.ICRCLen; len(frame) != want {
			b.tb.Fatalf("SDP %d is %d bytes, want %d", i, len(frame), want)
		}
	}
}

// TestStarGD: a GD gets ceil(Length/MTU) SDPs with the GD's PSN counted
// up (across the 24-bit wrap), offsets i*MTU and the region's bytes; the
// last one short, or not; over IPv4 and IPv6.
func TestStarGD(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := newStarBench(t, starOpts{ipv6: v6})
		for _, c := range []struct {
			off, n int
			mtu    qp.MTU
			psn    uint32
		}{
			{100, 3000, qp.MTU1024, 0xFFFFFE}, // 1024, 1024, 952: the wrap between the second and third
			{0, 2048, qp.MTU1024, 5},          // two full packets
			{3, 61, qp.MTU4096, 0x20},         // one short packet, padded
			{1, 65535, qp.MTU4096, 0x100},     // the most a GD asks for: 16 packets
			{7, 1000, qp.MTU256, 0xFFFFFF},    // 4 packets, the last 232 bytes
		} {
			for _, m := range []*MR{b.rw, b.ro} {
				before := b.e.Counters()
				got := b.exchange(b.gd(c.psn, bth.GDETHFields{VA: m.Addr + uint64(c.off), RKey: m.RKey, Length: uint16(c.n), MTU: c.mtu}))
				b.wantSDPs(got, c.psn, c.mtu.Bytes(), m.Bytes()[c.off:c.off+c.n])
				after := b.e.Counters()
				if after.StarGDRcvd != before.StarGDRcvd+1 || after.StarSDPSent != before.StarSDPSent+uint64(len(got)) || after.StarRASent != before.StarRASent || after.StarTxDrops != 0 {
					t.Fatalf("counters before %+v after %+v", before, after)
				}
			}
		}
		// A GD for nothing gets one empty SDP, as a zero-length READ
		// gets one empty response.
		got := b.exchange(b.gd(9, bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, MTU: qp.MTU1024}))
		b.wantSDPs(got, 9, 1024, nil)
		if len(got) != 1 {
			t.Fatalf("zero-length GD: %d frames back", len(got))
		}
	}
}

// TestStarGDRefused: a GD with a bad key, range or access gets an RA NAK
// remote access error with its PSN, one with no valid MTU, or SDPs larger
// than the port carries, an RA NAK invalid request; no SDP goes out.
func TestStarGDRefused(t *testing.T) {
	b := newStarBench(t, starOpts{maxFrame: 2048 + 128})
	good := bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, Length: 3000, MTU: qp.MTU1024}
	for _, c := range []struct {
		name string
		edit func(*bth.GDETHFields)
		want bth.Syndrome
	}{
		{"bad key", func(g *bth.GDETHFields) { g.RKey ^= 0x80 }, starNakAccess},
		{"write-only region", func(g *bth.GDETHFields) { g.VA, g.RKey = b.wo.Addr, b.wo.RKey }, starNakAccess},
		{"past the end", func(g *bth.GDETHFields) { g.VA = b.rw.Addr + starMRSize - 2999 }, starNakAccess},
		{"before the start", func(g *bth.GDETHFields) { g.VA = b.rw.Addr - 8 }, starNakAccess},
		{"MTU 0", func(g *bth.GDETHFields) { g.MTU = 0 }, starNakInv},
		{"MTU 6", func(g *bth.GDETHFields) { g.MTU = 6 }, starNakInv},
		{"SDPs above the port's frame", func(g *bth.GDETHFields) { g.MTU = qp.MTU4096 }, starNakInv},
	} {
		g := good
		c.edit(&g)
		cnt := b.e.Counters()
		got := b.exchange(b.gd(0x777, g))
		if len(got) != 1 {
			t.Fatalf("%s: %d frames back, want one RA", c.name, len(got))
		}
		b.wantRA(got[0], 0x777, c.want)
		if after := b.e.Counters(); after.StarNakSent != cnt.StarNakSent+1 || after.StarSDPSent != cnt.StarSDPSent {
			t.Fatalf("%s: counters before %+v after %+v", c.name, cnt, after)
		}
	}
	// MTU 4096 is fine for a GD whose one SDP fits the port.
	g := good
	g.MTU, g.Length = qp.MTU4096, 2000
	b.wantSDPs(b.exchange(b.gd(1, g)), 1, 4096, b.rw.Bytes()[:2000])
}

// TestStarTxFull: answers that find the transmit ring full, or the
// link's bucket empty, wait in the port's egress queue and go, in order,
// before anything else when there is room; those that find the queue full
// too are dropped and counted, not kept (an RA's RDP is placed: the
// client's retransmission places it again and gets the RA).
func TestStarTxFull(t *testing.T) {
	b := newStarBench(t, starOpts{queue: 4, egress: 2})
	payload := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	rdp := b.rdp(3, bth.RDPETHFields{VA: b.rw.Addr + 8000, RKey: b.rw.RKey}, payload)
	// 8 SDPs into a ring of 4 and a queue of 2, then an RA into the full
	// queue.
	got := b.exchange(b.gd(10, bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, Length: 2048, MTU: qp.MTU256}), rdp)
	b.wantSDPs(got, 10, 256, b.rw.Bytes()[:1024])
	c := b.e.Counters()
	if c.StarSDPSent != 6 || c.StarTxQueued != 2 || c.StarTxDrops != 3 || c.StarRASent != 0 || c.StarRDPRcvd != 1 {
		t.Fatalf("ring of 4, queue of 2: %+v", c)
	}
	mustEqual(t, "placed payload", b.rw.Bytes()[8000:8008], payload)
	// The client took the SDPs: the ring has room again. The queued SDPs
	// 14 and 15 go first, then the RA of the RDP sent again.
	got = b.exchange(rdp)
	if len(got) != 3 {
		t.Fatalf("%d frames after the ring drained, want 2 SDPs and an RA", len(got))
	}
	for i, fr := range got[:2] {
		f, err := bth.ParseFrame(fr)
		if err != nil || !f.VerifyICRC() || f.Pkt.Opcode() != bth.StarSDP || f.Pkt.BTH().PSN() != uint32(14+i) || f.Pkt.SDPETH().Offset() != uint32(1024+256*i) {
			t.Fatalf("frame %d: %v, not SDP %d", i, err, 14+i)
		}
		mustEqual(t, "queued SDP payload", f.Pkt.Payload(), b.rw.Bytes()[1024+256*i:1280+256*i])
	}
	b.wantRA(got[2], 3, starACK)

	// An emulated link with the smallest bucket: one frame goes at once,
	// the other three wait in the queue and go at the link's pace; nothing
	// is dropped.
	b = newStarBench(t, starOpts{linkRate: 1e9, linkBurst: 1})
	got = b.exchange(b.gd(20, bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, Length: 4096, MTU: qp.MTU1024}))
	b.wantSDPs(got, 20, 1024, b.rw.Bytes()[:1024])
	if c := b.e.Counters(); c.StarSDPSent != 4 || c.StarTxQueued != 3 || c.StarTxDrops != 0 || c.TxRingFull != 0 {
		t.Fatalf("empty bucket: %+v", c)
	}
	var all [][]byte
	for range 3 {
		b.clock.Advance(10 * time.Microsecond) // a 1 KiB frame is 8.5 µs at 1 Gb/s
		for _, fr := range b.exchange() {
			all = append(all, bytes.Clone(fr))
		}
	}
	if len(all) != 3 {
		t.Fatalf("%d queued SDPs came out, want 3", len(all))
	}
	for i, fr := range all {
		f, err := bth.ParseFrame(fr)
		if err != nil || f.Pkt.BTH().PSN() != uint32(21+i) || f.Pkt.SDPETH().Offset() != uint32(1024*(i+1)) {
			t.Fatalf("queued frame %d: %v", i, err)
		}
	}
	if d, ok := b.e.NextDeadline(); ok && d <= b.clock.Now() {
		t.Errorf("a deadline %v with nothing queued", d)
	}
}

// TestStarOtherPackets: a CQEP for a QP the server's driver does not
// have is counted and dropped, and a WQEP, an EA of a CQEP, an RA and an
// SDP (a client QP's) go to the QP lookup, which drops them here (no
// client QP); a StaR frame not
// addressed to the server is dropped as rcvd_bad_addr.
func TestStarOtherPackets(t *testing.T) {
	b := newStarBench(t, starOpts{})
	before := b.snapshot()
	frames := [][]byte{
		b.starFrame(bth.StarWQEP, 0, func(h []byte) {
			bth.WQEPETH(h).Encode(&bth.WQEPETHFields{Kind: bth.WQEPRDMAWrite, LocalVA: b.rw.Addr, LocalKey: b.rw.RKey, Length: 8})
		}, nil),
		b.starFrame(bth.StarCQEP, 0, func(h []byte) { bth.CQEPETH(h).Encode(&bth.CQEPETHFields{DriverSeq: 1}) }, nil),
		b.starFrame(bth.StarEA, 0, func(h []byte) { bth.EAETH(h).Encode(&bth.EAETHFields{Kind: bth.EACQEP, DriverSeq: 1}) }, nil),
		b.starFrame(bth.StarRA, 5, func(h []byte) { bth.AETH(h).Encode(&bth.AETHFields{Syndrome: starACK}) }, nil),
		b.starFrame(bth.StarSDP, 5, func(h []byte) { bth.SDPETH(h).SetOffset(0) }, []byte{1, 2, 3}),
	}
	if got := b.exchange(frames...); len(got) != 0 {
		t.Fatalf("%d frames back", len(got))
	}
	b.untouched(before)
	c := b.e.Counters()
	// A CQEP goes to the server's driver, which has no QP 0: dropped. A
	// WQEP, an EA of a CQEP, an RA and an SDP go to a client QP, and this
	// NIC has none.
	if c.StarDropped != 1 || c.RcvdUnknownQPN+c.RcvdBadOpcode != 4 || c.SentPkts != 0 || c.RcvdPkts != 5 {
		t.Fatalf("counters %+v", c)
	}
	// Addressed to another host.
	b.hdr.Dst = netip.MustParseAddr("198.18.9.9")
	fr := b.rdp(1, bth.RDPETHFields{VA: b.rw.Addr, RKey: b.rw.RKey}, []byte{9, 9, 9, 9})
	if got := b.exchange(fr); len(got) != 0 {
		t.Fatalf("wrong address: %d frames back", len(got))
	}
	b.untouched(before)
	if c := b.e.Counters(); c.RcvdBadAddr != 1 || c.StarRDPRcvd != 0 {
		t.Fatalf("wrong address: %+v", c)
	}
}

// TestStarServerOff: without Config.StarServer nothing changes: StaR
// frames go to the QP they name, which drops them as rcvd_bad_opcode, or
// are counted in rcvd_unknown_qpn when no QP has the number (an RDP and a
// GD name the client's QP); nothing is answered or placed.
func TestStarServerOff(t *testing.T) {
	b := newStarBench(t, starOpts{off: true})
	before := b.snapshot()
	rdp := b.rdp(1, bth.RDPETHFields{VA: b.rw.Addr, RKey: b.rw.RKey}, []byte{9, 9, 9, 9})
	gd := b.gd(2, bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, Length: 100, MTU: qp.MTU1024})
	ea := b.starFrame(bth.StarEA, 0, nil, nil)
	if got := b.exchange(rdp, gd, ea); len(got) != 0 {
		t.Fatalf("%d frames back", len(got))
	}
	b.untouched(before)
	c := b.e.Counters()
	if c.RcvdBadOpcode != 1 || c.RcvdUnknownQPN != 2 || c.SentPkts != 0 || c.StarRDPRcvd+c.StarGDRcvd+c.StarDropped+c.StarRASent+c.StarSDPSent != 0 {
		t.Fatalf("counters %+v", c)
	}
	if c.QPCHits+c.QPCMisses == 0 {
		t.Fatal("the EA did not reach the QP's context")
	}
	// An RDP whose client QP number is also one of this NIC's QPs.
	named := bytes.Clone(rdp)
	f, _ := bth.ParseFrame(named)
	f.Pkt.BTH().SetDestQPN(b.q.QPN())
	bth.FinishFrame(named, &b.hdr)
	if got := b.exchange(named); len(got) != 0 {
		t.Fatalf("%d frames back", len(got))
	}
	b.untouched(before)
	if c := b.e.Counters(); c.RcvdBadOpcode != 2 || c.StarRDPRcvd != 0 {
		t.Fatalf("rcvd_bad_opcode %d", c.RcvdBadOpcode)
	}
}

// TestStarZeroState: StaR traffic never touches the context cache (not
// even the context of the QP its packets name) and allocates nothing: an
// RDP -> RA and a GD -> 3 SDPs cycle, warm, costs 0 allocations.
func TestStarZeroState(t *testing.T) {
	b := newStarBench(t, starOpts{})
	payload := make([]byte, 1024)
	fillRandom(payload, 11)
	rdp := b.rdp(1, bth.RDPETHFields{VA: b.rw.Addr + 4096, RKey: b.rw.RKey}, payload)
	gd := b.gd(2, bth.GDETHFields{VA: b.rw.Addr, RKey: b.rw.RKey, Length: 3000, MTU: qp.MTU1024})
	cache := b.e.CacheStats()
	cycle := func() {
		if got := b.exchange(rdp); len(got) != 1 {
			t.Fatalf("%d frames for an RDP", len(got))
		}
		if got := b.exchange(gd); len(got) != 3 {
			t.Fatalf("%d frames for a GD", len(got))
		}
	}
	for range 10 {
		cycle()
	}
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Fatalf("%.1f allocations per RDP->RA, GD->3 SDPs cycle, want 0", allocs)
	}
	c := b.e.Counters()
	if after := b.e.CacheStats(); after.Hits != cache.Hits || after.Misses != cache.Misses || c.QPCHits != cache.Hits || c.QPCMisses != cache.Misses {
		t.Fatalf("context cache moved: %+v -> %+v", cache, after)
	}
	if c.StarRDPRcvd != 111 || c.StarRASent != 111 || c.StarGDRcvd != 111 || c.StarSDPSent != 333 || c.StarNakSent+c.StarTxDrops+c.StarDropped != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// TestStarMutated: StaR frames with random bytes in their headers (and a
// valid ICRC, so that they reach the server path) never panic the server,
// and every one is counted: served, refused with an RA, or dropped.
func TestStarMutated(t *testing.T) {
	b := newStarBench(t, starOpts{})
	payload := make([]byte, 300)
	fillRandom(payload, 5)
	seeds := [][]byte{
		b.rdp(1, bth.RDPETHFields{VA: b.rw.Addr + 64, RKey: b.rw.RKey}, payload),
		b.gd(2, bth.GDETHFields{VA: b.rw.Addr + 64, RKey: b.rw.RKey, Length: 3000, MTU: qp.MTU1024}),
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		frame := bytes.Clone(seeds[i%2])
		off := b.hdr.Len()
		for k := r.IntN(4) + 1; k > 0; k-- {
			// The BTH's opcode stays StaR; the rest of BTH and ETH is fair game.
			j := off + 1 + r.IntN(bth.BTHLen+bth.RDPETHLen-1)
			frame[j] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 {
			frame[off] = byte(bth.StarWQEP) + byte(r.IntN(7))
		}
		f, err := bth.ParseFrame(frame)
		if err != nil {
			continue
		}
		bth.WriteICRC(f.Buf, f.L3Off, f.IPv6)
		b.exchange(frame)
	}
	c := b.e.Counters()
	// RAs and SDPs go to the QP lookup: no such QP, or not a client QP.
	if c.StarRDPRcvd+c.StarGDRcvd+c.StarDropped+c.RcvdPKeyErr+c.RcvdUnknownQPN+c.RcvdBadOpcode+c.RcvdBadAddr != c.RcvdPkts || c.RcvdPkts < 10000 || c.StarNakSent == 0 || c.StarSDPSent == 0 {
		t.Fatalf("counters %+v", c)
	}
	t.Logf("%d frames: %d RDPs, %d GDs, %d others, %d RAs or SDPs to no client QP, %d P_Key errors; %d RAs (%d NAKs), %d SDPs", c.RcvdPkts, c.StarRDPRcvd, c.StarGDRcvd, c.StarDropped, c.RcvdUnknownQPN+c.RcvdBadOpcode+c.RcvdBadAddr, c.RcvdPKeyErr, c.StarRASent, c.StarNakSent, c.StarSDPSent)
}
