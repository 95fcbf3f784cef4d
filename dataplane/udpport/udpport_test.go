//go:build linux

package udpport

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/tests/netns"
)

// The tests run on the two-host testbed (root): only addresses of
// 198.18.0.0/15 and 2001:db8::/32, inside namespaces the test creates.

var macB = [6]byte{0x02, 0x53, 0x4e, 0x00, 0x00, 0x0b}

// openPorts opens a port on host A and one on host B for one family.
func openPorts(t testing.TB, tb *netns.Testbed, ipv6 bool) (a, b *Port) {
	t.Helper()
	addrA, addrB := tb.A.IPv4, tb.B.IPv4
	if ipv6 {
		addrA, addrB = tb.A.IPv6, tb.B.IPv6
	}
	for _, side := range []struct {
		host string
		addr netip.Addr
		mac  [6]byte
		p    **Port
	}{{netns.HostA, addrA, [6]byte{}, &a}, {netns.HostB, addrB, macB, &b}} {
		err := tb.Do(side.host, func() error {
			var err error
			*side.p, err = Open(Config{Addr: side.addr, MAC: side.mac})
			return err
		})
		if err != nil {
			t.Fatalf("host %s: %v", side.host, err)
		}
		p := *side.p
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	return a, b
}

// buildFrame writes an RC SEND ONLY frame as the engine would (entropy
// source port, any MACs) and returns its length.
func buildFrame(buf []byte, h *bth.FrameHeader, psn uint32, payloadLen int) int {
	roceLen := bth.BTHLen + payloadLen + bth.PadFor(payloadLen) + bth.ICRCLen
	off := h.Encode(buf, roceLen)
	bth.BTH(buf[off:]).Encode(&bth.BTHFields{
		Opcode: bth.RCSendOnly, PadCount: uint8(bth.PadFor(payloadLen)), PKey: 0xffff, DestQPN: 0x11, PSN: psn,
	})
	payload := buf[off+bth.BTHLen : off+roceLen-bth.ICRCLen]
	for i := range payload {
		payload[i] = byte(psn) * byte(i+1)
	}
	frame := buf[:off+roceLen]
	bth.FinishFrame(frame, h)
	return len(frame)
}

func TestFramesCrossIntact(t *testing.T) {
	tb := netns.NewTestbed(t)
	for _, ipv6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", ipv6), func(t *testing.T) {
			a, b := openPorts(t, tb, ipv6)
			h := bth.FrameHeader{Src: a.LocalAddr(), Dst: b.LocalAddr(), SrcPort: 0xc0de}
			const n = 300
			// Payload lengths exercise every pad count.
			for i := range n {
				buf := a.TxBuffer()
				if buf == nil {
					a.Flush()
					buf = a.TxBuffer()
				}
				a.Transmit(buildFrame(buf, &h, uint32(i), 1000+i%4))
				if i%50 == 49 {
					a.Flush()
				}
			}
			a.Flush()

			frames := make([][]byte, 64)
			got := 0
			deadline := time.Now().Add(5 * time.Second)
			for got < n && time.Now().Before(deadline) {
				k := b.Receive(frames)
				if k == 0 {
					b.Wait(10 * time.Millisecond)
					continue
				}
				for _, fr := range frames[:k] {
					checkFrame(t, fr, a.LocalAddr(), b.LocalAddr(), got)
					got++
				}
			}
			if got != n {
				t.Fatalf("B received %d of %d; A %+v, B %+v", got, n, a.Stats(), b.Stats())
			}
			if s := a.Stats(); s.TxFrames != n || s.TxErrors+s.TxBadFrames != 0 {
				t.Errorf("A stats %+v", s)
			}
		})
	}
}

// checkFrame verifies the rebuilt frame of the i-th datagram.
func checkFrame(t *testing.T, fr []byte, src, dst netip.Addr, i int) {
	t.Helper()
	f, err := bth.ParseFrame(fr)
	if err != nil {
		t.Fatalf("frame %d: %v\n% x", i, err, fr)
	}
	if !f.VerifyICRC() {
		t.Fatalf("frame %d: ICRC does not verify on the rebuilt header\n% x", i, fr)
	}
	if f.SrcAddr() != src || f.DstAddr() != dst || f.SrcPort() != bth.UDPPort || f.DstMAC() != macB {
		t.Fatalf("frame %d: %v:%d -> %v (%x), want %v:4791 -> %v (%x)", i, f.SrcAddr(), f.SrcPort(), f.DstAddr(), f.DstMAC(), src, dst, macB)
	}
	if psn := f.Pkt.BTH().PSN(); psn != uint32(i) {
		t.Fatalf("frame %d has PSN %d (reordered on a direct path?)", i, psn)
	}
	payload := f.Pkt.Payload()
	if len(payload) != 1000+i%4 {
		t.Fatalf("frame %d: payload of %d bytes, want %d", i, len(payload), 1000+i%4)
	}
	for j, v := range payload {
		if v != byte(i)*byte(j+1) {
			t.Fatalf("frame %d: payload byte %d is %#x", i, j, v)
		}
	}
}

func TestDropsWhatItCannotCarry(t *testing.T) {
	tb := netns.NewTestbed(t)
	a, b := openPorts(t, tb, false)
	// An IPv6 frame on an IPv4 port, and garbage, are dropped and counted.
	h6 := bth.FrameHeader{Src: tb.A.IPv6, Dst: tb.B.IPv6}
	a.Transmit(buildFrame(a.TxBuffer(), &h6, 1, 8))
	copy(a.TxBuffer(), "not a frame at all, not even Ethernet")
	a.Transmit(37)
	// A frame larger than the path MTU (3000) is refused by the kernel
	// (DF: RoCE is never fragmented) and the next one still goes out.
	h := bth.FrameHeader{Src: tb.A.IPv4, Dst: tb.B.IPv4}
	a.Transmit(buildFrame(a.TxBuffer(), &h, 2, 3500))
	a.Transmit(buildFrame(a.TxBuffer(), &h, 3, 8))
	a.Flush()
	s := a.Stats()
	if s.TxBadFrames != 2 || s.TxErrors != 1 || s.TxFrames != 1 {
		t.Errorf("A stats %+v: want 2 bad frames, 1 error, 1 sent", s)
	}
	frames := make([][]byte, 8)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if k := b.Receive(frames); k > 0 {
			if f, err := bth.ParseFrame(frames[0]); err != nil || f.Pkt.BTH().PSN() != 3 {
				t.Fatalf("B got %v %v, want PSN 3", f.Pkt.BTH().PSN(), err)
			}
			return
		}
		b.Wait(10 * time.Millisecond)
	}
	t.Fatal("the frame after the refused one did not arrive")
}

func TestNoAllocs(t *testing.T) {
	tb := netns.NewTestbed(t)
	a, b := openPorts(t, tb, false)
	h := bth.FrameHeader{Src: a.LocalAddr(), Dst: b.LocalAddr(), SrcPort: 0xc0de}
	var tmpl [1200]byte
	n := buildFrame(tmpl[:], &h, 7, 1024)
	frames := make([][]byte, 64)
	received := 0
	cycle := func() {
		for range 8 {
			copy(a.TxBuffer(), tmpl[:n])
			a.Transmit(n)
		}
		a.Flush()
		received += b.Receive(frames)
		b.Wait(0)
		b.Wake()
	}
	cycle()
	if allocs := testing.AllocsPerRun(200, cycle); allocs != 0 {
		t.Errorf("Receive/TxBuffer/Transmit/Flush/Wait cycle: %v allocations, want 0", allocs)
	}
	if received == 0 {
		t.Errorf("B received nothing; A %+v, B %+v", a.Stats(), b.Stats())
	}
}

func TestOpenErrors(t *testing.T) {
	for _, c := range []Config{
		{},                              // no address
		{Addr: netip.IPv4Unspecified()}, // not unicast
		{Addr: netip.MustParseAddr("198.18.0.1"), MaxFrame: 20},
	} {
		if p, err := Open(c); err == nil {
			p.Close()
			t.Errorf("Open(%+v) succeeded", c)
		}
	}
}

// TestSocketDropsCounted overflows B's receive buffer (B does not read)
// and finds the kernel's drops in B's stats.
func TestSocketDropsCounted(t *testing.T) {
	tb := netns.NewTestbed(t)
	a, b := openPorts(t, tb, false)
	if s := b.Stats(); s.RxSocketDrops != 0 {
		t.Fatalf("B dropped %d datagrams before any was sent", s.RxSocketDrops)
	}
	h := bth.FrameHeader{Src: a.LocalAddr(), Dst: b.LocalAddr(), SrcPort: 0xc0de}
	var tmpl [1200]byte
	n := buildFrame(tmpl[:], &h, 7, 1024)
	// 4 MiB of buffer (8 MiB as the kernel counts, with each datagram's
	// overhead) hold a few thousand datagrams: send many more.
	for range 40000 {
		buf := a.TxBuffer()
		if buf == nil {
			a.Flush()
			buf = a.TxBuffer()
		}
		copy(buf, tmpl[:n])
		a.Transmit(n)
	}
	a.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().RxSocketDrops == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := b.Stats(); s.RxSocketDrops == 0 {
		t.Fatalf("no socket drops counted; A %+v, B %+v", a.Stats(), s)
	}
	var names []string
	for name := range b.Stats().All() {
		names = append(names, name)
	}
	if !slices.Contains(names, "rx_socket_drops") {
		t.Errorf("Stats.All names %v lack rx_socket_drops", names)
	}
}
