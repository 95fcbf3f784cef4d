package sim

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// pair is one RC QP on each engine of a Sim, connected, each with a 1 MiB
// memory region and a completion queue.
type pair struct {
	s        *Sim
	cqA, cqB *dataplane.CQ
	qa, qb   *dataplane.QP
	mrA, mrB *dataplane.MR
}

const mrSize = 1 << 20

func newPair(t *testing.T, cfg Config, p dataplane.ConnParams) *pair {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	x := &pair{s: s}
	pdA, pdB := s.A.AllocPD(), s.B.AllocPD()
	x.mrA, err = s.A.RegMR(pdA, make([]byte, mrSize), 0, all)
	must(err)
	x.mrB, err = s.B.RegMR(pdB, make([]byte, mrSize), 0, all)
	must(err)
	x.cqA, err = s.A.CreateCQ(64, nil)
	must(err)
	x.cqB, err = s.B.CreateCQ(64, nil)
	must(err)
	x.qa, err = s.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: x.cqA, RecvCQ: x.cqA, MaxSendWR: 16, MaxRecvWR: 16})
	must(err)
	x.qb, err = s.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: x.cqB, RecvCQ: x.cqB, MaxSendWR: 16, MaxRecvWR: 16})
	must(err)
	must(dataplane.Connect(s.A, x.qa, s.B, x.qb, p))
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed))
	for i := range x.mrA.Bytes() {
		x.mrA.Bytes()[i] = byte(r.Uint32())
	}
	return x
}

// write posts a signaled WRITE of all of A's region into B's.
func (x *pair) write(t *testing.T) {
	t.Helper()
	wr := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1,
		RemoteAddr: x.mrB.Addr, RKey: x.mrB.RKey}
	wr.SGL[0] = qp.SGE{Addr: x.mrA.Addr, Length: mrSize, LKey: x.mrA.LKey}
	if _, err := x.s.A.PostSend(x.qa, []qp.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

// done polls A's completion queue once: whether the WRITE completed.
func (x *pair) done(t *testing.T) bool {
	t.Helper()
	wcs := make([]qp.WC, 1)
	n, err := x.s.A.PollCQ(x.cqA, wcs)
	if err != nil {
		t.Fatal(err)
	}
	if n == 1 && wcs[0].Status != qp.WCSuccess {
		t.Fatalf("completion %+v", wcs[0])
	}
	return n == 1
}

func (x *pair) check(t *testing.T) {
	t.Helper()
	if !bytes.Equal(x.mrB.Bytes(), x.mrA.Bytes()) {
		t.Fatal("B's region is not A's")
	}
}

// lossyLink is the protocol tests' link (fabric.LossyHop).
func lossyLink(loss float64) fabric.LinkConfig { return fabric.LossyHop(loss) }

// TestSimulated: a 1 MiB WRITE over a lossy link in simulated time, and
// the same run again gives the same time.
func TestSimulated(t *testing.T) {
	var took [2]time.Duration
	for i := range took {
		x := newPair(t, Config{Seed: 7, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)}, dataplane.ConnParams{Timeout: 8})
		x.write(t)
		if !x.s.RunUntil(func() bool { return x.done(t) }, time.Second) {
			t.Fatalf("no completion after %v simulated", x.s.Now())
		}
		x.check(t)
		took[i] = x.s.Now()
		x.s.RunFor(time.Millisecond)
		if got, want := x.s.Now(), took[i]+time.Millisecond; got != want {
			t.Fatalf("RunFor(1ms) from %v: at %v, want %v", took[i], got, want)
		}
	}
	if took[0] != took[1] {
		t.Fatalf("two runs with one seed took %v and %v", took[0], took[1])
	}
}

// TestRunRealtime: the Sim on the wall clock, with the verbs side posting
// from another goroutine and the doorbell waking the loop.
func TestRunRealtime(t *testing.T) {
	x := newPair(t, Config{Seed: 15, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)}, dataplane.ConnParams{Timeout: 8})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { x.s.RunRealtime(ctx, dataplane.RunConfig{}) })
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(5 * time.Millisecond) // let the loop go to sleep first
	x.write(t)
	deadline := time.Now().Add(20 * time.Second)
	for !x.done(t) {
		if time.Now().After(deadline) {
			t.Fatal("no completion in real time")
		}
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	wg.Wait()
	x.check(t)
}

// TestHarness: package dataplane's tests, which cannot import this
// package, build their Sim from a SimConfig (dataplane/sim_test.go) that
// has Config's fields but MaxFrame, so that a field added here is not
// forgotten there.
func TestHarness(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../sim_test.go", nil, 0)
	if err != nil {
		t.Skip("dataplane's harness:", err)
	}
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "SimConfig" {
			for _, fl := range ts.Type.(*ast.StructType).Fields.List {
				for _, name := range fl.Names {
					// ServiceRateB is the harness's own (B's service
					// time alone, for TestServiceTimeReceive).
					if name.Name != "ServiceRateB" {
						got = append(got, name.Name)
					}
				}
			}
		}
		return true
	})
	var want []string
	for _, fl := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		if fl.Name != "MaxFrame" {
			want = append(want, fl.Name)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dataplane's SimConfig has %v, Config (but MaxFrame) %v", got, want)
	}
}
