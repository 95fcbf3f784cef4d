package cmservice

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/rdmacm"
)

const udpService = 0x0000000001110000 | 7174

// TestServiceSIDR: rdma_cm's UDP port space over the NICs' CMs. A
// SIDR_REQ for a port nobody listens on is UNREACHABLE with status 1; a
// listener's request is an EventRequest with UD set, its private data
// and the requester's address and MAC; Accept's SIDR_REP reaches the
// active side as EventReply with the QPN, Q_Key and private data; Reject
// and Close of an unanswered request are status 2.
func TestServiceSIDR(t *testing.T) {
	m := startFabric(t)
	a, b := newHost(t, m.A), newHost(t, m.B)
	path := Path{SGID: a.dev.GID, DGID: b.dev.GID, DMAC: b.dev.MAC, HopLimit: 64, PKey: 0xffff}
	if _, err := a.cm.Resolve(udpService, path, []byte("sidr"), a.handler); err != nil {
		t.Fatal(err)
	}
	if ev := a.next(t, EventUnreachable); ev.Status != int(ibcm.SIDRUnsupported) {
		t.Fatalf("no listener: %+v", ev)
	}
	if _, err := b.cm.Listen(udpService, b.dev.GID, b.handler); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cm.Resolve(udpService, path, []byte("sidr"), a.handler); err != nil {
		t.Fatal(err)
	}
	req := b.next(t, EventRequest)
	if !req.UD || !bytes.HasPrefix(req.Param.PrivateData, []byte("sidr")) || req.Path.DGID != a.dev.GID ||
		req.Path.DMAC != a.dev.MAC || req.Path.SGID != b.dev.GID {
		t.Fatalf("request %+v", req)
	}
	if err := req.Conn.Accept(ConnParam{QPN: b.qp.QPN(), QKey: rdmacm.UDPQKey, PrivateData: []byte("ok")}, b.handler); err != nil {
		t.Fatal(err)
	}
	rep := a.next(t, EventReply)
	if rep.Param.QPN != b.qp.QPN() || rep.Param.QKey != rdmacm.UDPQKey || !bytes.HasPrefix(rep.Param.PrivateData, []byte("ok")) {
		t.Fatalf("reply %+v", rep)
	}
	if err := req.Conn.Accept(ConnParam{QPN: b.qp.QPN()}, b.handler); err == nil {
		t.Fatal("second SIDR_REP sent")
	}

	if _, err := a.cm.Resolve(udpService, path, nil, a.handler); err != nil {
		t.Fatal(err)
	}
	req = b.next(t, EventRequest)
	if err := req.Conn.Reject(ibcm.RejConsumerDefined, []byte("no")); err != nil {
		t.Fatal(err)
	}
	if ev := a.next(t, EventUnreachable); ev.Status != int(ibcm.SIDRReject) || !bytes.HasPrefix(ev.PrivateData, []byte("no")) {
		t.Fatalf("rejected: %+v", ev)
	}

	if _, err := a.cm.Resolve(udpService, path, nil, a.handler); err != nil {
		t.Fatal(err)
	}
	req = b.next(t, EventRequest)
	req.Conn.Close()
	if ev := a.next(t, EventUnreachable); ev.Status != int(ibcm.SIDRReject) {
		t.Fatalf("closed: %+v", ev)
	}
}
