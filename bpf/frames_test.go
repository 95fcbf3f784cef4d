//go:build linux

package bpf

import (
	"encoding/binary"
	"net/netip"
)

// Test frames are built by hand, field by field, so that each test says
// exactly which header bit it is about.

const (
	ethIPv4  = 0x0800
	ethIPv6  = 0x86dd
	ethARP   = 0x0806
	eth8021Q = 0x8100
	eth8021A = 0x88a8

	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoHopByHop = 0
	protoFragment = 44

	// XDP verdicts (uapi enum xdp_action).
	xdpPass     = 2
	xdpRedirect = 4
)

var (
	srcIPv4 = netip.MustParseAddr("198.18.0.1")
	dstIPv4 = netip.MustParseAddr("198.18.1.1")
	srcIPv6 = netip.MustParseAddr("2001:db8:a::1")
	dstIPv6 = netip.MustParseAddr("2001:db8:b::1")
)

// frame describes a test frame; the zero value plus v4 or v6 is a RoCEv2
// frame (UDP to 4791 with a 12-byte BTH-sized payload).
type frame struct {
	tags    []uint16 // VLAN TPIDs, outermost first
	ethType uint16   // 0: IPv4 or IPv6 by dst
	dst     netip.Addr
	proto   uint8  // IP protocol / IPv6 next header; 0 means UDP
	noProto bool   // proto really is 0 (IPv6 hop-by-hop)
	dport   uint16 // 0 means 4791
	sport   uint16
	ihl     uint8  // IPv4 header length in words; 0 means 5
	version uint8  // IP version nibble; 0 means the right one
	frag    uint16 // IPv4 flags+fragment offset field (host order)
	ipLen   int    // IPv4 total length / IPv6 payload length; -1 means right
	payload int
}

func v4() frame { return frame{dst: dstIPv4, ipLen: -1, payload: 12} }
func v6() frame { return frame{dst: dstIPv6, ipLen: -1, payload: 12} }

// build returns the frame and the offset just past its UDP header (0 when
// it has none).
func (f frame) build() ([]byte, int) {
	b := []byte{
		0x02, 0, 0, 0, 0, 0xb, // destination MAC
		0x02, 0, 0, 0, 0, 0xa, // source MAC
	}
	for _, tpid := range f.tags {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, 42) // VLAN ID
	}
	typ := f.ethType
	if typ == 0 {
		typ = ethIPv4
		if f.dst.Is6() {
			typ = ethIPv6
		}
	}
	b = binary.BigEndian.AppendUint16(b, typ)
	if typ == ethARP {
		// Request for 198.18.1.1 from 198.18.0.1 (RFC 826).
		b = append(b, 0, 1, 8, 0, 6, 4, 0, 1)
		b = append(b, 0x02, 0, 0, 0, 0, 0xa, 198, 18, 0, 1)
		b = append(b, 0, 0, 0, 0, 0, 0, 198, 18, 1, 1)
		return b, 0
	}

	proto := f.proto
	if proto == 0 && !f.noProto {
		proto = protoUDP
	}
	l4 := f.l4(proto)
	if f.dst.Is4() {
		ihl := f.ihl
		if ihl == 0 {
			ihl = 5
		}
		version := f.version
		if version == 0 {
			version = 4
		}
		total := int(ihl)*4 + len(l4)
		if f.ipLen >= 0 {
			total = f.ipLen
		}
		ip := make([]byte, max(int(ihl)*4, 20))
		ip[0] = version<<4 | ihl
		binary.BigEndian.PutUint16(ip[2:], uint16(total))
		binary.BigEndian.PutUint16(ip[6:], f.frag)
		ip[8] = 64
		ip[9] = proto
		copy(ip[12:], srcIPv4.AsSlice())
		copy(ip[16:], f.dst.AsSlice())
		for i := 20; i < len(ip); i++ {
			ip[i] = 1 // IP option NOP (RFC 791)
		}
		binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
		b = append(b, ip...)
	} else {
		version := f.version
		if version == 0 {
			version = 6
		}
		payload := len(l4)
		if f.ipLen >= 0 {
			payload = f.ipLen
		}
		ip := make([]byte, 40)
		ip[0] = version << 4
		binary.BigEndian.PutUint16(ip[4:], uint16(payload))
		ip[6] = proto
		ip[7] = 64
		copy(ip[8:], srcIPv6.AsSlice())
		copy(ip[24:], f.dst.AsSlice())
		b = append(b, ip...)
	}
	end := 0
	if proto == protoUDP {
		end = len(b) + 8
	}
	return append(b, l4...), end
}

// l4 is the transport header and payload.
func (f frame) l4(proto uint8) []byte {
	dport := f.dport
	if dport == 0 {
		dport = RoCEv2Port
	}
	sport := f.sport
	if sport == 0 {
		sport = 49152
	}
	payload := make([]byte, f.payload)
	for i := range payload {
		payload[i] = byte(i)
	}
	switch proto {
	case protoUDP:
		h := binary.BigEndian.AppendUint16(nil, sport)
		h = binary.BigEndian.AppendUint16(h, dport)
		h = binary.BigEndian.AppendUint16(h, uint16(8+len(payload)))
		h = append(h, 0, 0) // checksum 0 (RoCEv2 over IPv4)
		return append(h, payload...)
	case protoTCP:
		h := binary.BigEndian.AppendUint16(nil, sport)
		h = binary.BigEndian.AppendUint16(h, dport)
		h = append(h, make([]byte, 16)...)
		h[12] = 5 << 4
		return append(h, payload...)
	case protoICMP:
		return append([]byte{8, 0, 0, 0, 0, 1, 0, 1}, payload...)
	case protoFragment:
		// Next header UDP, offset 0, M=1 (RFC 8200 §4.5), then the
		// first fragment's UDP header.
		h := []byte{protoUDP, 0, 0, 1, 0, 0, 0, 7}
		return append(h, f.l4(protoUDP)...)
	case protoHopByHop:
		// Next header UDP, length 0, PadN (RFC 8200 §4.3).
		h := []byte{protoUDP, 0, 1, 4, 0, 0, 0, 0}
		return append(h, f.l4(protoUDP)...)
	}
	return payload
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// classify is a reference model of xdp_steer.c in Go: the counter a frame
// must land in, given the filter and whether its queue has a socket. The
// differential tests run both on the same bytes.
func classify(f []byte, opts Options, socket bool) string {
	be16 := func(b []byte) int { return int(binary.BigEndian.Uint16(b)) }
	if len(f) < 14 {
		return "pass_truncated"
	}
	typ, off := be16(f[12:]), 14
	if typ == eth8021Q || typ == eth8021A {
		if len(f) < 18 {
			return "pass_truncated"
		}
		typ, off = be16(f[16:]), 18
	}
	var hlen int
	var dst netip.Addr
	switch typ {
	case ethIPv4:
		if len(f) < off+20 {
			return "pass_truncated"
		}
		ip := f[off:]
		if ip[0]>>4 != 4 || ip[0]&0xf < 5 {
			return "pass_malformed"
		}
		if ip[9] != protoUDP {
			return "pass_not_udp"
		}
		if be16(ip[6:])&0x3fff != 0 {
			return "pass_fragment"
		}
		hlen = int(ip[0]&0xf) * 4
		if len(f) < off+hlen+8 {
			return "pass_truncated"
		}
		if be16(ip[2:]) < hlen+8 {
			return "pass_malformed"
		}
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
	case ethIPv6:
		if len(f) < off+40 {
			return "pass_truncated"
		}
		ip := f[off:]
		switch {
		case ip[0]>>4 != 6:
			return "pass_malformed"
		case ip[6] == protoFragment:
			return "pass_fragment"
		case ip[6] != protoUDP:
			return "pass_not_udp"
		}
		hlen = 40
		if len(f) < off+hlen+8 {
			return "pass_truncated"
		}
		if be16(ip[4:]) < 8 {
			return "pass_malformed"
		}
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
	default:
		return "pass_not_ip"
	}
	if be16(f[off+hlen+2:]) != RoCEv2Port {
		return "pass_other_port"
	}
	if opts.LocalIPv4.IsValid() || opts.LocalIPv6.IsValid() {
		want := opts.LocalIPv4
		if dst.Is6() {
			want = opts.LocalIPv6
		}
		if !want.IsValid() || dst != want {
			return "pass_other_dst"
		}
	}
	if !socket {
		return "pass_no_socket"
	}
	return "steered"
}
