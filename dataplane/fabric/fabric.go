// Package fabric is the in-memory wire between softnic engines: a pair of
// seeded, deterministic, lossy links used by protocol tests, simulations and
// the embedded (unprivileged) mode (Fabric), and networks of N NICs' ports
// joined by switches with queues, ECN marking and PFC (Network, built by
// Star, LeafSpine and FatTree; network.go).
//
// Fabric, the two-port wire, is the switch-less special case, and its
// back-pressure is an ideal lossless wire: when a direction holds
// QueueFrames frames, the sender's TxBuffer returns nil until the receiver
// takes one, so a frame is never lost to congestion, never waits in a
// queue that other traffic shares, is never ECN-marked and nothing is
// ever paused. That is no switch a RoCE network has; it is what the
// protocol tests and the loss sweeps were built on, and it stays as it
// is. A Network's NIC links back-pressure the same way through their
// transmit rings, but a switch's queues tail-drop, mark and pause.
//
// # Mechanism
//
// A Fabric joins port A and port B with one link per direction. Each link
// models a sender's serializer followed by a network path:
//
//   - Serialization: frames leave one after another at RateBps. A frame's
//     departure (its last bit on the wire) is max(now, when the previous
//     frame finished) + len*8/RateBps. The busy time is kept in exact
//     integer arithmetic, as nanoseconds plus a remainder in units of
//     1/RateBps ns (the rate is rounded to a whole bit/s), so the long-run
//     rate is exact rather than drifting by a rounding error per frame; a
//     departure is that time rounded up, so no frame arrives before its
//     last bit was sent.
//   - Path: the frame is then dropped (Drop hook, then probability Loss),
//     or delivered at departure + Delay + a uniform jitter in [0, Jitter),
//     plus ReorderDelay with probability Reorder. With probability Duplicate
//     a copy is also delivered at departure + Delay + its own jitter. Dropped
//     and duplicated frames still used the serializer: loss and duplication
//     happen downstream of the sender, as in a switch.
//   - Netem: instead of Loss, Duplicate, Reorder, ReorderDelay and Jitter, a
//     link may take an impair.Spec in netem's words (LinkConfig.Netem, e.g.
//     impair.Parse("loss gemodel 1% 25% delay 10us 2us reorder 2%")): then
//     the frame is delivered at departure + Delay + the Spec's delay, and
//     may also be corrupted (one bit flipped in the queued frame). Its
//     limit, if any, is the link's QueueFrames when that is 0 (back-pressure
//     here, where netem tail-drops); its seed is not used: the fabric's seed
//     decides.
//
// Every per-frame decision above, legacy fields or Netem, is made by the
// impair package's Stage, the one the daemon's --netem uses on receive, so
// an embedded run and a run between two hosts mean the same by "reorder
// 2%". The legacy fields compile to an impair.Model with no delay base and
// a span of Jitter on top of Delay.
//
// Frames in flight wait in a min-heap per direction ordered by (delivery
// time, transmit order), so Receive hands them out in delivery order, ties in
// transmit order, and FIFO order whenever there is no jitter or reordering.
//
// Randomness: each direction has its own PCG stream (math/rand/v2) derived
// from the seed, and every transmitted frame consumes the same five draws
// (loss, duplicate, reorder, jitter, copy jitter) whatever the configuration.
// So a seed reproduces a run exactly, the loss pattern of data frames does
// not change when ACK traffic in the other direction changes, and turning on
// jitter does not change which frames are lost. Gilbert-Elliott loss, netem
// reordering and corruption draw from a second stream per direction, only
// when used (impair's package documentation), so they do not disturb the
// five.
//
// Memory is bounded: a direction holds at most QueueFrames frames, counted
// from Transmit until the receiver takes them with Receive, duplicates
// included (a copy that finds the queue full is not made, as a switch would
// drop it). TxBuffer returns nil while the queue is full: back-pressure, as
// from a full TX ring, not loss (the ideal lossless wire above). Buffers of maxFrame bytes come from a free
// list per direction that grows on first use up to the high-water mark
// (about twice QueueFrames: the queue plus the frames the receiver holds) and
// is reused from then on, so a steady transmit/receive cycle does not
// allocate.
//
// A Fabric and its Ports are not safe for concurrent use: they belong to the
// single goroutine that runs the simulation or the embedded engines' poll
// loop, which is why nothing here locks.
package fabric

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/softnic/softnic/dataplane/impair"
)

// Clock tells the fabric the current time: monotonic nanoseconds since the
// engine's epoch. The fabric never reads the wall clock itself.
type Clock interface{ Now() time.Duration }

// FakeClock is a Clock that moves only when told to, so loss and timeout
// tests are exact and fast. The zero value reads 0.
type FakeClock struct{ now time.Duration }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Duration { return c.now }

// Set moves the clock to t. It panics if t is earlier than Now: the clock is
// monotonic, and a test that moves it backwards has a bug.
func (c *FakeClock) Set(t time.Duration) {
	if t < c.now {
		panic(fmt.Sprintf("fabric: FakeClock.Set(%v) before Now %v", t, c.now))
	}
	c.now = t
}

// Advance moves the clock forward by d, which must not be negative.
func (c *FakeClock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("fabric: FakeClock.Advance(%v) is negative", d))
	}
	c.now += d
}

// LinkConfig describes one direction of the fabric.
type LinkConfig struct {
	Loss         float64       // probability a frame is dropped
	Duplicate    float64       // probability a frame is delivered twice (the copy gets its own jitter)
	Reorder      float64       // probability a frame is held back an extra ReorderDelay
	ReorderDelay time.Duration // extra delay of a reordered frame (not applied to its copy)
	Delay        time.Duration // one-way propagation delay
	Jitter       time.Duration // uniform extra delay in [0, Jitter)
	RateBps      float64       // serialization rate, bits/s, rounded to a whole bit/s; 0 = infinitely fast
	// QueueFrames bounds the frames in flight or queued in this direction,
	// duplicates included; 0 means DefaultQueueFrames. TxBuffer returns nil
	// when it is reached (a full TX ring: back-pressure, not loss).
	QueueFrames int
	// Drop is an optional deterministic drop hook for tests: it is called
	// on every transmitted frame before random loss, and true drops it. The
	// frame is only valid during the call.
	Drop func(frame []byte) bool
	// Netem, if it impairs anything (impair.Spec.Active), replaces Loss,
	// Duplicate, Reorder, ReorderDelay and Jitter, which must then be 0:
	// see the package documentation.
	Netem impair.Spec
}

// DefaultQueueFrames is the queue bound of a LinkConfig with QueueFrames 0.
const DefaultQueueFrames = 4096

const (
	// maxRateBps (1 Pbit/s) and maxFrameLimit keep len*8*1e9 and the rate in
	// uint64 for the serializer's exact arithmetic.
	maxRateBps    = 1e15
	maxFrameLimit = 1 << 24
)

func (c *LinkConfig) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", c.Loss}, {"Duplicate", c.Duplicate}, {"Reorder", c.Reorder}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("%s %v is not a probability", p.name, p.v)
		}
	}
	if c.ReorderDelay < 0 || c.Delay < 0 || c.Jitter < 0 {
		return fmt.Errorf("negative delay (Delay %v, Jitter %v, ReorderDelay %v)", c.Delay, c.Jitter, c.ReorderDelay)
	}
	// The serializer works in whole bits per second (see depart); NaN
	// compares false and is caught here too.
	if !(c.RateBps == 0 || (c.RateBps >= 1 && c.RateBps <= maxRateBps)) {
		return fmt.Errorf("RateBps %v is neither 0 nor in [1, %g]", c.RateBps, float64(maxRateBps))
	}
	if c.QueueFrames < 0 {
		return fmt.Errorf("negative QueueFrames %d", c.QueueFrames)
	}
	if err := c.Netem.Validate(); err != nil {
		return err
	}
	if c.Netem.Active() && (c.Loss != 0 || c.Duplicate != 0 || c.Reorder != 0 || c.ReorderDelay != 0 || c.Jitter != 0) {
		return errors.New("Netem given with Loss, Duplicate, Reorder, ReorderDelay or Jitter: use one or the other")
	}
	return nil
}

// model is the impairment the link's Stage applies.
func (c *LinkConfig) model() impair.Model {
	if c.Netem.Active() {
		return c.Netem.Model()
	}
	return impair.Model{Loss: c.Loss, Duplicate: c.Duplicate, Hold: c.Reorder, HoldTime: c.ReorderDelay, DelaySpan: c.Jitter}
}

// Direction names one of the fabric's two links.
type Direction int

const (
	AtoB Direction = iota // frames transmitted by port A, received by port B
	BtoA                  // frames transmitted by port B, received by port A
)

func (d Direction) String() string {
	switch d {
	case AtoB:
		return "A->B"
	case BtoA:
		return "B->A"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// LinkStats counts what happened to the frames of one direction.
type LinkStats struct {
	Transmitted uint64 // Transmit calls
	Delivered   uint64 // frames handed out by Receive, copies included
	Dropped     uint64 // by the Drop hook or random loss
	Duplicated  uint64 // copies queued
	Reordered   uint64 // frames held back by ReorderDelay (Netem: hold), or sent without the delay (Netem: reorder)
	Corrupted   uint64 // frames with a bit flipped (Netem: corrupt)
}

// Fabric is a pair of links between port A and port B. Create it with New.
type Fabric struct {
	clock    Clock
	maxFrame int
	links    [2]link
	ports    [2]Port
	tap      func(d Direction, at time.Duration, frame []byte, dropped bool)
}

// New returns a fabric whose A->B link is configured by aToB and B->A link by
// bToA, carrying frames of up to maxFrame bytes, timed by clock, with all
// randomness derived from seed. It panics on an invalid configuration.
func New(clock Clock, seed uint64, aToB, bToA LinkConfig, maxFrame int) *Fabric {
	if clock == nil {
		panic("fabric: nil Clock")
	}
	if maxFrame <= 0 || maxFrame > maxFrameLimit {
		panic(fmt.Sprintf("fabric: maxFrame %d outside [1, %d]", maxFrame, maxFrameLimit))
	}
	f := &Fabric{clock: clock, maxFrame: maxFrame}
	for d, c := range [2]LinkConfig{aToB, bToA} {
		// Distinct streams per direction keep one direction's draws
		// independent of how much the other one transmits.
		f.links[d].stage = impair.NewStage(impair.Model{}, seed, uint64(d))
		f.SetLink(Direction(d), c)
	}
	f.ports[AtoB] = Port{f: f, txDir: AtoB, tx: &f.links[AtoB], rx: &f.links[BtoA]}
	f.ports[BtoA] = Port{f: f, txDir: BtoA, tx: &f.links[BtoA], rx: &f.links[AtoB]}
	return f
}

// A returns port A: it transmits towards B and receives what B transmits.
func (f *Fabric) A() *Port { return &f.ports[AtoB] }

// B returns port B.
func (f *Fabric) B() *Port { return &f.ports[BtoA] }

// SetLink replaces the configuration of direction d at run time. Frames
// already in flight keep the delivery times they were given, the frame being
// serialized finishes at the old rate (rounded up to a whole nanosecond), and
// the new queue bound applies to the next TxBuffer. It panics on an invalid
// configuration.
func (f *Fabric) SetLink(d Direction, c LinkConfig) {
	if err := c.validate(); err != nil {
		panic(fmt.Sprintf("fabric: %v link: %v", d, err))
	}
	l := &f.links[d]
	l.cfg = c
	l.stage.SetModel(c.model())
	l.limit = c.QueueFrames
	if l.limit == 0 {
		l.limit = c.Netem.Limit
	}
	if l.limit == 0 {
		l.limit = DefaultQueueFrames
	}
	if rate := uint64(math.Round(c.RateBps)); rate != l.rate {
		// The remainder is in units of the old rate.
		if l.busyRem > 0 {
			l.busyUntil = satAdd(l.busyUntil, 1)
			l.busyRem = 0
		}
		l.rate = rate
	}
}

// Stats returns the counters of direction d.
func (f *Fabric) Stats(d Direction) LinkStats { return f.links[d].stats }

// NextDelivery returns the earliest delivery time of any frame queued in
// either direction (possibly already past, if it has not been received yet),
// and false if none is queued. A simulator jumps its clock straight to it.
func (f *Fabric) NextDelivery() (time.Duration, bool) {
	var next time.Duration
	found := false
	for i := range f.links {
		if q := f.links[i].queue; len(q) > 0 && (!found || q[0].at < next) {
			next, found = q[0].at, true
		}
	}
	return next, found
}

// Tap installs fn as an observer of every transmitted frame (for tests and
// pcap writers), or removes it if fn is nil. fn is called from Transmit with
// the frame's direction, its departure time, the frame (valid only during
// the call) and whether the link dropped it; duplicates are not reported
// separately.
func (f *Fabric) Tap(fn func(d Direction, at time.Duration, frame []byte, dropped bool)) {
	f.tap = fn
}

// flight is a frame on its way: delivered at at, ordered among equal times by
// seq (transmit order). frame has the frame's length and capacity maxFrame.
type flight struct {
	at    time.Duration
	seq   uint64
	frame []byte
}

// link is one direction: its configuration, serializer state, random stream,
// delivery heap and buffer pool.
type link struct {
	cfg   LinkConfig
	limit int
	stage *impair.Stage // every frame's fate (impair.Stage's fixed draws are the fabric's historical ones)
	// The serializer runs at rate bits/s (0: infinitely fast) and is busy
	// until busyUntil + busyRem/rate nanoseconds, 0 <= busyRem < rate.
	rate uint64
	serializer
	seq   uint64
	queue []flight // min-heap on (at, seq)
	free  [][]byte // buffers of cap maxFrame ready for reuse
	stats LinkStats
}

func (l *link) getBuffer(maxFrame int) []byte {
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		return b[:maxFrame]
	}
	return make([]byte, maxFrame)
}

func (l *link) putBuffer(b []byte) { l.free = append(l.free, b) }

// depart runs a frame of n bytes through the serializer at now and returns
// its departure time.
func (l *link) depart(now time.Duration, n int) time.Duration {
	// An idle serializer starts at now: its busy time, remainder included,
	// ended before now.
	if now > l.busyUntil {
		l.busyUntil, l.busyRem = now, 0
	}
	if l.rate > 0 {
		return l.charge(n, l.rate)
	}
	return l.freeAt()
}

func satAdd(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// push queues a frame for delivery at at.
func (l *link) push(at time.Duration, frame []byte) {
	l.seq++
	l.queue = append(l.queue, flight{at: at, seq: l.seq, frame: frame})
	siftUp(l.queue)
}

// pop removes and returns the earliest frame.
func (l *link) pop() []byte {
	q, top := popMin(l.queue)
	l.queue = q
	return top.frame
}

func (a *flight) before(b *flight) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// Port is one end of the fabric. It has the shape of the dataplane's port
// interface: batch Receive, TX buffers lent by the port, Transmit and Flush.
type Port struct {
	f      *Fabric
	txDir  Direction
	tx, rx *link
	// txBuf is kept between TxBuffer calls so that asking twice, or asking
	// while the queue is full, does not cycle buffers through the pool.
	txBuf   []byte
	txReady bool     // the last TxBuffer call returned txBuf
	held    [][]byte // buffers lent by the last Receive
}

// Receive fills frames[:n] with frames whose delivery time is <= the clock's
// now, in delivery order (ties in transmit order), and returns n. The frames
// stay valid until the next Receive call on this port, which returns their
// buffers to the pool.
func (p *Port) Receive(frames [][]byte) int {
	l := p.rx
	for i, b := range p.held {
		l.putBuffer(b)
		p.held[i] = nil
	}
	p.held = p.held[:0]
	now := p.f.clock.Now()
	n := 0
	for n < len(frames) && len(l.queue) > 0 && l.queue[0].at <= now {
		frame := l.pop()
		frames[n] = frame
		p.held = append(p.held, frame)
		n++
	}
	l.stats.Delivered += uint64(n)
	return n
}

// TxBuffer returns a buffer of len MaxFrame to build the next frame in, or
// nil while this direction's queue is full. Asking again before Transmit
// returns the same buffer.
func (p *Port) TxBuffer() []byte {
	if len(p.tx.queue) >= p.tx.limit {
		p.txReady = false
		return nil
	}
	if p.txBuf == nil {
		p.txBuf = p.tx.getBuffer(p.f.maxFrame)
	}
	p.txReady = true
	return p.txBuf
}

// Transmit sends the first n bytes of the buffer returned by the last
// TxBuffer call; see the package documentation for how the link times,
// drops, duplicates and reorders it. It panics if the last TxBuffer call did
// not return a buffer or n is out of range.
func (p *Port) Transmit(n int) {
	if !p.txReady {
		panic("fabric: Transmit without a buffer from TxBuffer")
	}
	if n < 0 || n > p.f.maxFrame {
		panic(fmt.Sprintf("fabric: Transmit(%d) outside [0, %d]", n, p.f.maxFrame))
	}
	frame := p.txBuf[:n]
	p.txBuf, p.txReady = nil, false

	l, cfg := p.tx, &p.tx.cfg
	l.stats.Transmitted++
	// The Stage always takes the same draws per frame, in the same order:
	// see the package documentation.
	v := l.stage.Decide(n)

	departure := l.depart(p.f.clock.Now(), n)
	dropped := (cfg.Drop != nil && cfg.Drop(frame)) || v.Drop
	if p.f.tap != nil {
		p.f.tap(p.txDir, departure, frame, dropped)
	}
	if dropped {
		l.stats.Dropped++
		l.putBuffer(frame)
		return
	}
	arrival := satAdd(departure, cfg.Delay)
	if v.Held || v.Reordered {
		l.stats.Reordered++
	}
	if v.Dup && len(l.queue)+1 < l.limit {
		// The copy is taken before corruption, as netem clones before
		// it corrupts.
		dup := l.getBuffer(p.f.maxFrame)[:n]
		copy(dup, frame)
		l.push(satAdd(arrival, v.Delay), frame)
		l.push(satAdd(arrival, v.DupDelay), dup)
		l.stats.Duplicated++
	} else {
		l.push(satAdd(arrival, v.Delay), frame)
	}
	if v.CorruptBit >= 0 {
		frame[v.CorruptBit/8] ^= 1 << (v.CorruptBit % 8)
		l.stats.Corrupted++
	}
}

// Flush does nothing: the fabric queues a frame on Transmit. It exists so
// that Port satisfies the dataplane's port interface, where real ports kick
// the kernel after a TX batch.
func (p *Port) Flush() {}

// MaxFrame returns the largest frame the port carries, the length of
// TxBuffer's buffers.
func (p *Port) MaxFrame() int { return p.f.maxFrame }

// NextDelivery is the earliest delivery time of the frames queued towards
// this port (possibly past, if not received yet), false if none.
func (p *Port) NextDelivery() (time.Duration, bool) {
	if q := p.rx.queue; len(q) > 0 {
		return q[0].at, true
	}
	return 0, false
}

// Pending returns the number of frames queued towards this port, delivered or
// not yet.
func (p *Port) Pending() int { return len(p.rx.queue) }

// LossyHop is the link of the protocol tests: a small datacenter hop
// (25 Gb/s, 2 µs one way with 200 ns of jitter, a 64-frame transmit ring,
// so that go-back-N's in-flight window, and so its cost, is bounded the
// way a NIC's is) that loses a frame with probability loss, duplicates
// one with half that, and holds one back 3 µs with loss.
func LossyHop(loss float64) LinkConfig {
	return LinkConfig{
		Loss:         loss,
		Duplicate:    loss / 2,
		Reorder:      loss,
		ReorderDelay: 3 * time.Microsecond,
		Delay:        2 * time.Microsecond,
		Jitter:       200 * time.Nanosecond,
		RateBps:      25e9,
		QueueFrames:  64,
	}
}
