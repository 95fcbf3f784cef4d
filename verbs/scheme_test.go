package verbs

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/recovery"
)

// TestQPScheme: on both backends, the QPs of one context run the scheme
// each asked for (checked on the engine behind the context), the
// device's default when they ask none; SetScheme works in RESET and INIT
// and is refused from RTR on; an unknown name fails with the available
// ones, at create and at SetScheme.
func TestQPScheme(t *testing.T) { onBothBackends(t, qpSchemes) }

// onBothBackends runs check on an embedded context and on one served by
// a daemon, each with the engine behind it.
func onBothBackends(t *testing.T, check func(*testing.T, *Context, *dataplane.Engine)) {
	m, err := NewEmbedded(sim.Config{Seed: 12})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("embedded", func(t *testing.T) { check(t, m.A, m.Sim.A) })
	t.Run("daemon", func(t *testing.T) {
		d := startDaemons(t, sim.Config{Seed: 12}, true)
		ctx, err := Dial(d.sockA)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		check(t, ctx, d.sim.A)
	})
}

func qpSchemes(t *testing.T, ctx *Context, e *dataplane.Engine) {
	dev, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if dev.Scheme != recovery.GBN || !slices.Equal(dev.Schemes, recovery.Names()) {
		t.Fatalf("device default %q, schemes %v; want gbn of %v", dev.Scheme, dev.Schemes, recovery.Names())
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	create := func(scheme string) (*QP, error) {
		return pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, Scheme: scheme})
	}
	// runs checks the QP's scheme as the API reports it and as the engine
	// runs it.
	runs := func(q *QP, want string) {
		t.Helper()
		eq := e.LookupQP(q.QPN())
		if eq == nil {
			t.Fatalf("QP %#x is not in the engine", q.QPN())
		}
		if q.Scheme() != want || e.QPScheme(eq) != want {
			t.Fatalf("QP %#x: verbs says %q, the engine runs %q; want %q", q.QPN(), q.Scheme(), e.QPScheme(eq), want)
		}
	}
	unknown := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, dataplane.ErrUnknownScheme) || !strings.Contains(err.Error(), `"melo-9"`) ||
			!strings.Contains(err.Error(), strings.Join(recovery.Names(), " ")) {
			t.Fatalf("%s with an unknown scheme: %v", what, err)
		}
	}
	_, err = create("melo-9")
	unknown("create", err)

	var qps []*QP
	for _, s := range []string{"", recovery.IRN, recovery.GBN, recovery.IGBN} {
		q, err := create(s)
		if err != nil {
			t.Fatalf("create with %q: %v", s, err)
		}
		want := s
		if want == "" {
			want = dev.Scheme
		}
		runs(q, want)
		qps = append(qps, q)
	}
	// Two QPs of one context, two schemes, both in the engine at once.
	runs(qps[1], recovery.IRN)
	runs(qps[3], recovery.IGBN)

	q := qps[0]
	unknown("SetScheme", q.SetScheme("melo-9"))
	runs(q, recovery.GBN)
	if err := q.SetScheme(recovery.IRN); err != nil {
		t.Fatalf("SetScheme in RESET: %v", err)
	}
	runs(q, recovery.IRN)
	if err := q.Modify(&QPAttr{State: QPSInit, AccessFlags: allAccess, Port: 1}, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := q.SetScheme(recovery.IGBN); err != nil {
		t.Fatalf("SetScheme in INIT: %v", err)
	}
	runs(q, recovery.IGBN)
	if err := q.SetScheme(""); err != nil {
		t.Fatalf("SetScheme to the default: %v", err)
	}
	runs(q, dev.Scheme)
	if err := q.Modify(&QPAttr{State: QPSRTR, AV: AHAttr{DGID: sim.AddrB, HopLimit: 64}, PathMTU: MTU1024, DestQPN: 0x10, MaxDestRdAtomic: 1},
		AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	if err := q.SetScheme(recovery.IRN); !errors.Is(err, dataplane.ErrSchemeState) || !strings.Contains(err.Error(), "RTR") {
		t.Fatalf("SetScheme in RTR: %v", err)
	}
	runs(q, dev.Scheme)
	for _, q := range qps {
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.SetScheme(recovery.IRN); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetScheme on a destroyed QP: %v", err)
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonPerQPScheme: between two daemons, a gbn pair and an irn pair
// (one end asked at create, the other switched before connecting) each
// move a 256 KiB WRITE over a lossy link, byte-exact; on the wire the irn
// pair's requests carry irn's placement opcodes and the gbn pair's plain
// RoCEv2 ones, so each QP really runs its own scheme.
func TestDaemonPerQPScheme(t *testing.T) {
	var mu sync.Mutex
	extension := map[uint32]int{} // destination QPN -> requests with extension opcodes
	plain := map[uint32]int{}
	drops := 0
	link := fabric.LinkConfig{Delay: 5 * time.Microsecond, RateBps: 10e9, QueueFrames: 256}
	atob := link
	atob.Drop = func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			return false
		}
		b := f.Pkt.BTH()
		mu.Lock()
		defer mu.Unlock()
		if b.Opcode().IsExtension() {
			extension[b.DestQPN()]++
		} else {
			plain[b.DestQPN()]++
		}
		// Lose the 41st packet of each QP's first pass once.
		if b.PSN() == 40 && drops < 2 && extension[b.DestQPN()]+plain[b.DestQPN()] == 41 {
			drops++
			return true
		}
		return false
	}
	// This goroutine is the daemons' poll loop (Pump, then the Sim's
	// Step): simulated time, so that irn's short retransmission timeouts
	// fire exactly when the protocol says, never because a loaded machine
	// was slow.
	d := startDaemons(t, sim.Config{Seed: 13, AtoB: atob, BtoA: link}, false)
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

	const size = 256 << 10
	type pair struct {
		scheme string
		a, b   *side
	}
	var pairs []pair
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		a, err := newSide(ctxA, size, 16, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newSide(ctxB, size, 16, 0)
		if err != nil {
			t.Fatal(err)
		}
		if scheme != recovery.GBN {
			// A asks at create (the QP newSide made is replaced), B
			// switches its QP before connecting.
			if err := a.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			if a.qp, err = a.pd.CreateQP(QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, MaxSendWR: 16, MaxRecvWR: 16, Scheme: scheme}); err != nil {
				t.Fatal(err)
			}
			if err := b.qp.SetScheme(scheme); err != nil {
				t.Fatal(err)
			}
		}
		epA, err := a.endpoint()
		if err != nil {
			t.Fatal(err)
		}
		epB, err := b.endpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := a.connect(epB); err != nil {
			t.Fatal(err)
		}
		if err := b.connect(epA); err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			e *dataplane.Engine
			q *QP
		}{{d.sim.A, a.qp}, {d.sim.B, b.qp}} {
			if eq := s.e.LookupQP(s.q.QPN()); eq == nil || s.q.Scheme() != scheme || s.e.QPScheme(eq) != scheme {
				t.Fatalf("QP %#x runs %q (engine QP %v), want %s", s.q.QPN(), s.q.Scheme(), eq, scheme)
			}
		}
		pairs = append(pairs, pair{scheme, a, b})
	}
	for i, p := range pairs {
		copy(p.a.buf, pattern(uint64(i+1), size))
		wr := SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{p.a.mr.SGE(0, size)},
			RemoteAddr: p.b.mr.Addr, RKey: p.b.mr.RKey}
		if err := p.a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	done := 0
	wcs := make([]WC, 4)
	for step := 0; done < len(pairs); step++ {
		if step > 1_000_000 {
			t.Fatalf("%d of %d WRITEs completed", done, len(pairs))
		}
		d.a.Pump()
		d.b.Pump()
		got := 0
		for _, p := range pairs {
			n, err := p.a.cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					t.Fatalf("%s pair: %+v", p.scheme, wc)
				}
				if !bytes.Equal(p.b.buf, p.a.buf) {
					t.Fatalf("%s pair: the WRITE's data differs", p.scheme)
				}
			}
			got += n
		}
		done += got
		if got == 0 {
			d.sim.Step()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if drops != 2 {
		t.Fatalf("%d packets lost, want one per pair", drops)
	}
	gbnQPN, irnQPN := pairs[0].b.qp.QPN(), pairs[1].b.qp.QPN()
	if extension[gbnQPN] != 0 || plain[gbnQPN] < size/1024 {
		t.Fatalf("gbn pair sent %d extension and %d plain requests, want only plain ones", extension[gbnQPN], plain[gbnQPN])
	}
	if plain[irnQPN] != 0 || extension[irnQPN] < size/1024 {
		t.Fatalf("irn pair sent %d extension and %d plain requests, want only extension ones", extension[irnQPN], plain[irnQPN])
	}
}

// TestQPCC: on both backends, a QP runs the congestion control it asked
// for (checked on the engine behind the context), the device's (none)
// when it asks none, and an unknown name is refused at create naming the
// ones there are.
func TestQPCC(t *testing.T) { onBothBackends(t, qpCCs) }

func qpCCs(t *testing.T, ctx *Context, e *dataplane.Engine) {
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ask, want string }{{"", cc.None}, {cc.DCQCN, cc.DCQCN}, {cc.Timely, cc.Timely}} {
		q, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, CC: c.ask})
		if err != nil {
			t.Fatalf("CC %q: %v", c.ask, err)
		}
		if got := e.QPCC(e.LookupQP(q.QPN())); got != c.want {
			t.Errorf("asked %q: the engine runs %q, want %q", c.ask, got, c.want)
		}
	}
	_, err = pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, CC: "nope"})
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), cc.DCQCN) {
		t.Fatalf("unknown congestion control: %v", err)
	}
}
