package perftest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/verbs"
)

// bandwidth is the client loop of the bandwidth tests (ib_write_bw,
// ib_read_bw, ib_send_bw, ib_atomic_bw): keep TxDepth signalled WRs in
// flight on every QP (perftest's -t is per QP: -q 5000 -t 1 is one WR
// outstanding on each of 5000 QPs, re-posted as it completes), post in
// batches as completions free slots, and time the completions. Only the
// QPs a completion freed are visited to post again, so a round costs what
// completed, not the number of QPs.
func (s *session) bandwidth(ctx context.Context, size int) (Row, error) {
	nq := len(s.qps)
	timed := s.cfg.Duration > 0
	// Per QP: a batch of identical WRs to post from, the messages it has
	// left to send (-n spreads them round robin) and its WRs in flight.
	batch := make([][]verbs.SendWR, nq)
	quota := make([]int, nq)
	inflight := make([]int, nq)
	// ready lists the QPs that may have room for more WRs: all of them at
	// first, then each QP a completion freed a slot of (queued: listed).
	ready := make([]int, nq)
	queued := make([]bool, nq)
	for i := range nq {
		batch[i] = make([]verbs.SendWR, s.cfg.TxDepth)
		wr := s.sendWR(i, size)
		for j := range batch[i] {
			batch[i][j] = wr
		}
		quota[i] = s.cfg.Iters / nq
		if i < s.cfg.Iters%nq {
			quota[i]++
		}
		ready[i], queued[i] = i, true
	}
	left := s.cfg.Iters // messages not yet posted (-n)
	meter := newPeakMeter(PeakSpan)
	w := s.newWaiter(ctx, s.cfg.Stall, throughputPace)
	var posted, completed int
	var last time.Duration
	posting := true
	start := time.Now()
	for {
		if posting && timed && time.Since(start) >= s.cfg.Duration {
			posting = false
		}
		if posting {
			for _, i := range ready {
				queued[i] = false
				n := s.cfg.TxDepth - inflight[i]
				if !timed {
					n = min(n, quota[i])
					quota[i] -= n
					left -= n
				}
				if n <= 0 {
					continue
				}
				if err := s.qps[i].PostSend(batch[i][:n]...); err != nil {
					return Row{}, fmt.Errorf("perftest: post %d WRs: %w", n, err)
				}
				inflight[i] += n
				posted += n
			}
			ready = ready[:0]
			if !timed && left == 0 {
				posting = false
			}
		}
		n, err := s.cq.Poll(s.wcs)
		if err != nil {
			return Row{}, err
		}
		if n > 0 {
			last = time.Since(start)
			for _, wc := range s.wcs[:n] {
				if wc.Status != verbs.WCSuccess {
					return Row{}, completionError(&wc)
				}
				if wc.WRID >= uint64(nq) {
					return Row{}, fmt.Errorf("perftest: completion with WR id %d, which this run never posted", wc.WRID)
				}
				i := int(wc.WRID)
				inflight[i]--
				if !queued[i] {
					queued[i] = true
					ready = append(ready, i)
				}
			}
			completed += n
			meter.add(last, n)
			w.progress()
			continue
		}
		if !posting && completed == posted {
			break
		}
		if err := w.wait("completions"); err != nil {
			return Row{}, err
		}
	}
	var r Row
	bwRow(&r, size, completed, last, meter.msgRate())
	return r, nil
}

// serveSendBW keeps every QP's receive queue full while the client sends.
func (s *session) serveSendBW(ctx context.Context, done *atomic.Bool) error {
	w := s.newWaiter(ctx, 0, throughputPace) // the client's pace, not ours: no stall limit
	received := 0
	for {
		n, err := s.cq.Poll(s.wcs)
		if err != nil {
			return err
		}
		for _, wc := range s.wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				return completionError(&wc)
			}
			if wc.WRID >= uint64(len(s.qps)) {
				return fmt.Errorf("perftest: completion with WR id %d, which this run never posted", wc.WRID)
			}
			if err := s.qps[wc.WRID].PostRecv(s.recvWR[wc.WRID]); err != nil {
				return fmt.Errorf("perftest: repost receive: %w", err)
			}
		}
		received += n
		if n > 0 {
			w.progress()
			continue
		}
		if done.Load() || s.cfg.Duration <= 0 && received >= s.cfg.Iters {
			return nil
		}
		if err := w.wait("the client's SENDs"); err != nil {
			return err
		}
	}
}
