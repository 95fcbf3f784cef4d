package verbs

import (
	"time"

	"github.com/softnic/softnic/dataplane"
)

// Embedded is two softnic devices in this process joined by the
// in-memory fabric, run in simulated time: "host A" and "host B" of a
// test or a demo. Nothing moves until RunUntil (or Step) is called; time
// then jumps from event to event, so a run at 25 Gb/s with millisecond
// timeouts takes only the CPU time its packets need.
type Embedded struct {
	Sim  *dataplane.Sim
	A, B *Context
}

// NewEmbedded builds the pair.
func NewEmbedded(cfg dataplane.SimConfig) (*Embedded, error) {
	sim, err := dataplane.NewSim(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedded{
		Sim: sim,
		A:   &Context{name: "softnic_a", e: sim.A},
		B:   &Context{name: "softnic_b", e: sim.B},
	}, nil
}

// RunUntil runs the simulation until cond holds or limit of simulated time
// passed; it reports whether cond held.
func (m *Embedded) RunUntil(cond func() bool, limit time.Duration) bool {
	return m.Sim.RunUntil(cond, limit)
}

// Now is the simulated time.
func (m *Embedded) Now() time.Duration { return m.Sim.Now() }

// Connect moves qa (on A) and qb (on B) to RTS towards each other: the
// embedded form of the connection exchange.
func (m *Embedded) Connect(qa, qb *QP, p ConnParam) error {
	return dataplane.Connect(m.A.e, qa.q, m.B.e, qb.q, p)
}
