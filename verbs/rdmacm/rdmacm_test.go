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
	"golang.org/x/sys/unix"
)

var (
	gidA = netip.MustParseAddr("198.18.0.1")
	gidB = netip.MustParseAddr("198.18.0.2")
)

// host is one side: its CM on the shared fake network, and a channel.
type host struct {
	cm  *CM
	ch  *Channel
	res *fakeResolver
}

func newHost(t *testing.T, n *fakeNet, gid netip.Addr, psn qp.PSN) *host {
	t.Helper()
	res := &fakeResolver{dev: Device{GID: gid, MAC: [6]byte{2, 0, 0, 0, 0, gid.As4()[3]}, MaxRdAtom: 16, MTU: qp.MTU1024},
		unreach: map[netip.Addr]syscall.Errno{}}
	var svc Service
	if n != nil {
		svc = &fakeSvc{n: n, gid: gid}
	}
	cm := New(svc, res)
	cm.PSN = func() qp.PSN { return psn }
	ch, err := NewChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ch.fd) })
	return &host{cm: cm, ch: ch, res: res}
}

// get takes the next event, which must be want, and acks it.
func (h *host) get(t *testing.T, want EventType) *CMEvent {
	t.Helper()
	ev, err := h.ch.Get()
	if err != nil {
		t.Fatalf("get %v: %v", want, err)
	}
	if ev.Type != want {
		t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, want)
	}
	ev.Ack()
	return ev
}

// noEvent: nothing is queued for the program (events the channel drops
// as librdmacm does are taken and dropped).
func (h *host) noEvent(t *testing.T) {
	t.Helper()
	unix.SetNonblock(h.ch.FD(), true)
	defer unix.SetNonblock(h.ch.FD(), false)
	if ev, err := h.ch.Get(); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("unexpected event %+v (%v)", ev, err)
	}
}

func readable(t *testing.T, fd int) bool {
	t.Helper()
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1 && p[0].Revents&unix.POLLIN != 0
}

// routed makes an id on h with its route to dst resolved.
func (h *host) routed(t *testing.T, dst netip.AddrPort) *ID {
	t.Helper()
	id, err := h.cm.CreateID(h.ch, PSTCP)
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

func (h *host) listen(t *testing.T, port uint16, backlog int) *ID {
	t.Helper()
	l, err := h.cm.CreateID(h.ch, PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), port)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(backlog); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestResolve: rdma_resolve_addr binds the id to the device of the
// destination's family with an ephemeral port, ADDR_RESOLVED shows the
// path's GIDs, next hop and hop limit; rdma_resolve_route gives
// ROUTE_RESOLVED with the device's MTU; the channel's fd is readable
// exactly while an event is queued.
func TestResolve(t *testing.T) {
	a := newHost(t, nil, gidA, 1)
	id, err := a.cm.CreateID(a.ch, PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	a.noEvent(t)
	if err := id.ResolveRoute(time.Second); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("resolve route before the address: %v, want EINVAL", err)
	}
	dst := netip.AddrPortFrom(gidB, 7471)
	if err := id.ResolveAddr(netip.AddrPort{}, dst, time.Second); err != nil {
		t.Fatal(err)
	}
	ev := a.get(t, EventAddrResolved)
	if ev.ID != id || ev.Status != 0 {
		t.Fatalf("event %+v", ev)
	}
	r := id.Route()
	if r.Device == nil || r.Src.Addr() != gidA || r.Src.Port() < 32768 || r.Dst != dst {
		t.Fatalf("route after ADDR_RESOLVED: %+v", r)
	}
	if r.Path.SGID != netip.AddrFrom16(gidA.As16()) || r.Path.DGID != netip.AddrFrom16(gidB.As16()) ||
		r.Path.HopLimit != 64 || r.Path.DMAC != [6]byte{2, 0, 0, 0, 0, 2} || r.Routed {
		t.Fatalf("path after ADDR_RESOLVED: %+v", r.Path)
	}
	id.SetTOS(0x20)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	if !readable(t, a.ch.FD()) {
		t.Fatal("channel fd not readable with ROUTE_RESOLVED queued")
	}
	a.get(t, EventRouteResolved)
	a.noEvent(t)
	r = id.Route()
	if !r.Routed || r.Path.MTU != qp.MTU1024 || r.Path.TrafficClass != 0x20 || r.Path.PKey != 0xffff || id.State() != StateRouteResolved {
		t.Fatalf("route after ROUTE_RESOLVED: %+v, state %v", r, id.State())
	}
	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := a.ch.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// TestResolveErrors: a destination out of reach gives ADDR_ERROR with
// the resolver's errno (negative, as the kernel reports it) and leaves
// the id bound, so it may try again; a source address no device has
// fails at once with ENODEV; bad states fail with EINVAL.
func TestResolveErrors(t *testing.T) {
	a := newHost(t, nil, gidA, 1)
	far := netip.MustParseAddr("198.18.99.1")
	a.res.unreach[far] = syscall.ETIMEDOUT
	id, _ := a.cm.CreateID(a.ch, PSTCP)
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(far, 1), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ev := a.get(t, EventAddrError)
	if ev.Status != -int(syscall.ETIMEDOUT) || id.State() != StateAddrBound {
		t.Fatalf("ADDR_ERROR status %d state %v, want -ETIMEDOUT, ADDR_BOUND", ev.Status, id.State())
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(gidB, 1), time.Second); err != nil {
		t.Fatal(err)
	}
	a.get(t, EventAddrResolved)

	// An IPv6 destination from an id bound to the device, whose only
	// address is IPv4; and from an unbound one.
	if err := id.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::2]:1"), time.Second); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("IPv6 destination from an IPv4 source: %v, want EINVAL", err)
	}
	id6, _ := a.cm.CreateID(a.ch, PSTCP)
	if err := id6.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::2]:1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventAddrError); ev.ID != id6 || ev.Status != -int(syscall.ENODEV) {
		t.Fatalf("IPv6 destination without an IPv6 device: %+v, want ADDR_ERROR -ENODEV", ev)
	}
	id6.Destroy()

	id2, _ := a.cm.CreateID(a.ch, PSTCP)
	if err := id2.ResolveAddr(netip.AddrPortFrom(netip.MustParseAddr("198.18.7.7"), 0), netip.AddrPortFrom(gidB, 1), time.Second); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("resolve from a foreign source: %v, want ENODEV", err)
	}
	if err := id2.Bind(netip.AddrPortFrom(gidA, 0)); err != nil {
		t.Fatal(err)
	}
	if err := id2.Bind(netip.AddrPortFrom(gidA, 0)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("second bind: %v, want EINVAL", err)
	}
	id3, _ := a.cm.CreateID(a.ch, PSTCP)
	if err := id3.Bind(netip.AddrPortFrom(gidA, id2.Route().Src.Port())); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("bind to a used port: %v, want EADDRINUSE", err)
	}
	if err := id3.Connect(Defaults); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("connect without a route: %v, want EINVAL", err)
	}
	if _, _, err := id3.InitQPAttr(qp.Init); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("init qp attr without a device: %v, want EINVAL", err)
	}
	if err := a.ch.Destroy(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("destroy a channel with ids: %v, want EBUSY", err)
	}
	for _, i := range []*ID{id, id2, id3} {
		i.Destroy()
	}
}

// TestNonBlockingChannel: with O_NONBLOCK on the channel's fd (the
// program's fcntl), rdma_get_cm_event fails with EAGAIN when nothing is
// queued, and returns the event once one is.
func TestNonBlockingChannel(t *testing.T) {
	a := newHost(t, nil, gidA, 1)
	if err := unix.SetNonblock(a.ch.FD(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ch.Get(); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("get on an empty non-blocking channel: %v, want EAGAIN", err)
	}
	id, _ := a.cm.CreateID(a.ch, PSTCP)
	id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(gidB, 1), time.Second)
	// The address resolution runs on its own goroutine: wait for the fd.
	p := []unix.PollFd{{Fd: int32(a.ch.FD()), Events: unix.POLLIN}}
	if _, err := unix.Poll(p, -1); err != nil {
		t.Fatal(err)
	}
	ev, err := a.ch.Get()
	if err != nil || ev.Type != EventAddrResolved {
		t.Fatalf("get: %v %v", ev, err)
	}
	ev.Ack()
	if _, err := a.ch.Get(); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("get after the only event: %v, want EAGAIN", err)
	}
}

// TestConnect: the whole librdmacm sequence between two hosts through
// the fake CM: REQ with the RDMA IP CM header and the program's private
// data, CONNECT_REQUEST on a new id, rdma_accept moving the passive QP
// INIT->RTR->RTS with the REQ's QPN and PSN, the REP making the active
// side move its QP and send the RTU (ESTABLISHED on both), then
// rdma_disconnect flushing each QP (ERR) with DISCONNECTED and
// TIMEWAIT_EXIT once on each side.
func TestConnect(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 0x111111), newHost(t, n, gidB, 0x222222)
	l := b.listen(t, 7471, 4)
	id := a.routed(t, netip.AddrPortFrom(gidB, 7471))
	qa, qb := newFakeQP(0x51), newFakeQP(0x62)
	if err := id.AttachQP(qa); err != nil {
		t.Fatal(err)
	}
	if qa.State() != qp.Init || qa.attrs[qp.Init].Port != 1 || qa.attrs[qp.Init].PKeyIndex != 0 || qa.attrs[qp.Init].AccessFlags != 0 {
		t.Fatalf("QP after rdma_create_qp: %v %+v", qa.State(), qa.attrs[qp.Init])
	}
	if err := id.Connect(UserParam{PrivateData: []byte("hello"), ResponderResources: 4, InitiatorDepth: 2, RetryCount: 5, RNRRetryCount: 6}); err != nil {
		t.Fatal(err)
	}
	req := n.reqs[0]
	if req.QPN != 0x51 || req.StartingPSN != 0x111111 || req.ResponderResources != 4 || req.InitiatorDepth != 2 ||
		req.RetryCount != 5 || req.RNRRetryCount != 6 || req.LocalAckTimeout != DefaultAckTimeout ||
		len(req.PrivateData) != hdrLen+5 || req.PrivateData[1] != 0x40 {
		t.Fatalf("REQ %+v", req)
	}

	ev := b.get(t, EventConnectRequest)
	child := ev.ID
	if ev.Listen != l || child == l || !bytes.Equal(ev.Param.PrivateData, []byte("hello")) ||
		ev.Param.ResponderResources != 2 || ev.Param.InitiatorDepth != 4 || ev.Param.QPN != 0x51 {
		t.Fatalf("CONNECT_REQUEST %+v", ev)
	}
	if r := child.Route(); r.Src != netip.AddrPortFrom(gidB, 7471) || r.Dst != id.Route().Src || r.Device == nil || !r.Routed {
		t.Fatalf("new id's route %+v, want from %v to %v", r, netip.AddrPortFrom(gidB, 7471), id.Route().Src)
	}
	if err := child.AttachQP(qb); err != nil {
		t.Fatal(err)
	}
	if err := child.Accept(UserParam{PrivateData: []byte("world"), ResponderResources: MaxResources, InitiatorDepth: MaxResources, RNRRetryCount: 3}); err != nil {
		t.Fatal(err)
	}
	// librdmacm's INIT -> INIT before RTR gives the QP remote access:
	// without it the peer's RDMA READs and WRITEs are refused.
	if got := qb.moves; len(got) != 4 || got[0] != qp.Init || got[1] != qp.Init || got[2] != qp.RTR || got[3] != qp.RTS {
		t.Fatalf("passive QP moves %v, want INIT INIT RTR RTS", got)
	}
	if acc := qb.attrs[qp.Init].AccessFlags; acc != verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic {
		t.Fatalf("passive QP's access after the connection's INIT -> INIT: %v", acc)
	}
	// Each message's starting PSN is the PSN its sender receives from,
	// as Linux's ib_cm takes it (cm_req_handler: the passive sq_psn is
	// the REQ's; ib_send_cm_rep: its rq_psn the REP's): a QP moved the
	// other way sends PSNs a Linux peer takes for duplicates.
	rtr, rts := qb.attrs[qp.RTR], qb.attrs[qp.RTS]
	if rtr.DestQPN != 0x51 || rtr.RQPSN != 0x222222 || rtr.AV.DGID != netip.AddrFrom16(gidA.As16()) || rtr.PathMTU != qp.MTU1024 ||
		rtr.MaxDestRdAtomic != 2 || rts.SQPSN != 0x111111 || rts.MaxRdAtomic != 4 || rts.RetryCnt != 5 || rts.RNRRetry != 6 ||
		rts.Timeout != DefaultAckTimeout {
		t.Fatalf("passive RTR %+v RTS %+v", rtr, rts)
	}
	if rep := n.reps[0]; rep.QPN != 0x62 || rep.StartingPSN != 0x222222 || rep.ResponderResources != 2 || rep.InitiatorDepth != 4 || rep.RNRRetryCount != 3 {
		t.Fatalf("REP %+v", rep)
	}
	// The active side moves its QP when it takes the REP's event.
	if qa.State() != qp.Init {
		t.Fatalf("active QP %v before the event is taken", qa.State())
	}
	ev = a.get(t, EventEstablishedCM)
	if !bytes.Equal(ev.Param.PrivateData, []byte("world")) {
		t.Fatalf("ESTABLISHED private data %q", ev.Param.PrivateData)
	}
	rtr, rts = qa.attrs[qp.RTR], qa.attrs[qp.RTS]
	if qa.State() != qp.RTS || rtr.DestQPN != 0x62 || rtr.RQPSN != 0x111111 || rtr.MaxDestRdAtomic != 4 ||
		rtr.AV.HopLimit != 64 || rtr.AV.DMAC != [6]byte{2, 0, 0, 0, 0, 2} ||
		rts.SQPSN != 0x222222 || rts.MaxRdAtomic != 2 || rts.RetryCnt != 5 || rts.RNRRetry != 3 {
		t.Fatalf("active QP %v RTR %+v RTS %+v", qa.State(), rtr, rts)
	}
	if a, _, _ := id.InitQPAttr(qp.Init); a.AccessFlags != verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic {
		t.Fatalf("connected INIT access %v", a.AccessFlags)
	}
	if got := qa.moves; len(got) != 4 || got[1] != qp.Init || qa.attrs[qp.Init].AccessFlags != verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic {
		t.Fatalf("active QP moves %v, INIT access %v: want INIT INIT RTR RTS with remote access", got, qa.attrs[qp.Init].AccessFlags)
	}
	b.get(t, EventEstablishedCM)
	a.noEvent(t)
	b.noEvent(t)

	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if qa.State() != qp.Err {
		t.Fatalf("active QP %v after rdma_disconnect, want ERR", qa.State())
	}
	b.get(t, EventDisconnectedCM)
	if err := child.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if qb.State() != qp.Err {
		t.Fatalf("passive QP %v after rdma_disconnect, want ERR", qb.State())
	}
	a.get(t, EventDisconnectedCM)
	a.get(t, EventTimewaitExitCM)
	b.get(t, EventTimewaitExitCM)
	a.noEvent(t)
	b.noEvent(t)
	if id.State() != StateDisconnect || child.State() != StateDisconnect {
		t.Fatalf("states %v %v", id.State(), child.State())
	}
	for _, i := range []*ID{id, child, l} {
		if err := i.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDisconnectAfterPeerDREQ: both sides call rdma_disconnect at once
// (perftest does); the peer's DREQ reached this side's CM, which
// answered it, before its event reached the id, so the service has no
// DREQ left to send and fails. rdma_disconnect still succeeds with the
// QP in ERR, as the kernel's does (it sends a DREQ, else a DREP, and
// returns 0 either way).
func TestDisconnectAfterPeerDREQ(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 0x111111), newHost(t, n, gidB, 0x222222)
	b.listen(t, 7471, 4)
	id := a.routed(t, netip.AddrPortFrom(gidB, 7471))
	qa, qb := newFakeQP(0x51), newFakeQP(0x62)
	if err := id.AttachQP(qa); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(Defaults); err != nil {
		t.Fatal(err)
	}
	child := b.get(t, EventConnectRequest).ID
	if err := child.AttachQP(qb); err != nil {
		t.Fatal(err)
	}
	if err := child.Accept(Defaults); err != nil {
		t.Fatal(err)
	}
	a.get(t, EventEstablishedCM)
	b.get(t, EventEstablishedCM)
	c := child.conn.(*fakeConn)
	c.mu.Lock()
	c.disconnectErr = syscall.EINVAL
	c.mu.Unlock()
	if err := child.Disconnect(); err != nil {
		t.Fatalf("rdma_disconnect after the peer's DREQ: %v, want success", err)
	}
	if qb.State() != qp.Err {
		t.Fatalf("passive QP %v after rdma_disconnect, want ERR", qb.State())
	}
}

// TestConnectWithoutQP: an active id without a QP sees
// CONNECT_RESPONSE with the REP's QPN; rdma_establish sends the RTU
// (passive ESTABLISHED). A passive id without a QP accepts with the
// program's QPN.
func TestConnectWithoutQP(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 10), newHost(t, n, gidB, 20)
	b.listen(t, 9000, 1)
	id := a.routed(t, netip.AddrPortFrom(gidB, 9000))
	if err := id.Connect(Defaults); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("connect with neither a QP nor a QPN: %v, want EINVAL", err)
	}
	p := Defaults
	p.QPN = 0x77
	if err := id.Connect(p); err != nil {
		t.Fatal(err)
	}
	if n.reqs[0].ResponderResources != 16 || n.reqs[0].InitiatorDepth != 16 || n.reqs[0].RetryCount != 7 {
		t.Fatalf("REQ with RDMA_MAX_*: %+v, want the device's 16", n.reqs[0])
	}
	ev := b.get(t, EventConnectRequest)
	q := Defaults
	q.QPN = 0x88
	if err := ev.ID.Accept(q); err != nil {
		t.Fatal(err)
	}
	ev = a.get(t, EventConnectResponse)
	if ev.Param.QPN != 0x88 {
		t.Fatalf("CONNECT_RESPONSE QPN %#x", ev.Param.QPN)
	}
	if attr, mask, err := id.InitQPAttr(qp.RTR); err != nil || attr.DestQPN != 0x88 || attr.RQPSN != 10 || mask&verbs.AttrAV == 0 {
		t.Fatalf("rdma_init_qp_attr RTR after the REP: %+v %v", attr, err)
	}
	b.noEvent(t)
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	b.get(t, EventEstablishedCM)
	a.noEvent(t)
}

// TestReject: rdma_reject's REJ (reason 28, private data) gives the
// active side REJECTED with the reason as status and its QP in ERR; a
// REQ for a port nobody listens on is REJECTED with reason 8; a REQ
// over the listener's backlog is rejected.
func TestReject(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	b.listen(t, 5000, 1)
	id := a.routed(t, netip.AddrPortFrom(gidB, 5000))
	qa := newFakeQP(5)
	id.AttachQP(qa)
	id.Connect(Defaults)
	ev := b.get(t, EventConnectRequest)
	// A second REQ while the first waits: over the backlog of 1.
	id2 := a.routed(t, netip.AddrPortFrom(gidB, 5000))
	id2.AttachQP(newFakeQP(6))
	id2.Connect(Defaults)
	if ev := a.get(t, EventRejectedCM); ev.ID != id2 || ev.Status != RejConsumer {
		t.Fatalf("REQ over the backlog: %+v", ev)
	}
	if err := ev.ID.Reject(RejConsumer, []byte("no")); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(Defaults); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("accept after reject: %v, want EINVAL", err)
	}
	rej := a.get(t, EventRejectedCM)
	if rej.ID != id || rej.Status != RejConsumer || string(rej.Param.PrivateData) != "no" || qa.State() != qp.Err {
		t.Fatalf("REJECTED %+v, QP %v", rej, qa.State())
	}
	id3 := a.routed(t, netip.AddrPortFrom(gidB, 5001))
	id3.AttachQP(newFakeQP(7))
	id3.Connect(Defaults)
	if ev := a.get(t, EventRejectedCM); ev.Status != RejInvalidServiceID {
		t.Fatalf("REQ to a closed port: status %d, want %d", ev.Status, RejInvalidServiceID)
	}
}

// TestUnreachable: a REQ without answer gives UNREACHABLE with
// -ETIMEDOUT and the QP in ERR; a CM service that is not wired in
// makes rdma_connect and rdma_listen fail with ENOSYS.
func TestUnreachable(t *testing.T) {
	n := newFakeNet()
	n.dropREQ = true
	a := newHost(t, n, gidA, 1)
	id := a.routed(t, netip.AddrPortFrom(gidB, 5000))
	q := newFakeQP(5)
	id.AttachQP(q)
	if err := id.Connect(Defaults); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventUnreachableCM); ev.Status != -int(syscall.ETIMEDOUT) || q.State() != qp.Err {
		t.Fatalf("UNREACHABLE status %d, QP %v", ev.Status, q.State())
	}

	c := newHost(t, nil, gidA, 1)
	id = c.routed(t, netip.AddrPortFrom(gidB, 5000))
	id.AttachQP(newFakeQP(9))
	if err := id.Connect(Defaults); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("connect without a CM service: %v, want ENOSYS", err)
	}
	l, _ := c.cm.CreateID(c.ch, PSTCP)
	if err := l.Listen(1); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("listen without a CM service: %v, want ENOSYS", err)
	}
	if id.State() != StateRouteResolved {
		t.Fatalf("state after a failed connect %v", id.State())
	}
}

// TestConnectErrorOnQPMove: when the active QP refuses RTR at the REP,
// the event becomes CONNECT_ERROR, the QP goes to ERR, no RTU is sent,
// and the connection's later events are dropped (librdmacm's
// connect_error).
func TestConnectErrorOnQPMove(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	b.listen(t, 4000, 1)
	id := a.routed(t, netip.AddrPortFrom(gidB, 4000))
	qa := newFakeQP(5)
	id.AttachQP(qa)
	qa.fail = qp.RTR
	id.Connect(Defaults)
	ev := b.get(t, EventConnectRequest)
	qb := newFakeQP(6)
	ev.ID.AttachQP(qb)
	ev.ID.Accept(Defaults)
	if ev := a.get(t, EventConnectError); ev.Status != -int(syscall.EINVAL) || qa.State() != qp.Err {
		t.Fatalf("CONNECT_ERROR status %d QP %v", ev.Status, qa.State())
	}
	ev.ID.Disconnect()
	a.noEvent(t) // the DISCONNECTED of a failed connection is dropped
	b.noEvent(t)
}

// TestHeader: the RDMA IP CM header round-trips IPv4 and IPv6
// addresses and the port, and malformed private data is refused.
func TestHeader(t *testing.T) {
	for _, c := range []struct{ src, dst string }{{"198.18.0.1:40000", "198.18.1.1:7471"}, {"[2001:db8::1]:5", "[2001:db8::2]:6"}} {
		src, dst := netip.MustParseAddrPort(c.src), netip.MustParseAddrPort(c.dst)
		b := appendHeader(nil, src, dst, []byte("x"))
		s, d, u, err := parseHeader(b)
		if err != nil || s != src || d.Addr() != dst.Addr() || string(u) != "x" {
			t.Fatalf("%v: %v %v %q %v", c, s, d, u, err)
		}
	}
	good := appendHeader(nil, netip.MustParseAddrPort("198.18.0.1:1"), netip.MustParseAddrPort("198.18.0.2:2"), nil)
	bad := [][]byte{nil, good[:35], append([]byte{1}, good[1:]...), append([]byte{0, 0x50}, good[2:]...)}
	for i, b := range bad {
		if _, _, _, err := parseHeader(b); err == nil {
			t.Errorf("malformed header %d accepted", i)
		}
	}
	// A REQ without the header is rejected by the listener.
	n := newFakeNet()
	b := newHost(t, n, gidB, 1)
	b.listen(t, 80, 1)
	svc := &fakeSvc{n: n, gid: gidA}
	var got []Event
	svc.Connect(ServiceID(PSTCP, 80), Path{SGID: gidA, DGID: gidB}, ConnParam{QPN: 1, PrivateData: []byte("short")}, func(e Event) { got = append(got, e) })
	if len(got) != 1 || got[0].Kind != EventRejected || got[0].Reason != RejConsumer {
		t.Fatalf("REQ without a header: %+v", got)
	}
	b.noEvent(t)
}

// TestDestroyDropsEvents: events queued for an id that is destroyed
// before they are taken are never returned.
func TestDestroyDropsEvents(t *testing.T) {
	a := newHost(t, nil, gidA, 1)
	id := a.routed(t, netip.AddrPortFrom(gidB, 1))
	// An IPv6 destination from an id bound to the device, whose only
	// address is IPv4; and from an unbound one.
	if err := id.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::2]:1"), time.Second); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("IPv6 destination from an IPv4 source: %v, want EINVAL", err)
	}
	id6, _ := a.cm.CreateID(a.ch, PSTCP)
	if err := id6.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8::2]:1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := a.get(t, EventAddrError); ev.ID != id6 || ev.Status != -int(syscall.ENODEV) {
		t.Fatalf("IPv6 destination without an IPv6 device: %+v, want ADDR_ERROR -ENODEV", ev)
	}
	id6.Destroy()

	id2, _ := a.cm.CreateID(a.ch, PSTCP)
	id.ResolveRoute(time.Second) // EINVAL: already routed; nothing queued
	id2.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(gidB, 2), time.Second)
	p := []unix.PollFd{{Fd: int32(a.ch.FD()), Events: unix.POLLIN}}
	unix.Poll(p, -1)
	id2.Destroy()
	unix.SetNonblock(a.ch.FD(), true)
	if ev, err := a.ch.Get(); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("event of a destroyed id returned: %+v %v", ev, err)
	}
	if EventTimewaitExitCM.String() != "RDMA_CM_EVENT_TIMEWAIT_EXIT" || EventType(99).String() != "UNKNOWN EVENT" {
		t.Fatal("rdma_event_str words")
	}
}

// TestConnectRequestAck: a CONNECT_REQUEST counts against the listener,
// as in librdmacm: its new id may be rejected and destroyed before the
// event is acked (rdma_destroy_id waits only for its own events), and
// the listener's destroy follows the ack.
func TestConnectRequestAck(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	l := b.listen(t, 6000, 2)
	id := a.routed(t, netip.AddrPortFrom(gidB, 6000))
	id.AttachQP(newFakeQP(3))
	id.Connect(Defaults)
	ev, err := b.ch.Get()
	if err != nil || ev.Type != EventConnectRequest {
		t.Fatalf("get: %+v %v", ev, err)
	}
	if err := ev.ID.Reject(RejConsumer, nil); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Destroy(); err != nil { // would wait forever if the event were the new id's
		t.Fatal(err)
	}
	a.get(t, EventRejectedCM)
	ev.Ack()
	if err := l.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// TestListenerGone: a listener destroyed while a request waits on its
// channel: the request is rejected (consumer defined) and never shown.
func TestListenerGone(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	l := b.listen(t, 6001, 2)
	id := a.routed(t, netip.AddrPortFrom(gidB, 6001))
	id.AttachQP(newFakeQP(3))
	id.Connect(Defaults)
	if err := l.Destroy(); err != nil {
		t.Fatal(err)
	}
	b.noEvent(t)
	if ev := a.get(t, EventRejectedCM); ev.Status != RejConsumer {
		t.Fatalf("REJECTED status %d, want %d", ev.Status, RejConsumer)
	}
	// The service ID is free again.
	l2 := b.listen(t, 6001, 2)
	l2.Destroy()
}

// TestConnectConcurrent: eight connections at once between two hosts,
// the CM's events arriving from its own goroutines: each active id on a
// channel of its own, the passive ids migrated off the listener's
// channel (as librdmacm does for a synchronous listener), every side
// seeing ESTABLISHED, DISCONNECTED and TIMEWAIT_EXIT in that order with
// its QP in RTS, then ERR. Run with -race.
func TestConnectConcurrent(t *testing.T) {
	const conns = 8
	n := newFakeNet()
	n.async = true
	a, b := newHost(t, n, gidA, 0x100), newHost(t, n, gidB, 0x200)
	l := b.listen(t, 7000, conns)
	done := make(chan error, 2*conns)
	go func() { // the passive side
		for range conns {
			ev, err := b.ch.Get()
			if err != nil || ev.Type != EventConnectRequest {
				done <- errors.New("listener: no CONNECT_REQUEST")
				return
			}
			child := ev.ID
			ev.Ack()
			ch, _ := NewChannel()
			child.Migrate(ch)
			q := newFakeQP(uint32(child.Route().Dst.Port()))
			child.AttachQP(q)
			if err := child.Accept(Defaults); err != nil {
				done <- err
				return
			}
			go func() {
				done <- side(child, ch, q, false)
			}()
		}
	}()
	for i := range conns {
		go func() {
			ch, _ := NewChannel()
			h := &host{cm: a.cm, ch: ch}
			id, _ := a.cm.CreateID(ch, PSTCP)
			if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(gidB, 7000), time.Second); err != nil {
				done <- err
				return
			}
			for _, w := range []EventType{EventAddrResolved, EventRouteResolved} {
				ev, err := h.ch.Get()
				if err != nil || ev.Type != w {
					done <- errors.New("active: no " + w.String())
					return
				}
				ev.Ack()
				if w == EventAddrResolved {
					id.ResolveRoute(time.Second)
				}
			}
			q := newFakeQP(uint32(0x1000 + i))
			id.AttachQP(q)
			if err := id.Connect(Defaults); err != nil {
				done <- err
				return
			}
			done <- side(id, ch, q, true)
		}()
	}
	for range 2 * conns {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	l.Destroy()
}

// side runs one end of a connection of TestConnectConcurrent.
func side(id *ID, ch *Channel, q *fakeQP, active bool) error {
	next := func(want EventType) error {
		ev, err := ch.Get()
		if err != nil {
			return err
		}
		ev.Ack()
		if ev.Type != want {
			return errors.New(ev.Type.String() + ", want " + want.String())
		}
		return nil
	}
	if err := next(EventEstablishedCM); err != nil {
		return err
	}
	if q.State() != qp.RTS {
		return errors.New("QP not in RTS at ESTABLISHED: " + q.State().String())
	}
	if active {
		if err := id.Disconnect(); err != nil {
			return err
		}
		if err := next(EventDisconnectedCM); err != nil {
			return err
		}
	} else {
		if err := next(EventDisconnectedCM); err != nil {
			return err
		}
		if err := id.Disconnect(); err != nil {
			return err
		}
	}
	if err := next(EventTimewaitExitCM); err != nil {
		return err
	}
	if q.State() != qp.Err {
		return errors.New("QP not in ERR after the disconnect: " + q.State().String())
	}
	if err := id.Destroy(); err != nil {
		return err
	}
	return ch.Destroy()
}

// TestRejectLargerMTU: Linux's rdma_cm asks for its netdev's MTU (2048
// from a 3000-byte netdev) and a REP cannot ask for less, so a REQ whose
// path MTU is beyond the port's active MTU is refused with REJ reason 26
// (invalid MTU) and no CONNECT_REQUEST: accepted, the peer's packets
// would be dropped by the port and the connection would hang. A REQ with
// a smaller MTU is taken at that MTU.
func TestRejectLargerMTU(t *testing.T) {
	n := newFakeNet()
	a, b := newHost(t, n, gidA, 1), newHost(t, n, gidB, 2)
	a.res.dev.MTU = qp.MTU2048
	b.listen(t, 5000, 4)
	id := a.routed(t, netip.AddrPortFrom(gidB, 5000))
	if id.Route().Path.MTU != qp.MTU2048 {
		t.Fatalf("route MTU %v, want 2048", id.Route().Path.MTU)
	}
	id.AttachQP(newFakeQP(5))
	if err := id.Connect(Defaults); err != nil {
		t.Fatal(err)
	}
	b.noEvent(t)
	if ev := a.get(t, EventRejectedCM); ev.ID != id || ev.Status != RejInvalidMTU {
		t.Fatalf("REQ with MTU 2048 to a 1024 port: %+v, want REJECTED status %d", ev, RejInvalidMTU)
	}

	// The other way: B (1024) to A (2048) connects at 1024.
	a.listen(t, 5001, 4)
	id2 := b.routed(t, netip.AddrPortFrom(gidA, 5001))
	qb := newFakeQP(6)
	id2.AttachQP(qb)
	if err := id2.Connect(Defaults); err != nil {
		t.Fatal(err)
	}
	ev := a.get(t, EventConnectRequest)
	qa := newFakeQP(7)
	if err := ev.ID.AttachQP(qa); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(Defaults); err != nil {
		t.Fatal(err)
	}
	b.get(t, EventEstablishedCM)
	if mtu := qa.attrs[qp.RTR].PathMTU; mtu != qp.MTU1024 {
		t.Fatalf("passive RTR path MTU %v, want the REQ's 1024", mtu)
	}
}
