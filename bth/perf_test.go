package bth_test

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/bth"
)

var (
	sinkU32  uint32
	sinkU64  uint64
	sinkBool bool
	sinkAddr netip.Addr
	sinkHdr  bth.FrameHeader
)

func TestParseVerifyDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"rc_write_only_imm_v4", "ud_send_only_imm_v6", "rc_atomic_ack_v6", "rc_send_last_v4_vlan"} {
		frame := goldenFrame(t, name)
		allocs := testing.AllocsPerRun(100, func() {
			f, err := bth.ParseFrame(frame)
			if err != nil {
				panic(err)
			}
			sinkBool = f.VerifyICRC()
			p := &f.Pkt
			b := p.BTH()
			sinkU32 = uint32(p.Opcode()) + b.PSN() + b.DestQPN() + uint32(b.PKey()) + uint32(b.PadCount())
			sinkBool = b.AckReq() || b.SolicitedEvent() || b.FECN() || b.BECN() || b.MigReq()
			if r := p.RETH(); r != nil {
				sinkU64 = r.VA() + uint64(r.RKey()) + uint64(r.DMALen())
			}
			if a := p.AETH(); a != nil {
				sinkU32 = uint32(a.Syndrome().Kind()) + a.MSN()
			}
			if i := p.Imm(); i != nil {
				sinkU32 = i.Imm()
			}
			if d := p.DETH(); d != nil {
				sinkU32 = d.QKey() + d.SrcQPN()
			}
			if a := p.AtomicAck(); a != nil {
				sinkU64 = a.OrigData()
			}
			sinkU32 += uint32(len(p.Payload())) + uint32(f.SrcPort())
			sinkAddr = f.SrcAddr()
			sinkAddr = f.DstAddr()
			sinkHdr = f.Header()
			_, _ = bth.Parse(p.Buf[:5]) // error path
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per parse+verify, want 0", name, allocs)
		}
	}
}

func TestEncodeDoesNotAllocate(t *testing.T) {
	for _, h := range []bth.FrameHeader{benchHeader(false), benchHeader(true)} {
		info := bth.Lookup(bth.RCWriteOnlyImm)
		payload := make([]byte, 1024)
		roceLen := info.PacketLen(len(payload))
		frame := make([]byte, h.Len()+roceLen)
		allocs := testing.AllocsPerRun(100, func() {
			encodeWriteOnlyImm(frame, &h, info, roceLen, payload)
		})
		if allocs != 0 {
			t.Errorf("IPv6 %v: %v allocations per encode, want 0", h.Dst.Is6(), allocs)
		}
		if f, err := bth.ParseFrame(frame); err != nil || !f.VerifyICRC() {
			t.Errorf("encoded frame: %v", err)
		}
	}
}

func benchHeader(ipv6 bool) bth.FrameHeader {
	h := bth.FrameHeader{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"),
		SrcPort: 0xc001, TOS: 0x6a,
	}
	if ipv6 {
		h.Src = netip.MustParseAddr("2001:db8::1")
		h.Dst = netip.MustParseAddr("2001:db8::2")
	}
	return h
}

// encodeWriteOnlyImm is the transmit path of one RDMA WRITE ONLY WITH
// IMMEDIATE packet: headers through views, payload copy, ICRC (and UDP
// checksum).
func encodeWriteOnlyImm(frame []byte, h *bth.FrameHeader, info *bth.OpInfo, roceLen int, payload []byte) {
	off := h.Encode(frame, roceLen)
	pkt := frame[off:]
	bth.BTH(pkt).Encode(&bth.BTHFields{
		Opcode: bth.RCWriteOnlyImm, PadCount: uint8(bth.PadFor(len(payload))),
		PKey: 0xffff, DestQPN: 0x11, AckReq: true, PSN: 0x123456,
	})
	bth.RETH(pkt[info.RETHOff:]).Encode(&bth.RETHFields{VA: 0x7f0000001000, RKey: 0x42, DMALen: uint32(len(payload))})
	bth.ImmDt(pkt[info.ImmOff:]).SetImm(0xdeadbeef)
	copy(pkt[info.Length:], payload)
	bth.FinishFrame(frame, h)
}

func benchFrame(ipv6 bool) []byte {
	h := benchHeader(ipv6)
	info := bth.Lookup(bth.RCWriteOnlyImm)
	payload := make([]byte, 1024)
	roceLen := info.PacketLen(len(payload))
	frame := make([]byte, h.Len()+roceLen)
	encodeWriteOnlyImm(frame, &h, info, roceLen, payload)
	return frame
}

func BenchmarkParseVerify(b *testing.B) {
	for _, tc := range []struct {
		name string
		ipv6 bool
	}{{"IPv4", false}, {"IPv6", true}} {
		b.Run(tc.name, func(b *testing.B) {
			frame := benchFrame(tc.ipv6)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				f, err := bth.ParseFrame(frame)
				if err != nil || !f.VerifyICRC() {
					b.Fatal("bad frame")
				}
				sinkU32 = f.Pkt.BTH().PSN() + f.Pkt.RETH().RKey()
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, tc := range []struct {
		name string
		ipv6 bool
	}{{"IPv4", false}, {"IPv6", true}} {
		b.Run(tc.name, func(b *testing.B) {
			h := benchHeader(tc.ipv6)
			info := bth.Lookup(bth.RCWriteOnlyImm)
			payload := make([]byte, 1024)
			roceLen := info.PacketLen(len(payload))
			frame := make([]byte, h.Len()+roceLen)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				encodeWriteOnlyImm(frame, &h, info, roceLen, payload)
			}
		})
	}
}

// BenchmarkICRC isolates the CRC, the dominant cost of both paths.
func BenchmarkICRC(b *testing.B) {
	frame := benchFrame(false)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		sinkU32 = bth.ICRC(frame, 14, false)
	}
}
