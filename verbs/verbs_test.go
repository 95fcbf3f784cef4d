package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
)

type host struct {
	ctx *Context
	pd  *PD
	mr  *MR
	cq  *CQ
	qp  *QP
}

func newHost(t *testing.T, c *Context) *host {
	t.Helper()
	h := &host{ctx: c}
	var err error
	if h.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if h.mr, err = h.pd.RegMR(make([]byte, 1<<20), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic); err != nil {
		t.Fatal(err)
	}
	if h.cq, err = c.CreateCQ(64); err != nil {
		t.Fatal(err)
	}
	if h.qp, err = h.pd.CreateQP(QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq, MaxSendWR: 16, MaxRecvWR: 16}); err != nil {
		t.Fatal(err)
	}
	return h
}

func poll(t *testing.T, m *Embedded, cq *CQ) WC {
	t.Helper()
	var wc [1]WC
	if !m.RunUntil(func() bool { n, _ := cq.Poll(wc[:]); return n == 1 }, time.Second) {
		t.Fatal("no completion")
	}
	return wc[0]
}

// TestEmbeddedVerbs drives the API the way an ibverbs program does:
// resources, connect, SEND/RECV, WRITE, READ, atomics, and errors.
func TestEmbeddedVerbs(t *testing.T) {
	lossy := fabric.LinkConfig{Loss: 0.02, Delay: time.Microsecond, RateBps: 10e9, QueueFrames: 32}
	m, err := NewEmbedded(sim.Config{Seed: 3, AtoB: lossy, BtoA: lossy})
	if err != nil {
		t.Fatal(err)
	}
	a, b := newHost(t, m.A), newHost(t, m.B)

	// Posting before the QP is connected is refused with a clear error.
	err = a.qp.PostSend(SendWR{Opcode: WRSend})
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Fatalf("post send in RESET: %v", err)
	}
	if err := m.Connect(a.qp, b.qp, ConnParam{MTU: 1 + 2, Timeout: 8}); err != nil { // MTU 1024
		t.Fatal(err)
	}
	if st := a.qp.Query().State; st != QPSRTS {
		t.Fatalf("state after connect %v", st)
	}

	msg := bytes.Repeat([]byte("softnic!"), 1000)
	copy(a.mr.Buf(), msg)
	if err := b.qp.PostRecv(RecvWR{WRID: 9, NumSGE: 1, SGL: [8]SGE{b.mr.SGE(0, 8000)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(SendWR{WRID: 1, Opcode: WRSendWithImm, Flags: SendSignaled, ImmData: 77, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, len(msg))}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, m, a.cq); wc.WRID != 1 || wc.Status != WCSuccess {
		t.Fatalf("send completion %+v", wc)
	}
	if wc := poll(t, m, b.cq); wc.WRID != 9 || wc.ByteLen != uint32(len(msg)) || wc.ImmData != 77 {
		t.Fatalf("recv completion %+v", wc)
	}
	if !bytes.Equal(b.mr.Buf()[:len(msg)], msg) {
		t.Fatal("SEND data differs")
	}

	// WRITE then READ it back.
	w := SendWR{WRID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, len(msg))}, RemoteAddr: b.mr.Addr + 100000, RKey: b.mr.RKey}
	r := SendWR{WRID: 3, Opcode: WRRDMARead, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(200000, len(msg))}, RemoteAddr: b.mr.Addr + 100000, RKey: b.mr.RKey}
	if err := a.qp.PostSend(w, r); err != nil {
		t.Fatal(err)
	}
	poll(t, m, a.cq)
	if wc := poll(t, m, a.cq); wc.WRID != 3 || wc.Status != WCSuccess {
		t.Fatalf("read completion %+v", wc)
	}
	if !bytes.Equal(a.mr.Buf()[200000:200000+len(msg)], msg) {
		t.Fatal("READ data differs")
	}

	// A deregistered region's rkey is refused by the peer (on a clean
	// link, so that the NAK itself is not lost).
	m.Sim.Fabric.SetLink(fabric.AtoB, fabric.LinkConfig{})
	m.Sim.Fabric.SetLink(fabric.BtoA, fabric.LinkConfig{})
	if err := b.mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(w); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, m, a.cq); wc.Status != WCRemAccessErr {
		t.Fatalf("write to a deregistered region: %+v", wc)
	}
	if err := a.pd.Dealloc(); err == nil {
		t.Fatal("PD with resources deallocated")
	}
}
