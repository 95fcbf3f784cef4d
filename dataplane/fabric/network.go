package fabric

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
)

// A Network is the fabric with switches: N host ports (one per NIC, each
// with the shape of the dataplane's port, as Fabric's A and B) and
// switches, joined by links of a given rate and delay, in the fabric's
// simulated time. Each switch's queueing, ECN marking, PFC and ECMP are
// package netsw's, the code the real-wire switch uses; routing is the
// network's: shortest paths, every equal-cost next hop kept (Build).
//
// # Links
//
// Every link direction has a serializer and a propagation delay. A frame
// is serialized from the moment its sender starts it until its last bit
// left (len*8/RateBps, exact as Fabric's, see the package documentation),
// and arrives whole Delay later; the next frame starts when the previous
// one is done. The sender of a link is a NIC's transmit ring or a switch
// port's egress queue:
//
//   - A NIC's transmit ring (HostConfig.TxRingFrames) holds the frames the
//     engine transmitted and the link has not finished sending. TxBuffer
//     returns nil while it is full: the engine stalls, as on a full TX ring,
//     and tries again when a frame is done. So an engine faster than its
//     link is paced by it.
//   - A switch port sends the head of its netsw egress queue, dequeued
//     when the port's serializer is free.
//
// # PFC
//
// When a switch's netsw asks to pause the partner of an ingress port, a
// pause reaches that link's sender one propagation delay plus the 60-byte
// PFC frame's serialization later (the pause is not queued behind data,
// nor does it take the data's serializer: a MAC sends control frames
// first). The paused sender finishes the frame it is sending and starts
// no other until the pause expires (quanta × 512 bit times at the link's
// rate) or a resume (0 quanta) arrives. A paused NIC keeps taking frames
// from its engine until its transmit ring is full, and then TxBuffer
// returns nil: PFC back-pressures the engine through the ring, as a
// paused NIC's send queues stop. A paused switch port stops dequeuing, so
// its queue grows and, past its own XOFF, pauses its upstream in turn
// (congestion spreading).
//
// # Time
//
// The network keeps its own events (a frame finishes serializing, arrives,
// a pause arrives or expires, a pause is due to be refreshed) in one heap
// ordered by time, ties in the order they were made. It processes every
// event at or before the clock's Now whenever a host port is used
// (Receive, TxBuffer, Transmit) or Advance is called, each at its own
// time, so results do not depend on when the engines look. NextEvent is
// the earliest pending event, for a simulator's clock (dataplane.Group's
// Events); a driver without engines moves the clock to it and calls
// Advance.
//
// Memory: frame buffers of maxFrame bytes come from one pool that grows to
// the high-water mark of frames in the network and is reused; event heap,
// rings and queues grow the same way. A steady flow of frames does not
// allocate.
//
// A Network is not safe for concurrent use (see Fabric).
type Network struct {
	clock    Clock
	maxFrame int
	seed     uint64
	hosts    []*HostPort
	switches []*Switch
	wires    []*wire
	addrs    map[netip.Addr]int32 // host addresses to host index
	built    bool
	tap      func(TapEvent)

	events []event // min-heap on (at, seq)
	seq    uint64

	// The frame pool: by handle, its buffer (cap maxFrame), length and
	// destination host (-1: none).
	bufs [][]byte
	lens []int32
	dst  []int32
	free []int32
}

// LinkParams is one link's rate and delay, the same both ways.
type LinkParams struct {
	RateBps uint64        // serialization rate, bits/s; 0 = infinitely fast
	Delay   time.Duration // one-way propagation delay
}

// HostConfig configures a host port.
type HostConfig struct {
	// Addrs are the host's IP addresses: a frame to one of them is
	// routed to this host.
	Addrs []netip.Addr
	// TxRingFrames bounds the NIC's transmit ring: frames transmitted
	// and not yet sent (0: DefaultTxRingFrames).
	TxRingFrames int
}

// DefaultTxRingFrames is a host's transmit ring with TxRingFrames 0: as
// LossyHop's 64-frame ring, small enough that a paused NIC stalls within
// 64 frames and its frames do not queue in the NIC for long.
const DefaultTxRingFrames = 64

// SwitchConfig is what a switch's netsw.Config holds besides its ports,
// which the network fills in from the links (their rates), and its draws,
// which it seeds from the network's seed and the switch's index.
type SwitchConfig struct {
	Buffer netsw.Buffer
	ECN    netsw.ECN
	PFC    netsw.PFC
}

// NewNetwork returns an empty network carrying frames of up to maxFrame
// bytes, timed by clock, its switches' draws and hashes derived from seed.
// Add hosts and switches, Connect them, then Build.
func NewNetwork(clock Clock, maxFrame int, seed uint64) *Network {
	if clock == nil {
		panic("fabric: nil Clock")
	}
	if maxFrame <= 0 || maxFrame > maxFrameLimit {
		panic(fmt.Sprintf("fabric: maxFrame %d outside [1, %d]", maxFrame, maxFrameLimit))
	}
	return &Network{clock: clock, maxFrame: maxFrame, seed: seed, addrs: map[netip.Addr]int32{}}
}

// AddHost adds a host port.
func (n *Network) AddHost(cfg HostConfig) *HostPort {
	n.mustNotBeBuilt()
	ring := cfg.TxRingFrames
	if ring <= 0 {
		ring = DefaultTxRingFrames
	}
	h := &HostPort{net: n, index: len(n.hosts), ringLimit: ring, txBuf: -1}
	for _, a := range cfg.Addrs {
		if _, dup := n.addrs[a]; dup {
			panic(fmt.Sprintf("fabric: address %v given to two hosts", a))
		}
		n.addrs[a] = int32(h.index)
		h.addrs = append(h.addrs, a)
	}
	n.hosts = append(n.hosts, h)
	return h
}

// AddSwitch adds a switch of ports ports.
func (n *Network) AddSwitch(ports int, cfg SwitchConfig) *Switch {
	n.mustNotBeBuilt()
	if ports <= 0 {
		panic(fmt.Sprintf("fabric: a switch of %d ports", ports))
	}
	s := &Switch{net: n, index: len(n.switches), cfg: cfg, ports: make([]swPort, ports)}
	n.switches = append(n.switches, s)
	return s
}

func (n *Network) mustNotBeBuilt() {
	if n.built {
		panic("fabric: Network changed after Build")
	}
}

// Endpoint is one end of a link: a host, or a switch's port.
type Endpoint struct {
	host *HostPort
	sw   *Switch
	port int
}

// Host returns the endpoint's host, nil for a switch port.
func (e Endpoint) Host() *HostPort { return e.host }

// Switch returns the endpoint's switch and port, nil for a host.
func (e Endpoint) Switch() (*Switch, int) { return e.sw, e.port }

// HostEnd is host h's end of its link.
func HostEnd(h *HostPort) Endpoint { return Endpoint{host: h} }

// SwitchEnd is port of switch s.
func SwitchEnd(s *Switch, port int) Endpoint { return Endpoint{sw: s, port: port} }

// Connect joins a and b with a link of p, both ways. A host has one link;
// a switch port one.
func (n *Network) Connect(a, b Endpoint, p LinkParams) error {
	n.mustNotBeBuilt()
	if p.Delay < 0 || p.RateBps > maxRateBps {
		return fmt.Errorf("fabric: link %+v: negative delay or rate above %g", p, float64(maxRateBps))
	}
	for _, e := range []Endpoint{a, b} {
		switch {
		case e.host != nil && e.host.up != nil:
			return fmt.Errorf("fabric: host %d already has a link", e.host.index)
		case e.sw != nil && (e.port < 0 || e.port >= len(e.sw.ports)):
			return fmt.Errorf("fabric: switch %d has no port %d", e.sw.index, e.port)
		case e.sw != nil && e.sw.ports[e.port].out != nil:
			return fmt.Errorf("fabric: switch %d port %d already has a link", e.sw.index, e.port)
		case e.host == nil && e.sw == nil:
			return errors.New("fabric: zero Endpoint")
		}
	}
	if a == b {
		return errors.New("fabric: a link from an endpoint to itself")
	}
	ab := &wire{index: int32(len(n.wires)), rate: p.RateBps, delay: p.Delay, from: a, to: b}
	ba := &wire{index: int32(len(n.wires) + 1), rate: p.RateBps, delay: p.Delay, from: b, to: a}
	n.wires = append(n.wires, ab, ba)
	for _, w := range []*wire{ab, ba} {
		if h := w.from.host; h != nil {
			h.up = w
		} else {
			w.from.sw.ports[w.from.port].out = w
		}
		if h := w.to.host; h != nil {
			h.down = w
		} else {
			w.to.sw.ports[w.to.port].in = w
		}
	}
	return nil
}

// Build checks that every host and switch port has its link, creates the
// switches' queues and computes the routes: at every switch, for every
// host, the ports on a shortest path to it (all of them: ECMP chooses).
// Hosts do not forward. A host that no switch path reaches gets no route,
// and frames to it are dropped at the first switch (Switch.NoRoute).
func (n *Network) Build() error {
	n.mustNotBeBuilt()
	for _, h := range n.hosts {
		if h.up == nil {
			return fmt.Errorf("fabric: host %d has no link", h.index)
		}
	}
	for _, s := range n.switches {
		cfg := netsw.Config{Ports: make([]netsw.PortConfig, len(s.ports)), Buffer: s.cfg.Buffer, ECN: s.cfg.ECN, PFC: s.cfg.PFC,
			Rand: rand.NewPCG(n.seed, switchSalt+uint64(s.index))}
		for i, p := range s.ports {
			if p.out == nil {
				return fmt.Errorf("fabric: switch %d port %d has no link", s.index, i)
			}
			cfg.Ports[i].RateBps = p.out.rate
		}
		q, err := netsw.New(cfg)
		if err != nil {
			return fmt.Errorf("fabric: switch %d: %w", s.index, err)
		}
		s.q = q
		s.hashSeed = rand.NewPCG(n.seed, hashSalt+uint64(s.index)).Uint64()
	}
	n.route()
	n.built = true
	return nil
}

// The PCG increments of a switch's marking draws and ECMP hash seed.
const (
	switchSalt = 0x3c6ef372fe94f82b
	hashSalt   = 0xa54ff53a5f1d36f1
)

// route fills every switch's routes by a breadth-first search from each
// host: a port is on a shortest path to host d if its neighbour is one hop
// closer to d.
func (n *Network) route() {
	nh := len(n.hosts)
	dist := make([]int, nh+len(n.switches)) // hosts, then switches
	node := func(e Endpoint) int {
		if e.host != nil {
			return e.host.index
		}
		return nh + e.sw.index
	}
	queue := make([]int, 0, len(dist))
	for _, s := range n.switches {
		s.routes = make([][]int, nh)
	}
	for d := range n.hosts {
		for i := range dist {
			dist[i] = -1
		}
		dist[d] = 0
		queue = append(queue[:0], d)
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			var links []*wire
			if v < nh {
				if v != d {
					continue // hosts do not forward
				}
				links = []*wire{n.hosts[v].up}
			} else {
				for _, p := range n.switches[v-nh].ports {
					links = append(links, p.out)
				}
			}
			for _, w := range links {
				if u := node(w.to); dist[u] < 0 {
					dist[u] = dist[v] + 1
					queue = append(queue, u)
				}
			}
		}
		for _, s := range n.switches {
			self := dist[nh+s.index]
			if self < 0 {
				continue
			}
			for i, p := range s.ports {
				if u := node(p.out.to); dist[u] == self-1 && (u >= nh || u == d) {
					s.routes[d] = append(s.routes[d], i)
				}
			}
		}
	}
}

// Hosts returns the host ports, in the order they were added.
func (n *Network) Hosts() []*HostPort { return n.hosts }

// Switches returns the switches, in the order they were added.
func (n *Network) Switches() []*Switch { return n.switches }

// TapKind says what a TapEvent reports.
type TapKind uint8

const (
	TapStart TapKind = iota // a frame's first bit leaves on a link
	TapDrop                 // a switch dropped a frame arrived on a link (no route, or its queue's decision)
	TapPFC                  // a pause (Quanta > 0) or resume reached a link's sender
)

// TapEvent is one thing that happened on the link From->To at At.
type TapEvent struct {
	At       time.Duration
	Kind     TapKind
	From, To Endpoint
	Frame    []byte // TapStart, TapDrop: valid only during the call
	Quanta   uint16 // TapPFC
}

// Tap installs fn as an observer of every frame a link starts, every
// frame a switch drops and every pause a link's sender takes, or removes
// it if fn is nil.
func (n *Network) Tap(fn func(TapEvent)) { n.tap = fn }

// NextEvent returns the time of the earliest pending event, possibly
// already past if no port has been used since (a simulator jumps its
// clock to it), and false when nothing is pending.
func (n *Network) NextEvent() (time.Duration, bool) {
	if len(n.events) == 0 {
		return 0, false
	}
	return n.events[0].at, true
}

// Advance processes every event at or before the clock's Now.
func (n *Network) Advance() { n.advance(n.clock.Now()) }

func (n *Network) advance(now time.Duration) {
	if !n.built {
		panic("fabric: Network used before Build")
	}
	for len(n.events) > 0 && n.events[0].at <= now {
		n.process(n.pop())
	}
}

// NetworkTotals sums the switches' counters.
type NetworkTotals struct {
	Enqueued, Dequeued, Dropped uint64
	ECNMarked                   uint64
	PausesSent, ResumesSent     uint64
	NoRoute                     uint64
}

// Totals returns the switches' counters summed.
func (n *Network) Totals() NetworkTotals {
	var t NetworkTotals
	var sum netsw.PortStats
	for _, s := range n.switches {
		t.NoRoute += s.noRoute
		for i := range s.ports {
			st := s.q.Stats(i)
			sum.Add(&st)
		}
	}
	t.Enqueued, t.Dequeued, t.Dropped, t.ECNMarked = sum.Enqueued, sum.Dequeued, sum.Dropped, sum.ECNMarked
	t.PausesSent, t.ResumesSent = sum.PausesSent, sum.ResumesSent
	return t
}

// Switch is a switch of a Network: netsw's queues behind ports joined to
// links, and the routes.
type Switch struct {
	net      *Network
	index    int
	cfg      SwitchConfig
	ports    []swPort
	q        *netsw.Switch
	routes   [][]int // by destination host: the equal-cost ports
	hashSeed uint64  // ECMP's, this switch's own (no polarization)
	noRoute  uint64
	// inject, if set, decides every arriving frame first (Inject).
	inject   *inject.Set
	injected InjectCounts
	// A refresh event is pending at refreshAt.
	refreshAt  time.Duration
	refreshSet bool
}

type swPort struct {
	out *wire // the link this port sends on
	in  *wire // the link this port receives from
}

// Index returns the switch's index in Network.Switches.
func (s *Switch) Index() int { return s.index }

// Queues returns the switch's queueing state, for its counters
// (netsw.Switch.Stats) and queue lengths. Valid after Build.
func (s *Switch) Queues() *netsw.Switch { return s.q }

// NoRoute counts frames the switch dropped because it has no route to
// their destination.
func (s *Switch) NoRoute() uint64 { return s.noRoute }

// Inject installs set's rules at s, or removes them if set is nil: every
// frame that arrives at s is decided on (inject.Set.Decide, at the
// network's time, with the port it came in on) before it is routed. A
// frame the set drops is dropped as a frame without a route is (the Tap
// sees TapDrop) but counted in Injected, not NoRoute; a delayed one is
// routed and queued Delay later, without being decided again; a
// duplicated one is routed and queued twice, back to back, the copy in
// its own buffer. ecn and corrupt are done to the frame in place. The set
// is s's: not shared with another switch (its counts are this switch's
// arrivals).
func (s *Switch) Inject(set *inject.Set) { s.inject = set }

// InjectCounts counts the actions a switch's rules took, by action.
type InjectCounts = inject.Counts

// Injected returns the counts of the actions s's rules took.
func (s *Switch) Injected() InjectCounts { return s.injected }

// Routes returns the ports on a shortest path from s to host dst.
func (s *Switch) Routes(dst int) []int { return s.routes[dst] }

// HostPort is a NIC's port on a Network. It has the shape of the
// dataplane's port interface (Receive, TxBuffer, Transmit, Flush,
// MaxFrame).
type HostPort struct {
	net       *Network
	index     int
	addrs     []netip.Addr
	up, down  *wire
	ringLimit int
	txq       fifo // the transmit ring: waiting frames and the one on the wire
	rx        fifo // frames arrived and not yet received
	held      []int32
	txBuf     int32 // the buffer TxBuffer lent, -1 if none
	txReady   bool
	stats     HostStats
}

// HostStats counts one host port.
type HostStats struct {
	Transmitted, Received uint64
	// TxRingFull counts TxBuffer calls that found the ring full.
	TxRingFull uint64
	// PausesReceived and ResumesReceived count PFC frames that reached
	// the NIC's link (its transmit side).
	PausesReceived, ResumesReceived uint64
	// PausedTime is how long the link was paused in all: a pause counts
	// to its expiry from when it arrives, up to the resume or the next
	// pause if one comes first.
	PausedTime time.Duration
}

// Index returns the host's index in Network.Hosts.
func (h *HostPort) Index() int { return h.index }

// Addrs returns the host's addresses.
func (h *HostPort) Addrs() []netip.Addr { return h.addrs }

// Stats returns the host's counters.
func (h *HostPort) Stats() HostStats { return h.stats }

// Paused reports whether the host's link is paused at the clock's Now.
func (h *HostPort) Paused() bool {
	h.net.Advance()
	return h.net.clock.Now() < h.up.pausedTill
}

// Receive fills frames[:n] with frames that have arrived, in arrival
// order, and returns n. They stay valid until the next Receive call.
func (h *HostPort) Receive(frames [][]byte) int {
	n := h.net
	for i, f := range h.held {
		n.putFrame(f)
		h.held[i] = 0
	}
	h.held = h.held[:0]
	n.Advance()
	k := 0
	for k < len(frames) && h.rx.len() > 0 {
		f := h.rx.pop()
		frames[k] = n.bufs[f][:n.lens[f]]
		h.held = append(h.held, f)
		k++
	}
	h.stats.Received += uint64(k)
	return k
}

// TxBuffer returns a buffer of MaxFrame bytes for the next frame, or nil
// while the transmit ring is full. Asking again before Transmit returns
// the same buffer.
func (h *HostPort) TxBuffer() []byte {
	n := h.net
	n.Advance()
	if h.txq.len() >= h.ringLimit {
		h.txReady = false
		h.stats.TxRingFull++
		return nil
	}
	if h.txBuf < 0 {
		h.txBuf = n.getFrame()
	}
	h.txReady = true
	return n.bufs[h.txBuf][:n.maxFrame]
}

// Transmit sends the first size bytes of the buffer from the last
// TxBuffer call. It panics if that call did not return a buffer.
func (h *HostPort) Transmit(size int) {
	if !h.txReady {
		panic("fabric: Transmit without a buffer from TxBuffer")
	}
	n := h.net
	if size < 0 || size > n.maxFrame {
		panic(fmt.Sprintf("fabric: Transmit(%d) outside [0, %d]", size, n.maxFrame))
	}
	f := h.txBuf
	h.txBuf, h.txReady = -1, false
	n.lens[f] = int32(size)
	n.dst[f] = n.lookup(n.bufs[f][:size])
	h.txq.push(f)
	h.stats.Transmitted++
	n.tryStart(h.up, n.clock.Now())
}

// Flush does nothing: a frame is on its way from Transmit.
func (h *HostPort) Flush() {}

// MaxFrame returns the largest frame the port carries.
func (h *HostPort) MaxFrame() int { return h.net.maxFrame }

// Pending returns the frames arrived at this host and not yet received.
func (h *HostPort) Pending() int { return h.rx.len() }

// lookup returns the host a frame is addressed to by its IP destination,
// -1 if none.
func (n *Network) lookup(frame []byte) int32 {
	a, ok := ipDst(frame)
	if !ok {
		return -1
	}
	if d, ok := n.addrs[a]; ok {
		return d
	}
	return -1
}

// ipDst returns the IP destination of an Ethernet frame (one 802.1Q tag
// allowed).
func ipDst(frame []byte) (netip.Addr, bool) {
	if len(frame) < 14 {
		return netip.Addr{}, false
	}
	off, et := 14, uint16(frame[12])<<8|uint16(frame[13])
	if et == 0x8100 && len(frame) >= 18 {
		off, et = 18, uint16(frame[16])<<8|uint16(frame[17])
	}
	switch {
	case et == 0x0800 && len(frame) >= off+20:
		return netip.AddrFrom4([4]byte(frame[off+16 : off+20])), true
	case et == 0x86dd && len(frame) >= off+40:
		return netip.AddrFrom16([16]byte(frame[off+24 : off+40])), true
	}
	return netip.Addr{}, false
}

// wire is one direction of a link.
type wire struct {
	index    int32
	rate     uint64
	delay    time.Duration
	from, to Endpoint
	// The serializer is busy (a txDone event is pending) until busyUntil
	// + busyRem/rate ns, 0 <= busyRem < rate, as Fabric's link.depart.
	busy bool
	serializer
	// A kick event (try to send again when a pause expires) is pending.
	kickAt  time.Duration
	kickSet bool
	// pausedTill: a NIC's link is paused until then (a switch port's
	// pause is its netsw's).
	pausedTill time.Duration
}

// serialize starts a frame of size bytes at start, with the serializer
// free, and returns when its last bit has left. Back to back (start is
// the previous frame's end, rounded up) it goes on from the previous
// frame's exact end, so that the long-run rate is exact.
func (w *wire) serialize(start time.Duration, size int) time.Duration {
	if w.rate == 0 {
		return start
	}
	if start > w.freeAt() {
		w.busyUntil, w.busyRem = start, 0
	}
	return w.charge(size, w.rate)
}

// serTime is how long size bytes take on w, rounded up.
func (w *wire) serTime(size int) time.Duration {
	if w.rate == 0 {
		return 0
	}
	bitNanos := uint64(size) * 8 * uint64(time.Second)
	return time.Duration((bitNanos + w.rate - 1) / w.rate)
}

// pausedUntil is when w's sender may start a frame again.
func (w *wire) pausedUntil() time.Duration {
	if w.from.host != nil {
		return w.pausedTill
	}
	return w.from.sw.q.PausedUntil(w.from.port)
}

// Event kinds.
const (
	evTxDone  uint8 = iota // wire's serializer finished its frame
	evArrive               // frame arrived at the wire's far end
	evPFC                  // a PFC frame of quanta reached the wire's sender
	evKick                 // the wire's pause may have expired: try to send
	evRefresh              // switch's pauses may be due again
	evForward              // a frame an injected delay held: route and queue it now
)

type event struct {
	at     time.Duration
	seq    uint64
	kind   uint8
	quanta uint16
	frame  int32
	obj    int32 // the wire's index, or the switch's for evRefresh and evForward
	port   int32 // evForward: the port the frame arrived on
}

func (n *Network) process(e event) {
	switch e.kind {
	case evTxDone:
		w := n.wires[e.obj]
		w.busy = false
		if h := w.from.host; h != nil {
			h.txq.pop() // its ring slot is free once it is on the wire
		}
		n.tryStart(w, e.at)
	case evArrive:
		w := n.wires[e.obj]
		if h := w.to.host; h != nil {
			h.rx.push(e.frame)
			return
		}
		n.arrive(w.to.sw, w.to.port, e.frame, e.at)
	case evPFC:
		w := n.wires[e.obj]
		if h := w.from.host; h != nil {
			if e.at < w.pausedTill { // cut short, or extended, from now
				h.stats.PausedTime -= w.pausedTill - e.at
			}
			if e.quanta == 0 {
				w.pausedTill = e.at
				h.stats.ResumesReceived++
			} else {
				w.pausedTill = e.at
				if w.rate > 0 {
					w.pausedTill = e.at + netsw.QuantaTime(e.quanta, w.rate)
				}
				h.stats.PausesReceived++
				h.stats.PausedTime += w.pausedTill - e.at
			}
		} else {
			w.from.sw.q.PauseReceived(e.at, w.from.port, e.quanta)
		}
		if n.tap != nil {
			n.tap(TapEvent{At: e.at, Kind: TapPFC, From: w.from, To: w.to, Quanta: e.quanta})
		}
		n.tryStart(w, e.at)
	case evKick:
		w := n.wires[e.obj]
		if w.kickSet && w.kickAt == e.at {
			w.kickSet = false
		}
		n.tryStart(w, e.at)
	case evRefresh:
		s := n.switches[e.obj]
		if s.refreshSet && s.refreshAt == e.at {
			s.refreshSet = false
		}
		for {
			a, ok := s.q.Refresh(e.at)
			if !ok {
				break
			}
			n.sendPFC(s, a, e.at)
		}
		n.scheduleRefresh(s)
	case evForward:
		n.forward(n.switches[e.obj], int(e.port), e.frame, e.at)
	}
}

// tryStart starts w's next frame at t if its serializer is free, it is
// not paused and it has one.
func (n *Network) tryStart(w *wire, t time.Duration) {
	if w.busy {
		return
	}
	if until := w.pausedUntil(); t < until {
		if until != math.MaxInt64 && (!w.kickSet || until < w.kickAt) {
			w.kickAt, w.kickSet = until, true
			n.push(event{at: until, kind: evKick, obj: w.index})
		}
		return
	}
	var f int32
	if h := w.from.host; h != nil {
		if h.txq.len() == 0 {
			return
		}
		f = h.txq.front()
	} else {
		s := w.from.sw
		e, a, ok := s.q.Dequeue(t, w.from.port)
		if a.Kind != netsw.PFCNone {
			n.sendPFC(s, a, t)
		}
		if !ok {
			return
		}
		f = int32(e.Handle)
	}
	if n.tap != nil {
		n.tap(TapEvent{At: t, Kind: TapStart, From: w.from, To: w.to, Frame: n.bufs[f][:n.lens[f]]})
	}
	end := w.serialize(t, int(n.lens[f]))
	w.busy = true
	n.push(event{at: end, kind: evTxDone, obj: w.index})
	n.push(event{at: satAdd(end, w.delay), kind: evArrive, frame: f, obj: w.index})
}

// arrive takes frame f, arrived at s on port in at t: decided on by s's
// injection rules if it has any, then forwarded.
func (n *Network) arrive(s *Switch, in int, f int32, t time.Duration) {
	if s.inject == nil {
		n.forward(s, in, f, t)
		return
	}
	d := s.inject.Decide(t, in, n.bufs[f][:n.lens[f]])
	s.injected.Count(d.Action)
	switch d.Action {
	case inject.ActDrop:
		n.drop(s, in, f, t)
		return
	case inject.ActDelay:
		n.push(event{at: satAdd(t, d.Delay), kind: evForward, frame: f, obj: int32(s.index), port: int32(in)})
		return
	case inject.ActDuplicate:
		c := n.getFrame()
		size := n.lens[f]
		copy(n.bufs[c][:size], n.bufs[f][:size])
		n.lens[c], n.dst[c] = size, n.dst[f]
		n.forward(s, in, f, t)
		n.forward(s, in, c, t)
		return
	}
	n.forward(s, in, f, t)
}

// forward takes frame f, arrived at s on port in, at t: routed, queued (or
// dropped) and sent on when its port is free.
func (n *Network) forward(s *Switch, in int, f int32, t time.Duration) {
	d := n.dst[f]
	var ports []int
	if d >= 0 {
		ports = s.routes[d]
	}
	if len(ports) == 0 {
		s.noRoute++
		n.drop(s, in, f, t)
		return
	}
	frame := n.bufs[f][:n.lens[f]]
	out := ports[0]
	if len(ports) > 1 {
		out = netsw.PickECMP(frame, s.hashSeed, ports)
	}
	r := s.q.Enqueue(t, frame, netsw.Handle(f), in, out)
	if r.PFC.Kind != netsw.PFCNone {
		n.sendPFC(s, r.PFC, t)
		n.scheduleRefresh(s)
	}
	if !r.Queued() {
		n.drop(s, in, f, t)
		return
	}
	n.tryStart(s.ports[out].out, t)
}

func (n *Network) drop(s *Switch, in int, f int32, t time.Duration) {
	if n.tap != nil {
		w := s.ports[in].in
		n.tap(TapEvent{At: t, Kind: TapDrop, From: w.from, To: w.to, Frame: n.bufs[f][:n.lens[f]]})
	}
	n.putFrame(f)
}

// sendPFC carries a's pause or resume from s back to the sender of the
// link into a.Port: it arrives a propagation delay and a PFC frame's
// serialization later.
func (n *Network) sendPFC(s *Switch, a netsw.PFCAction, t time.Duration) {
	back := s.ports[a.Port].out
	quanta := a.Quanta
	if a.Kind == netsw.PFCResume {
		quanta = 0
	}
	at := satAdd(t, back.delay+back.serTime(netsw.PFCFrameLen))
	n.push(event{at: at, kind: evPFC, quanta: quanta, obj: s.ports[a.Port].in.index})
}

// scheduleRefresh makes sure an event is pending when s's next pause is
// due again.
func (n *Network) scheduleRefresh(s *Switch) {
	t, ok := s.q.NextRefresh()
	if ok && (!s.refreshSet || t < s.refreshAt) {
		s.refreshAt, s.refreshSet = t, true
		n.push(event{at: t, kind: evRefresh, obj: int32(s.index)})
	}
}

func (n *Network) getFrame() int32 {
	if k := len(n.free); k > 0 {
		f := n.free[k-1]
		n.free = n.free[:k-1]
		return f
	}
	n.bufs = append(n.bufs, make([]byte, n.maxFrame))
	n.lens = append(n.lens, 0)
	n.dst = append(n.dst, -1)
	return int32(len(n.bufs) - 1)
}

func (n *Network) putFrame(f int32) { n.free = append(n.free, f) }

// push adds e to the heap, numbered after every event before it.
func (n *Network) push(e event) {
	n.seq++
	e.seq = n.seq
	n.events = append(n.events, e)
	siftUp(n.events)
}

func (n *Network) pop() event {
	q, e := popMin(n.events)
	n.events = q
	return e
}

func (a *event) before(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// fifo is a growable ring of frame handles.
type fifo struct {
	buf     []int32
	head, n int
}

func (q *fifo) len() int     { return q.n }
func (q *fifo) front() int32 { return q.buf[q.head] }
func (q *fifo) push(f int32) {
	if q.n == len(q.buf) {
		grown := make([]int32, max(16, 2*len(q.buf)))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = f
	q.n++
}

func (q *fifo) pop() int32 {
	f := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return f
}
