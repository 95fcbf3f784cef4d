package dataplane

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
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

// Run drives e until ctx ends: poll while there is work, spin a little
// when there is none, then block in w until the next timer deadline.
// now is the engine's clock (time since its epoch).
func (e *Engine) Run(ctx context.Context, w Waiter, now func() time.Duration, rc RunConfig) {
	rc = rc.withDefaults()
	e.SetDoorbell(w.Wake)
	defer e.SetDoorbell(nil)
	stop := context.AfterFunc(ctx, w.Wake)
	defer stop()
	idle := 0
	var lastWork time.Duration
	for ctx.Err() == nil {
		t := now()
		busy := e.Poll(t)
		if rc.Pump != nil && rc.Pump() {
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
		if d, ok := e.linkWait(t); ok && d < rc.LinkSpin {
			yieldCPU() // the emulated link is busy: poll until it takes more
			continue
		}
		if rc.BeforeWait != nil {
			rc.BeforeWait()
			if rc.Pump != nil && rc.Pump() {
				continue
			}
		}
		wait := rc.MaxWait
		if d, ok := e.NextDeadline(); ok {
			wait = min(wait, max(0, d-t))
		}
		if wait > 0 {
			w.Wait(wait)
		}
	}
}

// MonotonicClock is an engine clock on the monotonic wall clock.
type MonotonicClock struct{ start time.Time }

// NewMonotonicClock starts a clock at zero now.
func NewMonotonicClock() *MonotonicClock { return &MonotonicClock{start: time.Now()} }

// Now is the time since the clock started.
func (c *MonotonicClock) Now() time.Duration { return time.Since(c.start) }

// RunRealtime runs the Sim against the wall clock instead of jumping from
// event to event: the fabric's delays and rates then take real time, and
// other goroutines (a verbs server, a benchmark client) can post work
// while it runs. It polls and waits as Run does (rc's IdlePolls, MaxWait,
// BusyPoll, Pump and BeforeWait), blocking in ppoll on an eventfd that
// Wake writes, with a nanosecond timeout: a Go timer shorter than a
// millisecond would round up to about one. It returns when ctx ends.
func (s *Sim) RunRealtime(ctx context.Context, rc RunConfig) {
	bell, err := doorbell.New()
	if err != nil {
		panic(fmt.Sprintf("dataplane: RunRealtime: %v", err)) // eventfd(2) failing means no descriptors left
	}
	s.bell.Store(bell)
	defer func() {
		s.bell.Store(nil)
		bell.Close()
	}()
	ring := s.Wake
	s.A.SetDoorbell(ring)
	s.B.SetDoorbell(ring)
	defer s.A.SetDoorbell(nil)
	defer s.B.SetDoorbell(nil)
	stop := context.AfterFunc(ctx, bell.Wake)
	defer stop()
	rc = rc.withDefaults()
	start, base := time.Now(), s.Clock.Now()
	idle := 0
	var lastWork time.Duration
	for ctx.Err() == nil {
		now := base + time.Since(start)
		s.Clock.Set(now)
		a, b := s.A.Poll(now), s.B.Poll(now)
		pumped := rc.Pump != nil && rc.Pump() // every round, busy or not
		if a || b || pumped {
			idle, lastWork = 0, now
			continue
		}
		if idle++; idle < rc.IdlePolls {
			continue
		}
		if now-lastWork < rc.BusyPoll {
			yieldCPU()
			continue
		}
		idle = 0
		if rc.BeforeWait != nil {
			rc.BeforeWait()
			if rc.Pump != nil && rc.Pump() {
				continue
			}
		}
		wait := rc.MaxWait
		if t, ok := s.Fabric.NextDelivery(); ok {
			wait = min(wait, t-now)
		}
		for _, e := range [...]*Engine{s.A, s.B} {
			if t, ok := e.NextDeadline(); ok {
				wait = min(wait, t-now)
			}
		}
		if wait > 0 {
			bell.Wait(wait)
		}
	}
}

// Wake wakes RunRealtime's loop. Safe from any goroutine.
func (s *Sim) Wake() {
	if b := s.bell.Load(); b != nil {
		b.Wake()
	}
}
