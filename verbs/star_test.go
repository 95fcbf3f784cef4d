package verbs

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/recovery"
)

// TestStarQPs: on both backends, a StaR client QP (A) and a stateless
// server QP (B, a NIC with StarServer) made through the verbs API: the
// roles reach the engine, the device says which NIC serves StaR, a
// server QP on a NIC without it and a go-back-N client are refused with
// the engine's errors, the server's memory table is its PD's remote
// region and goes only to a client, and with it installed the client's
// WRITE and READ move the data; a WRITE outside it never leaves
// (LOC_PROT_ERR, star_security_drops).
func TestStarQPs(t *testing.T) {
	cfg := sim.Config{Seed: 21, StarServerB: true}
	m, err := NewEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("embedded", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
		defer wg.Wait()
		defer cancel()
		starQPs(t, m.A, m.B, m.Sim.A, m.Sim.B)
	})
	t.Run("daemon", func(t *testing.T) {
		d := startDaemons(t, cfg, true)
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
		starQPs(t, ctxA, ctxB, d.sim.A, d.sim.B)
	})
}

func starQPs(t *testing.T, ctxA, ctxB *Context, eA, eB *dataplane.Engine) {
	const size = 64 << 10
	for _, c := range []struct {
		ctx  *Context
		want bool
	}{{ctxA, false}, {ctxB, true}} {
		if dev, err := c.ctx.QueryDevice(); err != nil || dev.StarServer != c.want {
			t.Fatalf("%s: StarServer %v (%v), want %v", c.ctx.Name(), dev.StarServer, err, c.want)
		}
	}
	a, err := newSide(ctxA, 2*size, 16, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSide(ctxB, size, 16, 200)
	if err != nil {
		t.Fatal(err)
	}
	attr := func(s *side, r StarRole, scheme string) QPInitAttr {
		return QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 16, MaxRecvWR: 16, Star: r, Scheme: scheme}
	}
	if _, err := a.pd.CreateQP(attr(a, StarServer, "")); !errors.Is(err, dataplane.ErrStarServerOff) {
		t.Errorf("server QP on a NIC without StarServer: %v", err)
	}
	if _, err := a.pd.CreateQP(attr(a, StarClient, recovery.GBN)); !errors.Is(err, dataplane.ErrStarScheme) {
		t.Errorf("gbn client QP: %v", err)
	}
	if err := a.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if a.qp, err = a.pd.CreateQP(attr(a, StarClient, recovery.IRN)); err != nil {
		t.Fatal(err)
	}
	if b.qp, err = b.pd.CreateQP(attr(b, StarServer, "")); err != nil {
		t.Fatal(err)
	}
	if a.qp.Star() != StarClient || b.qp.Star() != StarServer ||
		eA.LookupQP(a.qp.QPN()).Star() != StarClient || eB.LookupQP(b.qp.QPN()).Star() != StarServer {
		t.Fatalf("roles %v and %v do not reach the engines", a.qp.Star(), b.qp.Star())
	}
	if err := a.qp.SetScheme(recovery.GBN); !errors.Is(err, dataplane.ErrStarScheme) {
		t.Errorf("client QP set to gbn: %v", err)
	}
	table, err := b.qp.StarTable()
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 1 || table[0].RKey != b.mr.RKey || table[0].VA != b.mr.Addr || table[0].Length != size ||
		table[0].Access != AccessRemoteWrite|AccessRemoteRead {
		t.Fatalf("server's table %+v, want its one region (rkey %#x, %d bytes at %#x)", table, b.mr.RKey, size, b.mr.Addr)
	}
	if t0, err := a.qp.StarTable(); err != nil || len(t0) != 0 {
		t.Errorf("a client QP's table before it connected: %+v, %v", t0, err)
	}
	epA, _ := a.endpoint()
	epB, _ := b.endpoint()
	if err := b.connect(epA); err != nil {
		t.Fatal(err)
	}
	if err := a.connect(epB); err != nil {
		t.Fatal(err)
	}
	copy(a.buf[:size], pattern(7, size))
	post := func(id uint64, op WROpcode, local, remote uint64, n int) WC {
		t.Helper()
		wr := SendWR{WRID: id, Opcode: op, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(int(local), n)},
			RemoteAddr: b.mr.Addr + remote, RKey: b.mr.RKey}
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		wc, err := waitWC(a.cq, 10*time.Second)
		if err != nil {
			t.Fatalf("WR %d: %v", id, err)
		}
		return wc
	}
	if wc := post(1, WRRDMAWrite, 0, 0, size); wc.Status != WCSuccess || wc.WRID != 1 {
		t.Fatalf("WRITE: %+v", wc)
	}
	if !bytes.Equal(b.buf, a.buf[:size]) {
		t.Fatal("the WRITE's data differs on the server")
	}
	if wc := post(2, WRRDMARead, size, 0, size); wc.Status != WCSuccess || wc.WRID != 2 {
		t.Fatalf("READ: %+v", wc)
	}
	if !bytes.Equal(a.buf[size:], b.buf) {
		t.Fatal("the READ's data differs")
	}
	before := eA.Counters().StarSecurityDrops
	if wc := post(3, WRRDMAWrite, 0, size-8, 16); wc.Status != WCLocProtErr {
		t.Fatalf("WRITE past the table: %+v, want LOC_PROT_ERR", wc)
	}
	if n := eA.Counters().StarSecurityDrops - before; n != 1 {
		t.Errorf("star_security_drops grew by %d, want 1", n)
	}
	if c := eB.Counters(); c.StarRDPRcvd == 0 || c.StarGDRcvd == 0 {
		t.Errorf("server counted %d RDPs and %d GDs", c.StarRDPRcvd, c.StarGDRcvd)
	}
}
