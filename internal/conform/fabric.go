package conform

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Setup is where a case runs: two hosts under one switch on the embedded
// fabric (package sim, fake clock), host 0 the requester, host 1 the
// responder, the switch running the case's rules (fabric.Switch.Inject).
type Setup struct {
	Scheme string // recovery scheme of both QPs ("": gbn)
	CC     string // congestion control of both NICs ("": none)
	Seed   uint64 // the fabric's and the data's
	// Requester and Responder are host 0's and host 1's links to the
	// switch (the same both ways).
	Requester, Responder fabric.LinkParams
	MTU                  qp.MTU // 0: 1024
	Timeout              uint8  // the QP's local ACK timeout code (0: DefaultTimeout)
	Params               recovery.Params
}

// DefaultTimeout is the local ACK timeout code the suite negotiates,
// 4.096 µs·2^8 = 1.05 ms (the opcode matrix's 1 ms; the perftest default
// of 67 ms would make a go-back-N timeout the whole of a run).
const DefaultTimeout = 8

// DefaultLink is the suite's link: 8 Gb/s, a byte a nanosecond, so that
// serialization times are whole nanoseconds, and 10 µs, so that a message
// of a few packets is all on the wire before its first reply comes back.
var DefaultLink = fabric.LinkParams{RateBps: 8e9, Delay: 10 * time.Microsecond}

func (s Setup) withDefaults() Setup {
	if s.Scheme == "" {
		s.Scheme = recovery.GBN
	}
	if s.Requester == (fabric.LinkParams{}) {
		s.Requester = DefaultLink
	}
	if s.Responder == (fabric.LinkParams{}) {
		s.Responder = DefaultLink
	}
	if s.MTU == 0 {
		s.MTU = qp.MTU1024
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	return s
}

// Op is a workload's operation.
type Op uint8

const (
	OpWrite Op = iota // RDMA WRITE from host 0 to host 1
	OpRead            // RDMA READ by host 0 of host 1's memory
	OpSend            // SEND from host 0 to a receive WQE of host 1
)

func (o Op) String() string { return [...]string{"WRITE", "READ", "SEND"}[o] }

// Workload is what the requester posts, all at once: Messages messages
// (0: 1) of Packets path-MTU packets each, on one QP.
type Workload struct {
	Op       Op
	Packets  int
	Messages int
}

// Run is one workload under one rule file, and what came of it: the
// Observation the judge reads (the requester is host 0, the responder
// host 1; the fabric knows its links and the timeouts' reasons).
type Run struct {
	Setup    Setup
	Workload Workload
	Rules    string
	Observation
}

// runLimit bounds a run in simulated time.
const runLimit = time.Second

// RunCase runs w on a fresh network of setup with the rule file rules
// (JSON, package inject's format; "" for none) at the switch.
func RunCase(setup Setup, w Workload, rules string) (*Run, error) {
	setup = setup.withDefaults()
	if w.Messages <= 0 {
		w.Messages = 1
	}
	if w.Packets <= 0 {
		return nil, fmt.Errorf("conform: a workload of %d packets", w.Packets)
	}
	if rules == "" {
		rules = `{"rules":[]}`
	}
	set, err := inject.Parse([]byte(rules))
	if err != nil {
		return nil, fmt.Errorf("conform: rules: %w", err)
	}
	s, err := sim.NewNet(sim.NetConfig{
		Engine: dataplane.Config{Scheme: setup.Scheme, CC: setup.CC, SchemeParams: setup.Params},
		Network: func(c fabric.Clock) (*fabric.Network, error) {
			n := fabric.NewNetwork(c, fabric.DefaultMaxFrame, setup.Seed)
			hosts := []*fabric.HostPort{
				n.AddHost(fabric.HostConfig{Addrs: []netip.Addr{fabric.HostAddr(0)}}),
				n.AddHost(fabric.HostConfig{Addrs: []netip.Addr{fabric.HostAddr(1)}}),
			}
			sw := n.AddSwitch(2, fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()})
			for i, p := range []fabric.LinkParams{setup.Requester, setup.Responder} {
				if err := n.Connect(fabric.HostEnd(hosts[i]), fabric.SwitchEnd(sw, i), p); err != nil {
					return nil, err
				}
			}
			return n, n.Build()
		},
	})
	if err != nil {
		return nil, err
	}
	s.Network.Switches()[0].Inject(set)
	r := &Run{Setup: setup, Workload: w, Rules: rules, Observation: Observation{
		Requester: fabric.HostAddr(0), Responder: fabric.HostAddr(1),
		AckTimeout:     ackTimeout(setup.Timeout),
		Wire:           &Wire{Requester: setup.Requester, Responder: setup.Responder},
		ReasonsCounted: true,
	}}
	if err := r.run(s); err != nil {
		return nil, err
	}
	r.Trace, r.Events = slices.Clone(set.Trace()), slices.Clone(set.Events())
	r.ISN = isnOf(r.Trace, r.Requester)
	r.Report = Analyze(r.Trace, r.Events, Options{})
	return r, nil
}

func (r *Run) run(s *sim.Net) error {
	a, b := s.Engines[0], s.Engines[1]
	// Each requester classifies its ACK timeouts by the peer's state
	// (docs/recovery.md, gbn and igbn, Timeouts by reason).
	a.SetTimeoutPeer(b)
	b.SetTimeoutPeer(a)
	w := r.Workload
	size := w.Packets * r.Setup.MTU.Bytes()
	total := size * w.Messages
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead
	pdA, pdB := a.AllocPD(), b.AllocPD()
	src := make([]byte, total)
	rng := rand.New(rand.NewPCG(r.Setup.Seed, 0x636f6e666f726d))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	bufA, bufB := src, make([]byte, total)
	if w.Op == OpRead {
		bufA, bufB = make([]byte, total), src
	}
	mrA, err := a.RegMR(pdA, bufA, 0, access)
	if err != nil {
		return err
	}
	mrB, err := b.RegMR(pdB, bufB, 0, access)
	if err != nil {
		return err
	}
	depth := w.Messages + 4
	cqA, err := a.CreateCQ(depth, nil)
	if err != nil {
		return err
	}
	cqB, err := b.CreateCQ(depth, nil)
	if err != nil {
		return err
	}
	qa, err := a.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: depth, MaxRecvWR: depth})
	if err != nil {
		return err
	}
	qb, err := b.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: depth, MaxRecvWR: depth})
	if err != nil {
		return err
	}
	if err := dataplane.Connect(a, qa, b, qb, dataplane.ConnParams{MTU: r.Setup.MTU, Timeout: r.Setup.Timeout}); err != nil {
		return err
	}
	recvs := 0
	if w.Op == OpSend {
		recvs = w.Messages
		for m := range w.Messages {
			rw := qp.RecvWR{WRID: uint64(m), NumSGE: 1}
			rw.SGL[0] = qp.SGE{Addr: mrB.Addr + uint64(m*size), Length: uint32(size), LKey: mrB.LKey}
			if _, err := b.PostRecv(qb, []qp.RecvWR{rw}); err != nil {
				return err
			}
		}
	}
	wrs := make([]qp.SendWR, w.Messages)
	for m := range wrs {
		op := map[Op]qp.WROpcode{OpWrite: qp.WRRDMAWrite, OpRead: qp.WRRDMARead, OpSend: qp.WRSend}[w.Op]
		wrs[m] = qp.SendWR{WRID: uint64(m), Opcode: op, Flags: qp.SendSignaled, NumSGE: 1,
			RemoteAddr: mrB.Addr + uint64(m*size), RKey: mrB.RKey}
		wrs[m].SGL[0] = qp.SGE{Addr: mrA.Addr + uint64(m*size), Length: uint32(size), LKey: mrA.LKey}
	}
	start := s.Now()
	if _, err := a.PostSend(qa, wrs); err != nil {
		return err
	}
	r.InOrder = true
	sent, received := 0, 0
	wcs := make([]qp.WC, depth)
	var pollErr error
	done := func() bool {
		n, err := a.PollCQ(cqA, wcs)
		if err != nil {
			pollErr = err
			return true
		}
		for _, wc := range wcs[:n] {
			if wc.WRID != uint64(sent) {
				r.InOrder = false
			}
			r.Statuses = append(r.Statuses, wc.Status)
			sent++
		}
		if n, err = b.PollCQ(cqB, wcs); err != nil {
			pollErr = err
			return true
		}
		for _, wc := range wcs[:n] {
			r.Statuses = append(r.Statuses, wc.Status)
			received++
		}
		return sent == w.Messages && received == recvs
	}
	r.Completed = s.RunUntilReact(done, runLimit)
	if pollErr != nil {
		return pollErr
	}
	r.Elapsed = s.Now() - start
	r.DataOK = bytes.Equal(bufA, bufB)
	r.ReqCounters, r.RespCounters = a.Counters(), b.Counters()
	return nil
}
