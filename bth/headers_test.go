package bth_test

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/bth"
)

func TestBTHEncodeLayout(t *testing.T) {
	b := make(bth.BTH, bth.BTHLen)
	for i := range b {
		b[i] = 0xaa // Encode must overwrite everything, reserved bits with 0
	}
	b.Encode(&bth.BTHFields{
		Opcode: bth.RCWriteOnlyImm, SolicitedEvent: true, MigReq: false, PadCount: 2,
		TVer: 0, PKey: 0x8001, FECN: true, BECN: false, DestQPN: 0x123456,
		AckReq: true, PSN: 0xabcdef,
	})
	want := []byte{0x0b, 0xa0, 0x80, 0x01, 0x80, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef}
	if !bytes.Equal(b, want) {
		t.Fatalf("Encode = % x, want % x", []byte(b), want)
	}
}

func TestBTHFieldsRoundTrip(t *testing.T) {
	for _, f := range []bth.BTHFields{
		{},
		{Opcode: bth.UDSendOnlyImm, SolicitedEvent: true, MigReq: true, PadCount: 3, TVer: 15,
			PKey: 0xffff, FECN: true, BECN: true, DestQPN: 0xffffff, AckReq: true, PSN: 0xffffff},
		{Opcode: bth.RCReadRequest, MigReq: true, PadCount: 1, PKey: 0x7fff, BECN: true,
			DestQPN: 1, PSN: 0x800000},
	} {
		b := make(bth.BTH, bth.BTHLen)
		b.Encode(&f)
		if got := b.Fields(); got != f {
			t.Errorf("Fields() = %+v, want %+v", got, f)
		}
	}
}

// Each setter changes its field and nothing else, from an all-zero and from
// an all-ones header.
func TestBTHSettersIsolated(t *testing.T) {
	type setter struct {
		name string
		set  func(bth.BTH)
		mask []byte // the bits the setter may change
	}
	setters := []setter{
		{"Opcode", func(b bth.BTH) { b.SetOpcode(^b.Opcode()) }, []byte{0: 0xff}},
		{"SE", func(b bth.BTH) { b.SetSolicitedEvent(!b.SolicitedEvent()) }, []byte{1: 0x80}},
		{"MigReq", func(b bth.BTH) { b.SetMigReq(!b.MigReq()) }, []byte{1: 0x40}},
		{"PadCount", func(b bth.BTH) { b.SetPadCount(b.PadCount() ^ 3 | 0xfc) }, []byte{1: 0x30}},
		{"TVer", func(b bth.BTH) { b.SetTVer(b.TVer() ^ 0xf | 0xf0) }, []byte{1: 0x0f}},
		{"PKey", func(b bth.BTH) { b.SetPKey(^b.PKey()) }, []byte{2: 0xff, 3: 0xff}},
		{"FECN", func(b bth.BTH) { b.SetFECN(!b.FECN()) }, []byte{4: 0x80}},
		{"BECN", func(b bth.BTH) { b.SetBECN(!b.BECN()) }, []byte{4: 0x40}},
		{"DestQPN", func(b bth.BTH) { b.SetDestQPN(^b.DestQPN()) }, []byte{5: 0xff, 6: 0xff, 7: 0xff}},
		{"AckReq", func(b bth.BTH) { b.SetAckReq(!b.AckReq()) }, []byte{8: 0x80}},
		{"PSN", func(b bth.BTH) { b.SetPSN(^b.PSN()) }, []byte{9: 0xff, 10: 0xff, 11: 0xff}},
	}
	for _, fill := range []byte{0x00, 0xff} {
		for _, s := range setters {
			b := bth.BTH(bytes.Repeat([]byte{fill}, bth.BTHLen))
			s.set(b)
			mask := make([]byte, bth.BTHLen)
			copy(mask, s.mask)
			for i := range b {
				if changed := b[i] ^ fill; changed != mask[i] {
					t.Errorf("fill %#x: Set%s changed byte %d bits %#02x, want %#02x", fill, s.name, i, changed, mask[i])
				}
			}
		}
	}
}

func TestBTH24BitMasking(t *testing.T) {
	b := bth.BTH(bytes.Repeat([]byte{0}, bth.BTHLen))
	b.SetAckReq(true)
	b.SetFECN(true)
	b.SetPSN(0x1ffffff)
	b.SetDestQPN(0xff123456)
	if b.PSN() != 0xffffff || !b.AckReq() || b[8] != 0x80 {
		t.Errorf("SetPSN(0x1ffffff): PSN %#x AckReq %v byte8 %#x", b.PSN(), b.AckReq(), b[8])
	}
	if b.DestQPN() != 0x123456 || !b.FECN() || b[4] != 0x80 {
		t.Errorf("SetDestQPN(0xff123456): QPN %#x FECN %v byte4 %#x", b.DestQPN(), b.FECN(), b[4])
	}
	b.SetPSN(0x1000000) // wraps to 0
	if b.PSN() != 0 || !b.AckReq() {
		t.Errorf("SetPSN(1<<24): PSN %#x AckReq %v", b.PSN(), b.AckReq())
	}

	var f bth.BTHFields
	f.PSN, f.DestQPN, f.PadCount, f.TVer = 0xfedcba98, 0x87654321, 0xff, 0xff
	b.Encode(&f)
	if b.PSN() != 0xdcba98 || b.DestQPN() != 0x654321 || b.PadCount() != 3 || b.TVer() != 15 ||
		b[4] != 0 || b[8] != 0 || b[1] != 0x3f {
		t.Errorf("Encode did not mask: % x", []byte(b))
	}
}

func TestRETH(t *testing.T) {
	r := make(bth.RETH, bth.RETHLen)
	f := bth.RETHFields{VA: 0x0102030405060708, RKey: 0x090a0b0c, DMALen: 0x0d0e0f10}
	r.Encode(&f)
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}; !bytes.Equal(r, want) {
		t.Fatalf("Encode = % x", []byte(r))
	}
	if r.Fields() != f || r.VA() != f.VA || r.RKey() != f.RKey || r.DMALen() != f.DMALen {
		t.Fatalf("Fields() = %+v", r.Fields())
	}
	r.SetVA(1)
	r.SetRKey(2)
	r.SetDMALen(3)
	if r.Fields() != (bth.RETHFields{VA: 1, RKey: 2, DMALen: 3}) {
		t.Fatalf("setters: %+v", r.Fields())
	}
}

func TestAETH(t *testing.T) {
	a := make(bth.AETH, bth.AETHLen)
	a.Encode(&bth.AETHFields{Syndrome: bth.NakSyndrome(bth.NakRemoteAccessError), MSN: 0x1abcdef})
	if want := []byte{0x62, 0xab, 0xcd, 0xef}; !bytes.Equal(a, want) {
		t.Fatalf("Encode = % x, want % x", []byte(a), want)
	}
	a.SetMSN(0xff000001)
	a.SetSyndrome(bth.AckSyndrome(7))
	if a.MSN() != 1 || a.Syndrome() != 7 || a[0] != 7 {
		t.Fatalf("setters: % x", []byte(a))
	}
	if got := a.Fields(); got != (bth.AETHFields{Syndrome: 7, MSN: 1}) {
		t.Fatalf("Fields() = %+v", got)
	}
}

func TestSmallHeaders(t *testing.T) {
	imm := make(bth.ImmDt, bth.ImmDtLen)
	imm.SetImm(0xdeadbeef)
	ieth := make(bth.IETH, bth.IETHLen)
	ieth.SetRKey(0x01020304)
	ack := make(bth.AtomicAckETH, bth.AtomicAckETHLen)
	ack.SetOrigData(0x0102030405060708)
	for _, tc := range []struct {
		got, want []byte
	}{
		{imm, []byte{0xde, 0xad, 0xbe, 0xef}},
		{ieth, []byte{1, 2, 3, 4}},
		{ack, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("got % x, want % x", tc.got, tc.want)
		}
	}
	if imm.Imm() != 0xdeadbeef || ieth.RKey() != 0x01020304 || ack.OrigData() != 0x0102030405060708 {
		t.Error("getters disagree with setters")
	}
}

func TestDETH(t *testing.T) {
	d := bth.DETH(bytes.Repeat([]byte{0xff}, bth.DETHLen))
	d.Encode(&bth.DETHFields{QKey: 0x80010000, SrcQPN: 0x1234567})
	if want := []byte{0x80, 0x01, 0x00, 0x00, 0x00, 0x23, 0x45, 0x67}; !bytes.Equal(d, want) {
		t.Fatalf("Encode = % x, want % x", []byte(d), want)
	}
	d[4] = 0xff // reserved
	d.SetSrcQPN(0xffffffff)
	d.SetQKey(7)
	if d.SrcQPN() != 0xffffff || d.QKey() != 7 || d[4] != 0xff {
		t.Fatalf("setters: % x", []byte(d))
	}
	if got := d.Fields(); got != (bth.DETHFields{QKey: 7, SrcQPN: 0xffffff}) {
		t.Fatalf("Fields() = %+v", got)
	}
}

func TestAtomicETH(t *testing.T) {
	a := make(bth.AtomicETH, bth.AtomicETHLen)
	f := bth.AtomicETHFields{VA: 0x1112131415161718, RKey: 0x21222324,
		SwapAdd: 0x3132333435363738, Compare: 0x4142434445464748}
	a.Encode(&f)
	want := []byte{
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24,
		0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
		0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
	}
	if !bytes.Equal(a, want) {
		t.Fatalf("Encode = % x", []byte(a))
	}
	if a.Fields() != f {
		t.Fatalf("Fields() = %+v", a.Fields())
	}
	a.SetVA(1)
	a.SetRKey(2)
	a.SetSwapAdd(3)
	a.SetCompare(4)
	if a.Fields() != (bth.AtomicETHFields{VA: 1, RKey: 2, SwapAdd: 3, Compare: 4}) {
		t.Fatalf("setters: %+v", a.Fields())
	}
}

// TestPETH pins softnic's placement header byte by byte (docs/wire.md):
// 24-bit receive WQE sequence number, 24-bit packet index, both
// big-endian, and the index's conversion to a byte offset.
func TestPETH(t *testing.T) {
	p := bth.PETH(bytes.Repeat([]byte{0xff}, bth.PETHLen))
	p.Encode(&bth.PETHFields{RecvSN: 0x1abcdef, Index: 0x2010203})
	if want := []byte{0xab, 0xcd, 0xef, 0x01, 0x02, 0x03}; !bytes.Equal(p, want) {
		t.Fatalf("Encode = % x, want % x", []byte(p), want)
	}
	p.SetRecvSN(0xffffffff)
	p.SetIndex(0xfffffe)
	if p.RecvSN() != 0xffffff || p.Index() != 0xfffffe {
		t.Fatalf("setters: % x", []byte(p))
	}
	if got := p.Fields(); got != (bth.PETHFields{RecvSN: 0xffffff, Index: 0xfffffe}) {
		t.Fatalf("Fields() = %+v", got)
	}
	for _, tc := range []struct {
		index, mtu, off uint32
		ok              bool
	}{
		{0, 1024, 0, true},
		{3, 1024, 3072, true},
		{1 << 21, 1024, 1 << 31, true},             // 2^31: the largest offset
		{1<<21 + 1, 1024, 0, false},                // past 2^31
		{1<<24 - 1, 4096, 0, false},                // 2^36 - 4096: would overflow 32 bits
		{1<<24 - 1, 256, (1<<24 - 1) * 256, false}, // 4 GiB - 256 > 2^31
		{1<<23 - 1, 256, (1<<23 - 1) * 256, true},
	} {
		p.SetIndex(tc.index)
		if off, ok := p.Offset(tc.mtu); off != tc.off && tc.ok || ok != tc.ok {
			t.Errorf("index %d at MTU %d: Offset = %d, %v; want %d, %v", tc.index, tc.mtu, off, ok, tc.off, tc.ok)
		}
	}
}

// TestRWSNETH pins the receive WQE SN header of a WRITE with immediate's
// last packet (docs/wire.md): 3 bytes, the 24-bit big-endian sequence
// number.
func TestRWSNETH(t *testing.T) {
	r := bth.RWSNETH(bytes.Repeat([]byte{0xff}, bth.RWSNETHLen))
	r.SetRecvSN(0x1abcdef)
	if want := []byte{0xab, 0xcd, 0xef}; !bytes.Equal(r, want) || r.RecvSN() != 0xabcdef {
		t.Fatalf("SetRecvSN = % x, want % x", []byte(r), want)
	}
	if bth.RWSNETHLen != 3 || bth.PETHLen != 6 {
		t.Fatalf("RWSNETHLen %d, PETHLen %d; want 3 and 6", bth.RWSNETHLen, bth.PETHLen)
	}
}

// TestSACKETH pins the selective-acknowledgement header byte by byte
// (docs/wire.md): lost-cnt in the low 3 bits of the first byte, the rest
// reserved, then the 24-bit PSN.
func TestSACKETH(t *testing.T) {
	s := bth.SACKETH(bytes.Repeat([]byte{0xff}, bth.SACKETHLen))
	s.SetPSN(0x1000007) // masked to 24 bits, reserved byte cleared
	if want := []byte{0x00, 0x00, 0x00, 0x07}; !bytes.Equal(s, want) || s.PSN() != 7 {
		t.Fatalf("SetPSN = % x, want % x", []byte(s), want)
	}
	for _, c := range []struct {
		f    bth.SACKETHFields
		want []byte
		back bth.SACKETHFields // what Fields reads back: the masked fields
	}{
		// docs/wire.md's example (golden vector rc_ack_sack_v4): PSN 0xA07.
		{bth.SACKETHFields{PSN: 0xA07}, []byte{0x00, 0x00, 0x0a, 0x07}, bth.SACKETHFields{PSN: 0xA07}},
		// rc_ack_sack_lostcnt_v4: FaSR's lost-cnt 3.
		{bth.SACKETHFields{PSN: 0xB05, LostCnt: 3}, []byte{0x03, 0x00, 0x0b, 0x05}, bth.SACKETHFields{PSN: 0xB05, LostCnt: 3}},
		// rc_ack_sack_overflow_v6: lost-cnt held at 7 once it overflowed.
		{bth.SACKETHFields{PSN: 0xB40, LostCnt: 7}, []byte{0x07, 0x00, 0x0b, 0x40}, bth.SACKETHFields{PSN: 0xB40, LostCnt: 7}},
		// Masking: PSN to 24 bits, lost-cnt to 3, reserved bits 0.
		{bth.SACKETHFields{PSN: 0xff123456, LostCnt: 0xfa}, []byte{0x02, 0x12, 0x34, 0x56}, bth.SACKETHFields{PSN: 0x123456, LostCnt: 2}},
	} {
		s := bth.SACKETH(bytes.Repeat([]byte{0xff}, bth.SACKETHLen))
		s.Encode(&c.f)
		if !bytes.Equal(s, c.want) {
			t.Errorf("Encode(%+v) = % x, want % x", c.f, []byte(s), c.want)
		}
		if got := s.Fields(); got != c.back {
			t.Errorf("Fields() = %+v, want %+v", got, c.back)
		}
	}
	s = bth.SACKETH([]byte{0xfd, 0, 0, 1}) // reserved bits set: ignored
	if got := s.Fields(); got != (bth.SACKETHFields{PSN: 1, LostCnt: 5}) {
		t.Errorf("Fields() = %+v", got)
	}
}

// TestHolesETH pins MELO's NACK header byte by byte (docs/wire.md; golden
// vectors rc_ack_holes_v4 and rc_ack_holes_wrap_v6): Encode takes the
// holes as PSNs, most recent first as the wire has them, and writes each
// as its offset from the BTH PSN; Fields gives them back oldest first.
func TestHolesETH(t *testing.T) {
	for _, c := range []struct {
		name string
		cum  uint32
		f    bth.HolesETHFields // as the responder has them, most recent first
		wire []byte
		back bth.HolesETHFields // oldest first
	}{
		{"rc_ack_holes_v4", 0xC00,
			bth.HolesETHFields{High: 0xC20, Holes: [3]bth.Hole{{0xC18, 2}, {0xC08, 5}, {0xC00, 3}}},
			[]byte{0x00, 0x00, 0x0c, 0x20, 0x00, 0x18, 0x00, 0x02, 0x00, 0x08, 0x00, 0x05, 0x00, 0x00, 0x00, 0x03},
			bth.HolesETHFields{High: 0xC20, Holes: [3]bth.Hole{{0xC00, 3}, {0xC08, 5}, {0xC18, 2}}}},
		{"rc_ack_holes_wrap_v6", 0xFFFFF0,
			bth.HolesETHFields{High: 4, Holes: [3]bth.Hole{{0, 4}, {0xFFFFF0, 1}}},
			[]byte{0x00, 0x00, 0x00, 0x04, 0x00, 0x10, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00},
			bth.HolesETHFields{High: 4, Holes: [3]bth.Hole{{0xFFFFF0, 1}, {0, 4}}}},
		// Holes the 16-bit fields cannot carry are sent unused, in place:
		// one before the BTH PSN, one too long, one too far.
		{"clamped", 0x100,
			bth.HolesETHFields{High: 0x30000, Holes: [3]bth.Hole{{0xFF, 2}, {0x200, 0x10000}, {0x10101, 1}}},
			[]byte{0x00, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			bth.HolesETHFields{High: 0x30000}},
		{"clamp edges", 0x100,
			bth.HolesETHFields{High: 0x30000, Holes: [3]bth.Hole{{0x100FF, 1}, {0x200, 0xFFFF}, {0x100, 0}}},
			[]byte{0x00, 0x03, 0x00, 0x00, 0xff, 0xff, 0x00, 0x01, 0x01, 0x00, 0xff, 0xff, 0, 0, 0, 0},
			bth.HolesETHFields{}}, // overlapping: see below
	} {
		h := bth.HolesETH(bytes.Repeat([]byte{0xff}, bth.HolesETHLen))
		h.Encode(c.cum, &c.f)
		if !bytes.Equal(h, c.wire) {
			t.Errorf("%s: Encode = % x, want % x", c.name, []byte(h), c.wire)
		}
		got, ok := h.Fields(c.cum)
		if c.name == "clamp edges" {
			if ok { // 0x200 for 0xFFFF runs over 0x100FF
				t.Errorf("%s: Fields() ok for overlapping holes: %+v", c.name, got)
			}
			continue
		}
		if !ok || got != c.back {
			t.Errorf("%s: Fields() = %+v, %v, want %+v", c.name, got, ok, c.back)
		}
	}

	// Fields refuses what docs/wire.md forbids: a hole that does not end
	// before RCV.HIGH, or two that overlap.
	for _, c := range []struct {
		name  string
		holes [3][2]uint16
		ok    bool
	}{
		{"ends just before high", [3][2]uint16{{0, 10}}, true},
		{"reaches high", [3][2]uint16{{0, 11}}, false},
		{"past high", [3][2]uint16{{12, 1}}, false},
		{"adjacent", [3][2]uint16{{4, 2}, {0, 4}}, true},
		{"overlapping", [3][2]uint16{{3, 2}, {0, 4}}, false},
		{"same", [3][2]uint16{{6, 1}, {0, 1}, {6, 1}}, false},
		{"gap in the entries", [3][2]uint16{{6, 1}, {0, 0}, {0, 1}}, true},
	} {
		h := make(bth.HolesETH, bth.HolesETHLen)
		h.SetHigh(0x50A)
		for i, e := range c.holes {
			h.SetHole(i, e[0], e[1])
		}
		f, ok := h.Fields(0x500)
		if ok != c.ok || f.High != 0x50A {
			t.Errorf("%s: Fields() = %+v, %v, want ok %v", c.name, f, ok, c.ok)
		}
		if ok && c.name == "gap in the entries" && f.Holes != [3]bth.Hole{{0x500, 1}, {0x506, 1}} {
			t.Errorf("%s: holes %+v", c.name, f.Holes)
		}
	}

	// The raw setters and getters are the wire's.
	h := bth.HolesETH(bytes.Repeat([]byte{0xff}, bth.HolesETHLen))
	h.SetHigh(0x1abcdef)
	h.SetHole(1, 0x1234, 0x5678)
	if h.High() != 0xabcdef || h[0] != 0 {
		t.Errorf("SetHigh: % x", []byte(h))
	}
	if off, n := h.Hole(1); off != 0x1234 || n != 0x5678 {
		t.Errorf("Hole(1) = %#x, %#x", off, n)
	}
}
