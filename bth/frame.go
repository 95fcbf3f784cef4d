package bth

import (
	"encoding/binary"
	"net/netip"
)

const (
	ethHeaderLen     = 14
	vlanTagLen       = 4
	ipv4HeaderLen    = 20
	ipv4MaxHeaderLen = 60
	ipv6HeaderLen    = 40
	udpHeaderLen     = 8

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100

	ipProtoUDP      = 17
	ipv4DontFrag    = 0x4000
	ipv4FragMask    = 0x3fff // MF flag and fragment offset
	ipv6FlowMask    = 0xfffff
	defaultHopLimit = 64
)

// Frame is a parsed RoCEv2 frame: Ethernet II (with at most one 802.1Q tag),
// IPv4 or IPv6, UDP to port 4791, and the RoCE packet with its ICRC.
type Frame struct {
	Buf    []byte // Ethernet header .. ICRC; trailing Ethernet padding is cut off
	L3Off  int    // offset of the IP header
	L4Off  int    // offset of the UDP header
	BTHOff int    // offset of the BTH
	IPv6   bool
	Pkt    Packet // Buf[BTHOff:]
}

// ParseFrame validates buf as a RoCEv2 frame and returns a view of it. Each
// layer is checked before the next is read: the EtherType (one 802.1Q tag
// allowed), the IP header (IPv4: version 4, IHL >= 5, protocol UDP, not a
// fragment, total length within buf; IPv6: version 6, next header UDP, no
// IPv4-mapped address, payload length within buf), the UDP header (destination port 4791, length
// equal to the IP payload), and finally the RoCE packet with Parse. Bytes
// after the IP packet are Ethernet padding and are ignored. The IPv4 header
// checksum and UDP checksum are not checked: the ICRC covers every field
// they cover except the ones routers rewrite (see Frame.VerifyICRC).
//
// ParseFrame never panics and never allocates; errors are the package's
// sentinels.
func ParseFrame(buf []byte) (Frame, error) {
	if len(buf) < ethHeaderLen {
		return Frame{}, ErrTruncated
	}
	l3 := ethHeaderLen
	etherType := binary.BigEndian.Uint16(buf[12:])
	if etherType == etherTypeVLAN {
		if len(buf) < ethHeaderLen+vlanTagLen {
			return Frame{}, ErrTruncated
		}
		etherType = binary.BigEndian.Uint16(buf[16:])
		l3 += vlanTagLen
	}

	var l4, end int
	var ipv6 bool
	switch etherType {
	case etherTypeIPv4:
		if len(buf) < l3+ipv4HeaderLen {
			return Frame{}, ErrTruncated
		}
		ip := buf[l3:]
		ihl := int(ip[0]&0x0f) * 4
		if ip[0]>>4 != 4 || ihl < ipv4HeaderLen {
			return Frame{}, ErrBadIPHeader
		}
		if ip[9] != ipProtoUDP {
			return Frame{}, ErrNotRoCE
		}
		if binary.BigEndian.Uint16(ip[6:])&ipv4FragMask != 0 {
			return Frame{}, ErrFragmented
		}
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total < ihl+udpHeaderLen {
			return Frame{}, ErrBadLength
		}
		if l3+total > len(buf) {
			return Frame{}, ErrTruncated
		}
		l4, end = l3+ihl, l3+total
	case etherTypeIPv6:
		if len(buf) < l3+ipv6HeaderLen {
			return Frame{}, ErrTruncated
		}
		ip := buf[l3:]
		if ip[0]>>4 != 6 {
			return Frame{}, ErrBadIPHeader
		}
		if ip[6] != ipProtoUDP {
			return Frame{}, ErrNotRoCE
		}
		if isV4Mapped(ip[8:24]) || isV4Mapped(ip[24:40]) {
			return Frame{}, ErrBadIPHeader
		}
		payload := int(binary.BigEndian.Uint16(ip[4:]))
		if payload < udpHeaderLen {
			return Frame{}, ErrBadLength
		}
		l4 = l3 + ipv6HeaderLen
		end = l4 + payload
		if end > len(buf) {
			return Frame{}, ErrTruncated
		}
		ipv6 = true
	default:
		return Frame{}, ErrNotRoCE
	}

	udp := buf[l4:end]
	if binary.BigEndian.Uint16(udp[2:]) != UDPPort {
		return Frame{}, ErrNotRoCE
	}
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return Frame{}, ErrBadLength
	}
	bthOff := l4 + udpHeaderLen
	pkt, err := Parse(buf[bthOff:end])
	if err != nil {
		return Frame{}, err
	}
	return Frame{Buf: buf[:end], L3Off: l3, L4Off: l4, BTHOff: bthOff, IPv6: ipv6, Pkt: pkt}, nil
}

// isV4Mapped reports whether the 16-byte address is IPv4-mapped
// (::ffff:a.b.c.d). Such addresses stand for IPv4 nodes and are not used on
// the wire (RFC 4291 2.5.5.2); RoCEv2 sends to such a GID over IPv4 (Annex
// A17), so an IPv6 frame carrying one is malformed, and FrameHeader, which
// picks IPv4 for them, could not reproduce it.
func isV4Mapped(a []byte) bool {
	return binary.BigEndian.Uint64(a) == 0 && binary.BigEndian.Uint32(a[8:]) == 0xffff
}

// DstMAC returns the Ethernet destination address.
func (f *Frame) DstMAC() [6]byte { return [6]byte(f.Buf[0:6]) }

// SrcMAC returns the Ethernet source address.
func (f *Frame) SrcMAC() [6]byte { return [6]byte(f.Buf[6:12]) }

// SrcAddr returns the IP source address (a 4-byte address for IPv4).
func (f *Frame) SrcAddr() netip.Addr {
	if f.IPv6 {
		return netip.AddrFrom16([16]byte(f.Buf[f.L3Off+8:]))
	}
	return netip.AddrFrom4([4]byte(f.Buf[f.L3Off+12:]))
}

// DstAddr returns the IP destination address (a 4-byte address for IPv4).
func (f *Frame) DstAddr() netip.Addr {
	if f.IPv6 {
		return netip.AddrFrom16([16]byte(f.Buf[f.L3Off+24:]))
	}
	return netip.AddrFrom4([4]byte(f.Buf[f.L3Off+16:]))
}

// SrcPort returns the UDP source port, which RoCEv2 senders vary per QP for
// ECMP entropy (Annex A17).
func (f *Frame) SrcPort() uint16 { return binary.BigEndian.Uint16(f.Buf[f.L4Off:]) }

// TrafficClass returns the IPv4 TOS or IPv6 traffic class byte: DSCP in
// its upper six bits, ECN in its lower two (RFC 3168: 11 is CE).
func (f *Frame) TrafficClass() uint8 {
	ip := f.Buf[f.L3Off:]
	if f.IPv6 {
		return uint8(binary.BigEndian.Uint16(ip) >> 4)
	}
	return ip[1]
}

// Header returns the frame's addressing, so a reply can be built by swapping
// source and destination. A VLAN tag is not part of it.
func (f *Frame) Header() FrameHeader {
	h := FrameHeader{
		SrcMAC:  f.SrcMAC(),
		DstMAC:  f.DstMAC(),
		Src:     f.SrcAddr(),
		Dst:     f.DstAddr(),
		SrcPort: f.SrcPort(),
	}
	ip := f.Buf[f.L3Off:]
	if f.IPv6 {
		vtf := binary.BigEndian.Uint32(ip)
		h.TOS = uint8(vtf >> 20)
		h.FlowLabel = vtf & ipv6FlowMask
		h.TTL = ip[7]
	} else {
		h.TOS = ip[1]
		h.TTL = ip[8]
	}
	return h
}

// FrameHeader is what softnic puts in front of a RoCE packet: Ethernet II,
// IPv4 or IPv6, and UDP. The IP version follows Src: an IPv4 or
// IPv4-mapped IPv6 address (the RoCEv2 GID form of an IPv4 address, Annex
// A17) gives an IPv4 frame. Dst must be of the same family.
type FrameHeader struct {
	SrcMAC, DstMAC [6]byte
	Src, Dst       netip.Addr
	SrcPort        uint16
	TOS            uint8  // IPv4 TOS or IPv6 traffic class: DSCP and ECN
	TTL            uint8  // IPv4 TTL or IPv6 hop limit; 0 means 64
	FlowLabel      uint32 // IPv6 only; masked to 20 bits
}

func (h *FrameHeader) ipv6() bool { return !h.Src.Unmap().Is4() }

// Len returns the length of the encoded headers: 42 bytes for IPv4, 62 for
// IPv6. It is also the offset of the BTH.
func (h *FrameHeader) Len() int {
	if h.ipv6() {
		return ethHeaderLen + ipv6HeaderLen + udpHeaderLen
	}
	return ethHeaderLen + ipv4HeaderLen + udpHeaderLen
}

// Encode writes the Ethernet, IP and UDP headers for a RoCE packet of
// roceLen bytes (BTH through ICRC) into buf, which must hold at least Len()
// bytes, and returns the offset of the BTH. IPv4 headers get DF set, ID 0
// and their checksum; the UDP checksum is left 0, which IPv4 allows and
// RoCEv2 receivers ignore. IPv6 forbids a zero UDP checksum (RFC 8200
// 8.1), so once the packet is in place, FinishFrame must compute it.
func (h *FrameHeader) Encode(buf []byte, roceLen int) (bthOff int) {
	copy(buf[0:6], h.DstMAC[:])
	copy(buf[6:12], h.SrcMAC[:])
	ttl := h.TTL
	if ttl == 0 {
		ttl = defaultHopLimit
	}
	udpLen := udpHeaderLen + roceLen
	var l4 int
	if h.ipv6() {
		binary.BigEndian.PutUint16(buf[12:], etherTypeIPv6)
		ip := buf[ethHeaderLen : ethHeaderLen+ipv6HeaderLen]
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(h.TOS)<<20|h.FlowLabel&ipv6FlowMask)
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = ipProtoUDP
		ip[7] = ttl
		src, dst := h.Src.As16(), h.Dst.As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
		l4 = ethHeaderLen + ipv6HeaderLen
	} else {
		binary.BigEndian.PutUint16(buf[12:], etherTypeIPv4)
		ip := buf[ethHeaderLen : ethHeaderLen+ipv4HeaderLen]
		ip[0] = 4<<4 | ipv4HeaderLen/4
		ip[1] = h.TOS
		binary.BigEndian.PutUint16(ip[2:], uint16(ipv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(ip[4:], 0) // ID: unused, DF is set (RFC 6864)
		binary.BigEndian.PutUint16(ip[6:], ipv4DontFrag)
		ip[8] = ttl
		ip[9] = ipProtoUDP
		binary.BigEndian.PutUint16(ip[10:], 0)
		src, dst := h.Src.Unmap().As4(), h.Dst.Unmap().As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(onesSum(0, ip)))
		l4 = ethHeaderLen + ipv4HeaderLen
	}
	udp := buf[l4 : l4+udpHeaderLen]
	binary.BigEndian.PutUint16(udp[0:], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], UDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	binary.BigEndian.PutUint16(udp[6:], 0)
	return l4 + udpHeaderLen
}

// FinishFrame completes a frame whose headers were written by h.Encode and
// whose RoCE packet is in place: frame must be exactly h.Len() plus the
// roceLen given to Encode. It writes the ICRC and then, for IPv6, the UDP
// checksum. The order matters: the UDP checksum covers the ICRC, while the
// ICRC treats the UDP checksum as all ones and so does not depend on it.
func FinishFrame(frame []byte, h *FrameHeader) {
	ipv6 := h.ipv6()
	WriteICRC(frame, ethHeaderLen, ipv6)
	if ipv6 {
		writeUDPChecksumIPv6(frame[ethHeaderLen:])
	}
}

// PadFor returns the number of pad bytes that align a payload of
// payloadLen bytes to 4 bytes, the BTH PadCount (IBA 9.2).
func PadFor(payloadLen int) int { return (4 - payloadLen%4) % 4 }

// writeUDPChecksumIPv6 computes the UDP checksum (RFC 8200 8.1, RFC 768)
// of the IPv6 packet ip, whose UDP header directly follows the fixed header.
func writeUDPChecksumIPv6(ip []byte) {
	udp := ip[ipv6HeaderLen:]
	binary.BigEndian.PutUint16(udp[6:], 0)
	// Pseudo-header: addresses, upper-layer length, next header.
	sum := onesSum(uint64(len(udp))+ipProtoUDP, ip[8:40])
	sum = onesSum(sum, udp)
	csum := ^fold(sum)
	if csum == 0 {
		csum = 0xffff // 0 means "no checksum", which IPv6 forbids
	}
	binary.BigEndian.PutUint16(udp[6:], csum)
}

// onesSum adds b, as big-endian 16-bit words, to the one's complement sum
// sum (RFC 1071). It adds 32-bit words into the 64-bit accumulator, which
// gives the same sum modulo 2^16-1 because 2^16 = 1 there (so a word's
// position only matters modulo 16 bits); the end-around carries are left to
// fold. The accumulator cannot overflow for any b shorter than
// 2^32 bytes.
func onesSum(sum uint64, b []byte) uint64 {
	for len(b) >= 16 {
		w0 := binary.BigEndian.Uint64(b)
		w1 := binary.BigEndian.Uint64(b[8:])
		sum += w0>>32 + w0&0xffffffff + w1>>32 + w1&0xffffffff
		b = b[16:]
	}
	for len(b) >= 4 {
		sum += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return sum
}

// fold reduces a 64-bit one's complement sum to 16 bits.
func fold(sum uint64) uint16 {
	sum = sum>>32 + sum&0xffffffff
	sum = sum>>32 + sum&0xffffffff
	sum = sum>>16 + sum&0xffff
	sum = sum>>16 + sum&0xffff
	return uint16(sum)
}
