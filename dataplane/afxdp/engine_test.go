//go:build linux

package afxdp

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
)

// TestEngineRDMAWrite runs two softnic engines on the AF_XDP ports of the
// testbed, each in its own adaptive poll loop (dataplane.Engine.Run with
// the port as the Waiter), and moves RDMA WRITEs from A's memory into B's
// through the switch: requests one way, ACKs the other, every frame built
// in a UMEM chunk and parsed in place.
func TestEngineRDMAWrite(t *testing.T) {
	p := newTestPair(t, Config{FrameSize: 2048})
	ea, err := dataplane.NewEngine(dataplane.Config{MAC: p.aMAC, Addr: p.tb.A.IPv4}, p.a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := dataplane.NewEngine(dataplane.Config{MAC: p.bMAC, Addr: p.tb.B.IPv4}, p.b)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	type side struct {
		e  *dataplane.Engine
		mr *dataplane.MR
		cq *dataplane.CQ
		q  *dataplane.QP
	}
	mk := func(e *dataplane.Engine) side {
		pd := e.AllocPD()
		mr, err := e.RegMR(pd, make([]byte, size), 0, all)
		if err != nil {
			t.Fatal(err)
		}
		cq, err := e.CreateCQ(256, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, err := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 64, MaxRecvWR: 64})
		if err != nil {
			t.Fatal(err)
		}
		return side{e, mr, cq, q}
	}
	a, b := mk(ea), mk(eb)
	// Routed path: each side's next hop is its switch port, not the peer.
	connect(t, a.e, a.q, b.q, p.tb.B.IPv4, p.swAMAC, 100, 500)
	connect(t, b.e, b.q, a.q, p.tb.A.IPv4, p.swBMAC, 500, 100)
	src := a.mr.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>11)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []struct {
		e *dataplane.Engine
		p *Port
	}{{ea, p.a}, {eb, p.b}} {
		wg.Go(func() {
			clock := dataplane.NewMonotonicClock()
			s.e.Run(ctx, s.p, clock.Now, dataplane.RunConfig{})
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	// Four 1 MiB writes, each into its place in B's region.
	const msg = size / 4
	for i := range 4 {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1,
			RemoteAddr: b.mr.Addr + uint64(i*msg), RKey: b.mr.RKey}
		wr.SGL[0] = qp.SGE{Addr: a.mr.Addr + uint64(i*msg), Length: msg, LKey: a.mr.LKey}
		if _, err := ea.PostSend(a.q, []qp.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	wcs := make([]qp.WC, 8)
	done := 0
	deadline := time.Now().Add(20 * time.Second)
	for done < 4 {
		n, err := ea.PollCQ(a.cq, wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		done += n
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 writes completed in 20 s; A %+v port %+v; B %+v port %+v",
				done, ea.Counters(), p.a.Stats(), eb.Counters(), p.b.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Equal(b.mr.Bytes(), src) {
		t.Fatal("B's memory differs from A's after the writes")
	}
	ca, cb := ea.Counters(), eb.Counters()
	t.Logf("A sent %d packets (%d retransmitted), B acked with %d; B dropped %d ICRC, %d malformed; A port %+v; B port %+v",
		ca.SentPkts, ca.Retransmits, cb.AcksSent, cb.RcvdICRCErr, cb.RcvdMalformed, p.a.Stats(), p.b.Stats())
	if cb.RcvdICRCErr+cb.RcvdMalformed+ca.RcvdICRCErr+ca.RcvdMalformed != 0 {
		t.Errorf("frames failed the receive checks: A %+v, B %+v", ca, cb)
	}
}

// connect moves q (on e) to RTS towards peer at peerAddr, whose frames go
// to the next-hop MAC dmac: dataplane.Connect with a routed address vector
// (Connect addresses the peer's own MAC, right only on a direct link).
func connect(t *testing.T, e *dataplane.Engine, q, peer *dataplane.QP, peerAddr netip.Addr, dmac [6]byte, sqPSN, rqPSN qp.PSN) {
	t.Helper()
	steps := []struct {
		a    dataplane.QPAttr
		mask qp.AttrMask
	}{
		{dataplane.QPAttr{State: qp.Init, AccessFlags: qp.AccessLocalWrite | qp.AccessRemoteWrite, Port: 1},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{dataplane.QPAttr{State: qp.RTR, AV: dataplane.AddressVector{DGID: peerAddr, DMAC: dmac, HopLimit: 64},
			PathMTU: qp.MTU1024, DestQPN: peer.QPN(), RQPSN: rqPSN, MaxDestRdAtomic: 16, MinRNRTimer: 12},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{dataplane.QPAttr{State: qp.RTS, SQPSN: sqPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := e.ModifyQP(q, &st.a, st.mask); err != nil {
			t.Fatalf("connect: %v", err)
		}
	}
}
