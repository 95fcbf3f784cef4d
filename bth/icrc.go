package bth

import (
	"encoding/binary"
	"hash/crc32"
)

// lrhSeed is the CRC-32 of the eight bytes of ones that stand in for the
// InfiniBand LRH, which RoCEv2 does not carry (Annex A17.4). rxe_icrc.c
// starts from the same state, written there before the final inversion as
// 0xdebb20e3.
var lrhSeed = crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// ICRC computes the Invariant CRC of a RoCEv2 frame (IBA 7.8.1, Annex A17.4,
// rxe_icrc.c). frame runs from the Ethernet header to the end of the ICRC
// (no trailing Ethernet padding), l3Off is the offset of the IP header and
// ipv6 says which IP version it is; the frame must be well formed, as
// produced by FrameHeader.Encode or accepted by ParseFrame.
//
// The CRC is the IEEE 802.3 CRC-32 over: the masked LRH (eight 0xff bytes);
// the IP header with the fields routers rewrite set to ones (IPv4 TOS, TTL
// and header checksum; IPv6 traffic class, flow label and hop limit); the
// UDP header with its checksum set to ones; the BTH with its reserved byte 4
// (resv8a, which RoCEv2 reuses for FECN/BECN) set to ones; and everything
// after the BTH up to the ICRC. The variant headers are masked in a stack
// copy, the rest is read in place by the hardware-accelerated crc32.Update.
func ICRC(frame []byte, l3Off int, ipv6 bool) uint32 {
	var masked [ipv4MaxHeaderLen + udpHeaderLen + BTHLen]byte
	var ipLen int
	if ipv6 {
		ipLen = ipv6HeaderLen
		copy(masked[:], frame[l3Off:l3Off+ipLen+udpHeaderLen+BTHLen])
		masked[0] |= 0x0f // traffic class, high nibble
		masked[1] = 0xff  // traffic class low nibble, flow label
		masked[2] = 0xff
		masked[3] = 0xff
		masked[7] = 0xff // hop limit
	} else {
		ipLen = int(frame[l3Off]&0x0f) * 4
		copy(masked[:], frame[l3Off:l3Off+ipLen+udpHeaderLen+BTHLen])
		masked[1] = 0xff // TOS (DSCP and ECN)
		masked[8] = 0xff // TTL
		masked[10] = 0xff
		masked[11] = 0xff // header checksum
	}
	n := ipLen + udpHeaderLen + BTHLen
	masked[ipLen+6] = 0xff // UDP checksum
	masked[ipLen+7] = 0xff
	masked[ipLen+udpHeaderLen+bthECN] = 0xff
	crc := updateHeaders(lrhSeed, masked[:n])
	return crc32.Update(crc, crc32.IEEETable, frame[l3Off+n:len(frame)-ICRCLen])
}

// WriteICRC computes the ICRC of frame (see ICRC) and stores it in the last
// four bytes, least significant byte first, as Linux rxe and scapy's RoCE
// layer write it (the golden test vectors pin this).
func WriteICRC(frame []byte, l3Off int, ipv6 bool) {
	binary.LittleEndian.PutUint32(frame[len(frame)-ICRCLen:], ICRC(frame, l3Off, ipv6))
}

// VerifyICRC reports whether the frame's ICRC is correct. Receivers drop
// packets whose ICRC is wrong (rxe_icrc_check).
func (f *Frame) VerifyICRC() bool {
	want := binary.LittleEndian.Uint32(f.Buf[len(f.Buf)-ICRCLen:])
	return ICRC(f.Buf, f.L3Off, f.IPv6) == want
}

// updateHeaders is crc32.Update for the masked header copy. crc32.Update
// hands its slice to a function variable, so escape analysis would move the
// stack copy to the heap on every packet; this slicing-by-8 loop (Go's own
// algorithm, over tables derived from crc32.IEEETable) keeps it on the stack
// and is about as fast for 40-80 bytes.
func updateHeaders(crc uint32, p []byte) uint32 {
	t := &ieeeSlicing8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// ieeeSlicing8[k][b] is the CRC state change of byte b followed by k zero
// bytes.
var ieeeSlicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()
