package perftest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/verbs"
)

// waiter is how a measurement loop waits for a completion or a byte in
// memory: spin for a few polls (the next event of a busy run is usually
// that close), then yield the processor on every poll, and after a while
// block: on the CQ's completion channel when a completion is what the
// loop waits for. On a two-core machine the loop shares the CPUs with
// the NIC's poll loop (and, embedded, with the other side's loop): pure
// spinning would take the core the NIC needs to make the progress being
// waited for, and on the embedded NIC every CQ poll also takes the lock
// its poll loop needs; blocking at once would add a wake-up to every
// latency sample.
//
// It never sleeps: a timer or time.Sleep below a millisecond takes about
// 1.08 ms on the machines this runs on, which ruined the latency tails
// of the sleeping waiter this one replaces. Blocking is a ppoll on the
// channel's descriptor, which the NIC writes when the armed CQ gets a
// completion, plus the session's wake eventfd, which cancellation and
// the end of a server's run write; its timeout only paces the stall and
// context checks. It also notices cancellation and a peer that stopped
// making progress.
type waiter struct {
	ctx     context.Context
	stall   time.Duration // give up after this long without progress; 0: never
	pace    pace
	idle    int       // empty polls in the current idle stretch
	since   time.Time // start of the current idle stretch
	checkAt int
	ev      *events // nil: nothing to block on (tests)
	armed   bool    // ReqNotify was called and its event not yet taken
}

// events is a session's completion channel and what wakes a blocked
// waiter besides it.
type events struct {
	ch   *verbs.CompChannel
	cq   *verbs.CQ
	only bool // -e: block at once, never spin

	mu   sync.Mutex // wake's closing against kick
	wake int        // eventfd: cancellation, or the client finished (serve's done)
}

// kick wakes a blocked waiter (it then checks its context and the done
// flag of its loop).
func (e *events) kick() {
	one := [8]byte{1}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wake >= 0 {
		unix.Write(e.wake, one[:])
	}
}

func (e *events) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wake >= 0 {
		unix.Close(e.wake)
		e.wake = -1
	}
}

// pace says how long a loop keeps the CPU while it waits.
type pace struct {
	spin  int // polls before yielding
	yield int // polls before blocking
}

var (
	// latencyPace serves ping-pong loops: the answer is microseconds
	// away and every microsecond of wake-up delay lands in the sample,
	// so they yield for long before they block; yielding early (after 8
	// polls) matters when the client, the server and the NIC all want
	// one of two cores.
	latencyPace = pace{spin: 8, yield: 1 << 15}
	// throughputPace serves loops that keep a queue full: with TxDepth
	// WRs in flight, noticing a completion a few microseconds late costs
	// nothing, while polling hard steals CPU and, embedded, the CQ lock
	// from the NIC that has to produce the completions: block after a
	// short spin.
	throughputPace = pace{spin: 32, yield: 48}
)

// checkEvery is how many empty polls pass between clock and context
// checks.
const checkEvery = 1024

// blockFor bounds one block, so that the stall limit is checked.
const blockFor = 100 * time.Millisecond

// errStalled reports a run that stopped making progress.
var errStalled = errors.New("perftest: no progress")

func newWaiter(ctx context.Context, stall time.Duration, p pace) *waiter {
	return &waiter{ctx: ctx, stall: stall, pace: p, checkAt: checkEvery}
}

// newWaiter is a waiter that blocks on the session's completion channel.
func (s *session) newWaiter(ctx context.Context, stall time.Duration, p pace) *waiter {
	w := newWaiter(ctx, stall, p)
	w.ev = s.ev
	return w
}

// progress resets the backoff: something happened.
func (w *waiter) progress() {
	w.idle = 0
	w.checkAt = checkEvery
}

// wait is called after an empty poll of the CQ, when a completion is
// what the loop waits for; what names it, for the stall error. Once the
// spinning is over it arms the CQ and returns, so that the loop polls
// once more (a completion that arrived before the arm does not fire the
// event), and at the next empty poll blocks until the event.
func (w *waiter) wait(what string) error {
	w.begin()
	switch {
	case w.ev == nil:
		w.spinYield()
	case !w.ev.only && w.idle < w.pace.yield:
		w.spinYield()
	case !w.armed:
		if err := w.ev.cq.ReqNotify(false); err != nil {
			return err
		}
		w.armed = true
	default:
		if err := w.block(); err != nil {
			return err
		}
		w.checkAt = min(w.checkAt, w.idle) // a block is slow enough to check every time
	}
	return w.check(what)
}

// waitMem is called when the loop waits for a byte in memory (write_lat's
// awaitByte): no completion says when it lands, so there is nothing to
// block on. It spins, yields to other goroutines, and then to other
// threads and processes (sched_yield: the NIC's poll loop may be one of
// them), but never sleeps (see waiter).
func (w *waiter) waitMem(what string) error {
	w.begin()
	w.spinYield()
	return w.check(what)
}

func (w *waiter) begin() {
	if w.idle == 0 {
		w.since = time.Now()
	}
	w.idle++
}

// spinYield spins for the pace's first polls, then yields: to the
// process's other goroutines (an embedded NIC's poll loop), and to other
// threads and processes (sched_yield(2): the daemon's poll loop, the
// peer's). runtime.Gosched alone keeps the core when the process has no
// other goroutine to run, and a daemon woken on that core then waits for
// the kernel's time slice: milliseconds in the latency tail.
func (w *waiter) spinYield() {
	if w.idle >= w.pace.spin {
		runtime.Gosched()
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// block waits for the armed CQ's event, the wake eventfd, or blockFor.
// An event taken is acknowledged at once: the session destroys its CQ
// only after every event is.
func (w *waiter) block() error {
	fds := [2]unix.PollFd{
		{Fd: int32(w.ev.ch.FD()), Events: unix.POLLIN},
		{Fd: int32(w.ev.wake), Events: unix.POLLIN},
	}
	ts := unix.NsecToTimespec(int64(blockFor))
	if _, err := unix.Ppoll(fds[:], &ts, nil); err != nil && err != unix.EINTR {
		return fmt.Errorf("perftest: wait for a completion event: %w", err)
	}
	if fds[1].Revents != 0 {
		var b [8]byte
		unix.Read(w.ev.wake, b[:])
	}
	if fds[0].Revents != 0 {
		cq, err := w.ev.ch.TryGetEvent(0)
		if err != nil {
			return fmt.Errorf("perftest: completion event: %w", err)
		}
		if cq != nil {
			cq.AckEvents(1)
			w.armed = false
		}
	}
	return nil
}

// check looks at the clock and the context every checkEvery empty polls.
func (w *waiter) check(what string) error {
	if w.idle < w.checkAt {
		return nil
	}
	w.checkAt = w.idle + checkEvery
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.stall > 0 {
		if idle := time.Since(w.since); idle > w.stall {
			return fmt.Errorf("%w for %v while waiting for %s", errStalled, idle.Round(time.Millisecond), what)
		}
	}
	return nil
}
