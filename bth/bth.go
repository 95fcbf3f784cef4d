package bth

import "encoding/binary"

// BTH is a view of a 12-byte Base Transport Header (IBA 9.2, rxe_hdr.h):
//
//	byte 0      OpCode
//	byte 1      SE(7) M(6) PadCnt(5:4) TVer(3:0)
//	bytes 2-3   P_Key
//	byte 4      FECN(7) BECN(6) reserved(5:0)   (resv8a in IBA; ECN in Annex A17)
//	bytes 5-7   DestQP
//	byte 8      AckReq(7) reserved(6:0)
//	bytes 9-11  PSN
//
// The slice must be at least BTHLen long.
type BTH []byte

const (
	bthOpcode  = 0
	bthFlags   = 1
	bthPKey    = 2
	bthECN     = 4
	bthDestQPN = 5
	bthAckReq  = 8
	bthPSN     = 9

	bthSEBit     = 0x80
	bthMigReqBit = 0x40
	bthPadShift  = 4
	bthPadMask   = 0x3 << bthPadShift
	bthTVerMask  = 0x0f
	bthFECNBit   = 0x80
	bthBECNBit   = 0x40
	bthAckReqBit = 0x80
)

// BTHFields holds every BTH field, for Encode and Fields.
type BTHFields struct {
	Opcode         Opcode
	SolicitedEvent bool
	MigReq         bool
	PadCount       uint8
	TVer           uint8
	PKey           uint16
	FECN           bool
	BECN           bool
	DestQPN        uint32
	AckReq         bool
	PSN            uint32
}

// Encode writes all 12 bytes of the header from f; reserved bits are zero
// and out-of-range values are masked to their field width.
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHLen-1]
	b[bthOpcode] = byte(f.Opcode)
	b[bthFlags] = bit(f.SolicitedEvent, bthSEBit) | bit(f.MigReq, bthMigReqBit) |
		f.PadCount<<bthPadShift&bthPadMask | f.TVer&bthTVerMask
	binary.BigEndian.PutUint16(b[bthPKey:], f.PKey)
	b[bthECN] = bit(f.FECN, bthFECNBit) | bit(f.BECN, bthBECNBit)
	put24(b[bthDestQPN:], f.DestQPN)
	b[bthAckReq] = bit(f.AckReq, bthAckReqBit)
	put24(b[bthPSN:], f.PSN)
}

// Fields returns every field of the header.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode:         b.Opcode(),
		SolicitedEvent: b.SolicitedEvent(),
		MigReq:         b.MigReq(),
		PadCount:       b.PadCount(),
		TVer:           b.TVer(),
		PKey:           b.PKey(),
		FECN:           b.FECN(),
		BECN:           b.BECN(),
		DestQPN:        b.DestQPN(),
		AckReq:         b.AckReq(),
		PSN:            b.PSN(),
	}
}

// Opcode returns the OpCode field.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SetOpcode sets the OpCode field.
func (b BTH) SetOpcode(op Opcode) { b[bthOpcode] = byte(op) }

// SolicitedEvent reports the SE bit: the requester asks the responder's
// consumer to be notified of the completion.
func (b BTH) SolicitedEvent() bool { return b[bthFlags]&bthSEBit != 0 }

// SetSolicitedEvent sets the SE bit.
func (b BTH) SetSolicitedEvent(v bool) { setBit(&b[bthFlags], bthSEBit, v) }

// MigReq reports the M bit, used by automatic path migration.
func (b BTH) MigReq() bool { return b[bthFlags]&bthMigReqBit != 0 }

// SetMigReq sets the M bit.
func (b BTH) SetMigReq(v bool) { setBit(&b[bthFlags], bthMigReqBit, v) }

// PadCount returns the number of pad bytes (0-3) between the payload and the
// ICRC that align the packet to a multiple of 4 bytes.
func (b BTH) PadCount() uint8 { return b[bthFlags] & bthPadMask >> bthPadShift }

// SetPadCount sets the pad count, keeping its low two bits.
func (b BTH) SetPadCount(n uint8) {
	b[bthFlags] = b[bthFlags]&^bthPadMask | n<<bthPadShift&bthPadMask
}

// TVer returns the transport header version; IBA defines only 0.
func (b BTH) TVer() uint8 { return b[bthFlags] & bthTVerMask }

// SetTVer sets the transport header version, keeping its low four bits.
func (b BTH) SetTVer(v uint8) { b[bthFlags] = b[bthFlags]&^bthTVerMask | v&bthTVerMask }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[bthPKey:]) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[bthPKey:], k) }

// FECN reports the forward explicit congestion notification bit, which
// RoCEv2 receivers set from the IP ECN CE mark before DCQCN processing.
func (b BTH) FECN() bool { return b[bthECN]&bthFECNBit != 0 }

// SetFECN sets the FECN bit.
func (b BTH) SetFECN(v bool) { setBit(&b[bthECN], bthFECNBit, v) }

// BECN reports the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[bthECN]&bthBECNBit != 0 }

// SetBECN sets the BECN bit.
func (b BTH) SetBECN(v bool) { setBit(&b[bthECN], bthBECNBit, v) }

// DestQPN returns the 24-bit destination queue pair number.
func (b BTH) DestQPN() uint32 { return get24(b[bthDestQPN:]) }

// SetDestQPN sets the destination QPN, masked to 24 bits; byte 4 (FECN,
// BECN) is left alone.
func (b BTH) SetDestQPN(qpn uint32) { put24(b[bthDestQPN:], qpn) }

// AckReq reports whether the requester asks for an explicit ACK.
func (b BTH) AckReq() bool { return b[bthAckReq]&bthAckReqBit != 0 }

// SetAckReq sets the AckReq bit.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAckReq], bthAckReqBit, v) }

// PSN returns the 24-bit packet sequence number.
func (b BTH) PSN() uint32 { return get24(b[bthPSN:]) }

// SetPSN sets the PSN, masked to 24 bits; the AckReq byte is left alone, so
// callers may pass an unwrapped counter.
func (b BTH) SetPSN(psn uint32) { put24(b[bthPSN:], psn) }

func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

func bit(v bool, mask byte) byte {
	if v {
		return mask
	}
	return 0
}

func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}
