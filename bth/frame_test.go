package bth_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/bth"
)

func TestParseErrors(t *testing.T) {
	// roce builds BTH + headers + payload + pad + ICRC for op, then lets mod
	// corrupt it.
	roce := func(op bth.Opcode, payload, pad int, mod func([]byte)) []byte {
		info := bth.Lookup(op)
		b := make([]byte, info.Length+payload+pad+bth.ICRCLen)
		bth.BTH(b).Encode(&bth.BTHFields{Opcode: op, PadCount: uint8(pad)})
		if mod != nil {
			mod(b)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, bth.ErrTruncated},
		{"short BTH", make([]byte, bth.BTHLen-1), bth.ErrTruncated},
		{"reserved opcode", roce(bth.RCSendOnly, 0, 0, func(b []byte) { b[0] = 0x15 }), bth.ErrUnknownOpcode},
		{"UC opcode", roce(bth.RCSendOnly, 0, 0, func(b []byte) { b[0] = 0x24 }), bth.ErrUnknownOpcode},
		{"CNP-transport opcode not CNP", roce(bth.RCSendOnly, 0, 0, func(b []byte) { b[0] = 0x80 }), bth.ErrUnknownOpcode},
		{"CNP without its reserved bytes", roce(bth.RCSendOnly, 4, 0, func(b []byte) { b[0] = 0x81 }), bth.ErrTruncated},
		{"CNP with payload", roce(bth.CNP, 4, 0, nil), bth.ErrBadLength},
		{"TVer 1", roce(bth.RCSendOnly, 0, 0, func(b []byte) { bth.BTH(b).SetTVer(1) }), bth.ErrBadVersion},
		{"no ICRC", roce(bth.RCSendOnly, 0, 0, nil)[:bth.BTHLen+3], bth.ErrTruncated},
		{"ACK without AETH", roce(bth.RCAcknowledge, 0, 0, nil)[:bth.BTHLen+bth.ICRCLen], bth.ErrTruncated},
		{"ACK with payload", roce(bth.RCAcknowledge, 4, 0, nil), bth.ErrBadLength},
		{"ACK with pad", roce(bth.RCAcknowledge, 0, 0, func(b []byte) { bth.BTH(b).SetPadCount(1) }), bth.ErrBadPad},
		{"read request with payload", roce(bth.RCReadRequest, 1, 0, nil), bth.ErrBadLength},
		{"pad beyond empty payload", roce(bth.RCSendOnly, 0, 0, func(b []byte) { bth.BTH(b).SetPadCount(1) }), bth.ErrBadPad},
		{"pad beyond payload", roce(bth.RCWriteOnly, 2, 0, func(b []byte) { bth.BTH(b).SetPadCount(3) }), bth.ErrBadPad},
		{"ok: empty send", roce(bth.RCSendOnly, 0, 0, nil), nil},
		{"ok: 1 byte + 3 pad", roce(bth.RCSendOnly, 1, 3, nil), nil},
		{"ok: UD imm", roce(bth.UDSendOnlyImm, 8, 0, nil), nil},
		{"ok: atomic ack", roce(bth.RCAtomicAcknowledge, 0, 0, nil), nil},
		{"ok: CNP", roce(bth.CNP, 0, 0, nil), nil},
	} {
		p, err := bth.Parse(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
			continue
		}
		if err == nil && (p.Info == nil || len(p.Buf) != len(tc.b)) {
			t.Errorf("%s: bad packet %+v", tc.name, p)
		}
		if err != nil && (p.Info != nil || p.Buf != nil) {
			t.Errorf("%s: error with non-zero packet", tc.name)
		}
	}
}

func TestParsePayloadExcludesPad(t *testing.T) {
	frame := goldenFrame(t, "rc_write_only_v6") // 3-byte payload, pad 1
	f, err := bth.ParseFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Pkt.BTH().PadCount(); got != 1 {
		t.Fatalf("PadCount = %d", got)
	}
	if got := len(f.Pkt.Payload()); got != 3 {
		t.Fatalf("len(Payload) = %d, want 3", got)
	}
	// Views are capped at their header: appending cannot clobber the next.
	if r := f.Pkt.RETH(); cap(r) != bth.RETHLen {
		t.Fatalf("cap(RETH) = %d", cap(r))
	}
}

func TestParseFrameErrors(t *testing.T) {
	v4 := goldenFrame(t, "rc_ack_v4")
	v6 := goldenFrame(t, "rc_ack_v6")
	vlan := goldenFrame(t, "rc_send_last_v4_vlan")
	mod := func(frame []byte, f func([]byte)) []byte {
		b := bytes.Clone(frame)
		f(b)
		return b
	}
	put16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.BigEndian.PutUint16(b[off:], v) }
	}
	const ip, ip6 = 14, 14
	const udp4, udp6 = 34, 54
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, bth.ErrTruncated},
		{"short Ethernet", v4[:13], bth.ErrTruncated},
		{"VLAN tag cut", vlan[:17], bth.ErrTruncated},
		{"ARP", mod(v4, put16(12, 0x0806)), bth.ErrNotRoCE},
		{"QinQ", mod(vlan, put16(12, 0x88a8)), bth.ErrNotRoCE},
		{"VLAN carrying ARP", mod(vlan, put16(16, 0x0806)), bth.ErrNotRoCE},
		{"IPv4 header cut", v4[:ip+19], bth.ErrTruncated},
		{"IPv4 version 5", mod(v4, func(b []byte) { b[ip] = 0x55 }), bth.ErrBadIPHeader},
		{"IPv4 IHL 4", mod(v4, func(b []byte) { b[ip] = 0x44 }), bth.ErrBadIPHeader},
		{"IPv4 TCP", mod(v4, func(b []byte) { b[ip+9] = 6 }), bth.ErrNotRoCE},
		{"IPv4 MF", mod(v4, put16(ip+6, 0x2000)), bth.ErrFragmented},
		{"IPv4 offset", mod(v4, put16(ip+6, 0x4001)), bth.ErrFragmented},
		{"IPv4 total < IHL+UDP", mod(v4, put16(ip+2, 27)), bth.ErrBadLength},
		{"IPv4 total > buffer", v4[:len(v4)-1], bth.ErrTruncated},
		{"IPv4 IHL beyond total", mod(v4, func(b []byte) { b[ip] = 0x4f }), bth.ErrBadLength},
		{"UDP port", mod(v4, put16(udp4+2, 4792)), bth.ErrNotRoCE},
		{"UDP length short", mod(v4, put16(udp4+4, uint16(len(v4)-udp4-1))), bth.ErrBadLength},
		{"UDP length long", mod(v4, put16(udp4+4, uint16(len(v4)-udp4+1))), bth.ErrBadLength},
		{"IPv4 total short of RoCE", mod(v4, func(b []byte) {
			binary.BigEndian.PutUint16(b[ip+2:], 20+8+8)
			binary.BigEndian.PutUint16(b[udp4+4:], 8+8)
		}), bth.ErrTruncated},
		{"IPv6 header cut", v6[:ip6+39], bth.ErrTruncated},
		{"IPv6 version 4", mod(v6, func(b []byte) { b[ip6] = 0x46 }), bth.ErrBadIPHeader},
		{"IPv6 next header TCP", mod(v6, func(b []byte) { b[ip6+6] = 6 }), bth.ErrNotRoCE},
		{"IPv6 payload < UDP", mod(v6, put16(ip6+4, 7)), bth.ErrBadLength},
		{"IPv6 payload > buffer", v6[:len(v6)-1], bth.ErrTruncated},
		{"IPv6 v4-mapped source", mod(v6, func(b []byte) {
			copy(b[ip6+8:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1})
		}), bth.ErrBadIPHeader},
		{"IPv6 v4-mapped destination", mod(v6, func(b []byte) {
			copy(b[ip6+24:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1})
		}), bth.ErrBadIPHeader},
		{"IPv6 UDP port", mod(v6, put16(udp6+2, 4790)), bth.ErrNotRoCE},
		{"IPv6 UDP length", mod(v6, put16(udp6+4, 9)), bth.ErrBadLength},
		{"unknown opcode", mod(v4, func(b []byte) { b[udp4+8] = 0x15 }), bth.ErrUnknownOpcode},
		{"bad TVer", mod(v6, func(b []byte) { b[udp6+9] |= 1 }), bth.ErrBadVersion},
	} {
		f, err := bth.ParseFrame(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && f.Buf != nil {
			t.Errorf("%s: error with non-zero frame", tc.name)
		}
	}
}

func TestParseFrameEthernetPadding(t *testing.T) {
	frame := goldenFrame(t, "rc_ack_v4") // 62 bytes; pad to a 64-byte minimum + junk
	padded := append(bytes.Clone(frame), 0, 0, 0xde, 0xad, 0xbe, 0xef)
	f, err := bth.ParseFrame(padded)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Buf) != len(frame) || len(f.Pkt.Buf) != len(frame)-f.BTHOff {
		t.Fatalf("Buf %d bytes, Pkt.Buf %d, want %d", len(f.Buf), len(f.Pkt.Buf), len(frame))
	}
	if !f.VerifyICRC() {
		t.Fatal("VerifyICRC false with trailing Ethernet padding")
	}
}

func TestFrameHeaderEncode(t *testing.T) {
	h := bth.FrameHeader{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		// The RoCEv2 GID form of an IPv4 address selects IPv4.
		Src:     netip.MustParseAddr("::ffff:198.51.100.7"),
		Dst:     netip.MustParseAddr("198.51.100.8"),
		SrcPort: 0xc000, TOS: 0x68 | 0x02, TTL: 0, FlowLabel: 0xfffff,
	}
	if h.Len() != 42 {
		t.Fatalf("Len() = %d, want 42", h.Len())
	}
	pf := packetFields{BTH: bth.BTHFields{Opcode: bth.RCSendOnly, DestQPN: 9, PSN: 1, PKey: 0xffff}}
	frame := buildFrame(&h, &pf, []byte("hello"))
	f, err := bth.ParseFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	ip := frame[f.L3Off:]
	if f.IPv6 || ip[0] != 0x45 || binary.BigEndian.Uint16(ip[4:]) != 0 || binary.BigEndian.Uint16(ip[6:]) != 0x4000 {
		t.Errorf("IPv4 header % x: want version 4, IHL 5, ID 0, DF", ip[:20])
	}
	if sum := onesComplementSum(ip[:20]); sum != 0xffff {
		t.Errorf("IPv4 header checksum does not verify (sum %#04x)", sum)
	}
	if got := binary.BigEndian.Uint16(frame[f.L4Off+6:]); got != 0 {
		t.Errorf("IPv4 UDP checksum = %#04x, want 0", got)
	}
	got := f.Header()
	want := h
	want.Src = h.Src.Unmap()
	want.TTL = 64      // 0 means the default
	want.FlowLabel = 0 // IPv6 only
	if got != want {
		t.Errorf("Header() = %+v, want %+v", got, want)
	}
	if !f.VerifyICRC() || string(f.Pkt.Payload()) != "hello" || f.Pkt.BTH().PadCount() != 3 {
		t.Errorf("packet: ICRC %v payload %q pad %d", f.VerifyICRC(), f.Pkt.Payload(), f.Pkt.BTH().PadCount())
	}

	h.Src = netip.MustParseAddr("fe80::1")
	h.Dst = netip.MustParseAddr("fe80::2")
	h.TTL = 7
	if h.Len() != 62 {
		t.Fatalf("IPv6 Len() = %d, want 62", h.Len())
	}
	for _, payload := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte{0xff}, 1023)} {
		frame = buildFrame(&h, &pf, payload)
		f, err = bth.ParseFrame(frame)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Header(); got != h {
			t.Errorf("IPv6 Header() = %+v, want %+v", got, h)
		}
		if !f.VerifyICRC() {
			t.Error("IPv6 VerifyICRC false")
		}
		if sum := udpIPv6Sum(frame[f.L3Off:]); sum != 0xffff {
			t.Errorf("IPv6 UDP checksum does not verify (sum %#04x)", sum)
		}
	}
}

// onesComplementSum is RFC 1071 the slow way, as a reference.
func onesComplementSum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// udpIPv6Sum returns the one's complement sum of the IPv6 pseudo-header and
// UDP datagram, checksum included: 0xffff when the checksum is right.
func udpIPv6Sum(ip []byte) uint16 {
	udp := ip[40:]
	pseudo := append(bytes.Clone(ip[8:40]), 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, 17)
	return onesComplementSum(append(pseudo, udp...))
}
