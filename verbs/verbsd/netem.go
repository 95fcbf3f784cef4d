package verbsd

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// mayChangeNetem reports whether a client of uid may change the daemon's
// receive impairment: root, or the user the daemon runs as. The socket's
// mode (0660) lets a group use the NIC; impairing every peer's traffic is
// the operator's decision, not a verbs user's.
func mayChangeNetem(uid, daemonUID uint32) bool { return uid == 0 || uid == daemonUID }

// setNetem answers set_netem: checks the client's uid (SO_PEERCRED, taken
// at accept), parses the Spec, gives it a seed if it has none (reported
// back, so that the run can be repeated with it), and hands it to the
// engine (dataplane.Engine.SetNetem).
func (s *Server) setNetem(c *client, a proto.NetemArgs) (any, reply, error) {
	if !mayChangeNetem(c.uid, uint32(os.Geteuid())) {
		return nil, reply{}, fmt.Errorf("%w: uid %d may not change the receive impairment (root or the daemon's uid %d may)", proto.ErrPermission, c.uid, os.Geteuid())
	}
	spec, err := impair.Parse(a.Spec)
	if err != nil {
		return nil, reply{}, err
	}
	if spec.Active() && !spec.HasSeed {
		spec.Seed, spec.HasSeed = rand.Uint64(), true
	}
	if err := s.e.SetNetem(spec); err != nil {
		return nil, reply{}, err
	}
	c.log.Info("receive impairment changed", "netem", spec.String())
	return proto.NetemResult{Spec: spec.String()}, reply{}, nil
}
