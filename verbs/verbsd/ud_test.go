package verbsd

import (
	"errors"
	"net/netip"
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
