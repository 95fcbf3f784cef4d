package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// TestServiceTimeKeepsTurn: two QPs each post a 4-packet WRITE on a NIC
// whose scheduler gives a QP 4 packets per turn. With a service time the
// transmit pipeline takes one frame per slot, yet each QP still sends its
// whole turn before the other's (the turn is kept across the slots); the
// same with TxBurst 1 interleaves them packet by packet.
func TestServiceTimeKeepsTurn(t *testing.T) {
	for _, burst := range []int{4, 1} {
		var order []uint32 // destination QPN of each WRITE frame A sends
		atob := fabric.LinkConfig{Drop: func(f []byte) bool {
			b := f[14+20+8:]
			if op := bth.Opcode(b[0]); op >= bth.RCWriteFirst && op <= bth.RCWriteOnly {
				order = append(order, uint32(b[5])<<16|uint32(b[6])<<8|uint32(b[7]))
			}
			return false
		}}
		p := newTestPair(t, SimConfig{AtoB: atob, ServiceRate: 10e9, TxBurst: burst, FetchPenalty: -1}, ConnParams{MTU: qp.MTU1024})
		qa2, err := p.sim.A.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 16, MaxRecvWR: 16})
		if err != nil {
			t.Fatal(err)
		}
		qb2, err := p.sim.B.CreateQP(p.pdB, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 16, MaxRecvWR: 16})
		if err != nil {
			t.Fatal(err)
		}
		if err := Connect(p.sim.A, qa2, p.sim.B, qb2, ConnParams{MTU: qp.MTU1024}); err != nil {
			t.Fatal(err)
		}
		for i, q := range []*QP{p.qa, qa2} {
			wr := sendWR(uint64(i), qp.WRRDMAWrite, sge(p.mrA, 0, 4<<10))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr+uint64(i)<<12, p.mrB.RKey
			if _, err := p.sim.A.PostSend(q, []qp.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
		}
		p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
		b1, b2 := p.qb.QPN(), qb2.QPN()
		want := []uint32{b1, b1, b1, b1, b2, b2, b2, b2}
		if burst == 1 {
			want = []uint32{b1, b2, b1, b2, b1, b2, b1, b2}
		}
		if len(order) != len(want) {
			t.Fatalf("TxBurst %d: %d WRITE frames (%v), want 8", burst, len(order), order)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("TxBurst %d: WRITE frames to QPs %v, want %v", burst, order, want)
			}
		}
	}
}
