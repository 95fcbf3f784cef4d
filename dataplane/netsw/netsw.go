// Package netsw is the queueing logic of softnic's switch: output queues
// in a byte-sized buffer, tail drop, ECN marking, PFC and ECMP. It has two
// users, as package impair has: the embedded fabric's switch (package
// fabric's Network), where frames cross links in simulated time, and the
// real-wire switch over AF_XDP (issue 24). So it knows neither: it never
// reads a clock, starts a goroutine or holds a frame's bytes. The caller
// says what time it is, where a frame came in and which port it goes out
// of, keeps the frame's storage and names the frame by a Handle (an index
// into the caller's buffers, a UMEM address); the package keeps each
// queue's handles and lengths, decides, and returns what the caller must
// do (send a pause upstream, a frame was dropped).
//
// # Mechanism
//
// A Switch has N ports; each is an egress queue (FIFO, one priority) and an
// ingress link. Enqueue admits a frame arriving on port in for the queue of
// port out, or drops it:
//
//   - Static buffer (Buffer.Shared false): every port has PortBytes. A
//     frame is charged to its egress queue (an output-queued switch: a
//     queue holds at most PortBytes) or, with Buffer.Ingress, to its
//     ingress port (IRN §4.1 sizes "buffers ... for each input port").
//   - Shared buffer: one pool of SharedBytes; a queue may hold, after the
//     frame joins, at most Alpha times the buffer then still free (the
//     dynamic threshold of Choudhury and Hahne, IEEE/ACM ToN 1998, which
//     Broadcom's switches implement: one queue alone settles at
//     Alpha/(1+Alpha) of the buffer).
//
// A frame that does not fit is dropped (tail drop) when PFC is off. When
// PFC is on the class is lossless, as a lossless queue in a switch:
// egress limits and the dynamic threshold do not apply, every ingress
// port counts the bytes it has queued in any egress queue, and when they
// pass XOFFBytes the caller is told to pause the link partner on that
// port (Result.PFC, a PFCAction of kind PFCPause with PFC.Quanta); when
// Dequeue takes them down to XONBytes or below it is told to resume it
// (PFCResume). While the pause lasts the partner keeps sending what was
// already on the wire: HeadroomBytes above XOFF absorb it. Only a frame
// that overruns the headroom, or the whole buffer, is dropped
// (DropHeadroom, DropBufferFull): the thresholds were wrong for the link.
// While a port is paused the switch asks for the pause to be sent again
// when half its time has gone (NextRefresh, Refresh), so that the partner
// never resumes on its own while the queue is still above XON.
//
// The other way, PauseReceived tells the switch that a pause frame came in
// on a port: that port's egress queue does not Dequeue until the pause
// expires (quanta of 512 bit times at the port's rate, 802.1Qbb) or a
// pause of 0 quanta resumes it. The frame being sent when the pause came
// is the caller's and goes on; a pause stops the next frame.
//
// ECN is marked on enqueue, RED on the instantaneous queue as DCQCN's
// congestion point does (Zhu et al., SIGCOMM 2015, §3.1; defaults
// Kmin 5 KB, Kmax 200 KB, Pmax 1%, DefaultECN): an admitted frame that
// finds q bytes in its egress queue is marked with probability 0 for
// q <= Kmin, Pmax*(q-Kmin)/(Kmax-Kmin) for Kmin < q <= Kmax, and 1 above
// Kmax. Marking sets the IP ECN field to CE (11) if, and only if, it was
// ECT(0) or ECT(1), and fixes the IPv4 header checksum (MarkCE); RoCEv2's
// ICRC does not cover the IP ECN bits (IBA Annex A17.4, bth.ICRC masks
// the TOS and the traffic class), so a marked frame's ICRC still holds.
//
// ECMP (FlowHash, PickECMP) chooses among equal-cost ports by a seeded hash
// of the IP 5-tuple, whose UDP source port is RoCEv2's entropy field: one
// flow always takes one path, distinct flows spread. Routing is the
// caller's: it gives Enqueue the egress port.
//
// PFCFrame encodes and parses the 802.1Qbb frame the real-wire switch
// sends; the embedded fabric carries the same decision as an event.
//
// # Draws
//
// The only randomness is the marking draw, one per admitted ECN-capable
// frame that finds its queue between Kmin and Kmax, from Config.Rand (a
// PCG from Config.Seed if nil). Probabilities are kept as fractions of
// 2^32 and compared with the draw's high 32 bits, and the dynamic
// threshold is fixed-point too, so a seed gives the same decisions on
// every machine (no float arithmetic on the frame path, which Go may
// fuse differently per architecture).
//
// Counters are per port (Stats): frames and bytes enqueued, dequeued and
// dropped (by reason), ECN marks, pauses sent and received, and the
// occupancy every arriving frame found, kept in a log-linear histogram
// (OccupancyQuantile: p99 within 1/16 of the true value).
//
// Enqueue, Dequeue, PauseReceived and Refresh do not allocate once each
// queue's ring has grown to its high-water mark. A Switch is not safe for
// concurrent use.
package netsw

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Handle names a frame in the caller's storage.
type Handle uint64

// Buffer is a switch's packet memory.
type Buffer struct {
	// Shared selects one pool of SharedBytes with a dynamic threshold of
	// Alpha; otherwise every port has a static PortBytes.
	Shared bool
	// PortBytes is each port's buffer (static). Ingress charges a frame
	// to the port it came in on rather than the queue it waits in.
	PortBytes int
	Ingress   bool
	// SharedBytes is the pool and Alpha the dynamic threshold (shared):
	// a queue may hold at most Alpha times the free buffer.
	SharedBytes int
	Alpha       float64
}

// ECN is RED marking on the egress queue (see the package documentation).
type ECN struct {
	Enabled   bool
	KminBytes int
	KmaxBytes int
	Pmax      float64
}

// PFC is priority flow control for the one class (802.1Qbb).
type PFC struct {
	Enabled bool
	// An ingress port whose queued bytes pass XOFFBytes pauses its link
	// partner; at XONBytes or below it resumes it. HeadroomBytes above
	// XOFF absorb what is on the wire meanwhile.
	XOFFBytes, XONBytes, HeadroomBytes int
	// Quanta is the pause time sent, in 512 bit times (0: DefaultQuanta).
	Quanta uint16
}

// PortConfig is one port.
type PortConfig struct {
	// RateBps is the port's line rate, which turns pause quanta into time.
	// It must not be 0 with PFC on; with PFC off, 0 means a pause received
	// lasts until a resume.
	RateBps uint64
}

// Config configures a Switch.
type Config struct {
	Ports  []PortConfig
	Buffer Buffer
	ECN    ECN
	PFC    PFC
	// Rand gives the marking draws; nil: a PCG seeded by Seed.
	Rand rand.Source
	Seed uint64
}

// Defaults: IRN's (Mittal et al., SIGCOMM 2018, §4.1) buffer and PFC
// thresholds for its 40 Gb/s, 2 µs-per-link fat tree, and DCQCN's
// marking (Zhu et al., SIGCOMM 2015). KB as the papers write it, taken as
// 1000 bytes (IRN's 240 KB is twice its 120 KB BDP: 40 Gb/s × 24 µs).
const (
	DefaultPortBytes     = 240_000 // IRN §4.1: twice the BDP per input port
	DefaultHeadroomBytes = 20_000  // IRN §4.1: the upstream link's BDP
	DefaultXOFFBytes     = 220_000 // IRN §4.1: buffer minus headroom
	// DefaultXONBytes is not in IRN: one headroom below XOFF, so that a
	// pause and its resume are about 20 MTU frames apart (a choice).
	DefaultXONBytes = 200_000
	DefaultQuanta   = 0xffff // the longest pause, refreshed at half time
	DefaultKmin     = 5_000  // DCQCN
	DefaultKmax     = 200_000
	DefaultPmax     = 0.01
	// DefaultAlpha is Choudhury and Hahne's alpha of 1: one queue alone
	// gets half the shared buffer.
	DefaultAlpha = 1.0
)

// DefaultBuffer is IRN's static buffer: 240 KB per input port.
func DefaultBuffer() Buffer { return Buffer{PortBytes: DefaultPortBytes, Ingress: true} }

// DefaultECN is DCQCN's marking, on.
func DefaultECN() ECN {
	return ECN{Enabled: true, KminBytes: DefaultKmin, KmaxBytes: DefaultKmax, Pmax: DefaultPmax}
}

// DefaultPFC is IRN's PFC, on.
func DefaultPFC() PFC {
	return PFC{Enabled: true, XOFFBytes: DefaultXOFFBytes, XONBytes: DefaultXONBytes, HeadroomBytes: DefaultHeadroomBytes, Quanta: DefaultQuanta}
}

// maxBytes keeps byte products (thresholds times fractions of 2^32 or
// 2^16) inside 64 bits.
const maxBytes = 1 << 31

func (c *Config) validate() error {
	if len(c.Ports) == 0 {
		return errors.New("no ports")
	}
	b := &c.Buffer
	if b.Shared {
		if b.SharedBytes <= 0 || b.SharedBytes >= maxBytes {
			return fmt.Errorf("SharedBytes %d outside [1, 2^31)", b.SharedBytes)
		}
		if !(b.Alpha > 0 && b.Alpha <= 1<<16) {
			return fmt.Errorf("Alpha %v outside (0, 65536]", b.Alpha)
		}
	} else if b.PortBytes <= 0 || b.PortBytes*len(c.Ports) >= maxBytes {
		return fmt.Errorf("PortBytes %d: not positive, or the buffer reaches 2^31", b.PortBytes)
	}
	if e := &c.ECN; e.Enabled {
		if e.KminBytes < 0 || e.KmaxBytes <= e.KminBytes || e.KmaxBytes >= maxBytes {
			return fmt.Errorf("ECN: need 0 <= Kmin < Kmax < 2^31, have %d, %d", e.KminBytes, e.KmaxBytes)
		}
		if !(e.Pmax >= 0 && e.Pmax <= 1) {
			return fmt.Errorf("ECN: Pmax %v is not a probability", e.Pmax)
		}
	}
	if p := &c.PFC; p.Enabled {
		if p.XONBytes < 0 || p.XONBytes > p.XOFFBytes || p.HeadroomBytes < 0 || p.XOFFBytes+p.HeadroomBytes >= maxBytes {
			return fmt.Errorf("PFC: need 0 <= XON <= XOFF and headroom >= 0, have XON %d, XOFF %d, headroom %d", p.XONBytes, p.XOFFBytes, p.HeadroomBytes)
		}
		for i, pc := range c.Ports {
			if pc.RateBps == 0 {
				return fmt.Errorf("PFC: port %d has no rate to time its pauses", i)
			}
		}
	}
	return nil
}

// DropReason says why Enqueue dropped a frame.
type DropReason uint8

const (
	NotDropped     DropReason = iota
	DropQueueFull             // static buffer: PortBytes of the queue (or ingress port) reached
	DropThreshold             // shared buffer: the queue is at Alpha times the free buffer
	DropBufferFull            // the whole buffer is full
	DropHeadroom              // PFC: the ingress port overran XOFF plus headroom
)

var dropNames = [...]string{"none", "queue_full", "threshold", "buffer_full", "headroom"}

func (r DropReason) String() string {
	if int(r) < len(dropNames) {
		return dropNames[r]
	}
	return fmt.Sprintf("DropReason(%d)", int(r))
}

// PFCKind is what a PFCAction asks for.
type PFCKind uint8

const (
	PFCNone   PFCKind = iota
	PFCPause          // send a pause of Quanta on Port
	PFCResume         // send a pause of 0 quanta on Port (XON)
)

// PFCAction asks the caller to send a PFC frame out of Port, to its link
// partner: pause for Quanta (PFCPause) or resume (PFCResume, quanta 0).
type PFCAction struct {
	Kind   PFCKind
	Port   int
	Quanta uint16
}

// Result is what Enqueue decided.
type Result struct {
	Drop   DropReason // NotDropped: the frame is queued
	Marked bool       // the frame's IP ECN field was set to CE
	PFC    PFCAction  // a pause for the ingress port's partner, if any
}

// Queued reports whether the frame was admitted.
func (r Result) Queued() bool { return r.Drop == NotDropped }

// Entry is a queued frame, as Dequeue returns it.
type Entry struct {
	Handle  Handle
	Len     int
	Ingress int
}

// PortStats counts one port: its egress queue, and its ingress link's
// pauses.
type PortStats struct {
	Enqueued, EnqueuedBytes uint64
	Dequeued, DequeuedBytes uint64
	Dropped, DroppedBytes   uint64
	// Dropped by reason, indexed by DropReason.
	DroppedBy [5]uint64
	ECNMarked uint64
	// NotECT counts admitted frames that found the queue above Kmin but
	// were not ECN-capable (or not IP), and so could not be marked.
	NotECT uint64
	// Pause frames asked for on this port (XOFF and refreshes), resumes
	// (XON); and those received on it.
	PausesSent, ResumesSent         uint64
	PausesReceived, ResumesReceived uint64
	QueueBytes, MaxQueueBytes       int // the egress queue, now and at most
	IngressBytes                    int // bytes queued anywhere that came in here
}

// Add adds o's counters to s: the gauges summed as well (QueueBytes,
// IngressBytes), but MaxQueueBytes the larger of the two, so that a sum
// over ports has the largest port's.
func (s *PortStats) Add(o *PortStats) {
	s.Enqueued += o.Enqueued
	s.EnqueuedBytes += o.EnqueuedBytes
	s.Dequeued += o.Dequeued
	s.DequeuedBytes += o.DequeuedBytes
	s.Dropped += o.Dropped
	s.DroppedBytes += o.DroppedBytes
	for r := range s.DroppedBy {
		s.DroppedBy[r] += o.DroppedBy[r]
	}
	s.ECNMarked += o.ECNMarked
	s.NotECT += o.NotECT
	s.PausesSent += o.PausesSent
	s.ResumesSent += o.ResumesSent
	s.PausesReceived += o.PausesReceived
	s.ResumesReceived += o.ResumesReceived
	s.QueueBytes += o.QueueBytes
	s.MaxQueueBytes = max(s.MaxQueueBytes, o.MaxQueueBytes)
	s.IngressBytes += o.IngressBytes
}

// Switch is the queueing state of one switch.
type Switch struct {
	ports    []port
	buf      Buffer
	pfc      PFC
	used     int // bytes queued in the whole switch
	capacity int // the whole buffer
	alpha    uint64
	marker   Marker
}

type entry struct {
	h  Handle
	n  int32
	in int32
}

type port struct {
	rate uint64
	// The egress queue: a ring of entries, grown by doubling.
	ring       []entry
	head, n    int
	bytes      int
	ingress    int // bytes queued that came in on this port
	xoff       bool
	lastPause  time.Duration // when the last pause was asked for (xoff)
	pausedTill time.Duration // this egress queue is paused until then
	stats      PortStats
	hist       histogram
}

// New returns a Switch, or an error naming what is wrong with cfg.
func New(cfg Config) (*Switch, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("netsw: %w", err)
	}
	s := &Switch{ports: make([]port, len(cfg.Ports)), buf: cfg.Buffer, pfc: cfg.PFC}
	if s.pfc.Enabled && s.pfc.Quanta == 0 {
		s.pfc.Quanta = DefaultQuanta
	}
	for i := range s.ports {
		s.ports[i].rate = cfg.Ports[i].RateBps
	}
	if s.buf.Shared {
		s.capacity = s.buf.SharedBytes
		s.alpha = uint64(math.Round(s.buf.Alpha * (1 << 16)))
	} else {
		s.capacity = s.buf.PortBytes * len(s.ports)
	}
	src := cfg.Rand
	if src == nil {
		src = rand.NewPCG(cfg.Seed, markSalt)
	}
	s.marker = NewMarker(cfg.ECN, src)
	return s, nil
}

// markSalt is the marking stream's PCG increment for a seed.
const markSalt = 0x6a09e667f3bcc909

// Ports returns the number of ports.
func (s *Switch) Ports() int { return len(s.ports) }

// Enqueue offers frame (its bytes: marked in place, and its length is what
// it costs) under handle h, arrived on port in, for the queue of port out.
// now is when it arrived (it times the pause a Result may ask for).
func (s *Switch) Enqueue(now time.Duration, frame []byte, h Handle, in, out int) Result {
	n := len(frame)
	p, ip := &s.ports[out], &s.ports[in]
	p.hist.add(p.bytes)
	if reason := s.admit(n, ip, p); reason != NotDropped {
		p.stats.Dropped++
		p.stats.DroppedBytes += uint64(n)
		p.stats.DroppedBy[reason]++
		return Result{Drop: reason}
	}
	var r Result
	if s.marker.cfg.Enabled && p.bytes > s.marker.cfg.KminBytes {
		// Only an ECN-capable frame takes a draw (package documentation).
		if !ECNCapable(frame) {
			p.stats.NotECT++
		} else if s.marker.Decide(p.bytes) {
			MarkCE(frame)
			r.Marked = true
			p.stats.ECNMarked++
		}
	}
	p.push(entry{h: h, n: int32(n), in: int32(in)})
	p.bytes += n
	ip.ingress += n
	s.used += n
	p.stats.Enqueued++
	p.stats.EnqueuedBytes += uint64(n)
	p.stats.MaxQueueBytes = max(p.stats.MaxQueueBytes, p.bytes)
	if s.pfc.Enabled && !ip.xoff && ip.ingress > s.pfc.XOFFBytes {
		ip.xoff = true
		ip.lastPause = now
		ip.stats.PausesSent++
		r.PFC = PFCAction{Kind: PFCPause, Port: in, Quanta: s.pfc.Quanta}
	}
	return r
}

func (s *Switch) admit(n int, in, out *port) DropReason {
	if s.used+n > s.capacity {
		return DropBufferFull
	}
	if s.pfc.Enabled {
		if in.ingress+n > s.pfc.XOFFBytes+s.pfc.HeadroomBytes {
			return DropHeadroom
		}
		return NotDropped
	}
	if s.buf.Shared {
		// After the frame joins, the queue is within alpha times the
		// buffer still free (used+n <= capacity here).
		free := uint64(s.capacity - s.used - n)
		if uint64(out.bytes+n) > free*s.alpha>>16 {
			return DropThreshold
		}
		return NotDropped
	}
	charged := out.bytes
	if s.buf.Ingress {
		charged = in.ingress
	}
	if charged+n > s.buf.PortBytes {
		return DropQueueFull
	}
	return NotDropped
}

// Dequeue takes the frame at the head of port out's queue, if the queue
// has one and is not paused at now. The PFCAction, if any, resumes the
// link partner of the frame's ingress port.
func (s *Switch) Dequeue(now time.Duration, out int) (Entry, PFCAction, bool) {
	p := &s.ports[out]
	if p.n == 0 || now < p.pausedTill {
		return Entry{}, PFCAction{}, false
	}
	e := p.pop()
	n := int(e.n)
	p.bytes -= n
	s.used -= n
	ip := &s.ports[e.in]
	ip.ingress -= n
	p.stats.Dequeued++
	p.stats.DequeuedBytes += uint64(n)
	var a PFCAction
	if ip.xoff && ip.ingress <= s.pfc.XONBytes {
		ip.xoff = false
		ip.stats.ResumesSent++
		a = PFCAction{Kind: PFCResume, Port: int(e.in)}
	}
	return Entry{Handle: e.h, Len: n, Ingress: int(e.in)}, a, true
}

// PauseReceived tells the switch that a PFC frame of quanta for its class
// came in on port at now: the port's queue is paused for quanta × 512 bit
// times at its rate (until a resume, at rate 0), or resumed if quanta is 0.
func (s *Switch) PauseReceived(now time.Duration, port int, quanta uint16) {
	p := &s.ports[port]
	if quanta == 0 {
		p.pausedTill = now
		p.stats.ResumesReceived++
		return
	}
	p.stats.PausesReceived++
	if p.rate == 0 {
		p.pausedTill = math.MaxInt64
		return
	}
	p.pausedTill = now + QuantaTime(quanta, p.rate)
}

// PausedUntil is when port's queue may send again: at or before now, it
// is not paused.
func (s *Switch) PausedUntil(port int) time.Duration { return s.ports[port].pausedTill }

// NextRefresh is when a paused port's pause must be sent again (half its
// time after the last), if any port is paused.
func (s *Switch) NextRefresh() (time.Duration, bool) {
	var next time.Duration
	found := false
	for i := range s.ports {
		if t, ok := s.refreshAt(&s.ports[i]); ok && (!found || t < next) {
			next, found = t, true
		}
	}
	return next, found
}

func (s *Switch) refreshAt(p *port) (time.Duration, bool) {
	if !p.xoff {
		return 0, false
	}
	return p.lastPause + QuantaTime(s.pfc.Quanta, p.rate)/2, true
}

// Refresh returns one pause due again at now (see NextRefresh), and false
// when none is; call it until false.
func (s *Switch) Refresh(now time.Duration) (PFCAction, bool) {
	for i := range s.ports {
		p := &s.ports[i]
		if t, ok := s.refreshAt(p); ok && t <= now {
			p.lastPause = now
			p.stats.PausesSent++
			return PFCAction{Kind: PFCPause, Port: i, Quanta: s.pfc.Quanta}, true
		}
	}
	return PFCAction{}, false
}

// QuantaTime is how long a pause of quanta lasts on a link of rateBps:
// quanta × 512 bit times (802.1Qbb), rounded up to a nanosecond.
func QuantaTime(quanta uint16, rateBps uint64) time.Duration {
	bits := uint64(quanta) * 512 * uint64(time.Second)
	return time.Duration((bits + rateBps - 1) / rateBps)
}

// HeadroomFor is the headroom that keeps PFC lossless on a link of rateBps
// and one-way delay, for frames of at most maxFrame bytes: the frame that
// takes the ingress port past XOFF, what the link has in flight both ways
// while the pause travels back, the pause frame's own serialization, and
// the frame the partner is sending when the pause arrives (which it
// finishes). IRN §4.1 takes the link's bandwidth-delay product alone
// (20 KB at 40 Gb/s and 2 µs); this is that plus two frames and a pause.
func HeadroomFor(rateBps uint64, delay time.Duration, maxFrame int) int {
	inFlight := (2*uint64(delay)*rateBps + 8*uint64(time.Second) - 1) / (8 * uint64(time.Second))
	return int(inFlight) + PFCFrameLen + 2*maxFrame
}

// QueueBytes returns the bytes in port's egress queue.
func (s *Switch) QueueBytes(port int) int { return s.ports[port].bytes }

// QueueLen returns the frames in port's egress queue.
func (s *Switch) QueueLen(port int) int { return s.ports[port].n }

// UsedBytes returns the bytes queued in the whole switch.
func (s *Switch) UsedBytes() int { return s.used }

// Paused reports whether port's link partner is paused (XOFF sent and
// not yet resumed).
func (s *Switch) Paused(port int) bool { return s.ports[port].xoff }

// Stats returns port's counters.
func (s *Switch) Stats(port int) PortStats {
	p := &s.ports[port]
	st := p.stats
	st.QueueBytes = p.bytes
	st.IngressBytes = p.ingress
	return st
}

// OccupancyQuantile returns the q-quantile (0 < q <= 1) of the egress
// queue's bytes as arriving frames found it, dropped ones included, as
// the upper bound of its histogram bucket (at most 1/16 above the true
// value); 0 before any frame arrived.
func (s *Switch) OccupancyQuantile(port int, q float64) int {
	return s.ports[port].hist.quantile(q)
}

// ResetOccupancy empties every port's occupancy histogram, so that
// OccupancyQuantile describes only the frames that arrive from now on
// (the queue after a flow has converged, say). The other counters stay.
func (s *Switch) ResetOccupancy() {
	for i := range s.ports {
		s.ports[i].hist = histogram{}
	}
}

func (p *port) push(e entry) {
	if p.n == len(p.ring) {
		grown := make([]entry, max(64, 2*len(p.ring)))
		for i := range p.n {
			grown[i] = p.ring[(p.head+i)%len(p.ring)]
		}
		p.ring, p.head = grown, 0
	}
	p.ring[(p.head+p.n)%len(p.ring)] = e
	p.n++
}

func (p *port) pop() entry {
	e := p.ring[p.head]
	p.head = (p.head + 1) % len(p.ring)
	p.n--
	return e
}
