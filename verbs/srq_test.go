package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// srqSide is host B of the SRQ tests: two QPs that take their receive
// work requests from one SRQ.
type srqSide struct {
	ctx *Context
	pd  *PD
	buf []byte
	mr  *MR
	cq  *CQ
	srq *SRQ
	qps [2]*QP
}

func newSRQSide(t *testing.T, ctx *Context) *srqSide {
	t.Helper()
	s := &srqSide{ctx: ctx}
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.pd, err = ctx.AllocPD()
	must(err)
	s.buf, err = ctx.AllocBuf(64 << 10)
	must(err)
	s.mr, err = s.pd.RegMR(s.buf, allAccess)
	must(err)
	s.cq, err = ctx.CreateCQ(64)
	must(err)
	var got SRQAttr
	s.srq, got, err = s.pd.CreateSRQ(SRQAttr{MaxWR: 6, MaxSGE: 1})
	must(err)
	if got.MaxWR != 8 || got.MaxSGE != 1 || got.Limit != 0 {
		t.Fatalf("created SRQ %+v, want max_wr 8, max_sge 1, limit 0", got)
	}
	for i := range s.qps {
		s.qps[i], err = s.pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 4, SRQ: s.srq})
		must(err)
	}
	return s
}

// nextEvent waits for ctx's async descriptor to be readable and returns
// the event.
func nextEvent(t *testing.T, ctx *Context) AsyncEvent {
	t.Helper()
	fd, err := ctx.AsyncFD()
	if err != nil {
		t.Fatal(err)
	}
	if !readable(t, fd, 5*time.Second) {
		t.Fatal("async descriptor not readable: no event")
	}
	ev, err := ctx.GetAsyncEvent()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// noEvent checks that no event waits for ctx; it sets O_NONBLOCK on
// ctx's async descriptor, so that GetAsyncEvent answers EAGAIN.
func noEvent(t *testing.T, ctx *Context) {
	t.Helper()
	fd, err := ctx.AsyncFD()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	if readable(t, fd, quiet) {
		ev, _ := ctx.GetAsyncEvent()
		t.Fatalf("unexpected event %v (%+v)", ev.Type, ev)
	}
	if _, err := ctx.GetAsyncEvent(); !errors.Is(err, ErrNoEvent) || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("GetAsyncEvent with none waiting: %v, want ErrNoEvent (EAGAIN)", err)
	}
}

// TestSRQAndAsyncEvents, embedded and on daemons: two QPs of host B take
// SENDs from host A's two QPs out of one SRQ, byte-exact; PostRecv on
// them is refused; an armed limit raises SRQ_LIMIT_REACHED naming the
// SRQ, once; a QP on the SRQ moved to ERR raises QP_LAST_WQE_REACHED; a
// busy SRQ cannot be destroyed; every context sees PORT_ACTIVE first,
// and on daemons another client of the same daemon sees none of B's
// events.
func TestSRQAndAsyncEvents(t *testing.T) {
	for _, mode := range []string{"embedded", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			p := newChanPair(t, mode)
			b := newSRQSide(t, p.b)
			var as [2]*side
			for i := range as {
				s, err := newSide(p.a, 64<<10, 4, PSN(100*i+1))
				if err != nil {
					t.Fatal(err)
				}
				as[i] = s
				eb, err := (&side{ctx: p.b, qp: b.qps[i], mr: b.mr, psn: PSN(100*i + 7)}).endpoint()
				if err != nil {
					t.Fatal(err)
				}
				ea, err := s.endpoint()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.connect(eb); err != nil {
					t.Fatal(err)
				}
				if err := (&side{ctx: p.b, qp: b.qps[i], psn: PSN(100*i + 7)}).connect(ea); err != nil {
					t.Fatal(err)
				}
			}
			// The other client, on daemons: it must see only its own events.
			var other *Context
			if p.daemon != nil {
				var err error
				if other, err = Dial(p.daemon.sockB); err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			if ev := nextEvent(t, p.b); ev.Type != EventPortActive || ev.Port != 1 {
				t.Fatalf("first event %v (%+v), want PORT_ACTIVE on port 1", ev.Type, ev)
			}
			noEvent(t, p.b)

			if err := b.qps[0].PostRecv(RecvWR{WRID: 1, NumSGE: 1, SGL: [8]SGE{b.mr.SGE(0, 10)}}); !errors.Is(err, dataplane.ErrHasSRQ) {
				t.Fatalf("PostRecv on a QP with an SRQ: %v, want ErrHasSRQ", err)
			}
			for i := range 4 {
				if err := b.srq.PostRecv(RecvWR{WRID: uint64(10 + i), NumSGE: 1, SGL: [8]SGE{b.mr.SGE(i*8192, 8192)}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.srq.PostRecv(RecvWR{WRID: 99, NumSGE: 2, SGL: [8]SGE{b.mr.SGE(0, 10), b.mr.SGE(10, 10)}}); !errors.Is(err, dataplane.ErrBadWR) {
				t.Fatalf("2 SGEs on an SRQ of max_sge 1: %v, want ErrBadWR", err)
			}
			// Resizing: the engine grows an SRQ; a daemon's SRQ ring has a
			// fixed size, so there it is refused.
			wantWR := 16
			err := b.srq.Modify(SRQAttr{MaxWR: 16}, SRQAttrMaxWR)
			if p.daemon != nil {
				wantWR = 8
				if !errors.Is(err, dataplane.ErrSRQAttr) {
					t.Fatalf("resize over the daemon: %v, want ErrSRQAttr", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if err := b.srq.Modify(SRQAttr{Limit: 3}, SRQAttrLimit); err != nil {
				t.Fatal(err)
			}
			if a, err := b.srq.Query(); err != nil || a.Limit != 3 || a.MaxWR != wantWR {
				t.Fatalf("query %+v, %v: want limit 3, max_wr %d", a, err, wantWR)
			}
			// One SEND on each connection.
			lens := [2]int{3000, 5000}
			for i, s := range as {
				for j := range lens[i] {
					s.buf[j] = byte(i*31 + j*7)
				}
				if err := s.qp.PostSend(SendWR{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(0, lens[i])}}); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[uint32]bool{}
			for range 2 {
				wc, err := waitWC(b.cq, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				i := 0
				if wc.QPNum == b.qps[1].QPN() {
					i = 1
				}
				if wc.Status != WCSuccess || wc.Opcode != WCRecv || int(wc.ByteLen) != lens[i] || wc.WRID < 10 || wc.WRID > 13 || seen[wc.QPNum] {
					t.Fatalf("receive %+v", wc)
				}
				seen[wc.QPNum] = true
				off := int(wc.WRID-10) * 8192
				if !bytes.Equal(b.buf[off:off+lens[i]], as[i].buf[:lens[i]]) {
					t.Fatalf("QP %d: SEND data differs", i)
				}
			}
			// Two WQEs left, fewer than 3: the limit event, once.
			ev := nextEvent(t, p.b)
			if ev.Type != EventSRQLimitReached || ev.SRQ != b.srq || ev.QP != nil {
				t.Fatalf("event %v (%+v), want SRQ_LIMIT_REACHED naming the SRQ", ev.Type, ev)
			}
			noEvent(t, p.b)
			if a, _ := b.srq.Query(); a.Limit != 0 {
				t.Fatalf("limit %d after the event, want 0", a.Limit)
			}
			// Destroying the SRQ while QPs use it is refused.
			if err := b.srq.Destroy(); !errors.Is(err, dataplane.ErrBusy) {
				t.Fatalf("destroy a busy SRQ: %v, want ErrBusy", err)
			}
			// A QP on the SRQ in ERR: QP_LAST_WQE_REACHED naming it.
			if err := b.qps[1].Modify(&QPAttr{State: QPSErr}, AttrState); err != nil {
				t.Fatal(err)
			}
			ev = nextEvent(t, p.b)
			if ev.Type != EventQPLastWQEReached || ev.QP != b.qps[1] {
				t.Fatalf("event %v (%+v), want QP_LAST_WQE_REACHED naming QP 1", ev.Type, ev)
			}
			if other != nil {
				if ev := nextEvent(t, other); ev.Type != EventPortActive {
					t.Fatalf("other client's first event %v, want PORT_ACTIVE", ev.Type)
				}
				noEvent(t, other)
			}
			for _, q := range b.qps {
				if err := q.Destroy(); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.srq.Destroy(); err != nil {
				t.Fatal(err)
			}
			if err := b.srq.PostRecv(RecvWR{WRID: 1}); err == nil {
				t.Fatal("post to a destroyed SRQ succeeded")
			}
		})
	}
}

// TestAsyncFDBlocks: on a daemon context GetAsyncEvent blocks on the
// async descriptor until an event comes (here a CQ overrun's CQ_ERR).
func TestAsyncFDBlocks(t *testing.T) {
	p := newChanPair(t, "daemon")
	if ev := nextEvent(t, p.b); ev.Type != EventPortActive {
		t.Fatalf("first event %v", ev.Type)
	}
	got := make(chan AsyncEvent, 1)
	errc := make(chan error, 1)
	go func() {
		ev, err := p.b.GetAsyncEvent()
		if err != nil {
			errc <- err
			return
		}
		got <- ev
	}()
	select {
	case ev := <-got:
		t.Fatalf("GetAsyncEvent returned %v with nothing waiting", ev.Type)
	case err := <-errc:
		t.Fatalf("GetAsyncEvent: %v", err)
	case <-time.After(quiet):
	}
	// CQ of 1 entry, 3 receive completions: it overruns.
	a, err := newSide(p.a, 4096, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := newSide(p.b, 4096, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	small, err := p.b.CreateCQ(1)
	if err != nil {
		t.Fatal(err)
	}
	if bs.qp, err = bs.pd.CreateQP(QPInitAttr{SendCQ: bs.cq, RecvCQ: small, MaxSendWR: 4, MaxRecvWR: 4}); err != nil {
		t.Fatal(err)
	}
	connectSides(t, a, bs)
	for i := range 3 {
		if err := bs.qp.PostRecv(RecvWR{WRID: uint64(i), NumSGE: 1, SGL: [8]SGE{bs.mr.SGE(0, 100)}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(SendWR{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-got:
		if ev.Type != EventCQErr || ev.CQ == nil {
			t.Fatalf("event %v (%+v), want CQ_ERR", ev.Type, ev)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the CQ overran")
	}
}

// TestSRQRing, embedded and on daemons: an SRQ of 4 holds 4 WQEs (the
// fifth post is refused, queue full, as the engine refuses it), and its
// slots come back as the responder takes WQEs: 24 SENDs through it,
// reposting after each receive, all land byte-exact in order.
func TestSRQRing(t *testing.T) {
	for _, mode := range []string{"embedded", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			p := newChanPair(t, mode)
			b := newSRQSide(t, p.b)
			if err := b.qps[1].Destroy(); err != nil {
				t.Fatal(err)
			}
			s, _, err := b.pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
			if err != nil {
				t.Fatal(err)
			}
			q, err := b.pd.CreateQP(QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, MaxSendWR: 4, SRQ: s})
			if err != nil {
				t.Fatal(err)
			}
			a, err := newSide(p.a, 64<<10, 8, 1)
			if err != nil {
				t.Fatal(err)
			}
			connectSides(t, a, &side{ctx: p.b, qp: q, mr: b.mr, psn: 9})
			post := func(id int) error {
				return s.PostRecv(RecvWR{WRID: uint64(id), NumSGE: 1, SGL: [8]SGE{b.mr.SGE((id%8)*4096, 4096)}})
			}
			for i := range 4 {
				if err := post(i); err != nil {
					t.Fatal(err)
				}
			}
			if err := post(4); !errors.Is(err, dataplane.ErrQueueFull) {
				t.Fatalf("fifth WQE on an SRQ of 4: %v, want ErrQueueFull", err)
			}
			next := 4
			for i := range 24 {
				n := 100 + i*37
				for j := range n {
					a.buf[j] = byte(i + j)
				}
				if err := a.qp.PostSend(SendWR{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, n)}}); err != nil {
					t.Fatal(err)
				}
				if _, err := waitWC(a.cq, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				wc, err := waitWC(b.cq, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if wc.Status != WCSuccess || wc.WRID != uint64(i) || int(wc.ByteLen) != n {
					t.Fatalf("receive %d: %+v", i, wc)
				}
				off := (i % 8) * 4096
				if !bytes.Equal(b.buf[off:off+n], a.buf[:n]) {
					t.Fatalf("receive %d: data differs", i)
				}
				// The slot the responder freed takes the next WQE (on a
				// daemon once the pump has seen the engine take it).
				deadline := time.Now().Add(5 * time.Second)
				for {
					err := post(next)
					if err == nil {
						break
					}
					if !errors.Is(err, dataplane.ErrQueueFull) || time.Now().After(deadline) {
						t.Fatalf("repost %d: %v", next, err)
					}
					time.Sleep(time.Millisecond)
				}
				next++
			}
		})
	}
}

// TestSRQRingBadWR: a work request in a daemon SRQ's ring that the
// library would have refused (9 SGEs; a client writing the ring itself)
// is dropped by the daemon, which goes on serving the SRQ: the next WQE
// takes the SEND.
func TestSRQRingBadWR(t *testing.T) {
	p := newChanPair(t, "daemon")
	b := newSRQSide(t, p.b)
	a, err := newSide(p.a, 4096, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	connectSides(t, a, &side{ctx: p.b, qp: b.qps[0], mr: b.mr, psn: 9})
	s := b.srq
	s.mu.Lock()
	bad := RecvWR{WRID: 66, NumSGE: 9}
	s.ring.Push(&bad)
	s.ring.Publish()
	s.mu.Unlock()
	if err := s.PostRecv(RecvWR{WRID: 7, NumSGE: 1, SGL: [8]SGE{b.mr.SGE(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, 50)}}); err != nil {
		t.Fatal(err)
	}
	wc, err := waitWC(b.cq, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if wc.Status != WCSuccess || wc.WRID != 7 || wc.ByteLen != 50 {
		t.Fatalf("receive %+v, want WR 7 with 50 bytes", wc)
	}
}

// TestAsyncFDOnce: a connection gets one async descriptor; asking again
// is a protocol error, and get_async_events works with or without it.
func TestAsyncFDOnce(t *testing.T) {
	p := newChanPair(t, "daemon")
	r := p.b.remote
	var res proto.AsyncEventsResult
	if _, err := r.call(proto.OpGetAsyncEvents, nil, nil, &res); err != nil || len(res.Events) != 1 || res.Events[0].Type != int(EventPortActive) {
		t.Fatalf("get_async_events before async_fd: %+v, %v; want PORT_ACTIVE", res, err)
	}
	if _, err := p.b.AsyncFD(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.call(proto.OpAsyncFD, nil, nil, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("second async_fd: %v, want a protocol error", err)
	}
}
