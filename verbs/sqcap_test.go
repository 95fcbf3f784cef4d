package verbs

import (
	"errors"
	"testing"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
)

// TestSendQueueCap: SendQueueCap is at least MaxSendWR and is exactly
// what PostSend takes with nothing retired (the daemon's pump and the
// simulation stand still): that many WRITEs go in, one more is refused
// with ErrQueueFull, on an embedded and on a daemon context.
func TestSendQueueCap(t *testing.T) {
	m, err := NewEmbedded(sim.Config{Seed: 21})
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemons(t, sim.Config{Seed: 21}, false)
	remote, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	for _, c := range []struct {
		name string
		ctx  *Context
		peer endpoint
	}{
		{"embedded", m.A, endpoint{GID: m.B.Engine().Addr(), MAC: m.B.Engine().MAC(), QPN: 0x99, PSN: 1}},
		{"daemon", remote, endpoint{GID: d.sim.B.Addr(), MAC: d.sim.B.MAC(), QPN: 0x99, PSN: 1}},
	} {
		for _, depth := range []int{1, 3, 4, 5} {
			s, err := newSide(c.ctx, 4096, depth, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.connect(c.peer); err != nil {
				t.Fatal(err)
			}
			n := s.qp.SendQueueCap()
			if n < depth || n&(n-1) != 0 {
				t.Errorf("%s, MaxSendWR %d: SendQueueCap %d", c.name, depth, n)
			}
			wr := SendWR{Opcode: WRRDMAWrite, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(0, 8)}, RemoteAddr: 0x1000, RKey: 1}
			for i := range n {
				wr.WRID = uint64(i)
				if err := s.qp.PostSend(wr); err != nil {
					t.Fatalf("%s, MaxSendWR %d: WR %d of SendQueueCap %d: %v", c.name, depth, i, n, err)
				}
			}
			if err := s.qp.PostSend(wr); !errors.Is(err, dataplane.ErrQueueFull) {
				t.Errorf("%s, MaxSendWR %d: WR %d past SendQueueCap: %v, want ErrQueueFull", c.name, depth, n, err)
			}
		}
	}
}
