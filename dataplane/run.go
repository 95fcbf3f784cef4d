package dataplane

import (
	"context"
	"math"
	"time"
)

// Waiter is what a poll loop blocks on when its engine is idle: the port's
// file descriptor and a doorbell, or just a timer.
type Waiter interface {
	// Wait returns when frames may have arrived, Wake was called, or
	// timeout passed.
	Wait(timeout time.Duration)
	// Wake makes a current or the next Wait return at once. Safe from any
	// goroutine.
	Wake()
}

// RunConfig tunes the adaptive poll loop.
type RunConfig struct {
	// IdlePolls is how many empty polls the loop spins through before it
	// blocks (default 32): long enough to catch the next packet of a busy
	// flow, short enough not to starve the kernel's own packet work on a
	// small machine.
	IdlePolls int
	// MaxWait bounds one blocking wait (default 1 s). Cancellation wakes
	// the loop at once, so it only bounds how stale the loop's view can
	// get of anything that does not ring (an idle NIC wakes this often).
	MaxWait time.Duration
	// BusyPoll keeps the loop polling until this long after the last
	// work before it blocks, like the kernel's SO_BUSY_POLL: a
	// ping-pong's next packet or doorbell then finds the loop awake
	// instead of paying a wake-up (a ppoll return, a Go runtime
	// exitsyscall, often a migration: tens of microseconds on a loaded
	// two-core host). Past IdlePolls every empty poll yields the processor
	// (sched_yield), so the loop costs a runnable peer daemon or
	// application nothing but the yield: on a host with fewer cores than
	// busy processes they take turns at once instead of waiting for a
	// time slice, and an idle NIC still blocks after BusyPoll. 0 blocks
	// after IdlePolls empty polls.
	BusyPoll time.Duration
	// Pump, if set, runs on the loop's goroutine after every Poll, outside
	// the engine lock: the verbs server moves work posted in shared memory
	// into the engine and completions out. It reports whether it moved
	// anything.
	Pump func() bool
	// BeforeWait, if set, runs just before the loop blocks (to raise
	// need-wakeup flags in shared memory, then Pump once more).
	BeforeWait func()
	// LinkSpin: when the only thing holding packets back is the emulated
	// link's bucket (Config.LinkRate) and it opens sooner than this, the
	// loop keeps polling instead of blocking (default 2 ms; negative:
	// always block). A blocking wait overshoots short timeouts (one below
	// a millisecond takes about 1.08 ms on the two-core testbed), which
	// would cut the link to one burst per wake-up; a paced link is a busy
	// one, and a loop with traffic spins anyway.
	LinkSpin time.Duration
}

const defaultLinkSpin = 2 * time.Millisecond

func (rc RunConfig) withDefaults() RunConfig {
	if rc.IdlePolls <= 0 {
		rc.IdlePolls = 32
	}
	if rc.MaxWait <= 0 {
		rc.MaxWait = time.Second
	}
	if rc.LinkSpin == 0 {
		rc.LinkSpin = defaultLinkSpin
	}
	return rc
}

// A Group is engines that share one clock and one poll loop, and the
// other sources of events that wake them: Engine.Run drives a group of one
// engine; package dataplane/sim drives its two engines and the fabric
// between them as a group, in simulated time (Step, RunUntil, RunFor) or on
// the wall clock (Run). There is one poll loop, Run, so that whatever it
// learns (IdlePolls, MaxWait, BusyPoll, LinkSpin, Pump, BeforeWait) holds
// for the daemon and the embedded mode alike, and one event step, Step,
// which the simulator and this package's tests share.
type Group struct {
	Engines []*Engine
	// Events are the other sources of events (a fabric port's frame
	// deliveries): each returns when its next event is due, if one is.
	Events []func() (time.Duration, bool)
}

// Run drives e until ctx ends: poll while there is work, spin a little
// when there is none, then block in w until the next timer deadline.
// now is the engine's clock (time since its epoch). It is Group.Run for a
// group of one.
func (e *Engine) Run(ctx context.Context, w Waiter, now func() time.Duration, rc RunConfig) {
	Group{Engines: []*Engine{e}}.Run(ctx, w, now, rc)
}

// Run drives the group until ctx ends: poll every engine (each every round)
// while there is work, spin a little when there is none, then block in w
// until the next timer deadline or event. now is the engines' clock, read
// once a round before the engines are polled (a simulator's wall-clock mode
// moves its simulated clock there).
func (g Group) Run(ctx context.Context, w Waiter, now func() time.Duration, rc RunConfig) {
	rc = rc.withDefaults()
	for _, e := range g.Engines {
		e.SetDoorbell(w.Wake)
		defer e.SetDoorbell(nil)
	}
	stop := context.AfterFunc(ctx, w.Wake)
	defer stop()
	idle := 0
	var lastWork time.Duration
	for ctx.Err() == nil {
		t := now()
		busy := false
		for _, e := range g.Engines {
			if e.Poll(t) {
				busy = true
			}
		}
		if rc.Pump != nil && rc.Pump() { // every round, busy or not
			busy = true
		}
		if busy {
			idle, lastWork = 0, t
			continue
		}
		if idle++; idle < rc.IdlePolls {
			continue
		}
		if t-lastWork < rc.BusyPoll {
			yieldCPU()
			continue
		}
		idle = 0
		if g.linkBusy(t, rc.LinkSpin) {
			yieldCPU() // an emulated link is busy: poll until it takes more
			continue
		}
		if rc.BeforeWait != nil {
			rc.BeforeWait()
			if rc.Pump != nil && rc.Pump() {
				continue
			}
		}
		wait := rc.MaxWait
		if d, ok := g.nextEvent(math.MinInt64); ok {
			wait = min(wait, max(0, d-t))
		}
		if wait > 0 {
			w.Wait(wait)
		}
	}
}

// linkBusy reports whether an engine's emulated link holds packets back
// and takes them again sooner than spin after now.
func (g Group) linkBusy(now, spin time.Duration) bool {
	for _, e := range g.Engines {
		if d, ok := e.linkWait(now); ok && d < spin {
			return true
		}
	}
	return false
}

// nextEvent is the earliest event after after of every source: the
// engines' deadlines (NextDeadline), then Events.
func (g Group) nextEvent(after time.Duration) (next time.Duration, found bool) {
	for _, e := range g.Engines {
		if t, ok := e.NextDeadline(); ok && t > after && (!found || t < next) {
			next, found = t, true
		}
	}
	for _, ev := range g.Events {
		if t, ok := ev(); ok && t > after && (!found || t < next) {
			next, found = t, true
		}
	}
	return next, found
}

// SimClock is simulated time: it moves only when set (fabric.FakeClock).
type SimClock interface {
	Now() time.Duration
	Set(time.Duration)
}

// Step polls the engines at c's time until none has anything to do (the
// first engine until it is idle, then the next, and from the first again
// whenever one did work), then moves c to the next event. It returns
// false when nothing at all is pending (no frame in flight, no timer
// armed).
func (g Group) Step(c SimClock) bool {
	g.drain(c.Now())
	return g.advance(c)
}

// drain polls the engines at now until none has anything to do, and
// reports whether one did work.
func (g Group) drain(now time.Duration) (worked bool) {
	for again := true; again; {
		again = false
		for _, e := range g.Engines {
			if e.Poll(now) {
				again, worked = true, true
				break
			}
		}
	}
	return worked
}

// advance moves c to the next event; false when nothing is pending.
func (g Group) advance(c SimClock) bool {
	now := c.Now()
	// No engine can do anything at now, so whatever is due at or before
	// now waits for a later event (frames for an engine whose pipeline is
	// stalled on a context fetch wait for the fetch, its NextDeadline):
	// take the earliest event after now, per source, so that one engine's
	// stall never delays another's frames. An engine's NextDeadline
	// includes the moment its emulated link takes frames again
	// (Config.LinkRate).
	next, found := g.nextEvent(now)
	if !found {
		return false
	}
	c.Set(next)
	return true
}

// StepTo is Step that never moves c past t: when the next event is later
// than t (or there is none), c moves to t and StepTo returns false. A
// workload that starts work at given times (flow arrivals) steps to them
// exactly, however far off the engines' next timer is.
func (g Group) StepTo(c SimClock, t time.Duration) bool {
	now := c.Now()
	g.drain(now)
	next, found := g.nextEvent(now)
	if !found || next > t {
		if t > now {
			c.Set(t)
		}
		return false
	}
	c.Set(next)
	return true
}

// RunUntil steps until cond holds, returning false if the group went idle
// or c passed limit from now first. cond is checked after each step, that
// is once the clock has moved to the next event: what cond does (an
// application polling its CQs and posting the next work request) happens
// at that event, which may be a timer milliseconds after the work it
// reacts to finished. RunUntilReact does not wait; the sweeps that use
// RunUntil keep it until their figures are redrawn (docs/results.md).
func (g Group) RunUntil(c SimClock, cond func() bool, limit time.Duration) bool {
	end := c.Now() + limit
	for !cond() {
		if c.Now() > end || !g.Step(c) {
			return cond()
		}
	}
	return true
}

// RunUntilReact is RunUntil with cond checked as soon as the engines are
// idle at the current time, before the clock moves on, so that an
// application reacts when the work it waits for finished; work cond posts
// runs at the same time.
func (g Group) RunUntilReact(c SimClock, cond func() bool, limit time.Duration) bool {
	end := c.Now() + limit
	for {
		g.drain(c.Now())
		if cond() {
			return true
		}
		if g.drain(c.Now()) {
			continue // cond posted work
		}
		if c.Now() > end || !g.advance(c) {
			return cond()
		}
	}
}

// RunFor advances c by d, processing every event on the way.
func (g Group) RunFor(c SimClock, d time.Duration) {
	end := c.Now() + d
	for c.Now() < end {
		if !g.Step(c) {
			c.Set(end)
			return
		}
	}
}

// MonotonicClock is an engine clock on the monotonic wall clock.
type MonotonicClock struct{ start time.Time }

// NewMonotonicClock starts a clock at zero now.
func NewMonotonicClock() *MonotonicClock { return &MonotonicClock{start: time.Now()} }

// Now is the time since the clock started.
func (c *MonotonicClock) Now() time.Duration { return time.Since(c.start) }
