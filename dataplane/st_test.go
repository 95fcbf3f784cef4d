package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// isAck reports whether frame is a positive RC ACK (not a NAK).
func isAck(frame []byte) bool {
	f, err := bth.ParseFrame(frame)
	return err == nil && f.Pkt.Opcode() == bth.RCAcknowledge && f.Pkt.AETH().Syndrome().Kind() == bth.AckKind
}

// TestIGBNSTAckPerCopy: Improved go-back-N sends a message's last packet
// twice (ST) so that one lost ACK does not cost a timeout. On a link with
// no delay and no serialization both copies reach the responder in one
// receive batch, as they usually do on a real port: each must still get an
// ACK frame of its own, and losing the first ACK must not end in a
// timeout.
func TestIGBNSTAckPerCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   qp.WROpcode
		size int
	}{{"write-only", qp.WRRDMAWrite, 512}, {"write-4pkts", qp.WRRDMAWrite, 4096}, {"send-3pkts", qp.WRSend, 3000}} {
		t.Run(tc.name, func(t *testing.T) {
			dropped := false
			back := fabric.LinkConfig{Drop: func(frame []byte) bool {
				if !dropped && isAck(frame) {
					dropped = true
					return true
				}
				return false
			}}
			p := newTestPair(t, SimConfig{Seed: 41, SchemeA: recovery.IGBN, SchemeB: recovery.IGBN, BtoA: back}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
			var acks int
			p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, _ bool) {
				if d == fabric.BtoA && isAck(frame) {
					acks++
				}
			})
			// With no delay B's port holds every frame A sent before B
			// polls: both copies come in one Receive.
			bp := &batchPort{Port: p.sim.B.port}
			p.sim.B.port = bp
			if tc.op == qp.WRSend {
				p.postRecv(recvWR(1, sge(p.mrB, 0, tc.size)))
			}
			wr := sendWR(1, tc.op, sge(p.mrA, 0, tc.size))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
			p.postSend(wr)
			var wc []qp.WC
			ok := p.sim.RunUntil(func() bool {
				n, _ := p.sim.A.PollCQ(p.cqA, p.wcs)
				wc = append(wc, p.wcs[:n]...)
				return len(wc) > 0
			}, time.Second)
			if !ok {
				t.Fatal("no completion")
			}
			wantWC(t, wc[0], 1, qp.WCSuccess, map[qp.WROpcode]qp.WCOpcode{qp.WRRDMAWrite: qp.WCRDMAWrite, qp.WRSend: qp.WCSend}[tc.op])
			p.settle()
			a, b := p.sim.A.Counters(), p.sim.B.Counters()
			npkts := (tc.size + 1023) / 1024
			if a.SentPkts != uint64(npkts+1) || b.DuplicateRequest != 1 {
				t.Fatalf("sent %d packets (want %d), responder duplicates %d (want 1)", a.SentPkts, npkts+1, b.DuplicateRequest)
			}
			if bp.maxBatch < 2 {
				t.Fatalf("the responder never received the two copies together (batches of at most %d frames)", bp.maxBatch)
			}
			if !dropped || acks != 2 || b.AcksSent != 2 {
				t.Fatalf("ACK frames on the wire %d, acks_sent %d (dropped the first: %v); want one per copy, 2", acks, b.AcksSent, dropped)
			}
			if a.LocalAckTimeout != 0 || a.Retransmits != 0 {
				t.Fatalf("local_ack_timeout_err %d, retransmitted_pkts %d after losing one of the two ACKs; want 0, 0", a.LocalAckTimeout, a.Retransmits)
			}
		})
	}
}

// batchPort records the largest batch a Receive returned.
type batchPort struct {
	Port
	maxBatch int
}

func (p *batchPort) Receive(frames [][]byte) int {
	n := p.Port.Receive(frames)
	p.maxBatch = max(p.maxBatch, n)
	return n
}
