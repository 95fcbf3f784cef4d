package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

// TestRDMASendsRecvsAsRxe: rdma_sends counts the SEND work requests the
// requester completed, signaled or not, and no other opcode; rdma_recvs
// counts the receive completions, a WRITE with immediate's among them,
// and no WRITE or READ (rxe_comp.c and rxe_resp.c do_complete).
func TestRDMASendsRecvsAsRxe(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 13, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
	const n = 3000
	p.postRecv(recvWR(900, sge(p.mrB, 0, n)), recvWR(901), recvWR(902, sge(p.mrB, n, n)))
	rw := func(id uint64, op qp.WROpcode, off int) qp.SendWR {
		w := sendWR(id, op, sge(p.mrA, off, n))
		w.RemoteAddr, w.RKey = p.mrB.Addr+uint64(4*n+off), p.mrB.RKey
		return w
	}
	unsignaled := sendWR(5, qp.WRSendWithImm, sge(p.mrA, 0, n))
	unsignaled.Flags = 0
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, n)), rw(2, qp.WRRDMAWrite, 0), rw(3, qp.WRRDMAWriteWithImm, n), rw(4, qp.WRRDMARead, 2*n), unsignaled)
	for _, wc := range append(p.waitWCs(p.sim.A, p.cqA, 4, time.Second), p.waitWCs(p.sim.B, p.cqB, 3, time.Second)...) {
		if wc.Status != qp.WCSuccess {
			t.Fatalf("completion %+v, want success", wc)
		}
	}
	p.settle()
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	if a.RDMASends != 2 || b.RDMASends != 0 {
		t.Errorf("rdma_sends: requester %d, responder %d; want 2 (the two SENDs of five work requests) and 0", a.RDMASends, b.RDMASends)
	}
	if b.RDMARecvs != 3 || a.RDMARecvs != 0 {
		t.Errorf("rdma_recvs: responder %d, requester %d; want 3 (two SENDs and a WRITE with immediate) and 0", b.RDMARecvs, a.RDMARecvs)
	}
}
