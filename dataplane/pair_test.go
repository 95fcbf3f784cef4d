package dataplane

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// testPair is two connected RC QPs on a Sim, each with one big memory
// region, and helpers to post, run and collect completions.
type testPair struct {
	tb       testing.TB
	sim      *Sim
	pdA, pdB uint32
	cqA, cqB *CQ
	qa, qb   *QP
	mrA, mrB *MR
	wcs      []qp.WC
}

const testMRSize = 9 << 20 // room for a 4 MiB message, offsets and guard bytes

// lossyLink is the protocol tests' link (fabric.LossyHop).
func lossyLink(loss float64) fabric.LinkConfig { return fabric.LossyHop(loss) }

func newTestPair(tb testing.TB, cfg SimConfig, p ConnParams) *testPair {
	tb.Helper()
	sim, err := NewSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	t := &testPair{tb: tb, sim: sim, wcs: make([]qp.WC, 64)}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	t.pdA, t.pdB = sim.A.AllocPD(), sim.B.AllocPD()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	t.mrA, err = sim.A.RegMR(t.pdA, make([]byte, testMRSize), 0, all)
	must(err)
	t.mrB, err = sim.B.RegMR(t.pdB, make([]byte, testMRSize), 0, all)
	must(err)
	t.cqA, err = sim.A.CreateCQ(4096, nil)
	must(err)
	t.cqB, err = sim.B.CreateCQ(4096, nil)
	must(err)
	t.qa, err = sim.A.CreateQP(t.pdA, QPInitAttr{SendCQ: t.cqA, RecvCQ: t.cqA, MaxSendWR: 256, MaxRecvWR: 256})
	must(err)
	t.qb, err = sim.B.CreateQP(t.pdB, QPInitAttr{SendCQ: t.cqB, RecvCQ: t.cqB, MaxSendWR: 256, MaxRecvWR: 256})
	must(err)
	must(Connect(sim.A, t.qa, sim.B, t.qb, p))
	return t
}

// sge names n bytes at offset off of an MR.
func sge(m *MR, off, n int) qp.SGE {
	return qp.SGE{Addr: m.Addr + uint64(off), Length: uint32(n), LKey: m.LKey}
}

func sendWR(id uint64, op qp.WROpcode, sgl ...qp.SGE) qp.SendWR {
	wr := qp.SendWR{WRID: id, Opcode: op, Flags: qp.SendSignaled, NumSGE: len(sgl)}
	copy(wr.SGL[:], sgl)
	return wr
}

func recvWR(id uint64, sgl ...qp.SGE) qp.RecvWR {
	wr := qp.RecvWR{WRID: id, NumSGE: len(sgl)}
	copy(wr.SGL[:], sgl)
	return wr
}

func (t *testPair) postSend(wrs ...qp.SendWR) {
	t.tb.Helper()
	if _, err := t.sim.A.PostSend(t.qa, wrs); err != nil {
		t.tb.Fatal(err)
	}
}

func (t *testPair) postRecv(wrs ...qp.RecvWR) {
	t.tb.Helper()
	if _, err := t.sim.B.PostRecv(t.qb, wrs); err != nil {
		t.tb.Fatal(err)
	}
}

// waitWCs runs the simulation until n completions arrived on cq and
// returns them.
func (t *testPair) waitWCs(e *Engine, cq *CQ, n int, limit time.Duration) []qp.WC {
	t.tb.Helper()
	var got []qp.WC
	ok := t.sim.RunUntil(func() bool {
		k, err := e.PollCQ(cq, t.wcs)
		if err != nil {
			t.tb.Fatal(err)
		}
		got = append(got, t.wcs[:k]...)
		return len(got) >= n
	}, limit)
	if !ok {
		t.tb.Fatalf("got %d of %d completions after %v simulated (A %+v, B %+v)", len(got), n, t.sim.Now(), t.sim.A.Counters(), t.sim.B.Counters())
	}
	return got
}

// settle runs until nothing is pending, so that late duplicates and
// retransmissions have been through the responder too.
func (t *testPair) settle() {
	t.sim.RunFor(200 * time.Millisecond)
}

func fillRandom(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

func wantWC(tb testing.TB, wc qp.WC, id uint64, status qp.WCStatus, op qp.WCOpcode) {
	tb.Helper()
	if wc.WRID != id || wc.Status != status || wc.Opcode != op {
		tb.Fatalf("completion %+v, want wr_id %d status %v opcode %v", wc, id, status, op)
	}
}

func mustEqual(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		tb.Fatalf("%s: %d bytes differ from byte %d on", what, len(want), i)
	}
}
