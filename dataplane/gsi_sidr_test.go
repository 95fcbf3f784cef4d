package dataplane

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

const sidrTestService = 0x0000000001110000 | 7174 // rdma_cm's UDP port space, port 7174

// sidrRun resolves sidrTestService from A to B (B listening, answering
// every request with QPN 0x55 and rdma_cm's UDP Q_Key when reply is
// set) and returns both owners' events once A's request ended.
func sidrRun(t *testing.T, p *cmPair, listen, reply bool) (evA, evB []CMEvent) {
	t.Helper()
	if listen {
		if err := p.sim.B.CMListen(sidrTestService, 0, func(ev CMEvent) { evB = append(evB, ev) }); err != nil {
			t.Fatal(err)
		}
	}
	id, err := p.sim.A.CMSIDRResolve(ibcm.SIDRParams{Peer: ibcm.Peer{Addr: p.sim.B.cfg.Addr}, ServiceID: sidrTestService,
		Timeout: 14, MaxCMRetries: 3, PrivateData: []byte("req")}, [6]byte{}, func(ev CMEvent) { evA = append(evA, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if listen && reply {
		if !p.sim.RunUntilReact(func() bool { return len(evB) > 0 }, 10*time.Second) {
			t.Fatal("no SIDR_REQ at B")
		}
		ev := evB[0]
		if ev.Type != ibcm.EventSIDRREQReceived || ev.PeerMAC != p.sim.A.MAC() {
			t.Fatalf("B's event %+v, want a SIDR_REQ from A's MAC %x", ev, p.sim.A.MAC())
		}
		if err := p.sim.B.CMSIDRReply(ev.ID, ibcm.SIDRSuccess, 0x55, 0x01234567, []byte("rep")); err != nil {
			t.Fatal(err)
		}
	}
	if !p.sim.RunUntilReact(func() bool { return len(evA) > 0 }, 10*time.Second) {
		t.Fatalf("no answer to the SIDR_REQ; B's events %d", len(evB))
	}
	p.sim.RunFor(time.Second)
	if len(evA) != 1 || evA[0].ID != id || !evA[0].Last {
		t.Fatalf("A's events %+v", evA)
	}
	return evA, evB
}

func (p *cmPair) madAttrs() []uint16 {
	var s []uint16
	for _, m := range p.mads {
		s = append(s, m.attr)
	}
	return s
}

// TestCMSIDR: a SIDR_REQ for a listened UDP port reaches the listener's
// owner with its private data; the owner's SIDR_REP carries the UD QPN
// and Q_Key back; exactly one SIDR_REQ and one SIDR_REP on the wire.
func TestCMSIDR(t *testing.T) {
	p := newCMPair(t, nil)
	evA, evB := sidrRun(t, p, true, true)
	if len(evB) != 1 || evB[0].Type != ibcm.EventSIDRREQReceived || evB[0].Last ||
		evB[0].SIDRREQ.ServiceID != sidrTestService || !bytes.HasPrefix(evB[0].SIDRREQ.PrivateData[:], []byte("req")) {
		t.Fatalf("B's events %+v", evB)
	}
	r := evA[0].SIDRREP
	if evA[0].Type != ibcm.EventSIDRREPReceived || r.Status != ibcm.SIDRSuccess || r.QPN != 0x55 || r.QKey != 0x01234567 ||
		!bytes.HasPrefix(r.PrivateData[:], []byte("rep")) {
		t.Fatalf("A's event %+v", evA[0])
	}
	if got := p.madAttrs(); !slices.Equal(got, []uint16{ibcm.AttrSIDRREQ, ibcm.AttrSIDRREP}) {
		t.Fatalf("on the wire %x", got)
	}
	if st := p.sim.B.cmState(evB[0].ID); st != ibcm.StateIdle {
		t.Fatalf("B's request %v after the reply", st)
	}
}

// TestCMSIDRNoListener: nobody listens on the port: the CM answers with
// status 1 (the service ID is not supported), nothing retried.
func TestCMSIDRNoListener(t *testing.T) {
	p := newCMPair(t, nil)
	evA, _ := sidrRun(t, p, false, false)
	if evA[0].Type != ibcm.EventSIDRREPReceived || evA[0].SIDRREP.Status != ibcm.SIDRUnsupported {
		t.Fatalf("A's event %+v", evA[0])
	}
	if got := p.madAttrs(); !slices.Equal(got, []uint16{ibcm.AttrSIDRREQ, ibcm.AttrSIDRREP}) {
		t.Fatalf("on the wire %x", got)
	}
}

// TestCMSIDRLost: the first SIDR_REQ is lost and resent after A's
// timeout; then the first SIDR_REP is lost, and B answers A's retry with
// the same SIDR_REP without a second request to its owner.
func TestCMSIDRLost(t *testing.T) {
	p := newCMPair(t, func(d fabric.Direction, attr uint16, n int) bool {
		return n == 1 && (d == fabric.AtoB && attr == ibcm.AttrSIDRREQ || d == fabric.BtoA && attr == ibcm.AttrSIDRREP)
	})
	evA, evB := sidrRun(t, p, true, true)
	if len(evB) != 1 || evA[0].Type != ibcm.EventSIDRREPReceived || evA[0].SIDRREP.QPN != 0x55 {
		t.Fatalf("A's %+v B's %+v", evA, evB)
	}
	want := []madSeen{{fabric.AtoB, ibcm.AttrSIDRREQ, true}, {fabric.AtoB, ibcm.AttrSIDRREQ, false},
		{fabric.BtoA, ibcm.AttrSIDRREP, true}, {fabric.AtoB, ibcm.AttrSIDRREQ, false}, {fabric.BtoA, ibcm.AttrSIDRREP, false}}
	if !equalMADs(p.mads, want) {
		t.Fatalf("on the wire %+v", p.mads)
	}
	ca := p.sim.A.Counters()
	if ca.CMTxRetries[ibcm.AttrIndex(ibcm.AttrSIDRREQ)] != 2 {
		t.Fatalf("A's SIDR_REQ retries %d", ca.CMTxRetries[ibcm.AttrIndex(ibcm.AttrSIDRREQ)])
	}
}

// TestCMSIDRClose: CMClose on an outstanding request stops it; on a
// received one it answers with status SIDRReject (rdma_destroy_id).
func TestCMSIDRClose(t *testing.T) {
	p := newCMPair(t, func(d fabric.Direction, attr uint16, n int) bool { return d == fabric.AtoB })
	var evA []CMEvent
	id, err := p.sim.A.CMSIDRResolve(ibcm.SIDRParams{Peer: ibcm.Peer{Addr: p.sim.B.cfg.Addr}, ServiceID: sidrTestService,
		Timeout: 14, MaxCMRetries: 3}, [6]byte{}, func(ev CMEvent) { evA = append(evA, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.sim.A.CMClose(id); err != nil {
		t.Fatal(err)
	}
	p.sim.RunFor(10 * time.Second)
	if len(evA) != 0 || len(p.mads) != 1 {
		t.Fatalf("events %+v, MADs %+v", evA, p.mads)
	}

	q := newCMPair(t, nil)
	var evB []CMEvent
	if err := q.sim.B.CMListen(sidrTestService, 0, func(ev CMEvent) { evB = append(evB, ev) }); err != nil {
		t.Fatal(err)
	}
	id, err = q.sim.A.CMSIDRResolve(ibcm.SIDRParams{Peer: ibcm.Peer{Addr: q.sim.B.cfg.Addr}, ServiceID: sidrTestService,
		Timeout: 14, MaxCMRetries: 3}, [6]byte{}, func(ev CMEvent) { evA = append(evA, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if !q.sim.RunUntilReact(func() bool { return len(evB) > 0 }, time.Second) {
		t.Fatal("no SIDR_REQ at B")
	}
	if err := q.sim.B.CMClose(evB[0].ID); err != nil {
		t.Fatal(err)
	}
	if !q.sim.RunUntilReact(func() bool { return len(evA) > 0 }, time.Second) {
		t.Fatal("no SIDR_REP at A")
	}
	if evA[0].ID != id || evA[0].SIDRREP.Status != ibcm.SIDRReject {
		t.Fatalf("A's event %+v", evA[0])
	}
}
