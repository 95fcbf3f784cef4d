package dataplane

import (
	"errors"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// srqPair is two RC connections, A1-B1 and A2-B2, whose two QPs on B take
// their receive WQEs from one SRQ.
type srqPair struct {
	tb       testing.TB
	sim      *Sim
	pdA, pdB uint32
	cqA, cqB *CQ
	mrA, mrB *MR
	srq      *SRQ
	qa, qb   [2]*QP
	wcs      []qp.WC
}

func newSRQPair(tb testing.TB, cfg SimConfig, p ConnParams, srqAttr SRQAttr, cqDepthB int) *srqPair {
	tb.Helper()
	sim, err := NewSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	t := &srqPair{tb: tb, sim: sim, wcs: make([]qp.WC, 64)}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	t.pdA, t.pdB = sim.A.AllocPD(), sim.B.AllocPD()
	t.mrA, err = sim.A.RegMR(t.pdA, make([]byte, 1<<20), 0, all)
	must(err)
	t.mrB, err = sim.B.RegMR(t.pdB, make([]byte, 1<<20), 0, all)
	must(err)
	t.cqA, err = sim.A.CreateCQ(4096, nil)
	must(err)
	t.cqB, err = sim.B.CreateCQ(cqDepthB, nil)
	must(err)
	t.srq, _, err = sim.B.CreateSRQ(t.pdB, srqAttr)
	must(err)
	for i := range t.qa {
		t.qa[i], err = sim.A.CreateQP(t.pdA, QPInitAttr{SendCQ: t.cqA, RecvCQ: t.cqA, MaxSendWR: 64, MaxRecvWR: 64})
		must(err)
		t.qb[i], err = sim.B.CreateQP(t.pdB, QPInitAttr{SendCQ: t.cqB, RecvCQ: t.cqB, MaxSendWR: 64, SRQ: t.srq})
		must(err)
		must(Connect(sim.A, t.qa[i], sim.B, t.qb[i], p))
	}
	return t
}

func (t *srqPair) postSRQ(wrs ...qp.RecvWR) {
	t.tb.Helper()
	if _, err := t.sim.B.PostSRQRecv(t.srq, wrs); err != nil {
		t.tb.Fatal(err)
	}
}

func (t *srqPair) send(i int, wrs ...qp.SendWR) {
	t.tb.Helper()
	if _, err := t.sim.A.PostSend(t.qa[i], wrs); err != nil {
		t.tb.Fatal(err)
	}
}

func (t *srqPair) wait(e *Engine, cq *CQ, n int, limit time.Duration) []qp.WC {
	t.tb.Helper()
	var got []qp.WC
	if !t.sim.RunUntil(func() bool {
		k, err := e.PollCQ(cq, t.wcs)
		if err != nil {
			t.tb.Fatal(err)
		}
		got = append(got, t.wcs[:k]...)
		return len(got) >= n
	}, limit) {
		t.tb.Fatalf("got %d of %d completions after %v simulated", len(got), n, t.sim.Now())
	}
	return got
}

// events drains e's asynchronous events.
func events(e *Engine) []Event {
	var out []Event
	buf := make([]Event, 8)
	for {
		n := e.PollEvents(buf)
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

// without drops the events of type t (COMM_EST, which a test that is not
// about it does not count).
func without(evs []Event, t EventType) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Type != t {
			out = append(out, ev)
		}
	}
	return out
}

// TestSRQSharedByTwoQPs: SENDs of several packets on two connections
// land, byte-exact, in receive WQEs of the one SRQ both responder QPs take
// from, each QP's in the order of its messages.
func TestSRQSharedByTwoQPs(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 31, AtoB: lossyLink(0.02), BtoA: lossyLink(0.02)}, ConnParams{Timeout: 8}, SRQAttr{MaxWR: 16, MaxSGE: 1}, 64)
	const slot = 8192
	for i := range 8 {
		p.postSRQ(recvWR(uint64(100+i), sge(p.mrB, i*slot, slot)))
	}
	fillRandom(p.mrA.Bytes()[:8*slot], 31)
	lens := [2][4]int{{3000, 5000, 17, 8192}, {1024, 4097, 2048, 1}}
	for k := range 4 {
		for i := range 2 {
			m := i*4 + k
			p.send(i, sendWR(uint64(m), qp.WRSend, sge(p.mrA, m*slot, lens[i][k])))
		}
	}
	p.wait(p.sim.A, p.cqA, 8, 10*time.Second)
	wcs := p.wait(p.sim.B, p.cqB, 8, 10*time.Second)
	next := [2]int{}
	seen := map[uint64]bool{}
	for _, wc := range wcs {
		i := -1
		for j := range p.qb {
			if wc.QPNum == p.qb[j].QPN() {
				i = j
			}
		}
		if i < 0 || wc.Status != qp.WCSuccess || wc.Opcode != qp.WCRecv || wc.WRID < 100 || wc.WRID >= 108 || seen[wc.WRID] {
			t.Fatalf("completion %+v", wc)
		}
		seen[wc.WRID] = true
		k := next[i]
		next[i]++
		m := i*4 + k
		if int(wc.ByteLen) != lens[i][k] {
			t.Fatalf("QP %d message %d: byte_len %d, want %d", i, k, wc.ByteLen, lens[i][k])
		}
		off := int(wc.WRID-100) * slot
		mustEqual(t, "SEND through the SRQ", p.mrB.Bytes()[off:off+lens[i][k]], p.mrA.Bytes()[m*slot:m*slot+lens[i][k]])
	}
	if next != [2]int{4, 4} {
		t.Fatalf("receives per QP %v, want 4 each", next)
	}
	if d := p.sim.B.SRQDepth(p.srq); d != 0 {
		t.Fatalf("SRQ holds %d WQEs, want 0", d)
	}
}

// TestSRQEmptyRNR: an empty SRQ is answered with RNR NAKs; a WQE posted
// to it during the RNR wait lets the retried SEND through.
func TestSRQEmptyRNR(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 32}, ConnParams{MinRNRTimer: 14}, SRQAttr{MaxWR: 4, MaxSGE: 1}, 64)
	fillRandom(p.mrA.Bytes()[:5000], 32)
	p.send(1, sendWR(1, qp.WRSend, sge(p.mrA, 0, 5000)))
	p.sim.RunFor(500 * time.Microsecond)
	if p.sim.B.Counters().SendRNRErr == 0 {
		t.Fatal("no RNR NAK was sent")
	}
	p.postSRQ(recvWR(7, sge(p.mrB, 0, 8000)))
	wantWC(t, p.wait(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCSend)
	wc := p.wait(p.sim.B, p.cqB, 1, time.Second)[0]
	wantWC(t, wc, 7, qp.WCSuccess, qp.WCRecv)
	if wc.QPNum != p.qb[1].QPN() {
		t.Fatalf("completion on QP %#x, want %#x", wc.QPNum, p.qb[1].QPN())
	}
	mustEqual(t, "SEND after RNR", p.mrB.Bytes()[:5000], p.mrA.Bytes()[:5000])
}

// TestSRQLimitEvent: an armed SRQ raises SRQ_LIMIT_REACHED once, when a
// WQE taken leaves fewer than the limit, and disarms.
func TestSRQLimitEvent(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 33}, ConnParams{}, SRQAttr{MaxWR: 8, MaxSGE: 1}, 64)
	e := p.sim.B
	for i := range 5 {
		p.postSRQ(recvWR(uint64(i), sge(p.mrB, i*100, 100)))
	}
	if err := e.ModifySRQ(p.srq, SRQAttr{Limit: 9}, SRQAttrLimit); !errors.Is(err, ErrSRQAttr) {
		t.Fatalf("limit 9 on an SRQ of 8: %v, want ErrSRQAttr", err)
	}
	if err := e.ModifySRQ(p.srq, SRQAttr{Limit: 3}, SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.QuerySRQ(p.srq); a.Limit != 3 || a.MaxWR != 8 || a.MaxSGE != 1 {
		t.Fatalf("query %+v, want limit 3, max_wr 8, max_sge 1", a)
	}
	events(e) // COMM_EST and the like from connecting
	step := func(i int, wantEvents int) {
		t.Helper()
		p.send(i%2, sendWR(uint64(i), qp.WRSend, sge(p.mrA, 0, 10)))
		p.wait(e, p.cqB, 1, time.Second)
		evs := without(events(e), EventCommEst)
		if len(evs) != wantEvents {
			t.Fatalf("after SEND %d (%d WQEs left): events %+v, want %d", i, e.SRQDepth(p.srq), evs, wantEvents)
		}
		for _, ev := range evs {
			if ev.Type != EventSRQLimitReached || ev.SRQ != p.srq || ev.QP != nil {
				t.Fatalf("event %+v, want SRQ_LIMIT_REACHED naming the SRQ", ev)
			}
		}
	}
	step(0, 0) // 4 left
	step(1, 0) // 3 left: not below 3
	step(2, 1) // 2 left: below, once
	if a, _ := e.QuerySRQ(p.srq); a.Limit != 0 {
		t.Fatalf("limit %d after the event, want 0 (disarmed)", a.Limit)
	}
	step(3, 0) // disarmed
	// Armed again above what it holds: the next WQE taken raises it.
	if err := e.ModifySRQ(p.srq, SRQAttr{Limit: 4}, SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	step(4, 1)
}

// TestSRQResize: IBV_SRQ_MAX_WR grows the queue keeping its WQEs in
// order, and refuses to shrink below what it holds.
func TestSRQResize(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 34}, ConnParams{}, SRQAttr{MaxWR: 2, MaxSGE: 1}, 64)
	e := p.sim.B
	p.postSRQ(recvWR(1, sge(p.mrB, 0, 100)), recvWR(2, sge(p.mrB, 100, 100)))
	if _, err := e.PostSRQRecv(p.srq, []qp.RecvWR{recvWR(3, sge(p.mrB, 200, 100))}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third WQE on an SRQ of 2: %v, want ErrQueueFull", err)
	}
	if err := e.ModifySRQ(p.srq, SRQAttr{MaxWR: 1}, SRQAttrMaxWR); !errors.Is(err, ErrSRQAttr) {
		t.Fatalf("shrink below 2 held: %v, want ErrSRQAttr", err)
	}
	if err := e.ModifySRQ(p.srq, SRQAttr{MaxWR: 5}, SRQAttrMaxWR); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.QuerySRQ(p.srq); a.MaxWR != 8 {
		t.Fatalf("max_wr %d after resize to 5, want 8", a.MaxWR)
	}
	p.postSRQ(recvWR(3, sge(p.mrB, 200, 100)))
	for i := range 3 {
		p.send(0, sendWR(uint64(i), qp.WRSend, sge(p.mrA, 0, 10)))
	}
	wcs := p.wait(e, p.cqB, 3, time.Second)
	for i, wc := range wcs {
		wantWC(t, wc, uint64(i+1), qp.WCSuccess, qp.WCRecv)
	}
}

// TestSRQLastWQEReached: a QP on an SRQ that enters ERR raises
// QP_LAST_WQE_REACHED naming it; the WQE it had taken for a message in
// progress is flushed, the SRQ's others stay for the other QP.
func TestSRQLastWQEReached(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 35}, ConnParams{}, SRQAttr{MaxWR: 8, MaxSGE: 1}, 64)
	e := p.sim.B
	p.postSRQ(recvWR(1, sge(p.mrB, 0, 100)), recvWR(2, sge(p.mrB, 100, 100)))
	events(e)
	if err := e.ModifyQP(p.qb[0], &QPAttr{State: qp.Err}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	evs := events(e)
	if len(evs) != 1 || evs[0].Type != EventQPLastWQEReached || evs[0].QP != p.qb[0] {
		t.Fatalf("events %+v, want QP_LAST_WQE_REACHED for the QP in ERR", evs)
	}
	if d := e.SRQDepth(p.srq); d != 2 {
		t.Fatalf("SRQ holds %d, want 2: a QP in ERR takes nothing", d)
	}
	p.send(1, sendWR(9, qp.WRSend, sge(p.mrA, 0, 10)))
	wantWC(t, p.wait(e, p.cqB, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCRecv)
	// A QP without an SRQ raises none.
	tp := newTestPair(t, SimConfig{Seed: 36}, ConnParams{})
	events(tp.sim.B)
	if err := tp.sim.B.ModifyQP(tp.qb, &QPAttr{State: qp.Err}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if evs := events(tp.sim.B); len(evs) != 0 {
		t.Fatalf("events %+v for a QP without an SRQ, want none", evs)
	}
}

// TestSRQBusyAndPostRecvRefused: a QP on an SRQ refuses PostRecv; an SRQ
// a QP uses cannot be destroyed (EBUSY); once free it can, and is gone.
func TestSRQBusyAndPostRecvRefused(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 37}, ConnParams{}, SRQAttr{MaxWR: 8, MaxSGE: 1}, 64)
	e := p.sim.B
	if _, err := e.PostRecv(p.qb[0], []qp.RecvWR{recvWR(1, sge(p.mrB, 0, 10))}); !errors.Is(err, ErrHasSRQ) {
		t.Fatalf("PostRecv on a QP with an SRQ: %v, want ErrHasSRQ", err)
	}
	if err := e.DestroySRQ(p.srq); !errors.Is(err, ErrBusy) {
		t.Fatalf("destroy an SRQ two QPs use: %v, want ErrBusy", err)
	}
	if err := e.DeallocPD(p.pdB); !errors.Is(err, ErrBusy) {
		t.Fatalf("dealloc the SRQ's PD: %v, want ErrBusy", err)
	}
	for _, q := range p.qb {
		if err := e.DestroyQP(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DestroySRQ(p.srq); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PostSRQRecv(p.srq, []qp.RecvWR{recvWR(1)}); !errors.Is(err, ErrSRQDestroyed) {
		t.Fatalf("post to a destroyed SRQ: %v", err)
	}
	if err := e.DestroySRQ(p.srq); !errors.Is(err, ErrSRQDestroyed) {
		t.Fatalf("destroy twice: %v", err)
	}
	// Checks at create and post.
	if _, _, err := e.CreateSRQ(p.pdB, SRQAttr{MaxWR: 0}); !errors.Is(err, ErrSRQAttr) {
		t.Fatalf("max_wr 0: %v", err)
	}
	if _, _, err := e.CreateSRQ(999, SRQAttr{MaxWR: 4}); !errors.Is(err, ErrBadPD) {
		t.Fatalf("bad PD: %v", err)
	}
	s, _, err := e.CreateSRQ(p.pdB, SRQAttr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PostSRQRecv(s, []qp.RecvWR{recvWR(1, sge(p.mrB, 0, 10), sge(p.mrB, 10, 10))}); !errors.Is(err, ErrBadWR) {
		t.Fatalf("2 SGEs on max_sge 1: %v", err)
	}
	if _, err := e.PostSRQRecv(s, []qp.RecvWR{recvWR(1, qp.SGE{Addr: 1, Length: 10, LKey: 0x999})}); !errors.Is(err, ErrBadWR) {
		t.Fatalf("bad lkey: %v", err)
	}
	// An SRQ of another PD, and a scheme that places out of order.
	pd2 := e.AllocPD()
	if _, err := e.CreateQP(pd2, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 4, SRQ: s}); !errors.Is(err, ErrSRQAttr) {
		t.Fatalf("SRQ of another PD: %v", err)
	}
	if _, err := e.CreateQP(p.pdB, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 4, SRQ: s, Scheme: recovery.IRN}); !errors.Is(err, ErrSRQTransport) {
		t.Fatalf("SRQ with irn: %v", err)
	}
	q, err := e.CreateQP(p.pdB, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 4, SRQ: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetQPScheme(q, recovery.IRN); !errors.Is(err, ErrSRQTransport) {
		t.Fatalf("SetQPScheme irn on a QP with an SRQ: %v", err)
	}
}

// TestEventQPFatalRetryExceeded: a requester that runs out of retries
// moves its QP to ERR and raises QP_FATAL naming it, once.
func TestEventQPFatalRetryExceeded(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 38, AtoB: fabric.LinkConfig{Loss: 1}}, ConnParams{Timeout: 10, RetryCnt: 1})
	events(p.sim.A)
	p.postSend(sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 100)), sendWR(2, qp.WRSend, sge(p.mrA, 0, 10)))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 2, 10*time.Second)[0], 1, qp.WCRetryExcErr, qp.WCRDMAWrite)
	evs := events(p.sim.A)
	if len(evs) != 1 || evs[0].Type != EventQPFatal || evs[0].QP != p.qa {
		t.Fatalf("events %+v, want one QP_FATAL for the QP", evs)
	}
}

// TestEventResponderErrors: a WRITE with a bad R_Key raises
// QP_ACCESS_ERR at the responder and QP_FATAL at the requester (which
// the NAK moved to ERR); an invalid request (a SEND longer than its
// receive WQE) raises QP_REQ_ERR.
func TestEventResponderErrors(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 39}, ConnParams{})
	events(p.sim.A)
	events(p.sim.B)
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 100))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey^0x55
	p.postSend(wr)
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCRemAccessErr, qp.WCRDMAWrite)
	p.settle()
	if evs := without(events(p.sim.B), EventCommEst); len(evs) != 1 || evs[0].Type != EventQPAccessErr || evs[0].QP != p.qb {
		t.Fatalf("responder events %+v, want QP_ACCESS_ERR", evs)
	}
	if evs := events(p.sim.A); len(evs) != 1 || evs[0].Type != EventQPFatal || evs[0].QP != p.qa {
		t.Fatalf("requester events %+v, want QP_FATAL", evs)
	}

	p = newTestPair(t, SimConfig{Seed: 40}, ConnParams{})
	events(p.sim.B)
	p.postRecv(recvWR(5, sge(p.mrB, 0, 10)))
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, 100)))
	wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, time.Second)[0], 5, qp.WCLocLenErr, qp.WCRecv)
	p.settle()
	if evs := without(events(p.sim.B), EventCommEst); len(evs) != 1 || evs[0].Type != EventQPReqErr || evs[0].QP != p.qb {
		t.Fatalf("responder events %+v, want QP_REQ_ERR", evs)
	}
}

// TestEventCommEst: the first request a QP receives in RTR raises
// COMM_EST, once; a QP already in RTS raises none.
func TestEventCommEst(t *testing.T) {
	sim, err := NewSim(SimConfig{Seed: 41})
	if err != nil {
		t.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	mrA, _ := sim.A.RegMR(pdA, make([]byte, 4096), 0, all)
	mrB, _ := sim.B.RegMR(pdB, make([]byte, 4096), 0, all)
	cqA, _ := sim.A.CreateCQ(16, nil)
	cqB, _ := sim.B.CreateCQ(16, nil)
	qa, _ := sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 8, MaxRecvWR: 8})
	qb, _ := sim.B.CreateQP(pdB, QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 8, MaxRecvWR: 8})
	cp := ConnParams{}.WithDefaults()
	for _, s := range []struct {
		e, peer *Engine
		q, pq   *QP
		rts     bool
	}{{sim.A, sim.B, qa, qb, true}, {sim.B, sim.A, qb, qa, false}} {
		if err := s.e.ModifyQP(s.q, &QPAttr{State: qp.Init, AccessFlags: all, Port: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		a := QPAttr{State: qp.RTR, AV: AddressVector{DGID: s.peer.Addr(), DMAC: s.peer.MAC(), HopLimit: 64}, PathMTU: cp.MTU, DestQPN: s.pq.QPN(), MaxDestRdAtomic: 1, MinRNRTimer: 12}
		if err := s.e.ModifyQP(s.q, &a, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		if s.rts {
			a := QPAttr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
			if err := s.e.ModifyQP(s.q, &a, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 2 {
		wr := sendWR(uint64(i), qp.WRRDMAWrite, sge(mrA, 0, 64))
		wr.RemoteAddr, wr.RKey = mrB.Addr, mrB.RKey
		if _, err := sim.A.PostSend(qa, []qp.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	wcs := make([]qp.WC, 4)
	if !sim.RunUntil(func() bool { k, _ := sim.A.PollCQ(cqA, wcs); n += k; return n == 2 }, time.Second) {
		t.Fatal("WRITEs to a QP in RTR did not complete")
	}
	if evs := events(sim.B); len(evs) != 1 || evs[0].Type != EventCommEst || evs[0].QP != qb {
		t.Fatalf("events at the QP in RTR: %+v, want one COMM_EST", evs)
	}
	if evs := events(sim.A); len(evs) != 0 {
		t.Fatalf("events at the requester: %+v, want none", evs)
	}
}

// TestEventCQOverrun: a CQ that overruns raises CQ_ERR naming it, once.
func TestEventCQOverrun(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 42}, ConnParams{}, SRQAttr{MaxWR: 8, MaxSGE: 1}, 2)
	e := p.sim.B
	for i := range 5 {
		p.postSRQ(recvWR(uint64(i), sge(p.mrB, i*100, 100)))
	}
	events(e)
	for i := range 5 {
		p.send(0, sendWR(uint64(i), qp.WRSend, sge(p.mrA, 0, 10)))
	}
	p.wait(p.sim.A, p.cqA, 5, time.Second)
	evs := without(events(e), EventCommEst)
	if len(evs) != 1 || evs[0].Type != EventCQErr || evs[0].CQ != p.cqB {
		t.Fatalf("events %+v, want one CQ_ERR for the overrun CQ", evs)
	}
}

// TestEventSQDrained: a QP moved to SQD raises SQ_DRAINED once its
// outstanding requests are acknowledged.
func TestEventSQDrained(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 43, AtoB: fabric.LinkConfig{Delay: 100 * time.Microsecond}}, ConnParams{})
	events(p.sim.A)
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 4096))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	p.sim.RunFor(10 * time.Microsecond) // sent, not acknowledged
	if err := p.sim.A.ModifyQP(p.qa, &QPAttr{State: qp.SQD}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if evs := events(p.sim.A); len(evs) != 0 {
		t.Fatalf("events with a WRITE outstanding: %+v, want none", evs)
	}
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCRDMAWrite)
	if evs := events(p.sim.A); len(evs) != 1 || evs[0].Type != EventSQDrained || evs[0].QP != p.qa {
		t.Fatalf("events %+v, want SQ_DRAINED", evs)
	}
}

// TestEventQueueOverflow: events beyond the queue's length are lost and
// counted.
func TestEventQueueOverflow(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 44}, ConnParams{})
	e := p.sim.B
	events(e)
	e.mu.Lock()
	for range EventQueueLen + 3 {
		e.raiseQP(EventCommEst, p.qb)
	}
	e.mu.Unlock()
	if n := len(events(e)); n != EventQueueLen {
		t.Fatalf("drained %d events, want %d", n, EventQueueLen)
	}
	if s := e.EventStats(); s.Lost != 3 {
		t.Fatalf("lost %d, want 3", s.Lost)
	}
}

// TestSRQDoesNotAllocate: SENDs through an SRQ (the take, the limit
// check) keep the steady state allocation-free.
func TestSRQDoesNotAllocate(t *testing.T) {
	p := newSRQPair(t, SimConfig{Seed: 45}, ConnParams{}, SRQAttr{MaxWR: 64, MaxSGE: 1}, 256)
	recv := []qp.RecvWR{recvWR(1, sge(p.mrB, 0, 4096))}
	send := []qp.SendWR{sendWR(1, qp.WRSend, sge(p.mrA, 0, 4096))}
	wcs := make([]qp.WC, 4)
	round := func() {
		p.sim.B.ModifySRQ(p.srq, SRQAttr{Limit: 1}, SRQAttrLimit)
		p.sim.B.PostSRQRecv(p.srq, recv)
		p.sim.A.PostSend(p.qa[0], send)
		a, b := 0, 0
		if !p.sim.RunUntil(func() bool {
			n, _ := p.sim.A.PollCQ(p.cqA, wcs)
			a += n
			n, _ = p.sim.B.PollCQ(p.cqB, wcs)
			b += n
			return a >= 1 && b >= 1
		}, time.Second) {
			t.Fatal("round did not complete")
		}
	}
	for range 20 {
		round()
	}
	evs := make([]Event, 64)
	p.sim.B.PollEvents(evs)
	if allocs := testing.AllocsPerRun(50, func() { round(); p.sim.B.PollEvents(evs) }); allocs != 0 {
		t.Fatalf("%.1f allocations per round, want 0", allocs)
	}
}
