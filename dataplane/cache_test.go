package dataplane

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestContextCacheThrash: sixteen QPs busy at once on NICs whose SRAM
// holds two contexts. Every context is evicted (its on-chip copy
// poisoned) and refetched many times mid-message, lossy, and every
// transfer still completes intact: no PSN, cursor or message state is lost
// across eviction, under every scheme.
func TestContextCacheThrash(t *testing.T) {
	for _, name := range recovery.Names() {
		t.Run(name, func(t *testing.T) { contextCacheThrash(t, name) })
	}
}

func contextCacheThrash(t *testing.T, scheme string) {
	const nQPs = 16
	sa, _ := recovery.New(scheme, recovery.Params{})
	budget := 2*(qp.DefaultQPContextBytes+schemeQPBytes(sa)) + sa.SharedOnChipBytes() + 10
	sim, err := NewSim(SimConfig{Seed: 21, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01), SRAMBytes: budget, SchemeA: scheme, SchemeB: scheme})
	if err != nil {
		t.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	mrA, _ := sim.A.RegMR(pdA, make([]byte, nQPs<<20), 0, all)
	mrB, _ := sim.B.RegMR(pdB, make([]byte, nQPs<<20), 0, all)
	cqA, _ := sim.A.CreateCQ(4096, nil)
	cqB, _ := sim.B.CreateCQ(4096, nil)
	qas, qbs := make([]*QP, nQPs), make([]*QP, nQPs)
	for i := range qas {
		qas[i], _ = sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 64, MaxRecvWR: 64})
		qbs[i], _ = sim.B.CreateQP(pdB, QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 64, MaxRecvWR: 64})
		if err := Connect(sim.A, qas[i], sim.B, qbs[i], ConnParams{MTU: qp.MTU1024, PSNA: qp.PSN(0xFFFF00 + i), Timeout: 8}); err != nil {
			t.Fatal(err)
		}
	}
	fillRandom(mrA.Bytes(), 21)
	fillRandom(mrB.Bytes(), 22)
	// Per QP i: region [i MiB, i MiB + 512 KiB) of A is written to the same
	// place in B; the next 256 KiB of B are read back into the same place
	// in A; one SEND per QP lands in B's receive buffer; one fetch-and-add
	// per QP. No QP touches another's bytes, so the outcome does not depend
	// on how the QPs' transfers interleave.
	const chunk = 64 << 10
	for i := range qas {
		base := i << 20
		var wrs []qp.SendWR
		for k := 0; k < 8; k++ {
			w := sendWR(uint64(k), qp.WRRDMAWrite, sge(mrA, base+k*chunk, chunk))
			w.RemoteAddr, w.RKey = mrB.Addr+uint64(base+k*chunk), mrB.RKey
			wrs = append(wrs, w)
		}
		r := sendWR(100, qp.WRRDMARead, sge(mrA, base+512<<10, 256<<10))
		r.RemoteAddr, r.RKey = mrB.Addr+uint64(base+512<<10), mrB.RKey
		s := sendWR(101, qp.WRSend, sge(mrA, base+800<<10, 3000))
		f := sendWR(102, qp.WRAtomicFetchAndAdd, sge(mrA, base+900<<10, 8))
		f.RemoteAddr, f.RKey, f.CompareAdd = mrB.Addr+uint64(base+1000<<10), mrB.RKey, uint64(i+1)
		wrs = append(wrs, r, s, f)
		if _, err := sim.B.PostRecv(qbs[i], []qp.RecvWR{recvWR(uint64(i), sge(mrB, base+960<<10, 4000))}); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.A.PostSend(qas[i], wrs); err != nil {
			t.Fatal(err)
		}
	}
	binary.LittleEndian.PutUint64(mrB.Bytes()[1000<<10:], 0) // QP 0's counter starts at 0 (the others hold random bytes)
	wantA, wantB := nQPs*11, nQPs
	var gotA, gotB int
	wcs := make([]qp.WC, 64)
	ok := sim.RunUntil(func() bool {
		n, _ := sim.A.PollCQ(cqA, wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		m, _ := sim.B.PollCQ(cqB, wcs)
		gotA, gotB = gotA+n, gotB+m
		return gotA == wantA && gotB == wantB
	}, 30*time.Second)
	if !ok {
		t.Fatalf("%d/%d and %d/%d completions; cache A %+v", gotA, wantA, gotB, wantB, sim.A.CacheStats())
	}
	for i := range qas {
		base := i << 20
		mustEqual(t, fmt.Sprintf("QP %d WRITEs", i), mrB.Bytes()[base:base+512<<10], mrA.Bytes()[base:base+512<<10])
		mustEqual(t, fmt.Sprintf("QP %d READ", i), mrA.Bytes()[base+512<<10:base+768<<10], mrB.Bytes()[base+512<<10:base+768<<10])
		mustEqual(t, fmt.Sprintf("QP %d SEND", i), mrB.Bytes()[base+960<<10:base+960<<10+3000], mrA.Bytes()[base+800<<10:base+800<<10+3000])
	}
	if got := binary.LittleEndian.Uint64(mrB.Bytes()[1000<<10:]); got != 1 {
		t.Fatalf("QP 0's fetch-and-add left %d, want 1 (executed once)", got)
	}
	for _, e := range []*Engine{sim.A, sim.B} {
		s := e.CacheStats()
		if s.Evictions < 100 || s.WriteBacks == 0 || s.PeakResident != 2 || s.PeakResidentBytes > budget {
			t.Fatalf("the cache did not thrash as configured: %+v", s)
		}
	}
}

// schemeQPBytes is the per-QP on-chip state of a scheme's two halves.
func schemeQPBytes(s recovery.Scheme) int {
	return s.NewSender().OnChipBytes() + s.NewReceiver().OnChipBytes()
}

// TestContextCacheStall: a miss stalls the pipeline for exactly the fetch
// penalty; with enough SRAM only the first touch of each QP misses.
func TestContextCacheStall(t *testing.T) {
	for _, tc := range []struct {
		sram       int
		wantMisses func(uint64) bool
	}{
		{0, func(m uint64) bool { return m == 1 }},                                // unlimited: one cold miss per side's QP
		{qp.DefaultQPContextBytes + 5 + 8, func(m uint64) bool { return m == 1 }}, // one QP fits exactly
	} {
		p := newTestPair(t, SimConfig{Seed: 22, SRAMBytes: tc.sram}, ConnParams{})
		for i := uint64(1); i <= 20; i++ {
			p.checkWrite(i, 100, false)
		}
		s := p.sim.A.CacheStats()
		if !tc.wantMisses(s.Misses) || s.StallTime != time.Duration(s.Misses)*qp.DefaultFetchPenalty || s.Hits < 40 {
			t.Fatalf("SRAM %d: %+v", tc.sram, s)
		}
	}
	if _, err := NewSim(SimConfig{SRAMBytes: 100}); err == nil {
		t.Fatal("an SRAM smaller than one context accepted")
	}
}
