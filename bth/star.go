package bth

import (
	"encoding/binary"
	"fmt"

	"github.com/softnic/softnic/qp"
)

// StaR's stateless mode (StaR §3.1, "Packet types"; docs/wire.md): the
// server keeps no connection state in its NIC. Its driver pushes each work
// request to the client in a WQEP, the client pushes each completion back
// in a CQEP, and an EA acknowledges either. Data the server receives comes
// in RDPs, each acknowledged by an RA the server builds from the RDP's own
// headers; data the server sends leaves in SDPs, each asked for by the
// client's GD. Every header below carries what the stateless side needs to
// act on its packet alone. The paper lists the fields, not their layout;
// the layout is softnic's (docs/wire.md draws it).

// WQEPETH is a view of StaR's 48-byte Work Queue Element Push Extended
// Transport Header, carried by STAR_WQEP: a work request the server's
// driver posted, pushed to the client that runs it (StaR §3.1).
//
//	bytes  0-3   DriverSeq: the per-connection driver sequence number
//	byte   4     Kind (WQEPKind)
//	byte   5     Flags (WQEPFlags)
//	bytes  6-7   reserved
//	bytes  8-15  WRID
//	bytes 16-23  LocalVA: server memory
//	bytes 24-27  LocalKey: the server lkey/rkey the client names
//	bytes 28-31  Length
//	bytes 32-39  RemoteVA: client memory, for READ and WRITE
//	bytes 40-43  RemoteKey
//	bytes 44-47  Imm
type WQEPETH []byte

// WQEPKind is the work request a WQEP carries.
type WQEPKind uint8

const (
	WQEPRecv             WQEPKind = 1
	WQEPSend             WQEPKind = 2
	WQEPRDMAWrite        WQEPKind = 3
	WQEPRDMAWriteWithImm WQEPKind = 4
	WQEPRDMARead         WQEPKind = 5
	WQEPSendWithImm      WQEPKind = 6
	// A memory registration: the Local fields describe the server region
	// (VA, key, length), the access flags its remote access.
	WQEPMRReg   WQEPKind = 16
	WQEPMRDereg WQEPKind = 17
)

var wqepKindNames = map[WQEPKind]string{
	WQEPRecv: "RECV", WQEPSend: "SEND", WQEPRDMAWrite: "RDMA_WRITE",
	WQEPRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WQEPRDMARead: "RDMA_READ",
	WQEPSendWithImm: "SEND_WITH_IMM", WQEPMRReg: "MR_REG", WQEPMRDereg: "MR_DEREG",
}

// String returns the kind's name, e.g. "RDMA_READ", or "WQEPKind(n)".
func (k WQEPKind) String() string {
	if n, ok := wqepKindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("WQEPKind(%d)", uint8(k))
}

// WQEPFlags is the flags byte of a WQEPETH. Bits not named here are
// reserved: sent as 0, ignored on receipt.
type WQEPFlags uint8

const (
	WQEPSignaled  WQEPFlags = 1 << 0 // IBV_SEND_SIGNALED: the client sends a CQEP on success
	WQEPSolicited WQEPFlags = 1 << 1 // IBV_SEND_SOLICITED
	// The remote access of a region an MR_REG registers.
	WQEPRemoteWrite  WQEPFlags = 1 << 2
	WQEPRemoteRead   WQEPFlags = 1 << 3
	WQEPRemoteAtomic WQEPFlags = 1 << 4
	// WQEPTableDone, on an MR_REG, says the server's driver has now sent
	// its whole memory table as it stood when the connection was made:
	// the client's RDPs and GDs wait for it.
	WQEPTableDone WQEPFlags = 1 << 5
)

// WQEPETHFields holds every WQEPETH field.
type WQEPETHFields struct {
	DriverSeq uint32
	Kind      WQEPKind
	Flags     WQEPFlags
	WRID      uint64
	LocalVA   uint64
	LocalKey  uint32
	Length    uint32
	RemoteVA  uint64
	RemoteKey uint32
	Imm       uint32
}

// Encode writes the whole header from f; the reserved bytes are zero.
func (w WQEPETH) Encode(f *WQEPETHFields) {
	_ = w[WQEPETHLen-1]
	w.SetDriverSeq(f.DriverSeq)
	w.SetKind(f.Kind)
	w.SetFlags(f.Flags)
	w[6], w[7] = 0, 0
	w.SetWRID(f.WRID)
	w.SetLocalVA(f.LocalVA)
	w.SetLocalKey(f.LocalKey)
	w.SetLength(f.Length)
	w.SetRemoteVA(f.RemoteVA)
	w.SetRemoteKey(f.RemoteKey)
	w.SetImm(f.Imm)
}

// Fields returns every field of the header.
func (w WQEPETH) Fields() WQEPETHFields {
	_ = w[WQEPETHLen-1]
	return WQEPETHFields{
		DriverSeq: w.DriverSeq(), Kind: w.Kind(), Flags: w.Flags(), WRID: w.WRID(),
		LocalVA: w.LocalVA(), LocalKey: w.LocalKey(), Length: w.Length(),
		RemoteVA: w.RemoteVA(), RemoteKey: w.RemoteKey(), Imm: w.Imm(),
	}
}

// DriverSeq returns the per-connection driver sequence number.
func (w WQEPETH) DriverSeq() uint32 { return binary.BigEndian.Uint32(w[0:]) }

// SetDriverSeq sets the driver sequence number.
func (w WQEPETH) SetDriverSeq(n uint32) { binary.BigEndian.PutUint32(w[0:], n) }

// Kind returns the kind of work request.
func (w WQEPETH) Kind() WQEPKind { return WQEPKind(w[4]) }

// SetKind sets the kind of work request.
func (w WQEPETH) SetKind(k WQEPKind) { w[4] = byte(k) }

// Flags returns the flags byte.
func (w WQEPETH) Flags() WQEPFlags { return WQEPFlags(w[5]) }

// SetFlags sets the flags byte.
func (w WQEPETH) SetFlags(f WQEPFlags) { w[5] = byte(f) }

// WRID returns the work request ID the server's application gave.
func (w WQEPETH) WRID() uint64 { return binary.BigEndian.Uint64(w[8:]) }

// SetWRID sets the work request ID.
func (w WQEPETH) SetWRID(id uint64) { binary.BigEndian.PutUint64(w[8:], id) }

// LocalVA returns the virtual address in server memory.
func (w WQEPETH) LocalVA() uint64 { return binary.BigEndian.Uint64(w[16:]) }

// SetLocalVA sets the server virtual address.
func (w WQEPETH) SetLocalVA(va uint64) { binary.BigEndian.PutUint64(w[16:], va) }

// LocalKey returns the server key the client names in its RDPs and GDs.
func (w WQEPETH) LocalKey() uint32 { return binary.BigEndian.Uint32(w[24:]) }

// SetLocalKey sets the server key.
func (w WQEPETH) SetLocalKey(k uint32) { binary.BigEndian.PutUint32(w[24:], k) }

// Length returns the length in bytes of the server buffer (of the
// region, for MR_REG and MR_DEREG).
func (w WQEPETH) Length() uint32 { return binary.BigEndian.Uint32(w[28:]) }

// SetLength sets the length.
func (w WQEPETH) SetLength(n uint32) { binary.BigEndian.PutUint32(w[28:], n) }

// RemoteVA returns the virtual address in client memory (READ, WRITE).
func (w WQEPETH) RemoteVA() uint64 { return binary.BigEndian.Uint64(w[32:]) }

// SetRemoteVA sets the client virtual address.
func (w WQEPETH) SetRemoteVA(va uint64) { binary.BigEndian.PutUint64(w[32:], va) }

// RemoteKey returns the client's rkey (READ, WRITE).
func (w WQEPETH) RemoteKey() uint32 { return binary.BigEndian.Uint32(w[40:]) }

// SetRemoteKey sets the client's rkey.
func (w WQEPETH) SetRemoteKey(k uint32) { binary.BigEndian.PutUint32(w[40:], k) }

// Imm returns the immediate data (SEND and RDMA WRITE with immediate).
func (w WQEPETH) Imm() uint32 { return binary.BigEndian.Uint32(w[44:]) }

// SetImm sets the immediate data.
func (w WQEPETH) SetImm(v uint32) { binary.BigEndian.PutUint32(w[44:], v) }

// CQEPETH is a view of StaR's 16-byte Completion Queue Element Push
// Extended Transport Header, carried by STAR_CQEP: the completion of a
// WQEP, pushed back to the server by the client (StaR §3.1).
//
//	bytes 0-3    DriverSeq: the WQEP it completes
//	byte  4      Status (enum ibv_wc_status)
//	byte  5      Opcode (enum ibv_wc_opcode)
//	byte  6      Flags (CQEPFlags)
//	byte  7      reserved
//	bytes 8-11   ByteLen
//	bytes 12-15  Imm
type CQEPETH []byte

// CQEPFlags is the flags byte of a CQEPETH. Bits not named here are
// reserved: sent as 0, ignored on receipt.
type CQEPFlags uint8

// CQEPWithImm says Imm holds immediate data (IBV_WC_WITH_IMM).
const CQEPWithImm CQEPFlags = 1 << 0

// CQEPETHFields holds every CQEPETH field.
type CQEPETHFields struct {
	DriverSeq uint32
	Status    qp.WCStatus
	Opcode    qp.WCOpcode
	Flags     CQEPFlags
	ByteLen   uint32
	Imm       uint32
}

// Encode writes the whole header from f; the reserved byte is zero.
func (c CQEPETH) Encode(f *CQEPETHFields) {
	_ = c[CQEPETHLen-1]
	c.SetDriverSeq(f.DriverSeq)
	c.SetStatus(f.Status)
	c.SetOpcode(f.Opcode)
	c.SetFlags(f.Flags)
	c[7] = 0
	c.SetByteLen(f.ByteLen)
	c.SetImm(f.Imm)
}

// Fields returns every field of the header.
func (c CQEPETH) Fields() CQEPETHFields {
	_ = c[CQEPETHLen-1]
	return CQEPETHFields{
		DriverSeq: c.DriverSeq(), Status: c.Status(), Opcode: c.Opcode(),
		Flags: c.Flags(), ByteLen: c.ByteLen(), Imm: c.Imm(),
	}
}

// DriverSeq returns the driver sequence number of the WQEP completed.
func (c CQEPETH) DriverSeq() uint32 { return binary.BigEndian.Uint32(c[0:]) }

// SetDriverSeq sets the driver sequence number.
func (c CQEPETH) SetDriverSeq(n uint32) { binary.BigEndian.PutUint32(c[0:], n) }

// Status returns the completion status.
func (c CQEPETH) Status() qp.WCStatus { return qp.WCStatus(c[4]) }

// SetStatus sets the completion status.
func (c CQEPETH) SetStatus(s qp.WCStatus) { c[4] = byte(s) }

// Opcode returns the completion opcode.
func (c CQEPETH) Opcode() qp.WCOpcode { return qp.WCOpcode(c[5]) }

// SetOpcode sets the completion opcode.
func (c CQEPETH) SetOpcode(o qp.WCOpcode) { c[5] = byte(o) }

// Flags returns the flags byte.
func (c CQEPETH) Flags() CQEPFlags { return CQEPFlags(c[6]) }

// SetFlags sets the flags byte.
func (c CQEPETH) SetFlags(f CQEPFlags) { c[6] = byte(f) }

// ByteLen returns the number of bytes the work request moved.
func (c CQEPETH) ByteLen() uint32 { return binary.BigEndian.Uint32(c[8:]) }

// SetByteLen sets the byte count.
func (c CQEPETH) SetByteLen(n uint32) { binary.BigEndian.PutUint32(c[8:], n) }

// Imm returns the immediate data, valid with CQEPWithImm.
func (c CQEPETH) Imm() uint32 { return binary.BigEndian.Uint32(c[12:]) }

// SetImm sets the immediate data.
func (c CQEPETH) SetImm(v uint32) { binary.BigEndian.PutUint32(c[12:], v) }

// EAETH is a view of StaR's 8-byte Element Acknowledgement Extended
// Transport Header, carried by STAR_EA: the receiver of a WQEP or a CQEP
// acknowledges it by its driver sequence number (StaR §3.1).
//
//	byte  0     Kind (EAKind)
//	bytes 1-3   reserved
//	bytes 4-7   DriverSeq
type EAETH []byte

// EAKind says what an EA acknowledges.
type EAKind uint8

const (
	EAWQEP EAKind = 0 // a WQEP, acknowledged by the client
	EACQEP EAKind = 1 // a CQEP, acknowledged by the server's driver
	// EAWQEPUpTo acknowledges every WQEP up to and including DriverSeq:
	// the client's cumulative EA (docs/star.md "Acknowledgements").
	EAWQEPUpTo EAKind = 2
)

// String returns "WQEP", "CQEP", "WQEPUpTo" or "EAKind(n)".
func (k EAKind) String() string {
	switch k {
	case EAWQEP:
		return "WQEP"
	case EACQEP:
		return "CQEP"
	case EAWQEPUpTo:
		return "WQEPUpTo"
	}
	return fmt.Sprintf("EAKind(%d)", uint8(k))
}

// EAETHFields holds every EAETH field.
type EAETHFields struct {
	Kind      EAKind
	DriverSeq uint32
}

// Encode writes the whole header from f; the reserved bytes are zero.
func (e EAETH) Encode(f *EAETHFields) {
	_ = e[EAETHLen-1]
	e.SetKind(f.Kind)
	e[1], e[2], e[3] = 0, 0, 0
	e.SetDriverSeq(f.DriverSeq)
}

// Fields returns every field of the header.
func (e EAETH) Fields() EAETHFields { return EAETHFields{Kind: e.Kind(), DriverSeq: e.DriverSeq()} }

// Kind returns what the EA acknowledges.
func (e EAETH) Kind() EAKind { return EAKind(e[0]) }

// SetKind sets what the EA acknowledges.
func (e EAETH) SetKind(k EAKind) { e[0] = byte(k) }

// DriverSeq returns the driver sequence number acknowledged.
func (e EAETH) DriverSeq() uint32 { return binary.BigEndian.Uint32(e[4:]) }

// SetDriverSeq sets the driver sequence number acknowledged.
func (e EAETH) SetDriverSeq(n uint32) { binary.BigEndian.PutUint32(e[4:], n) }

// RDPETH is a view of StaR's 13-byte Receiving Data Packet Extended
// Transport Header, carried by STAR_RDP: where in server memory the
// payload goes (StaR §3.1: the DMA address). The BTH PSN is the RDP's
// sequence number, which the RA echoes; the BTH DestQP names the client
// QP the RA goes to (a stateless server has no QP to name), and the
// payload's length is the frame's.
//
//	bytes 0-7    VA: server memory
//	bytes 8-11   RKey: the server key
//	byte  12     Flags (RDPFlags)
type RDPETH []byte

// RDPFlags is the flags byte of an RDPETH. Bits not named here are
// reserved: sent as 0, ignored on receipt.
type RDPFlags uint8

const (
	// RDPLast marks the last RDP of its work request.
	RDPLast RDPFlags = 1 << 0
	// RDPToRecv says the payload goes into a receive buffer that the
	// server's driver pushed in a RECV WQEP (a client's SEND): the server
	// checks the region for local write, as an RC responder writes a
	// RECV's buffer, not for remote write.
	RDPToRecv RDPFlags = 1 << 1
)

// GDFromSend, a GDETH flag, says the GD reads the buffer of a SEND that
// the server's driver pushed in a WQEP: the server checks only that the
// range lies in a registered region, as an RC requester reads a SEND's
// buffer, not for remote read.
const GDFromSend uint8 = 1 << 0

// RDPETHFields holds every RDPETH field.
type RDPETHFields struct {
	VA    uint64
	RKey  uint32
	Flags RDPFlags
}

// Encode writes the whole header from f.
func (r RDPETH) Encode(f *RDPETHFields) {
	_ = r[RDPETHLen-1]
	r.SetVA(f.VA)
	r.SetRKey(f.RKey)
	r.SetFlags(f.Flags)
}

// Fields returns every field of the header.
func (r RDPETH) Fields() RDPETHFields {
	_ = r[RDPETHLen-1]
	return RDPETHFields{VA: r.VA(), RKey: r.RKey(), Flags: r.Flags()}
}

// VA returns the server virtual address of the payload's first byte.
func (r RDPETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// SetVA sets the server virtual address.
func (r RDPETH) SetVA(va uint64) { binary.BigEndian.PutUint64(r[0:], va) }

// RKey returns the server key of the target region.
func (r RDPETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// SetRKey sets the server key.
func (r RDPETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(r[8:], k) }

// Flags returns the flags byte.
func (r RDPETH) Flags() RDPFlags { return RDPFlags(r[12]) }

// SetFlags sets the flags byte.
func (r RDPETH) SetFlags(f RDPFlags) { r[12] = byte(f) }

// GDETH is a view of StaR's 16-byte Get Data Extended Transport Header,
// carried by STAR_GD: the client asks the server to send Length bytes of
// its memory from VA, in SDPs of the MTU it names (StaR §3.1). The BTH
// PSN is the PSN of the first SDP, and the BTH DestQP names the client
// QP the SDPs go to.
//
//	bytes 0-7    VA: server memory
//	bytes 8-11   RKey: the server key
//	bytes 12-13  Length: the bytes asked for (the paper's 2-byte length)
//	byte  14     MTU (enum ibv_mtu) of the SDPs
//	byte  15     Flags: GDFromSend
type GDETH []byte

// GDETHFields holds every GDETH field.
type GDETHFields struct {
	VA     uint64
	RKey   uint32
	Length uint16
	MTU    qp.MTU
	Flags  uint8
}

// Encode writes the whole header from f.
func (g GDETH) Encode(f *GDETHFields) {
	_ = g[GDETHLen-1]
	g.SetVA(f.VA)
	g.SetRKey(f.RKey)
	g.SetLength(f.Length)
	g.SetMTU(f.MTU)
	g.SetFlags(f.Flags)
}

// Fields returns every field of the header.
func (g GDETH) Fields() GDETHFields {
	_ = g[GDETHLen-1]
	return GDETHFields{VA: g.VA(), RKey: g.RKey(), Length: g.Length(), MTU: g.MTU(), Flags: g.Flags()}
}

// VA returns the server virtual address of the first byte asked for.
func (g GDETH) VA() uint64 { return binary.BigEndian.Uint64(g[0:]) }

// SetVA sets the server virtual address.
func (g GDETH) SetVA(va uint64) { binary.BigEndian.PutUint64(g[0:], va) }

// RKey returns the server key of the source region.
func (g GDETH) RKey() uint32 { return binary.BigEndian.Uint32(g[8:]) }

// SetRKey sets the server key.
func (g GDETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(g[8:], k) }

// Length returns the number of bytes asked for.
func (g GDETH) Length() uint16 { return binary.BigEndian.Uint16(g[12:]) }

// SetLength sets the number of bytes asked for.
func (g GDETH) SetLength(n uint16) { binary.BigEndian.PutUint16(g[12:], n) }

// MTU returns the path MTU the SDPs use.
func (g GDETH) MTU() qp.MTU { return qp.MTU(g[14]) }

// SetMTU sets the path MTU of the SDPs.
func (g GDETH) SetMTU(m qp.MTU) { g[14] = byte(m) }

// Flags returns the flags byte.
func (g GDETH) Flags() uint8 { return g[15] }

// SetFlags sets the flags byte.
func (g GDETH) SetFlags(f uint8) { g[15] = f }

// SDPETH is a view of StaR's 4-byte Sending Data Packet Extended Transport
// Header, carried by STAR_SDP: the byte offset of the packet's payload in
// the range its GD asked for, so that the client can place SDPs in
// whatever order they arrive. The BTH PSN is the GD's PSN plus the
// packet's index.
type SDPETH []byte

// SDPETHFields holds every SDPETH field.
type SDPETHFields struct {
	Offset uint32
}

// Encode writes the whole header from f.
func (s SDPETH) Encode(f *SDPETHFields) { s.SetOffset(f.Offset) }

// Fields returns every field of the header.
func (s SDPETH) Fields() SDPETHFields { return SDPETHFields{Offset: s.Offset()} }

// Offset returns the payload's offset in its GD's range.
func (s SDPETH) Offset() uint32 { return binary.BigEndian.Uint32(s) }

// SetOffset sets the payload's offset.
func (s SDPETH) SetOffset(off uint32) { binary.BigEndian.PutUint32(s, off) }
