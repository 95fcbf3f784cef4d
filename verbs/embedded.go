package verbs

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// Embedded is two softnic devices in this process joined by the
// in-memory fabric, run in simulated time: "host A" and "host B" of a
// test or a demo. Nothing moves until RunUntil (or Step) is called; time
// then jumps from event to event, so a run at 25 Gb/s with millisecond
// timeouts takes only the CPU time its packets need.
type Embedded struct {
	Sim  *sim.Sim
	A, B *Context
}

// NewEmbedded builds the pair.
func NewEmbedded(cfg sim.Config) (*Embedded, error) {
	sim, err := sim.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedded{
		Sim: sim,
		A:   &Context{b: &embedded{dev: "softnic_a", e: sim.A}, e: sim.A},
		B:   &Context{b: &embedded{dev: "softnic_b", e: sim.B}, e: sim.B},
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
	if qa.q == nil || qb.q == nil {
		return ErrForeign
	}
	return dataplane.Connect(m.A.e, qa.q, m.B.e, qb.q, p)
}

// embedded is the backend of a Context whose NIC runs in this process:
// every call goes straight into the engine, which does its own locking.
type embedded struct {
	dev string
	e   *dataplane.Engine
}

func (b *embedded) name() string { return b.dev }

func (b *embedded) queryDevice() (DeviceAttr, error) {
	return deviceAttr(protoconv.DeviceOf(b.e, b.dev)), nil
}

func (b *embedded) stats() ([]Counter, error) {
	var out []Counter
	for _, c := range protoconv.CountersOf(b.e) {
		out = append(out, Counter{Name: c.Name, Value: c.Value})
	}
	return out, nil
}

func (b *embedded) netem() (string, error) { return b.e.Netem().String(), nil }

func (b *embedded) setNetem(text string) (string, error) {
	spec, err := impair.Parse(text)
	if err != nil {
		return "", err
	}
	if err := b.e.SetNetem(spec); err != nil {
		return "", err
	}
	return spec.String(), nil
}

// allocBuf: the engine reaches any memory of this process, so a buffer
// needs nothing special (8-byte alignment for atomics comes with any Go
// allocation of this size class).
func (b *embedded) allocBuf(n int) ([]byte, error) {
	if n <= 0 {
		return nil, errBufSize
	}
	return make([]byte, n), nil
}

func (b *embedded) freeBuf([]byte) error { return nil }

func (b *embedded) allocPD() (uint32, error)  { return b.e.AllocPD(), nil }
func (b *embedded) deallocPD(pd uint32) error { return b.e.DeallocPD(pd) }

func (b *embedded) regMR(pd *PD, buf []byte, access Access) (*MR, error) {
	m, err := b.e.RegMR(pd.h, buf, 0, access)
	if err != nil {
		return nil, err
	}
	return &MR{Addr: m.Addr, LKey: m.LKey, RKey: m.RKey, mr: m}, nil
}

func (b *embedded) deregMR(m *MR) error { return b.e.DeregMR(m.mr) }

func (b *embedded) createCQ(cq *CQ, cqe int) error {
	cq.notify = shm.Notify{Arm: &cq.words[0], Events: &cq.words[1]}
	var hook func(*qp.WC)
	if cq.ch != nil {
		hook = embeddedNotify(cq)
	}
	c, err := b.e.CreateCQ(cqe, hook)
	cq.ecq = c
	return err
}

// createCompChannel: an eventfd the engine's completion hook writes.
func (b *embedded) createCompChannel(ch *CompChannel) error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("verbs: completion channel eventfd: %w", err)
	}
	ch.fd = fd
	return nil
}

func (b *embedded) destroyCompChannel(*CompChannel) error { return nil }

// destroyCQ releases the engine's completion ring (a deep one is a
// mapping of its own, unmapped at once).
func (b *embedded) destroyCQ(cq *CQ) error { return b.e.DestroyCQ(cq.ecq) }

func (b *embedded) createQP(q *QP, attr QPInitAttr) error {
	if err := dataplane.CheckScheme(attr.Scheme); err != nil {
		return err
	}
	eq, err := b.e.CreateQP(q.pd.h, dataplane.QPInitAttr{
		SendCQ: attr.SendCQ.ecq, RecvCQ: attr.RecvCQ.ecq,
		MaxSendWR: attr.MaxSendWR, MaxRecvWR: attr.MaxRecvWR, SigAll: attr.SqSigAll,
		Scheme: attr.Scheme, CC: attr.CC, Star: attr.Star, MaxUnackedPSNs: attr.MaxUnackedPSNs, Type: attr.Type, SRQ: srqOf(attr.SRQ),
	})
	if err != nil {
		return err
	}
	q.q, q.qpn = eq, eq.QPN()
	return nil
}

func (b *embedded) modifyQP(q *QP, attr *QPAttr, mask AttrMask) error {
	return b.e.ModifyQP(q.q, attr, mask)
}

func (b *embedded) queryQP(q *QP) (QPAttr, error)        { return b.e.QueryQP(q.q), nil }
func (b *embedded) setQPScheme(q *QP, name string) error { return b.e.SetQPScheme(q.q, name) }
func (b *embedded) destroyQP(q *QP) error                { return b.e.DestroyQP(q.q) }
func (b *embedded) close() error                         { return nil }
