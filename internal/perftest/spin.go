package perftest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// waiter is how a measurement loop waits for a completion or a byte in
// memory: spin for a few polls (the next event of a busy run is usually
// that close), then yield the processor on every poll, and only after a
// while sleep. On a two-core machine the loop shares the CPUs with the
// NIC's poll loop (and, embedded, with the other side's loop): pure
// spinning would take the core the NIC needs to make the progress being
// waited for, and on the embedded NIC every CQ poll also takes the lock
// its poll loop needs; sleeping at once would add a scheduler wake-up to
// every latency sample. It also notices cancellation and a peer that
// stopped making progress.
type waiter struct {
	ctx     context.Context
	stall   time.Duration // give up after this long without progress; 0: never
	pace    pace
	idle    int       // empty polls in the current idle stretch
	since   time.Time // start of the current idle stretch
	checkAt int
}

// pace says how long a loop keeps the CPU while it waits.
type pace struct {
	spin  int           // polls before yielding
	yield int           // polls before sleeping
	sleep time.Duration // per poll after that
}

var (
	// latencyPace serves ping-pong loops: the answer is microseconds
	// away and every microsecond of wake-up delay lands in the sample,
	// so they yield rather than sleep; yielding early (after 8 polls)
	// matters when the client, the server and the NIC all want one of
	// two cores.
	latencyPace = pace{spin: 8, yield: 1 << 15, sleep: 50 * time.Microsecond}
	// throughputPace serves loops that keep a queue full: with TxDepth
	// WRs in flight, noticing a completion a few microseconds late costs
	// nothing, while polling hard steals CPU and, embedded, the CQ lock
	// from the NIC that has to produce the completions. Sleeping after a
	// short spin measured 1.7 times the embedded write_bw of yielding on
	// this two-core machine.
	throughputPace = pace{spin: 32, yield: 48, sleep: 5 * time.Microsecond}
)

// checkEvery is how many empty polls pass between clock and context
// checks.
const checkEvery = 1024

// errStalled reports a run that stopped making progress.
var errStalled = errors.New("perftest: no progress")

func newWaiter(ctx context.Context, stall time.Duration, p pace) *waiter {
	return &waiter{ctx: ctx, stall: stall, pace: p, checkAt: checkEvery}
}

// progress resets the backoff: something happened.
func (w *waiter) progress() {
	w.idle = 0
	w.checkAt = checkEvery
}

// wait is called after an empty poll; what names what is waited for, for
// the stall error.
func (w *waiter) wait(what string) error {
	if w.idle == 0 {
		w.since = time.Now()
	}
	w.idle++
	switch {
	case w.idle < w.pace.spin:
	case w.idle < w.pace.yield:
		runtime.Gosched()
	default:
		time.Sleep(w.pace.sleep)
		w.checkAt = min(w.checkAt, w.idle) // a sleep is slow enough to check every time
	}
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
