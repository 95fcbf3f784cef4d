package verbsd

import (
	"errors"
	"strings"
	"testing"

	"github.com/softnic/softnic/verbs/internal/proto"
)

// TestStarProtocol: a StaR role and the memory-table ops need protocol
// version 5 (a version-4 client asking for them gets a protocol error
// naming the version, and keeps working); from version 5, the role
// reaches the engine (a server role on a NIC without StarServer is the
// engine's error), a client QP has no table to give, a table of more
// than MaxStarRegions is refused, and one for a client QP is installed.
func TestStarProtocol(t *testing.T) {
	s, _ := newServer(t)
	qp := func(r *rawClient, star uint8) (proto.CreateQPResult, error) {
		var pd proto.Handle
		r.call(proto.OpAllocPD, nil, &pd)
		var cq proto.CreateCQResult
		fds, err := r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 8}, &cq)
		proto.CloseFDs(fds)
		if err != nil {
			t.Fatal(err)
		}
		var q proto.CreateQPResult
		fds, err = r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 4, MaxRecvWR: 4, Scheme: "irn", Star: star}, &q)
		proto.CloseFDs(fds)
		return q, err
	}
	old := dial(t, s)
	old.hello(4)
	if _, err := qp(old, 2); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("StaR client QP from a version-4 client: %v", err)
	}
	if _, err := old.call(proto.OpStarTable, proto.Handle{Handle: 1}, nil); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("star_table from a version-4 client: %v", err)
	}
	if _, err := qp(old, 0); err != nil {
		t.Fatalf("ordinary QP from a version-4 client: %v", err)
	}

	c := dial(t, s)
	c.hello(proto.Version)
	if _, err := qp(c, 1); err == nil || !strings.Contains(err.Error(), "--star-server") {
		t.Fatalf("StaR server QP on a NIC without StarServer: %v", err)
	}
	q, err := qp(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(proto.OpStarTable, proto.Handle{Handle: q.Handle}, nil); err != nil {
		t.Fatalf("star_table of a client QP (what its server sent: nothing yet): %v", err)
	}
	// Nothing installs a table through the daemon: only the server's
	// driver writes a client's table, in band (docs/star.md).
	if _, err := c.call("set_star_table", proto.Handle{Handle: q.Handle}, nil); err == nil {
		t.Fatal("set_star_table was taken")
	}
	if _, err := c.call(proto.OpStarTable, proto.Handle{Handle: 999}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Fatalf("star_table of no QP: %v", err)
	}
}
