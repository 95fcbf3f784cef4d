package dataplane

import "time"

// delayLine is the emulated link's propagation delay (Config.LinkDelay):
// a Port wrapper that holds every received frame for a fixed time before
// the engine sees it, in arrival order. The papers' loss-recovery results
// depend on the bandwidth-delay product — go-back-N resends what is in
// flight — and two namespaces on one host have a round trip of tens of
// microseconds: a few packets at an emulated rate of a few Gb/s, where the
// papers' datacenter paths hold a hundred (IRN: 110 at 40 Gb/s). A delay
// on receive gives the path its BDP. It works on every port (it is in
// front of the engine, not in the kernel): AF_XDP transmit bypasses the
// qdisc, and this kernel has no netem anyway.
//
// Frames are copied into a ring of preallocated slots when they arrive
// (the port's buffers go back to it at once) and lent to the engine from
// the ring when due; a frame lent by one Receive is the engine's until the
// next. A full ring drops the frame (link_delay_drops): size it for
// delay × rate (Config.LinkDelaySlots). Nothing is allocated after
// construction.
type delayLine struct {
	Port
	delay time.Duration
	now   *time.Duration // the engine's clock (Engine.now)

	buf     []byte // slots of slotLen bytes
	slotLen int
	lens    []int
	due     []time.Duration
	head, n int // the ring: n frames from head
	lent    int // frames at the head lent by the last Receive
	scratch [][]byte
	drops   uint64
}

// DefaultLinkDelaySlots is the delay line's default capacity in frames:
// 2 ms of 1 KiB frames at 10 Gb/s, 8 MiB of 2 KiB slots.
const DefaultLinkDelaySlots = 4096

func newDelayLine(p Port, delay time.Duration, slots, batch int, now *time.Duration) *delayLine {
	n := p.MaxFrame()
	return &delayLine{Port: p, delay: delay, now: now,
		buf: make([]byte, slots*n), slotLen: n, lens: make([]int, slots), due: make([]time.Duration, slots),
		scratch: make([][]byte, batch)}
}

// Receive takes what the port has into the ring and lends the frames that
// are due.
func (d *delayLine) Receive(frames [][]byte) int {
	slots := len(d.lens)
	d.head = (d.head + d.lent) % slots
	d.n -= d.lent
	d.lent = 0
	k := d.Port.Receive(d.scratch)
	for _, f := range d.scratch[:k] {
		if d.n == slots || len(f) > d.slotLen {
			d.drops++
			continue
		}
		j := (d.head + d.n) % slots
		d.lens[j] = copy(d.buf[j*d.slotLen:(j+1)*d.slotLen], f)
		d.due[j] = *d.now + d.delay
		d.n++
	}
	m := 0
	for m < len(frames) && m < d.n {
		j := (d.head + m) % slots
		if d.due[j] > *d.now {
			break
		}
		frames[m] = d.buf[j*d.slotLen : j*d.slotLen+d.lens[j]]
		m++
	}
	d.lent = m
	return m
}

// nextDue is when the first frame not yet lent is due.
func (d *delayLine) nextDue() (time.Duration, bool) {
	if d.n <= d.lent {
		return 0, false
	}
	return d.due[(d.head+d.lent)%len(d.lens)], true
}
