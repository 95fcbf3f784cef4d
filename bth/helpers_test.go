package bth_test

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/bth/internal/golden"
	"github.com/softnic/softnic/qp"
)

// packetFields holds every header field of a RoCE packet; the zero value of
// a header the opcode lacks is ignored.
type packetFields struct {
	BTH       bth.BTHFields
	RETH      bth.RETHFields
	AETH      bth.AETHFields
	Imm       uint32
	IETH      uint32
	DETH      bth.DETHFields
	Atomic    bth.AtomicETHFields
	AtomicAck uint64
	PETH      bth.PETHFields
	RWSN      uint32
	SACK      uint32 // lost-cnt << 24 | PSN
	Holes     [1 + 2*bth.HolesETHEntries]uint32
	WQEP      bth.WQEPETHFields
	CQEP      bth.CQEPETHFields
	EA        bth.EAETHFields
	RDP       bth.RDPETHFields
	GD        bth.GDETHFields
	SDP       bth.SDPETHFields
}

// fieldsOf reads every header of p through the views.
func fieldsOf(p *bth.Packet) packetFields {
	pf := packetFields{BTH: p.BTH().Fields()}
	if r := p.RETH(); r != nil {
		pf.RETH = r.Fields()
	}
	if a := p.AETH(); a != nil {
		pf.AETH = a.Fields()
	}
	if i := p.Imm(); i != nil {
		pf.Imm = i.Imm()
	}
	if i := p.IETH(); i != nil {
		pf.IETH = i.RKey()
	}
	if d := p.DETH(); d != nil {
		pf.DETH = d.Fields()
	}
	if a := p.AtomicETH(); a != nil {
		pf.Atomic = a.Fields()
	}
	if a := p.AtomicAck(); a != nil {
		pf.AtomicAck = a.OrigData()
	}
	if h := p.PETH(); h != nil {
		pf.PETH = h.Fields()
	}
	if h := p.RWSNETH(); h != nil {
		pf.RWSN = h.RecvSN()
	}
	if h := p.SACKETH(); h != nil {
		f := h.Fields()
		pf.SACK = uint32(f.LostCnt)<<24 | f.PSN
	}
	if h := p.HolesETH(); h != nil {
		pf.Holes[0] = h.High()
		for i := range bth.HolesETHEntries {
			off, n := h.Hole(i)
			pf.Holes[1+2*i], pf.Holes[2+2*i] = uint32(off), uint32(n)
		}
	}
	if h := p.WQEPETH(); h != nil {
		pf.WQEP = h.Fields()
	}
	if h := p.CQEPETH(); h != nil {
		pf.CQEP = h.Fields()
	}
	if h := p.EAETH(); h != nil {
		pf.EA = h.Fields()
	}
	if h := p.RDPETH(); h != nil {
		pf.RDP = h.Fields()
	}
	if h := p.GDETH(); h != nil {
		pf.GD = h.Fields()
	}
	if h := p.SDPETH(); h != nil {
		pf.SDP = h.Fields()
	}
	return pf
}

// encode writes the BTH and the extension headers of info into dst with the
// Encode methods and setters, as the transport does.
func (pf *packetFields) encode(dst []byte, info *bth.OpInfo) {
	bth.BTH(dst).Encode(&pf.BTH)
	if info.RETHOff >= 0 {
		bth.RETH(dst[info.RETHOff:]).Encode(&pf.RETH)
	}
	if info.AETHOff >= 0 {
		bth.AETH(dst[info.AETHOff:]).Encode(&pf.AETH)
	}
	if info.ImmOff >= 0 {
		bth.ImmDt(dst[info.ImmOff:]).SetImm(pf.Imm)
	}
	if info.IETHOff >= 0 {
		bth.IETH(dst[info.IETHOff:]).SetRKey(pf.IETH)
	}
	if info.DETHOff >= 0 {
		bth.DETH(dst[info.DETHOff:]).Encode(&pf.DETH)
	}
	if info.AtomicETHOff >= 0 {
		bth.AtomicETH(dst[info.AtomicETHOff:]).Encode(&pf.Atomic)
	}
	if info.AtomicAckETHOff >= 0 {
		bth.AtomicAckETH(dst[info.AtomicAckETHOff:]).SetOrigData(pf.AtomicAck)
	}
	if info.PETHOff >= 0 {
		bth.PETH(dst[info.PETHOff:]).Encode(&pf.PETH)
	}
	if info.RWSNETHOff >= 0 {
		bth.RWSNETH(dst[info.RWSNETHOff:]).SetRecvSN(pf.RWSN)
	}
	if info.SACKETHOff >= 0 {
		bth.SACKETH(dst[info.SACKETHOff:]).Encode(&bth.SACKETHFields{PSN: pf.SACK, LostCnt: uint8(pf.SACK >> 24)})
	}
	if info.HolesETHOff >= 0 {
		h := bth.HolesETH(dst[info.HolesETHOff:])
		h.SetHigh(pf.Holes[0])
		for i := range bth.HolesETHEntries {
			h.SetHole(i, uint16(pf.Holes[1+2*i]), uint16(pf.Holes[2+2*i]))
		}
	}
	if info.WQEPETHOff >= 0 {
		bth.WQEPETH(dst[info.WQEPETHOff:]).Encode(&pf.WQEP)
	}
	if info.CQEPETHOff >= 0 {
		bth.CQEPETH(dst[info.CQEPETHOff:]).Encode(&pf.CQEP)
	}
	if info.EAETHOff >= 0 {
		bth.EAETH(dst[info.EAETHOff:]).Encode(&pf.EA)
	}
	if info.RDPETHOff >= 0 {
		bth.RDPETH(dst[info.RDPETHOff:]).Encode(&pf.RDP)
	}
	if info.GDETHOff >= 0 {
		bth.GDETH(dst[info.GDETHOff:]).Encode(&pf.GD)
	}
	if info.SDPETHOff >= 0 {
		bth.SDPETH(dst[info.SDPETHOff:]).Encode(&pf.SDP)
	}
}

// buildFrame encodes a complete frame the way softnic's transmit path does.
func buildFrame(h *bth.FrameHeader, pf *packetFields, payload []byte) []byte {
	info := bth.Lookup(pf.BTH.Opcode)
	pf.BTH.PadCount = uint8(bth.PadFor(len(payload)))
	roceLen := info.PacketLen(len(payload))
	frame := make([]byte, h.Len()+roceLen)
	off := h.Encode(frame, roceLen)
	pf.encode(frame[off:], info)
	copy(frame[off+info.Length:], payload)
	bth.FinishFrame(frame, h)
	return frame
}

// goldenVector is one entry of testdata/golden.json (package golden).
type goldenVector = golden.Vector

func loadGolden(tb testing.TB) []goldenVector {
	tb.Helper()
	return golden.Load(tb, "testdata/golden.json")
}

func goldenFrame(tb testing.TB, name string) []byte {
	tb.Helper()
	for _, v := range loadGolden(tb) {
		if v.Name == name {
			return vectorFrame(tb, &v)
		}
	}
	tb.Fatalf("no golden vector %q", name)
	return nil
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func vectorFrame(tb testing.TB, v *goldenVector) []byte { return mustHex(tb, v.Frame) }

func vectorHeader(tb testing.TB, v *goldenVector) bth.FrameHeader {
	tb.Helper()
	mac := func(s string) [6]byte {
		hw, err := net.ParseMAC(s)
		if err != nil {
			tb.Fatal(err)
		}
		return [6]byte(hw)
	}
	h := v.Header
	return bth.FrameHeader{
		SrcMAC:    mac(h.SrcMAC),
		DstMAC:    mac(h.DstMAC),
		Src:       netip.MustParseAddr(h.Src),
		Dst:       netip.MustParseAddr(h.Dst),
		SrcPort:   h.SrcPort,
		TOS:       h.TOS,
		TTL:       h.TTL,
		FlowLabel: h.FlowLabel,
	}
}

func vectorFields(v *goldenVector) packetFields {
	b := v.BTH
	pf := packetFields{BTH: bth.BTHFields{
		Opcode:         bth.Opcode(b.Opcode),
		SolicitedEvent: b.SE != 0,
		MigReq:         b.MigReq != 0,
		PadCount:       b.Pad,
		PKey:           b.PKey,
		FECN:           b.FECN != 0,
		BECN:           b.BECN != 0,
		DestQPN:        b.DQPN,
		AckReq:         b.AckReq != 0,
		PSN:            b.PSN,
	}}
	if r := v.RETH; r != nil {
		pf.RETH = bth.RETHFields{VA: r.VA, RKey: r.RKey, DMALen: r.DMALen}
	}
	if a := v.AETH; a != nil {
		pf.AETH = bth.AETHFields{Syndrome: bth.Syndrome(a.Syndrome), MSN: a.MSN}
	}
	if v.Imm != nil {
		pf.Imm = *v.Imm
	}
	if v.IETH != nil {
		pf.IETH = *v.IETH
	}
	if d := v.DETH; d != nil {
		pf.DETH = bth.DETHFields{QKey: d.QKey, SrcQPN: d.SrcQPN}
	}
	if a := v.Atomic; a != nil {
		pf.Atomic = bth.AtomicETHFields{VA: a.VA, RKey: a.RKey, SwapAdd: a.SwapAdd, Compare: a.Compare}
	}
	if v.AtomicAck != nil {
		pf.AtomicAck = *v.AtomicAck
	}
	if h := v.PETH; h != nil {
		pf.PETH = bth.PETHFields{RecvSN: h.RecvSN, Index: h.Index}
	}
	if v.RWSN != nil {
		pf.RWSN = *v.RWSN
	}
	if v.SACK != nil {
		pf.SACK = *v.SACK
	}
	if h := v.Holes; h != nil {
		pf.Holes[0] = h.High
		for i, e := range h.Holes {
			pf.Holes[1+2*i], pf.Holes[2+2*i] = e[0], e[1]
		}
	}
	if x := v.WQEP; x != nil {
		pf.WQEP = bth.WQEPETHFields{DriverSeq: x.DriverSeq, Kind: bth.WQEPKind(x.Kind), Flags: bth.WQEPFlags(x.Flags),
			WRID: x.WRID, LocalVA: x.LocalVA, LocalKey: x.LocalKey, Length: x.Length,
			RemoteVA: x.RemoteVA, RemoteKey: x.RemoteKey, Imm: x.Imm}
	}
	if x := v.CQEP; x != nil {
		pf.CQEP = bth.CQEPETHFields{DriverSeq: x.DriverSeq, Status: qp.WCStatus(x.Status), Opcode: qp.WCOpcode(x.Opcode),
			Flags: bth.CQEPFlags(x.Flags), ByteLen: x.ByteLen, Imm: x.Imm}
	}
	if x := v.EA; x != nil {
		pf.EA = bth.EAETHFields{Kind: bth.EAKind(x.Kind), DriverSeq: x.DriverSeq}
	}
	if x := v.RDP; x != nil {
		pf.RDP = bth.RDPETHFields{VA: x.VA, RKey: x.RKey, Flags: bth.RDPFlags(x.Flags)}
	}
	if x := v.GD; x != nil {
		pf.GD = bth.GDETHFields{VA: x.VA, RKey: x.RKey, Length: x.Length, MTU: qp.MTU(x.MTU), Flags: x.Flags}
	}
	if x := v.SDP; x != nil {
		pf.SDP = bth.SDPETHFields{Offset: x.Offset}
	}
	return pf
}
