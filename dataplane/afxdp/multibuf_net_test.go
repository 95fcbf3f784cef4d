//go:build linux

package afxdp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/tests/netns"
)

// mbMTU is the veth MTU of the multi-buffer tests: room for a RoCE packet
// of path MTU 4096 (4096 + IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ICRC 4)
// with some to spare, more than a 4096-byte chunk less its headroom holds.
const mbMTU = 4500

// TestMultiBufferFramesArriveIntact sends frames with 4096-byte payloads,
// larger than a UMEM chunk, from an AF_XDP port on A through the switch
// namespace's kernel forwarding to one on B, and back: each leaves in two
// TX descriptors (XDP_PKT_CONTD), is forwarded by the kernel as one IP
// packet, arrives in two RX descriptors and reaches the engine as one
// frame whose ICRC, addresses and payload are checked.
func TestMultiBufferFramesArriveIntact(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", fmt.Sprint(mbMTU))
	p := newTestPair(t, Config{FrameSize: 4096, MaxFrame: mbMTU + ethHeaderLen})
	for side, port := range map[string]*Port{"A": p.a, "B": p.b} {
		if !port.MultiBuffer() || port.MaxFrame() != mbMTU+ethHeaderLen {
			t.Fatalf("%s: multi-buffer %v, max frame %d; want true, %d", side, port.MultiBuffer(), port.MaxFrame(), mbMTU+ethHeaderLen)
		}
	}
	t.Logf("A: zero-copy %v, need-wakeup %v, max frame %d", p.a.ZeroCopy(), p.a.NeedWakeup(), p.a.MaxFrame())
	const n, payload = 256, 4096
	back := func(ipv6 bool) bth.FrameHeader {
		h := bth.FrameHeader{SrcMAC: p.bMAC, DstMAC: p.swBMAC, Src: p.tb.B.IPv4, Dst: p.tb.A.IPv4, SrcPort: 0xbeef}
		if ipv6 {
			h.Src, h.Dst = p.tb.B.IPv6, p.tb.A.IPv6
		}
		return h
	}
	psn := uint32(0)
	for _, ipv6 := range []bool{false, true} {
		for _, dir := range []string{"A->B", "B->A"} {
			t.Run(fmt.Sprintf("%s ipv6=%v", dir, ipv6), func(t *testing.T) {
				from, to, h := p.a, p.b, p.header(ipv6)
				if dir == "B->A" {
					from, to, h = p.b, p.a, back(ipv6)
				}
				sendFrom(t, from, &h, psn, n, payload, 32)
				seen := receiveAt(t, to, &h, n, payload, 5*time.Second)
				if len(seen) != n {
					t.Fatalf("%d of %d frames arrived; sender %+v; receiver %+v", len(seen), n, from.Stats(), to.Stats())
				}
				psn += n
			})
		}
	}
	for side, port := range map[string]*Port{"A": p.a, "B": p.b} {
		s := port.Stats()
		if s.RxMultiBuffer != 2*n || s.RxChainsDropped != 0 || s.RxDropped != 0 || s.TxInvalidDescs != 0 {
			t.Errorf("%s: rx_multi_buffer %d (want %d), rx_chains_dropped %d, rx_dropped %d, tx_invalid_descs %d (want 0)",
				side, s.RxMultiBuffer, 2*n, s.RxChainsDropped, s.RxDropped, s.TxInvalidDescs)
		}
		if s.TxFrames != 2*n || s.RxFrames != 2*n {
			t.Errorf("%s: tx_frames %d rx_frames %d, want %d each", side, s.TxFrames, s.RxFrames, 2*n)
		}
	}
}

// sendFrom is sendFrames from either port.
func sendFrom(t testing.TB, from *Port, h *bth.FrameHeader, first uint32, n, payloadLen, batch int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < n; {
		buf := from.TxBuffer()
		if buf == nil {
			from.Flush()
			if time.Now().After(deadline) {
				t.Fatalf("the TX ring stayed full after %d of %d frames", i, n)
			}
			from.Wait(time.Millisecond)
			continue
		}
		from.Transmit(buildFrame(buf, h, first+uint32(i), payloadLen))
		if i++; i%batch == 0 {
			from.Flush()
		}
	}
	from.Flush()
}

// receiveAt is receiveFrames at either port; it also checks each frame's
// payload length.
func receiveAt(t testing.TB, to *Port, h *bth.FrameHeader, want, payloadLen int, wait time.Duration) map[uint32]bool {
	t.Helper()
	seen := map[uint32]bool{}
	frames := make([][]byte, 64)
	deadline := time.Now().Add(wait)
	for len(seen) < want && time.Now().Before(deadline) {
		n := to.Receive(frames)
		if n == 0 {
			to.Wait(10 * time.Millisecond)
			continue
		}
		for _, fr := range frames[:n] {
			if err := checkFrame(fr, h); err != nil {
				t.Fatalf("frame %d (%d bytes): %v", len(seen), len(fr), err)
			}
			f, _ := bth.ParseFrame(fr)
			if got := len(f.Pkt.Payload()); got != payloadLen {
				t.Fatalf("frame %d: payload %d bytes, want %d", len(seen), got, payloadLen)
			}
			seen[f.Pkt.BTH().PSN()] = true
		}
	}
	return seen
}

// TestMultiBufferChainTooLong: datagrams to UDP 4791 that the kernel on A
// sends, larger than B's port carries (MaxFrame 4000, so B binds with
// XDP_USE_SG and receives them as two-descriptor chains of 4442 bytes),
// are dropped whole and counted in rx_chains_dropped, never handed to the
// engine; a frame that fits, in two descriptors too, then arrives intact.
func TestMultiBufferChainTooLong(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", fmt.Sprint(mbMTU))
	p := newTestPair(t, Config{FrameSize: 4096, MaxFrame: 4000})
	if !p.b.MultiBuffer() || p.b.MaxFrame() != 4000 {
		t.Fatalf("B: multi-buffer %v, max frame %d; want true, 4000", p.b.MultiBuffer(), p.b.MaxFrame())
	}
	const n = 16
	err := p.tb.Do(netns.HostA, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.tb.B.IPv4, bpf.RoCEv2Port)))
		if err != nil {
			return err
		}
		defer c.Close()
		big := make([]byte, 4400) // + IPv4 20, UDP 8, Ethernet 14: 4442 bytes
		for range n {
			if _, err := c.Write(big); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	frames := make([][]byte, 64)
	deadline := time.Now().Add(5 * time.Second)
	for p.b.Stats().RxChainsDropped < n && time.Now().Before(deadline) {
		if k := p.b.Receive(frames); k > 0 {
			t.Fatalf("B handed %d frames of %d bytes to the engine, want none", k, len(frames[0]))
		}
		p.b.Wait(10 * time.Millisecond)
	}
	if s := p.b.Stats(); s.RxChainsDropped != n || s.RxFrames != 0 || s.RxMultiBuffer != 0 {
		t.Fatalf("B: rx_chains_dropped %d (want %d), rx_frames %d, rx_multi_buffer %d (want 0)", s.RxChainsDropped, n, s.RxFrames, s.RxMultiBuffer)
	}
	// 3900 bytes: more than one chunk holds, less than MaxFrame.
	h := p.header(false)
	payload := 3900 - 14 - 20 - 8 - bth.BTHLen - bth.ICRCLen
	sendFrom(t, p.a, &h, 0, 8, payload, 8)
	if seen := receiveAt(t, p.b, &h, 8, payload, 5*time.Second); len(seen) != 8 {
		t.Fatalf("after the dropped chains B received %d of 8 frames; B %+v", len(seen), p.b.Stats())
	}
	if s := p.b.Stats(); s.RxMultiBuffer != 8 {
		t.Errorf("B: rx_multi_buffer %d, want 8", s.RxMultiBuffer)
	}
}

// TestMultiBufferNoAllocs is TestNoAllocs with frames of 4096-byte
// payloads: chains on transmit and reassembly on receive allocate nothing
// once the reassembly buffers exist.
func TestMultiBufferNoAllocs(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", fmt.Sprint(mbMTU))
	p := newTestPair(t, Config{FrameSize: 4096, MaxFrame: mbMTU + ethHeaderLen})
	h := p.header(false)
	tmpl := make([]byte, mbMTU)
	n := buildFrame(tmpl, &h, 7, 4096)
	frames := make([][]byte, 64)
	received := 0
	cycle := func() {
		for range 8 {
			buf := p.a.TxBuffer()
			if buf == nil {
				break
			}
			copy(buf, tmpl[:n])
			p.a.Transmit(n)
		}
		p.a.Flush()
		received += p.b.Receive(frames)
		p.b.Wait(0)
		p.b.Wake()
	}
	for range 20 { // warm up: the reassembly buffers of a full batch
		cycle()
	}
	if allocs := testing.AllocsPerRun(200, cycle); allocs != 0 {
		t.Errorf("multi-buffer Receive/TxBuffer/Transmit/Flush cycle: %v allocations, want 0", allocs)
	}
	if received == 0 || p.b.Stats().RxMultiBuffer == 0 {
		t.Errorf("B received %d frames, %d in several descriptors; A %+v, B %+v", received, p.b.Stats().RxMultiBuffer, p.a.Stats(), p.b.Stats())
	}
}
