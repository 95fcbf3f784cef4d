package ibcm

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// fakeNet is the in-memory fabric of the CM tests: every MAD sent is
// delivered to its destination node after a fixed latency, unless the
// seeded loss or the test's drop filter takes it. Time is the fake clock
// now, moved only by run.
type fakeNet struct {
	t       testing.TB
	now     time.Duration
	latency time.Duration
	loss    float64
	rng     *rand.Rand
	nodes   map[netip.Addr]*node
	flight  []flight
	seq     int
	// drop, when set, decides the fate of each MAD before the seeded loss
	// (true: lost).
	drop func(f *flight) bool
	sent []flight // every MAD sent, in order
}

type flight struct {
	at       time.Duration
	seq      int
	from, to Peer
	attr     uint16
	mad      []byte
}

type node struct {
	net    *fakeNet
	addr   netip.Addr
	cm     *CM
	events []Event
	qpErr  []uint32 // QPNs Config.QPError was called for
	// accept answers every REQ with a REP (QPN acceptQPN); rtu answers
	// every REP with an RTU.
	accept    bool
	acceptQPN uint32
	rtu       bool
}

// nodeTransport is one node's Transport: it stamps the source.
type nodeTransport struct{ n *node }

func (tr nodeTransport) SendMAD(to Peer, mad []byte) error {
	n := tr.n
	f := flight{at: n.net.now + n.net.latency, seq: n.net.seq, from: Peer{n.addr, GSIQPN}, to: to,
		mad: append([]byte(nil), mad...)}
	if len(mad) >= 18 {
		f.attr = uint16(mad[16])<<8 | uint16(mad[17])
	}
	n.net.seq++
	n.net.sent = append(n.net.sent, f)
	if n.net.drop != nil && n.net.drop(&f) {
		return nil
	}
	if n.net.loss > 0 && n.net.rng.Float64() < n.net.loss {
		return nil
	}
	n.net.flight = append(n.net.flight, f)
	return nil
}

func newFakeNet(t testing.TB, seed uint64) *fakeNet {
	return &fakeNet{t: t, latency: 10 * time.Microsecond, rng: rand.New(rand.NewPCG(seed, 7)),
		nodes: map[netip.Addr]*node{}}
}

// testPLT is the packet lifetime the test CMs use (4.096 us * 2^10, 4 ms).
const testPLT = 10

func (nw *fakeNet) add(addr string, guid uint64) *node {
	a := netip.MustParseAddr(addr)
	n := &node{net: nw, addr: a, acceptQPN: 0x200}
	n.cm = New(Config{CAGUID: guid, PacketLifeTime: testPLT, Seed: guid,
		QPError: func(id, qpn uint32) { n.qpErr = append(n.qpErr, qpn) }}, nodeTransport{n})
	nw.nodes[a] = n
	return n
}

func (n *node) peer() Peer { return Peer{n.addr, GSIQPN} }

// drain reads the node's events, answering REQs and REPs when told to.
func (n *node) drain() {
	for {
		e, ok := n.cm.PollEvent()
		if !ok {
			return
		}
		n.events = append(n.events, e)
		switch {
		case e.Type == EventREQReceived && n.accept:
			err := n.cm.Accept(n.net.now, e.ID, AcceptParams{QPN: n.acceptQPN + e.REQ.LocalQPN&0xff,
				StartingPSN: 0x1000, ResponderResources: e.REQ.InitiatorDepth, InitiatorDepth: e.REQ.ResponderResources,
				RNRRetryCount: 7, PrivateData: []byte("rep")})
			if err != nil {
				n.net.t.Fatalf("accept: %v", err)
			}
		case e.Type == EventREPReceived && n.rtu:
			if err := n.cm.SendRTU(n.net.now, e.ID, []byte("rtu")); err != nil {
				n.net.t.Fatalf("rtu: %v", err)
			}
		}
	}
}

// step moves time to the next delivery or CM deadline no later than until,
// delivers what is due and fires the timers. It reports false when nothing
// is left to do by until.
func (nw *fakeNet) step(until time.Duration) bool {
	next, any := time.Duration(0), false
	for _, f := range nw.flight {
		if !any || f.at < next {
			next, any = f.at, true
		}
	}
	for _, n := range nw.sortedNodes() {
		if d, ok := n.cm.NextDeadline(); ok && (!any || d < next) {
			next, any = d, true
		}
	}
	if !any || next > until {
		return false
	}
	if next > nw.now {
		nw.now = next
	}
	due := nw.flight[:0:0]
	rest := nw.flight[:0]
	for _, f := range nw.flight {
		if f.at <= nw.now {
			due = append(due, f)
		} else {
			rest = append(rest, f)
		}
	}
	nw.flight = rest
	slices.SortFunc(due, func(a, b flight) int { return a.seq - b.seq })
	for _, f := range due {
		if n := nw.nodes[f.to.Addr]; n != nil && f.to.QPN == GSIQPN {
			n.cm.HandleMAD(nw.now, f.from, f.mad)
			n.drain()
		}
	}
	for _, n := range nw.sortedNodes() {
		n.cm.Tick(nw.now)
		n.drain()
	}
	return true
}

func (nw *fakeNet) sortedNodes() []*node {
	ns := make([]*node, 0, len(nw.nodes))
	for _, n := range nw.nodes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b *node) int { return a.addr.Compare(b.addr) })
	return ns
}

// run steps until nothing is left to do by until, with a step bound.
func (nw *fakeNet) run(until time.Duration) {
	nw.t.Helper()
	for i := 0; nw.step(until); i++ {
		if i > 1_000_000 {
			nw.t.Fatal("fake network did not settle")
		}
	}
	if nw.now < until {
		nw.now = until
	}
}

// runFor runs d past the current time.
func (nw *fakeNet) runFor(d time.Duration) { nw.run(nw.now + d) }

func (n *node) eventsOf(typ EventType) []Event {
	var out []Event
	for _, e := range n.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (n *node) eventTypes() []EventType {
	var out []EventType
	for _, e := range n.events {
		out = append(out, e.Type)
	}
	return out
}

// sentOf counts the MADs of attr sent from the node.
func (nw *fakeNet) sentOf(from *node, attr uint16) int {
	c := 0
	for _, f := range nw.sent {
		if f.from.Addr == from.addr && f.attr == attr {
			c++
		}
	}
	return c
}
