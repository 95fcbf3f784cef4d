package bth_test

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// starHeader is one of StaR's headers: encode f over a buffer of 0xff,
// compare with want (docs/wire.md's diagrams), read the fields back.
type starHeader struct {
	name   string
	size   int
	encode func(b []byte)
	want   []byte
	check  func(b []byte) bool // Fields reads back what encode wrote
}

var wqepFields = bth.WQEPETHFields{
	DriverSeq: 0x01020304, Kind: bth.WQEPRDMAWriteWithImm, Flags: bth.WQEPSignaled | bth.WQEPSolicited,
	WRID: 0x1112131415161718, LocalVA: 0x2122232425262728, LocalKey: 0x31323334, Length: 0x41424344,
	RemoteVA: 0x5152535455565758, RemoteKey: 0x61626364, Imm: 0x71727374,
}

var starHeaders = []starHeader{
	{
		name: "WQEPETH", size: bth.WQEPETHLen,
		encode: func(b []byte) { bth.WQEPETH(b).Encode(&wqepFields) },
		want: []byte{
			0x01, 0x02, 0x03, 0x04, 0x04, 0x03, 0x00, 0x00,
			0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
			0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
			0x31, 0x32, 0x33, 0x34, 0x41, 0x42, 0x43, 0x44,
			0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
			0x61, 0x62, 0x63, 0x64, 0x71, 0x72, 0x73, 0x74,
		},
		check: func(b []byte) bool { return bth.WQEPETH(b).Fields() == wqepFields },
	},
	{
		name: "CQEPETH", size: bth.CQEPETHLen,
		encode: func(b []byte) {
			bth.CQEPETH(b).Encode(&bth.CQEPETHFields{DriverSeq: 0x01020304, Status: qp.WCRemAccessErr,
				Opcode: qp.WCRecvRDMAWithImm, Flags: bth.CQEPWithImm, ByteLen: 0x11121314, Imm: 0x21222324})
		},
		want: []byte{0x01, 0x02, 0x03, 0x04, 10, 129, 0x01, 0x00, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24},
		check: func(b []byte) bool {
			return bth.CQEPETH(b).Fields() == bth.CQEPETHFields{DriverSeq: 0x01020304, Status: qp.WCRemAccessErr,
				Opcode: qp.WCRecvRDMAWithImm, Flags: bth.CQEPWithImm, ByteLen: 0x11121314, Imm: 0x21222324}
		},
	},
	{
		name: "EAETH", size: bth.EAETHLen,
		encode: func(b []byte) { bth.EAETH(b).Encode(&bth.EAETHFields{Kind: bth.EACQEP, DriverSeq: 0xfffffffe}) },
		want:   []byte{0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xfe},
		check: func(b []byte) bool {
			return bth.EAETH(b).Fields() == bth.EAETHFields{Kind: bth.EACQEP, DriverSeq: 0xfffffffe}
		},
	},
	{
		name: "RDPETH", size: bth.RDPETHLen,
		encode: func(b []byte) {
			bth.RDPETH(b).Encode(&bth.RDPETHFields{VA: 0x0102030405060708, RKey: 0x11121314, Flags: bth.RDPLast | bth.RDPToRecv})
		},
		want: []byte{
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
			0x11, 0x12, 0x13, 0x14, 0x03,
		},
		check: func(b []byte) bool {
			return bth.RDPETH(b).Fields() == bth.RDPETHFields{VA: 0x0102030405060708, RKey: 0x11121314, Flags: bth.RDPLast | bth.RDPToRecv}
		},
	},
	{
		name: "GDETH", size: bth.GDETHLen,
		encode: func(b []byte) {
			bth.GDETH(b).Encode(&bth.GDETHFields{VA: 0x0102030405060708, RKey: 0x11121314, Length: 0x2122,
				MTU: qp.MTU4096, Flags: 0x80})
		},
		want: []byte{
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
			0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x05, 0x80,
		},
		check: func(b []byte) bool {
			return bth.GDETH(b).Fields() == bth.GDETHFields{VA: 0x0102030405060708, RKey: 0x11121314, Length: 0x2122,
				MTU: qp.MTU4096, Flags: 0x80}
		},
	},
	{
		name: "SDPETH", size: bth.SDPETHLen,
		encode: func(b []byte) { bth.SDPETH(b).Encode(&bth.SDPETHFields{Offset: 0x01020304}) },
		want:   []byte{0x01, 0x02, 0x03, 0x04},
		check:  func(b []byte) bool { return bth.SDPETH(b).Fields() == bth.SDPETHFields{Offset: 0x01020304} },
	},
}

// TestStarHeaders pins StaR's headers byte by byte (docs/wire.md): Encode
// writes every byte, reserved ones 0 and 24-bit QPNs masked, and Fields
// reads the fields back.
func TestStarHeaders(t *testing.T) {
	for _, h := range starHeaders {
		if len(h.want) != h.size {
			t.Fatalf("%s: test vector of %d bytes, header %d", h.name, len(h.want), h.size)
		}
		b := bytes.Repeat([]byte{0xff}, h.size)
		h.encode(b)
		if !bytes.Equal(b, h.want) {
			t.Errorf("%s: Encode = % x, want % x", h.name, b, h.want)
		}
		if !h.check(b) {
			t.Errorf("%s: Fields disagree with Encode", h.name)
		}
	}
}

// Reserved bytes set on the wire are ignored, and the setters leave them
// alone except for the byte in front of a 24-bit QPN.
func TestStarReservedIgnored(t *testing.T) {
	w := bth.WQEPETH(make([]byte, bth.WQEPETHLen))
	w.Encode(&wqepFields)
	w[6], w[7] = 0xff, 0xff
	w.SetImm(1)
	if got := w.Fields(); got.Imm != 1 || w[6] != 0xff || w[7] != 0xff {
		t.Errorf("WQEPETH: %+v % x", got, []byte(w))
	}
	e := bth.EAETH{0, 0xff, 0xff, 0xff, 0, 0, 0, 9}
	if got := e.Fields(); got != (bth.EAETHFields{Kind: bth.EAWQEP, DriverSeq: 9}) {
		t.Errorf("EAETH: %+v", got)
	}
	c := bth.CQEPETH(bytes.Repeat([]byte{0xff}, bth.CQEPETHLen))
	c.SetStatus(qp.WCSuccess)
	if c[7] != 0xff || c.Status() != qp.WCSuccess {
		t.Errorf("CQEPETH SetStatus: % x", []byte(c))
	}
}

func TestStarNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{bth.WQEPRecv.String(), "RECV"}, {bth.WQEPMRDereg.String(), "MR_DEREG"},
		{bth.WQEPKind(7).String(), "WQEPKind(7)"}, {bth.EACQEP.String(), "CQEP"},
		{bth.EAKind(3).String(), "EAKind(3)"}, {bth.EAWQEPUpTo.String(), "WQEPUpTo"}, {bth.StarSDP.String(), "STAR_SDP"},
		{bth.Opcode(0xE7).String(), "OPCODE_0xe7"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// A StaR packet one byte short of its headers and ICRC is malformed, as
// is one without payload that has some.
func TestStarParseLengths(t *testing.T) {
	for op := bth.StarWQEP; op <= bth.StarSDP; op++ {
		info := bth.Lookup(op)
		b := make([]byte, info.PacketLen(0))
		bth.BTH(b).Encode(&bth.BTHFields{Opcode: op, PKey: 0xffff, DestQPN: 1})
		p, err := bth.Parse(b)
		if err != nil || len(p.Payload()) != 0 {
			t.Fatalf("%s: Parse: %v", op, err)
		}
		if _, err := bth.Parse(b[:len(b)-1]); err != bth.ErrTruncated {
			t.Errorf("%s one byte short: %v, want %v", op, err, bth.ErrTruncated)
		}
		_, err = bth.Parse(append(b, 0, 0, 0, 0))
		if info.Flags&bth.HasPayload != 0 && err != nil || info.Flags&bth.HasPayload == 0 && err != bth.ErrBadLength {
			t.Errorf("%s with 4 bytes of payload: %v", op, err)
		}
	}
}

// TestStarDoesNotAllocate: encoding, parsing and reading StaR's headers
// allocate nothing, like the rest of the package.
func TestStarDoesNotAllocate(t *testing.T) {
	frames := make([][]byte, 0, 7)
	for _, name := range starGoldenNames {
		frames = append(frames, goldenFrame(t, name))
	}
	buf := make([]byte, bth.WQEPETHLen)
	allocs := testing.AllocsPerRun(100, func() {
		bth.WQEPETH(buf).Encode(&wqepFields)
		sinkU64 = bth.WQEPETH(buf).Fields().WRID
		bth.CQEPETH(buf).Encode(&bth.CQEPETHFields{DriverSeq: 1, ByteLen: 2})
		sinkU32 = bth.CQEPETH(buf).Fields().ByteLen
		bth.EAETH(buf).Encode(&bth.EAETHFields{DriverSeq: 3})
		sinkU32 = bth.EAETH(buf).Fields().DriverSeq
		bth.RDPETH(buf).Encode(&bth.RDPETHFields{VA: 4, RKey: 5})
		sinkU32 = bth.RDPETH(buf).Fields().RKey
		bth.GDETH(buf).Encode(&bth.GDETHFields{VA: 6, MTU: qp.MTU1024})
		sinkU64 = bth.GDETH(buf).Fields().VA
		bth.SDPETH(buf).Encode(&bth.SDPETHFields{Offset: 7})
		sinkU32 = bth.SDPETH(buf).Fields().Offset
		for _, frame := range frames {
			f, err := bth.ParseFrame(frame)
			if err != nil {
				panic(err)
			}
			sinkBool = f.VerifyICRC()
			p := &f.Pkt
			if h := p.WQEPETH(); h != nil {
				sinkU64 = h.Fields().LocalVA
			}
			if h := p.CQEPETH(); h != nil {
				sinkU32 = h.Fields().Imm
			}
			if h := p.EAETH(); h != nil {
				sinkU32 = h.Fields().DriverSeq
			}
			if h := p.RDPETH(); h != nil {
				sinkU64 = h.Fields().VA
			}
			if h := p.AETH(); h != nil {
				sinkU32 = h.MSN()
			}
			if h := p.GDETH(); h != nil {
				sinkU32 = h.Fields().RKey
			}
			if h := p.SDPETH(); h != nil {
				sinkU32 = h.Fields().Offset
			}
			sinkU32 += uint32(len(p.Payload()))
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}
