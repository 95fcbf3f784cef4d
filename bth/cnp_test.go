package bth_test

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/bth"
)

// cnpFrame builds a CNP the way a DCQCN notification point sends it (IBA
// Annex A17): BTH with BECN set, the reaction point's QP, PSN 0, then 16
// reserved bytes (zero) and the ICRC.
func cnpFrame(t *testing.T, h *bth.FrameHeader, qpn uint32) []byte {
	t.Helper()
	info := bth.Lookup(bth.CNP)
	if info == nil {
		t.Fatal("Lookup(CNP) = nil")
	}
	roceLen := info.PacketLen(0)
	frame := make([]byte, h.Len()+roceLen)
	off := h.Encode(frame, roceLen)
	bth.BTH(frame[off:]).Encode(&bth.BTHFields{Opcode: bth.CNP, PKey: 0xffff, BECN: true, DestQPN: qpn})
	bth.FinishFrame(frame, h)
	return frame
}

// TestCNP: RoCEv2's congestion notification packet parses, with a valid
// ICRC, is named, and has no role in the RC state machines (docs/wire.md,
// "CNP").
func TestCNP(t *testing.T) {
	for _, h := range []bth.FrameHeader{
		{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.1.1"), SrcPort: 0xc000},
		{Src: netip.MustParseAddr("2001:db8:a::1"), Dst: netip.MustParseAddr("2001:db8:b::1"), SrcPort: 0xc000},
	} {
		frame := cnpFrame(t, &h, 0x123)
		f, err := bth.ParseFrame(frame)
		if err != nil {
			t.Fatalf("%v: ParseFrame: %v", h.Src, err)
		}
		if !f.VerifyICRC() {
			t.Errorf("%v: ICRC does not verify", h.Src)
		}
		p := &f.Pkt
		if p.Opcode() != bth.CNP || p.Opcode().String() != "CNP" || p.Info.Name != "CNP" {
			t.Errorf("%v: opcode %v, info %q", h.Src, p.Opcode(), p.Info.Name)
		}
		if got := len(p.Buf); got != bth.BTHLen+bth.CNPReservedLen+bth.ICRCLen {
			t.Errorf("%v: %d bytes, want 32", h.Src, got)
		}
		if b := p.BTH(); !b.BECN() || b.DestQPN() != 0x123 || b.PSN() != 0 {
			t.Errorf("%v: BTH %+v", h.Src, b.Fields())
		}
		if len(p.Payload()) != 0 {
			t.Errorf("%v: payload %d bytes", h.Src, len(p.Payload()))
		}
		roles := bth.IsRequest | bth.IsResponse | bth.IsFirst | bth.IsMiddle | bth.IsLast |
			bth.IsSend | bth.IsWrite | bth.IsRead | bth.IsAtomic
		if p.Info.Flags != bth.HasCNPReserved || p.Info.Flags&roles != 0 ||
			bth.CNP.IsExtension() || bth.CNP.IsStar() || bth.ReplyOf(bth.CNP) != bth.ReplyNone {
			t.Errorf("CNP: flags %#x, IsExtension %v, IsStar %v, ReplyOf %v",
				p.Info.Flags, bth.CNP.IsExtension(), bth.CNP.IsStar(), bth.ReplyOf(bth.CNP))
		}
		// A bit flipped in the reserved bytes breaks the ICRC, which
		// covers them.
		frame[len(frame)-bth.ICRCLen-1] ^= 1
		if f, err := bth.ParseFrame(frame); err != nil || f.VerifyICRC() {
			t.Errorf("%v: corrupted CNP: err %v, ICRC verifies", h.Src, err)
		}
	}
	// The other opcodes of the CNP transport (top bits 100) stay unknown.
	for op := bth.Opcode(0x80); op <= 0x9f; op++ {
		if op != bth.CNP && bth.Lookup(op) != nil {
			t.Errorf("%s: known", op)
		}
	}
}
