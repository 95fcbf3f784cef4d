package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The benchmarks run both engines and the fabric in one goroutine with no
// modelled delay or rate, so ns/op is the CPU cost of the whole transport
// — requester, responder and completer of both NICs — per message.

// BenchmarkWrite64K: 64 KiB RDMA WRITEs, MTU 4096 and 1024, eight in
// flight, lossless, under go-back-N and under IRN (extension opcodes, SACK
// state and the BDP-FC window on the path).
func BenchmarkWrite64K(b *testing.B) {
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU4096} {
			b.Run(scheme+"/mtu"+mtu.String(), func(b *testing.B) {
				p := newSchemePair(b, scheme, recovery.Params{}, SimConfig{Seed: 1}, ConnParams{MTU: mtu})
				const depth = 8
				wrs := make([]qp.SendWR, depth)
				for i := range wrs {
					wrs[i] = sendWR(uint64(i), qp.WRRDMAWrite, sge(p.mrA, i*64<<10, 64<<10))
					wrs[i].RemoteAddr, wrs[i].RKey = p.mrB.Addr+uint64(i*64<<10), p.mrB.RKey
				}
				p.benchLoop(b, wrs, nil, 64<<10, int(65536/mtu.Bytes()))
			})
		}
	}
}

// BenchmarkSend8B: 8-byte SENDs, 16 in flight: the message rate.
func BenchmarkSend8B(b *testing.B) {
	p := newTestPair(b, SimConfig{Seed: 1}, ConnParams{})
	const depth = 16
	wrs := make([]qp.SendWR, depth)
	recvs := make([]qp.RecvWR, depth)
	for i := range wrs {
		wrs[i] = sendWR(uint64(i), qp.WRSend, sge(p.mrA, i*8, 8))
		recvs[i] = recvWR(uint64(i), sge(p.mrB, i*8, 8))
	}
	p.benchLoop(b, wrs, recvs, 8, 1)
}

// benchLoop posts wrs (and recvs) as one batch per round and runs the
// simulation until all of them completed; b.N counts messages.
func (p *testPair) benchLoop(b *testing.B, wrs []qp.SendWR, recvs []qp.RecvWR, size, pktsPerMsg int) {
	wcs := make([]qp.WC, 64)
	want := len(wrs) + len(recvs)
	got := 0
	cond := func() bool {
		n, _ := p.sim.A.PollCQ(p.cqA, wcs)
		got += n
		if recvs != nil {
			m, _ := p.sim.B.PollCQ(p.cqB, wcs)
			got += m
		}
		return got >= want
	}
	round := func() {
		got = 0
		if recvs != nil {
			p.sim.B.PostRecv(p.qb, recvs)
		}
		p.sim.A.PostSend(p.qa, wrs)
		if !p.sim.RunUntil(cond, time.Second) {
			b.Fatal("round did not complete")
		}
	}
	round()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += len(wrs) {
		round()
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/el, "msgs/s")
	b.ReportMetric(float64(b.N*pktsPerMsg)/el, "pkts/s")
}
