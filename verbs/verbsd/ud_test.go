package verbsd

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// TestCreateAHLimitsAndChecks: create_ah counts against --max-ahs, takes
// only the client's own PDs, resolves a zero MAC from the engine's
// neighbours or refuses the AH, and destroy_ah takes only the client's
// handles; a client's AHs go with its connection.
func TestCreateAHLimitsAndChecks(t *testing.T) {
	s := newServerLimits(t, Limits{AHs: 2})
	a := dial(t, s)
	a.helloID()
	var pd proto.Handle
	fds, err := a.call(proto.OpAllocPD, nil, &pd)
	ok(t, "alloc_pd", fds, err)
	args := proto.CreateAHArgs{PD: pd.Handle, DGID: sim.AddrB}
	var res proto.CreateAHResult
	fds, err = a.call(proto.OpCreateAH, args, &res)
	ok(t, "create_ah", fds, err)
	if res.DMAC != sim.MACB || res.AH == 0 {
		t.Fatalf("create_ah: %+v, want B's MAC %x resolved", res, sim.MACB)
	}
	fds, err = a.call(proto.OpCreateAH, proto.CreateAHArgs{PD: pd.Handle, DGID: netip.MustParseAddr("198.18.9.9")}, nil)
	proto.CloseFDs(fds)
	if !errors.Is(err, dataplane.ErrNoNeighbor) {
		t.Fatalf("create_ah to no neighbour: %v", err)
	}
	fds, err = a.call(proto.OpCreateAH, proto.CreateAHArgs{PD: pd.Handle + 100, DGID: sim.AddrB}, nil)
	proto.CloseFDs(fds)
	if !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("create_ah in a PD of no one: %v", err)
	}
	fds, err = a.call(proto.OpCreateAH, args, nil)
	ok(t, "second create_ah", fds, err)
	fds, err = a.call(proto.OpCreateAH, args, nil)
	proto.CloseFDs(fds)
	wantLimit(t, "third create_ah", err, "max-ahs")
	fds, err = a.call(proto.OpDestroyAH, proto.Handle{Handle: res.Handle}, nil)
	ok(t, "destroy_ah", fds, err)
	fds, err = a.call(proto.OpDestroyAH, proto.Handle{Handle: res.Handle}, nil)
	proto.CloseFDs(fds)
	if !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("second destroy_ah: %v", err)
	}
	if o := s.Objects(); o.AHs != 1 {
		t.Fatalf("%d AHs held, want 1", o.AHs)
	}
	a.c.C.Close()
	waitFor(t, "the client's teardown", func() bool { return s.Objects() == Objects{} })
}

// TestUDProtocol: a QP type and the AH ops need protocol version 6 (a
// version-5 client asking for them gets a protocol error naming the
// version, and keeps working); from version 6 a UD QP is made, its
// result names the port's MTU, and a QP type the engine does not make is
// refused.
func TestUDProtocol(t *testing.T) {
	s, _ := newServer(t)
	qp := func(r *rawClient, typ uint8) (proto.CreateQPResult, error) {
		var pd proto.Handle
		r.call(proto.OpAllocPD, nil, &pd)
		var cq proto.CreateCQResult
		fds, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 8}, &cq)
		proto.CloseFDs(fds)
		if err != nil {
			t.Fatal(err)
		}
		var q proto.CreateQPResult
		fds, err = r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 4, MaxRecvWR: 4, Type: typ}, &q)
		proto.CloseFDs(fds)
		return q, err
	}
	old := dial(t, s)
	old.hello(5)
	if _, err := qp(old, 4); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 6") {
		t.Fatalf("UD QP from a version-5 client: %v", err)
	}
	if _, err := old.call(proto.OpCreateAH, proto.CreateAHArgs{PD: 1, DGID: sim.AddrB}, nil); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 6") {
		t.Fatalf("create_ah from a version-5 client: %v", err)
	}
	if q, err := qp(old, 0); err != nil || q.UDMTU != 0 {
		t.Fatalf("ordinary QP from a version-5 client: %+v, %v", q, err)
	}
	c := dial(t, s)
	c.hello(proto.Version)
	q, err := qp(c, 4)
	if err != nil || q.UDMTU != 4096 {
		t.Fatalf("UD QP: %+v, %v; want ud_mtu 4096 (the embedded fabric's frames)", q, err)
	}
	if _, err := qp(c, 3); !errors.Is(err, dataplane.ErrUDQP) {
		t.Fatalf("UC QP: %v", err)
	}
}
