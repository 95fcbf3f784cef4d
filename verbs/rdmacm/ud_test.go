package rdmacm

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// udRouted makes a UDP port space id on h with its route to dst resolved.
func (h *host) udRouted(t *testing.T, dst netip.AddrPort) *ID {
	t.Helper()
	id, err := h.cm.CreateID(h.ch, PSUDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, dst, time.Second); err != nil {
		t.Fatal(err)
	}
	h.get(t, EventAddrResolved)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	h.get(t, EventRouteResolved)
	return id
}

func (h *host) udListen(t *testing.T, port uint16) *ID {
	t.Helper()
	l, err := h.cm.CreateID(h.ch, PSUDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), port)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(0); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestUDConnect is udaddy's exchange: rdma_create_qp on a UD id moves the
// QP to INIT with RDMA_UDP_QKEY, RTR and RTS (SQ PSN 0); rdma_connect
// sends a SIDR_REQ carrying the header and the private data; the
// listener gets CONNECT_REQUEST with the private data; rdma_accept's
// SIDR_REP names the passive id's QP and RDMA_UDP_QKEY, which the active
// side's ESTABLISHED shows (rdma_ud_param).
func TestUDConnect(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	l := b.udListen(t, 7174)
	id := a.udRouted(t, netip.AddrPortFrom(gidB, 7174))
	if !id.UD {
		t.Fatal("a UDP id is not UD")
	}
	qa := newUDQP(0x31)
	if err := id.AttachQP(qa); err != nil {
		t.Fatal(err)
	}
	if want := []qp.State{qp.Init, qp.RTR, qp.RTS}; !equalStates(qa.moves, want) {
		t.Fatalf("QP moves %v, want %v", qa.moves, want)
	}
	if at, m := qa.attrs[qp.Init], qa.masks[qp.Init]; at.QKey != UDPQKey || m&verbs.AttrQKey == 0 || m&verbs.AttrAccessFlags != 0 || at.Port != 1 {
		t.Fatalf("INIT attrs %+v mask %#x", at, m)
	}
	if at, m := qa.attrs[qp.RTS], qa.masks[qp.RTS]; at.SQPSN != 0 || m != verbs.AttrState|verbs.AttrSQPSN {
		t.Fatalf("RTS attrs %+v mask %#x", at, m)
	}
	if err := id.Connect(UserParam{PrivateData: bytes.Repeat([]byte{1}, MaxUDReqPrivate+1)}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("connect with %d bytes of private data: %v, want EINVAL", MaxUDReqPrivate+1, err)
	}
	if err := id.Connect(UserParam{PrivateData: []byte("ud hello")}); err != nil {
		t.Fatal(err)
	}
	req := b.get(t, EventConnectRequest)
	if !req.UD || req.Listen != l || !bytes.HasPrefix(req.Param.PrivateData, []byte("ud hello")) || req.ID.State() != StateConnect {
		t.Fatalf("CONNECT_REQUEST %+v", req)
	}
	if r := req.ID.Route(); r.Dst.Addr() != gidA || r.Src.Port() != 7174 || r.Path.DGID.Unmap() != gidA {
		t.Fatalf("passive route %+v", r)
	}
	qb := newUDQP(0x42)
	if err := req.ID.AttachQP(qb); err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(UserParam{PrivateData: bytes.Repeat([]byte{1}, MaxUDRepPrivate+1)}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("accept with %d bytes: %v, want EINVAL", MaxUDRepPrivate+1, err)
	}
	if err := req.ID.Accept(UserParam{PrivateData: []byte("rep")}); err != nil {
		t.Fatal(err)
	}
	est := a.get(t, EventEstablishedCM)
	if !est.UD || est.Param.QPN != 0x42 || est.Param.QKey != UDPQKey || !bytes.Equal(est.Param.PrivateData, []byte("rep")) {
		t.Fatalf("ESTABLISHED %+v", est)
	}
	if n.reps[0].QPN != 0x42 || n.reps[0].QKey != UDPQKey {
		t.Fatalf("SIDR_REP %+v", n.reps[0])
	}
	if len(qa.moves) != 3 || len(qb.moves) != 3 {
		t.Fatalf("QPs moved after the exchange: %v %v", qa.moves, qb.moves)
	}
	b.noEvent(t)
	if err := req.ID.Accept(UserParam{}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("second accept: %v", err)
	}
	for _, x := range []*ID{id, req.ID, l} {
		if err := x.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

func equalStates(a, b []qp.State) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestUDUnreachable: nobody listens (UNREACHABLE, status 1: the SIDR_REP's
// "service ID not supported"), rdma_reject (status 2, rejected), no answer
// (-ETIMEDOUT); a UD id's QP is left alone, as librdmacm leaves it.
func TestUDUnreachable(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	id := a.udRouted(t, netip.AddrPortFrom(gidB, 7174))
	q := newUDQP(0x31)
	if err := id.AttachQP(q); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(UserParam{}); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventUnreachableCM); ev.Status != 1 || !ev.UD {
		t.Fatalf("UNREACHABLE %+v", ev)
	}
	if len(q.moves) != 3 {
		t.Fatalf("QP moves %v", q.moves)
	}

	b.udListen(t, 7174)
	id = a.udRouted(t, netip.AddrPortFrom(gidB, 7174))
	if err := id.Connect(UserParam{}); err != nil {
		t.Fatal(err)
	}
	req := b.get(t, EventConnectRequest)
	if err := req.ID.Reject(RejConsumer, []byte("no")); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventUnreachableCM); ev.Status != 2 || !bytes.Equal(ev.Param.PrivateData, []byte("no")) {
		t.Fatalf("UNREACHABLE %+v", ev)
	}

	n.dropREQ = true
	id = a.udRouted(t, netip.AddrPortFrom(gidB, 7174))
	if err := id.Connect(UserParam{}); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventUnreachableCM); ev.Status != -int(syscall.ETIMEDOUT) {
		t.Fatalf("UNREACHABLE %+v", ev)
	}
	// The IPoIB port space's Q_Key needs an SA: not supported.
	ip, err := a.cm.CreateID(a.ch, PSIPoIB)
	if err != nil {
		t.Fatal(err)
	}
	if err := ip.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(gidB, 1), time.Second); err != nil {
		t.Fatal(err)
	}
	a.get(t, EventAddrResolved)
	if err := ip.AttachQP(newUDQP(0x50)); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("IPoIB QP: %v", err)
	}
}

func newUDQP(qpn uint32) *fakeQP {
	q := newFakeQP(qpn)
	q.ud = true
	return q
}
