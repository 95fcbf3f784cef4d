// Package timer is the single timer wheel of a softnic dataplane engine: ACK
// timeouts, NAK intervals, RTO_low/RTO_high and CE timers all live here and
// are fired by the poll loop, never by a goroutine of their own.
//
// # Mechanism
//
// The wheel is a hierarchical timing wheel whose resolution is one
// nanosecond, the unit of time.Duration. A deadline is mapped to an unsigned
// 64-bit key (order preserving, so negative times work too) and read as
// eleven 6-bit digits. Level L has 64 slots, one per value of digit L. A timer
// is kept at the level of the most significant digit in which its key differs
// from the wheel's position, in the slot named by that digit of its key. So a
// level-0 slot holds timers with one exact deadline, a level-1 slot a 64 ns
// window, level 2 4.1 µs, level 3 262 µs, level 4 16.8 ms, level 5 1.07 s,
// and so on up to the whole int64 range: a 4.096 µs·2^31 IB ACK timeout (2.4
// hours) is as cheap as a 10 µs one.
//
// Every level keeps a 64-bit occupancy bitmap, so the earliest non-empty slot
// is found with two count-trailing-zeros instructions. Advance does not tick
// through empty time: it jumps to the start of the earliest non-empty slot;
// if that slot is above level 0 it redistributes ("cascades") the slot's
// timers to lower levels relative to the new position, and if it is at level
// 0 every timer in it is due at exactly that instant and fires. A timer
// therefore moves down at most ten times in its life, and Schedule and Stop
// are O(1) list operations on intrusive links, with no allocation.
//
// Why 1 ns rather than the 1 µs or so of kernel wheels: deadlines must be
// honoured exactly (never early, and at the first Advance at or after them)
// and NextDeadline must be exact so that a simulator can jump virtual time
// straight to it. With a coarser base a level-0 slot would mix deadlines and
// need sorting; with 1 ns it never does, and the bitmaps make the fine
// resolution free because no tick is ever walked.
//
// Timers that share a deadline always sit in the same slot (their keys agree
// in every digit), each slot is a FIFO, and a cascade moves a slot in order,
// so ties fire in scheduling order.
//
// NextDeadline is exact: at level 0 the earliest slot gives the deadline
// directly; above level 0 the earliest slot's timers are scanned for their
// minimum. The result is cached until the earliest timer is stopped or
// fired, so the scan is paid at most once per change of the earliest timer.
//
// # Time semantics
//
// The wheel has a current time, Now: the start value, then the argument of
// the latest Advance that did not go backwards. A timer cannot fire in the
// past, so Schedule clamps a deadline earlier than Now to Now (Deadline
// reports the clamped value); such a timer fires on the next Advance.
//
// Advance(now) fires, in deadline order, the timers that were armed with a
// deadline <= now when it was called and have not been stopped or
// rescheduled by the time their turn comes. Callbacks may Schedule and Stop any timer. A timer that a callback
// arms with a deadline <= now is clamped to now and fires on the next
// Advance, not this one: this is what keeps a callback that re-arms itself
// "immediately" from looping forever, and a simulator that drives the wheel
// with Advance(NextDeadline()) still sees it at the same virtual time.
//
// A Wheel and its Timers are not safe for concurrent use: they belong to the
// one goroutine that runs the engine's poll loop, which is why nothing here
// locks.
package timer

import (
	"math"
	"math/bits"
	"time"
)

const (
	digitBits  = 6
	slotsPerLv = 1 << digitBits
	digitMask  = slotsPerLv - 1
	// numLevels covers all 64 key bits: 11 digits of 6 bits (the top level
	// uses only 16 of its slots).
	numLevels = (64 + digitBits - 1) / digitBits
	// deferredBucket is the list of timers armed by callbacks during
	// Advance with a deadline <= now; they wait outside the wheel so the
	// running Advance cannot reach them.
	deferredBucket = numLevels * slotsPerLv
	numBuckets     = deferredBucket + 1

	// keyBias flips the sign bit so that unsigned key order equals signed
	// time order over the whole int64 range.
	keyBias = 1 << 63
)

func toKey(d time.Duration) uint64 { return uint64(d) ^ keyBias }

func fromKey(k uint64) time.Duration { return time.Duration(k ^ keyBias) }

// levelOf returns the level of a timer whose key differs from the wheel's
// position by the bits in diff: the index of the most significant differing
// digit.
func levelOf(diff uint64) int {
	if diff == 0 {
		return 0
	}
	return (bits.Len64(diff) - 1) / digitBits
}

// Timer is an intrusive timer: embed it in the object it times (a QP, a
// connection) so that arming it never allocates. Call Init once before the
// first Schedule. The zero Timer is disarmed.
type Timer struct {
	next, prev *Timer // circular FIFO of the bucket the timer is in
	wheel      *Wheel // non-nil exactly while armed
	key        uint64 // deadline as a key (after clamping)
	bucket     int32  // index into Wheel.heads while armed
	fn         func(now time.Duration)
}

// Init sets the callback run when the timer fires; fn receives the time
// passed to Advance (which may be later than the deadline). Init must not be
// called while the timer is armed.
func (t *Timer) Init(fn func(now time.Duration)) {
	if fn == nil {
		panic("timer: Init with a nil callback")
	}
	if t.wheel != nil {
		panic("timer: Init of an armed Timer")
	}
	t.fn = fn
}

// Armed reports whether the timer is scheduled and has not yet fired or been
// stopped. Inside its own callback a timer is no longer armed, so the
// callback may re-arm it.
func (t *Timer) Armed() bool { return t.wheel != nil }

// Deadline returns the deadline the timer was last scheduled for, after
// clamping to the wheel's time (see Schedule). It stays readable after the
// timer fired or was stopped.
func (t *Timer) Deadline() time.Duration { return fromKey(t.key) }

// Wheel is a hierarchical timing wheel; see the package documentation. The
// zero Wheel is not usable: create one with NewWheel.
type Wheel struct {
	now uint64 // key of the wheel's current time (Now)
	// pos is the position timers are placed relative to. It equals now
	// except inside Advance, where it walks from the old now to the new one
	// through the instants at which timers fire.
	pos uint64

	heads     [numBuckets]*Timer // FIFO heads; a head's prev is the tail
	occupied  [numLevels]uint64  // bit s of occupied[L]: slot L*64+s is non-empty
	nonEmpty  uint16             // bit L: occupied[L] != 0
	armed     int
	advancing bool

	// minKey caches the earliest armed deadline while minValid is set.
	minKey   uint64
	minValid bool
}

// NewWheel returns an empty wheel whose current time is start.
func NewWheel(start time.Duration) *Wheel {
	k := toKey(start)
	return &Wheel{now: k, pos: k}
}

// Now returns the wheel's current time: the start time or the latest Advance
// that did not go backwards. Deadlines earlier than Now are clamped to it.
func (w *Wheel) Now() time.Duration { return fromKey(w.now) }

// Len returns the number of armed timers.
func (w *Wheel) Len() int { return w.armed }

// Schedule arms t to fire at deadline, first disarming it if it is already
// armed (so a reschedule counts as a new scheduling for tie order). A
// deadline earlier than Now is clamped to Now and fires on the next Advance.
// Called from a callback during Advance(now), a deadline <= now is clamped to
// now and fires on the next Advance, not the running one. t must have been
// initialised with Init and must not be armed on another wheel.
func (w *Wheel) Schedule(t *Timer, deadline time.Duration) {
	if t.fn == nil {
		panic("timer: Schedule of a Timer without Init")
	}
	if t.wheel != nil {
		if t.wheel != w {
			panic("timer: Schedule of a Timer armed on another Wheel")
		}
		w.remove(t)
	}
	key := toKey(deadline)
	if key <= w.now {
		key = w.now
	}
	t.key = key
	t.wheel = w
	if w.advancing && key == w.now {
		w.link(t, deferredBucket)
	} else {
		w.place(t)
	}
	switch {
	case w.armed == 0:
		w.minKey, w.minValid = key, true
	case w.minValid && key < w.minKey:
		w.minKey = key
	}
	w.armed++
}

// Stop disarms t. It is a no-op if t is not armed; a timer stopped by a
// callback before its turn in the running Advance does not fire.
func (w *Wheel) Stop(t *Timer) {
	if t.wheel == nil {
		return
	}
	if t.wheel != w {
		panic("timer: Stop of a Timer armed on another Wheel")
	}
	w.remove(t)
}

// Advance moves the wheel's time to now and fires every timer due by then, in
// deadline order with ties in scheduling order, calling each callback with
// now. It returns the number of timers fired. An Advance to a time before Now
// does nothing and returns 0. Advance must not be called from a callback.
func (w *Wheel) Advance(now time.Duration) int {
	if w.advancing {
		panic("timer: Advance called from a timer callback")
	}
	target := toKey(now)
	if target < w.now {
		return 0
	}
	w.now = target
	w.advancing = true
	fired := 0
	for w.nonEmpty != 0 {
		level := bits.TrailingZeros16(w.nonEmpty)
		slot := bits.TrailingZeros64(w.occupied[level])
		shift := uint(level * digitBits)
		// The slot covers keys that share pos's digits above level and
		// have digit level == slot. For level 10, shift+digitBits is 66
		// and the Go shift yields 0, so the mask keeps nothing: right.
		start := w.pos&^(uint64(1)<<(shift+digitBits)-1) | uint64(slot)<<shift
		if start > target {
			break
		}
		// No armed key lies in [pos, start): every lower level is empty
		// and this is the lowest slot of its level. Moving pos there keeps
		// every other timer at its level and slot.
		w.pos = start
		b := level*slotsPerLv + slot
		if level == 0 {
			fired += w.fire(b, now)
		} else {
			w.cascade(b)
		}
	}
	// Every remaining slot starts after target (it is at least as late as
	// the slot that stopped the loop), so pos may move to target without
	// re-placing anything.
	w.pos = target
	w.advancing = false
	for t := w.heads[deferredBucket]; t != nil; t = w.heads[deferredBucket] {
		w.unlink(t)
		w.place(t)
	}
	return fired
}

// fire runs the timers of level-0 bucket b, all due at pos, in FIFO order.
// Callbacks cannot add to b: a deadline <= now is deferred and a later one
// lands elsewhere, so the loop ends.
func (w *Wheel) fire(b int, now time.Duration) int {
	n := 0
	for t := w.heads[b]; t != nil; t = w.heads[b] {
		w.remove(t)
		n++
		t.fn(now)
	}
	return n
}

// cascade re-places, in FIFO order, every timer of bucket b after pos moved
// to the start of b's window; each lands on a lower level.
func (w *Wheel) cascade(b int) {
	head := w.heads[b]
	tail := head.prev
	w.heads[b] = nil
	w.clearBit(b)
	for t := head; ; {
		next := t.next
		w.place(t)
		if t == tail {
			return
		}
		t = next
	}
}

// NextDeadline returns the earliest deadline among armed timers, exactly, and
// false if none is armed. Advance(deadline) fires at least that timer.
func (w *Wheel) NextDeadline() (time.Duration, bool) {
	if w.armed == 0 {
		return 0, false
	}
	if !w.minValid {
		w.minKey = w.earliest()
		w.minValid = true
	}
	return fromKey(w.minKey), true
}

// earliest computes the earliest armed key. Every key at level L is below
// every key at level L+1, and slots of a level are in key order, so the
// minimum is in the lowest occupied slot of the lowest occupied level.
func (w *Wheel) earliest() uint64 {
	lowest := uint64(math.MaxUint64)
	if w.nonEmpty != 0 {
		level := bits.TrailingZeros16(w.nonEmpty)
		b := level*slotsPerLv + bits.TrailingZeros64(w.occupied[level])
		head := w.heads[b]
		if level == 0 {
			// A level-0 slot holds a single deadline.
			lowest = head.key
		} else {
			for t := head; ; {
				if t.key < lowest {
					lowest = t.key
				}
				if t = t.next; t == head {
					break
				}
			}
		}
	}
	// Deferred timers (only inside Advance) are due at now.
	if w.heads[deferredBucket] != nil && w.now < lowest {
		lowest = w.now
	}
	return lowest
}

// place links t into its slot relative to pos.
func (w *Wheel) place(t *Timer) {
	level := levelOf(t.key ^ w.pos)
	slot := int(t.key>>uint(level*digitBits)) & digitMask
	w.link(t, level*slotsPerLv+slot)
}

// remove disarms an armed timer and keeps the earliest-deadline cache honest.
func (w *Wheel) remove(t *Timer) {
	w.unlink(t)
	t.wheel = nil
	w.armed--
	if t.key == w.minKey {
		w.minValid = false
	}
}

// link appends t to the FIFO of bucket b.
func (w *Wheel) link(t *Timer, b int) {
	t.bucket = int32(b)
	head := w.heads[b]
	if head == nil {
		t.next, t.prev = t, t
		w.heads[b] = t
		if b != deferredBucket {
			level := b / slotsPerLv
			w.occupied[level] |= 1 << uint(b%slotsPerLv)
			w.nonEmpty |= 1 << uint(level)
		}
		return
	}
	tail := head.prev
	t.prev, t.next = tail, head
	tail.next = t
	head.prev = t
}

// unlink takes t out of its bucket's FIFO.
func (w *Wheel) unlink(t *Timer) {
	b := int(t.bucket)
	if t.next == t {
		w.heads[b] = nil
		w.clearBit(b)
	} else {
		t.prev.next = t.next
		t.next.prev = t.prev
		if w.heads[b] == t {
			w.heads[b] = t.next
		}
	}
	t.next, t.prev = nil, nil
}

func (w *Wheel) clearBit(b int) {
	if b == deferredBucket {
		return
	}
	level := b / slotsPerLv
	w.occupied[level] &^= 1 << uint(b%slotsPerLv)
	if w.occupied[level] == 0 {
		w.nonEmpty &^= 1 << uint(level)
	}
}
