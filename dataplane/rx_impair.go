package dataplane

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/dataplane/impair"
)

// rxImpair is the receive stage: the emulated link's propagation delay
// (Config.LinkDelay) and netem-style impairment (Config.Netem, softnic run
// --netem, package impair) applied to every received frame before the
// engine parses it. It is a Port wrapper, in front of the engine rather
// than in the kernel: AF_XDP transmit bypasses the qdisc, XDP runs before
// tc ingress, and this kernel has no sch_netem anyway, so this is the one
// place where a softnic host can impair what it receives from a real peer.
//
// Why a delay at all: the papers' loss-recovery results depend on the
// bandwidth-delay product — go-back-N resends what is in flight — and two
// namespaces on one host have a round trip of tens of microseconds: a few
// packets at an emulated rate of a few Gb/s, where the papers' datacenter
// paths hold a hundred (IRN: 110 at 40 Gb/s). A delay on receive gives the
// path its BDP.
//
// Mechanism: each frame the port hands over gets a verdict from an
// impair.Stage. A lost frame is dropped without being copied. Otherwise it
// is copied into a free preallocated slot (the port's buffer goes back to
// it at once), with one bit flipped if the verdict corrupts it, and is due
// at now + LinkDelay + the verdict's delay; a duplicate takes a second
// slot, uncorrupted, with its own delay. Slots wait in a min-heap ordered
// by (due time, arrival number), so frames are lent to the engine in due
// order, ties (and every frame, when the delay has no jitter) in arrival
// order. A frame lent by one Receive is the engine's until the next, when
// its slot goes back on the free list. A frame or copy that finds no free
// slot, or the Spec's limit reached, is dropped and counted
// (impair_drops; link_delay_drops is its older name). Nothing is allocated
// after construction.
//
// With no Spec and no LinkDelay, and nothing held, Receive passes straight
// through to the port: a stage installed at run time (Engine.SetNetem) and
// cleared again costs nothing.
type rxImpair struct {
	Port
	prop time.Duration  // Config.LinkDelay
	now  *time.Duration // the engine's clock (Engine.now)

	spec      impair.Spec
	stage     *impair.Stage
	impairing bool // spec.Active()
	limit     int  // frames held at most: the spec's limit or every slot

	buf     []byte // slots of slotLen bytes
	slotLen int
	lens    []int
	due     []time.Duration
	seq     []uint64
	next    uint64  // arrival number of the next slot filled
	free    []int32 // free slots
	heap    []int32 // held slots, a min-heap on (due, seq)
	lent    []int32 // slots lent by the last Receive
	scratch [][]byte
	drops   uint64 // frames and copies with no room
	delayed uint64 // frames and copies held for a time above 0
}

// DefaultLinkDelaySlots is the receive stage's default capacity in frames:
// 2 ms of 1 KiB frames at 10 Gb/s, 8 MiB of 2 KiB slots.
const DefaultLinkDelaySlots = 4096

// newRxImpair returns a stage of slots frames over p, applying spec with
// the streams of seed (impair.NewStage, stream 0).
func newRxImpair(p Port, prop time.Duration, spec impair.Spec, slots, batch int, now *time.Duration) *rxImpair {
	n := p.MaxFrame()
	r := &rxImpair{Port: p, prop: prop, now: now,
		buf: make([]byte, slots*n), slotLen: n, lens: make([]int, slots), due: make([]time.Duration, slots), seq: make([]uint64, slots),
		free: make([]int32, slots), heap: make([]int32, 0, slots), lent: make([]int32, 0, slots),
		scratch: make([][]byte, batch)}
	for i := range r.free {
		r.free[i] = int32(slots - 1 - i)
	}
	r.stage = impair.NewStage(impair.Model{}, spec.Seed, 0)
	r.setSpec(spec)
	return r
}

// setSpec changes the impairment; frames already held keep their due
// times. The stage's streams go on, unless spec has a seed: then they
// start again from it, so that setting the same Spec twice repeats the
// same decisions. The counts go on: counters never go back.
func (r *rxImpair) setSpec(spec impair.Spec) {
	if spec.HasSeed {
		r.stage.Reseed(spec.Seed, 0)
	}
	r.spec = spec
	r.stage.SetModel(spec.Model())
	r.impairing = spec.Active()
	r.limit = len(r.lens)
	if spec.Limit > 0 {
		r.limit = min(spec.Limit, r.limit)
	}
}

// checkSpec reports why spec does not fit this stage.
func (r *rxImpair) checkSpec(spec impair.Spec) error {
	if spec.Limit > len(r.lens) {
		return fmt.Errorf("dataplane: netem limit %d is above the receive stage's %d slots (set at start: softnic run --netem \"limit N\")", spec.Limit, len(r.lens))
	}
	return nil
}

// Receive takes what the port has into slots and lends the frames that
// are due.
func (r *rxImpair) Receive(frames [][]byte) int {
	r.free = append(r.free, r.lent...)
	r.lent = r.lent[:0]
	if !r.impairing && r.prop == 0 && len(r.heap) == 0 {
		return r.Port.Receive(frames)
	}
	now := *r.now
	k := r.Port.Receive(r.scratch)
	for _, f := range r.scratch[:k] {
		v := impair.Verdict{CorruptBit: -1}
		if r.impairing {
			v = r.stage.Decide(len(f))
		}
		if v.Drop {
			continue
		}
		r.hold(f, now, v.Delay, v.CorruptBit)
		if v.Dup {
			r.hold(f, now, v.DupDelay, -1)
		}
	}
	m := 0
	for m < len(frames) && len(r.heap) > 0 && r.due[r.heap[0]] <= now {
		j := r.pop()
		frames[m] = r.buf[int(j)*r.slotLen : int(j)*r.slotLen+r.lens[j]]
		r.lent = append(r.lent, j)
		m++
	}
	return m
}

// hold copies f into a slot due delay after now (plus the propagation
// delay), flipping bit corrupt unless it is -1.
func (r *rxImpair) hold(f []byte, now, delay time.Duration, corrupt int) {
	if len(r.free) == 0 || len(r.heap) >= r.limit || len(f) > r.slotLen {
		r.drops++
		return
	}
	j := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	slot := r.buf[int(j)*r.slotLen : (int(j)+1)*r.slotLen]
	r.lens[j] = copy(slot, f)
	if corrupt >= 0 {
		slot[corrupt/8] ^= 1 << (corrupt % 8)
	}
	wait := r.prop + delay
	if wait > 0 {
		r.delayed++
	}
	r.due[j] = now + wait
	r.seq[j] = r.next
	r.next++
	r.push(j)
}

func (r *rxImpair) before(a, b int32) bool {
	return r.due[a] < r.due[b] || r.due[a] == r.due[b] && r.seq[a] < r.seq[b]
}

func (r *rxImpair) push(j int32) {
	r.heap = append(r.heap, j)
	h := r.heap
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !r.before(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (r *rxImpair) pop() int32 {
	h := r.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if child+1 < len(h) && r.before(h[child+1], h[child]) {
			child++
		}
		if !r.before(h[child], h[i]) {
			break
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
	r.heap = h
	return top
}

// nextDue is when the first held frame is due.
func (r *rxImpair) nextDue() (time.Duration, bool) {
	if len(r.heap) == 0 {
		return 0, false
	}
	return r.due[r.heap[0]], true
}
