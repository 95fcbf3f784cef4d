//go:build linux

package udpport

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/tests/netns"
)

// ackDropper is the responder's port with a lossy wire behind it: it
// drops the first ACK frame sent for each PSN (the first ACK of every
// message when each message asks once), and records the largest receive
// batch.
type ackDropper struct {
	*Port
	buf      []byte
	last     uint32 // PSN+1 of the last ACK dropped
	dropped  int
	maxBatch int
}

func (p *ackDropper) TxBuffer() []byte {
	p.buf = p.Port.TxBuffer()
	return p.buf
}

func (p *ackDropper) Transmit(n int) {
	if f, err := bth.ParseFrame(p.buf[:n]); err == nil && f.Pkt.Opcode() == bth.RCAcknowledge &&
		f.Pkt.AETH().Syndrome().Kind() == bth.AckKind && f.Pkt.BTH().PSN()+1 != p.last {
		p.last = f.Pkt.BTH().PSN() + 1
		p.dropped++
		return // lost on the wire: the slot is reused by the next TxBuffer
	}
	p.Port.Transmit(n)
}

func (p *ackDropper) Receive(frames [][]byte) int {
	n := p.Port.Receive(frames)
	p.maxBatch = max(p.maxBatch, n)
	return n
}

// TestIGBNSTOnUDPPort: Improved go-back-N's ST over real ports. The
// requester sends each message's last packet twice; on a kernel UDP
// socket both copies reach the responder in one receive batch, and each
// must get an ACK frame of its own, so that losing the first ACK of
// every message costs no ACK timeout (local_ack_timeout_err stays 0).
func TestIGBNSTOnUDPPort(t *testing.T) {
	tb := netns.NewTestbed(t)
	pa, pb := openPorts(t, tb, false)
	drop := &ackDropper{Port: pb}
	ea, err := dataplane.NewEngine(dataplane.Config{Addr: pa.LocalAddr(), Scheme: recovery.IGBN}, pa)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := dataplane.NewEngine(dataplane.Config{MAC: macB, Addr: pb.LocalAddr(), Scheme: recovery.IGBN}, drop)
	if err != nil {
		t.Fatal(err)
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite
	mk := func(e *dataplane.Engine) (*dataplane.MR, *dataplane.CQ, *dataplane.QP) {
		pd := e.AllocPD()
		mr, err := e.RegMR(pd, make([]byte, 4096), 0, access)
		if err != nil {
			t.Fatal(err)
		}
		cq, err := e.CreateCQ(16, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, err := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
		if err != nil {
			t.Fatal(err)
		}
		return mr, cq, q
	}
	mrA, cqA, qa := mk(ea)
	mrB, _, qb := mk(eb)
	// A 268 ms ACK timeout: long enough that a busy host's scheduling
	// does not fire it; a lost ACK that ST did not cover does.
	if err := dataplane.Connect(ea, qa, eb, qb, dataplane.ConnParams{Access: access, Timeout: 16}); err != nil {
		t.Fatal(err)
	}
	// One goroutine polls both engines; between A's poll, which sends a
	// message's packet and its copy in one sendmmsg, and B's, the copies
	// have time to be queued on B's socket together.
	clock := dataplane.NewMonotonicClock()
	wcs := make([]qp.WC, 4)
	const msgs = 20
	for i := range msgs {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: mrB.Addr, RKey: mrB.RKey}
		wr.SGL[0] = qp.SGE{Addr: mrA.Addr, Length: 512, LKey: mrA.LKey}
		if _, err := ea.PostSend(qa, []qp.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ea.Poll(clock.Now())
			time.Sleep(2 * time.Millisecond)
			eb.Poll(clock.Now())
			n, err := ea.PollCQ(cqA, wcs)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				if n != 1 || wcs[0].Status != qp.WCSuccess || wcs[0].WRID != uint64(i) {
					t.Fatalf("message %d: completions %+v", i, wcs[:n])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("message %d did not complete in 10 s: A %+v, B %+v", i, ea.Counters(), eb.Counters())
			}
		}
	}
	a, b := ea.Counters(), eb.Counters()
	t.Logf("A: sent %d, timeouts %d, retransmitted %d; B: duplicates %d, ACKs sent %d, dropped %d; largest batch at B %d",
		a.SentPkts, a.LocalAckTimeout, a.Retransmits, b.DuplicateRequest, b.AcksSent, drop.dropped, drop.maxBatch)
	if drop.maxBatch < 2 {
		t.Errorf("the two copies never arrived in one receive batch: the case under test did not happen")
	}
	if drop.dropped != msgs || b.DuplicateRequest != msgs || b.AcksSent != 2*msgs {
		t.Errorf("dropped %d ACKs, %d duplicates at the responder, %d ACKs sent; want %d, %d, %d (one ACK per copy)",
			drop.dropped, b.DuplicateRequest, b.AcksSent, msgs, msgs, 2*msgs)
	}
	if a.LocalAckTimeout != 0 || a.Retransmits != 0 {
		t.Errorf("local_ack_timeout_err %d, retransmitted_pkts %d with one of each message's two ACKs lost; want 0, 0", a.LocalAckTimeout, a.Retransmits)
	}
}
