package netsw

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// Marker is RED marking on an instantaneous queue length, DCQCN's
// congestion point (Zhu et al., SIGCOMM 2015, §3.1): probability 0 at or
// below Kmin bytes, rising linearly to Pmax at Kmax, 1 above Kmax. A
// Switch holds one for all its queues; it is exported so that a test or
// a tool can draw from the same curve.
type Marker struct {
	cfg  ECN
	pmax uint64 // Pmax as a fraction of 2^32
	src  rand.Source
}

// NewMarker returns a Marker for c drawing from src.
func NewMarker(c ECN, src rand.Source) Marker {
	return Marker{cfg: c, pmax: uint64(math.Round(c.Pmax * (1 << 32))), src: src}
}

// Probability is the marking probability of a frame that finds q bytes,
// as a fraction of 2^32 (1<<32 is certain).
func (m *Marker) Probability(q int) uint64 {
	switch {
	case !m.cfg.Enabled || q <= m.cfg.KminBytes:
		return 0
	case q > m.cfg.KmaxBytes:
		return 1 << 32
	}
	return m.pmax * uint64(q-m.cfg.KminBytes) / uint64(m.cfg.KmaxBytes-m.cfg.KminBytes)
}

// Decide reports whether a frame that finds q bytes is marked. It draws
// from the source only when the probability is strictly between 0 and 1.
func (m *Marker) Decide(q int) bool {
	p := m.Probability(q)
	switch p {
	case 0:
		return false
	case 1 << 32:
		return true
	}
	return m.src.Uint64()>>32 < p
}

// The IP ECN field (RFC 3168 §5): the low two bits of the IPv4 TOS or the
// IPv6 traffic class.
const (
	ECNNotECT = 0b00
	ECNECT1   = 0b01
	ECNECT0   = 0b10
	ECNCE     = 0b11
)

const (
	ethHeaderLen  = 14
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
)

// ipOffset returns the offset of the IP header of an Ethernet frame (one
// 802.1Q tag allowed) and whether it is IPv6; ok is false if the frame is
// not IPv4 or IPv6 or too short for the fixed IP header.
func ipOffset(frame []byte) (off int, v6, ok bool) {
	if len(frame) < ethHeaderLen {
		return 0, false, false
	}
	off = ethHeaderLen
	et := binary.BigEndian.Uint16(frame[12:])
	if et == etherTypeVLAN {
		if len(frame) < ethHeaderLen+4 {
			return 0, false, false
		}
		et = binary.BigEndian.Uint16(frame[16:])
		off += 4
	}
	switch et {
	case etherTypeIPv4:
		return off, false, len(frame) >= off+20 && frame[off]>>4 == 4
	case etherTypeIPv6:
		return off, true, len(frame) >= off+40 && frame[off]>>4 == 6
	}
	return 0, false, false
}

// ECNField returns the frame's IP ECN field, and false if it is not IP.
func ECNField(frame []byte) (uint8, bool) {
	off, v6, ok := ipOffset(frame)
	if !ok {
		return 0, false
	}
	if v6 {
		// Traffic class: the low nibble of byte 0 and the high one of byte 1.
		return frame[off+1] >> 4 & 0b11, true
	}
	return frame[off+1] & 0b11, true
}

// ECNCapable reports whether the frame is IP with ECT(0) or ECT(1).
func ECNCapable(frame []byte) bool {
	e, ok := ECNField(frame)
	return ok && (e == ECNECT0 || e == ECNECT1)
}

// MarkCE sets the frame's IP ECN field to CE (11) if it is ECT(0) or
// ECT(1), fixing the IPv4 header checksum incrementally (RFC 1624 eqn. 3),
// and reports whether it did. A frame already CE, not ECN-capable, or not
// IP is left alone (RFC 3168 §5: a router marks only ECN-capable
// packets). IPv6 has no header checksum, and its UDP checksum does not
// cover the traffic class; RoCEv2's ICRC masks both (bth.ICRC).
func MarkCE(frame []byte) bool {
	off, v6, ok := ipOffset(frame)
	if !ok {
		return false
	}
	e := frame[off+1] & 0b11
	if v6 {
		e = frame[off+1] >> 4 & 0b11
	}
	if e != ECNECT0 && e != ECNECT1 {
		return false
	}
	setCE(frame, off, v6)
	return true
}

// SetCE sets an IP frame's ECN field to CE whatever it was, as MarkCE does
// for an ECN-capable one (an experimenter's injected mark, package
// inject), and reports false, leaving the frame alone, if it is not IP.
func SetCE(frame []byte) bool {
	off, v6, ok := ipOffset(frame)
	if ok {
		setCE(frame, off, v6)
	}
	return ok
}

// setCE sets the ECN field of the IP header at off to CE, fixing the
// IPv4 header checksum.
func setCE(frame []byte, off int, v6 bool) {
	if v6 {
		// Traffic class: the low nibble of byte 0, the high one of
		// byte 1; ECN is its low two bits.
		frame[off+1] |= ECNCE << 4
		return
	}
	old := binary.BigEndian.Uint16(frame[off:])
	frame[off+1] |= ECNCE
	hc := binary.BigEndian.Uint16(frame[off+10:])
	binary.BigEndian.PutUint16(frame[off+10:], ChecksumUpdate(hc, old, binary.BigEndian.Uint16(frame[off:])))
}

// ChecksumUpdate is the Internet checksum sum after one 16-bit word of
// the data it covers changed from old to new: RFC 1624 eqn. 3,
// HC' = ~(~HC + ~m + m'), which unlike eqn. 2 never yields 0x0000 for a
// header whose sum is not all zeros.
func ChecksumUpdate(sum, old, new uint16) uint16 {
	x := uint32(^sum) + uint32(^old) + uint32(new)
	x = x&0xffff + x>>16
	x = x&0xffff + x>>16
	return ^uint16(x)
}
