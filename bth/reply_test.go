package bth_test

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/bth"
)

var replyKinds = []bth.ReplyKind{bth.ReplySeqNak, bth.ReplySack, bth.ReplyFNACK, bth.ReplyHoles}

// TestReplyTable: every reply kind's opcode is an acknowledgement carrying
// the kind's extension header, and ReplyOf finds the kinds back from
// exactly softnic's acknowledgement opcodes.
func TestReplyTable(t *testing.T) {
	for _, k := range replyKinds {
		for _, overflow := range []bool{false, true} {
			r := bth.Reply{Kind: k, Overflow: overflow}
			info := bth.Lookup(r.Opcode())
			if info == nil || info.Flags&bth.HasAETH == 0 || info.Flags&bth.IsResponse == 0 || info.Flags&bth.HasPayload != 0 {
				t.Fatalf("%s: opcode %s is no acknowledgement", k, r.Opcode())
			}
			if got := info.Flags & (bth.HasSACKETH | bth.HasHolesETH); got != k.Header() {
				t.Errorf("%s: opcode %s has headers %#x, the table says %#x", k, r.Opcode(), got, k.Header())
			}
			if k == bth.ReplySeqNak {
				if r.Opcode() != bth.RCAcknowledge {
					t.Errorf("%s: opcode %s", k, r.Opcode())
				}
			} else if got := bth.ReplyOf(r.Opcode()); got != k {
				t.Errorf("ReplyOf(%s) = %s, want %s", r.Opcode(), got, k)
			}
		}
	}
	if (&bth.Reply{Kind: bth.ReplySack}).Opcode() != bth.RCAcknowledgeSACK ||
		(&bth.Reply{Kind: bth.ReplySack, Overflow: true}).Opcode() != bth.RCAcknowledgeSACKOverflow ||
		(&bth.Reply{Kind: bth.ReplyFNACK, Overflow: true}).Opcode() != bth.RCAcknowledgeFNACK {
		t.Error("SACK opcodes: overflow picks RC_ACKNOWLEDGE_SACK_OVERFLOW, and only for a SACK")
	}
	n := 0
	for op := range 256 {
		if k := bth.ReplyOf(bth.Opcode(op)); k != bth.ReplyNone {
			n++
			if f := bth.Lookup(bth.Opcode(op)).Flags; f&k.Header() == 0 {
				t.Errorf("ReplyOf(%s) = %s, whose header it lacks", bth.Opcode(op), k)
			}
		}
	}
	if n != 4 { // SACK, SACK_OVERFLOW, FNAK, HOLES
		t.Errorf("%d opcodes are replies, want 4", n)
	}
}

// TestReplyGolden decodes every golden acknowledgement through the table
// and encodes it back: the bytes from the BTH to the ICRC are the golden
// ones (docs/wire.md draws rc_ack_sack_v4).
func TestReplyGolden(t *testing.T) {
	seen := map[bth.Opcode]bool{}
	for _, v := range loadGolden(t) {
		if bth.ReplyOf(bth.Opcode(v.BTH.Opcode)) == bth.ReplyNone {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			f, err := bth.ParseFrame(vectorFrame(t, &v))
			if err != nil {
				t.Fatal(err)
			}
			p := &f.Pkt
			r, ok := p.Reply()
			if !ok {
				t.Fatalf("Reply() = %+v, not ok", r)
			}
			seen[p.Opcode()] = true
			if r.Opcode() != p.Opcode() {
				t.Errorf("Reply().Opcode() = %s, want %s", r.Opcode(), p.Opcode())
			}
			switch r.Kind {
			case bth.ReplySack, bth.ReplyFNACK:
				if want := (bth.SACKETHFields{PSN: *v.SACK & 0xFFFFFF, LostCnt: uint8(*v.SACK >> 24)}); r.SACK != want {
					t.Errorf("SACK = %+v, want %+v", r.SACK, want)
				}
			case bth.ReplyHoles:
				if r.Holes.High != v.Holes.High {
					t.Errorf("High = %#x, want %#x", r.Holes.High, v.Holes.High)
				}
			}

			// Encode: the BTH as the transport writes it, then the reply.
			out := make([]byte, len(p.Buf))
			bth.BTH(out).Encode(ptr(p.BTH().Fields()))
			// Fields gives the holes oldest first; the responder, and the
			// wire, have them most recent first.
			hs := r.Holes.Holes
			n := 0
			for n < len(hs) && hs[n].Len > 0 {
				n++
			}
			for i := range n {
				r.Holes.Holes[i] = hs[n-1-i]
			}
			r.Encode(out, p.AETH().MSN())
			hdr := p.Info.Length
			if !bytes.Equal(out[:hdr], p.Buf[:hdr]) {
				t.Errorf("encoded\n got % x\nwant % x", out[:hdr], p.Buf[:hdr])
			}
		})
	}
	for _, op := range []bth.Opcode{bth.RCAcknowledgeSACK, bth.RCAcknowledgeSACKOverflow, bth.RCAcknowledgeFNACK, bth.RCAcknowledgeHoles} {
		if !seen[op] {
			t.Errorf("no golden vector for %s", op)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestReplyDecodeRefuses: a packet that is no extension reply, or whose
// holes break the rules, is not ok.
func TestReplyDecodeRefuses(t *testing.T) {
	p, err := bth.Parse(goldenPacket(t, "rc_nak_psn_seq_v4"))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := p.Reply(); ok || r.Kind != bth.ReplyNone {
		t.Errorf("RC_ACKNOWLEDGE: Reply() = %+v, %v", r, ok)
	}
	b := goldenPacket(t, "rc_ack_holes_v4")
	p, err = bth.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	p.HolesETH().SetHole(0, 0x1F, 2) // runs past RCV.HIGH
	if r, ok := p.Reply(); ok || r.Kind != bth.ReplyHoles || r.Holes.High != 0xC20 {
		t.Errorf("bad holes: Reply() = %+v, %v", r, ok)
	}
}

func goldenPacket(t *testing.T, name string) []byte {
	t.Helper()
	f, err := bth.ParseFrame(goldenFrame(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return f.Pkt.Buf
}

// TestReplyAllocs: encoding and decoding a reply allocate nothing (the
// transport does both on its hot path).
func TestReplyAllocs(t *testing.T) {
	b := goldenPacket(t, "rc_ack_holes_v4")
	p, err := bth.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(b))
	copy(out, b)
	if n := testing.AllocsPerRun(100, func() {
		r, _ := p.Reply()
		r.Encode(out, 1)
		s := bth.Reply{Kind: bth.ReplySack, SACK: bth.SACKETHFields{PSN: 7, LostCnt: 1}}
		_ = s.Opcode()
		bth.SACKETH(out[16:]).Encode(&s.SACK)
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestReplyRoundTrip: what Encode writes, Reply reads back, for every kind.
func TestReplyRoundTrip(t *testing.T) {
	for _, r := range []bth.Reply{
		{Kind: bth.ReplySack, SACK: bth.SACKETHFields{PSN: 0x10, LostCnt: 2}},
		{Kind: bth.ReplySack, Overflow: true, SACK: bth.SACKETHFields{PSN: 0xFFFFFF, LostCnt: 7}},
		{Kind: bth.ReplyFNACK, SACK: bth.SACKETHFields{PSN: 3}},
		{Kind: bth.ReplyHoles, Holes: bth.HolesETHFields{High: 0x20, Holes: [3]bth.Hole{{0x5, 2}, {0xFFFFFE, 4}}}},
	} {
		info := bth.Lookup(r.Opcode())
		b := make([]byte, info.PacketLen(0))
		bth.BTH(b).Encode(&bth.BTHFields{Opcode: r.Opcode(), PSN: 0xFFFFFA, DestQPN: 5})
		r.Encode(b, 0x42)
		p, err := bth.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if a := p.AETH().Fields(); a != (bth.AETHFields{Syndrome: bth.NakSyndrome(bth.NakPSNSeqError), MSN: 0x42}) {
			t.Errorf("%s: AETH %+v", r.Kind, a)
		}
		want := r
		if r.Kind == bth.ReplyHoles { // oldest first
			want.Holes.Holes[0], want.Holes.Holes[1] = r.Holes.Holes[1], r.Holes.Holes[0]
		}
		if got, ok := p.Reply(); !ok || got != want {
			t.Errorf("%s: Reply() = %+v, %v, want %+v", r.Kind, got, ok, want)
		}
	}
}
