package cmservice

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// The Service over the NICs' CMs on the embedded fabric, run on the wall
// clock (the Service's goroutine blocks on the CM channel as a
// librdmacm's would): rdma_cm's exchange, each side moving its QP from
// the REQ's or REP's parameters and the event's path.

const service = 0x0000000001060000 | 20079

type host struct {
	ctx *verbs.Context
	dev verbs.DeviceAttr
	cm  *CM
	buf []byte
	mr  *verbs.MR
	cq  *verbs.CQ
	qp  *verbs.QP
	evs chan Event
}

func newHost(t *testing.T, ctx *verbs.Context) *host {
	t.Helper()
	h := &host{ctx: ctx, evs: make(chan Event, 16)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var err error
	h.dev, err = ctx.QueryDevice()
	must(err)
	h.cm, err = New(ctx, Options{ResponseTimeout: 14, MaxCMRetries: 5})
	must(err)
	t.Cleanup(func() { h.cm.Close() })
	pd, err := ctx.AllocPD()
	must(err)
	h.buf, err = ctx.AllocBuf(1 << 16)
	must(err)
	h.mr, err = pd.RegMR(h.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	must(err)
	h.cq, err = ctx.CreateCQ(64)
	must(err)
	h.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq, MaxSendWR: 16, MaxRecvWR: 16})
	must(err)
	return h
}

func (h *host) handler(ev Event) { h.evs <- ev }

func (h *host) next(t *testing.T, want EventKind) Event {
	t.Helper()
	select {
	case ev := <-h.evs:
		if ev.Kind != want {
			t.Fatalf("event %d (%+v), want %d", ev.Kind, ev, want)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event %d", want)
	}
	panic("unreachable")
}

// toRTS moves h's QP to RTS towards the peer, as rdma_cm's
// rdma_init_qp_attr fills the attributes from the CM's event.
func (h *host) toRTS(t *testing.T, path Path, remote ConnParam, sq uint32) {
	t.Helper()
	all := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	steps := []struct {
		a    verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.QPSInit, AccessFlags: all, Port: 1}, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.QPSRTR, AV: verbs.AHAttr{DGID: path.DGID, DMAC: path.DMAC, HopLimit: 64}, PathMTU: verbs.MTU1024,
			DestQPN: remote.QPN, RQPSN: remote.StartingPSN, MaxDestRdAtomic: 4, MinRNRTimer: 12},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.QPSRTS, SQPSN: verbs.PSN(sq), Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			verbs.AttrState | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := h.qp.Modify(&st.a, st.mask); err != nil {
			t.Fatal(err)
		}
	}
}

func waitWC(t *testing.T, cq *verbs.CQ) verbs.WC {
	t.Helper()
	var wc [1]verbs.WC
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := cq.Poll(wc[:]); err != nil {
			t.Fatal(err)
		} else if n == 1 {
			return wc[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatal("no completion")
	return verbs.WC{}
}

func startFabric(t *testing.T) *verbs.Embedded {
	t.Helper()
	m, err := verbs.NewEmbedded(sim.Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return m
}

// TestServiceConnect: listen, connect with private data, accept, RTU,
// a SEND, disconnect from the active side (the passive side's
// Disconnect after the peer's DREQ sends nothing), time wait on both.
func TestServiceConnect(t *testing.T) {
	m := startFabric(t)
	a, b := newHost(t, m.A), newHost(t, m.B)
	if _, err := b.cm.Listen(service, a.dev.GID, b.handler); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("listen on another host's GID: %v", err)
	}
	l, err := b.cm.Listen(service, b.dev.GID, b.handler)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.cm.Listen(service, netip.Addr{}, b.handler); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second listen: %v", err)
	}
	path := Path{SGID: a.dev.GID, DGID: b.dev.GID, DMAC: b.dev.MAC, HopLimit: 64, MTU: verbs.MTU1024}
	const psnA, psnB = 0x10, 0x20
	connA, err := a.cm.Connect(service, path, ConnParam{QPN: a.qp.QPN(), StartingPSN: psnA, ResponderResources: 4, InitiatorDepth: 4,
		RetryCount: 7, RNRRetryCount: 7, LocalAckTimeout: 14, PrivateData: []byte("req data")}, a.handler)
	if err != nil {
		t.Fatal(err)
	}
	req := b.next(t, EventRequest)
	if req.Param.QPN != a.qp.QPN() || req.Param.StartingPSN != psnA || !bytes.HasPrefix(req.Param.PrivateData, []byte("req data")) ||
		req.Path.DGID != a.dev.GID || req.Path.SGID != b.dev.GID || req.Path.DMAC != a.dev.MAC || req.Param.LocalAckTimeout != 14 {
		t.Fatalf("request %+v", req)
	}
	b.toRTS(t, req.Path, req.Param, psnB)
	if err := req.Conn.Accept(ConnParam{QPN: b.qp.QPN(), StartingPSN: psnB, ResponderResources: 4, InitiatorDepth: 4,
		RNRRetryCount: 7, PrivateData: []byte("rep data")}, b.handler); err != nil {
		t.Fatal(err)
	}
	rep := a.next(t, EventReply)
	if rep.Conn != connA || rep.Param.QPN != b.qp.QPN() || rep.Param.StartingPSN != psnB || !bytes.HasPrefix(rep.Param.PrivateData, []byte("rep data")) {
		t.Fatalf("reply %+v", rep)
	}
	a.toRTS(t, path, rep.Param, psnA)
	if err := connA.RTU(); err != nil {
		t.Fatal(err)
	}
	if ev := b.next(t, EventEstablished); ev.Conn != req.Conn {
		t.Fatal("established on another connection")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	copy(a.buf, "a message through the connected QPs")
	if err := b.qp.PostRecv(verbs.RecvWR{WRID: 1, NumSGE: 1, SGL: [8]verbs.SGE{b.mr.SGE(1024, 1024)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(verbs.SendWR{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, NumSGE: 1, SGL: [8]verbs.SGE{a.mr.SGE(0, 35)}}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, b.cq); wc.Status != verbs.WCSuccess || !bytes.Equal(b.buf[1024:1024+35], a.buf[:35]) {
		t.Fatalf("receive %+v %q", wc, b.buf[1024:1024+35])
	}
	waitWC(t, a.cq)

	if err := connA.Disconnect([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if ev := b.next(t, EventDisconnected); !bytes.HasPrefix(ev.PrivateData, []byte("bye")) {
		t.Errorf("disconnected %+v", ev)
	}
	if err := req.Conn.Disconnect(nil); err != nil { // the DREP went already
		t.Errorf("passive disconnect after the DREQ: %v", err)
	}
	if ev := a.next(t, EventDisconnected); ev.Status != 0 {
		t.Errorf("active disconnected %+v", ev)
	}
	a.next(t, EventTimewaitExit)
	b.next(t, EventTimewaitExit)
	if err := connA.RTU(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RTU on a finished connection: %v", err)
	}
}

// TestServiceRejectAndClose: a REQ nobody listens for comes back
// rejected (reason 8); a listener's rejection carries its reason and
// private data; closing an established connection disconnects the peer.
func TestServiceRejectAndClose(t *testing.T) {
	m := startFabric(t)
	a, b := newHost(t, m.A), newHost(t, m.B)
	path := Path{SGID: a.dev.GID, DGID: b.dev.GID, DMAC: b.dev.MAC, HopLimit: 64}
	p := ConnParam{QPN: a.qp.QPN(), StartingPSN: 1, RetryCount: 7, RNRRetryCount: 7, LocalAckTimeout: 14}
	if _, err := a.cm.Connect(service, path, p, a.handler); err != nil {
		t.Fatal(err)
	}
	if ev := a.next(t, EventRejected); ev.Reason != ibcm.RejInvalidServiceID {
		t.Errorf("rejected with %d, want 8", ev.Reason)
	}
	if _, err := b.cm.Listen(service, netip.Addr{}, b.handler); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cm.Connect(service, path, p, a.handler); err != nil {
		t.Fatal(err)
	}
	req := b.next(t, EventRequest)
	if err := req.Conn.Reject(ibcm.RejConsumerDefined, []byte("go away")); err != nil {
		t.Fatal(err)
	}
	if ev := a.next(t, EventRejected); ev.Reason != ibcm.RejConsumerDefined || !bytes.HasPrefix(ev.PrivateData, []byte("go away")) {
		t.Errorf("rejected %+v", ev)
	}

	connA, err := a.cm.Connect(service, path, p, a.handler)
	if err != nil {
		t.Fatal(err)
	}
	req = b.next(t, EventRequest)
	b.toRTS(t, req.Path, req.Param, 2)
	if err := req.Conn.Accept(ConnParam{QPN: b.qp.QPN(), StartingPSN: 2, RNRRetryCount: 7}, b.handler); err != nil {
		t.Fatal(err)
	}
	rep := a.next(t, EventReply)
	a.toRTS(t, path, rep.Param, 1)
	if err := connA.RTU(); err != nil {
		t.Fatal(err)
	}
	b.next(t, EventEstablished)
	connA.Close()
	b.next(t, EventDisconnected)
	if attr, err := b.qp.QueryAttr(); err != nil || attr.State != verbs.QPSErr {
		t.Errorf("B's QP %v %v, want ERROR", attr.State, err)
	}
	select {
	case ev := <-a.evs:
		t.Errorf("closed connection delivered %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}
