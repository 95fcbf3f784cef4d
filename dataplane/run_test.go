package dataplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

// TestRunRealtime: the Sim on the wall clock, with the verbs side posting
// from another goroutine and the doorbell waking the loop.
func TestRunRealtime(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 15, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)}, ConnParams{Timeout: 8})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.sim.RunRealtime(ctx, RunConfig{}) }()
	defer func() { cancel(); wg.Wait() }()
	fillRandom(p.mrA.Bytes()[:1<<20], 15)
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 1<<20))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	time.Sleep(5 * time.Millisecond) // let the loop go to sleep first
	if _, err := p.sim.A.PostSend(p.qa, []qp.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]qp.WC, 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := p.sim.A.PollCQ(p.cqA, wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion in real time")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if wcs[0].Status != qp.WCSuccess {
		t.Fatalf("completion %+v", wcs[0])
	}
	cancel()
	wg.Wait()
	mustEqual(t, "realtime WRITE", p.mrB.Bytes()[:1<<20], p.mrA.Bytes()[:1<<20])
}
