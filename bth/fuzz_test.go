package bth_test

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/bth"
)

// canonical returns the RoCE packet b with its reserved bits cleared, which
// is what encoding its parsed fields must reproduce.
func canonical(b []byte, info *bth.OpInfo) []byte {
	c := bytes.Clone(b)
	c[4] &= 0xc0 // BTH: FECN, BECN, 6 reserved bits
	c[8] &= 0x80 // BTH: AckReq, 7 reserved bits
	if info.DETHOff >= 0 {
		c[info.DETHOff+4] = 0 // DETH reserved byte
	}
	if info.SACKETHOff >= 0 {
		c[info.SACKETHOff] &= 7 // SACKETH: lost-cnt, 5 reserved bits
	}
	if info.HolesETHOff >= 0 {
		c[info.HolesETHOff] = 0 // HolesETH reserved byte
	}
	if o := info.WQEPETHOff; o >= 0 {
		c[o+6], c[o+7] = 0, 0 // WQEPETH reserved bytes
	}
	if o := info.CQEPETHOff; o >= 0 {
		c[o+7] = 0 // CQEPETH reserved byte
	}
	if o := info.EAETHOff; o >= 0 {
		c[o+1], c[o+2], c[o+3] = 0, 0, 0 // EAETH reserved bytes
	}
	if o := info.CNPReservedOff; o >= 0 {
		clear(c[o : o+bth.CNPReservedLen]) // a CNP's reserved bytes
	}
	return c
}

func FuzzParse(f *testing.F) {
	for _, v := range loadGolden(f) {
		fr, err := bth.ParseFrame(vectorFrame(f, &v))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(fr.Pkt.Buf)
	}
	// StaR's opcodes and the CNP with every header byte set, reserved ones
	// included, which re-encoding must clear.
	for _, op := range []bth.Opcode{bth.StarWQEP, bth.StarCQEP, bth.StarEA, bth.StarRDP, bth.StarRA, bth.StarGD, bth.StarSDP, bth.CNP} {
		info := bth.Lookup(op)
		b := bytes.Repeat([]byte{0xff}, info.PacketLen(0))
		bth.BTH(b).Encode(&bth.BTHFields{Opcode: op, PKey: 0xffff, DestQPN: 0xffffff, PSN: 0xffffff})
		f.Add(b)
	}
	// The out-of-order extensions with every header byte set and a payload
	// of 5 bytes: their headers (PETH 6 bytes, RWSNETH 3) leave the payload
	// unaligned, and the pad still pads the payload.
	for op := bth.RCSendFirstOOO; op <= bth.RCWriteOnlyImmOOO; op++ {
		info := bth.Lookup(op)
		b := bytes.Repeat([]byte{0xff}, info.PacketLen(5))
		bth.BTH(b).Encode(&bth.BTHFields{Opcode: op, PKey: 0xffff, DestQPN: 0xffffff, PSN: 0xffffff, PadCount: uint8(bth.PadFor(5))})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := bth.Parse(b)
		if err != nil {
			return
		}
		info := p.Info
		if len(p.Payload()) != len(b)-info.Length-bth.ICRCLen-int(p.BTH().PadCount()) {
			t.Fatalf("payload length %d", len(p.Payload()))
		}

		// Fields -> Encode into a fresh buffer reproduces the headers.
		pf := fieldsOf(&p)
		out := make([]byte, len(b))
		pf.encode(out, info)
		copy(out[info.Length:], b[info.Length:])
		if want := canonical(b, info); !bytes.Equal(out, want) {
			t.Fatalf("re-encoded\n got %x\nwant %x", out, want)
		}
		p2, err := bth.Parse(out)
		if err != nil {
			t.Fatalf("re-encoded packet does not parse: %v", err)
		}
		if fieldsOf(&p2) != pf {
			t.Fatalf("fields changed: %+v != %+v", fieldsOf(&p2), pf)
		}
		checkReply(t, &p)
	})
}

// checkReply: a reply the table decodes, encoded again after a BTH like
// the one it came with, decodes to the same reply.
func checkReply(t *testing.T, p *bth.Packet) {
	r, ok := p.Reply()
	if bth.ReplyOf(p.Opcode()) == bth.ReplyNone {
		if ok || r.Kind != bth.ReplyNone {
			t.Fatalf("%s: Reply() = %+v, %v", p.Opcode(), r, ok)
		}
		return
	}
	if r.Kind != bth.ReplyOf(p.Opcode()) || r.Opcode() != p.Opcode() {
		t.Fatalf("%s: Reply() = %+v", p.Opcode(), r)
	}
	if !ok {
		return
	}
	b := make([]byte, p.Info.PacketLen(0))
	bth.BTH(b).Encode(&bth.BTHFields{Opcode: r.Opcode(), PSN: p.BTH().PSN()})
	r.Encode(b, p.AETH().MSN())
	p2, err := bth.Parse(b)
	if err != nil {
		t.Fatalf("encoded reply does not parse: %v", err)
	}
	if r2, ok := p2.Reply(); !ok || r2 != r {
		t.Fatalf("reply changed: %+v, %v != %+v\n%x", r2, ok, r, b)
	}
	if a := p2.AETH().Fields(); a.Syndrome != bth.NakSyndrome(bth.NakPSNSeqError) || a.MSN != p.AETH().MSN() {
		t.Fatalf("AETH %+v", a)
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, v := range loadGolden(f) {
		f.Add(vectorFrame(f, &v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := bth.ParseFrame(b)
		if err != nil {
			return
		}
		if len(fr.Buf) > len(b) || fr.BTHOff+len(fr.Pkt.Buf) != len(fr.Buf) {
			t.Fatalf("inconsistent offsets: %d+%d vs %d", fr.BTHOff, len(fr.Pkt.Buf), len(fr.Buf))
		}
		fr.VerifyICRC()

		// Rebuild the frame from what was parsed, as a responder echoing
		// the addressing would, and parse it again.
		h := fr.Header()
		pf := fieldsOf(&fr.Pkt)
		payload := fr.Pkt.Payload()
		out := buildFrame(&h, &pf, payload)
		fr2, err := bth.ParseFrame(out)
		if err != nil {
			t.Fatalf("rebuilt frame does not parse: %v\n%x", err, out)
		}
		if !fr2.VerifyICRC() {
			t.Fatal("rebuilt frame has a bad ICRC")
		}
		if h.TTL == 0 {
			h.TTL = 64
		}
		if got := fr2.Header(); got != h {
			t.Fatalf("header changed: %+v != %+v", got, h)
		}
		if got := fieldsOf(&fr2.Pkt); got != pf {
			t.Fatalf("fields changed: %+v != %+v", got, pf)
		}
		if !bytes.Equal(fr2.Pkt.Payload(), payload) {
			t.Fatal("payload changed")
		}
	})
}
