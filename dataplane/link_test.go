package dataplane

import (
	"context"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestWireBytes checks the emulated link's accounting of one frame:
// padding to the 64-byte minimum (FCS included), then FCS, preamble, SFD
// and inter-frame gap.
func TestWireBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame int
		want  int
	}{
		{"empty", 0, 64 + 20},
		{"one byte", 1, 64 + 20},
		{"minimum less FCS", 60, 64 + 20},
		{"one past minimum", 61, 61 + 24},
		{"IPv4 ACK", 14 + 20 + 8 + 12 + 4 + 4, 62 + 24},
		{"IPv6 ACK", 14 + 40 + 8 + 12 + 4 + 4, 82 + 24},
		{"IPv4 WRITE middle, MTU 1024", 14 + 20 + 8 + 12 + 1024 + 4, 1082 + 24},
		{"IPv4 WRITE first, MTU 4096", 14 + 20 + 8 + 12 + 16 + 4096 + 4, 4170 + 24},
		{"1500-byte IP packet", 1514, 1538}, // Ethernet's 1538 bytes per full frame
	} {
		if got := WireBytes(c.frame); got != c.want {
			t.Errorf("%s: WireBytes(%d) = %d, want %d", c.name, c.frame, got, c.want)
		}
	}
	if EthOverhead != 24 {
		t.Errorf("EthOverhead = %d, want 24", EthOverhead)
	}
}

func TestDefaultLinkBurst(t *testing.T) {
	for _, c := range []struct {
		rate     uint64
		maxFrame int
		want     int
	}{
		{5e9, 4224, 16 * (4224 + 24)},       // 16 frames: 67968 B, more than 20 µs (12500 B)
		{1e9, 2048 - 256, 16 * (1792 + 24)}, // an AF_XDP port's 2048-byte chunk less headroom
		{100e9, 4224, 250000},               // 20 µs at 100 Gbit/s is more than 16 frames
	} {
		if got := defaultLinkBurst(c.rate, c.maxFrame); got != c.want {
			t.Errorf("defaultLinkBurst(%d, %d) = %d, want %d", c.rate, c.maxFrame, got, c.want)
		}
	}
}

func TestLinkConfigChecked(t *testing.T) {
	for _, cfg := range []SimConfig{{LinkRate: 2e15}, {LinkRate: 1e9, LinkBurst: -1}, {LinkRate: 1e9, LinkBurst: 2 << 30}} {
		if _, err := NewSim(cfg); err == nil {
			t.Errorf("NewSim(%+v) took a bad link configuration", cfg)
		}
	}
}

// linkTap records the frames one direction of the fabric carried and
// when each was handed to it.
type linkTap struct {
	clock *fabric.FakeClock
	at    []time.Duration
	n     []int
	last  int // WRITE Last frames (IPv4)
}

func (l *linkTap) drop(frame []byte) bool {
	l.at = append(l.at, l.clock.Now())
	l.n = append(l.n, len(frame))
	if frame[14+20+8] == byte(bth.RCWriteLast) {
		l.last++
	}
	return false
}

// checkConforms checks that the frames of tap respect the bucket: from an
// idle start, the wire bits sent up to and including every frame are at
// most what the rate allows by then plus the burst and one frame (the
// frame that empties the bucket).
func checkConforms(t *testing.T, tap *linkTap, rate uint64, burst, maxFrame int) {
	t.Helper()
	var bits uint64
	for i, at := range tap.at {
		bits += uint64(WireBytes(tap.n[i])) * 8
		allowed := uint64(at)*rate/uint64(time.Second) + uint64(burst+WireBytes(maxFrame))*8 + 8
		if bits > allowed {
			t.Fatalf("frame %d at %v: %d wire bits sent since 0, the bucket allows %d", i, at, bits, allowed)
		}
	}
}

// TestLinkRateWriteBW streams 64 KiB WRITEs, 32 in flight, between two
// engines whose emulated links run at 5 Gbit/s over a fabric of 25 Gbit/s,
// and measures the requester's wire rate (frames with their Ethernet
// overhead) over one simulated second: the bucket, not the fabric, sets
// it, to within 2%. ST's second copies go through the bucket too (igbn).
func TestLinkRateWriteBW(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated second of traffic")
	}
	for _, scheme := range []string{recovery.GBN, recovery.IGBN} {
		t.Run(scheme, func(t *testing.T) { linkRateWriteBW(t, scheme) })
	}
}

func linkRateWriteBW(t *testing.T, scheme string) {
	const (
		rate   = 5e9
		msg    = 64 << 10
		depth  = 32
		window = time.Second
	)
	// 50 µs each way: an ACK never overtakes a deferred ST copy, which
	// would then rightly be skipped.
	link := fabric.LinkConfig{Delay: 50 * time.Microsecond, RateBps: 25e9}
	tap := &linkTap{}
	atob := link
	atob.Drop = tap.drop
	p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 5, AtoB: atob, BtoA: link, LinkRate: rate}, ConnParams{MTU: qp.MTU4096})
	tap.clock = p.sim.Clock
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, msg))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	wr.Flags = qp.SendSignaled
	post := func(n int) {
		for i := 0; i < n; i++ {
			p.postSend(wr)
		}
	}
	post(depth)
	wcs := make([]qp.WC, 64)
	var start time.Duration
	var before Counters
	started := false
	done := 0
	warm := 10 * time.Millisecond
	ok := p.sim.RunUntil(func() bool {
		n, err := p.sim.A.PollCQ(p.cqA, wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		post(n)
		done += n
		now := p.sim.Now()
		if !started && now >= warm {
			started, start, before = true, now, p.sim.A.Counters()
		}
		return started && now >= start+window
	}, window+2*warm)
	if !ok {
		t.Fatalf("the stream stopped at %v (A %+v)", p.sim.Now(), p.sim.A.Counters())
	}
	after := p.sim.A.Counters()
	elapsed := p.sim.Now() - start
	got := float64(after.TxWireBytes-before.TxWireBytes) * 8 / elapsed.Seconds()
	t.Logf("%s: %.6g bit/s on the wire over %v; link_paced %d, link_paced_ns %d, tx_ring_full %d, sent_pkts %d",
		scheme, got, elapsed, after.LinkPaced-before.LinkPaced, after.LinkPacedNs-before.LinkPacedNs,
		after.TxRingFull-before.TxRingFull, after.SentPkts-before.SentPkts)
	if got < rate*0.98 || got > rate*1.02 {
		t.Errorf("wire rate %.4g bit/s, want %.4g within 2%%", got, float64(rate))
	}
	if after.LinkPaced == before.LinkPaced || after.LinkPacedNs == before.LinkPacedNs {
		t.Error("the link never held a packet back: it was not the bottleneck")
	}
	// Every frame the fabric carried was counted, and none broke the bucket.
	var wire uint64
	for _, n := range tap.n {
		wire += uint64(WireBytes(n))
	}
	if wire != after.TxWireBytes || uint64(len(tap.n)) != after.SentPkts {
		t.Errorf("the fabric carried %d frames, %d wire bytes; the engine counted %d, %d", len(tap.n), wire, after.SentPkts, after.TxWireBytes)
	}
	if scheme == recovery.IGBN && tap.last < 2*done {
		t.Errorf("%d WRITE Last frames for %d messages: ST's second copies are missing", tap.last, done)
	}
	checkConforms(t, tap, rate, defaultLinkBurst(rate, p.sim.A.port.MaxFrame()), p.sim.A.port.MaxFrame())
}

// TestLinkNextDeadline checks that an engine held back by its link reports
// the moment the bucket opens as its next deadline, sends nothing before
// it and the next frame at it.
func TestLinkNextDeadline(t *testing.T) {
	const (
		rate  = 1e9
		burst = 125 // 1 µs at 1 Gbit/s
	)
	// No context-fetch stall: the first poll transmits at once.
	p := newTestPair(t, SimConfig{LinkRate: rate, LinkBurst: burst, FetchPenalty: -1}, ConnParams{MTU: qp.MTU1024})
	a := p.sim.A
	idle, idleOK := a.NextDeadline() // the timers' only
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 4096))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	a.Poll(0)
	c := a.Counters()
	if c.SentPkts != 1 || c.LinkPaced != 1 {
		t.Fatalf("after the first poll: sent_pkts %d, link_paced %d; want 1 and 1", c.SentPkts, c.LinkPaced)
	}
	// WRITE First: Ethernet 14, IPv4 20, UDP 8, BTH 12, RETH 16, 1024 of
	// payload, ICRC 4.
	first := WireBytes(14 + 20 + 8 + 12 + 16 + 1024 + 4)
	if c.TxWireBytes != uint64(first) {
		t.Fatalf("tx_wire_bytes %d, want %d", c.TxWireBytes, first)
	}
	open := time.Duration(first*8)*time.Second/rate - time.Microsecond
	d, ok := a.NextDeadline()
	if !ok || d != open {
		t.Fatalf("NextDeadline = %v, %v; want %v (the bucket opens), before the retransmission timer", d, ok, open)
	}
	if a.Poll(open - 1); a.Counters().SentPkts != 1 {
		t.Fatal("a frame left before the bucket opened")
	}
	a.Poll(open)
	c = a.Counters()
	if c.SentPkts != 2 {
		t.Fatalf("at the deadline: sent_pkts %d, want 2", c.SentPkts)
	}
	if c.LinkPacedNs != uint64(open) {
		t.Errorf("link_paced_ns %d, want %d (from the first poll to the bucket opening)", c.LinkPacedNs, open)
	}
	// WRITE Middle: no RETH; the next deadline is one more frame later.
	middle := WireBytes(14 + 20 + 8 + 12 + 1024 + 4)
	want := open + time.Duration(middle*8)*time.Second/rate
	if d, ok := a.NextDeadline(); !ok || d != want {
		t.Fatalf("NextDeadline = %v, %v; want %v", d, ok, want)
	}
	// The Sim steps to each deadline: the message completes.
	if wcs := p.waitWCs(a, p.cqA, 1, time.Second); wcs[0].Status != qp.WCSuccess {
		t.Fatalf("completion %+v", wcs[0])
	}
	// With nothing waiting on the link, the deadline is the timers' again.
	p.settle()
	if d, ok := a.NextDeadline(); ok != idleOK || ok && d < p.sim.Now() {
		t.Fatalf("NextDeadline = %v, %v after the work is done (%v, %v before it)", d, ok, idle, idleOK)
	}
}

// TestLinkRespondsFirst checks that pacing keeps the transmit order:
// B streams a WRITE to A through a slow link when A's WRITE arrives and
// B owes an ACK; the next frame B's link lets go is that ACK, before
// B's own requests.
func TestLinkRespondsFirst(t *testing.T) {
	const opcodeOff = 14 + 20 + 8 // IPv4: the BTH's first byte
	p := newTestPair(t, SimConfig{LinkRate: 1e9, LinkBurst: 1}, ConnParams{MTU: qp.MTU1024})
	b := p.sim.B
	wb := sendWR(2, qp.WRRDMAWrite, sge(p.mrB, 0, 64<<10))
	wb.RemoteAddr, wb.RKey = p.mrA.Addr, p.mrA.RKey
	if _, err := b.PostSend(p.qb, []qp.SendWR{wb}); err != nil {
		t.Fatal(err)
	}
	p.sim.RunFor(100 * time.Microsecond)
	// Whether or not B's bucket is open now, it is closed after this
	// poll: B's link holds its next frame back when A's WRITE arrives.
	b.Poll(p.sim.Now())
	if d, ok := b.NextDeadline(); !ok || d <= p.sim.Now() {
		t.Fatalf("B's link is open (deadline %v, %v at %v)", d, ok, p.sim.Now())
	}
	type sent struct {
		d  fabric.Direction
		at time.Duration
		op byte
	}
	var log []sent
	p.sim.Fabric.Tap(func(d fabric.Direction, at time.Duration, frame []byte, _ bool) {
		log = append(log, sent{d, at, frame[opcodeOff]})
	})
	w := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 8))
	w.RemoteAddr, w.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(w)
	p.waitWCs(p.sim.A, p.cqA, 1, time.Second)
	arrived := time.Duration(-1)
	for _, s := range log {
		switch {
		case s.d == fabric.AtoB && s.op == byte(bth.RCWriteOnly) && arrived < 0:
			arrived = s.at
		case s.d == fabric.BtoA && arrived >= 0:
			if s.op != byte(bth.RCAcknowledge) {
				t.Fatalf("B's first frame after A's WRITE (at %v) is opcode %#x at %v, want the ACK", arrived, s.op, s.at)
			}
			if s.at == arrived {
				t.Fatal("the ACK was not held back by the link: the test did not test the order")
			}
			if c := b.Counters(); c.LinkPaced == 0 || c.SentPkts < 3 {
				t.Fatalf("B: %+v", c)
			}
			return
		}
	}
	t.Fatalf("no frame from B after A's WRITE (%d frames seen)", len(log))
}

// fakeWaiter advances a fake clock by each Wait's timeout and records it.
type fakeWaiter struct {
	now   *time.Duration
	waits []time.Duration
}

func (w *fakeWaiter) Wait(d time.Duration) { w.waits = append(w.waits, d); *w.now += d }
func (w *fakeWaiter) Wake()                {}

// TestRunLinkSpin checks the poll loop on a paced link: with the default
// LinkSpin it keeps polling through waits for the bucket (a short sleep
// would overshoot), and with LinkSpin off it blocks exactly until the
// bucket opens.
func TestRunLinkSpin(t *testing.T) {
	for _, spin := range []time.Duration{0, -1} {
		p := newTestPair(t, SimConfig{LinkRate: 1e9, LinkBurst: 1, FetchPenalty: -1}, ConnParams{MTU: qp.MTU1024})
		a := p.sim.A
		wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 16<<10))
		wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
		p.postSend(wr)
		var clock time.Duration
		w := &fakeWaiter{now: &clock}
		ctx, cancel := context.WithCancel(context.Background())
		now := func() time.Duration {
			clock += time.Microsecond
			if a.Counters().SentPkts >= 16 {
				cancel()
			}
			return clock
		}
		a.Run(ctx, w, now, RunConfig{IdlePolls: 2, LinkSpin: spin})
		cancel()
		t.Logf("LinkSpin %v: waits %v", spin, w.waits)
		frame := time.Duration(WireBytes(14+20+8+12+1024+4)*8) * time.Second / 1e9
		switch {
		case a.Counters().SentPkts < 16:
			t.Fatalf("LinkSpin %v: %d packets sent", spin, a.Counters().SentPkts)
		case spin == 0 && len(w.waits) > 0:
			t.Errorf("LinkSpin default: the loop blocked %d times (%v) on a paced link", len(w.waits), w.waits)
		case spin < 0 && len(w.waits) == 0:
			t.Error("LinkSpin off: the loop never blocked")
		case spin < 0:
			for _, d := range w.waits {
				if d <= 0 || d > frame {
					t.Fatalf("LinkSpin off: waits %v, want each within one frame time (%v)", w.waits, frame)
				}
			}
		}
	}
}

// TestLinkPacesRetransmissions: under loss, retransmissions and the
// selective schemes' extra ACKs pass the bucket too; no frame of either
// direction breaks it.
func TestLinkPacesRetransmissions(t *testing.T) {
	const rate = 2e9
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		tapA, tapB := &linkTap{}, &linkTap{}
		atob, btoa := lossyLink(0.02), lossyLink(0.02)
		atob.Drop, btoa.Drop = tapA.drop, tapB.drop
		p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 9, AtoB: atob, BtoA: btoa, LinkRate: rate}, ConnParams{MTU: qp.MTU1024})
		tapA.clock, tapB.clock = p.sim.Clock, p.sim.Clock
		for i := 0; i < 8; i++ {
			wr := sendWR(uint64(i), qp.WRRDMAWrite, sge(p.mrA, 0, 256<<10))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
			p.postSend(wr)
		}
		for _, wc := range p.waitWCs(p.sim.A, p.cqA, 8, time.Second) {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("%s: completion %+v", scheme, wc)
			}
		}
		a := p.sim.A.Counters()
		if a.Retransmits == 0 || a.LinkPaced == 0 {
			t.Fatalf("%s: retransmitted %d, link_paced %d: want both", scheme, a.Retransmits, a.LinkPaced)
		}
		burst := defaultLinkBurst(rate, p.sim.A.port.MaxFrame())
		checkConforms(t, tapA, rate, burst, p.sim.A.port.MaxFrame())
		checkConforms(t, tapB, rate, burst, p.sim.B.port.MaxFrame())
	}
}
