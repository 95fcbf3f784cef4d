package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/verbsd"
)

const cmService = 0x0000000001060000 | 18515 // rdma_cm TCP port space, perftest's port

// cmWait returns the channel's next event, of type want: embedded, by
// running the fabric; daemon, by waiting on the channel.
type cmWait func(t *testing.T, ch *CMChannel, want ibcm.EventType) CMEvent

func embeddedWait(m *Embedded) cmWait {
	return func(t *testing.T, ch *CMChannel, want ibcm.EventType) CMEvent {
		t.Helper()
		var ev CMEvent
		var ok bool
		var err error
		m.Sim.RunUntilReact(func() bool {
			ev, ok, err = ch.TryGetEvent(0)
			return ok || err != nil
		}, 10*time.Second)
		if err != nil || !ok || ev.Type != want {
			t.Fatalf("event %v (%v, %v), want %v", ev.Type, ok, err, want)
		}
		return ev
	}
}

func daemonWait(t *testing.T, ch *CMChannel, want ibcm.EventType) CMEvent {
	t.Helper()
	ev, ok, err := ch.TryGetEvent(opTimeout)
	if err != nil || !ok || ev.Type != want {
		t.Fatalf("event %v (%v, %v), want %v", ev.Type, ok, err, want)
	}
	return ev
}

// cmConn is one connection made through the CM.
type cmConn struct {
	a, b       *side
	chA, chB   *CMChannel
	idA, idB   uint32
	gidA, gidB endpoint
}

// cmConnect sets up an RC connection from a to b with REQ, REP and RTU
// through the NICs' CMs, each side moving its QP from the other's REQ or
// REP, as rdma_cm does.
func cmConnect(t *testing.T, ctxA, ctxB *Context, wait cmWait) *cmConn {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	c := &cmConn{}
	var err error
	c.a, err = newSide(ctxA, 1<<20, 16, 0x111)
	must(err)
	c.b, err = newSide(ctxB, 1<<20, 16, 0x222)
	must(err)
	c.chA, err = ctxA.CreateCMChannel()
	must(err)
	c.chB, err = ctxB.CreateCMChannel()
	must(err)
	must(c.chB.Listen(cmService, 0))
	devA, _ := ctxA.QueryDevice()
	devB, _ := ctxB.QueryDevice()
	priv := []byte("hello from A")
	c.idA, err = c.chA.Connect(CMConnectParams{Peer: CMPeer{Addr: devB.GID}, ServiceID: cmService,
		QPN: c.a.qp.QPN(), StartingPSN: uint32(c.a.psn), ResponderResources: 16, InitiatorDepth: 16,
		RemoteCMResponseTimeout: 15, LocalCMResponseTimeout: 14, MaxCMRetries: 8, RetryCount: 7, RNRRetryCount: 7,
		PathMTU: 3, Primary: ibcm.RoCEPath(devA.GID, devB.GID, 0, 64, 14), PrivateData: priv}, [6]byte{})
	must(err)
	req := wait(t, c.chB, ibcm.EventREQReceived)
	if req.REQ.LocalQPN != c.a.qp.QPN() || req.REQ.StartingPSN != uint32(c.a.psn) || !bytes.HasPrefix(req.REQ.PrivateData[:], priv) {
		t.Fatalf("REQ: QPN %#x PSN %#x", req.REQ.LocalQPN, req.REQ.StartingPSN)
	}
	c.idB = req.ID
	if req.PeerMAC != devA.MAC {
		t.Fatalf("REQ's peer MAC %x, want A's %x", req.PeerMAC, devA.MAC)
	}
	// The passive side's QP goes where the REQ came from.
	must(c.b.connect(endpoint{QPN: req.REQ.LocalQPN, PSN: PSN(req.REQ.StartingPSN), GID: req.Peer.Addr, MAC: req.PeerMAC}))
	must(c.chB.Accept(c.idB, CMAcceptParams{QPN: c.b.qp.QPN(), StartingPSN: uint32(c.b.psn), ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7}))
	rep := wait(t, c.chA, ibcm.EventREPReceived)
	if rep.ID != c.idA || rep.REP.LocalQPN != c.b.qp.QPN() {
		t.Fatalf("REP for %d: QPN %#x", rep.ID, rep.REP.LocalQPN)
	}
	must(c.a.connect(endpoint{QPN: rep.REP.LocalQPN, PSN: PSN(rep.REP.StartingPSN), GID: devB.GID, MAC: devB.MAC}))
	must(c.chA.RTU(c.idA, nil))
	wait(t, c.chB, ibcm.EventRTUReceived)
	for _, s := range []struct {
		ch       *CMChannel
		id       uint32
		qpn, rqp uint32
	}{{c.chA, c.idA, c.a.qp.QPN(), c.b.qp.QPN()}, {c.chB, c.idB, c.b.qp.QPN(), c.a.qp.QPN()}} {
		info, err := s.ch.Info(s.id)
		if err != nil || info.State != ibcm.StateEstablished || info.LocalQPN != s.qpn || info.RemoteQPN != s.rqp {
			t.Fatalf("info %+v, %v", info, err)
		}
	}
	return c
}

// cmExchange: connect, a SEND each way byte-exact, A disconnects: both
// QPs' receive WRs flush, both sides get their events and leave
// timewait, the connection's last event says so.
func cmExchange(t *testing.T, ctxA, ctxB *Context, wait cmWait, waitWC func(*CQ) (WC, error)) {
	c := cmConnect(t, ctxA, ctxB, wait)
	msg := pattern(9, 3000)
	copy(c.a.buf, msg)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.b.qp.PostRecv(RecvWR{WRID: 7, NumSGE: 1, SGL: [8]SGE{c.b.mr.SGE(4096, 4096)}}))
	must(c.a.qp.PostSend(SendWR{WRID: 8, Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{c.a.mr.SGE(0, len(msg))}}))
	for _, cq := range []*CQ{c.a.cq, c.b.cq} {
		if wc, err := waitWC(cq); err != nil || wc.Status != WCSuccess {
			t.Fatalf("completion %+v, %v", wc, err)
		}
	}
	if !bytes.Equal(c.b.buf[4096:4096+len(msg)], msg) {
		t.Fatal("received bytes differ")
	}
	must(c.a.qp.PostRecv(RecvWR{WRID: 21, NumSGE: 1, SGL: [8]SGE{c.a.mr.SGE(0, 64)}}))
	must(c.b.qp.PostRecv(RecvWR{WRID: 22, NumSGE: 1, SGL: [8]SGE{c.b.mr.SGE(0, 64)}}))
	must(c.chA.Disconnect(c.idA, nil))
	if ev := wait(t, c.chB, ibcm.EventDREQReceived); ev.ID != c.idB {
		t.Fatalf("DREQ for %d", ev.ID)
	}
	wait(t, c.chA, ibcm.EventDREPReceived)
	for _, s := range []struct {
		cq   *CQ
		wrid uint64
	}{{c.a.cq, 21}, {c.b.cq, 22}} {
		if wc, err := waitWC(s.cq); err != nil || wc.Status != WCWRFlushErr || wc.WRID != s.wrid {
			t.Fatalf("completion %+v, %v; want WR %d flushed", wc, err, s.wrid)
		}
	}
	for _, ch := range []*CMChannel{c.chA, c.chB} {
		if ev := wait(t, ch, ibcm.EventTimewaitExit); !ev.Last {
			t.Errorf("timewait exit is not the connection's last event")
		}
	}
	if err := c.chA.Disconnect(c.idA, nil); !errors.Is(err, ErrBadHandle) && !errors.Is(err, ErrCMForeign) {
		t.Errorf("disconnect after timewait: %v", err)
	}
	must(c.chA.Destroy())
	must(c.chB.Destroy())
}

// TestCMEmbedded: the CM through the verbs API on the embedded fabric.
func TestCMEmbedded(t *testing.T) {
	m, err := NewEmbedded(sim.Config{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	wait := embeddedWait(m)
	cmExchange(t, m.A, m.B, wait, func(cq *CQ) (WC, error) {
		var wc [1]WC
		var n int
		var err error
		m.RunUntil(func() bool { n, err = cq.Poll(wc[:]); return n > 0 || err != nil }, 10*time.Second)
		if n == 0 && err == nil {
			err = errors.New("no completion")
		}
		return wc[0], err
	})
	// A connection of one channel cannot be named through another.
	c := cmConnect(t, m.A, m.B, wait)
	other, err := m.B.CreateCMChannel()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Disconnect(c.idB, nil); !errors.Is(err, ErrCMForeign) {
		t.Errorf("disconnect through another channel: %v", err)
	}
	// Destroying a channel lets its connections go: B's is disconnected.
	if err := c.chA.Destroy(); err != nil {
		t.Fatal(err)
	}
	wait(t, c.chB, ibcm.EventDREQReceived)
}

// TestCMDaemon: the same between two clients of two daemons; then a
// client that goes away has its connection disconnected (DREQ), and a
// client cannot name another's connections or QPs.
func TestCMDaemon(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 12}, true)
	a, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cmExchange(t, a, b, daemonWait, func(cq *CQ) (WC, error) { return waitWC(cq, opTimeout) })

	c := cmConnect(t, a, b, daemonWait)
	// Another client of A's daemon reaches neither the channel's
	// connection nor A's QP.
	intruder, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	ich, err := intruder.CreateCMChannel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ich.Disconnect(c.idA, nil); !errors.Is(err, ErrBadHandle) {
		t.Errorf("another client's disconnect: %v", err)
	}
	devB, _ := b.QueryDevice()
	if _, err := ich.Connect(CMConnectParams{Peer: CMPeer{Addr: devB.GID}, ServiceID: cmService, QPN: c.a.qp.QPN()}, [6]byte{}); !errors.Is(err, ErrBadHandle) {
		t.Errorf("connect with another client's QP: %v", err)
	}
	intruder.Close()

	// A's client goes away: its daemon disconnects the connection.
	a.Close()
	if ev := daemonWait(t, c.chB, ibcm.EventDREQReceived); ev.ID != c.idB {
		t.Fatalf("DREQ for %d", ev.ID)
	}
	if attr, err := c.b.qp.QueryAttr(); err != nil || attr.State != QPSErr {
		t.Errorf("B's QP: %v, %v; want ERROR", attr.State, err)
	}
	waitObjects(t, d.a, verbsd.Objects{})
	if n := d.sim.A.Counters().CMQPErrors; n < 2 {
		t.Errorf("A's cm_qp_errors %d", n)
	}
	// `softnic stats` shows QP1's and the CM's counters.
	st := stats(b)
	if st["gsi_rx_mads"] == 0 || st["gsi_tx_mads"] == 0 || st["cm_rx_msgs_req"] != 2 || st["cm_tx_msgs_rep"] != 2 || st["cm_rx_msgs_dreq"] != 2 {
		t.Errorf("B's stats: gsi_rx_mads %d gsi_tx_mads %d cm_rx_msgs_req %d cm_tx_msgs_rep %d cm_rx_msgs_dreq %d",
			st["gsi_rx_mads"], st["gsi_tx_mads"], st["cm_rx_msgs_req"], st["cm_tx_msgs_rep"], st["cm_rx_msgs_dreq"])
	}
}

// TestCMDaemonClientKilled: a client process connected through its
// daemon's CM is killed; the daemon disconnects its connection (DREQ),
// the peer's QP is flushed, the daemon holds nothing of the client.
func TestCMDaemonClientKilled(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 13}, true)
	dir := t.TempDir()
	b, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sb, err := newSide(b, 1<<16, 16, 0x333)
	if err != nil {
		t.Fatal(err)
	}
	chB, err := b.CreateCMChannel()
	if err != nil {
		t.Fatal(err)
	}
	if err := chB.Listen(cmService, 0); err != nil {
		t.Fatal(err)
	}
	devB, _ := b.QueryDevice()
	if err := publish(dir, "cmtarget.json", endpoint{GID: devB.GID, MAC: devB.MAC}); err != nil {
		t.Fatal(err)
	}
	cmd, out := startHelper(t, "cm-peer", "SOFTNIC_SOCK="+d.sockA, "SOFTNIC_DIR="+dir)
	req := daemonWait(t, chB, ibcm.EventREQReceived)
	if err := sb.connect(endpoint{QPN: req.REQ.LocalQPN, PSN: PSN(req.REQ.StartingPSN), GID: req.Peer.Addr, MAC: req.PeerMAC}); err != nil {
		t.Fatal(err)
	}
	if err := chB.Accept(req.ID, CMAcceptParams{QPN: sb.qp.QPN(), StartingPSN: uint32(sb.psn), ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	daemonWait(t, chB, ibcm.EventRTUReceived)
	if err := await(dir, "cm-connected", nil, opTimeout); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := sb.qp.PostRecv(RecvWR{WRID: 5, NumSGE: 1, SGL: [8]SGE{sb.mr.SGE(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ev := daemonWait(t, chB, ibcm.EventDREQReceived); ev.ID != req.ID {
		t.Fatalf("DREQ for %d, want %d", ev.ID, req.ID)
	}
	if wc, err := waitWC(sb.cq, opTimeout); err != nil || wc.Status != WCWRFlushErr || wc.WRID != 5 {
		t.Fatalf("B's receive: %+v, %v; want flushed", wc, err)
	}
	waitObjects(t, d.a, verbsd.Objects{})
	daemonWait(t, chB, ibcm.EventTimewaitExit)
}

// cmPeer is the killed client of TestCMDaemonClientKilled: it connects to
// the target through its daemon's CM, says so, and waits to be killed.
func cmPeer(sock, dir string) error {
	ctx, err := Dial(sock)
	if err != nil {
		return err
	}
	s, err := newSide(ctx, 1<<16, 16, 0x444)
	if err != nil {
		return err
	}
	var target endpoint
	if err := await(dir, "cmtarget.json", &target, opTimeout); err != nil {
		return err
	}
	dev, err := ctx.QueryDevice()
	if err != nil {
		return err
	}
	ch, err := ctx.CreateCMChannel()
	if err != nil {
		return err
	}
	id, err := ch.Connect(CMConnectParams{Peer: CMPeer{Addr: target.GID}, ServiceID: cmService, QPN: s.qp.QPN(),
		StartingPSN: uint32(s.psn), ResponderResources: 16, InitiatorDepth: 16, RemoteCMResponseTimeout: 15,
		LocalCMResponseTimeout: 14, MaxCMRetries: 8, RetryCount: 7, RNRRetryCount: 7, PathMTU: 3,
		Primary: ibcm.RoCEPath(dev.GID, target.GID, 0, 64, 14)}, target.MAC)
	if err != nil {
		return err
	}
	ev, ok, err := ch.TryGetEvent(opTimeout)
	if err != nil || !ok || ev.Type != ibcm.EventREPReceived {
		return fmt.Errorf("no REP: %v %v %v", ev.Type, ok, err)
	}
	if err := s.connect(endpoint{QPN: ev.REP.LocalQPN, PSN: PSN(ev.REP.StartingPSN), GID: target.GID, MAC: target.MAC}); err != nil {
		return err
	}
	if err := ch.RTU(id, nil); err != nil {
		return err
	}
	if err := publish(dir, "cm-connected", true); err != nil {
		return err
	}
	time.Sleep(time.Hour)
	return nil
}
