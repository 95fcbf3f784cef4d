package dataplane

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The engine's queues go off the Go heap when deep (qp.OffHeapBytes) only
// if their entries hold no Go pointers: a pointer added to one of these
// types would silently keep every queue on the heap.
func TestQueueTypesPointerFree(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[sendWQE](), reflect.TypeFor[recvWQE](), reflect.TypeFor[qp.WC](), reflect.TypeFor[respItem](),
	} {
		if !qp.PointerFree(typ) {
			t.Errorf("%v holds Go pointers: its deep rings would stay on the heap", typ)
		}
	}
}

// rssAnon is the process's resident anonymous memory.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(l, err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// TestDestroyReturnsMemory: a CQ of MaxCQE entries and a QP of MaxWR
// work requests per queue, every page of their rings touched, give all
// of it back to the system as soon as they are destroyed, without a
// garbage collection.
func TestDestroyReturnsMemory(t *testing.T) {
	sim, err := NewSim(SimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e := sim.A
	pd := e.AllocPD()
	before := rssAnon(t)
	cq, err := e.CreateCQ(1<<22, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: MaxWR, MaxRecvWR: MaxWR})
	if err != nil {
		t.Fatal(err)
	}
	if !cq.ring.OffHeap() || !q.sq.OffHeap() || !q.rq.OffHeap() {
		t.Fatalf("deep rings on the heap: CQ %v SQ %v RQ %v", cq.ring.OffHeap(), q.sq.OffHeap(), q.rq.OffHeap())
	}
	size := CQBytes(1<<22) + QueueBytes(MaxWR, MaxWR)
	for cq.ring.Push() != nil {
	}
	for q.sq.Push() != nil {
	}
	for q.rq.Push() != nil {
	}
	held := rssAnon(t)
	if !raceOn && held-before < size*9/10 {
		t.Fatalf("RssAnon grew by %d bytes for %d bytes of rings", held-before, size)
	}

	if err := e.DestroyCQ(cq); !errors.Is(err, ErrBusy) {
		t.Fatalf("DestroyCQ of a CQ a QP uses: %v", err)
	}
	if err := e.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if q.sq.Cap() != 0 || q.rq.Cap() != 0 || q.respQ.Cap() != 0 {
		t.Error("DestroyQP left the QP's queues")
	}
	if s, r := e.QueueDepths(q); s != 0 || r != 0 {
		t.Errorf("a destroyed QP holds %d and %d WRs", s, r)
	}
	if err := e.DestroyCQ(cq); err != nil {
		t.Fatal(err)
	}
	after := rssAnon(t)
	t.Logf("RssAnon: %d MiB before, %d MiB with %d MiB of rings, %d MiB after destroy",
		before>>20, held>>20, size>>20, after>>20)
	// The race detector's shadow of the mapping stays resident.
	if !raceOn && after-before > 8<<20 {
		t.Errorf("RssAnon is %d bytes above where it was before the rings", after-before)
	}

	if err := e.DestroyCQ(cq); !errors.Is(err, ErrCQDestroyed) {
		t.Errorf("second DestroyCQ: %v", err)
	}
	if _, err := e.PollCQ(cq, make([]qp.WC, 1)); !errors.Is(err, ErrCQDestroyed) {
		t.Errorf("PollCQ of a destroyed CQ: %v", err)
	}
	if _, err := e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 1, MaxRecvWR: 1}); !errors.Is(err, ErrCQDestroyed) {
		t.Errorf("CreateQP on a destroyed CQ: %v", err)
	}
	if err := e.DeallocPD(pd); err != nil {
		t.Errorf("DeallocPD after the QP was destroyed: %v", err)
	}
}

// TestDestroyMidFlight destroys both QPs of a connection while sends are
// queued, in flight and under retransmission on a lossy link, then keeps
// the engines running: a QP left on the ready list, on a timer or in
// any other engine structure would touch its released queues, which
// panics (their slices are nil).
func TestDestroyMidFlight(t *testing.T) {
	for _, scheme := range recovery.Names() {
		t.Run(scheme, func(t *testing.T) { destroyMidFlight(t, scheme) })
	}
}

func destroyMidFlight(t *testing.T, scheme string) {
	tp := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 31, AtoB: lossyLink(0.05), BtoA: lossyLink(0.05)}, ConnParams{Timeout: 8})
	for i := range 32 {
		tp.postRecv(recvWR(uint64(i), sge(tp.mrB, i*65536, 65536)))
	}
	for i := range 32 {
		tp.postSend(sendWR(uint64(i), qp.WRSend, sge(tp.mrA, i*65536, 65536)))
	}
	tp.sim.RunFor(30 * time.Microsecond)
	if err := tp.sim.A.DestroyQP(tp.qa); err != nil {
		t.Fatal(err)
	}
	if err := tp.sim.B.DestroyQP(tp.qb); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{tp.sim.A, tp.sim.B} {
		for _, q := range e.ready[:cap(e.ready)] {
			if q == tp.qa || q == tp.qb {
				t.Fatal("the ready list's array still references a destroyed QP")
			}
		}
	}
	tp.sim.RunFor(50 * time.Millisecond)
	for _, c := range []struct {
		e  *Engine
		cq *CQ
	}{{tp.sim.A, tp.cqA}, {tp.sim.B, tp.cqB}} {
		for {
			n, err := c.e.PollCQ(c.cq, tp.wcs)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if err := c.e.DestroyCQ(c.cq); err != nil {
			t.Fatal(err)
		}
		if r := c.e.Resources(); r.QPs != 0 {
			t.Errorf("the engine still has %d QPs", r.QPs)
		}
	}
}
