package perftest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/verbs"
)

// seqByte is the value the k-th write of a write_lat run (k from 1)
// leaves in the last byte of the peer's buffer: 1..255 and round again,
// never 0, so that consecutive iterations always differ and the zeroed
// buffer of a fresh size never matches.
func seqByte(k int) byte { return byte((k-1)%255 + 1) }

// latRun is the per-iteration bookkeeping shared by the latency loops.
type latRun struct {
	s        *session
	w        *waiter
	inflight int // signalled send WRs not yet reaped
	early    int // receives reaped while making room, not yet awaited
	samples  []time.Duration
	start    time.Time
}

func (s *session) newLatRun(ctx context.Context) *latRun {
	n := s.cfg.Iters
	if s.cfg.Duration > 0 {
		n = 1 << 16
	}
	return &latRun{s: s, w: s.newWaiter(ctx, s.cfg.Stall, latencyPace), samples: make([]time.Duration, 0, n), start: time.Now()}
}

// more reports whether iteration k (from 1) should run.
func (l *latRun) more(k int) bool {
	if l.s.cfg.Duration > 0 {
		return time.Since(l.start) < l.s.cfg.Duration
	}
	return k <= l.s.cfg.Iters
}

// reap polls the CQ once: it counts send completions, reposts receives
// and reports how many receives completed.
func (l *latRun) reap() (recvs int, err error) {
	n, err := l.s.cq.Poll(l.s.wcs)
	if err != nil {
		return 0, err
	}
	for _, wc := range l.s.wcs[:n] {
		if wc.Status != verbs.WCSuccess {
			return 0, completionError(&wc)
		}
		if wc.Opcode&0x80 != 0 { // IBV_WC_RECV and friends
			if err := l.s.qps[0].PostRecv(l.s.recvWR[0]); err != nil {
				return 0, fmt.Errorf("perftest: repost receive: %w", err)
			}
			recvs++
			continue
		}
		l.inflight--
	}
	return recvs, nil
}

// post posts wr, first reaping completions when the send queue is full.
func (l *latRun) post(wr *verbs.SendWR) error {
	if err := l.makeRoom(); err != nil {
		return err
	}
	l.w.progress()
	if err := l.s.qps[0].PostSend(*wr); err != nil {
		return fmt.Errorf("perftest: post: %w", err)
	}
	l.inflight++
	return nil
}

// makeRoom reaps send completions until the send queue has room. The
// clients call it between samples, so that polling the CQ for the last
// WR's completion (with perftest's TX depth of 1, after every sample)
// does not sit inside the next sample: on a software NIC a poll costs a
// lock round trip. perftest's latency tests time it; softnic does not.
func (l *latRun) makeRoom() error {
	for l.inflight >= l.s.cfg.TxDepth {
		n, err := l.reap()
		if err != nil {
			return err
		}
		l.early += n
		if l.inflight >= l.s.cfg.TxDepth {
			if err := l.w.wait("send completions"); err != nil {
				return err
			}
		}
	}
	return nil
}

// drain waits for every send WR to complete, so the next size (or the
// teardown) starts from an idle QP.
func (l *latRun) drain() error {
	for l.inflight > 0 {
		if _, err := l.reap(); err != nil {
			return err
		}
		if l.inflight > 0 {
			if err := l.w.wait("the last send completions"); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitByte spins until the last byte of the target region holds v.
// While it spins it reaps the CQ now and then, so that a failed write
// surfaces as its completion error instead of a stall; every round on a
// NIC that runs only when polled (Device.PollDriven). done, if not nil,
// ends the wait early (the client finished a timed run).
func (l *latRun) awaitByte(size int, v byte, done *atomic.Bool) (ok bool, err error) {
	buf := l.s.bufs[0]
	for i := 0; loadByte(buf, size-1) != v; i++ {
		if done != nil && done.Load() {
			return false, nil
		}
		if i%64 == 63 || l.s.dev.PollDriven {
			if _, err := l.reap(); err != nil {
				return false, err
			}
		}
		if err := l.w.waitMem("the peer's RDMA WRITE"); err != nil {
			return false, err
		}
	}
	l.w.progress()
	return true, nil
}

// awaitRecv polls until a receive completes.
func (l *latRun) awaitRecv(done *atomic.Bool) (ok bool, err error) {
	if l.early > 0 {
		l.early--
		l.w.progress()
		return true, nil
	}
	for {
		n, err := l.reap()
		if err != nil || n > 0 {
			l.early += max(n-1, 0) // more than one: the next calls take them
			l.w.progress()
			return err == nil, err
		}
		if done != nil && done.Load() {
			return false, nil
		}
		if err := l.w.wait("the peer's SEND"); err != nil {
			return false, err
		}
	}
}

func (l *latRun) row(size int) Row {
	st := Latencies(l.samples)
	return Row{Bytes: size, Iters: len(l.samples), Lat: &st}
}

// writeLat is ib_write_lat's client: write ping k into the server's
// buffer, spin until the server's pong k lands in ours. One iteration is
// a round trip; perftest reports half of it.
func (s *session) writeLat(ctx context.Context, size int) (Row, error) {
	l := s.newLatRun(ctx)
	wr := s.sendWR(0, size)
	src := s.bufs[0][s.slot : s.slot+size]
	for k := 1; l.more(k); k++ {
		v := seqByte(k)
		src[size-1] = v
		t0 := time.Now()
		if err := l.post(&wr); err != nil {
			return Row{}, err
		}
		if _, err := l.awaitByte(size, v, nil); err != nil {
			return Row{}, err
		}
		l.samples = append(l.samples, time.Since(t0)/2)
		if err := l.makeRoom(); err != nil {
			return Row{}, err
		}
	}
	return l.row(size), l.drain()
}

// serveWriteLat answers each ping with a pong of the same value.
func (s *session) serveWriteLat(ctx context.Context, done *atomic.Bool, size int) error {
	l := s.newLatRun(ctx)
	l.w.stall = 0 // the client sets the pace
	wr := s.sendWR(0, size)
	src := s.bufs[0][s.slot : s.slot+size]
	for k := 1; s.cfg.Duration > 0 || k <= s.cfg.Iters; k++ {
		v := seqByte(k)
		ok, err := l.awaitByte(size, v, done)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		src[size-1] = v
		if err := l.post(&wr); err != nil {
			return err
		}
	}
	return l.drain()
}

// sendLat is ib_send_lat's client: SEND a ping, wait for the pong's
// receive completion; half the round trip is the sample.
func (s *session) sendLat(ctx context.Context, size int) (Row, error) {
	l := s.newLatRun(ctx)
	wr := s.sendWR(0, size)
	for k := 1; l.more(k); k++ {
		t0 := time.Now()
		if err := l.post(&wr); err != nil {
			return Row{}, err
		}
		if _, err := l.awaitRecv(nil); err != nil {
			return Row{}, err
		}
		l.samples = append(l.samples, time.Since(t0)/2)
		if err := l.makeRoom(); err != nil {
			return Row{}, err
		}
	}
	return l.row(size), l.drain()
}

// serveSendLat answers each received SEND with one.
func (s *session) serveSendLat(ctx context.Context, done *atomic.Bool, size int) error {
	l := s.newLatRun(ctx)
	l.w.stall = 0
	wr := s.sendWR(0, size)
	for k := 1; s.cfg.Duration > 0 || k <= s.cfg.Iters; k++ {
		ok, err := l.awaitRecv(done)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := l.post(&wr); err != nil {
			return err
		}
	}
	return l.drain()
}

// readLat is ib_read_lat: one RDMA READ at a time; the sample is the
// whole round trip (perftest does not halve it for reads).
func (s *session) readLat(ctx context.Context, size int) (Row, error) {
	l := s.newLatRun(ctx)
	wr := s.sendWR(0, size)
	for k := 1; l.more(k); k++ {
		t0 := time.Now()
		if err := l.post(&wr); err != nil {
			return Row{}, err
		}
		for l.inflight > 0 {
			if _, err := l.reap(); err != nil {
				return Row{}, err
			}
			if l.inflight > 0 {
				if err := l.w.wait("the RDMA READ response"); err != nil {
					return Row{}, err
				}
			}
		}
		l.samples = append(l.samples, time.Since(t0))
		l.w.progress()
	}
	return l.row(size), nil
}
