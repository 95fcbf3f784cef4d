package ibcm

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

const (
	testService = 0x0000000001061d2f // rdma_cm TCP port 7471
	// Test timeouts: the peer answers within 4.096 us * 2^14 (67 ms); the
	// transit adds 2 * 4.096 us * 2^10 (8.4 ms).
	testRespTimeout = 14
	testRetries     = 3
)

var reqTimeout = IBATime(testRespTimeout) + 2*IBATime(testPLT)

// pair is two nodes, A active and B listening on testService.
func pair(t *testing.T) (*fakeNet, *node, *node) {
	nw := newFakeNet(t, 1)
	a := nw.add("198.18.0.1", 0x0202c9fffe000001)
	b := nw.add("198.18.0.2", 0x0202c9fffe000002)
	a.rtu = true
	b.accept = true
	if err := b.cm.Listen(testService, 0); err != nil {
		t.Fatal(err)
	}
	return nw, a, b
}

func connectParams(to *node, qpn uint32) ConnectParams {
	from := netip.MustParseAddr("198.18.0.1")
	p := ConnectParams{Peer: to.peer(), ServiceID: testService, QPN: qpn, StartingPSN: 0xabcdef,
		ResponderResources: 4, InitiatorDepth: 2, RemoteCMResponseTimeout: testRespTimeout,
		LocalCMResponseTimeout: testRespTimeout, MaxCMRetries: testRetries, RetryCount: 7, RNRRetryCount: 7,
		PathMTU: 3, Primary: Path{LocalLID: LIDPermissive, RemoteLID: LIDPermissive,
			LocalGID: GIDFromAddr(from), RemoteGID: GIDFromAddr(to.addr), HopLimit: 64, LocalACKTimeout: 14}}
	priv := make([]byte, CMAHeaderSize+4)
	h := CMAHeader{SrcPort: 0xc000 + uint16(qpn), Src: from, Dst: to.addr}
	if err := h.Put(priv); err != nil {
		panic(err)
	}
	copy(priv[CMAHeaderSize:], "data")
	p.PrivateData = priv
	return p
}

func mustConnect(t *testing.T, nw *fakeNet, a, b *node, qpn uint32) uint32 {
	t.Helper()
	id, err := a.cm.Connect(nw.now, connectParams(b, qpn))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wantTypes(t *testing.T, who string, n *node, want ...EventType) {
	t.Helper()
	if got := n.eventTypes(); !slices.Equal(got, want) {
		t.Fatalf("%s events %v, want %v", who, got, want)
	}
}

func dropNth(attr uint16, nth ...int) func(f *flight) bool {
	count := 0
	return func(f *flight) bool {
		if f.attr != attr {
			return false
		}
		count++
		return slices.Contains(nth, count)
	}
}

func TestConnectDisconnect(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
	req := b.events[0].REQ
	if req.LocalQPN != 0x11 || req.StartingPSN != 0xabcdef || req.ServiceID != testService ||
		req.LocalCAGUID != 0x0202c9fffe000001 || req.ResponderResources != 4 || req.InitiatorDepth != 2 ||
		req.MaxCMRetries != testRetries || req.PKey != 0xffff || req.Primary.LocalGID.Addr() != a.addr {
		t.Fatalf("REQ as received: %+v", req)
	}
	if b.events[0].ServiceID != testService || b.events[0].Peer != a.peer() {
		t.Fatalf("REQ event %+v", b.events[0])
	}
	ch, err := ParseCMAHeader(req.PrivateData[:])
	if err != nil || ch.Src != a.addr || ch.Dst != b.addr || ch.SrcPort != 0xc011 ||
		!bytes.HasPrefix(req.PrivateData[CMAHeaderSize:], []byte("data")) {
		t.Fatalf("cma header %+v %v", ch, err)
	}
	rep := a.events[0].REP
	if a.events[0].ID != id || rep.LocalQPN != 0x211 || rep.StartingPSN != 0x1000 || rep.LocalCAGUID != 0x0202c9fffe000002 ||
		rep.ResponderResources != 2 || rep.InitiatorDepth != 4 || !bytes.HasPrefix(rep.PrivateData[:], []byte("rep")) {
		t.Fatalf("REP event %+v", a.events[0])
	}
	bid := b.events[0].ID
	if !bytes.HasPrefix(b.events[1].PrivateData, []byte("rtu")) || b.events[1].ID != bid {
		t.Fatalf("RTU event %+v", b.events[1])
	}
	if a.cm.State(id) != StateEstablished || b.cm.State(bid) != StateEstablished {
		t.Fatalf("states %v %v", a.cm.State(id), b.cm.State(bid))
	}
	for _, attr := range []uint16{AttrREQ, AttrRTU} {
		if nw.sentOf(a, attr) != 1 {
			t.Fatalf("A sent %d %s", nw.sentOf(a, attr), AttrName(attr))
		}
	}
	if nw.sentOf(b, AttrREP) != 1 {
		t.Fatalf("B sent %d REPs", nw.sentOf(b, AttrREP))
	}

	if err := a.cm.Disconnect(nw.now, id, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.qpErr, []uint32{0x11}) {
		t.Fatalf("A QP error calls %v before the DREQ goes", a.qpErr)
	}
	nw.runFor(time.Millisecond)
	if !slices.Equal(b.qpErr, []uint32{0x211}) {
		t.Fatalf("B QP error calls %v", b.qpErr)
	}
	wantTypes(t, "A", a, EventREPReceived, EventDREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREQReceived)
	if !bytes.HasPrefix(b.events[2].PrivateData, []byte("bye")) {
		t.Fatalf("DREQ private data %q", b.events[2].PrivateData[:8])
	}
	if a.cm.State(id) != StateTimewait || b.cm.State(bid) != StateTimewait {
		t.Fatalf("states %v %v", a.cm.State(id), b.cm.State(bid))
	}
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREPReceived, EventDREPReceived, EventTimewaitExit)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREQReceived, EventTimewaitExit)
	if a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatalf("conns left: %d %d", a.cm.Conns(), b.cm.Conns())
	}
	if nw.sentOf(a, AttrDREQ) != 1 || nw.sentOf(b, AttrDREP) != 1 || len(nw.sent) != 5 {
		t.Fatalf("%d MADs sent", len(nw.sent))
	}
	ca := a.cm.Counters()
	if ca.TxMsgs[AttrIndex(AttrREQ)] != 1 || ca.RxMsgs[AttrIndex(AttrREP)] != 1 || ca.RxMsgs[AttrIndex(AttrDREP)] != 1 {
		t.Fatalf("A counters %+v", ca)
	}
}

func TestREQNoListenerRejected(t *testing.T) {
	nw, a, b := pair(t)
	p := connectParams(b, 0x11)
	p.ServiceID = ServiceID(PortSpaceTCP, 9999)
	id, err := a.cm.Connect(nw.now, p)
	if err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREJReceived)
	wantTypes(t, "B", b)
	rej := a.events[0].REJ
	if a.events[0].ID != id || rej.Reason != RejInvalidServiceID || rej.MessageRejected != MsgREQ ||
		rej.RemoteCommID != id || rej.LocalCommID != 0 {
		t.Fatalf("REJ %+v", rej)
	}
	if b.cm.Counters().RejInvalidService != 1 || b.cm.Conns() != 0 || a.cm.Conns() != 0 {
		t.Fatalf("counters %+v conns %d %d", b.cm.Counters(), a.cm.Conns(), b.cm.Conns())
	}
	if len(nw.sent) != 2 {
		t.Fatalf("%d MADs, want REQ and REJ", len(nw.sent))
	}
	// The REJ answers the REQ's transaction.
	if !bytes.Equal(nw.sent[0].mad[8:16], nw.sent[1].mad[8:16]) {
		t.Fatal("REJ transaction ID differs from the REQ's")
	}
}

func TestLostREQRetried(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrREQ, 1)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
	var reqs []flight
	for _, f := range nw.sent {
		if f.attr == AttrREQ {
			reqs = append(reqs, f)
		}
	}
	if len(reqs) != 2 || reqs[1].at-reqs[0].at != reqTimeout {
		t.Fatalf("REQs %d, retry after %v, want after %v", len(reqs), reqs[len(reqs)-1].at-reqs[0].at, reqTimeout)
	}
	if !bytes.Equal(reqs[0].mad, reqs[1].mad) {
		t.Fatal("retried REQ differs")
	}
	if a.cm.Counters().TxRetries[AttrIndex(AttrREQ)] != 1 || a.cm.State(id) != StateEstablished {
		t.Fatalf("A %+v %v", a.cm.Counters(), a.cm.State(id))
	}
}

func TestLostREPRetriedByTimer(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrREP, 1)
	p := connectParams(b, 0x11)
	p.RemoteCMResponseTimeout = 18 // A waits longer than B's REP timer
	id, err := a.cm.Connect(nw.now, p)
	if err != nil {
		t.Fatal(err)
	}
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
	if c := b.cm.Counters(); c.TxRetries[AttrIndex(AttrREP)] != 1 || nw.sentOf(a, AttrREQ) != 1 {
		t.Fatalf("B REP retries %d, A REQs %d", c.TxRetries[AttrIndex(AttrREP)], nw.sentOf(a, AttrREQ))
	}
	if a.cm.State(id) != StateEstablished || b.cm.State(b.events[0].ID) != StateEstablished {
		t.Fatal("not established")
	}
}

func TestLostREPResentOnDuplicateREQ(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrREP, 1)
	p := connectParams(b, 0x11)
	p.LocalCMResponseTimeout = 20 // B's REP timer is longer than A's REQ timer
	if _, err := a.cm.Connect(nw.now, p); err != nil {
		t.Fatal(err)
	}
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
	cb := b.cm.Counters()
	if cb.RxDuplicates[AttrIndex(AttrREQ)] != 1 || cb.TxRetries[AttrIndex(AttrREP)] != 0 || nw.sentOf(b, AttrREP) != 2 ||
		b.cm.Conns() != 1 {
		t.Fatalf("B dup REQs %d, REP retries %d, REPs %d, conns %d", cb.RxDuplicates[AttrIndex(AttrREQ)],
			cb.TxRetries[AttrIndex(AttrREP)], nw.sentOf(b, AttrREP), b.cm.Conns())
	}
}

func TestLostRTURetried(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrRTU, 1)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
	ca, cb := a.cm.Counters(), b.cm.Counters()
	if cb.TxRetries[AttrIndex(AttrREP)] != 1 || ca.RxDuplicates[AttrIndex(AttrREP)] != 1 || nw.sentOf(a, AttrRTU) != 2 {
		t.Fatalf("B REP retries %d, A dup REPs %d, RTUs %d", cb.TxRetries[AttrIndex(AttrREP)],
			ca.RxDuplicates[AttrIndex(AttrREP)], nw.sentOf(a, AttrRTU))
	}
	if a.cm.State(id) != StateEstablished || b.cm.State(b.events[0].ID) != StateEstablished {
		t.Fatal("not established")
	}
}

func TestImplicitEstablishment(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = func(f *flight) bool { return f.attr == AttrRTU }
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(reqTimeout / 2) // REQ, REP, RTU (lost): B waits in REP_SENT
	bid := b.events[0].ID
	if b.cm.State(bid) != StateREPSent {
		t.Fatalf("B %v", b.cm.State(bid))
	}
	// A's first SEND arrives on B's QP: the daemon tells the CM.
	if err := b.cm.Established(nw.now, bid); err != nil {
		t.Fatal(err)
	}
	b.drain()
	nw.runFor(10 * time.Second)
	wantTypes(t, "B", b, EventREQReceived, EventUserEstablished)
	if nw.sentOf(b, AttrREP) != 1 || b.cm.State(bid) != StateEstablished {
		t.Fatalf("REPs %d, state %v", nw.sentOf(b, AttrREP), b.cm.State(bid))
	}
	if err := b.cm.Established(nw.now, 12345); err == nil {
		t.Fatal("Established on an unknown ID")
	}
}

func TestDuplicateREQOneConnection(t *testing.T) {
	nw, a, b := pair(t)
	b.accept = false
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	req := nw.sent[0]
	for range 3 {
		b.cm.HandleMAD(nw.now, req.from, req.mad)
		b.drain()
	}
	wantTypes(t, "B", b, EventREQReceived)
	if b.cm.Conns() != 1 || b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)] != 3 || len(nw.sent) != 1 {
		t.Fatalf("conns %d, dups %d, sent %d", b.cm.Conns(), b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)], len(nw.sent))
	}
	// The same comm ID from another CA is another connection.
	other := append([]byte(nil), req.mad...)
	other[HeaderSize+16] ^= 1 // local CA GUID
	b.cm.HandleMAD(nw.now, req.from, other)
	b.drain()
	if b.cm.Conns() != 2 {
		t.Fatalf("conns %d", b.cm.Conns())
	}
}

func TestDisconnectLostDREQ(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrDREQ, 1)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	if err := a.cm.Disconnect(nw.now, id, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived, EventDREPReceived, EventTimewaitExit)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREQReceived, EventTimewaitExit)
	if a.cm.Counters().TxRetries[AttrIndex(AttrDREQ)] != 1 || len(a.qpErr) != 1 || len(b.qpErr) != 1 {
		t.Fatalf("DREQ retries %d, QP errors %v %v", a.cm.Counters().TxRetries[AttrIndex(AttrDREQ)], a.qpErr, b.qpErr)
	}
}

func TestDisconnectLostDREP(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = dropNth(AttrDREP, 1)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	// B disconnects this time.
	if err := b.cm.Disconnect(nw.now, b.events[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived, EventDREQReceived, EventTimewaitExit)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREPReceived, EventTimewaitExit)
	ca := a.cm.Counters()
	if b.cm.Counters().TxRetries[AttrIndex(AttrDREQ)] != 1 || ca.RxDuplicates[AttrIndex(AttrDREQ)] != 1 ||
		nw.sentOf(a, AttrDREP) != 2 || a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatalf("DREQ retries %d, A dup DREQs %d, DREPs %d", b.cm.Counters().TxRetries[AttrIndex(AttrDREQ)],
			ca.RxDuplicates[AttrIndex(AttrDREQ)], nw.sentOf(a, AttrDREP))
	}
	if !slices.Equal(a.qpErr, []uint32{0x11}) || !slices.Equal(b.qpErr, []uint32{0x211}) {
		t.Fatalf("QP errors %v %v", a.qpErr, b.qpErr)
	}
	_ = id
}

func TestSimultaneousDisconnect(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	if err := a.cm.Disconnect(nw.now, id, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.cm.Disconnect(nw.now, b.events[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(10 * time.Second)
	wantTypes(t, "A", a, EventREPReceived, EventDREQReceived, EventTimewaitExit)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREQReceived, EventTimewaitExit)
	if len(a.qpErr) != 1 || len(b.qpErr) != 1 || a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatalf("QP errors %v %v, conns %d %d", a.qpErr, b.qpErr, a.cm.Conns(), b.cm.Conns())
	}
}

func TestREQRetriesExhausted(t *testing.T) {
	nw, a, b := pair(t)
	nw.drop = func(f *flight) bool { return f.attr == AttrREQ }
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventREQError)
	if a.events[0].ID != id || a.cm.Conns() != 0 || nw.sentOf(a, AttrREQ) != testRetries+1 {
		t.Fatalf("event %+v conns %d REQs %d", a.events[0], a.cm.Conns(), nw.sentOf(a, AttrREQ))
	}
	// The timeout REJ, with the CA GUID as ARI, went out when the last try
	// expired: (retries+1) timeouts after the first REQ.
	last := nw.sent[len(nw.sent)-1]
	var rej REJ
	if _, err := Unmarshal(last.mad, &rej); err != nil || rej.Reason != RejTimeout ||
		!bytes.Equal(rej.ARIBytes(), guidARI(0x0202c9fffe000001)) || last.at != (testRetries+1)*reqTimeout+nw.latency {
		t.Fatalf("last MAD %+v at %v: %v", rej, last.at, err)
	}
	if b.cm.Counters().RxUnmatched != 1 {
		t.Fatalf("B counters %+v", b.cm.Counters())
	}
}

func TestREQTimeoutREJReachesPassive(t *testing.T) {
	// B holds the REQ without answering; A gives up and its timeout REJ
	// clears B's connection.
	nw, a, b := pair(t)
	b.accept = false
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventREQError)
	wantTypes(t, "B", b, EventREQReceived, EventREJReceived)
	if r := b.events[1].REJ; r.Reason != RejTimeout || b.events[1].ID != b.events[0].ID || b.cm.Conns() != 0 {
		t.Fatalf("B REJ %+v conns %d", r, b.cm.Conns())
	}
	if b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)] != testRetries {
		t.Fatalf("B dup REQs %d", b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)])
	}
}

func TestREPRetriesExhausted(t *testing.T) {
	nw, a, b := pair(t)
	a.rtu = false // A never sends its RTU
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Minute)
	wantTypes(t, "B", b, EventREQReceived, EventREPError, EventTimewaitExit)
	// A's REQ is not retried once the REP arrived: only B's timer resends.
	if b.cm.Counters().TxRetries[AttrIndex(AttrREP)] != testRetries || nw.sentOf(b, AttrREP) != testRetries+1 {
		t.Fatalf("B REP retries %d, REPs %d", b.cm.Counters().TxRetries[AttrIndex(AttrREP)], nw.sentOf(b, AttrREP))
	}
	// A, still in REP_RCVD, is told by B's timeout REJ and waits out
	// timewait, as Linux's cm_rej_handler.
	wantTypes(t, "A", a, EventREPReceived, EventREJReceived, EventTimewaitExit)
	if a.events[1].REJ.Reason != RejTimeout || a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatalf("A REJ %+v, conns %d %d", a.events[1].REJ, a.cm.Conns(), b.cm.Conns())
	}
}

func TestDREQRetriesExhausted(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	nw.drop = func(f *flight) bool { return f.attr == AttrDREQ }
	if err := a.cm.Disconnect(nw.now, id, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventREPReceived, EventDREQError, EventTimewaitExit)
	if nw.sentOf(a, AttrDREQ) != testRetries+1 || a.cm.Conns() != 0 || len(a.qpErr) != 1 {
		t.Fatalf("DREQs %d conns %d", nw.sentOf(a, AttrDREQ), a.cm.Conns())
	}
}

func TestStaleDREQAnswered(t *testing.T) {
	nw, a, b := pair(t)
	dreq := DREQ{LocalCommID: 77, RemoteCommID: 88, RemoteQPN: 5}
	mad := make([]byte, MADSize)
	if err := Marshal(mad, 0x42, &dreq); err != nil {
		t.Fatal(err)
	}
	b.cm.HandleMAD(nw.now, a.peer(), mad)
	nw.runFor(time.Second)
	if b.cm.Counters().StaleDREQ != 1 || len(nw.sent) != 1 {
		t.Fatalf("counters %+v sent %d", b.cm.Counters(), len(nw.sent))
	}
	var drep DREP
	h, err := Unmarshal(nw.sent[0].mad, &drep)
	if err != nil || h.TID != 0x42 || drep.LocalCommID != 88 || drep.RemoteCommID != 77 || nw.sent[0].to != a.peer() {
		t.Fatalf("DREP %+v %+v %v", h, drep, err)
	}
	if a.cm.Counters().RxUnmatched != 1 || len(a.events) != 0 || len(b.qpErr) != 0 {
		t.Fatal("stale DREP acted on")
	}
}

func TestMalformedMADsCountedAndDropped(t *testing.T) {
	nw, a, b := pair(t)
	good := make([]byte, MADSize)
	req := goldenREQ()
	req.ServiceID = testService
	if err := Marshal(good, 1, &req); err != nil {
		t.Fatal(err)
	}
	mod := func(i int, v byte) []byte { m := append([]byte(nil), good...); m[i] = v; return m }
	lap := mod(17, byte(AttrLAP))
	inputs := [][]byte{good[:100], nil, append(append([]byte(nil), good...), 0), mod(0, 2), mod(1, 0x04),
		mod(2, 1), mod(3, 0x83), mod(17, 0x1f), mod(17, 0x0f), lap}
	for _, in := range inputs {
		b.cm.HandleMAD(nw.now, a.peer(), in)
	}
	b.drain()
	c := b.cm.Counters()
	got := [...]uint64{c.RxBadLength, c.RxBadBaseVersion, c.RxBadClass, c.RxBadClassVersion, c.RxBadMethod,
		c.RxUnknownAttr, c.RxUnsupported}
	if got != [...]uint64{3, 1, 1, 1, 1, 2, 1} {
		t.Fatalf("counters %v (%+v)", got, c)
	}
	if len(b.events) != 0 || len(nw.sent) != 0 || b.cm.Conns() != 0 {
		t.Fatalf("events %v sent %d", b.eventTypes(), len(nw.sent))
	}
	// An RTU, DREP, REP or MRA for no connection is counted, not acted on.
	for _, m := range []Message{&RTU{RemoteCommID: 9}, &DREP{RemoteCommID: 9}, &REP{RemoteCommID: 9},
		&MRA{RemoteCommID: 9}, &REJ{RemoteCommID: 9}, &SIDRREP{RequestID: 9}} {
		if err := Marshal(good, 2, m); err != nil {
			t.Fatal(err)
		}
		b.cm.HandleMAD(nw.now, a.peer(), good)
	}
	if c := b.cm.Counters(); c.RxUnmatched != 6 || len(nw.sent) != 0 {
		t.Fatalf("unmatched %d sent %d", c.RxUnmatched, len(nw.sent))
	}
}

func TestMRAExtendsWait(t *testing.T) {
	nw, a, b := pair(t)
	b.accept = false
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	bid := b.events[0].ID
	const svc = 22 // 17 s
	if err := b.cm.SendMRA(nw.now, bid, svc, []byte("wait")); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond)
	wantTypes(t, "A", a, EventMRAReceived)
	if a.events[0].MRA.ServiceTimeout != svc || a.cm.State(id) != StateMRAREQRcvd {
		t.Fatalf("MRA %+v state %v", a.events[0].MRA, a.cm.State(id))
	}
	// Well past A's REQ timeout, within the MRA's: no REQ retry.
	nw.runFor(IBATime(svc) - time.Second)
	if nw.sentOf(a, AttrREQ) != 1 {
		t.Fatalf("REQs %d during the MRA wait", nw.sentOf(a, AttrREQ))
	}
	// The wait ran out: A retries the REQ, B (MRA_REQ_SENT) answers it with
	// the MRA again.
	nw.runFor(2 * time.Second)
	if nw.sentOf(a, AttrREQ) != 2 || nw.sentOf(b, AttrMRA) != 2 || b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)] != 1 {
		t.Fatalf("REQs %d, MRAs %d", nw.sentOf(a, AttrREQ), nw.sentOf(b, AttrMRA))
	}
	if a.cm.Counters().RxDuplicates[AttrIndex(AttrMRA)] != 1 {
		t.Fatalf("A dup MRAs %d", a.cm.Counters().RxDuplicates[AttrIndex(AttrMRA)])
	}
	if err := b.cm.Accept(nw.now, bid, AcceptParams{QPN: 0x300}); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventMRAReceived, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
}

func TestListenerRejects(t *testing.T) {
	nw, a, b := pair(t)
	b.accept = false
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	bid := b.events[0].ID
	if err := b.cm.Reject(nw.now, bid, RejConsumerDefined, nil, []byte("go away")); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREJReceived)
	e := a.events[0]
	if e.ID != id || e.REJ.Reason != RejConsumerDefined || e.REJ.MessageRejected != MsgREQ ||
		e.REJ.LocalCommID != bid || !bytes.HasPrefix(e.REJ.PrivateData[:], []byte("go away")) {
		t.Fatalf("REJ %+v", e.REJ)
	}
	if a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatal("connections left")
	}
	if err := b.cm.Accept(nw.now, bid, AcceptParams{}); err == nil {
		t.Fatal("Accept after Reject")
	}
}

func TestAPIStateErrors(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	if err := a.cm.Disconnect(nw.now, id, nil); err == nil {
		t.Fatal("Disconnect in REQ_SENT")
	}
	if err := a.cm.SendRTU(nw.now, id, nil); err == nil {
		t.Fatal("RTU in REQ_SENT")
	}
	if err := a.cm.Accept(nw.now, id, AcceptParams{}); err == nil {
		t.Fatal("Accept on the active side")
	}
	p := connectParams(b, 1)
	p.PrivateData = make([]byte, REQPrivateDataSize+1)
	if _, err := a.cm.Connect(nw.now, p); err == nil {
		t.Fatal("93 bytes of REQ private data")
	}
	p = connectParams(b, 1<<24)
	if _, err := a.cm.Connect(nw.now, p); err == nil {
		t.Fatal("25-bit QPN")
	}
	if err := b.cm.Listen(testService, 0); err == nil {
		t.Fatal("listened twice")
	}
	if err := b.cm.Unlisten(testService); err != nil {
		t.Fatal(err)
	}
	if err := b.cm.Unlisten(testService); err == nil {
		t.Fatal("unlistened twice")
	}
}

func TestManyConnectionsLossy(t *testing.T) {
	nw := newFakeNet(t, 42)
	nw.loss = 0.10
	a := nw.add("198.18.0.1", 0x0202c9fffe000001)
	c := nw.add("198.18.0.3", 0x0202c9fffe000003)
	b := nw.add("198.18.0.2", 0x0202c9fffe000002)
	a.rtu, c.rtu, b.accept = true, true, true
	if err := b.cm.Listen(testService, 0); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var ids [2][]uint32
	for i := range n {
		for j, from := range []*node{a, c} {
			p := connectParams(b, uint32(0x100+i))
			p.MaxCMRetries = 15
			id, err := from.cm.Connect(nw.now, p)
			if err != nil {
				t.Fatal(err)
			}
			ids[j] = append(ids[j], id)
		}
		nw.runFor(time.Millisecond) // staggered starts
	}
	nw.runFor(5 * time.Minute)
	for j, from := range []*node{a, c} {
		for _, id := range ids[j] {
			if s := from.cm.State(id); s != StateEstablished {
				t.Fatalf("%v conn %d: %v (events %v)", from.addr, id, s, from.eventTypes())
			}
		}
	}
	est := 0
	for _, e := range b.events {
		if e.Type == EventRTUReceived {
			est++
		}
	}
	if len(b.eventsOf(EventREQReceived)) != 2*n || est != 2*n || b.cm.Conns() != 2*n {
		t.Fatalf("B: %d REQs, %d established, %d conns", len(b.eventsOf(EventREQReceived)), est, b.cm.Conns())
	}
	ctr := b.cm.Counters()
	if ctr.TxRetries[AttrIndex(AttrREP)]+ctr.RxDuplicates[AttrIndex(AttrREQ)] == 0 {
		t.Fatal("10% loss caused no retry")
	}
	// Tear down half from each side.
	for j, from := range []*node{a, c} {
		for i, id := range ids[j] {
			if i%2 == 0 {
				if err := from.cm.Disconnect(nw.now, id, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, e := range b.eventsOf(EventREQReceived) {
		if e.REQ.LocalQPN%2 == 1 {
			if err := b.cm.Disconnect(nw.now, e.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	nw.runFor(10 * time.Minute)
	for _, x := range []*node{a, b, c} {
		if x.cm.Conns() != 0 {
			t.Fatalf("%v: %d conns left", x.addr, x.cm.Conns())
		}
	}
	want := map[EventType]int{EventDREPReceived: n, EventDREQReceived: n, EventTimewaitExit: 2 * n}
	for _, x := range []*node{a, c} {
		got := map[EventType]int{}
		for _, e := range x.events[n:] {
			got[e.Type]++
		}
		if fmt.Sprint(got) != fmt.Sprint(map[EventType]int{EventDREPReceived: n / 2, EventDREQReceived: n / 2, EventTimewaitExit: n}) {
			t.Fatalf("%v teardown events %v", x.addr, got)
		}
		if len(x.qpErr) != n {
			t.Fatalf("%v: %d QP error calls", x.addr, len(x.qpErr))
		}
	}
	got := map[EventType]int{}
	for _, e := range b.events[4*n:] {
		got[e.Type]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(b.qpErr) != 2*n {
		t.Fatalf("B teardown events %v, QP errors %d", got, len(b.qpErr))
	}
}

func TestSIDR(t *testing.T) {
	nw, a, b := pair(t)
	udp := ServiceID(PortSpaceUDP, 7471)
	if err := b.cm.Listen(udp, 0); err != nil {
		t.Fatal(err)
	}
	nw.drop = dropNth(AttrSIDRREQ, 1)
	id, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout,
		MaxCMRetries: 2, PrivateData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	nw.runFor(reqTimeout + time.Millisecond) // the first SIDR_REQ lost, the retry answered

	wantTypes(t, "B", b, EventSIDRREQReceived)
	e := b.events[0]
	if e.SIDRREQ.ServiceID != udp || e.SIDRREQ.PKey != 0xffff || !bytes.HasPrefix(e.SIDRREQ.PrivateData[:], []byte("hello")) {
		t.Fatalf("SIDR_REQ %+v", e.SIDRREQ)
	}
	if err := b.cm.SIDRReply(nw.now, e.ID, SIDRSuccess, 0x345, 0x1234567, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventSIDRREPReceived)
	r := a.events[0].SIDRREP
	if a.events[0].ID != id || r.Status != SIDRSuccess || r.QPN != 0x345 || r.QKey != 0x1234567 || r.ServiceID != udp {
		t.Fatalf("SIDR_REP %+v", r)
	}
	if a.cm.Counters().TxRetries[AttrIndex(AttrSIDRREQ)] != 1 {
		t.Fatal("lost SIDR_REQ not retried")
	}
	// Nobody listens: status unsupported. All lost: error after retries.
	a.events = nil
	if _, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp + 1, Timeout: testRespTimeout}); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	if wantTypes(t, "A", a, EventSIDRREPReceived); a.events[0].SIDRREP.Status != SIDRUnsupported {
		t.Fatalf("status %d", a.events[0].SIDRREP.Status)
	}
	a.events = nil
	nw.drop = func(f *flight) bool { return f.attr == AttrSIDRREQ }
	if _, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout, MaxCMRetries: 2}); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventSIDRREQError)
}

func TestDuplicateREQInTimewaitGetsStaleREJ(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	if err := a.cm.Disconnect(nw.now, id, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond) // both in timewait
	bid := b.events[0].ID
	if b.cm.State(bid) != StateTimewait {
		t.Fatalf("B %v", b.cm.State(bid))
	}
	sent := len(nw.sent)
	b.cm.HandleMAD(nw.now, a.peer(), nw.sent[0].mad) // the old REQ again
	if len(nw.sent) != sent+1 {
		t.Fatalf("%d MADs sent for the stale REQ", len(nw.sent)-sent)
	}
	var rej REJ
	if _, err := Unmarshal(nw.sent[sent].mad, &rej); err != nil || rej.Reason != RejStaleConn ||
		rej.RemoteCommID != id || rej.LocalCommID != bid {
		t.Fatalf("%+v %v", rej, err)
	}
	if b.cm.Conns() != 1 || b.cm.Counters().RxDuplicates[AttrIndex(AttrREQ)] != 1 {
		t.Fatal("stale REQ made a connection")
	}
}

func TestActiveRejectsREP(t *testing.T) {
	nw, a, b := pair(t)
	a.rtu = false
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	wantTypes(t, "A", a, EventREPReceived)
	if err := a.cm.Reject(nw.now, id, RejConsumerDefined, nil, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Second)
	wantTypes(t, "B", b, EventREQReceived, EventREJReceived)
	if r := b.events[1].REJ; r.MessageRejected != MsgREP || r.Reason != RejConsumerDefined || r.LocalCommID != id {
		t.Fatalf("REJ %+v", r)
	}
	if a.cm.Conns() != 0 || b.cm.Conns() != 0 || nw.sentOf(b, AttrREP) != 1 {
		t.Fatalf("conns %d %d, REPs %d", a.cm.Conns(), b.cm.Conns(), nw.sentOf(b, AttrREP))
	}
}

func TestDestroyForgets(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	if err := a.cm.Destroy(id); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.cm.NextDeadline(); ok || a.cm.Conns() != 0 {
		t.Fatal("destroyed connection keeps a timer or an entry")
	}
	if err := a.cm.Destroy(id); err == nil {
		t.Fatal("destroyed twice")
	}
	nw.runFor(time.Second)
	// B's REP (first and retries) and its timeout REJ find no connection
	// on A: counted, dropped.
	if a.cm.Counters().RxUnmatched != testRetries+2 || len(a.events) != 0 {
		t.Fatalf("A %+v events %v", a.cm.Counters(), a.eventTypes())
	}
}

func TestDelayedMRASentOnDuplicateREQ(t *testing.T) {
	nw, a, b := pair(t)
	b.accept = false
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	bid := b.events[0].ID
	if err := b.cm.SendMRA(nw.now, bid, MRAFlagDelay|22, nil); err != nil {
		t.Fatal(err)
	}
	if nw.sentOf(b, AttrMRA) != 0 {
		t.Fatal("delayed MRA sent at once")
	}
	nw.runFor(reqTimeout) // A's REQ retry
	if nw.sentOf(a, AttrREQ) != 2 || nw.sentOf(b, AttrMRA) != 1 {
		t.Fatalf("REQs %d MRAs %d", nw.sentOf(a, AttrREQ), nw.sentOf(b, AttrMRA))
	}
	var mra MRA
	if _, err := Unmarshal(nw.sent[len(nw.sent)-1].mad, &mra); err != nil || mra.ServiceTimeout != 22 ||
		mra.MessageMRAed != MsgREQ || mra.RemoteCommID != id || mra.LocalCommID != bid {
		t.Fatalf("MRA %+v %v", mra, err)
	}
	wantTypes(t, "A", a, EventMRAReceived)
}

func TestREJWhenEstablishedEntersTimewait(t *testing.T) {
	// All RTUs lost and no data: B gives up on its REP and rejects; A,
	// which thought itself established, learns it from the REJ.
	nw, a, b := pair(t)
	nw.drop = func(f *flight) bool { return f.attr == AttrRTU }
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventREPReceived, EventREJReceived, EventTimewaitExit)
	wantTypes(t, "B", b, EventREQReceived, EventREPError, EventTimewaitExit)
	if a.events[1].ID != id || a.events[1].REJ.Reason != RejTimeout || a.cm.Conns() != 0 || b.cm.Conns() != 0 {
		t.Fatalf("A REJ %+v conns %d %d", a.events[1].REJ, a.cm.Conns(), b.cm.Conns())
	}
}

func TestStaleConnectionREQ(t *testing.T) {
	// A loses its connection state (a restart) and connects again from
	// the same QP: B rejects the REQ as stale and disconnects the old
	// connection, whose DREQ A answers although it knows nothing of it.
	nw, a, b := pair(t)
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	bid := b.events[0].ID
	a2 := New(Config{CAGUID: 0x0202c9fffe000001, PacketLifeTime: testPLT, Seed: 99}, nodeTransport{a})
	a.cm = a2
	a.events = nil
	id2 := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Minute)
	// A stale-connection REJ puts the REQ's connection in timewait.
	wantTypes(t, "A", a, EventREJReceived, EventTimewaitExit)
	if r := a.events[0].REJ; a.events[0].ID != id2 || r.Reason != RejStaleConn || r.MessageRejected != MsgREQ {
		t.Fatalf("REJ %+v", r)
	}
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREPReceived, EventTimewaitExit)
	if b.events[2].ID != bid || !slices.Equal(b.qpErr, []uint32{0x211}) || b.cm.Counters().RejStaleConn != 1 ||
		a2.Counters().StaleDREQ != 1 || b.cm.Conns() != 0 {
		t.Fatalf("B %+v QP errors %v, A stale DREQs %d", b.cm.Counters(), b.qpErr, a2.Counters().StaleDREQ)
	}
	// With the old connection gone, the same QP connects.
	a.events, b.events = nil, nil
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	wantTypes(t, "A", a, EventREPReceived)
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived)
}

func TestReconnectFromSameQPDuringTimewait(t *testing.T) {
	// The old connection from QP 0x11 is in timewait on B when A connects
	// from QP 0x11 again: a new connection, whose QP entry the old one's
	// timewait exit must leave in place for the stale check.
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second)
	if err := a.cm.Disconnect(nw.now, id, nil); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond)
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Second) // the old timewait ends meanwhile
	wantTypes(t, "B", b, EventREQReceived, EventRTUReceived, EventDREQReceived, EventREQReceived,
		EventRTUReceived, EventTimewaitExit)
	if b.cm.Conns() != 1 || len(b.cm.remoteQPN) != 1 {
		t.Fatalf("B conns %d, QP keys %d", b.cm.Conns(), len(b.cm.remoteQPN))
	}
	// A third REQ from the same QP is stale against the live second one.
	a.events = nil
	a.cm = New(Config{CAGUID: 0x0202c9fffe000001, PacketLifeTime: testPLT, Seed: 5}, nodeTransport{a})
	mustConnect(t, nw, a, b, 0x11)
	nw.runFor(time.Millisecond)
	if len(a.events) != 1 || a.events[0].REJ == nil || a.events[0].REJ.Reason != RejStaleConn {
		t.Fatalf("A events %v", a.eventTypes())
	}
}

func TestInfo(t *testing.T) {
	nw, a, b := pair(t)
	id := mustConnect(t, nw, a, b, 0x11)
	if in, ok := a.cm.Info(id); !ok || in != (ConnInfo{ID: id, State: StateREQSent, Active: true, Peer: b.peer(),
		ServiceID: testService, LocalQPN: 0x11}) {
		t.Fatalf("A before REP: %+v %v", in, ok)
	}
	nw.runFor(time.Second)
	bid := b.events[0].ID
	want := ConnInfo{ID: id, State: StateEstablished, Active: true, Peer: b.peer(), ServiceID: testService,
		LocalQPN: 0x11, RemoteQPN: 0x211, RemoteCommID: bid, RemoteCAGUID: 0x0202c9fffe000002}
	if in, _ := a.cm.Info(id); in != want {
		t.Fatalf("A %+v", in)
	}
	want = ConnInfo{ID: bid, State: StateEstablished, Peer: a.peer(), ServiceID: testService,
		LocalQPN: 0x211, RemoteQPN: 0x11, RemoteCommID: id, RemoteCAGUID: 0x0202c9fffe000001}
	if in, _ := b.cm.Info(bid); in != want {
		t.Fatalf("B %+v", in)
	}
	if _, ok := b.cm.Info(bid + 1); ok {
		t.Fatal("Info of an unknown ID")
	}
}
