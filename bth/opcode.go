package bth

import "fmt"

// UDPPort is the IANA-assigned RoCEv2 UDP destination port (IBA Annex A17).
const UDPPort = 4791

// Header lengths in bytes (IBA 9.2 and 9.3).
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	ImmDtLen        = 4
	IETHLen         = 4
	DETHLen         = 8
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ICRCLen         = 4

	// softnic's extension headers (docs/wire.md), carried only by the
	// manufacturer-specific opcodes 0xC0-0xFF. PETHLen and RWSNETHLen
	// are not multiples of 4: a payload after them starts unaligned.
	PETHLen     = 6
	RWSNETHLen  = 3
	SACKETHLen  = 4
	HolesETHLen = 16

	// StaR's stateless-mode headers (docs/wire.md), carried only by the
	// opcodes 0xE0-0xE6.
	WQEPETHLen = 48
	CQEPETHLen = 16
	EAETHLen   = 8
	RDPETHLen  = 13
	GDETHLen   = 16
	SDPETHLen  = 4

	// CNPReservedLen is the reserved field that follows a CNP's BTH
	// (IBA Annex A17, RoCEv2's congestion notification packet).
	CNPReservedLen = 16
)

// Opcode is the BTH OpCode field (IBA 9.2.1). The top three bits
// select the transport service (000 RC, 011 UD), the low five the operation.
type Opcode uint8

// Opcodes softnic speaks: all of reliable connection plus the two UD sends.
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0A
	RCWriteOnlyImm       Opcode = 0x0B
	RCReadRequest        Opcode = 0x0C
	RCReadResponseFirst  Opcode = 0x0D
	RCReadResponseMiddle Opcode = 0x0E
	RCReadResponseLast   Opcode = 0x0F
	RCReadResponseOnly   Opcode = 0x10
	RCAcknowledge        Opcode = 0x11
	RCAtomicAcknowledge  Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInv        Opcode = 0x16
	RCSendOnlyInv        Opcode = 0x17
	UDSendOnly           Opcode = 0x64
	UDSendOnlyImm        Opcode = 0x65
)

// CNP is RoCEv2's congestion notification packet (IBA Annex A17): the
// only opcode of the CNP transport (top three bits 100), sent by a
// notification point (a DCQCN NIC that received ECN-marked packets, or a
// switch) to the reaction point, the sender of those packets, whose QP is
// the BTH's DestQP. A BTH (BECN set, PSN 0) and 16 reserved bytes, then
// the ICRC. softnic recognises and counts it (dataplane's
// rp_cnp_ignored) and has no congestion control to react to it
// (docs/wire.md, "CNP").
const CNP Opcode = 0x81

// softnic's extension opcodes, in the manufacturer-specific range
// 0xC0-0xFF (IBA Table 36), used only on connections that negotiated a
// loss recovery with out-of-order placement (IRN §5.3). Each is 0xC0 plus
// the RC opcode it extends, so that a packet can be placed whatever
// arrived before it (IRN §5.3.1, §5.3.2): a SEND packet with a 6-byte PETH
// appended (its receive WQE's sequence number and its index in the
// message), an RDMA WRITE packet with a RETH on every packet rather than
// the first only (on a MIDDLE or LAST packet its DMA length counts the
// message's bytes up to the packet's end, which places it), and the last
// packet of a WRITE with immediate with a 3-byte RWSNETH after its ImmDt
// (the receive WQE its completion consumes). RCAcknowledgeSACK is the IRN
// NACK (§3.1): an ACK packet with a NAK syndrome and a SACKETH naming the
// packet that triggered it. docs/wire.md draws every byte.
const (
	RCSendFirstOOO    Opcode = 0xC0
	RCSendMiddleOOO   Opcode = 0xC1
	RCSendLastOOO     Opcode = 0xC2
	RCSendLastImmOOO  Opcode = 0xC3
	RCSendOnlyOOO     Opcode = 0xC4
	RCSendOnlyImmOOO  Opcode = 0xC5
	RCWriteFirstOOO   Opcode = 0xC6
	RCWriteMiddleOOO  Opcode = 0xC7
	RCWriteLastOOO    Opcode = 0xC8
	RCWriteLastImmOOO Opcode = 0xC9
	RCWriteOnlyOOO    Opcode = 0xCA
	RCWriteOnlyImmOOO Opcode = 0xCB
	RCAcknowledgeSACK Opcode = 0xD1
	// FaSR (§IV-D): a SACK whose lost-cnt overflowed, marked by its own
	// opcode, and the FNACK naming a dropped retransmission (§III-D).
	RCAcknowledgeSACKOverflow Opcode = 0xD2
	RCAcknowledgeFNACK        Opcode = 0xD3
	// MELO's NACK (§3.2.4): the expected PSN in the BTH, RCV.HIGH and the
	// three most recent holes in a HolesETH.
	RCAcknowledgeHoles Opcode = 0xD4
)

// StaR's stateless mode (StaR §3.1, "Packet types"; star.go and
// docs/wire.md), one block of the manufacturer-specific range, all on the
// RC transport. The server's driver pushes work requests (WQEP) and the
// client completions (CQEP), each acknowledged by an EA; the client sends
// the server data in RDPs, each acknowledged by an RA (an ACK built from
// the RDP's headers), and gets data from it with GDs, answered by SDPs.
// An engine with dataplane.Config.StarServer answers RDPs and GDs
// (dataplane/star.go) and counts the others as star_dropped; without it,
// the engine counts them all as rcvd_bad_opcode, as it does every opcode
// that is neither request nor response.
const (
	StarWQEP Opcode = 0xE0 // server -> client: a work request
	StarCQEP Opcode = 0xE1 // client -> server: a completion
	StarEA   Opcode = 0xE2 // element ACK of a WQEP or CQEP
	StarRDP  Opcode = 0xE3 // client -> server: receiving data packet
	StarRA   Opcode = 0xE4 // server -> client: receiving ACK of an RDP
	StarGD   Opcode = 0xE5 // client -> server: get data
	StarSDP  Opcode = 0xE6 // server -> client: sending data packet
)

// IsExtension reports whether op is in the manufacturer-specific range,
// which standard RoCEv2 peers and tools do not decode.
func (o Opcode) IsExtension() bool { return o >= 0xC0 }

// IsStar reports whether op is one of StaR's stateless-mode opcodes,
// StarWQEP through StarSDP.
func (o Opcode) IsStar() bool { return o >= StarWQEP && o <= StarSDP }

// String returns the rxe/Wireshark style name, e.g. "RC_RDMA_WRITE_ONLY", or
// "OPCODE_0x15" for opcodes softnic does not know.
func (o Opcode) String() string {
	if info := Lookup(o); info != nil {
		return info.Name
	}
	return fmt.Sprintf("OPCODE_0x%02x", uint8(o))
}

// OpFlags describes what an opcode carries and what role its packet plays.
type OpFlags uint32

const (
	HasRETH         OpFlags = 1 << iota // RDMA extended transport header follows
	HasAETH                             // ACK extended transport header follows
	HasImm                              // immediate data follows
	HasIETH                             // invalidate extended transport header follows
	HasDETH                             // datagram extended transport header follows
	HasAtomicETH                        // atomic extended transport header follows
	HasAtomicAckETH                     // atomic ACK extended transport header follows
	HasPayload                          // a (possibly empty) payload follows the headers
	HasPETH                             // softnic's placement extended transport header follows (SEND)
	HasSACKETH                          // softnic's selective-acknowledgement header follows
	HasHolesETH                         // softnic's holes header (MELO's NACK) follows

	IsRequest  // sent by a requester
	IsResponse // sent by a responder: ACK, read response, atomic ACK

	// Position of the packet within its message. An ONLY packet, and every
	// single-packet operation (read request, atomics, ACKs, UD), is both
	// IsFirst and IsLast.
	IsFirst
	IsMiddle
	IsLast

	// Operation family. Read responses are IsRead and atomic ACKs IsAtomic,
	// so that together with IsResponse the family also classifies responses;
	// a plain ACK has no family.
	IsSend
	IsWrite
	IsRead
	IsAtomic
)

// StaR's stateless-mode headers (docs/wire.md), after the others so that
// the flags above keep their values. A StaR opcode has none of the role
// flags of the RC state machines (IsRequest, IsResponse, position,
// family): its role is its opcode's (Opcode.IsStar).
const (
	HasWQEPETH OpFlags = IsAtomic << (1 + iota) // StaR's work request push header follows
	HasCQEPETH                                  // StaR's completion push header follows
	HasEAETH                                    // StaR's element ACK header follows
	HasRDPETH                                   // StaR's receiving data packet header follows
	HasGDETH                                    // StaR's get data header follows
	HasSDPETH                                   // StaR's sending data packet header follows

	// HasCNPReserved: a CNP's 16 reserved bytes follow (CNP). Like a
	// StaR opcode, a CNP has none of the RC role flags.
	HasCNPReserved

	// HasRWSNETH: softnic's receive WQE sequence number header follows,
	// on the last packet of an out-of-order RDMA WRITE with immediate.
	HasRWSNETH
)

// OpInfo is the static description of one opcode, the equivalent of rxe's
// struct rxe_opcode_info. Offsets are from the start of the BTH; an absent
// header has offset -1.
type OpInfo struct {
	Name   string
	Flags  OpFlags
	Length int // BTH plus all extension headers, in bytes: the payload's offset

	RETHOff, AETHOff, ImmOff, IETHOff, DETHOff, AtomicETHOff, AtomicAckETHOff int
	PETHOff, RWSNETHOff, SACKETHOff, HolesETHOff                              int
	WQEPETHOff, CQEPETHOff, EAETHOff, RDPETHOff, GDETHOff, SDPETHOff          int
	CNPReservedOff                                                            int
}

// PacketLen returns the length of a RoCE packet of this opcode with
// payloadLen payload bytes: headers, payload, pad and ICRC.
func (i *OpInfo) PacketLen(payloadLen int) int {
	return i.Length + payloadLen + PadFor(payloadLen) + ICRCLen
}

// Lookup returns the table entry for op, or nil if softnic does not know the
// opcode (reserved, UC, RD, a CNP-transport opcode other than CNP, or a
// manufacturer-specific one that is not softnic's). The result points into a
// static table and must not be modified.
func Lookup(op Opcode) *OpInfo {
	info := &opTable[op]
	if info.Name == "" {
		return nil
	}
	return info
}

// opTable is indexed by opcode. Only names and flags are written out; the
// offsets are filled in by layoutOpTable from the flags.
var opTable = layoutOpTable([256]OpInfo{
	RCSendFirst:          {Name: "RC_SEND_FIRST", Flags: HasPayload | IsRequest | IsFirst | IsSend},
	RCSendMiddle:         {Name: "RC_SEND_MIDDLE", Flags: HasPayload | IsRequest | IsMiddle | IsSend},
	RCSendLast:           {Name: "RC_SEND_LAST", Flags: HasPayload | IsRequest | IsLast | IsSend},
	RCSendLastImm:        {Name: "RC_SEND_LAST_WITH_IMMEDIATE", Flags: HasImm | HasPayload | IsRequest | IsLast | IsSend},
	RCSendOnly:           {Name: "RC_SEND_ONLY", Flags: HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	RCSendOnlyImm:        {Name: "RC_SEND_ONLY_WITH_IMMEDIATE", Flags: HasImm | HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	RCWriteFirst:         {Name: "RC_RDMA_WRITE_FIRST", Flags: HasRETH | HasPayload | IsRequest | IsFirst | IsWrite},
	RCWriteMiddle:        {Name: "RC_RDMA_WRITE_MIDDLE", Flags: HasPayload | IsRequest | IsMiddle | IsWrite},
	RCWriteLast:          {Name: "RC_RDMA_WRITE_LAST", Flags: HasPayload | IsRequest | IsLast | IsWrite},
	RCWriteLastImm:       {Name: "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Flags: HasImm | HasPayload | IsRequest | IsLast | IsWrite},
	RCWriteOnly:          {Name: "RC_RDMA_WRITE_ONLY", Flags: HasRETH | HasPayload | IsRequest | IsFirst | IsLast | IsWrite},
	RCWriteOnlyImm:       {Name: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Flags: HasRETH | HasImm | HasPayload | IsRequest | IsFirst | IsLast | IsWrite},
	RCReadRequest:        {Name: "RC_RDMA_READ_REQUEST", Flags: HasRETH | IsRequest | IsFirst | IsLast | IsRead},
	RCReadResponseFirst:  {Name: "RC_RDMA_READ_RESPONSE_FIRST", Flags: HasAETH | HasPayload | IsResponse | IsFirst | IsRead},
	RCReadResponseMiddle: {Name: "RC_RDMA_READ_RESPONSE_MIDDLE", Flags: HasPayload | IsResponse | IsMiddle | IsRead},
	RCReadResponseLast:   {Name: "RC_RDMA_READ_RESPONSE_LAST", Flags: HasAETH | HasPayload | IsResponse | IsLast | IsRead},
	RCReadResponseOnly:   {Name: "RC_RDMA_READ_RESPONSE_ONLY", Flags: HasAETH | HasPayload | IsResponse | IsFirst | IsLast | IsRead},
	RCAcknowledge:        {Name: "RC_ACKNOWLEDGE", Flags: HasAETH | IsResponse | IsFirst | IsLast},
	RCAtomicAcknowledge:  {Name: "RC_ATOMIC_ACKNOWLEDGE", Flags: HasAETH | HasAtomicAckETH | IsResponse | IsFirst | IsLast | IsAtomic},
	RCCompareSwap:        {Name: "RC_COMPARE_SWAP", Flags: HasAtomicETH | IsRequest | IsFirst | IsLast | IsAtomic},
	RCFetchAdd:           {Name: "RC_FETCH_ADD", Flags: HasAtomicETH | IsRequest | IsFirst | IsLast | IsAtomic},
	RCSendLastInv:        {Name: "RC_SEND_LAST_WITH_INVALIDATE", Flags: HasIETH | HasPayload | IsRequest | IsLast | IsSend},
	RCSendOnlyInv:        {Name: "RC_SEND_ONLY_WITH_INVALIDATE", Flags: HasIETH | HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	UDSendOnly:           {Name: "UD_SEND_ONLY", Flags: HasDETH | HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	UDSendOnlyImm:        {Name: "UD_SEND_ONLY_WITH_IMMEDIATE", Flags: HasDETH | HasImm | HasPayload | IsRequest | IsFirst | IsLast | IsSend},

	RCSendFirstOOO:            {Name: "RC_SEND_FIRST_OOO", Flags: HasPETH | HasPayload | IsRequest | IsFirst | IsSend},
	RCSendMiddleOOO:           {Name: "RC_SEND_MIDDLE_OOO", Flags: HasPETH | HasPayload | IsRequest | IsMiddle | IsSend},
	RCSendLastOOO:             {Name: "RC_SEND_LAST_OOO", Flags: HasPETH | HasPayload | IsRequest | IsLast | IsSend},
	RCSendLastImmOOO:          {Name: "RC_SEND_LAST_WITH_IMMEDIATE_OOO", Flags: HasImm | HasPETH | HasPayload | IsRequest | IsLast | IsSend},
	RCSendOnlyOOO:             {Name: "RC_SEND_ONLY_OOO", Flags: HasPETH | HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	RCSendOnlyImmOOO:          {Name: "RC_SEND_ONLY_WITH_IMMEDIATE_OOO", Flags: HasImm | HasPETH | HasPayload | IsRequest | IsFirst | IsLast | IsSend},
	RCWriteFirstOOO:           {Name: "RC_RDMA_WRITE_FIRST_OOO", Flags: HasRETH | HasPayload | IsRequest | IsFirst | IsWrite},
	RCWriteMiddleOOO:          {Name: "RC_RDMA_WRITE_MIDDLE_OOO", Flags: HasRETH | HasPayload | IsRequest | IsMiddle | IsWrite},
	RCWriteLastOOO:            {Name: "RC_RDMA_WRITE_LAST_OOO", Flags: HasRETH | HasPayload | IsRequest | IsLast | IsWrite},
	RCWriteLastImmOOO:         {Name: "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE_OOO", Flags: HasRETH | HasImm | HasRWSNETH | HasPayload | IsRequest | IsLast | IsWrite},
	RCWriteOnlyOOO:            {Name: "RC_RDMA_WRITE_ONLY_OOO", Flags: HasRETH | HasPayload | IsRequest | IsFirst | IsLast | IsWrite},
	RCWriteOnlyImmOOO:         {Name: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE_OOO", Flags: HasRETH | HasImm | HasRWSNETH | HasPayload | IsRequest | IsFirst | IsLast | IsWrite},
	RCAcknowledgeSACK:         {Name: "RC_ACKNOWLEDGE_SACK", Flags: HasAETH | HasSACKETH | IsResponse | IsFirst | IsLast},
	RCAcknowledgeSACKOverflow: {Name: "RC_ACKNOWLEDGE_SACK_OVERFLOW", Flags: HasAETH | HasSACKETH | IsResponse | IsFirst | IsLast},
	RCAcknowledgeFNACK:        {Name: "RC_ACKNOWLEDGE_FNAK", Flags: HasAETH | HasSACKETH | IsResponse | IsFirst | IsLast},
	RCAcknowledgeHoles:        {Name: "RC_ACKNOWLEDGE_HOLES", Flags: HasAETH | HasHolesETH | IsResponse | IsFirst | IsLast},

	StarWQEP: {Name: "STAR_WQEP", Flags: HasWQEPETH},
	StarCQEP: {Name: "STAR_CQEP", Flags: HasCQEPETH},
	StarEA:   {Name: "STAR_EA", Flags: HasEAETH},
	StarRDP:  {Name: "STAR_RDP", Flags: HasRDPETH | HasPayload},
	StarRA:   {Name: "STAR_RA", Flags: HasAETH},
	StarGD:   {Name: "STAR_GD", Flags: HasGDETH},
	StarSDP:  {Name: "STAR_SDP", Flags: HasSDPETH | HasPayload},

	CNP: {Name: "CNP", Flags: HasCNPReserved}, // the name Linux's hfi1 trace prints
})

// layoutOpTable fills in Length and the header offsets of every named entry.
// Extension headers follow the BTH in the order IBA 9.2 fixes and rxe's
// rxe_opcode.c encodes: DETH, RETH, AtomicETH, ImmDt, IETH for requests, and
// AETH then AtomicAckETH for responses (no opcode mixes the two groups).
// softnic's headers come after all IBA ones: PETH or RWSNETH for
// requests, SACKETH for responses; StaR's opcodes carry one header each (STAR_RA the AETH).
func layoutOpTable(table [256]OpInfo) [256]OpInfo {
	order := [...]struct {
		flag OpFlags
		len  int
		off  func(*OpInfo) *int
	}{
		{HasAETH, AETHLen, func(i *OpInfo) *int { return &i.AETHOff }},
		{HasAtomicAckETH, AtomicAckETHLen, func(i *OpInfo) *int { return &i.AtomicAckETHOff }},
		{HasDETH, DETHLen, func(i *OpInfo) *int { return &i.DETHOff }},
		{HasRETH, RETHLen, func(i *OpInfo) *int { return &i.RETHOff }},
		{HasAtomicETH, AtomicETHLen, func(i *OpInfo) *int { return &i.AtomicETHOff }},
		{HasImm, ImmDtLen, func(i *OpInfo) *int { return &i.ImmOff }},
		{HasIETH, IETHLen, func(i *OpInfo) *int { return &i.IETHOff }},
		{HasPETH, PETHLen, func(i *OpInfo) *int { return &i.PETHOff }},
		{HasRWSNETH, RWSNETHLen, func(i *OpInfo) *int { return &i.RWSNETHOff }},
		{HasSACKETH, SACKETHLen, func(i *OpInfo) *int { return &i.SACKETHOff }},
		{HasHolesETH, HolesETHLen, func(i *OpInfo) *int { return &i.HolesETHOff }},
		{HasWQEPETH, WQEPETHLen, func(i *OpInfo) *int { return &i.WQEPETHOff }},
		{HasCQEPETH, CQEPETHLen, func(i *OpInfo) *int { return &i.CQEPETHOff }},
		{HasEAETH, EAETHLen, func(i *OpInfo) *int { return &i.EAETHOff }},
		{HasRDPETH, RDPETHLen, func(i *OpInfo) *int { return &i.RDPETHOff }},
		{HasGDETH, GDETHLen, func(i *OpInfo) *int { return &i.GDETHOff }},
		{HasSDPETH, SDPETHLen, func(i *OpInfo) *int { return &i.SDPETHOff }},
		{HasCNPReserved, CNPReservedLen, func(i *OpInfo) *int { return &i.CNPReservedOff }},
	}
	for op := range table {
		info := &table[op]
		if info.Name == "" {
			continue
		}
		off := BTHLen
		for _, h := range order {
			if info.Flags&h.flag == 0 {
				*h.off(info) = -1
				continue
			}
			*h.off(info) = off
			off += h.len
		}
		info.Length = off
	}
	return table
}
