// Package bthlayer lets gopacket decode RoCEv2. Importing it registers
// LayerTypeRoCE for UDP port 4791, so that gopacket.NewPacket on a RoCEv2
// frame yields Ethernet, IPv4 or IPv6, UDP, RoCE and, if the packet carries
// data, Payload layers; pcap files captured from softnic or from a hardware
// RNIC can then be inspected with the usual gopacket tools. Decoding uses
// bth.Parse, so the layer accepts exactly what the data path accepts. The
// package is separate from bth so that the data path does not depend on
// gopacket.
package bthlayer

import (
	"encoding/binary"
	"errors"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/softnic/softnic/bth"
)

// LayerTypeRoCE is the RoCEv2 transport layer: BTH, extension headers, pad
// and ICRC. Its number is the UDP port; gopacket leaves numbers of 2000 and
// up to applications.
var LayerTypeRoCE = gopacket.RegisterLayerType(bth.UDPPort, gopacket.LayerTypeMetadata{
	Name:    "RoCE",
	Decoder: gopacket.DecodeFunc(decodeRoCE),
})

func init() {
	layers.RegisterUDPPortLayerType(layers.UDPPort(bth.UDPPort), LayerTypeRoCE)
}

// RoCE is a decoded RoCEv2 packet. The embedded BTHFields give Opcode, PSN,
// DestQPN, AckReq and the other BTH fields; Info.Flags tells which of the
// extension header fields below were present (the others are zero).
// Contents holds the BTH and extension headers, Payload the data without
// pad bytes and ICRC.
type RoCE struct {
	layers.BaseLayer
	bth.BTHFields
	Info *bth.OpInfo

	RETH           bth.RETHFields
	AETH           bth.AETHFields
	Imm            uint32 // ImmDt
	InvalidateRKey uint32 // IETH
	DETH           bth.DETHFields
	Atomic         bth.AtomicETHFields
	AtomicOrigData uint64         // AtomicAckETH
	PETH           bth.PETHFields // softnic's placement header (docs/wire.md)
	RecvSN         uint32         // softnic's RWSNETH: the receive WQE SN of a WRITE with immediate
	SACKPSN        uint32         // softnic's SACKETH: the selectively acknowledged PSN
	LostCnt        uint8          // softnic's SACKETH: FaSR's lost-cnt
	HolesHigh      uint32         // softnic's HolesETH (MELO's NACK): RCV.HIGH
	Holes          [bth.HolesETHEntries]struct{ Offset, Len uint16 }

	// StaR's stateless-mode headers (docs/wire.md); STAR_RA's AETH is in
	// AETH.
	WQEP bth.WQEPETHFields
	CQEP bth.CQEPETHFields
	EA   bth.EAETHFields
	RDP  bth.RDPETHFields
	GD   bth.GDETHFields
	SDP  bth.SDPETHFields

	ICRC uint32 // as stored on the wire; see VerifyICRC
}

// LayerType returns LayerTypeRoCE.
func (r *RoCE) LayerType() gopacket.LayerType { return LayerTypeRoCE }

// CanDecode returns LayerTypeRoCE.
func (r *RoCE) CanDecode() gopacket.LayerClass { return LayerTypeRoCE }

// NextLayerType returns gopacket.LayerTypePayload if the packet carries
// data, else gopacket.LayerTypeZero.
func (r *RoCE) NextLayerType() gopacket.LayerType {
	if len(r.Payload) > 0 {
		return gopacket.LayerTypePayload
	}
	return gopacket.LayerTypeZero
}

// DecodeFromBytes decodes data, a UDP payload from the BTH through the
// ICRC, with bth.Parse. The layer keeps references into data.
func (r *RoCE) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	p, err := bth.Parse(data)
	if err != nil {
		if errors.Is(err, bth.ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	*r = RoCE{
		BaseLayer: layers.BaseLayer{Contents: data[:p.Info.Length], Payload: p.Payload()},
		BTHFields: p.BTH().Fields(),
		Info:      p.Info,
		ICRC:      binary.LittleEndian.Uint32(data[len(data)-bth.ICRCLen:]),
	}
	if h := p.RETH(); h != nil {
		r.RETH = h.Fields()
	}
	if h := p.AETH(); h != nil {
		r.AETH = h.Fields()
	}
	if h := p.Imm(); h != nil {
		r.Imm = h.Imm()
	}
	if h := p.IETH(); h != nil {
		r.InvalidateRKey = h.RKey()
	}
	if h := p.DETH(); h != nil {
		r.DETH = h.Fields()
	}
	if h := p.AtomicETH(); h != nil {
		r.Atomic = h.Fields()
	}
	if h := p.AtomicAck(); h != nil {
		r.AtomicOrigData = h.OrigData()
	}
	if h := p.PETH(); h != nil {
		r.PETH = h.Fields()
	}
	if h := p.RWSNETH(); h != nil {
		r.RecvSN = h.RecvSN()
	}
	if h := p.SACKETH(); h != nil {
		f := h.Fields()
		r.SACKPSN, r.LostCnt = f.PSN, f.LostCnt
	}
	if h := p.HolesETH(); h != nil {
		r.HolesHigh = h.High()
		for i := range r.Holes {
			r.Holes[i].Offset, r.Holes[i].Len = h.Hole(i)
		}
	}
	if h := p.WQEPETH(); h != nil {
		r.WQEP = h.Fields()
	}
	if h := p.CQEPETH(); h != nil {
		r.CQEP = h.Fields()
	}
	if h := p.EAETH(); h != nil {
		r.EA = h.Fields()
	}
	if h := p.RDPETH(); h != nil {
		r.RDP = h.Fields()
	}
	if h := p.GDETH(); h != nil {
		r.GD = h.Fields()
	}
	if h := p.SDPETH(); h != nil {
		r.SDP = h.Fields()
	}
	return nil
}

func decodeRoCE(data []byte, p gopacket.PacketBuilder) error {
	r := &RoCE{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(r.NextLayerType())
}

// VerifyICRC reports whether pkt, an Ethernet frame, is a RoCEv2 frame with
// a correct ICRC. The RoCE layer alone cannot check it: the ICRC covers the
// IP and UDP headers.
func VerifyICRC(pkt gopacket.Packet) bool {
	f, err := bth.ParseFrame(pkt.Data())
	return err == nil && f.VerifyICRC()
}
