//go:build linux

package afxdp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/tests/netns"
)

// The tests run on the two-host testbed: a port on host B behind the
// steering program, a port on host A that transmits, and the switch
// namespace routing between them, so every frame crosses a real kernel
// forwarding path (TTL decrement, MAC rewrite) on its way.

// testPair is a testbed with an AF_XDP port on each host.
type testPair struct {
	tb             *netns.Testbed
	a, b           *Port
	steer          *bpf.Steer // B's steering program
	aMAC, bMAC     [6]byte    // a-sw, b-sw
	swAMAC, swBMAC [6]byte    // sw-a, sw-b: the first hop of frames from A, from B
}

// newTestPair brings up a testbed and, on each host, loads the steering
// program with the host's addresses as its filter, attaches it and opens
// a port. Everything is undone in t.Cleanup, also when the test fails.
func newTestPair(t testing.TB, cfg Config) *testPair {
	t.Helper()
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	tb := netns.NewTestbed(t)
	p := &testPair{tb: tb}
	for _, h := range []struct {
		host  string
		self  netns.Host
		port  **Port
		mac   *[6]byte
		steer **bpf.Steer
	}{{netns.HostA, tb.A, &p.a, &p.aMAC, new(*bpf.Steer)}, {netns.HostB, tb.B, &p.b, &p.bMAC, &p.steer}} {
		steer, err := bpf.Load(bpf.Options{LocalIPv4: h.self.IPv4, LocalIPv6: h.self.IPv6})
		if err != nil {
			t.Fatal(err)
		}
		*h.steer = steer
		t.Cleanup(func() { steer.Close() })
		var link *bpf.Link
		err = tb.Do(h.host, func() error {
			ifi, err := net.InterfaceByName(h.self.Iface)
			if err != nil {
				return err
			}
			*h.mac = [6]byte(ifi.HardwareAddr)
			if link, err = bpf.Attach(steer.Program, ifi.Index); err != nil {
				return err
			}
			c := cfg
			c.Interface, c.XSKMap = h.self.Iface, steer.XSKMap
			*h.port, err = Open(c)
			return err
		})
		if link != nil {
			t.Cleanup(func() { link.Close() })
		}
		if err != nil {
			t.Fatalf("host %s: %v", h.host, err)
		}
		port := *h.port
		t.Cleanup(func() {
			if err := port.Close(); err != nil {
				t.Errorf("close port on %s: %v", h.host, err)
			}
		})
	}
	err := tb.Do(netns.HostSwitch, func() error {
		for _, sw := range []struct {
			name string
			mac  *[6]byte
		}{{tb.SwitchA.Iface, &p.swAMAC}, {tb.SwitchB.Iface, &p.swBMAC}} {
			ifi, err := net.InterfaceByName(sw.name)
			if err != nil {
				return err
			}
			*sw.mac = [6]byte(ifi.HardwareAddr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The switch resolves B's address on the first packet it forwards
	// there; a ping per family does that before any RoCE frame is sent,
	// and shows that ICMP still reaches the kernels with the ports bound.
	for _, dst := range []netip.Addr{tb.B.IPv4, tb.B.IPv6} {
		if n, err := tb.Ping(netns.HostA, dst, 1, 2*time.Second); err != nil || n != 1 {
			t.Fatalf("ping %v from A through the switch: %d replies, %v", dst, n, err)
		}
	}
	return p
}

// header is the frame header for A→B in the given family.
func (p *testPair) header(ipv6 bool) bth.FrameHeader {
	h := bth.FrameHeader{SrcMAC: p.aMAC, DstMAC: p.swAMAC, Src: p.tb.A.IPv4, Dst: p.tb.B.IPv4, SrcPort: 0xc0de}
	if ipv6 {
		h.Src, h.Dst = p.tb.A.IPv6, p.tb.B.IPv6
	}
	return h
}

// buildFrame writes an RC SEND ONLY frame with PSN psn and a payload whose
// bytes derive from psn into buf, and returns its length.
func buildFrame(buf []byte, h *bth.FrameHeader, psn uint32, payloadLen int) int {
	roceLen := bth.BTHLen + payloadLen + bth.PadFor(payloadLen) + bth.ICRCLen
	off := h.Encode(buf, roceLen)
	bth.BTH(buf[off:]).Encode(&bth.BTHFields{
		Opcode: bth.RCSendOnly, PadCount: uint8(bth.PadFor(payloadLen)), PKey: 0xffff, DestQPN: 0x11, PSN: psn,
	})
	payload := buf[off+bth.BTHLen : off+roceLen-bth.ICRCLen]
	for i := range payload {
		payload[i] = byte(psn) + byte(i)
	}
	frame := buf[:off+roceLen]
	bth.FinishFrame(frame, h)
	return len(frame)
}

// sendFrames transmits frames with PSNs first..first+n-1 from A, flushing
// every batch frames.
func sendFrames(t testing.TB, p *testPair, h *bth.FrameHeader, first uint32, n, payloadLen, batch int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < n; {
		buf := p.a.TxBuffer()
		if buf == nil {
			p.a.Flush()
			if time.Now().After(deadline) {
				t.Fatalf("A's TX ring stayed full after %d of %d frames", i, n)
			}
			p.a.Wait(time.Millisecond)
			continue
		}
		p.a.Transmit(buildFrame(buf, h, first+uint32(i), payloadLen))
		if i++; i%batch == 0 {
			p.a.Flush()
		}
	}
	p.a.Flush()
}

// receiveFrames reads from B until want frames arrived or wait passed,
// checking each (parse, ICRC, addresses, payload) and returning the PSNs
// seen.
func receiveFrames(t testing.TB, p *testPair, h *bth.FrameHeader, want int, wait time.Duration) map[uint32]bool {
	t.Helper()
	seen := map[uint32]bool{}
	frames := make([][]byte, 64)
	deadline := time.Now().Add(wait)
	for len(seen) < want && time.Now().Before(deadline) {
		n := p.b.Receive(frames)
		if n == 0 {
			p.b.Wait(10 * time.Millisecond)
			continue
		}
		for _, fr := range frames[:n] {
			if err := checkFrame(fr, h); err != nil {
				t.Fatalf("frame %d on B: %v\n% x", len(seen), err, fr)
			}
			f, _ := bth.ParseFrame(fr)
			seen[f.Pkt.BTH().PSN()] = true
		}
	}
	return seen
}

// checkFrame verifies a received frame against what buildFrame sent.
func checkFrame(fr []byte, h *bth.FrameHeader) error {
	f, err := bth.ParseFrame(fr)
	if err != nil {
		return err
	}
	if !f.VerifyICRC() {
		return fmt.Errorf("ICRC mismatch")
	}
	if f.SrcAddr() != h.Src.Unmap() || f.DstAddr() != h.Dst.Unmap() || f.SrcPort() != h.SrcPort {
		return fmt.Errorf("addresses %v:%d -> %v, sent %v:%d -> %v", f.SrcAddr(), f.SrcPort(), f.DstAddr(), h.Src, h.SrcPort, h.Dst)
	}
	psn := f.Pkt.BTH().PSN()
	payload := f.Pkt.Payload()
	for i, b := range payload {
		if b != byte(psn)+byte(i) {
			return fmt.Errorf("PSN %d: payload byte %d is %#x", psn, i, b)
		}
	}
	return nil
}

func TestSteeredFramesArriveIntact(t *testing.T) {
	p := newTestPair(t, Config{})
	t.Logf("A: zero-copy %v, need-wakeup %v, queues %v, max frame %d", p.a.ZeroCopy(), p.a.NeedWakeup(), p.a.Queues(), p.a.MaxFrame())
	const n = 512
	psn := uint32(0)
	for _, ipv6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", ipv6), func(t *testing.T) {
			h := p.header(ipv6)
			sendFrames(t, p, &h, psn, n, 1024, 64)
			seen := receiveFrames(t, p, &h, n, 5*time.Second)
			if len(seen) != n {
				t.Fatalf("B received %d of %d frames; A %+v; B %+v", len(seen), n, p.a.Stats(), p.b.Stats())
			}
			psn += n
		})
	}
	c, err := p.steer.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Steered != 2*n {
		t.Errorf("XDP program steered %d frames, want %d (%+v)", c.Steered, 2*n, c)
	}
	as, bs := p.a.Stats(), p.b.Stats()
	if as.TxFrames != 2*n || bs.RxFrames != 2*n {
		t.Errorf("stats: A sent %d, B received %d, want %d each", as.TxFrames, bs.RxFrames, 2*n)
	}
	// Per queue: every socket once, in the order of Queues, summing to
	// Stats.
	for side, port := range map[string]*Port{"A": p.a, "B": p.b} {
		qs, s := port.QueueStats(), port.Stats()
		if len(qs) != len(port.Queues()) {
			t.Fatalf("%s: %d QueueStats for queues %v", side, len(qs), port.Queues())
		}
		var sum QueueStats
		for i, q := range qs {
			if q.Queue != port.Queues()[i] {
				t.Errorf("%s: QueueStats[%d] is queue %d, want %d", side, i, q.Queue, port.Queues()[i])
			}
			sum.RxFrames += q.RxFrames
			sum.TxFrames += q.TxFrames
			sum.RxFillRingEmpty += q.RxFillRingEmpty
		}
		if sum.RxFrames != s.RxFrames || sum.TxFrames != s.TxFrames || sum.RxFillRingEmpty > s.RxFillRingEmpty {
			t.Errorf("%s: queues sum to rx %d tx %d fill-empty %d; Stats %+v", side, sum.RxFrames, sum.TxFrames, sum.RxFillRingEmpty, s)
		}
	}
	// One sendto per flushed batch: n/64 batches per family.
	if as.Wakeups > 2*n/64+4 {
		t.Errorf("A kicked the kernel %d times for %d batches", as.Wakeups, 2*n/64)
	}
}

func TestOtherTrafficReachesKernel(t *testing.T) {
	p := newTestPair(t, Config{})
	// newTestPair pinged through the bound port already; plain UDP to
	// another port must reach B's kernel socket too.
	var conn *net.UDPConn
	err := p.tb.Do(netns.HostB, func() error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.tb.B.IPv4, 9999)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = p.tb.Do(netns.HostA, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.tb.B.IPv4, 9999)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("not roce"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "not roce" {
		t.Fatalf("B's kernel socket got %q, %v", buf[:n], err)
	}
	if got := p.b.Stats().RxFrames; got != 0 {
		t.Errorf("the AF_XDP port received %d frames of non-RoCE traffic", got)
	}
	c, err := p.steer.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.OtherPort == 0 || c.NotUDP == 0 {
		t.Errorf("counters %+v: want pass_other_port and pass_not_udp (ICMP) > 0", c)
	}
}

func TestNoAllocs(t *testing.T) {
	p := newTestPair(t, Config{})
	h := p.header(false)
	var tmpl [1100]byte
	n := buildFrame(tmpl[:], &h, 7, 1024)
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
	cycle() // warm up
	if allocs := testing.AllocsPerRun(200, cycle); allocs != 0 {
		t.Errorf("Receive/TxBuffer/Transmit/Flush/Wait/Wake cycle: %v allocations, want 0", allocs)
	}
	if received == 0 {
		t.Errorf("B received nothing during the cycles; A %+v, B %+v", p.a.Stats(), p.b.Stats())
	}
}

func TestRebind(t *testing.T) {
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	tb := netns.NewTestbed(t)
	// Open and close the same queue repeatedly: Close must release the
	// socket and its mappings so that the queue can be bound again in the
	// same process (the daemon restarts a port; tests reuse interfaces).
	for i := range 3 {
		err := tb.Do(netns.HostA, func() error {
			p, err := Open(Config{Interface: tb.A.Iface, FrameSize: 2048, NumFrames: 256, RingSize: 128})
			if err != nil {
				return err
			}
			if p.MaxFrame() != 2048-256 {
				return fmt.Errorf("MaxFrame %d with 2048-byte chunks, want 1792", p.MaxFrame())
			}
			return p.Close()
		})
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
	}
	// A second socket on a bound queue is refused with a clear error.
	err := tb.Do(netns.HostA, func() error {
		p, err := Open(Config{Interface: tb.A.Iface})
		if err != nil {
			return err
		}
		defer p.Close()
		if q, err := Open(Config{Interface: tb.A.Iface}); err == nil {
			q.Close()
			return fmt.Errorf("second Open on a bound queue succeeded")
		} else if !bytes.Contains([]byte(err.Error()), []byte("busy")) {
			return fmt.Errorf("second Open: %v, want EBUSY", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Interface: "lo", FrameSize: 1000}, "FrameSize"},
		{Config{Interface: "lo", RingSize: 100}, "RingSize"},
		{Config{Interface: "lo", NumFrames: 10}, "NumFrames"},
		{Config{Interface: "softnic-nonexistent0"}, "no such network interface"},
		// Loopback has one queue: 7 is refused before any socket is
		// made, in one line.
		{Config{Interface: "lo", Queues: []int{0, 7}}, "afxdp: lo has 1 RX queue (0), no queue 7"},
	} {
		if _, err := Open(c.cfg); err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) || bytes.Contains([]byte(err.Error()), []byte("\n")) {
			t.Errorf("Open(%+v) = %v, want a one-line error about %s", c.cfg, err, c.want)
		}
	}
}

// TestLineJoin: the bind modes' errors are reported on one line, and
// errors.Is still finds each of them (bind's EBUSY retry depends on it).
func TestLineJoin(t *testing.T) {
	err := fmt.Errorf("bind: %w", lineJoin{fmt.Errorf("flags 0xc: %w", unix.EINVAL), fmt.Errorf("flags 0x2: %w", unix.EBUSY)})
	if got, want := err.Error(), "bind: flags 0xc: invalid argument; flags 0x2: device or resource busy"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if !errors.Is(err, unix.EBUSY) || !errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
		t.Error("errors.Is does not see the joined errors")
	}
}

// BenchmarkBlast measures the raw frame rate of the AF_XDP path A→B
// through the testbed: A transmits b.N RoCE frames of 1 KiB payload in
// batches of 64 as fast as its ring allows, B receives them with the
// adaptive poll of a real loop (spin while frames come, ppoll when idle).
// It reports frames/s sent and received, and the loss (frames the switch
// or B's rings dropped under overload).
func BenchmarkBlast(b *testing.B) {
	p := newTestPair(b, Config{})
	h := p.header(false)
	var tmpl [1200]byte
	n := buildFrame(tmpl[:], &h, 1, 1024)
	done := make(chan struct{})
	got := make(chan int)
	var lastRx time.Time
	go func() {
		frames := make([][]byte, 64)
		total, idle := 0, 0
		for {
			k := p.b.Receive(frames)
			if k > 0 {
				total += k
				lastRx = time.Now()
				idle = 0
				continue
			}
			select {
			case <-done:
				if idle > 0 && time.Since(lastRx) > 200*time.Millisecond {
					got <- total
					return
				}
			default:
			}
			if idle++; idle > 32 {
				p.b.Wait(5 * time.Millisecond)
			}
		}
	}()
	b.SetBytes(int64(n))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		buf := p.a.TxBuffer()
		if buf == nil {
			p.a.Flush()
			p.a.Wait(100 * time.Microsecond)
			continue
		}
		copy(buf, tmpl[:n])
		p.a.Transmit(n)
		if i++; i%64 == 0 {
			p.a.Flush()
		}
	}
	p.a.Flush()
	sent := time.Since(start)
	close(done)
	total := <-got
	b.StopTimer()
	recvd := lastRx.Sub(start)
	b.ReportMetric(float64(b.N)/sent.Seconds(), "tx-frames/s")
	if recvd > 0 {
		b.ReportMetric(float64(total)/recvd.Seconds(), "rx-frames/s")
	}
	b.ReportMetric(100*float64(b.N-total)/float64(b.N), "loss%")
	// Where the lost frames went: B's rings (RxRingFull, RxFillRingEmpty)
	// or before them (the switch's forwarding backlog).
	b.Logf("%d frames: A %+v; B %+v", b.N, p.a.Stats(), p.b.Stats())
}
