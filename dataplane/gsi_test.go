package dataplane

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// The CM conformance tests on the fabric: two NICs' CMs on QP1 set up RC
// connections with REQ/REP/RTU, reject, retry lost MADs and tear down,
// with exact MAD counts on the fake clock.

const cmTestService = 0x0000000001060000 | 7471 // rdma_cm's TCP port space, port 7471

// cmPair is a testPair whose QPs are left in RESET for the CM to
// connect, and the events each NIC's CM handed to its owner.
type cmPair struct {
	*testPair
	evA, evB []ibcm.Event
	mads     []madSeen // every MAD on the wire, in order
}

type madSeen struct {
	dir     fabric.Direction
	attr    uint16
	dropped bool
}

func newCMPair(t *testing.T, drop func(dir fabric.Direction, attr uint16, n int) bool) *cmPair {
	t.Helper()
	cfg := SimConfig{AtoB: lossyLink(0), BtoA: lossyLink(0)}
	seen := map[[2]int]int{} // (direction, attribute) -> MADs seen
	hook := func(dir fabric.Direction) func([]byte) bool {
		return func(frame []byte) bool {
			attr, ok := madAttr(frame)
			if !ok || drop == nil {
				return false
			}
			k := [2]int{int(dir), int(attr)}
			seen[k]++
			return drop(dir, attr, seen[k])
		}
	}
	cfg.AtoB.Drop, cfg.BtoA.Drop = hook(fabric.AtoB), hook(fabric.BtoA)
	sim, err := NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &cmPair{testPair: &testPair{tb: t, sim: sim, wcs: make([]qp.WC, 64)}}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	p.pdA, p.pdB = sim.A.AllocPD(), sim.B.AllocPD()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p.mrA, err = sim.A.RegMR(p.pdA, make([]byte, 1<<20), 0, all)
	must(err)
	p.mrB, err = sim.B.RegMR(p.pdB, make([]byte, 1<<20), 0, all)
	must(err)
	p.cqA, err = sim.A.CreateCQ(256, nil)
	must(err)
	p.cqB, err = sim.B.CreateCQ(256, nil)
	must(err)
	p.qa, err = sim.A.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 64, MaxRecvWR: 64})
	must(err)
	p.qb, err = sim.B.CreateQP(p.pdB, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 64, MaxRecvWR: 64})
	must(err)
	sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, dropped bool) {
		if attr, ok := madAttr(frame); ok {
			p.mads = append(p.mads, madSeen{d, attr, dropped})
		}
	})
	return p
}

// madAttr is the CM attribute of a frame to QP1, false for other frames.
func madAttr(frame []byte) (uint16, bool) {
	f, err := bth.ParseFrame(frame)
	if err != nil || f.Pkt.BTH().DestQPN() != GSIQPN {
		return 0, false
	}
	pl := f.Pkt.Payload()
	if len(pl) < 18 {
		return 0, false
	}
	return binary.BigEndian.Uint16(pl[16:18]), true
}

func (p *cmPair) handlerA(ev CMEvent) { p.evA = append(p.evA, ev.Event) }
func (p *cmPair) handlerB(ev CMEvent) {
	if ev.Type == ibcm.EventREQReceived && ev.PeerMAC != p.sim.A.MAC() {
		p.tb.Errorf("REQ event's peer MAC %x, want A's %x", ev.PeerMAC, p.sim.A.MAC())
	}
	p.evB = append(p.evB, ev.Event)
}

// waitEvent runs until evs (p.evA or p.evB) holds an event of type typ
// and returns it.
func (p *cmPair) waitEvent(evs *[]ibcm.Event, typ ibcm.EventType, limit time.Duration) ibcm.Event {
	p.tb.Helper()
	var got ibcm.Event
	found := func() bool {
		for _, ev := range *evs {
			if ev.Type == typ {
				got = ev
				return true
			}
		}
		return false
	}
	if !p.sim.RunUntilReact(found, limit) {
		p.tb.Fatalf("no %v event after %v; events %v", typ, limit, eventTypes(*evs))
	}
	return got
}

func eventTypes(evs []ibcm.Event) []string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.Type.String())
	}
	return s
}

// toRTS moves q (RESET) to RTS towards the peer's QP dqpn: the rdma_cm
// side of a connection, from the REQ's or REP's fields.
func toRTS(t testing.TB, e, peer *Engine, q *QP, dqpn uint32, rqPSN, sqPSN qp.PSN) {
	t.Helper()
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	for _, st := range []struct {
		a    QPAttr
		mask qp.AttrMask
	}{
		{QPAttr{State: qp.Init, AccessFlags: all, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{QPAttr{State: qp.RTR, AV: AddressVector{DGID: peer.Addr(), DMAC: peer.MAC(), HopLimit: 64},
			PathMTU: qp.MTU1024, DestQPN: dqpn, RQPSN: rqPSN, MaxDestRdAtomic: 4, MinRNRTimer: 12},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{QPAttr{State: qp.RTS, SQPSN: sqPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	} {
		if err := e.ModifyQP(q, &st.a, st.mask); err != nil {
			t.Fatal(err)
		}
	}
}

const psnA, psnB = 0x1234, 0x5678

// connectParams is A's REQ for service to B, with the short CM timeouts
// of a test: B answers within 4.096 us * 2^14 (67 ms), A within 2^15 (134
// ms), plus the transit of rdma_cm's packet lifetime (2 * 4.096 us *
// 2^16, 537 ms): B's REP timer fires before A's REQ timer.
func (p *cmPair) connectParams(service uint64) ibcm.ConnectParams {
	return ibcm.ConnectParams{Peer: ibcm.Peer{Addr: p.sim.B.Addr(), QPN: GSIQPN}, ServiceID: service,
		QPN: p.qa.QPN(), StartingPSN: psnA, ResponderResources: 4, InitiatorDepth: 4,
		RemoteCMResponseTimeout: 15, LocalCMResponseTimeout: 14, MaxCMRetries: 5,
		RetryCount: 7, RNRRetryCount: 7, PathMTU: 3,
		Primary: ibcm.RoCEPath(p.sim.A.Addr(), p.sim.B.Addr(), 0, 64, 14)}
}

// connect runs the whole exchange: B listens, A sends the REQ, B moves
// its QP to RTS and accepts, A moves its QP to RTS and sends the RTU.
// It returns the comm IDs.
func (p *cmPair) connect() (idA, idB uint32) {
	t := p.tb
	if err := p.sim.B.CMListen(cmTestService, 0, p.handlerB); err != nil {
		t.Fatal(err)
	}
	idA, err := p.sim.A.CMConnect(p.connectParams(cmTestService), [6]byte{}, p.handlerA)
	if err != nil {
		t.Fatal(err)
	}
	req := p.waitEvent(&p.evB, ibcm.EventREQReceived, time.Second)
	if req.REQ.LocalQPN != p.qa.QPN() || req.REQ.StartingPSN != psnA || req.Peer != (ibcm.Peer{Addr: p.sim.A.Addr(), QPN: GSIQPN}) {
		t.Fatalf("REQ: QPN %#x PSN %#x from %v", req.REQ.LocalQPN, req.REQ.StartingPSN, req.Peer)
	}
	idB = req.ID
	toRTS(t, p.sim.B, p.sim.A, p.qb, req.REQ.LocalQPN, qp.PSN(req.REQ.StartingPSN), psnB)
	if err := p.sim.B.CMAccept(idB, ibcm.AcceptParams{QPN: p.qb.QPN(), StartingPSN: psnB, ResponderResources: 4, InitiatorDepth: 4, RNRRetryCount: 7}, nil); err != nil {
		t.Fatal(err)
	}
	rep := p.waitEvent(&p.evA, ibcm.EventREPReceived, time.Second)
	if rep.REP.LocalQPN != p.qb.QPN() || rep.REP.StartingPSN != psnB || rep.REP.LocalCAGUID != p.sim.B.CAGUID() {
		t.Fatalf("REP: QPN %#x PSN %#x GUID %#x", rep.REP.LocalQPN, rep.REP.StartingPSN, rep.REP.LocalCAGUID)
	}
	toRTS(t, p.sim.A, p.sim.B, p.qa, rep.REP.LocalQPN, qp.PSN(rep.REP.StartingPSN), psnA)
	if err := p.sim.A.CMSendRTU(idA, nil); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(&p.evB, ibcm.EventRTUReceived, 2*time.Second)
	if s := p.sim.A.cmState(idA); s != ibcm.StateEstablished {
		t.Fatalf("A: %v", s)
	}
	return idA, idB
}

func (e *Engine) cmState(id uint32) ibcm.State {
	info, _ := e.CMInfo(id)
	return info.State
}

// TestCMWireFormat: a MAD is a UD SEND to QP1 as Linux rxe sends and
// takes it: BTH destination QP 1, P_Key 0xFFFF, DETH Q_Key 0x80010000
// and source QP 1, a 256-byte payload; the answer goes back to the
// REQ's source address and QP.
func TestCMWireFormat(t *testing.T) {
	p := newCMPair(t, nil)
	type seen struct {
		src, dst           string
		op                 bth.Opcode
		dqpn, sqpn, qkey   uint32
		pkey               uint16
		payload, attr, len int
	}
	var frames []seen
	p.sim.Fabric.Tap(func(_ fabric.Direction, _ time.Duration, frame []byte, _ bool) {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			t.Errorf("unparsable frame: %v", err)
			return
		}
		pl := f.Pkt.Payload()
		d := f.Pkt.DETH()
		frames = append(frames, seen{f.SrcAddr().String(), f.DstAddr().String(), f.Pkt.Opcode(), f.Pkt.BTH().DestQPN(), d.SrcQPN(), d.QKey(),
			f.Pkt.BTH().PKey(), len(pl), int(binary.BigEndian.Uint16(pl[16:18])), len(frame)})
		if !f.VerifyICRC() {
			t.Errorf("bad ICRC")
		}
		if pl[0] != 1 || pl[1] != 0x07 || pl[2] != 2 || pl[3] != 3 {
			t.Errorf("MAD header %x: want base version 1, class 0x07, class version 2, method Send", pl[:4])
		}
	})
	if _, err := p.sim.A.CMConnect(p.connectParams(cmTestService), [6]byte{}, p.handlerA); err != nil {
		t.Fatal(err)
	}
	rej := p.waitEvent(&p.evA, ibcm.EventREJReceived, time.Second)
	if rej.REJ.Reason != ibcm.RejInvalidServiceID {
		t.Errorf("REJ reason %d, want %d (invalid service ID)", rej.REJ.Reason, ibcm.RejInvalidServiceID)
	}
	a, b := p.sim.A.Addr().String(), p.sim.B.Addr().String()
	want := []seen{
		{a, b, bth.UDSendOnly, 1, 1, GSIQKey, 0xFFFF, 256, int(ibcm.AttrREQ), 0},
		{b, a, bth.UDSendOnly, 1, 1, GSIQKey, 0xFFFF, 256, int(ibcm.AttrREJ), 0},
	}
	if len(frames) != len(want) {
		t.Fatalf("%d frames on the wire, want %d: %+v", len(frames), len(want), frames)
	}
	for i := range want {
		want[i].len = frames[i].len
		if frames[i] != want[i] {
			t.Errorf("frame %d: %+v, want %+v", i, frames[i], want[i])
		}
	}
}

// TestCMREQNoListenerRejected: a REQ for a service nobody listens on
// gets REJ reason 8 (invalid service ID); the active side's connection
// is gone and both NICs count exactly the two MADs.
func TestCMREQNoListenerRejected(t *testing.T) {
	p := newCMPair(t, nil)
	id, err := p.sim.A.CMConnect(p.connectParams(cmTestService+1), [6]byte{}, p.handlerA)
	if err != nil {
		t.Fatal(err)
	}
	rej := p.waitEvent(&p.evA, ibcm.EventREJReceived, time.Second)
	if rej.ID != id || rej.REJ.Reason != ibcm.RejInvalidServiceID {
		t.Fatalf("REJ for %d reason %d, want %d reason 8", rej.ID, rej.REJ.Reason, id)
	}
	p.sim.RunFor(time.Second)
	ca, cb := p.sim.A.Counters(), p.sim.B.Counters()
	req, rj := ibcm.AttrIndex(ibcm.AttrREQ), ibcm.AttrIndex(ibcm.AttrREJ)
	if ca.CMTxMsgs[req] != 1 || ca.CMRxMsgs[rj] != 1 || cb.CMRxMsgs[req] != 1 || cb.CMTxMsgs[rj] != 1 || ca.CMTxRetries[req] != 0 {
		t.Errorf("A tx REQ %d rx REJ %d retries %d; B rx REQ %d tx REJ %d", ca.CMTxMsgs[req], ca.CMRxMsgs[rj], ca.CMTxRetries[req], cb.CMRxMsgs[req], cb.CMTxMsgs[rj])
	}
	if ca.GSISentMADs != 1 || ca.GSIRecvMADs != 1 || cb.GSISentMADs != 1 || cb.GSIRecvMADs != 1 {
		t.Errorf("gsi MADs: A sent %d received %d, B sent %d received %d", ca.GSISentMADs, ca.GSIRecvMADs, cb.GSISentMADs, cb.GSIRecvMADs)
	}
	if n := p.sim.B.CMCounters().RejInvalidService; n != 1 {
		t.Errorf("B rej_invalid_service_id %d", n)
	}
	if len(p.evB) != 0 {
		t.Errorf("B's (absent) owner got events %v", eventTypes(p.evB))
	}
}

// TestCMLostREPRetried: the first REP is lost; B resends it after its
// response timeout, A answers with the RTU, and RC traffic then flows
// byte-exact on the connected QPs.
func TestCMLostREPRetried(t *testing.T) {
	p := newCMPair(t, func(d fabric.Direction, attr uint16, n int) bool {
		return d == fabric.BtoA && attr == ibcm.AttrREP && n == 1
	})
	p.connect()
	rep := ibcm.AttrIndex(ibcm.AttrREP)
	if cb := p.sim.B.Counters(); cb.CMTxMsgs[rep] != 1 || cb.CMTxRetries[rep] != 1 {
		t.Errorf("B: REP sent %d, resent %d; want 1 and 1", cb.CMTxMsgs[rep], cb.CMTxRetries[rep])
	}
	want := []madSeen{{fabric.AtoB, ibcm.AttrREQ, false}, {fabric.BtoA, ibcm.AttrREP, true}, {fabric.BtoA, ibcm.AttrREP, false}, {fabric.AtoB, ibcm.AttrRTU, false}}
	if !equalMADs(p.mads, want) {
		t.Errorf("MADs %+v, want %+v", p.mads, want)
	}
	p.rcTraffic()
}

// TestCMLostRTURetried: the RTU is lost; B's REP timer resends the REP,
// A takes it as a duplicate and resends the RTU, and B is established.
func TestCMLostRTURetried(t *testing.T) {
	p := newCMPair(t, func(d fabric.Direction, attr uint16, n int) bool {
		return d == fabric.AtoB && attr == ibcm.AttrRTU && n == 1
	})
	p.connect()
	rep, rtu := ibcm.AttrIndex(ibcm.AttrREP), ibcm.AttrIndex(ibcm.AttrRTU)
	ca, cb := p.sim.A.Counters(), p.sim.B.Counters()
	if cb.CMTxRetries[rep] != 1 || ca.CMRxDuplicates[rep] != 1 || ca.CMTxMsgs[rtu] != 1 || cb.CMRxMsgs[rtu] != 1 {
		t.Errorf("B REP retries %d, A duplicate REPs %d, A RTUs %d, B RTUs received %d", cb.CMTxRetries[rep], ca.CMRxDuplicates[rep], ca.CMTxMsgs[rtu], cb.CMRxMsgs[rtu])
	}
	want := []madSeen{{fabric.AtoB, ibcm.AttrREQ, false}, {fabric.BtoA, ibcm.AttrREP, false}, {fabric.AtoB, ibcm.AttrRTU, true},
		{fabric.BtoA, ibcm.AttrREP, false}, {fabric.AtoB, ibcm.AttrRTU, false}}
	if !equalMADs(p.mads, want) {
		t.Errorf("MADs %+v, want %+v", p.mads, want)
	}
	p.rcTraffic()
}

func equalMADs(a, b []madSeen) bool {
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

// rcTraffic sends a 100 kB SEND each way on the connected QPs and checks
// the bytes.
func (p *cmPair) rcTraffic() {
	t := p.tb
	const n = 100_000
	for i := range n {
		p.mrA.buf[i] = byte(i * 7)
		p.mrB.buf[i] = byte(i * 13)
	}
	if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(2, sge(p.mrB, 1<<19, n))}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sim.A.PostRecv(p.qa, []qp.RecvWR{recvWR(3, sge(p.mrA, 1<<19, n))}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sim.A.PostSend(p.qa, []qp.SendWR{sendWR(1, qp.WRSend, sge(p.mrA, 0, n))}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sim.B.PostSend(p.qb, []qp.SendWR{sendWR(4, qp.WRSend, sge(p.mrB, 0, n))}); err != nil {
		t.Fatal(err)
	}
	var wa, wb []qp.WC
	p.sim.RunUntil(func() bool {
		k, _ := p.sim.A.PollCQ(p.cqA, p.wcs)
		wa = append(wa, p.wcs[:k]...)
		k, _ = p.sim.B.PollCQ(p.cqB, p.wcs)
		wb = append(wb, p.wcs[:k]...)
		return len(wa) == 2 && len(wb) == 2
	}, time.Second)
	for _, wc := range append(wa, wb...) {
		if wc.Status != qp.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
	}
	if len(wa) != 2 || len(wb) != 2 {
		t.Fatalf("completions: A %d, B %d", len(wa), len(wb))
	}
	if !bytes.Equal(p.mrB.buf[1<<19:1<<19+n], p.mrA.buf[:n]) || !bytes.Equal(p.mrA.buf[1<<19:1<<19+n], p.mrB.buf[:n]) {
		t.Fatal("received bytes differ from the sent ones")
	}
}

// TestCMDisconnectFlushes: A's DREQ moves A's QP to ERROR, B's CM moves
// B's to ERROR on the DREQ and answers with the DREP; both QPs' posted
// work requests complete with IBV_WC_WR_FLUSH_ERR, both sides get their
// events and leave timewait.
func TestCMDisconnectFlushes(t *testing.T) {
	p := newCMPair(t, nil)
	idA, idB := p.connect()
	for i := range 3 {
		if _, err := p.sim.A.PostRecv(p.qa, []qp.RecvWR{recvWR(uint64(10+i), sge(p.mrA, i*64, 64))}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(uint64(20+i), sge(p.mrB, i*64, 64))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.sim.A.CMDisconnect(idA, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	dreq := p.waitEvent(&p.evB, ibcm.EventDREQReceived, time.Second)
	if dreq.ID != idB || string(dreq.PrivateData[:3]) != "bye" {
		t.Errorf("DREQ event %d %q", dreq.ID, dreq.PrivateData[:3])
	}
	p.waitEvent(&p.evA, ibcm.EventDREPReceived, time.Second)
	for _, side := range []struct {
		name string
		e    *Engine
		cq   *CQ
		q    *QP
		base uint64
	}{{"A", p.sim.A, p.cqA, p.qa, 10}, {"B", p.sim.B, p.cqB, p.qb, 20}} {
		if st := side.e.QueryQP(side.q).State; st != qp.Err {
			t.Errorf("%s: QP in %v, want ERROR", side.name, st)
		}
		k, _ := side.e.PollCQ(side.cq, p.wcs)
		if k != 3 {
			t.Errorf("%s: %d completions, want 3 flushed", side.name, k)
		}
		for i, wc := range p.wcs[:k] {
			if wc.Status != qp.WCWRFlushErr || wc.WRID != side.base+uint64(i) {
				t.Errorf("%s: completion %+v, want WR %d flushed", side.name, wc, side.base+uint64(i))
			}
		}
	}
	p.waitEvent(&p.evA, ibcm.EventTimewaitExit, 2*time.Second)
	p.waitEvent(&p.evB, ibcm.EventTimewaitExit, 2*time.Second)
	if ca, cb := p.sim.A.Counters(), p.sim.B.Counters(); ca.CMQPErrors != 1 || cb.CMQPErrors != 1 {
		t.Errorf("cm_qp_errors: A %d, B %d", ca.CMQPErrors, cb.CMQPErrors)
	}
	if _, ok := p.sim.A.CMInfo(idA); ok {
		t.Errorf("A still holds connection %d after timewait", idA)
	}
	if len(p.sim.A.gsi.owners) != 0 || len(p.sim.B.gsi.owners) != 0 {
		t.Errorf("owners left: A %d, B %d", len(p.sim.A.gsi.owners), len(p.sim.B.gsi.owners))
	}
}

// TestCMCloseEstablished: closing an established connection (its owner
// went away) sends the DREQ; the peer is disconnected and its QP flushed.
func TestCMCloseEstablished(t *testing.T) {
	p := newCMPair(t, nil)
	idA, _ := p.connect()
	p.evA = nil
	if err := p.sim.A.CMClose(idA); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(&p.evB, ibcm.EventDREQReceived, time.Second)
	p.sim.RunFor(2 * time.Second)
	if st := p.sim.B.QueryQP(p.qb).State; st != qp.Err {
		t.Errorf("B's QP in %v, want ERROR", st)
	}
	for _, ev := range p.evA {
		t.Errorf("A's closed connection delivered %v", ev.Type)
	}
	if n := p.sim.A.Counters().CMEventsOrphaned; n != 2 { // DREP_RECEIVED, TIMEWAIT_EXIT
		t.Errorf("cm_events_orphaned %d, want 2", n)
	}
}

// TestCMMalformedMADs: datagrams to QP1 that are not CM MADs (short, bad
// class, bad class version, unknown attribute, too long for a MAD, wrong
// Q_Key) are counted and dropped; the NIC then connects as before.
func TestCMMalformedMADs(t *testing.T) {
	p := newCMPair(t, nil)
	u := &udPair{tb: t, sim: p.sim, wcs: p.wcs, pdA: p.pdA, mrA: p.mrA, cqA: p.cqA}
	// A UD QP whose own Q_Key is QP1's: a Q_Key with the high bit set in
	// a work request means the QP's own (IBA C10-15), as for a GSI QP.
	q := u.udQP(p.sim.A, p.pdA, p.cqA)
	if err := p.sim.A.ModifyQP(q, &QPAttr{State: qp.RTS, QKey: GSIQKey}, qp.AttrState|qp.AttrQKey); err != nil {
		t.Fatal(err)
	}
	ah := u.ah(p.sim.A, p.pdA, p.sim.B)
	good := make([]byte, 256)
	good[0], good[1], good[2], good[3] = 1, 0x07, 2, 3
	binary.BigEndian.PutUint16(good[16:], ibcm.AttrREQ)
	mad := func(off int, patch func(b []byte), n int) []byte {
		b := append([]byte(nil), good...)
		if patch != nil {
			patch(b)
		}
		copy(p.mrA.buf[off:], b[:min(n, len(b))])
		return b
	}
	cases := []struct {
		name string
		n    int
		qkey uint32
		f    func([]byte)
	}{
		{"short", 100, GSIQKey, nil},
		{"bad class", 256, GSIQKey, func(b []byte) { b[1] = 0x01 }},
		{"bad base version", 256, GSIQKey, func(b []byte) { b[0] = 2 }},
		{"bad class version", 256, GSIQKey, func(b []byte) { b[2] = 1 }},
		{"unknown attribute", 256, GSIQKey, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 0x0030) }},
		{"too long", 300, GSIQKey, nil},
		{"wrong Q_Key", 256, 0x1234, nil},
	}
	var wrs []qp.SendWR
	for i, c := range cases {
		mad(i*512, c.f, c.n)
		wrs = append(wrs, udSend(uint64(i), ah, GSIQPN, c.qkey, sge(p.mrA, i*512, c.n)))
	}
	before := p.sim.B.Counters()
	u.post(p.sim.A, q, wrs...)
	u.collect(p.sim.A, p.cqA, len(cases), time.Second)
	p.sim.RunFor(10 * time.Millisecond)
	after := p.sim.B.Counters()
	cm := p.sim.B.CMCounters()
	if d := after.GSIRecvDropped - before.GSIRecvDropped; d != uint64(len(cases)) {
		t.Errorf("gsi_rx_dropped +%d, want %d", d, len(cases))
	}
	if cm.RxBadLength != 1 || cm.RxBadClass != 1 || cm.RxBadBaseVersion != 1 || cm.RxBadClassVersion != 1 || cm.RxUnknownAttr != 1 {
		t.Errorf("CM drops: %+v", cm)
	}
	if after.RespLocalLength-before.RespLocalLength != 1 || after.RcvdQKeyViolation-before.RcvdQKeyViolation != 1 {
		t.Errorf("resp_local_length_error +%d, rcvd_qkey_violation +%d", after.RespLocalLength-before.RespLocalLength, after.RcvdQKeyViolation-before.RcvdQKeyViolation)
	}
	if after.CMRxDropped != 5 {
		t.Errorf("cm_rx_dropped %d, want 5", after.CMRxDropped)
	}
	if after.GSISentMADs != 0 {
		t.Errorf("B answered %d of them", after.GSISentMADs)
	}
	p.connect()
	p.rcTraffic()
}

// TestQPNumbering: no QP the verbs make is numbered 0 or 1, not even
// when the numbers wrap past 2^24-1, and QP1 is not among a NIC's
// resources.
func TestQPNumbering(t *testing.T) {
	p := newCMPair(t, nil)
	if p.qa.QPN() < 2 || p.qb.QPN() < 2 {
		t.Fatalf("QPNs %#x %#x", p.qa.QPN(), p.qb.QPN())
	}
	e := p.sim.A
	e.nextQP = qp.PSNMask
	var got []uint32
	for range 2 {
		q, err := e.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, q.QPN())
		if err := e.DestroyQP(q); err != nil {
			t.Fatal(err)
		}
	}
	if got[0] != qp.PSNMask || got[1] < 0x10 {
		t.Errorf("QPNs around the wrap %#x, %#x", got[0], got[1])
	}
	if e.qps[GSIQPN] != nil || e.gsi.q.QPN() != GSIQPN {
		t.Errorf("QP1 is among the clients' QPs, or numbered %#x", e.gsi.q.QPN())
	}
	if r := p.sim.A.Resources(); r.QPs != 1 || r.MRs != 1 || r.PDs != 1 {
		t.Errorf("resources %+v, want the test's one QP, MR and PD", r)
	}
}

// TestCMIdleNoAllocs: an engine with the CM idle polls without
// allocating.
func TestCMIdleNoAllocs(t *testing.T) {
	p := newCMPair(t, nil)
	p.connect()
	p.sim.RunFor(time.Second)
	now := p.sim.Now()
	if n := testing.AllocsPerRun(100, func() {
		now += time.Microsecond
		p.sim.A.Poll(now)
	}); n != 0 {
		t.Errorf("%v allocations per idle poll", n)
	}
}

// TestCMManyConnectionsLossy: 32 connections between the two NICs over
// links that lose 10% of frames (and duplicate and reorder some), all
// established through QP1 with every lost MAD recovered by the CMs'
// timers, then all torn down from A, every QP in ERROR and every comm
// ID free after timewait on both sides. Exact for its seed.
func TestCMManyConnectionsLossy(t *testing.T) {
	const n = 32
	sim, err := NewSim(SimConfig{Seed: 42, AtoB: lossyLink(0.1), BtoA: lossyLink(0.1)})
	if err != nil {
		t.Fatal(err)
	}
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	cqA, _ := sim.A.CreateCQ(1024, nil)
	cqB, _ := sim.B.CreateCQ(1024, nil)
	var qa, qb [n]*QP
	byQPN := map[uint32]int{}
	for i := range n {
		if qa[i], err = sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 4}); err != nil {
			t.Fatal(err)
		}
		if qb[i], err = sim.B.CreateQP(pdB, QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 4, MaxRecvWR: 4}); err != nil {
			t.Fatal(err)
		}
		byQPN[qa[i].QPN()] = i
	}
	var evA, evB []CMEvent
	hA := func(ev CMEvent) { evA = append(evA, ev) }
	hB := func(ev CMEvent) { evB = append(evB, ev) }
	if err := sim.B.CMListen(cmTestService, 0, hB); err != nil {
		t.Fatal(err)
	}
	var idA [n]uint32
	for i := range n {
		p := ibcm.ConnectParams{Peer: ibcm.Peer{Addr: sim.B.Addr(), QPN: GSIQPN}, ServiceID: cmTestService,
			QPN: qa[i].QPN(), StartingPSN: uint32(100 + i), RemoteCMResponseTimeout: 15, LocalCMResponseTimeout: 14,
			MaxCMRetries: 15, RetryCount: 7, RNRRetryCount: 7, PathMTU: 3, Primary: ibcm.RoCEPath(sim.A.Addr(), sim.B.Addr(), 0, 64, 14)}
		if idA[i], err = sim.A.CMConnect(p, [6]byte{}, hA); err != nil {
			t.Fatal(err)
		}
	}
	connOf := map[uint32]int{} // A's comm ID -> connection
	for i, id := range idA {
		connOf[id] = i
	}
	established := map[uint32]bool{} // B's comm IDs with RTU (or USER_ESTABLISHED)
	idB := map[int]uint32{}
	rtuSent := 0
	seenA, seenB := 0, 0
	step := func() bool {
		for ; seenB < len(evB); seenB++ {
			ev := evB[seenB]
			switch ev.Type {
			case ibcm.EventREQReceived:
				i := byQPN[ev.REQ.LocalQPN]
				idB[i] = ev.ID
				toRTS(t, sim.B, sim.A, qb[i], ev.REQ.LocalQPN, qp.PSN(ev.REQ.StartingPSN), qp.PSN(500+i))
				if err := sim.B.CMAccept(ev.ID, ibcm.AcceptParams{QPN: qb[i].QPN(), StartingPSN: uint32(500 + i), RNRRetryCount: 7}, nil); err != nil {
					t.Fatal(err)
				}
			case ibcm.EventRTUReceived, ibcm.EventUserEstablished:
				established[ev.ID] = true
			default:
				t.Fatalf("B: unexpected %v", ev.Type)
			}
		}
		for ; seenA < len(evA); seenA++ {
			ev := evA[seenA]
			if ev.Type != ibcm.EventREPReceived {
				t.Fatalf("A: unexpected %v", ev.Type)
			}
			i := connOf[ev.ID]
			toRTS(t, sim.A, sim.B, qa[i], ev.REP.LocalQPN, qp.PSN(ev.REP.StartingPSN), qp.PSN(100+i))
			if err := sim.A.CMSendRTU(ev.ID, nil); err != nil {
				t.Fatal(err)
			}
			rtuSent++
		}
		return len(established) == n && rtuSent == n
	}
	if !sim.RunUntilReact(step, time.Minute) {
		t.Fatalf("%d of %d established, %d RTUs sent", len(established), n, rtuSent)
	}
	// Every side established (an RTU lost on the way was repeated when
	// B's REP timer resent the REP): disconnect everything from A.
	for i := range n {
		if err := sim.A.CMDisconnect(idA[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	exits := func(evs []CMEvent) int {
		k := 0
		for _, ev := range evs {
			if ev.Type == ibcm.EventTimewaitExit {
				k++
			}
		}
		return k
	}
	if !sim.RunUntilReact(func() bool { return exits(evA) == n && exits(evB) == n }, time.Minute) {
		t.Fatalf("timewait exits: A %d, B %d of %d", exits(evA), exits(evB), n)
	}
	for i := range n {
		if sa, sb := sim.A.QueryQP(qa[i]).State, sim.B.QueryQP(qb[i]).State; sa != qp.Err || sb != qp.Err {
			t.Errorf("connection %d: QPs in %v and %v", i, sa, sb)
		}
	}
	ca, cb := sim.A.CMCounters(), sim.B.CMCounters()
	retries := func(c ibcm.Counters) (r uint64) {
		for _, v := range c.TxRetries {
			r += v
		}
		return r
	}
	if retries(ca)+retries(cb) == 0 {
		t.Error("no MAD was resent: the loss did not reach the CM")
	}
	if len(sim.A.gsi.owners) != 0 || len(sim.B.gsi.owners) != 0 || sim.A.gsi.cm.Conns() != 0 || sim.B.gsi.cm.Conns() != 0 {
		t.Errorf("left: owners A %d B %d, connections A %d B %d", len(sim.A.gsi.owners), len(sim.B.gsi.owners), sim.A.gsi.cm.Conns(), sim.B.gsi.cm.Conns())
	}
	t.Logf("retries A %v B %v; MADs A sent %d, B sent %d", ca.TxRetries[:7], cb.TxRetries[:7], sim.A.Counters().GSISentMADs, sim.B.Counters().GSISentMADs)
}
