package sim

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/qp"
)

// netIncast runs a 10:1 incast of RDMA WRITEs of size bytes through one
// switch (40 Gb/s, 2 µs links) with sw's queues, each sender's region
// into its own region of host 10, and returns the Net once every WRITE
// completed, after checking the bytes.
func netIncast(t *testing.T, sw fabric.SwitchConfig, size int) (*Net, time.Duration) {
	t.Helper()
	return netIncastOf(t, sw, size, 10, dataplane.Config{})
}

// netIncastOf is netIncast with senders engines of configuration ec.
func netIncastOf(t *testing.T, sw fabric.SwitchConfig, size, senders int, ec dataplane.Config) (*Net, time.Duration) {
	t.Helper()
	s, err := NewNet(NetConfig{Network: func(c fabric.Clock) (*fabric.Network, error) {
		return fabric.Star(c, senders+1, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}, Switch: sw, Seed: 1})
	}, Engine: ec})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	dst := s.Engines[senders]
	pdD := dst.AllocPD()
	cqD, err := dst.CreateCQ(64, nil)
	must(err)
	type flow struct {
		cq      *dataplane.CQ
		src, to *dataplane.MR
		done    bool
	}
	flows := make([]*flow, senders)
	for i := range senders {
		e := s.Engines[i]
		pd := e.AllocPD()
		f := &flow{}
		f.src, err = e.RegMR(pd, make([]byte, size), 0, all)
		must(err)
		for j := range f.src.Bytes() {
			f.src.Bytes()[j] = byte(i*31 + j)
		}
		f.to, err = dst.RegMR(pdD, make([]byte, size), 0, all)
		must(err)
		f.cq, err = e.CreateCQ(16, nil)
		must(err)
		q, err := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: f.cq, RecvCQ: f.cq, MaxSendWR: 4, MaxRecvWR: 4})
		must(err)
		qd, err := dst.CreateQP(pdD, dataplane.QPInitAttr{SendCQ: cqD, RecvCQ: cqD, MaxSendWR: 4, MaxRecvWR: 4})
		must(err)
		must(dataplane.Connect(e, q, dst, qd, dataplane.ConnParams{}))
		wr := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: f.to.Addr, RKey: f.to.RKey}
		wr.SGL[0] = qp.SGE{Addr: f.src.Addr, Length: uint32(size), LKey: f.src.LKey}
		_, err = e.PostSend(q, []qp.SendWR{wr})
		must(err)
		flows[i] = f
	}
	wcs := make([]qp.WC, 1)
	finished := func() bool {
		all := true
		for i, f := range flows {
			if !f.done {
				n, err := s.Engines[i].PollCQ(f.cq, wcs)
				must(err)
				if n == 1 && wcs[0].Status != qp.WCSuccess {
					t.Fatalf("sender %d: %+v", i, wcs[0])
				}
				f.done = n == 1
			}
			all = all && f.done
		}
		return all
	}
	if !s.RunUntilReact(finished, 5*time.Second) {
		t.Fatalf("not every WRITE completed by %v", s.Now())
	}
	for i, f := range flows {
		if !bytes.Equal(f.src.Bytes(), f.to.Bytes()) {
			t.Fatalf("sender %d's region arrived wrong", i)
		}
	}
	return s, s.Now()
}

// TestNetIncastPFC: ten engines WRITE 256 KiB each to an eleventh through
// one switch. With PFC nothing is dropped, nothing retransmitted, and the
// senders are paused and resumed, their engines stalled on a full
// transmit ring meanwhile; without it (the same 100 KB queue) frames are dropped and
// go-back-N recovers them. Either way every byte arrives.
func TestNetIncastPFC(t *testing.T) {
	const size = 256 << 10
	lossless := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 100_000},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 50_000, XONBytes: 30_000, HeadroomBytes: netsw.HeadroomFor(40e9, 2*time.Microsecond, 1200)}}
	s, took := netIncast(t, lossless, size)
	tot := s.Network.Totals()
	if tot.Dropped != 0 || tot.PausesSent == 0 {
		t.Fatalf("PFC on: %+v", tot)
	}
	for i, h := range s.Network.Hosts()[:10] {
		if st := h.Stats(); st.PausesReceived == 0 || st.ResumesReceived == 0 {
			t.Errorf("sender %d never paused and resumed: %+v", i, st)
		}
		if c := s.Engines[i].Counters(); c.Retransmits != 0 || c.TxRingFull == 0 {
			t.Errorf("sender %d under PFC: %d retransmitted, transmit ring full %d times (want 0, > 0)", i, c.Retransmits, c.TxRingFull)
		}
	}
	// 10 × 256 KiB through one 40 Gb/s port take at least 524 µs.
	t.Logf("PFC on: %v, %d pauses, %d resumes", took, tot.PausesSent, tot.ResumesSent)
	if _, again := netIncast(t, lossless, size); again != took {
		t.Fatalf("the same run took %v, then %v", took, again)
	}

	lossy := lossless
	lossy.PFC = netsw.PFC{}
	s, took = netIncast(t, lossy, size)
	tot = s.Network.Totals()
	var retx uint64
	for _, e := range s.Engines[:10] {
		retx += e.Counters().Retransmits
	}
	if tot.Dropped == 0 || tot.PausesSent != 0 || retx == 0 {
		t.Fatalf("PFC off: %+v, %d retransmitted", tot, retx)
	}
	t.Logf("PFC off: %v, %d dropped, %d retransmitted", took, tot.Dropped, retx)
}

// BenchmarkNetFatTree: IRN's 54-host fat tree (k = 6, 40 Gb/s, 2 µs per
// link, IRN's buffers and PFC), every host WRITEs 64 KiB to the host 27
// places on (another pod), once per iteration; it reports the wall time
// per simulated millisecond, the cost a workload on this network pays.
func BenchmarkNetFatTree(b *testing.B) {
	const hosts, size = 54, 64 << 10
	sw := fabric.SwitchConfig{Buffer: netsw.DefaultBuffer(), PFC: netsw.DefaultPFC()}
	s, err := NewNet(NetConfig{Network: func(c fabric.Clock) (*fabric.Network, error) {
		return fabric.FatTree(c, 6, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}, Switch: sw, Seed: 1})
	}})
	if err != nil {
		b.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	type flow struct {
		e  *dataplane.Engine
		q  *dataplane.QP
		cq *dataplane.CQ
		wr qp.SendWR
	}
	flows := make([]flow, hosts)
	for i := range hosts {
		e, d := s.Engines[i], s.Engines[(i+27)%hosts]
		pd, pdD := e.AllocPD(), d.AllocPD()
		src, _ := e.RegMR(pd, make([]byte, size), 0, all)
		to, _ := d.RegMR(pdD, make([]byte, size), 0, all)
		cq, _ := e.CreateCQ(16, nil)
		cqD, _ := d.CreateCQ(16, nil)
		q, _ := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
		qd, _ := d.CreateQP(pdD, dataplane.QPInitAttr{SendCQ: cqD, RecvCQ: cqD, MaxSendWR: 4, MaxRecvWR: 4})
		if err := dataplane.Connect(e, q, d, qd, dataplane.ConnParams{}); err != nil {
			b.Fatal(err)
		}
		wr := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: to.Addr, RKey: to.RKey}
		wr.SGL[0] = qp.SGE{Addr: src.Addr, Length: size, LKey: src.LKey}
		flows[i] = flow{e, q, cq, wr}
	}
	wcs := make([]qp.WC, 1)
	start := s.Now()
	b.ResetTimer()
	for range b.N {
		done := 0
		for _, f := range flows {
			if _, err := f.e.PostSend(f.q, []qp.SendWR{f.wr}); err != nil {
				b.Fatal(err)
			}
		}
		if !s.RunUntilReact(func() bool {
			for _, f := range flows {
				n, _ := f.e.PollCQ(f.cq, wcs)
				done += n
			}
			return done == hosts
		}, time.Second) {
			b.Fatal("WRITEs did not complete")
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(s.Now()-start)*float64(time.Millisecond)/1e9, "wall-s/sim-ms")
	tot := s.Network.Totals()
	b.ReportMetric(float64(tot.Dequeued)/float64(b.N), "switch-frames/op")
}

// TestNetDCQCNIncast: three engines running DCQCN WRITE 1 MiB each to a
// fourth through one switch that marks ECN (RED, DCQCN's Kmin/Kmax/Pmax)
// with PFC on. Their frames are ECN-capable, the switch marks them, the
// receiver's notification point answers with CNPs, at most one per QP
// per 50 µs, the senders' reaction points throttle for every one, and
// nothing is dropped; every byte arrives. Without congestion control the
// same incast sends no CNP, and no frame is ECN-capable, so none is
// marked.
func TestNetDCQCNIncast(t *testing.T) {
	const size, senders = 1 << 20, 3
	sw := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 400_000}, ECN: netsw.DefaultECN(),
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 300_000, XONBytes: 250_000, HeadroomBytes: netsw.HeadroomFor(40e9, 2*time.Microsecond, 1200)}}
	s, took := netIncastOf(t, sw, size, senders, dataplane.Config{CC: cc.DCQCN})
	rcv := s.Engines[senders].Counters()
	var handled uint64
	for i := range senders {
		c := s.Engines[i].Counters()
		handled += c.RPCNPHandled
		if c.RPCNPIgnored != 0 {
			t.Errorf("sender %d ignored %d CNPs", i, c.RPCNPIgnored)
		}
	}
	tot := s.Network.Totals()
	t.Logf("DCQCN: %v, %d marked, %d CNPs sent, %d handled, %d dropped, %d pauses", took, rcv.NPECNMarkedRoCEPackets, rcv.NPCNPSent, handled, tot.Dropped, tot.PausesSent)
	if rcv.NPECNMarkedRoCEPackets == 0 || rcv.NPCNPSent == 0 || handled != rcv.NPCNPSent {
		t.Fatalf("marked %d, CNPs sent %d, handled %d: want marks, CNPs, every CNP handled", rcv.NPECNMarkedRoCEPackets, rcv.NPCNPSent, handled)
	}
	// At most one CNP per QP per 50 µs (cc's dcqcn.cnp_interval), and
	// the first may come at once.
	if limit := uint64(senders) * (uint64(took/(50*time.Microsecond)) + 1); rcv.NPCNPSent > limit {
		t.Fatalf("%d CNPs in %v from %d QPs: more than one per QP per 50 µs (%d)", rcv.NPCNPSent, took, senders, limit)
	}
	if tot.Dropped != 0 {
		t.Fatalf("%d dropped with PFC on", tot.Dropped)
	}

	s, _ = netIncastOf(t, sw, size, senders, dataplane.Config{})
	if c := s.Engines[senders].Counters(); c.NPECNMarkedRoCEPackets != 0 || c.NPCNPSent != 0 {
		t.Fatalf("without congestion control: %d marked, %d CNPs", c.NPECNMarkedRoCEPackets, c.NPCNPSent)
	}
}

// TestNetDCQCNFairShare: two DCQCN senders keep WRITEs of 256 KiB in
// flight to one receiver through one 40 Gb/s switch port that marks ECN
// (RED, DCQCN's defaults) with PFC on. After they have converged each
// gets its fair share of the bottleneck: the bytes each completes from
// 10 to 40 ms are within 10% of half of what the port carried.
func TestNetDCQCNFairShare(t *testing.T) {
	const size, senders, depth = 256 << 10, 2, 4
	sw := fabric.SwitchConfig{Buffer: netsw.Buffer{PortBytes: 400_000}, ECN: netsw.DefaultECN(),
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 300_000, XONBytes: 250_000, HeadroomBytes: netsw.HeadroomFor(40e9, 2*time.Microsecond, 1200)}}
	s, err := NewNet(NetConfig{Network: func(c fabric.Clock) (*fabric.Network, error) {
		return fabric.Star(c, senders+1, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 40e9, Delay: 2 * time.Microsecond}, Switch: sw, Seed: 1})
	}, Engine: dataplane.Config{CC: cc.DCQCN}})
	if err != nil {
		t.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	dst := s.Engines[senders]
	pdD := dst.AllocPD()
	cqD, _ := dst.CreateCQ(64, nil)
	type flow struct {
		e     *dataplane.Engine
		q     *dataplane.QP
		cq    *dataplane.CQ
		wr    qp.SendWR
		bytes uint64
	}
	flows := make([]*flow, senders)
	for i := range senders {
		e := s.Engines[i]
		pd := e.AllocPD()
		src, err := e.RegMR(pd, make([]byte, size), 0, all)
		if err != nil {
			t.Fatal(err)
		}
		to, err := dst.RegMR(pdD, make([]byte, size), 0, all)
		if err != nil {
			t.Fatal(err)
		}
		cq, _ := e.CreateCQ(64, nil)
		q, err := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: depth, MaxRecvWR: 4})
		if err != nil {
			t.Fatal(err)
		}
		qd, err := dst.CreateQP(pdD, dataplane.QPInitAttr{SendCQ: cqD, RecvCQ: cqD, MaxSendWR: 4, MaxRecvWR: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := dataplane.Connect(e, q, dst, qd, dataplane.ConnParams{}); err != nil {
			t.Fatal(err)
		}
		f := &flow{e: e, q: q, cq: cq, wr: qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: to.Addr, RKey: to.RKey}}
		f.wr.SGL[0] = qp.SGE{Addr: src.Addr, Length: size, LKey: src.LKey}
		for range depth {
			if _, err := e.PostSend(q, []qp.SendWR{f.wr}); err != nil {
				t.Fatal(err)
			}
		}
		flows[i] = f
	}
	wcs := make([]qp.WC, depth)
	// Keep every flow's queue full; count what completes after from.
	pump := func(from time.Duration) func() bool {
		return func() bool {
			for _, f := range flows {
				n, err := f.e.PollCQ(f.cq, wcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, wc := range wcs[:n] {
					if wc.Status != qp.WCSuccess {
						t.Fatalf("%+v", wc)
					}
					if s.Now() >= from {
						f.bytes += size
					}
					if _, err := f.e.PostSend(f.q, []qp.SendWR{f.wr}); err != nil {
						t.Fatal(err)
					}
				}
			}
			return false
		}
	}
	const from, to = 10 * time.Millisecond, 40 * time.Millisecond
	s.RunUntilReact(pump(from), to)
	total := flows[0].bytes + flows[1].bytes
	gbps := func(b uint64) float64 { return float64(b*8) / float64(to-from) }
	t.Logf("from %v to %v: %.2f and %.2f Gb/s (%.2f together), %d CNPs handled", from, to, gbps(flows[0].bytes), gbps(flows[1].bytes), gbps(total),
		s.Engines[0].Counters().RPCNPHandled+s.Engines[1].Counters().RPCNPHandled)
	if total == 0 {
		t.Fatal("nothing completed")
	}
	for i, f := range flows {
		if share := float64(f.bytes) / float64(total); share < 0.45 || share > 0.55 {
			t.Errorf("flow %d got %.1f%% of the bottleneck, want 50%% ± 10%% of it", i, 100*share)
		}
	}
}
