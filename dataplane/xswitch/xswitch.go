// Package xswitch is the forwarding core of softnic's real-wire switch
// (`softnic switch`): N ports that move Ethernet frames (AF_XDP sockets in
// the daemon, in-memory ports in the tests), an IP router in front of
// package netsw's queues, and a pacer per port.
//
// Each received frame is read once, in a fixed order, and every frame that
// is not forwarded is counted under exactly one reason: an 802.1Qbb PFC
// frame pauses or resumes the egress queue of the port it came in on
// (netsw.PauseReceived) and goes no further; an IPv4 or IPv6 frame is
// copied into the switch's own frame pool, offered to the event injector
// (package inject, if any), routed by longest prefix match, given the
// egress port's MAC as its source and the next hop's as its destination,
// its TTL or hop limit decremented (the IPv4 header checksum updated
// incrementally, RFC 1624 eqn. 3) and queued with netsw.Enqueue, which may
// mark it CE or drop it, and may ask for a pause of the ingress port's
// link partner. The RoCEv2 ICRC stays valid: it masks the TTL, hop limit,
// ECN bits and the IPv4 checksum, and does not cover the Ethernet header
// (IBA Annex A17.3.3).
//
// Each port has a serializer: when it is free and the port's queue is
// neither empty nor paused, the head frame is dequeued, copied into the
// port's transmit buffer and the serializer is busy for the frame's wire
// time at the port's rate, preamble, FCS, minimum-frame padding and
// inter-frame gap included (dataplane.WireBytes), kept exact to a fraction
// of a nanosecond so that a long run is exactly at the rate. Rate 0 is
// unpaced: the port's transmit ring is the only limit.
//
// The core reads no clock and never blocks: Poll(now) does what is due at
// now and returns when it next needs to run, which the caller turns into
// its poll timeout (as the engine's NextDeadline). It does not allocate
// per frame once its pools have grown to their high-water marks.
package xswitch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
)

// Never is Poll's answer when nothing is due until a frame arrives.
const Never = time.Duration(math.MaxInt64)

// RxBatch is how many frames one Poll takes from each port at most.
const RxBatch = 64

// txBlockedRetry is when Poll asks to run again while a port's transmit
// ring is full: the ring drains as the kernel sends, and nothing wakes the
// loop for it.
const txBlockedRetry = 20 * time.Microsecond

// DefaultPauseRate is the rate that times the pauses of an unpaced port
// (quanta of 512 bit times need a rate): 10 Gb/s, a common data-centre NIC.
const DefaultPauseRate = 10_000_000_000

// DefaultPriority is the PFC priority the switch sends and honours: 3,
// RoCE's customary lossless class.
const DefaultPriority = 3

// PortConfig is one port of the switch.
type PortConfig struct {
	Port dataplane.Port
	// MAC is the port's own address: the source of what it sends.
	MAC [6]byte
	// RateBps paces the port's transmissions, in bits on the wire per
	// second (0: unpaced). It also times the pauses the port receives.
	RateBps uint64
}

// Route sends the destinations in Prefix out of Port.
type Route struct {
	Prefix netip.Prefix
	Port   int
	// Via is the next hop's address; invalid: the destination is on the
	// port's link (a connected route) and is its own next hop.
	Via netip.Addr
	// MAC, if HasMAC, is the next hop's address, fixed; otherwise it is
	// looked up with Config.Neighbour for each frame.
	MAC    [6]byte
	HasMAC bool
}

// NeighbourFunc returns the MAC of addr on port's link, if known. It is
// called for every forwarded frame whose route has no fixed MAC, on the
// poll loop: it must not block and should not allocate. A miss drops the
// frame (no_neighbour); the function may start resolving addr meanwhile.
type NeighbourFunc func(port int, addr netip.Addr) ([6]byte, bool)

// Config configures a Switch.
type Config struct {
	Ports  []PortConfig
	Routes []Route
	// Queues is the queueing configuration; its Ports are filled in from
	// Ports (RateBps, or PauseRateBps for an unpaced port).
	Queues netsw.Config
	// PauseRateBps times the pauses an unpaced port receives (0:
	// DefaultPauseRate).
	PauseRateBps uint64
	// Priority is the PFC priority sent and honoured, 0-7 (softnic
	// switch's default is DefaultPriority). The switch has one class:
	// every frame it forwards is in it, whatever its DSCP.
	Priority int
	// Neighbour resolves the next hops of routes without a fixed MAC.
	Neighbour NeighbourFunc
	// Inject, if set, applies its event-injection rules (package inject)
	// to every IP frame as it arrived, before routing: it may change the
	// frame in place (ecn, corrupt) or have the switch drop, delay or
	// duplicate it. It is the switch's while it runs (Poll calls Decide);
	// read its Events and Trace once the loop has stopped.
	Inject *inject.Set
	// Capture, if set, returns the current capture tap (nil: none); it is
	// read once per Poll and sees every received frame as it arrived.
	Capture func() dataplane.CaptureFunc
	// OccupancyAfter, if positive, empties the queues' occupancy
	// histograms (netsw.ResetOccupancy) once, this long after the first
	// frame was queued: the queue_p<q>_bytes counters then describe the
	// queues after the flows have converged, not their start.
	OccupancyAfter time.Duration
}

// Switch forwards frames between its ports. Poll and the other frame-path
// methods belong to one goroutine; Snapshot is safe from any.
type Switch struct {
	mu       sync.Mutex // held by Poll; Snapshot takes it
	ports    []swPort
	routes   []Route // longest prefix first
	q        *netsw.Switch
	neigh    NeighbourFunc
	inj      *inject.Set
	capture  func() dataplane.CaptureFunc
	priority int
	maxFrame int
	rx       [][][]byte // per port: its last Receive's frames
	rxN      []int
	// The frame pool: bufs[h][:lens[h]] is frame h; free is its free list.
	bufs  [][]byte
	lens  []int32
	free  []int32
	delay []delayed // frames an injection rule holds, by time
	txAny []bool    // ports that transmitted this Poll: flushed at its end
	// Config.OccupancyAfter: the reset is due at occAt once the first
	// frame was queued (occArmed); occDone once it happened.
	occAfter          time.Duration
	occAt             time.Duration
	occArmed, occDone bool
	rxFirst           int // the port Poll reads first
}

type swPort struct {
	PortConfig
	ser serializer
	// pending is a frame dequeued but not yet sent (its transmit ring
	// was full), -1 if none.
	pending int32
	// ctl is a PFC frame waiting for room in the transmit ring.
	ctl       bool
	ctlQuanta uint16
	// backlog: a frame was waiting when the line last became busy, so
	// the next one starts at the line's exact end, not at the (late)
	// time the loop got round to it.
	backlog bool
	catchUp time.Duration // see minCatchUp
	c       portCounters
}

// delayed is a frame an injection rule holds until at.
type delayed struct {
	at      time.Duration
	h       int32
	in, out int32
}

// New returns a switch, or an error naming what is wrong with cfg.
func New(cfg Config) (*Switch, error) {
	if len(cfg.Ports) < 2 {
		return nil, errors.New("xswitch: need at least 2 ports")
	}
	pauseRate := cfg.PauseRateBps
	if pauseRate == 0 {
		pauseRate = DefaultPauseRate
	}
	qc := cfg.Queues
	qc.Ports = make([]netsw.PortConfig, len(cfg.Ports))
	s := &Switch{ports: make([]swPort, len(cfg.Ports)), neigh: cfg.Neighbour, inj: cfg.Inject,
		capture: cfg.Capture, priority: cfg.Priority, txAny: make([]bool, len(cfg.Ports)), occAfter: cfg.OccupancyAfter}
	if s.priority < 0 || s.priority > 7 {
		return nil, fmt.Errorf("xswitch: PFC priority %d outside 0-7", s.priority)
	}
	if s.inj != nil {
		s.inj.Prepare() // now, not in the first packet's Poll
	}
	for i, pc := range cfg.Ports {
		if pc.Port == nil {
			return nil, fmt.Errorf("xswitch: port %d has no Port", i)
		}
		qc.Ports[i].RateBps = pc.RateBps
		if pc.RateBps == 0 {
			qc.Ports[i].RateBps = pauseRate
		}
		s.ports[i] = swPort{PortConfig: pc, pending: -1, catchUp: catchUp(pc.RateBps)}
		s.maxFrame = max(s.maxFrame, pc.Port.MaxFrame())
	}
	q, err := netsw.New(qc)
	if err != nil {
		return nil, fmt.Errorf("xswitch: %w", err)
	}
	s.q = q
	for _, r := range cfg.Routes {
		if !r.Prefix.IsValid() || r.Port < 0 || r.Port >= len(s.ports) {
			return nil, fmt.Errorf("xswitch: route %v via port %d: no such prefix or port", r.Prefix, r.Port)
		}
		if !r.HasMAC && s.neigh == nil {
			return nil, fmt.Errorf("xswitch: route %v has no next-hop MAC and there is no neighbour table", r.Prefix)
		}
		r.Prefix = r.Prefix.Masked()
		s.routes = append(s.routes, r)
	}
	// Longest prefix first: the first match is the longest (a stable
	// insertion sort keeps the configured order among equals).
	for i := 1; i < len(s.routes); i++ {
		for j := i; j > 0 && s.routes[j].Prefix.Bits() > s.routes[j-1].Prefix.Bits(); j-- {
			s.routes[j], s.routes[j-1] = s.routes[j-1], s.routes[j]
		}
	}
	s.rx, s.rxN = make([][][]byte, len(s.ports)), make([]int, len(s.ports))
	for i := range s.rx {
		s.rx[i] = make([][]byte, RxBatch)
	}
	return s, nil
}

// Queues is the switch's queueing state (for its counters and tests); it
// belongs to the poll loop's goroutine.
func (s *Switch) Queues() *netsw.Switch { return s.q }

// Poll receives what every port has (up to RxBatch frames each, taken in
// turn one frame of each port at a time), carries
// out what is due at now (delayed frames, pause refreshes, transmissions)
// and returns when it next needs to run: at or before now if there is
// more to do at once, Never if nothing is due until a frame arrives.
func (s *Switch) Poll(now time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := Never
	if s.occArmed && !s.occDone && now >= s.occAt {
		// Before this Poll's arrivals, which count after the reset.
		s.q.ResetOccupancy()
		s.occDone = true
	}
	var tap dataplane.CaptureFunc
	if s.capture != nil {
		tap = s.capture()
	}
	// Every port's batch is received first, then the frames are taken
	// one port at a time in turn (the k-th of each port, then the
	// k+1-th), from a port that turns every Poll: as frames that came in
	// on several ports at once interleave in a switch, rather than one
	// port's batch always finding the shorter queue (fewer ECN marks,
	// fewer tail drops) than the next port's.
	more := 0
	for in := range s.ports {
		s.rxN[in] = s.ports[in].Port.Receive(s.rx[in])
		more = max(more, s.rxN[in])
		if s.rxN[in] == RxBatch {
			next = now // more may be waiting
		}
	}
	s.rxFirst = (s.rxFirst + 1) % len(s.ports)
	for k := range more {
		for j := range s.ports {
			in := (s.rxFirst + j) % len(s.ports)
			if k >= s.rxN[in] {
				continue
			}
			f := s.rx[in][k]
			if tap != nil {
				tap(dataplane.CaptureRX, now, f)
			}
			s.receive(now, in, f)
		}
	}
	if !s.occArmed && s.occAfter > 0 && s.q.UsedBytes() > 0 {
		s.occAt, s.occArmed = now+s.occAfter, true
	}
	for len(s.delay) > 0 && s.delay[0].at <= now {
		d := s.delay[0]
		copy(s.delay, s.delay[1:])
		s.delay = s.delay[:len(s.delay)-1]
		s.enqueue(now, d.h, int(d.in), int(d.out))
	}
	if len(s.delay) > 0 {
		next = min(next, s.delay[0].at)
	}
	if t, ok := s.q.NextRefresh(); ok && t <= now {
		for {
			a, ok := s.q.Refresh(now)
			if !ok {
				break
			}
			s.sendPFC(now, a)
		}
	}
	if t, ok := s.q.NextRefresh(); ok {
		next = min(next, t)
	}
	for o := range s.ports {
		next = min(next, s.transmit(now, o))
	}
	for o, sent := range s.txAny {
		if sent {
			s.ports[o].Port.Flush()
			s.txAny[o] = false
		}
	}
	return next
}

// Offsets in an untagged Ethernet II frame.
const (
	ethHeaderLen  = 14
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	ipv4MinHeader = 20
	ipv6Header    = 40
	ipv4TTL       = ethHeaderLen + 8
	ipv4Checksum  = ethHeaderLen + 10
	ipv4Dst       = ethHeaderLen + 16
	ipv6HopLimit  = ethHeaderLen + 7
	ipv6Dst       = ethHeaderLen + 24
)

// receive takes one frame that came in on port in, in the fixed order of
// the package documentation.
func (s *Switch) receive(now time.Duration, in int, f []byte) {
	p := &s.ports[in]
	p.c.rxFrames++
	p.c.rxBytes += uint64(len(f))
	if len(f) < ethHeaderLen {
		p.c.malformed++
		return
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case netsw.EtherTypeMACControl:
		s.receivePause(now, in, f)
		return
	case etherTypeIPv4:
		if len(f) < ethHeaderLen+ipv4MinHeader || f[ethHeaderLen]>>4 != 4 || f[ethHeaderLen]&0x0f < 5 {
			p.c.malformed++
			return
		}
	case etherTypeIPv6:
		if len(f) < ethHeaderLen+ipv6Header || f[ethHeaderLen]>>4 != 6 {
			p.c.malformed++
			return
		}
	default:
		// VLAN-tagged and other frames: the XDP program steers none
		// (it passes them to the kernel), so one here is unexpected.
		p.c.notIP++
		return
	}
	if len(f) > s.maxFrame {
		p.c.malformed++
		return
	}
	h := s.getFrame()
	buf := s.bufs[h][:len(f)]
	copy(buf, f)
	s.lens[h] = int32(len(f))
	dup := false
	var hold time.Duration
	if s.inj != nil {
		d := s.inj.Decide(now, in, buf)
		p.c.inj.Count(d.Action)
		switch d.Action {
		case inject.ActDrop:
			s.putFrame(h)
			return
		case inject.ActDelay:
			hold = max(d.Delay, 0)
		case inject.ActDuplicate:
			dup = true
		}
	}
	out, ok := s.forward(in, buf)
	if !ok {
		s.putFrame(h)
		return
	}
	if hold > 0 {
		s.hold(now+hold, h, in, out)
		return
	}
	if dup {
		h2 := s.getFrame()
		copy(s.bufs[h2], buf)
		s.lens[h2] = s.lens[h]
		s.enqueue(now, h, in, out)
		s.enqueue(now, h2, in, out)
		return
	}
	s.enqueue(now, h, in, out)
}

// forward routes the IP frame f (which came in on port in), rewrites its
// MACs and TTL or hop limit, and returns its egress port; false: dropped
// and counted.
func (s *Switch) forward(in int, f []byte) (int, bool) {
	p := &s.ports[in]
	v6 := binary.BigEndian.Uint16(f[12:]) == etherTypeIPv6
	var dst netip.Addr
	if v6 {
		dst = netip.AddrFrom16([16]byte(f[ipv6Dst : ipv6Dst+16]))
	} else {
		dst = netip.AddrFrom4([4]byte(f[ipv4Dst : ipv4Dst+4]))
	}
	r := s.lookup(dst)
	if r == nil {
		p.c.noRoute++
		return 0, false
	}
	// A router discards a packet whose TTL would reach 0 (RFC 1812
	// 5.3.1; RFC 8200 for the hop limit). It would also send ICMP Time
	// Exceeded; this switch does not (the kernel does for what it
	// forwards, and RoCE has no use for it).
	ttlOff := ipv4TTL
	if v6 {
		ttlOff = ipv6HopLimit
	}
	if f[ttlOff] <= 1 {
		p.c.ttlExpired++
		return 0, false
	}
	if len(f) > s.ports[r.Port].Port.MaxFrame() {
		// RoCEv2 sets DF; a router would answer ICMP Fragmentation
		// Needed, this switch only counts it.
		p.c.tooBig++
		return 0, false
	}
	mac := r.MAC
	if !r.HasMAC {
		hop := r.Via
		if !hop.IsValid() {
			hop = dst
		}
		var ok bool
		if mac, ok = s.neigh(r.Port, hop); !ok {
			p.c.noNeighbour++
			return 0, false
		}
	}
	copy(f[0:6], mac[:])
	copy(f[6:12], s.ports[r.Port].MAC[:])
	if v6 {
		f[ttlOff]--
	} else {
		// The TTL is the high byte of header word 4 (TTL, protocol).
		old := binary.BigEndian.Uint16(f[ttlOff:])
		f[ttlOff]--
		sum := binary.BigEndian.Uint16(f[ipv4Checksum:])
		binary.BigEndian.PutUint16(f[ipv4Checksum:], netsw.ChecksumUpdate(sum, old, binary.BigEndian.Uint16(f[ttlOff:])))
	}
	return r.Port, true
}

// lookup is the longest prefix match of dst (routes are longest first).
func (s *Switch) lookup(dst netip.Addr) *Route {
	for i := range s.routes {
		if s.routes[i].Prefix.Contains(dst) {
			return &s.routes[i]
		}
	}
	return nil
}

// enqueue offers frame h to out's queue; a drop frees it.
func (s *Switch) enqueue(now time.Duration, h int32, in, out int) {
	r := s.q.Enqueue(now, s.bufs[h][:s.lens[h]], netsw.Handle(h), in, out)
	if r.PFC.Kind != netsw.PFCNone {
		s.sendPFC(now, r.PFC)
	}
	if !r.Queued() {
		s.putFrame(h)
	}
}

// hold keeps frame h, already routed to out, until at (an injected delay).
func (s *Switch) hold(at time.Duration, h int32, in, out int) {
	s.delay = append(s.delay, delayed{at: at, h: h, in: int32(in), out: int32(out)})
	for j := len(s.delay) - 1; j > 0 && s.delay[j].at < s.delay[j-1].at; j-- {
		s.delay[j], s.delay[j-1] = s.delay[j-1], s.delay[j]
	}
}

// receivePause applies a PFC frame that came in on port in to that port's
// egress queue, if it names the switch's priority. An 802.3x PAUSE or
// another MAC Control opcode is counted and ignored.
func (s *Switch) receivePause(now time.Duration, in int, f []byte) {
	p := &s.ports[in]
	pf, err := netsw.ParsePFC(f)
	if err != nil {
		p.c.macControlOther++
		return
	}
	if pf.Enable&(1<<s.priority) == 0 {
		p.c.pfcOtherPriority++
		return
	}
	s.q.PauseReceived(now, in, pf.Quanta[s.priority])
}

// sendPFC carries out a: a PFC frame out of a.Port to its link partner,
// ahead of the port's data (a MAC sends control frames first). If the
// transmit ring is full it waits there, the latest one winning.
func (s *Switch) sendPFC(now time.Duration, a netsw.PFCAction) {
	p := &s.ports[a.Port]
	p.ctl = true
	p.ctlQuanta = a.Quanta
	if a.Kind == netsw.PFCResume {
		p.ctlQuanta = 0
	}
	s.flushControl(now, a.Port)
}

// flushControl sends port o's waiting PFC frame if its ring has room.
func (s *Switch) flushControl(now time.Duration, o int) bool {
	p := &s.ports[o]
	if !p.ctl {
		return true
	}
	buf := p.Port.TxBuffer()
	if buf == nil {
		p.c.txRingFull++
		return false
	}
	pf := netsw.PausePriority(p.MAC, s.priority, p.ctlQuanta)
	n := pf.Encode(buf)
	p.Port.Transmit(n)
	s.txAny[o] = true
	p.ctl = false
	p.c.pfcTxFrames++
	p.c.txFrames++
	p.c.txBytes += uint64(n)
	if p.RateBps > 0 {
		p.ser.charge(now, dataplane.WireBytes(n), p.RateBps)
	}
	return true
}

// A poll loop that woke late sends what a backlogged line would have sent
// meanwhile back to back, so that the rate holds; catchUp bounds how far
// in the past its next frame may start, and beyond it the time is lost
// (as a real line's would be while it had nothing). The bound is the
// longer of minCatchUp and catchUpFrames full frames at the port's rate:
// a burst of at most 64 frames into the next hop's receive ring, and on a
// slow port (200 Mbit/s: 3.9 ms) a loop that a busy 2-core host
// descheduled for milliseconds does not lose the line's time.
const (
	minCatchUp    = 50 * time.Microsecond
	catchUpFrames = 64
)

// catchUp is the bound for a port of rateBps (see minCatchUp).
func catchUp(rateBps uint64) time.Duration {
	if rateBps == 0 {
		return minCatchUp
	}
	frames := time.Duration(uint64(catchUpFrames*dataplane.WireBytes(1514)) * 8 * uint64(time.Second) / rateBps)
	return max(minCatchUp, frames)
}

// transmit sends what port o may send at now and returns when it next
// needs a Poll for transmission (Never: when a frame is queued for it).
func (s *Switch) transmit(now time.Duration, o int) time.Duration {
	p := &s.ports[o]
	if !s.flushControl(now, o) {
		return now + txBlockedRetry
	}
	for {
		if p.RateBps > 0 {
			if free := p.ser.freeAt(); free > now {
				if p.pending >= 0 || s.q.QueueLen(o) > 0 {
					p.backlog = true
					return free
				}
				p.backlog = false
				return Never
			}
		}
		h := p.pending
		if h < 0 {
			if s.q.QueueLen(o) == 0 {
				return Never
			}
			e, a, ok := s.q.Dequeue(now, o)
			if a.Kind != netsw.PFCNone {
				s.sendPFC(now, a)
			}
			if !ok {
				p.backlog = false
				// Paused: a pause of 0xffff quanta at 10 Gb/s is
				// 3.4 ms; Poll again when it ends.
				if t := s.q.PausedUntil(o); t > now {
					return t
				}
				return Never
			}
			h = int32(e.Handle)
		}
		buf := p.Port.TxBuffer()
		if buf == nil {
			p.pending = h
			p.c.txRingFull++
			return now + txBlockedRetry
		}
		p.pending = -1
		n := int(s.lens[h])
		copy(buf, s.bufs[h][:n])
		p.Port.Transmit(n)
		s.txAny[o] = true
		s.putFrame(h)
		p.c.txFrames++
		p.c.txBytes += uint64(n)
		if p.RateBps > 0 {
			start := now
			if p.backlog {
				start = max(p.ser.freeAt(), now-p.catchUp)
			}
			p.ser.charge(start, dataplane.WireBytes(n), p.RateBps)
		}
	}
}

func (s *Switch) getFrame() int32 {
	if k := len(s.free); k > 0 {
		h := s.free[k-1]
		s.free = s.free[:k-1]
		return h
	}
	s.bufs = append(s.bufs, make([]byte, s.maxFrame))
	s.lens = append(s.lens, 0)
	return int32(len(s.bufs) - 1)
}

func (s *Switch) putFrame(h int32) { s.free = append(s.free, h) }

// serializer is a port's line: busy until busyUntil + busyRem/rate ns
// (0 <= busyRem < rate), as the fabric's serializer, so that a run of
// frames takes exactly their bits' time however the nanoseconds round.
type serializer struct {
	busyUntil time.Duration
	busyRem   uint64
}

// charge starts size bytes at start (or when the line is free, if later)
// at rate bit/s.
func (l *serializer) charge(start time.Duration, size int, rate uint64) {
	if start > l.freeAt() {
		l.busyUntil, l.busyRem = start, 0
	}
	bitNanos := uint64(size) * 8 * uint64(time.Second)
	l.busyUntil += time.Duration(bitNanos / rate)
	l.busyRem += bitNanos % rate
	if l.busyRem >= rate {
		l.busyUntil++
		l.busyRem -= rate
	}
}

// freeAt is when the line is free, rounded up to the nanosecond.
func (l *serializer) freeAt() time.Duration {
	if l.busyRem > 0 {
		return l.busyUntil + 1
	}
	return l.busyUntil
}
