package dataplane

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// oooModel follows the requests that reach the responder, in the order
// they arrive (a link without jitter or reordering delivers in the order
// it sends), and adds up the payload of those that arrive ahead of the
// expected PSN and are later delivered when the hole before them fills:
// the out-of-order payload a MELO responder copies out of its reorder
// buffer, counted outside the engine.
type oooModel struct {
	expected qp.PSN
	held     map[qp.PSN]int // payload bytes of packets kept ahead of expected
	bytes    uint64         // payload delivered from held
	packets  uint64
}

func newOOOModel(start qp.PSN) *oooModel {
	return &oooModel{expected: start, held: map[qp.PSN]int{}}
}

func (m *oooModel) arrive(psn qp.PSN, payload int) {
	switch {
	case psn == m.expected:
		m.expected = m.expected.Next()
		for {
			n, ok := m.held[m.expected]
			if !ok {
				return
			}
			delete(m.held, m.expected)
			m.bytes += uint64(n)
			m.packets++
			m.expected = m.expected.Next()
		}
	case psn.After(m.expected):
		if _, dup := m.held[psn]; !dup {
			m.held[psn] = payload
		}
	} // before expected: a duplicate
}

// tapOOO installs the model on the pair's A-to-B link.
func tapOOO(p *testPair, start qp.PSN) *oooModel {
	m := newOOOModel(start)
	p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, dropped bool) {
		if d != fabric.AtoB || dropped {
			return
		}
		f, err := bth.ParseFrame(frame)
		if err != nil || f.Pkt.Info.Flags&bth.IsRequest == 0 {
			return
		}
		m.arrive(qp.PSN(f.Pkt.BTH().PSN()), len(f.Pkt.Payload()))
	})
	return m
}

// meloKeptEverything fails the test if B's MELO receiver dropped a packet
// ahead of the expected PSN for any reason (no bits, no reorder-buffer
// slot, a failed check): then the model, which keeps every one, would not
// describe it.
func meloKeptEverything(t *testing.T, b Counters) {
	t.Helper()
	if b.SchemeCounter("sr_pool_drops") != 0 || b.SchemeCounter("sr_middle_drops") != 0 || b.ROBFull != 0 || b.OOODiscarded != 0 {
		t.Fatalf("B dropped early packets: pool %d, middle %d, rob_full %d, discarded %d",
			b.SchemeCounter("sr_pool_drops"), b.SchemeCounter("sr_middle_drops"), b.ROBFull, b.OOODiscarded)
	}
}

// TestMELOROBDeliveredBytesKnownDrops: one WRITE of 20 packets, the last
// 724 bytes, loses packets 5 and 12 once. Packets 6-11 and 13-19 arrive
// ahead of a hole and come out of the reorder buffer later: 12 full
// packets and the short last one, 13,012 bytes in 13 packets.
// rob_delivered_bytes says so, and so does the model of the arrivals.
func TestMELOROBDeliveredBytesKnownDrops(t *testing.T) {
	const start = 0x500
	link := quietLink()
	link.Drop = srDrop(0, map[qp.PSN]int{start + 5: 1, start + 12: 1})
	p := newSchemePair(t, recovery.MELO, recovery.Params{}, SimConfig{Seed: 61, AtoB: link, BtoA: quietLink()},
		ConnParams{MTU: qp.MTU1024, PSNA: start})
	m := tapOOO(p, start)
	p.checkWrite(1, 20*1024-300, false)
	p.settle()
	b := p.sim.B.Counters()
	meloKeptEverything(t, b)
	const want = 12*1024 + 724
	if b.ROBDeliveredBytes != want || b.ROBDelivered != 13 || m.bytes != want || m.packets != 13 {
		t.Fatalf("rob_delivered_bytes %d in %d packets, model %d in %d; want %d in 13",
			b.ROBDeliveredBytes, b.ROBDelivered, m.bytes, m.packets, want)
	}
}

// TestMELOROBDeliveredBytesRandomDrops: WRITEs and SENDs of uneven sizes
// over a link that drops 3% of the requests (first transmissions and
// retransmissions alike, seeded) and 1% of the ACKs: rob_delivered_bytes
// and rob_delivered equal exactly the out-of-order payload and packets the
// model counts from the frames that reached B.
func TestMELOROBDeliveredBytesRandomDrops(t *testing.T) {
	const start = 0xFFFFA0 // across the PSN wrap
	r := rand.New(rand.NewPCG(62, 0xd40b))
	link := quietLink()
	link.Drop = func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		return err == nil && f.Pkt.Info.Flags&bth.IsRequest != 0 && r.Float64() < 0.03
	}
	back := quietLink()
	back.Loss = 0.01
	p := newSchemePair(t, recovery.MELO, recovery.Params{}, SimConfig{Seed: 62, AtoB: link, BtoA: back},
		ConnParams{MTU: qp.MTU1024, PSNA: start, Timeout: 8})
	m := tapOOO(p, start)
	for id := uint64(1); id <= 6; id++ {
		p.checkWrite(id, int(id)*23<<10+int(id)*97, id%2 == 0)
		p.checkSend(id, int(id)*11<<10+int(id)*31, id%3 == 0)
	}
	p.settle()
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	meloKeptEverything(t, b)
	t.Logf("A resent %d, timeouts %d; B rob_delivered %d (%d bytes), model %d (%d bytes)",
		a.Retransmits, a.LocalAckTimeout, b.ROBDelivered, b.ROBDeliveredBytes, m.packets, m.bytes)
	if b.ROBDeliveredBytes == 0 || b.ROBDeliveredBytes != m.bytes || b.ROBDelivered != m.packets {
		t.Fatalf("rob_delivered %d (%d bytes); the model: %d (%d bytes)", b.ROBDelivered, b.ROBDeliveredBytes, m.packets, m.bytes)
	}
	if len(m.held) != 0 || b.ROBInUse != 0 {
		t.Fatalf("left held: model %d, reorder buffer %d", len(m.held), b.ROBInUse)
	}
}
