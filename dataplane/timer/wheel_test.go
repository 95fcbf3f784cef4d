package timer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the reference the wheel is checked against: a plain list of
// timers, each with its clamped deadline and the sequence number of its
// latest scheduling, from which the due set is sorted on every Advance.
type model struct {
	now    time.Duration
	timers []modelTimer
	seq    uint64
	armed  int
}

type modelTimer struct {
	armed    bool
	deadline time.Duration
	seq      uint64
}

// dueEntry identifies one scheduling of a timer; it is stale once the timer
// is stopped or rescheduled.
type dueEntry struct {
	id       int
	deadline time.Duration
	seq      uint64
}

func (m *model) schedule(id int, deadline time.Duration) {
	// Before and during Advance alike the wheel's time is the latest
	// Advance target: nothing can be due before it.
	deadline = max(deadline, m.now)
	mt := &m.timers[id]
	if !mt.armed {
		m.armed++
	}
	m.seq++
	*mt = modelTimer{armed: true, deadline: deadline, seq: m.seq}
}

func (m *model) stop(id int) {
	if m.timers[id].armed {
		m.timers[id].armed = false
		m.armed--
	}
}

func (m *model) next() (time.Duration, bool) {
	if m.armed == 0 {
		return 0, false
	}
	earliest := time.Duration(math.MaxInt64)
	for _, mt := range m.timers {
		if mt.armed && mt.deadline < earliest {
			earliest = mt.deadline
		}
	}
	return earliest, true
}

// due lists the timers an Advance to now must fire, in firing order.
func (m *model) due(now time.Duration, into []dueEntry) []dueEntry {
	into = into[:0]
	for id, mt := range m.timers {
		if mt.armed && mt.deadline <= now {
			into = append(into, dueEntry{id: id, deadline: mt.deadline, seq: mt.seq})
		}
	}
	slices.SortFunc(into, func(a, b dueEntry) int {
		if a.deadline != b.deadline {
			if a.deadline < b.deadline {
				return -1
			}
			return 1
		}
		if a.seq < b.seq {
			return -1
		}
		return 1
	})
	return into
}

func (m *model) current(e dueEntry) bool {
	mt := m.timers[e.id]
	return mt.armed && mt.seq == e.seq
}

// harness runs the same random operations on a Wheel and on the model and
// checks them against each other after every step and inside every callback.
type harness struct {
	tb     testing.TB
	rng    *rand.Rand
	wheel  *Wheel
	timers []Timer
	m      model

	// Per Advance: the expected firing order, how far it has been
	// consumed, the Advance argument and the callbacks seen.
	due    []dueEntry
	duePos int
	target time.Duration
	fired  int
	ops    int
}

func newHarness(tb testing.TB, seed uint64, start time.Duration, n int) *harness {
	h := &harness{
		tb:     tb,
		rng:    rand.New(rand.NewPCG(seed, 0x5eed)),
		wheel:  NewWheel(start),
		timers: make([]Timer, n),
		m:      model{now: start, timers: make([]modelTimer, n)},
	}
	for id := range h.timers {
		h.timers[id].Init(func(now time.Duration) { h.onFire(id, now) })
	}
	return h
}

func satAdd(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// logUniform returns a duration spread evenly over magnitudes from 1 ns to
// 2^maxBits ns, so that every wheel level sees traffic.
func (h *harness) logUniform(maxBits int) time.Duration {
	k := h.rng.IntN(maxBits + 1)
	return time.Duration(h.rng.Int64N(int64(1)<<k) + 1)
}

func (h *harness) randDeadline() time.Duration {
	now := h.m.now
	switch r := h.rng.IntN(100); {
	case r < 6: // in the past
		return satAdd(now, -h.logUniform(44))
	case r < 12: // exactly now
		return now
	case r < 14: // effectively never
		return math.MaxInt64 - time.Duration(h.rng.IntN(3))
	case r < 24: // the same deadline as another timer, for ties
		other := h.m.timers[h.rng.IntN(len(h.m.timers))]
		if other.armed {
			return other.deadline
		}
		return satAdd(now, 4096)
	case r < 34: // a typical transport timeout: 10 µs to 100 ms
		return satAdd(now, 10*time.Microsecond+time.Duration(h.rng.Int64N(int64(100*time.Millisecond))))
	default: // 1 ns to 4.9 hours
		return satAdd(now, h.logUniform(44))
	}
}

// step performs one random top-level operation.
func (h *harness) step() {
	h.ops++
	switch r := h.rng.IntN(100); {
	case r < 45:
		h.schedule(h.rng.IntN(len(h.timers)), h.randDeadline())
	case r < 65:
		h.stop(h.rng.IntN(len(h.timers)))
	default:
		h.advance(h.randAdvance())
	}
	h.check()
}

func (h *harness) randAdvance() time.Duration {
	now := h.m.now
	next, ok := h.m.next()
	switch r := h.rng.IntN(100); {
	case r < 35 && ok: // exactly to the next deadline, as a simulator does
		return next
	case r < 45 && ok: // just before it: must fire nothing
		return max(now, next-1)
	case r < 50: // backwards: a no-op
		return satAdd(now, -h.logUniform(20))
	case r < 55: // same time again
		return now
	default:
		return satAdd(now, h.logUniform(h.rng.IntN(40)+1))
	}
}

func (h *harness) schedule(id int, deadline time.Duration) {
	h.ops++
	h.wheel.Schedule(&h.timers[id], deadline)
	h.m.schedule(id, deadline)
}

func (h *harness) stop(id int) {
	h.ops++
	h.wheel.Stop(&h.timers[id])
	h.m.stop(id)
}

func (h *harness) advance(now time.Duration) {
	h.ops++
	if now < h.m.now {
		if n := h.wheel.Advance(now); n != 0 {
			h.tb.Fatalf("Advance(%d) backwards from %d fired %d timers", now, h.m.now, n)
		}
		return
	}
	h.m.now = now
	h.due = h.m.due(now, h.due)
	h.duePos, h.fired, h.target = 0, 0, now
	n := h.wheel.Advance(now)
	for ; h.duePos < len(h.due); h.duePos++ {
		if e := h.due[h.duePos]; h.m.current(e) {
			h.tb.Fatalf("Advance(%d) did not fire timer %d (deadline %d)", now, e.id, e.deadline)
		}
	}
	if n != h.fired {
		h.tb.Fatalf("Advance(%d) returned %d, %d callbacks ran", now, n, h.fired)
	}
	if h.wheel.Now() != now {
		h.tb.Fatalf("Now() = %d after Advance(%d)", h.wheel.Now(), now)
	}
}

// onFire is every timer's callback: it checks the timer is the next one the
// model expects, then disturbs the wheel from inside the callback.
func (h *harness) onFire(id int, now time.Duration) {
	for h.duePos < len(h.due) && !h.m.current(h.due[h.duePos]) {
		h.duePos++
	}
	if h.duePos == len(h.due) {
		h.tb.Fatalf("timer %d fired at %d, model expected nothing more", id, now)
	}
	want := h.due[h.duePos]
	h.duePos++
	if want.id != id {
		h.tb.Fatalf("at %d timer %d fired, want timer %d (deadline %d)", now, id, want.id, want.deadline)
	}
	if now != h.target || want.deadline > now {
		h.tb.Fatalf("timer %d (deadline %d) called with %d during Advance(%d)", id, want.deadline, now, h.target)
	}
	t := &h.timers[id]
	if t.Armed() || t.Deadline() != want.deadline {
		h.tb.Fatalf("firing timer %d: Armed %v Deadline %d, want false %d", id, t.Armed(), t.Deadline(), want.deadline)
	}
	h.m.timers[id].armed = false
	h.m.armed--
	h.fired++

	for range h.rng.IntN(4) {
		switch r := h.rng.IntN(100); {
		case r < 20: // re-arm itself, possibly in the past
			h.schedule(id, h.randDeadline())
		case r < 30: // re-arm itself at now: deferred, must not loop
			h.schedule(id, now)
		case r < 55: // stop a timer still due in this Advance
			if h.duePos < len(h.due) {
				h.stop(h.due[h.duePos+h.rng.IntN(len(h.due)-h.duePos)].id)
			}
		case r < 65: // stop itself: a no-op
			h.stop(id)
		case r < 80: // reschedule a timer still due in this Advance
			if h.duePos < len(h.due) {
				h.schedule(h.due[h.duePos+h.rng.IntN(len(h.due)-h.duePos)].id, h.randDeadline())
			}
		default:
			h.schedule(h.rng.IntN(len(h.timers)), h.randDeadline())
		}
	}
	h.check()
}

func (h *harness) check() {
	if got, want := h.wheel.Len(), h.m.armed; got != want {
		h.tb.Fatalf("Len() = %d, want %d", got, want)
	}
	gotD, gotOK := h.wheel.NextDeadline()
	wantD, wantOK := h.m.next()
	if gotD != wantD || gotOK != wantOK {
		h.tb.Fatalf("NextDeadline() = %d, %v; want %d, %v", gotD, gotOK, wantD, wantOK)
	}
	id := h.rng.IntN(len(h.timers))
	t, mt := &h.timers[id], h.m.timers[id]
	if t.Armed() != mt.armed || (mt.armed && t.Deadline() != mt.deadline) {
		h.tb.Fatalf("timer %d: Armed %v Deadline %d; model %v %d", id, t.Armed(), t.Deadline(), mt.armed, mt.deadline)
	}
}

// TestWheelMatchesModel is the randomized property test: fire order, fire
// times, Len and NextDeadline agree with the sorted-list model after every
// operation, across epochs that put keys at both ends of the int64 range.
func TestWheelMatchesModel(t *testing.T) {
	starts := []time.Duration{0, 12345, -1 << 62, math.MinInt64, math.MaxInt64 - 1<<46}
	steps := 60_000
	if testing.Short() {
		steps = 20_000
	}
	for i, start := range starts {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			h := newHarness(t, uint64(i)+1, start, 512)
			for range steps {
				h.step()
			}
			// Drain: everything armed fires, exactly, in order.
			for {
				next, ok := h.wheel.NextDeadline()
				if !ok {
					break
				}
				h.advance(next)
				h.check()
			}
			if h.ops < 100_000 && !testing.Short() {
				t.Fatalf("only %d operations", h.ops)
			}
			t.Logf("%d operations", h.ops)
		})
	}
}

func newTimer(fn func(now time.Duration)) *Timer {
	t := new(Timer)
	t.Init(fn)
	return t
}

func TestPastDeadlineFiresOnNextAdvance(t *testing.T) {
	w := NewWheel(1000)
	var firedAt time.Duration = -1
	tm := newTimer(func(now time.Duration) { firedAt = now })
	w.Schedule(tm, 10)
	if tm.Deadline() != 1000 {
		t.Fatalf("Deadline() = %d, want it clamped to 1000", tm.Deadline())
	}
	if d, ok := w.NextDeadline(); !ok || d != 1000 {
		t.Fatalf("NextDeadline() = %d, %v", d, ok)
	}
	if n := w.Advance(999); n != 0 {
		t.Fatalf("backwards Advance fired %d", n)
	}
	if n := w.Advance(1000); n != 1 || firedAt != 1000 {
		t.Fatalf("Advance(1000) = %d, fired at %d", n, firedAt)
	}
}

func TestNeverEarlyAlwaysOnTime(t *testing.T) {
	// Deadlines on and around every slot boundary of every level.
	for level := range numLevels {
		for _, delta := range []int64{-1, 0, 1} {
			shift := uint(level * digitBits)
			if shift > 62 {
				continue
			}
			deadline := time.Duration(int64(1)<<shift + delta)
			if deadline <= 0 {
				continue
			}
			w := NewWheel(0)
			fired := 0
			w.Schedule(newTimer(func(time.Duration) { fired++ }), deadline)
			if w.Advance(deadline-1) != 0 || fired != 0 {
				t.Fatalf("deadline %d fired at %d", deadline, deadline-1)
			}
			if w.Advance(deadline) != 1 || fired != 1 {
				t.Fatalf("deadline %d did not fire at %d", deadline, deadline)
			}
		}
	}
}

func TestSameDeadlineFiresInSchedulingOrder(t *testing.T) {
	w := NewWheel(0)
	var order []int
	timers := make([]*Timer, 6)
	for i := range timers {
		timers[i] = newTimer(func(time.Duration) { order = append(order, i) })
	}
	// Scheduled from far away (high level) and near (level 0) so that ties
	// meet through cascades; rescheduling 0 moves it to the back.
	const deadline = 5 * time.Second
	w.Schedule(timers[0], deadline)
	w.Schedule(timers[1], deadline)
	w.Advance(deadline - 100*time.Millisecond)
	w.Schedule(timers[2], deadline)
	w.Schedule(timers[0], deadline)
	w.Advance(deadline - 10)
	w.Schedule(timers[3], deadline)
	w.Schedule(timers[4], deadline-1)
	w.Schedule(timers[5], deadline)
	if n := w.Advance(deadline); n != 6 {
		t.Fatalf("fired %d", n)
	}
	if want := []int{4, 1, 2, 0, 3, 5}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

func TestStopWhileFiring(t *testing.T) {
	w := NewWheel(0)
	var order []string
	var a, b, c *Timer
	a = newTimer(func(time.Duration) {
		order = append(order, "a")
		w.Stop(b) // due in this Advance, not yet fired: must not fire
		w.Stop(a) // itself, already disarmed: a no-op
	})
	b = newTimer(func(time.Duration) { order = append(order, "b") })
	c = newTimer(func(time.Duration) { order = append(order, "c") })
	w.Schedule(a, 10)
	w.Schedule(b, 10)
	w.Schedule(c, 20)
	if n := w.Advance(30); n != 2 || !slices.Equal(order, []string{"a", "c"}) || w.Len() != 0 {
		t.Fatalf("fired %d: %v, Len %d", n, order, w.Len())
	}
}

func TestRearmAtNowDoesNotLoop(t *testing.T) {
	w := NewWheel(0)
	fires := 0
	var tm *Timer
	tm = newTimer(func(now time.Duration) {
		fires++
		w.Schedule(tm, now) // "immediately": fires on the next Advance
	})
	w.Schedule(tm, 7)
	for i := 1; i <= 3; i++ {
		if n := w.Advance(7); n != 1 || fires != i {
			t.Fatalf("Advance %d fired %d (total %d)", i, n, fires)
		}
		if d, ok := w.NextDeadline(); !ok || d != 7 || tm.Deadline() != 7 {
			t.Fatalf("NextDeadline() = %d, %v", d, ok)
		}
	}
}

func TestCallbackSchedulesBetweenDueAndNow(t *testing.T) {
	// A timer armed by a callback with a deadline between the firing
	// timer's and now is deferred to the next Advance (clamped to now),
	// while one after now is an ordinary timer.
	w := NewWheel(0)
	var order []string
	early := newTimer(func(time.Duration) { order = append(order, "early") })
	late := newTimer(func(time.Duration) { order = append(order, "late") })
	first := newTimer(func(time.Duration) {
		order = append(order, "first")
		w.Schedule(early, 50)
		w.Schedule(late, 150)
	})
	w.Schedule(first, 10)
	if n := w.Advance(100); n != 1 {
		t.Fatalf("Advance(100) fired %d", n)
	}
	if early.Deadline() != 100 || late.Deadline() != 150 {
		t.Fatalf("deadlines %d %d", early.Deadline(), late.Deadline())
	}
	if n := w.Advance(100); n != 1 {
		t.Fatalf("second Advance(100) fired %d", n)
	}
	if n := w.Advance(200); n != 1 || !slices.Equal(order, []string{"first", "early", "late"}) {
		t.Fatalf("fired %d: %v", n, order)
	}
}

func TestHugeDeadlines(t *testing.T) {
	w := NewWheel(math.MinInt64)
	var order []time.Duration
	record := func(now time.Duration) { order = append(order, now) }
	deadlines := []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 0, -1, math.MinInt64 + 1, 4096 << 31}
	for _, d := range deadlines {
		w.Schedule(newTimer(record), d)
	}
	sorted := slices.Clone(deadlines)
	slices.Sort(sorted)
	for _, d := range sorted {
		if next, ok := w.NextDeadline(); !ok || next != d {
			t.Fatalf("NextDeadline() = %d, %v; want %d", next, ok, d)
		}
		if n := w.Advance(d); n != 1 {
			t.Fatalf("Advance(%d) fired %d", d, n)
		}
	}
	if !slices.Equal(order, sorted) {
		t.Fatalf("fired at %v, want %v", order, sorted)
	}
	if _, ok := w.NextDeadline(); ok || w.Len() != 0 {
		t.Fatal("wheel not empty")
	}
}

func TestAdvanceBackwardsIsNoop(t *testing.T) {
	w := NewWheel(500)
	fired := 0
	w.Schedule(newTimer(func(time.Duration) { fired++ }), 600)
	w.Advance(550)
	if n := w.Advance(100); n != 0 || w.Now() != 550 {
		t.Fatalf("backwards Advance fired %d, Now %d", n, w.Now())
	}
	if n := w.Advance(600); n != 1 || fired != 1 {
		t.Fatalf("Advance(600) fired %d", n)
	}
}

func TestRescheduleAndStop(t *testing.T) {
	w := NewWheel(0)
	fired := 0
	tm := newTimer(func(time.Duration) { fired++ })
	w.Stop(tm) // not armed: no-op
	w.Schedule(tm, time.Hour)
	w.Schedule(tm, time.Millisecond)
	if w.Len() != 1 || tm.Deadline() != time.Millisecond {
		t.Fatalf("Len %d Deadline %d", w.Len(), tm.Deadline())
	}
	w.Stop(tm)
	w.Stop(tm)
	if tm.Armed() || w.Len() != 0 || w.Advance(2*time.Hour) != 0 || fired != 0 {
		t.Fatal("stopped timer fired or still counted")
	}
}

func TestMisusePanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	w, other := NewWheel(0), NewWheel(0)
	mustPanic("Schedule without Init", func() { w.Schedule(new(Timer), 1) })
	mustPanic("Init with nil", func() { new(Timer).Init(nil) })
	armed := newTimer(func(time.Duration) {})
	w.Schedule(armed, 10)
	mustPanic("Init while armed", func() { armed.Init(func(time.Duration) {}) })
	mustPanic("Schedule on another wheel", func() { other.Schedule(armed, 1) })
	mustPanic("Stop on another wheel", func() { other.Stop(armed) })
	reentrant := newTimer(func(now time.Duration) { w.Advance(now) })
	w.Schedule(reentrant, 1)
	mustPanic("Advance from a callback", func() { w.Advance(5) })
}

// steadyWheel arms n timers that re-arm themselves with deadlines from a
// precomputed table spanning 10 µs to 100 ms, so firing does not allocate or
// draw random numbers.
func steadyWheel(n int) (*Wheel, []Timer, []time.Duration) {
	rng := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, 4096)
	for i := range delays {
		delays[i] = 10*time.Microsecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
	}
	w := NewWheel(0)
	timers := make([]Timer, n)
	next := 0
	for i := range timers {
		timers[i].Init(func(now time.Duration) {
			next = (next + 1) % len(delays)
			w.Schedule(&timers[i], now+delays[next])
		})
		w.Schedule(&timers[i], delays[i%len(delays)])
	}
	return w, timers, delays
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	w, timers, delays := steadyWheel(10_000)
	extra := newTimer(func(time.Duration) {})
	now := time.Duration(0)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		w.Schedule(extra, now+delays[i%len(delays)])
		w.Schedule(&timers[i%len(timers)], now+delays[(i*7)%len(delays)])
		w.NextDeadline()
		w.Stop(extra)
		now += 50 * time.Microsecond
		w.Advance(now)
		w.NextDeadline()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Schedule/Stop/Advance/NextDeadline round", allocs)
	}
}

// BenchmarkScheduleStop arms and disarms one timer while 10k others are
// armed: the cost of an ACK timer that is set and then cancelled.
func BenchmarkScheduleStop(b *testing.B) {
	w, _, delays := steadyWheel(10_000)
	tm := newTimer(func(time.Duration) {})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Schedule(tm, delays[i%len(delays)])
		w.Stop(tm)
		i++
	}
}

// BenchmarkReschedule moves armed timers to new deadlines among 10k: the
// cost of pushing a retransmission timer back on every ACK.
func BenchmarkReschedule(b *testing.B) {
	w, timers, delays := steadyWheel(10_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Schedule(&timers[i%len(timers)], delays[(i*7)%len(delays)])
		i++
	}
}

// BenchmarkAdvance advances 1 µs per operation through 10k self-re-arming
// timers (10 µs to 100 ms), including the cascades; ns/fire is the cost per
// timer fired and re-armed.
func BenchmarkAdvance(b *testing.B) {
	w, _, _ := steadyWheel(10_000)
	b.ReportAllocs()
	now := time.Duration(0)
	fired := 0
	for b.Loop() {
		now += time.Microsecond
		fired += w.Advance(now)
	}
	b.ReportMetric(float64(fired)/float64(b.N), "fires/op")
	if fired > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fired), "ns/fire")
	}
}

// BenchmarkNextDeadline measures the worst case of the poll loop's idle
// path among 10k timers: the earliest timer is cancelled, so the next
// NextDeadline rescans the earliest slot instead of using its cache.
func BenchmarkNextDeadline(b *testing.B) {
	w, _, _ := steadyWheel(10_000)
	earliest := newTimer(func(time.Duration) {})
	b.ReportAllocs()
	for b.Loop() {
		next, _ := w.NextDeadline()
		w.Schedule(earliest, next-1)
		w.Stop(earliest)
	}
}

func ExampleWheel() {
	w := NewWheel(0)
	var ackTimeout Timer
	ackTimeout.Init(func(now time.Duration) {
		fmt.Println("ACK timeout at", now)
	})
	w.Schedule(&ackTimeout, 4096*time.Nanosecond<<3) // IB ACK timeout, n=3

	// The poll loop sleeps until the next deadline, then fires it.
	next, _ := w.NextDeadline()
	fmt.Println("next deadline", next)
	fmt.Println("fired", w.Advance(next))
	// Output:
	// next deadline 32.768µs
	// ACK timeout at 32.768µs
	// fired 1
}
