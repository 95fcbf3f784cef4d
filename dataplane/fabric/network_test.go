package fabric_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
)

// frameTo builds a RoCEv2 SEND ONLY frame of size bytes (size >= 62) from
// host src to host dst of a built topology, ECT(0), UDP source port sport,
// carrying seq in its first payload bytes; a size the 4-byte payload
// alignment cannot reach ends in Ethernet padding.
func frameTo(t testing.TB, buf []byte, src, dst int, sport uint16, seq uint32, size int) []byte {
	t.Helper()
	h := bth.FrameHeader{SrcMAC: fabric.HostMAC(src), DstMAC: fabric.HostMAC(dst),
		Src: fabric.HostAddr(src), Dst: fabric.HostAddr(dst), SrcPort: sport, TOS: netsw.ECNECT0}
	info := bth.Lookup(bth.RCSendOnly)
	payload := (size - h.Len() - info.Length - bth.ICRCLen) &^ 3
	if payload < 4 {
		t.Fatalf("frame size %d", size)
	}
	roceLen := info.Length + payload + bth.ICRCLen
	f := buf[:h.Len()+roceLen]
	off := h.Encode(f, roceLen)
	bth.BTH(f[off:]).Encode(&bth.BTHFields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQPN: uint32(src + 1), PSN: seq})
	binary.BigEndian.PutUint32(f[off+info.Length:], seq)
	bth.FinishFrame(f, &h)
	clear(buf[len(f):size])
	return buf[:size]
}

// sender keeps one host transmitting: left frames of size bytes to dst,
// as fast as its transmit ring takes them.
type sender struct {
	host  *fabric.HostPort
	src   int
	dst   int
	sport uint16
	size  int
	left  int
	sent  uint32
}

func (s *sender) poll(t testing.TB) {
	for s.left > 0 {
		buf := s.host.TxBuffer()
		if buf == nil {
			return
		}
		s.host.Transmit(len(frameTo(t, buf, s.src, s.dst, s.sport, s.sent, s.size)))
		s.sent++
		s.left--
	}
}

// drive runs the network on clock: at every event time, poll is called
// (senders send, receivers receive), then the clock moves to the next
// event. It stops when done reports true or nothing is pending.
func drive(t testing.TB, clock *fabric.FakeClock, n *fabric.Network, poll func(), done func() bool) {
	t.Helper()
	for i := 0; !done(); i++ {
		if i > 50_000_000 {
			t.Fatal("the network does not settle")
		}
		poll()
		next, ok := n.NextEvent()
		if !ok {
			poll()
			if !done() {
				t.Fatalf("idle at %v before done", clock.Now())
			}
			return
		}
		if next > clock.Now() {
			clock.Set(next)
		} else {
			n.Advance()
		}
	}
}

func lossless(xoff int) fabric.SwitchConfig {
	return fabric.SwitchConfig{
		Buffer: netsw.Buffer{PortBytes: 100_000},
		// What a 40 Gb/s link of 2 µs has in flight both ways (20 KB),
		// plus a pause frame and two 1000-byte frames.
		PFC: netsw.PFC{Enabled: true, XOFFBytes: xoff, XONBytes: xoff / 2, HeadroomBytes: netsw.HeadroomFor(40e9, 2*time.Microsecond, 1000)},
	}
}

// TestNetworkTiming: a frame takes its serialization on every link plus
// every link's delay, exactly: 1000 bytes at 8 Gb/s (1 µs) and 1 µs of
// delay, host to switch to host: arrives at 4 µs. Back-to-back frames
// are one serialization apart.
func TestNetworkTiming(t *testing.T) {
	var clock fabric.FakeClock
	n, err := fabric.Star(&clock, 2, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 8e9, Delay: time.Microsecond}, Switch: lossless(50_000)})
	if err != nil {
		t.Fatal(err)
	}
	a, b := n.Hosts()[0], n.Hosts()[1]
	for i := range 3 {
		a.Transmit(len(frameTo(t, a.TxBuffer(), 0, 1, 1, uint32(i), 1000)))
	}
	var arrivals []time.Duration
	frames := make([][]byte, 8)
	drive(t, &clock, n, func() {
		for range b.Receive(frames) {
			arrivals = append(arrivals, clock.Now())
		}
	}, func() bool { return len(arrivals) == 3 })
	want := []time.Duration{4 * time.Microsecond, 5 * time.Microsecond, 6 * time.Microsecond}
	for i := range want {
		if arrivals[i] != want[i] {
			t.Fatalf("arrivals %v, want %v", arrivals, want)
		}
	}
}

// TestNetworkExactRate: 1000 frames of 1001 bytes at 3 Gb/s take exactly
// 1000 × 1001 × 8 / 3 ns on the wire: the serializer keeps the
// fractional nanoseconds, as Fabric's does.
func TestNetworkExactRate(t *testing.T) {
	var clock fabric.FakeClock
	n := fabric.NewNetwork(&clock, 2048, 1)
	a := n.AddHost(fabric.HostConfig{Addrs: []netip.Addr{fabric.HostAddr(0)}, TxRingFrames: 2000})
	b := n.AddHost(fabric.HostConfig{Addrs: []netip.Addr{fabric.HostAddr(1)}})
	if err := n.Connect(fabric.HostEnd(a), fabric.HostEnd(b), fabric.LinkParams{RateBps: 3e9}); err != nil {
		t.Fatal(err)
	}
	if err := n.Build(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1001)
	for range 1000 {
		copy(a.TxBuffer(), buf)
		a.Transmit(1001)
	}
	got := 0
	frames := make([][]byte, 64)
	drive(t, &clock, n, func() { got += b.Receive(frames) }, func() bool { return got == 1000 })
	if want := time.Duration((1000*1001*8 + 2) / 3); clock.Now() != want {
		t.Fatalf("last frame at %v, want %v", clock.Now(), want)
	}
}

// incast sends frames frames of 1000 bytes from each of senders hosts
// of a star to host senders, and returns the network after every frame
// arrived (or was dropped), with the number received.
func incast(t *testing.T, senders, frames int, sw fabric.SwitchConfig, tap func(fabric.TapEvent)) (*fabric.Network, int) {
	t.Helper()
	var clock fabric.FakeClock
	n, err := fabric.Star(&clock, senders+1, fabric.TopologyConfig{
		Link: fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}, Switch: sw, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if tap != nil {
		n.Tap(tap)
	}
	ss := make([]*sender, senders)
	for i := range ss {
		ss[i] = &sender{host: n.Hosts()[i], src: i, dst: senders, sport: uint16(0xc000 + i), size: 1000, left: frames}
	}
	dst := n.Hosts()[senders]
	got := 0
	buf := make([][]byte, 64)
	drive(t, &clock, n, func() {
		for _, s := range ss {
			s.poll(t)
		}
		k := dst.Receive(buf)
		for _, f := range buf[:k] {
			pf, err := bth.ParseFrame(f)
			if err != nil || !pf.VerifyICRC() {
				t.Fatalf("received a bad frame: %v", err)
			}
		}
		got += k
	}, func() bool {
		tot := n.Totals()
		return got+int(tot.Dropped) == senders*frames
	})
	return n, got
}

// TestIncastPFC: 10 senders at line rate into one 40 Gb/s port. With PFC
// every frame arrives, every sender was paused and resumed, its transmit
// ring filled (the engine would have stalled), and no ingress port went
// past XOFF + headroom. Without PFC the same buffer tail-drops.
func TestIncastPFC(t *testing.T) {
	const senders, frames = 10, 400
	pausedAt := map[int]time.Duration{} // sender: when its pause arrived
	startedWhilePaused := 0
	n, got := incast(t, senders, frames, lossless(30_000), func(e fabric.TapEvent) {
		h := e.From.Host()
		if h == nil {
			return
		}
		switch e.Kind {
		case fabric.TapPFC:
			if e.Quanta > 0 {
				pausedAt[h.Index()] = e.At
			} else {
				delete(pausedAt, h.Index())
			}
		case fabric.TapStart:
			if _, paused := pausedAt[h.Index()]; paused {
				startedWhilePaused++
			}
		}
	})
	tot := n.Totals()
	if got != senders*frames || tot.Dropped != 0 {
		t.Fatalf("PFC on: %d of %d received, %d dropped", got, senders*frames, tot.Dropped)
	}
	if startedWhilePaused != 0 {
		t.Fatalf("%d frames started on a paused link", startedWhilePaused)
	}
	for i, h := range n.Hosts()[:senders] {
		st := h.Stats()
		if st.PausesReceived == 0 || st.ResumesReceived == 0 || st.TxRingFull == 0 || st.Transmitted != frames {
			t.Errorf("sender %d: %+v", i, st)
		}
	}
	q := n.Switches()[0].Queues()
	for i := range senders {
		if st := q.Stats(i); st.PausesSent == 0 || st.ResumesSent == 0 {
			t.Errorf("port %d: %+v", i, st)
		}
	}
	if st := q.Stats(senders); st.MaxQueueBytes > senders*(30_000+22_060) {
		t.Errorf("egress queue reached %d bytes", st.MaxQueueBytes)
	}
	t.Logf("PFC on: %d pauses, %d resumes, egress queue max %d B, p99 %d B", tot.PausesSent, tot.ResumesSent,
		q.Stats(senders).MaxQueueBytes, q.OccupancyQuantile(senders, 0.99))

	// A headroom one frame short of HeadroomFor's is overrun.
	short := lossless(30_000)
	short.PFC.HeadroomBytes -= 1000
	n, got = incast(t, senders, frames, short, nil)
	if tot := n.Totals(); tot.Dropped == 0 {
		t.Fatalf("headroom of %d bytes: no drop", short.PFC.HeadroomBytes)
	} else if by := n.Switches()[0].Queues().Stats(senders).DroppedBy[netsw.DropHeadroom]; by != tot.Dropped {
		t.Fatalf("%d drops, %d of them headroom overruns", tot.Dropped, by)
	}

	off := lossless(30_000)
	off.PFC = netsw.PFC{}
	n, got = incast(t, senders, frames, off, nil)
	tot = n.Totals()
	if tot.Dropped == 0 || got+int(tot.Dropped) != senders*frames || tot.PausesSent != 0 {
		t.Fatalf("PFC off: %d received, %d dropped, %d pauses", got, tot.Dropped, tot.PausesSent)
	}
	t.Logf("PFC off: %d received, %d dropped", got, tot.Dropped)
}

// TestPauseStopsAndResumeRestarts follows one sender through its first
// pause: from the pause's arrival to the resume's no frame starts on its
// link, its ring fills and TxBuffer says so, and after the resume it
// sends again.
func TestPauseStopsAndResumeRestarts(t *testing.T) {
	var clock fabric.FakeClock
	n, err := fabric.Star(&clock, 3, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 10e9, Delay: time.Microsecond},
		Switch: lossless(10_000), TxRingFrames: 8})
	if err != nil {
		t.Fatal(err)
	}
	var pause, resume, firstAfter time.Duration
	n.Tap(func(e fabric.TapEvent) {
		if h := e.From.Host(); h == nil || h.Index() != 0 {
			return
		}
		switch {
		case e.Kind == fabric.TapPFC && e.Quanta > 0 && pause == 0:
			pause = e.At
		case e.Kind == fabric.TapPFC && e.Quanta == 0 && pause != 0 && resume == 0:
			resume = e.At
		case e.Kind == fabric.TapStart && pause != 0 && resume == 0:
			t.Errorf("host 0 started a frame at %v, paused since %v", e.At, pause)
		case e.Kind == fabric.TapStart && resume != 0 && firstAfter == 0:
			firstAfter = e.At
		}
	})
	ss := []*sender{
		{host: n.Hosts()[0], src: 0, dst: 2, sport: 1, size: 1000, left: 200},
		{host: n.Hosts()[1], src: 1, dst: 2, sport: 2, size: 1000, left: 200},
	}
	sawRingFull := false
	got := 0
	frames := make([][]byte, 64)
	drive(t, &clock, n, func() {
		for _, s := range ss {
			s.poll(t)
		}
		if pause != 0 && resume == 0 && n.Hosts()[0].Paused() && n.Hosts()[0].TxBuffer() == nil {
			sawRingFull = true
		}
		got += n.Hosts()[2].Receive(frames)
	}, func() bool { return got == 400 })
	if pause == 0 || resume == 0 || firstAfter != resume || !sawRingFull {
		t.Fatalf("pause at %v, resume at %v, first frame after at %v, ring full seen %v", pause, resume, firstAfter, sawRingFull)
	}
}

// TestECNMarksInNetwork: without PFC and with a large buffer, an incast
// builds a queue past Kmax: frames arrive marked CE, with a valid ICRC,
// and the marks counted equal the marked frames received.
func TestECNMarksInNetwork(t *testing.T) {
	sw := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 1 << 20}, ECN: netsw.DefaultECN()}
	var clock fabric.FakeClock
	n, err := fabric.Star(&clock, 5, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 40e9, Delay: time.Microsecond}, Switch: sw, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ss []*sender
	for i := range 4 {
		ss = append(ss, &sender{host: n.Hosts()[i], src: i, dst: 4, sport: uint16(i), size: 1024, left: 300})
	}
	got, ce := 0, 0
	frames := make([][]byte, 64)
	drive(t, &clock, n, func() {
		for _, s := range ss {
			s.poll(t)
		}
		k := n.Hosts()[4].Receive(frames)
		for _, f := range frames[:k] {
			pf, err := bth.ParseFrame(f)
			if err != nil || !pf.VerifyICRC() {
				t.Fatal("bad frame")
			}
			if pf.Header().TOS&3 == netsw.ECNCE {
				ce++
			}
		}
		got += k
	}, func() bool { return got == 1200 })
	tot := n.Totals()
	if ce == 0 || uint64(ce) != tot.ECNMarked || tot.Dropped != 0 {
		t.Fatalf("%d CE frames received, %d marks counted, %d dropped", ce, tot.ECNMarked, tot.Dropped)
	}
	t.Logf("%d of %d frames marked", ce, got)
}

// TestTopologies: sizes, and a frame from every host to every other one
// arrives after exactly the links of a shortest path (rate 0, 1 µs per
// link: same edge 2, same pod 4, across pods 6 in a fat tree).
func TestTopologies(t *testing.T) {
	link := fabric.LinkParams{Delay: time.Microsecond}
	sw := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 1 << 20}}
	for _, c := range []struct {
		name            string
		build           func(fabric.Clock) (*fabric.Network, error)
		hosts, switches int
		links           func(a, b int) int
	}{
		{"star 8", func(c fabric.Clock) (*fabric.Network, error) {
			return fabric.Star(c, 8, fabric.TopologyConfig{Link: link, Switch: sw})
		}, 8, 1, func(a, b int) int { return 2 }},
		{"leaf-spine 4x2x3", func(c fabric.Clock) (*fabric.Network, error) {
			return fabric.LeafSpine(c, 4, 2, 3, fabric.TopologyConfig{Link: link, Switch: sw})
		}, 12, 6, func(a, b int) int {
			if a/3 == b/3 {
				return 2
			}
			return 4
		}},
		{"fat tree k=4", func(c fabric.Clock) (*fabric.Network, error) {
			return fabric.FatTree(c, 4, fabric.TopologyConfig{Link: link, Switch: sw})
		}, 16, 20, fatTreeLinks(4)},
		{"fat tree k=6", func(c fabric.Clock) (*fabric.Network, error) {
			return fabric.FatTree(c, 6, fabric.TopologyConfig{Link: link, Switch: sw})
		}, 54, 45, fatTreeLinks(6)},
	} {
		var clock fabric.FakeClock
		n, err := c.build(&clock)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(n.Hosts()) != c.hosts || len(n.Switches()) != c.switches {
			t.Fatalf("%s: %d hosts, %d switches; want %d, %d", c.name, len(n.Hosts()), len(n.Switches()), c.hosts, c.switches)
		}
		frames := make([][]byte, 4)
		pairs := 0
		for a := range c.hosts {
			for b := range c.hosts {
				if a == b {
					continue
				}
				start := clock.Now()
				h := n.Hosts()[a]
				h.Transmit(len(frameTo(t, h.TxBuffer(), a, b, uint16(a*c.hosts+b), 0, 128)))
				k := 0
				drive(t, &clock, n, func() { k += n.Hosts()[b].Receive(frames) }, func() bool { return k == 1 })
				if got, want := clock.Now()-start, time.Duration(c.links(a, b))*time.Microsecond; got != want {
					t.Fatalf("%s: %d to %d took %v, want %v", c.name, a, b, got, want)
				}
				pairs++
			}
		}
		if tot := n.Totals(); tot.Dropped != 0 || tot.NoRoute != 0 {
			t.Fatalf("%s: %+v", c.name, tot)
		}
		t.Logf("%s: %d pairs, every one delivered", c.name, pairs)
	}
}

func fatTreeLinks(k int) func(a, b int) int {
	h := k / 2
	return func(a, b int) int {
		switch {
		case a/h == b/h: // same edge switch
			return 2
		case a/(h*h) == b/(h*h): // same pod
			return 4
		}
		return 6
	}
}

// TestFatTreeECMP: 256 flows (UDP source ports) from one host to a host
// in another pod of a k=4 fat tree use both aggregation switches of the
// pod and all four core switches, each within a third of even; a flow
// keeps its path.
func TestFatTreeECMP(t *testing.T) {
	var clock fabric.FakeClock
	n, err := fabric.FatTree(&clock, 4, fabric.TopologyConfig{Link: fabric.LinkParams{Delay: time.Microsecond},
		Switch: fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 1 << 20}}, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[uint16]string{}
	var path []byte
	n.Tap(func(e fabric.TapEvent) {
		if s, _ := e.To.Switch(); e.Kind == fabric.TapStart && s != nil {
			path = append(path, byte('a'+s.Index()))
		}
	})
	frames := make([][]byte, 4)
	for round := range 2 {
		for sport := range uint16(256) {
			path = path[:0]
			h := n.Hosts()[0]
			h.Transmit(len(frameTo(t, h.TxBuffer(), 0, 15, 0xc000+sport, 0, 128)))
			k := 0
			drive(t, &clock, n, func() { k += n.Hosts()[15].Receive(frames) }, func() bool { return k == 1 })
			if round == 0 {
				paths[sport] = string(path)
			} else if paths[sport] != string(path) {
				t.Fatalf("flow %d took %s, then %s", sport, paths[sport], path)
			}
		}
	}
	// Switches 16-19 are the core.
	for c := 16; c < 20; c++ {
		st := n.Switches()[c].Queues().Stats(3) // towards pod 3
		if st.Enqueued < 2*256/4*2/3 || st.Enqueued > 2*256/4*4/3 {
			t.Errorf("core %d carried %d of %d frames", c, st.Enqueued, 2*256)
		}
	}
}

// TestNetworkSteadyStateDoesNotAllocate: frames through a two-switch
// path, marked and paused, allocate nothing once the pools have grown.
func TestNetworkSteadyStateDoesNotAllocate(t *testing.T) {
	var clock fabric.FakeClock
	sw := lossless(8_000)
	sw.ECN = netsw.ECN{Enabled: true, KminBytes: 1000, KmaxBytes: 6000, Pmax: 0.2}
	n, err := fabric.LeafSpine(&clock, 2, 1, 2, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 10e9, Delay: time.Microsecond}, Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 1024)
	frames := make([][]byte, 64)
	cycle := func() {
		var sent [2]int
		got := 0
		for sent[0] < 64 || sent[1] < 64 || got < 128 {
			for src := range 2 {
				h := n.Hosts()[src]
				for sent[src] < 64 {
					buf := h.TxBuffer()
					if buf == nil {
						break
					}
					copy(buf, frameTo(t, frame, src, 2+src, uint16(sent[src]), uint32(sent[src]), 1024))
					h.Transmit(1024)
					sent[src]++
				}
			}
			for dst := 2; dst < 4; dst++ {
				got += n.Hosts()[dst].Receive(frames)
			}
			if next, ok := n.NextEvent(); ok && next > clock.Now() {
				clock.Set(next)
			}
		}
	}
	for range 50 {
		cycle()
	}
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Fatalf("%v allocations per 64-frame cycle", allocs)
	}
	if tot := n.Totals(); tot.PausesSent == 0 || tot.ECNMarked == 0 || tot.Dropped != 0 {
		t.Fatalf("the cycle did not pause and mark without loss: %+v", tot)
	}
}

// TestNetworkErrors: links and builds that cannot be.
func TestNetworkErrors(t *testing.T) {
	var clock fabric.FakeClock
	n := fabric.NewNetwork(&clock, 1500, 1)
	h := n.AddHost(fabric.HostConfig{})
	s := n.AddSwitch(2, fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 1000}})
	if err := n.Connect(fabric.HostEnd(h), fabric.SwitchEnd(s, 2), fabric.LinkParams{}); err == nil {
		t.Error("port 2 of a 2-port switch accepted")
	}
	if err := n.Connect(fabric.HostEnd(h), fabric.SwitchEnd(s, 0), fabric.LinkParams{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(fabric.HostEnd(h), fabric.SwitchEnd(s, 1), fabric.LinkParams{}); err == nil {
		t.Error("a second link on a host accepted")
	}
	if err := n.Build(); err == nil {
		t.Error("built with port 1 unconnected")
	}
	if _, err := fabric.FatTree(&clock, 3, fabric.TopologyConfig{}); err == nil {
		t.Error("fat tree of odd k")
	}
	// PFC needs rates to time its pauses.
	if _, err := fabric.Star(&clock, 2, fabric.TopologyConfig{Switch: lossless(1000)}); err == nil {
		t.Error("PFC on rate-0 links accepted")
	}
}

// TestPFCSpreadsThroughSwitches: congestion spreads hop by hop. In a
// leaf-spine of two leaves and two spines (40 Gb/s, 1 µs), hosts 0-3 on
// leaf 0 and host 5 on leaf 1 all send to host 4 on leaf 1. Leaf 1's port
// to host 4 is the bottleneck: leaf 1 pauses the spines and host 5; the
// spines' queues to leaf 1 grow and they pause leaf 0; leaf 0 pauses its
// hosts. No switch port starts a frame while it is paused, nothing is
// dropped, everything arrives.
func TestPFCSpreadsThroughSwitches(t *testing.T) {
	var clock fabric.FakeClock
	sw := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 200_000},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 20_000, XONBytes: 10_000, HeadroomBytes: netsw.HeadroomFor(40e9, time.Microsecond, 1000)}}
	n, err := fabric.LeafSpine(&clock, 2, 2, 4, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 40e9, Delay: time.Microsecond}, Switch: sw, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	type portKey struct{ sw, port int }
	pausedTill := map[portKey]time.Duration{}
	n.Tap(func(e fabric.TapEvent) {
		s, p := e.From.Switch()
		if s == nil {
			return
		}
		k := portKey{s.Index(), p}
		switch e.Kind {
		case fabric.TapPFC:
			pausedTill[k] = e.At + netsw.QuantaTime(e.Quanta, 40e9)
		case fabric.TapStart:
			if e.At < pausedTill[k] {
				t.Errorf("switch %d port %d started a frame at %v, paused until %v", k.sw, k.port, e.At, pausedTill[k])
			}
		}
	})
	var ss []*sender
	for _, src := range []int{0, 1, 2, 3, 5} {
		ss = append(ss, &sender{host: n.Hosts()[src], src: src, dst: 4, sport: uint16(src * 7), size: 1000, left: 2000})
	}
	got := 0
	frames := make([][]byte, 64)
	drive(t, &clock, n, func() {
		for _, s := range ss {
			s.poll(t)
		}
		got += n.Hosts()[4].Receive(frames)
	}, func() bool { return got == 5*2000 })
	if tot := n.Totals(); tot.Dropped != 0 {
		t.Fatalf("%d dropped", tot.Dropped)
	}
	leaf0, leaf1, spine0, spine1 := n.Switches()[0].Queues(), n.Switches()[1].Queues(), n.Switches()[2].Queues(), n.Switches()[3].Queues()
	// Leaf ports 0-3 are hosts, 4 and 5 the spines; spine port l is leaf l.
	for _, c := range []struct {
		what string
		got  uint64
	}{
		{"leaf 1 pauses spine 0", leaf1.Stats(4).PausesSent},
		{"leaf 1 pauses spine 1", leaf1.Stats(5).PausesSent},
		{"leaf 1 pauses host 5", leaf1.Stats(1).PausesSent},
		{"spine 0 is paused towards leaf 1", spine0.Stats(1).PausesReceived},
		{"spine 0 pauses leaf 0", spine0.Stats(0).PausesSent},
		{"spine 1 pauses leaf 0", spine1.Stats(0).PausesSent},
		{"leaf 0 is paused towards spine 0", leaf0.Stats(4).PausesReceived},
		{"leaf 0 pauses host 0", leaf0.Stats(0).PausesSent},
		{"host 0 is paused", n.Hosts()[0].Stats().PausesReceived},
	} {
		if c.got == 0 {
			t.Errorf("%s: never", c.what)
		}
	}
	t.Logf("pauses: leaf 1 -> spines %d+%d, spines -> leaf 0 %d+%d, leaf 0 -> hosts %d; at %v",
		leaf1.Stats(4).PausesSent, leaf1.Stats(5).PausesSent, spine0.Stats(0).PausesSent, spine1.Stats(0).PausesSent,
		leaf0.Stats(0).PausesSent+leaf0.Stats(1).PausesSent+leaf0.Stats(2).PausesSent+leaf0.Stats(3).PausesSent, clock.Now())
}
