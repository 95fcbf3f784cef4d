package perftest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/verbs"
)

// rpc_lat (RPCLat), a softnic extension: StaR Fig. 5b's RPC test, which
// perftest has no test for. Every one of -q connections has one call
// outstanding: the client's RECV for the response is posted (RxDepth
// per QP, 1 by default), it SENDs a request of -s bytes, the server, on
// the request's RECV completion, reposts its RECV and SENDs a response of
// RespSize bytes on the same QP, and the client, on the response's RECV
// completion, records the call's latency (the whole round trip: an RPC's
// latency is what its caller waits, so unlike send_lat it is not halved)
// and starts the next call on that connection once the request's own
// SEND completed too, if it was signaled (Config.CQMod). The row's rate is calls per second over all QPs.
//
// Every request and response carries a pattern of its QP and call
// number, which the receiving side checks in full: a corrupted, short,
// misplaced or reordered message ends the run with an error. On a StaR
// run the same verbs calls reach the stateless server's driver, which
// pushes its RECVs and SENDs to the client as WQEPs.

// rpcPattern fills b with the pattern of call k on QP qp in direction
// dir (0 request, 1 response).
func rpcPattern(b []byte, qp, k, dir int) {
	seed := uint32(qp)*2654435761 ^ uint32(k)*40503 ^ uint32(dir)*0x9e3779b9
	for j := range b {
		b[j] = byte(seed>>24) ^ byte(j) ^ byte(j>>8)
		if j&255 == 255 {
			seed = seed*1664525 + 1013904223
		}
	}
}

// rpcCheck reports where b differs from rpcPattern's, -1 if nowhere.
func rpcCheck(b []byte, qp, k, dir int) int {
	seed := uint32(qp)*2654435761 ^ uint32(k)*40503 ^ uint32(dir)*0x9e3779b9
	for j := range b {
		if b[j] != byte(seed>>24)^byte(j)^byte(j>>8) {
			return j
		}
		if j&255 == 255 {
			seed = seed*1664525 + 1013904223
		}
	}
	return -1
}

// signal sets wr's signaled flag for the n-th SEND (from 1) of its QP:
// every CQMod-th, or every one without --cq-mod. An unsignaled SEND has
// no completion, and a closed-loop call needs none: the response proves
// its request landed, and the next request that the last response did,
// so neither side waits to reuse its buffer.
func (s *session) signal(wr *verbs.SendWR, n int) bool {
	on := s.cfg.CQMod <= 1 || n%s.cfg.CQMod == 0
	if on {
		wr.Flags |= verbs.SendSignaled
	} else {
		wr.Flags &^= verbs.SendSignaled
	}
	return on
}

// rpcConn is one connection's state on either side.
type rpcConn struct {
	k        int       // calls started (client) or requests received (server)
	sending  bool      // a signaled SEND (request or response) is in flight
	awaiting bool      // client: the response of call k has not arrived
	owed     int       // server: responses due while the last one is in flight
	answered int       // server: responses posted
	t0       time.Time // client: when call k started
}

// rpcLat is rpc_lat's client.
func (s *session) rpcLat(ctx context.Context, size int) (Row, error) {
	nq := len(s.qps)
	conns := make([]rpcConn, nq)
	wrs := make([]verbs.SendWR, nq)
	for i := range nq {
		wrs[i] = s.sendWR(i, size)
	}
	n := s.cfg.Iters
	if s.cfg.Duration > 0 {
		n = 1 << 16
	}
	samples := make([]time.Duration, 0, n)
	w := s.newWaiter(ctx, s.cfg.Stall, latencyPace)
	start := time.Now()
	started := 0
	more := func() bool {
		if s.cfg.Duration > 0 {
			return time.Since(start) < s.cfg.Duration
		}
		return started < s.cfg.Iters
	}
	call := func(i int) error {
		c := &conns[i]
		c.k++
		rpcPattern(s.bufs[i][s.slot:s.slot+size], i, c.k, 0)
		c.sending, c.awaiting, c.t0 = s.signal(&wrs[i], c.k), true, time.Now()
		started++
		if err := s.qps[i].PostSend(wrs[i]); err != nil {
			return fmt.Errorf("perftest: post request: %w", err)
		}
		return nil
	}
	for i := 0; i < nq && more(); i++ {
		if err := call(i); err != nil {
			return Row{}, err
		}
	}
	var last time.Time
	busy := started
	for busy > 0 {
		m, err := s.cq.Poll(s.wcs)
		if err != nil {
			return Row{}, err
		}
		if m == 0 {
			if err := w.wait("the server's responses"); err != nil {
				return Row{}, err
			}
			continue
		}
		now := time.Now()
		w.progress()
		for _, wc := range s.wcs[:m] {
			if wc.Status != verbs.WCSuccess {
				return Row{}, completionError(&wc)
			}
			if wc.WRID >= uint64(nq) {
				return Row{}, fmt.Errorf("perftest: completion with WR id %d, which this run never posted", wc.WRID)
			}
			i := int(wc.WRID)
			c := &conns[i]
			if wc.Opcode&0x80 != 0 { // the response
				if !c.awaiting {
					return Row{}, fmt.Errorf("perftest: rpc_lat: a response on QP %d with no call outstanding", i+1)
				}
				if int(wc.ByteLen) != s.cfg.RespSize {
					return Row{}, fmt.Errorf("perftest: rpc_lat: response %d on QP %d holds %d bytes, want %d", c.k, i+1, wc.ByteLen, s.cfg.RespSize)
				}
				if at := rpcCheck(s.bufs[i][:s.cfg.RespSize], i, c.k, 1); at >= 0 {
					return Row{}, fmt.Errorf("perftest: rpc_lat: response %d on QP %d differs from what the server sent at byte %d", c.k, i+1, at)
				}
				if err := s.qps[i].PostRecv(s.recvWR[i]); err != nil {
					return Row{}, fmt.Errorf("perftest: repost receive: %w", err)
				}
				c.awaiting = false
				samples = append(samples, now.Sub(c.t0))
				last = now
			} else {
				c.sending = false
			}
			if c.sending || c.awaiting {
				continue
			}
			busy--
			if more() {
				if err := call(i); err != nil {
					return Row{}, err
				}
				busy++
			}
		}
	}
	st := Latencies(samples)
	r := Row{Bytes: size, Iters: len(samples), Lat: &st, RespBytes: s.cfg.RespSize}
	if el := last.Sub(start); el > 0 {
		r.MsgRateMpps = float64(len(samples)) / el.Seconds() / 1e6
	}
	return r, nil
}

// serveRPC is rpc_lat's server: it checks every request, reposts its
// RECV and answers on the same QP, until the client is done; then it
// waits for its last responses' completions.
func (s *session) serveRPC(ctx context.Context, done *atomic.Bool, size int) error {
	nq := len(s.qps)
	conns := make([]rpcConn, nq)
	wrs := make([]verbs.SendWR, nq)
	for i := range nq {
		wrs[i] = s.sendWR(i, s.cfg.RespSize)
	}
	sending := 0 // signaled responses in flight
	respond := func(i int) error {
		c := &conns[i]
		c.answered++
		rpcPattern(s.bufs[i][s.slot:s.slot+s.cfg.RespSize], i, c.answered, 1)
		c.sending = s.signal(&wrs[i], c.answered)
		if c.sending {
			sending++
		}
		if err := s.qps[i].PostSend(wrs[i]); err != nil {
			return fmt.Errorf("perftest: post response: %w", err)
		}
		return nil
	}
	w := s.newWaiter(ctx, 0, latencyPace) // the client's pace: no stall limit while it runs
	for {
		m, err := s.cq.Poll(s.wcs)
		if err != nil {
			return err
		}
		for _, wc := range s.wcs[:m] {
			if wc.Status != verbs.WCSuccess {
				return completionError(&wc)
			}
			if wc.WRID >= uint64(nq) {
				return fmt.Errorf("perftest: completion with WR id %d, which this run never posted", wc.WRID)
			}
			i := int(wc.WRID)
			c := &conns[i]
			if wc.Opcode&0x80 != 0 { // a request
				c.k++
				if int(wc.ByteLen) != size {
					return fmt.Errorf("perftest: rpc_lat: request %d on QP %d holds %d bytes, want %d", c.k, i+1, wc.ByteLen, size)
				}
				if at := rpcCheck(s.bufs[i][:size], i, c.k, 0); at >= 0 {
					return fmt.Errorf("perftest: rpc_lat: request %d on QP %d differs from what the client sent at byte %d", c.k, i+1, at)
				}
				if err := s.qps[i].PostRecv(s.recvWR[i]); err != nil {
					return fmt.Errorf("perftest: repost receive: %w", err)
				}
				if c.sending {
					c.owed++
					continue
				}
				if err := respond(i); err != nil {
					return err
				}
				continue
			}
			c.sending = false
			sending--
			if c.owed > 0 {
				c.owed--
				if err := respond(i); err != nil {
					return err
				}
			}
		}
		if m > 0 {
			w.progress()
			continue
		}
		if done.Load() {
			if sending == 0 {
				return nil
			}
			// The client has every response; their ACKs (or CQEPs) are
			// what is left: a peer that stopped now is a stall.
			w.stall = s.cfg.Stall
		}
		if err := w.wait("the client's requests"); err != nil {
			return err
		}
	}
}
