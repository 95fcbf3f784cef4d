package bth

import (
	"encoding/binary"

	"github.com/softnic/softnic/qp"
)

// RETH is a view of the 16-byte RDMA Extended Transport Header (IBA 9.3):
// virtual address (8), R_Key (4), DMA length (4). It opens an RDMA WRITE
// message and is the whole body of an RDMA READ request.
type RETH []byte

// RETHFields holds every RETH field.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// Encode writes the whole header from f.
func (r RETH) Encode(f *RETHFields) {
	_ = r[RETHLen-1]
	r.SetVA(f.VA)
	r.SetRKey(f.RKey)
	r.SetDMALen(f.DMALen)
}

// Fields returns every field of the header.
func (r RETH) Fields() RETHFields {
	return RETHFields{VA: r.VA(), RKey: r.RKey(), DMALen: r.DMALen()}
}

// VA returns the remote virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// SetVA sets the remote virtual address.
func (r RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(r[0:], va) }

// RKey returns the remote key of the target memory region.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// SetRKey sets the remote key.
func (r RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(r[8:], k) }

// DMALen returns the length of the whole RDMA operation in bytes.
func (r RETH) DMALen() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// SetDMALen sets the DMA length.
func (r RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(r[12:], n) }

// ImmDt is a view of the 4-byte Immediate Data header (IBA 9.3).
type ImmDt []byte

// Imm returns the immediate data as the big-endian number on the wire.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i) }

// SetImm sets the immediate data.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i, v) }

// IETH is a view of the 4-byte Invalidate Extended Transport Header
// (IBA 9.3): the R_Key that a SEND WITH INVALIDATE invalidates.
type IETH []byte

// RKey returns the R_Key to invalidate.
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i) }

// SetRKey sets the R_Key to invalidate.
func (i IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(i, k) }

// DETH is a view of the 8-byte Datagram Extended Transport Header
// (IBA 9.3): Q_Key (4), reserved (1), source QP (3).
type DETH []byte

// DETHFields holds every DETH field.
type DETHFields struct {
	QKey   uint32
	SrcQPN uint32
}

// Encode writes the whole header from f; the reserved byte is zero.
func (d DETH) Encode(f *DETHFields) {
	_ = d[DETHLen-1]
	d.SetQKey(f.QKey)
	d[4] = 0
	d.SetSrcQPN(f.SrcQPN)
}

// Fields returns every field of the header.
func (d DETH) Fields() DETHFields {
	return DETHFields{QKey: d.QKey(), SrcQPN: d.SrcQPN()}
}

// QKey returns the queue key that authorises access to the UD QP.
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d[0:]) }

// SetQKey sets the queue key.
func (d DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(d[0:], k) }

// SrcQPN returns the 24-bit source queue pair number.
func (d DETH) SrcQPN() uint32 { return get24(d[5:]) }

// SetSrcQPN sets the source QPN, masked to 24 bits.
func (d DETH) SetSrcQPN(qpn uint32) { put24(d[5:], qpn) }

// AtomicETH is a view of the 28-byte Atomic Extended Transport Header
// (IBA 9.3): virtual address (8), R_Key (4), swap or add data (8),
// compare data (8).
type AtomicETH []byte

// AtomicETHFields holds every AtomicETH field.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// Encode writes the whole header from f.
func (a AtomicETH) Encode(f *AtomicETHFields) {
	_ = a[AtomicETHLen-1]
	a.SetVA(f.VA)
	a.SetRKey(f.RKey)
	a.SetSwapAdd(f.SwapAdd)
	a.SetCompare(f.Compare)
}

// Fields returns every field of the header.
func (a AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: a.VA(), RKey: a.RKey(), SwapAdd: a.SwapAdd(), Compare: a.Compare()}
}

// VA returns the remote virtual address of the 8-byte operand.
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a[0:]) }

// SetVA sets the remote virtual address.
func (a AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64(a[0:], va) }

// RKey returns the remote key.
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[8:]) }

// SetRKey sets the remote key.
func (a AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(a[8:], k) }

// SwapAdd returns the swap value (COMPARE SWAP) or the addend (FETCH ADD).
func (a AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(a[12:]) }

// SetSwapAdd sets the swap or add data.
func (a AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(a[12:], v) }

// Compare returns the compare value (COMPARE SWAP only).
func (a AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(a[20:]) }

// SetCompare sets the compare data.
func (a AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(a[20:], v) }

// AtomicAckETH is a view of the 8-byte Atomic Acknowledge Extended Transport
// Header (IBA 9.3): the value the target held before the atomic operation.
type AtomicAckETH []byte

// OrigData returns the original remote data.
func (a AtomicAckETH) OrigData() uint64 { return binary.BigEndian.Uint64(a) }

// SetOrigData sets the original remote data.
func (a AtomicAckETH) SetOrigData(v uint64) { binary.BigEndian.PutUint64(a, v) }

// PETH is a view of softnic's 6-byte Placement Extended Transport Header
// (docs/wire.md), which every SEND packet of a connection with
// out-of-order placement carries (IRN §5.3.2 and §6.3, FaSR §IV-D: both
// 6 bytes): the receive WQE sequence number (3) and the packet's index in its message
// (3), both big-endian. The receive WQE sequence number counts the
// messages that consume a receive WQE (SENDs and RDMA WRITEs with
// immediate) from 0 at connection set-up, so that a packet that arrives
// before its predecessors finds its receive WQE; the index times the path
// MTU is the byte offset of the packet's payload in its message, since
// every packet but the last carries exactly one MTU.
type PETH []byte

// PETHFields holds every PETH field.
type PETHFields struct {
	RecvSN uint32 // 24 bits
	Index  uint32 // 24 bits
}

// Encode writes the whole header from f, RecvSN and Index masked to 24
// bits.
func (p PETH) Encode(f *PETHFields) {
	_ = p[PETHLen-1]
	p.SetRecvSN(f.RecvSN)
	p.SetIndex(f.Index)
}

// Fields returns every field of the header.
func (p PETH) Fields() PETHFields { return PETHFields{RecvSN: p.RecvSN(), Index: p.Index()} }

// RecvSN returns the 24-bit receive WQE sequence number.
func (p PETH) RecvSN() uint32 { return get24(p[0:]) }

// SetRecvSN sets the receive WQE sequence number, masked to 24 bits.
func (p PETH) SetRecvSN(sn uint32) { put24(p[0:], sn) }

// Index returns the 24-bit index of the packet in its message: its
// payload's byte offset is Index times the path MTU.
func (p PETH) Index() uint32 { return get24(p[3:]) }

// SetIndex sets the packet's index in its message, masked to 24 bits.
func (p PETH) SetIndex(i uint32) { put24(p[3:], i) }

// MaxPETHOffset is the largest payload offset a PETH may name: messages
// are at most 2^31 bytes (IBA's largest DMA length).
const MaxPETHOffset = 1 << 31

// Offset returns the byte offset that the packet's index names at path
// MTU mtu, and false if it is larger than MaxPETHOffset (the product,
// computed in 64 bits, cannot overflow).
func (p PETH) Offset(mtu uint32) (uint32, bool) {
	off := uint64(p.Index()) * uint64(mtu)
	if off > MaxPETHOffset {
		return 0, false
	}
	return uint32(off), true
}

// RWSNETH is a view of softnic's 3-byte Receive WQE SN Extended Transport
// Header (docs/wire.md): the 24-bit, big-endian receive WQE sequence
// number of the receive WQE that an RDMA WRITE with immediate consumes,
// carried by its last packet only, after the ImmDt (IRN §5.3.2: "in the
// last Write-with-Immediate packet").
type RWSNETH []byte

// RecvSN returns the 24-bit receive WQE sequence number.
func (r RWSNETH) RecvSN() uint32 { return get24(r) }

// SetRecvSN sets the receive WQE sequence number, masked to 24 bits.
func (r RWSNETH) SetRecvSN(sn uint32) { put24(r, sn) }

// SACKETH is a view of softnic's 4-byte Selective Acknowledgement Extended
// Transport Header (docs/wire.md): a byte of FaSR's lost-cnt (low 3 bits;
// the other bits reserved, 0 for IRN) and the 24-bit PSN of the
// out-of-order request the responder now holds, the packet that triggered
// an IRN NACK (IRN §3.1) or a FaSR SACK (or, in an RC_ACKNOWLEDGE_FNAK, the
// retransmission it dropped). The BTH PSN of the same packet is the
// responder's expected PSN, the cumulative acknowledgement.
type SACKETH []byte

// SACKETHFields holds every SACKETH field. Whether FaSR's lost-cnt
// overflowed is not among them: the opcode says it
// (RCAcknowledgeSACKOverflow; Reply.Overflow).
type SACKETHFields struct {
	PSN     uint32 // 24 bits
	LostCnt uint8  // 3 bits
}

// Encode writes the whole header from f: the reserved bits are zero, PSN
// is masked to 24 bits and LostCnt to 3.
func (s SACKETH) Encode(f *SACKETHFields) {
	_ = s[SACKETHLen-1]
	s.SetPSN(f.PSN)
	s.SetLostCnt(f.LostCnt)
}

// Fields returns every field of the header.
func (s SACKETH) Fields() SACKETHFields { return SACKETHFields{PSN: s.PSN(), LostCnt: s.LostCnt()} }

// LostCnt returns FaSR's lost-cnt (§III-B1).
func (s SACKETH) LostCnt() uint8 { return s[0] & 7 }

// SetLostCnt sets FaSR's lost-cnt, masked to 3 bits; call after SetPSN.
func (s SACKETH) SetLostCnt(n uint8) { s[0] = n & 7 }

// PSN returns the selectively acknowledged PSN.
func (s SACKETH) PSN() uint32 { return get24(s[1:]) }

// SetPSN sets the selectively acknowledged PSN, masked to 24 bits, and
// clears the reserved byte.
func (s SACKETH) SetPSN(psn uint32) {
	s[0] = 0
	put24(s[1:], psn)
}

// HolesETH is a view of softnic's 16-byte Holes Extended Transport Header,
// MELO's NACK (§3.2.4; docs/wire.md): reserved (1), RCV.HIGH (24-bit PSN),
// then three holes, most recent first, each a 16-bit offset from the BTH
// PSN (the expected PSN, RCV.NXT) and a 16-bit length; an unused entry
// has length 0.
type HolesETH []byte

// HolesETHEntries is how many holes a HolesETH carries.
const HolesETHEntries = 3

// Hole is a run of missing PSNs, Len of them from Start.
type Hole struct {
	Start uint32 // 24 bits
	Len   uint32
}

// HolesETHFields holds a HolesETH's fields as PSNs. The header itself
// counts each hole from the BTH PSN of its packet, which Encode and Fields
// therefore take.
type HolesETHFields struct {
	High  uint32 // RCV.HIGH, the highest PSN the responder holds
	Holes [HolesETHEntries]Hole
}

// Encode writes the whole header from f for a packet whose BTH PSN is
// cum: the reserved byte zero, High masked to 24 bits, and the holes in
// the order f has them (the wire's is most recent first), each as its
// offset from cum and its length. A hole that the 16-bit fields cannot
// carry (it starts before cum, or its offset or length passes 0xFFFF) is
// written unused, as is one of length 0.
func (h HolesETH) Encode(cum uint32, f *HolesETHFields) {
	_ = h[HolesETHLen-1]
	h.SetHigh(f.High)
	base := qp.PSN(cum & qp.PSNMask)
	for i, hole := range f.Holes {
		var off, length uint16
		start := qp.PSN(hole.Start & qp.PSNMask)
		if hole.Len > 0 && !start.Before(base) && hole.Len <= 0xFFFF && start.Diff(base) <= 0xFFFF {
			off, length = uint16(start.Diff(base)), uint16(hole.Len)
		}
		h.SetHole(i, off, length)
	}
}

// Fields returns the fields of the header of a packet whose BTH PSN is
// cum: RCV.HIGH and the holes in use as PSNs, oldest first, the unused
// entries (length 0) after them. ok is false if the header breaks the
// rules of docs/wire.md: a hole that does not end before RCV.HIGH, or two
// holes that overlap; High is read all the same, the holes only in part.
func (h HolesETH) Fields(cum uint32) (f HolesETHFields, ok bool) {
	_ = h[HolesETHLen-1]
	f.High = h.High()
	high, base := qp.PSN(f.High), qp.PSN(cum&qp.PSNMask)
	n := 0
	for i := range HolesETHEntries {
		off, length := h.Hole(i)
		if length == 0 {
			continue
		}
		start := base.Add(uint32(off))
		if !start.Add(uint32(length) - 1).Before(high) {
			return f, false
		}
		f.Holes[n] = Hole{Start: uint32(start), Len: uint32(length)}
		n++
	}
	// Oldest first, and no overlaps.
	hs := f.Holes[:n]
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && qp.PSN(hs[j].Start).Before(qp.PSN(hs[j-1].Start)); j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
	for i := 1; i < len(hs); i++ {
		if !qp.PSN(hs[i].Start).After(qp.PSN(hs[i-1].Start).Add(hs[i-1].Len - 1)) {
			return f, false
		}
	}
	return f, true
}

// High returns RCV.HIGH.
func (h HolesETH) High() uint32 { return get24(h[1:]) }

// SetHigh sets RCV.HIGH, masked to 24 bits, and clears the reserved byte.
func (h HolesETH) SetHigh(psn uint32) {
	h[0] = 0
	put24(h[1:], psn)
}

// Hole returns entry i as it is on the wire: its offset from the BTH PSN
// and its length.
func (h HolesETH) Hole(i int) (off, length uint16) {
	b := h[4+4*i:]
	return binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
}

// SetHole sets entry i as it is on the wire.
func (h HolesETH) SetHole(i int, off, length uint16) {
	b := h[4+4*i:]
	binary.BigEndian.PutUint16(b, off)
	binary.BigEndian.PutUint16(b[2:], length)
}
