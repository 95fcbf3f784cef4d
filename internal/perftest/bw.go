package perftest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
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
	// A bidirectional SEND test receives the peer's SENDs on the same CQ.
	recv := s.cfg.Test.usesRecv(s.role, s.cfg.Bidirectional)
	list := s.cfg.PostList
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
	// BW peak as perftest takes it, where perftest takes it.
	var peak *peakRecorder
	if !s.cfg.NoPeak && !timed && s.cfg.Iters <= MaxPeakIters {
		peak = newPeakRecorder(s.cfg.Iters, list)
	}
	w := s.newWaiter(ctx, s.cfg.Stall, throughputPace)
	var posted, completed int
	var last time.Duration
	// An infinite run reports every Duration: the interval's start and
	// the completions before it.
	var intervalStart time.Duration
	intervalDone := 0
	posting := true
	start := time.Now()
	for {
		if posting && timed && !s.cfg.Infinite && time.Since(start) >= s.cfg.Duration {
			posting = false
		}
		if posting && s.cfg.Infinite && stopped(s.cfg.Stop) {
			posting = false
		}
		if posting {
			var now time.Duration
			if peak != nil {
				now = time.Since(start)
			}
			for _, i := range ready {
				queued[i] = false
				n := s.cfg.TxDepth - inflight[i]
				if !timed {
					n = min(n, quota[i])
				}
				if list > 0 && (timed || n < quota[i]) {
					// Whole lists only (a QP's last, shorter one excepted):
					// a QP with room for less waits for its completions.
					n -= n % list
				}
				if n <= 0 {
					continue
				}
				for off := 0; off < n; {
					k := n - off
					if list > 0 {
						k = min(k, list)
					}
					if err := s.qps[i].PostSend(batch[i][:k]...); err != nil {
						return Row{}, fmt.Errorf("perftest: post %d WRs: %w", k, err)
					}
					off += k
				}
				if !timed {
					quota[i] -= n
					left -= n
				}
				inflight[i] += n
				posted += n
				if peak != nil {
					peak.post(now, n)
				}
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
			sends := 0
			for _, wc := range s.wcs[:n] {
				if wc.Status != verbs.WCSuccess {
					return Row{}, completionError(&wc)
				}
				if wc.WRID >= uint64(nq) {
					return Row{}, fmt.Errorf("perftest: completion with WR id %d, which this run never posted", wc.WRID)
				}
				i := int(wc.WRID)
				if wc.Opcode&0x80 != 0 { // IBV_WC_RECV: the peer's SEND
					if !recv {
						return Row{}, fmt.Errorf("perftest: receive completion on QP %#x, which posted no receives", wc.QPNum)
					}
					if err := s.qps[i].PostRecv(s.recvWR[i]); err != nil {
						return Row{}, fmt.Errorf("perftest: repost receive: %w", err)
					}
					continue
				}
				sends++
				inflight[i]--
				if !queued[i] {
					queued[i] = true
					ready = append(ready, i)
				}
			}
			completed += sends
			if peak != nil {
				peak.complete(last, sends)
			}
			if s.cfg.Infinite && last-intervalStart >= s.cfg.Duration && s.interval != nil {
				var r Row
				bwRow(&r, size, completed-intervalDone, last-intervalStart, 0)
				r.NoPeak = true
				s.interval(r)
				intervalStart, intervalDone = last, completed
			}
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
	switch {
	case s.cfg.Infinite:
		bwRow(&r, size, completed-intervalDone, last-intervalStart, 0)
	case peak != nil:
		bwRow(&r, size, completed, last, peak.msgRate())
	default:
		bwRow(&r, size, completed, last, 0)
	}
	r.NoPeak = peak == nil
	return r, nil
}

// stopped reports whether stop is closed; a nil channel never is.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// serveSendBW keeps every QP's receive queue full while the client sends,
// until done, or, in an -n run that is not untilDone, until all the
// client's messages arrived.
func (s *session) serveSendBW(ctx context.Context, done *atomic.Bool, untilDone bool) error {
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
		if done.Load() || !untilDone && s.cfg.Duration <= 0 && received >= s.cfg.Iters {
			return nil
		}
		if err := w.wait("the client's SENDs"); err != nil {
			return err
		}
	}
}

// bidirectional is one size of a bidirectional run (perftest's -b), on
// either side: both send and measure their own sends, then exchange
// their rows; each prints the sum, as perftest does. While the rows are
// exchanged a side that receives SENDs keeps its receive queues full for
// those of the peer still to come.
func (s *session) bidirectional(ctx context.Context, conn net.Conn, size int) (Row, error) {
	local, runErr := s.bandwidth(ctx, size)
	local.Test, local.Scheme, local.LossPct = s.cfg.Test.String(), s.qpScheme, s.cfg.LossPct
	rep := endReport{Row: local}
	if runErr != nil {
		rep.Err = runErr.Error()
	}
	payload, _ := json.Marshal(rep)
	type result struct {
		payload []byte
		err     error
	}
	end := make(chan result, 1)
	var done atomic.Bool
	go func() {
		p, err := cm.Sync(conn, payload)
		done.Store(true)
		s.ev.kick()
		end <- result{p, err}
	}()
	if runErr == nil && s.cfg.Test.usesRecv(s.role, true) {
		if err := s.serveSendBW(ctx, &done, true); err != nil {
			conn.Close()
			<-end
			return Row{}, err
		}
	}
	r := <-end
	if runErr != nil {
		return local, runErr
	}
	if r.err != nil {
		return Row{}, r.err
	}
	var peer endReport
	if err := json.Unmarshal(r.payload, &peer); err != nil {
		return Row{}, fmt.Errorf("perftest: peer's report: %w", err)
	}
	if peer.Err != "" {
		return Row{}, fmt.Errorf("%w: %s", errPeerFailed, peer.Err)
	}
	row := local
	row.PeakGbps += peer.Row.PeakGbps
	row.AvgGbps += peer.Row.AvgGbps
	row.MsgRateMpps += peer.Row.MsgRateMpps
	row.NoPeak = local.NoPeak || peer.Row.NoPeak
	peer.Row.Both = nil
	row.Both = &BothRows{Local: local, Remote: peer.Row}
	return row, nil
}
