package verbs

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/verbsd"
)

// udSide is one host's UD objects.
type udSide struct {
	ctx *Context
	dev DeviceAttr
	pd  *PD
	buf []byte
	mr  *MR
	cq  *CQ
	qp  *QP
}

const testQKey = 0x1234

func newUDSide(t *testing.T, ctx *Context) *udSide {
	t.Helper()
	s := &udSide{ctx: ctx}
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.dev, err = ctx.QueryDevice()
	must(err)
	s.pd, err = ctx.AllocPD()
	must(err)
	s.buf, err = ctx.AllocBuf(1 << 16)
	must(err)
	s.mr, err = s.pd.RegMR(s.buf, AccessLocalWrite)
	must(err)
	s.cq, err = ctx.CreateCQ(64)
	must(err)
	s.qp, err = s.pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 16, MaxRecvWR: 16, Type: QPTUD})
	must(err)
	for _, st := range []struct {
		a    QPAttr
		mask AttrMask
	}{
		{QPAttr{State: QPSInit, Port: 1, QKey: testQKey}, AttrState | AttrPKeyIndex | AttrPort | AttrQKey},
		{QPAttr{State: QPSRTR}, AttrState},
		{QPAttr{State: QPSRTS, SQPSN: 7}, AttrState | AttrSQPSN},
	} {
		must(s.qp.Modify(&st.a, st.mask))
	}
	return s
}

// udExchange runs the UD API between a and b: an AH resolved from the
// NIC's neighbours, two datagrams (one with an immediate) byte-exact
// after the GRH area, the post-time refusals, the unreachable AH.
// wait returns cq's next completion.
func udExchange(t *testing.T, a, b *Context, wait func(*CQ) (WC, error)) {
	sa, sb := newUDSide(t, a), newUDSide(t, b)
	if q := sb.qp.Query(); q.QKey != testQKey || q.State != QPSRTS {
		t.Fatalf("query: %+v", q)
	}
	ah, err := sa.pd.CreateAH(AHAttr{DGID: sb.dev.GID, HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	if ah.Attr().DMAC != sb.dev.MAC {
		t.Fatalf("AH resolved MAC %x, want B's %x", ah.Attr().DMAC, sb.dev.MAC)
	}
	msgs := [][]byte{pattern(1, 1000), pattern(2, 17)}
	for i := range msgs {
		if err := sb.qp.PostRecv(RecvWR{WRID: uint64(10 + i), SGL: [8]SGE{sb.mr.SGE(i*4096, 1024+GRHLen)}, NumSGE: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range msgs {
		copy(sa.buf[i*4096:], m)
		wr := SendWR{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGL: [8]SGE{sa.mr.SGE(i*4096, len(m))}, NumSGE: 1,
			AH: ah.Handle(), RemoteQPN: sb.qp.QPN(), RemoteQKey: testQKey}
		if i == 1 {
			wr.Opcode, wr.ImmData, wr.RemoteQKey = WRSendWithImm, 0xfeed, QKeyUseQP // A's Q_Key is B's
		}
		if err := sa.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range msgs {
		s, err := wait(sa.cq)
		if err != nil || s.Status != WCSuccess || s.WRID != uint64(i) || s.Opcode != WCSend {
			t.Fatalf("send completion %+v, %v", s, err)
		}
		r, err := wait(sb.cq)
		if err != nil {
			t.Fatal(err)
		}
		want := WCGRH
		if i == 1 {
			want |= WCWithImm
		}
		if r.Status != WCSuccess || r.WRID != uint64(10+i) || r.Opcode != WCRecv || r.ByteLen != uint32(len(m)+GRHLen) ||
			r.SrcQP != sa.qp.QPN() || r.Flags != want || (i == 1 && r.ImmData != 0xfeed) {
			t.Fatalf("receive completion %+v", r)
		}
		if got := sb.buf[i*4096+GRHLen : i*4096+GRHLen+len(m)]; !bytes.Equal(got, m) {
			t.Fatalf("datagram %d differs", i)
		}
		if src := netip.AddrFrom4([4]byte(sb.buf[i*4096+GRHLen-8 : i*4096+GRHLen-4])); src != sa.dev.GID.Unmap() {
			t.Fatalf("GRH source %v, want %v", src, sa.dev.GID)
		}
	}
	// Refused at post: above the port MTU (a daemon client checks before
	// the ring), an AH that is gone.
	big := SendWR{WRID: 99, Opcode: WRSend, SGL: [8]SGE{sa.mr.SGE(0, 4096), sa.mr.SGE(0, 1)}, NumSGE: 2,
		AH: ah.Handle(), RemoteQPN: sb.qp.QPN(), RemoteQKey: testQKey}
	var pe *PostError
	if err := sa.qp.PostSend(big); !errors.Is(err, dataplane.ErrBadWR) || !errors.As(err, &pe) || pe.Index != 0 {
		t.Fatalf("post of 4097 bytes: %v", err)
	}
	gone, err := sa.pd.CreateAH(AHAttr{DGID: sb.dev.GID})
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Destroy(); err != nil {
		t.Fatal(err)
	}
	big.NumSGE, big.AH = 1, gone.Handle()
	if err := sa.qp.PostSend(big); !errors.Is(err, dataplane.ErrBadAH) {
		t.Fatalf("post through a destroyed AH: %v", err)
	}
	if err := gone.Destroy(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second destroy: %v", err)
	}
	// No neighbour: the AH is refused.
	if _, err := sa.pd.CreateAH(AHAttr{DGID: netip.MustParseAddr("198.18.9.9")}); !errors.Is(err, dataplane.ErrNoNeighbor) {
		t.Fatalf("AH to no neighbour: %v", err)
	}
	if err := sa.pd.Dealloc(); !errors.Is(err, dataplane.ErrBusy) {
		t.Fatalf("dealloc PD with an AH: %v", err)
	}
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestUDEmbedded(t *testing.T) {
	m, err := NewEmbedded(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	wcs := make([]WC, 1)
	udExchange(t, m.A, m.B, func(cq *CQ) (WC, error) {
		var got WC
		var perr error
		ok := m.RunUntil(func() bool {
			n, err := cq.Poll(wcs)
			if err != nil {
				perr = err
				return true
			}
			if n == 1 {
				got = wcs[0]
				return true
			}
			return false
		}, time.Second)
		if perr != nil {
			return WC{}, perr
		}
		if !ok {
			if n, _ := cq.Poll(wcs); n == 1 {
				return wcs[0], nil
			}
			return WC{}, errors.New("no completion")
		}
		return got, nil
	})
}

func TestUDDaemon(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 2}, true)
	a, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	udExchange(t, a, b, func(cq *CQ) (WC, error) { return waitWC(cq, 10*time.Second) })
	if o := d.a.Objects(); o.AHs != 0 {
		t.Fatalf("A's daemon holds %d AHs after they were destroyed", o.AHs)
	}
	// An AH left to the teardown goes with the connection.
	pd, err := a.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := b.QueryDevice()
	if _, err := pd.CreateAH(AHAttr{DGID: dev.GID}); err != nil {
		t.Fatal(err)
	}
	if o := d.a.Objects(); o.AHs != 1 {
		t.Fatalf("A's daemon holds %d AHs, want 1", o.AHs)
	}
	a.Close()
	b.Close()
	waitObjects(t, d.a, verbsd.Objects{})
	waitObjects(t, d.b, verbsd.Objects{})
}

// TestUDDaemonFastPath: posting datagrams through a daemon context's
// rings (with the client's UD checks: MTU, opcode, AH), the daemon's pump,
// the engine and polling the completions cost no allocation.
func TestUDDaemonFastPath(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 4}, false)
	ctxA, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxA.Close()
	ctxB, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxB.Close()
	a, b := newUDSide(t, ctxA), newUDSide(t, ctxB)
	ah, err := a.pd.CreateAH(AHAttr{DGID: b.dev.GID})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var sends [n]SendWR
	var recvs [n]RecvWR
	for i := range n {
		sends[i] = SendWR{WRID: uint64(i), Opcode: WRSendWithImm, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(i*512, 512)},
			AH: ah.Handle(), RemoteQPN: b.qp.QPN(), RemoteQKey: testQKey}
		recvs[i] = RecvWR{WRID: uint64(i), NumSGE: 1, SGL: [8]SGE{b.mr.SGE(i*1024, 512+GRHLen)}}
	}
	wcs := make([]WC, 64)
	var failure error
	round := func() {
		if err := b.qp.PostRecv(recvs[:]...); err != nil {
			failure = err
			return
		}
		if err := a.qp.PostSend(sends[:]...); err != nil {
			failure = err
			return
		}
		got := 0
		for step := 0; got < 2*n; step++ {
			if step > 10000 {
				failure = errors.New("round did not complete")
				return
			}
			d.a.Pump()
			d.b.Pump()
			k, err := a.cq.Poll(wcs)
			if err != nil {
				failure = err
				return
			}
			m, err := b.cq.Poll(wcs[k:])
			if err != nil {
				failure = err
				return
			}
			for _, wc := range wcs[:k+m] {
				if wc.Status != WCSuccess {
					failure = errors.New("a datagram failed")
					return
				}
			}
			got += k + m
			if k+m == 0 {
				d.sim.Step()
			}
		}
	}
	round()
	if failure != nil {
		t.Fatal(failure)
	}
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 || failure != nil {
		t.Fatalf("%v allocations per round of %d datagrams (%v)", allocs, n, failure)
	}
}
