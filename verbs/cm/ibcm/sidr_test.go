package ibcm

import (
	"bytes"
	"testing"
	"time"
)

// SIDR_REQ and SIDR_REP golden bytes: every field at its IBA offset
// (tables 119 and 120; the MAD's data starts at byte 24).
func TestSIDRGolden(t *testing.T) {
	req := SIDRREQ{RequestID: 0x01020304, PKey: 0xffff, ServiceID: 0x0000000001111b2e}
	copy(req.PrivateData[:], "hi")
	var mad [MADSize]byte
	if err := Marshal(mad[:], 0x1122334455667788, &req); err != nil {
		t.Fatal(err)
	}
	want := []byte{0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x01, 0x11, 0x1b, 0x2e, 'h', 'i'}
	if !bytes.Equal(mad[24:24+len(want)], want) || mad[16] != 0 || mad[17] != 0x17 {
		t.Fatalf("SIDR_REQ % x", mad[:24+len(want)])
	}
	var back SIDRREQ
	if _, err := Unmarshal(mad[:], &back); err != nil || back != req {
		t.Fatalf("SIDR_REQ back %+v %v", back, err)
	}
	rep := SIDRREP{RequestID: 0x01020304, Status: SIDRSuccess, QPN: 0xabcdef, ServiceID: 0x0000000001111b2e, QKey: 0x01234567}
	if err := Marshal(mad[:], 0x1122334455667788, &rep); err != nil {
		t.Fatal(err)
	}
	want = []byte{0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0, 0xab, 0xcd, 0xef, 0, 0, 0, 0, 0, 0x01, 0x11, 0x1b, 0x2e, 0x01, 0x23, 0x45, 0x67}
	if !bytes.Equal(mad[24:24+len(want)], want) || mad[17] != 0x18 {
		t.Fatalf("SIDR_REP % x", mad[:24+len(want)])
	}
	var rback SIDRREP
	if _, err := Unmarshal(mad[:], &rback); err != nil || rback != rep {
		t.Fatalf("SIDR_REP back %+v %v", rback, err)
	}
}

// A lost SIDR_REP: the peer's retried SIDR_REQ gets the same SIDR_REP
// again, and the passive side's consumer sees one request only.
func TestSIDRLostREPResent(t *testing.T) {
	nw, a, b := pair(t)
	udp := ServiceID(PortSpaceUDP, 7174)
	if err := b.cm.Listen(udp, 0); err != nil {
		t.Fatal(err)
	}
	nw.drop = dropNth(AttrSIDRREP, 1)
	id, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout, MaxCMRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond)
	wantTypes(t, "B", b, EventSIDRREQReceived)
	if b.cm.State(b.events[0].ID) != StateSIDRREQRcvd || a.cm.State(id) != StateSIDRREQSent {
		t.Fatalf("states %v %v", b.cm.State(b.events[0].ID), a.cm.State(id))
	}
	if err := b.cm.SIDRReply(nw.now, b.events[0].ID, SIDRSuccess, 0x77, 0x01234567, []byte("rep")); err != nil {
		t.Fatal(err)
	}
	if b.cm.State(b.events[0].ID) != StateIdle {
		t.Fatal("answered SIDR request still known")
	}
	nw.runFor(reqTimeout + time.Millisecond)
	wantTypes(t, "B", b, EventSIDRREQReceived) // no second request
	wantTypes(t, "A", a, EventSIDRREPReceived)
	if r := a.events[0].SIDRREP; a.events[0].ID != id || r.QPN != 0x77 || r.QKey != 0x01234567 || !bytes.HasPrefix(r.PrivateData[:], []byte("rep")) {
		t.Fatalf("SIDR_REP %+v", r)
	}
	var attrs []uint16
	for _, f := range nw.sent {
		attrs = append(attrs, f.attr)
	}
	if want := []uint16{AttrSIDRREQ, AttrSIDRREP, AttrSIDRREQ, AttrSIDRREP}; !bytes.Equal(u16s(attrs), u16s(want)) {
		t.Fatalf("on the wire %x, want %x", attrs, want)
	}
	bc := b.cm.Counters()
	if bc.RxDuplicates[AttrIndex(AttrSIDRREQ)] != 1 || bc.TxRetries[AttrIndex(AttrSIDRREP)] != 1 {
		t.Fatalf("B counters %+v", bc)
	}
	// A new SIDR_REQ that reuses the request ID (a requester's CM
	// started again) is a new request, not a retry of the answered one.
	var mad [MADSize]byte
	if err := Marshal(mad[:], 0x77, &SIDRREQ{RequestID: id, PKey: 0xffff, ServiceID: udp}); err != nil {
		t.Fatal(err)
	}
	b.cm.HandleMAD(nw.now, a.peer(), mad[:])
	b.drain()
	wantTypes(t, "B", b, EventSIDRREQReceived, EventSIDRREQReceived)
	if err := b.cm.SIDRCancel(nw.now, b.events[1].ID); err != nil {
		t.Fatal(err)
	}
	// Long after rdma_cm's retry window the answers are forgotten.
	nw.runFor(sidrKeep + time.Second)
	b.cm.sidrDone.expire(nw.now)
	if len(b.cm.sidrDone.fifo) != 0 || len(b.cm.sidrDone.byKey) != 0 {
		t.Fatal("SIDR_REP kept past its window")
	}
}

func u16s(v []uint16) []byte {
	var b []byte
	for _, x := range v {
		b = append(b, byte(x>>8), byte(x))
	}
	return b
}

// SIDRCancel: an outstanding SIDR_REQ stops (no retry, no event); a
// received one unanswered gets status SIDRReject.
func TestSIDRCancel(t *testing.T) {
	nw, a, b := pair(t)
	udp := ServiceID(PortSpaceUDP, 7174)
	if err := b.cm.Listen(udp, 0); err != nil {
		t.Fatal(err)
	}
	nw.drop = func(f *flight) bool { return f.attr == AttrSIDRREQ }
	id, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout, MaxCMRetries: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cm.SIDRCancel(nw.now, id); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Minute)
	if len(nw.sent) != 1 || len(a.events) != 0 || a.cm.State(id) != StateIdle {
		t.Fatalf("sent %d events %v", len(nw.sent), a.eventTypes())
	}
	if err := a.cm.SIDRCancel(nw.now, id); err == nil {
		t.Fatal("second cancel succeeded")
	}
	nw.drop = nil
	id, err = a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout, MaxCMRetries: 5})
	if err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond)
	wantTypes(t, "B", b, EventSIDRREQReceived)
	if err := b.cm.SIDRCancel(nw.now, b.events[0].ID); err != nil {
		t.Fatal(err)
	}
	nw.runFor(time.Millisecond)
	if wantTypes(t, "A", a, EventSIDRREPReceived); a.events[0].ID != id || a.events[0].SIDRREP.Status != SIDRReject {
		t.Fatalf("SIDR_REP %+v", a.events[0].SIDRREP)
	}
}

// Malformed or stray SIDR MADs are counted and dropped: a truncated one,
// a SIDR_REP for no request, a SIDR_REP from another address than the
// request went to.
func TestSIDRMalformedCountedAndDropped(t *testing.T) {
	nw, a, b := pair(t)
	c := nw.add("198.18.0.3", 3)
	udp := ServiceID(PortSpaceUDP, 7174)
	var mad [MADSize]byte
	if err := Marshal(mad[:], 5, &SIDRREQ{RequestID: 1, PKey: 0xffff, ServiceID: udp}); err != nil {
		t.Fatal(err)
	}
	b.cm.HandleMAD(nw.now, a.peer(), mad[:100])
	if err := Marshal(mad[:], 5, &SIDRREP{RequestID: 42, ServiceID: udp}); err != nil {
		t.Fatal(err)
	}
	b.cm.HandleMAD(nw.now, a.peer(), mad[:])
	if err := b.cm.Listen(udp, 0); err != nil {
		t.Fatal(err)
	}
	nw.drop = func(f *flight) bool { return f.attr == AttrSIDRREQ }
	id, err := a.cm.SIDRResolve(nw.now, SIDRParams{Peer: b.peer(), ServiceID: udp, Timeout: testRespTimeout, MaxCMRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := Marshal(mad[:], 5, &SIDRREP{RequestID: id, ServiceID: udp, QPN: 9}); err != nil {
		t.Fatal(err)
	}
	a.cm.HandleMAD(nw.now, c.peer(), mad[:]) // not from B
	b.drain()
	a.drain()
	bc, ac := b.cm.Counters(), a.cm.Counters()
	if bc.RxBadLength != 1 || bc.RxUnmatched != 1 || ac.RxUnmatched != 1 {
		t.Fatalf("counters B %+v A %+v", bc, ac)
	}
	if len(b.events) != 0 || len(a.events) != 0 || a.cm.State(id) != StateSIDRREQSent {
		t.Fatalf("events A %v B %v", a.eventTypes(), b.eventTypes())
	}
	nw.runFor(time.Minute)
	wantTypes(t, "A", a, EventSIDRREQError)
}
