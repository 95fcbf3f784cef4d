package recovery

import (
	"testing"

	"github.com/softnic/softnic/qp"
)

func newSRNIC(t *testing.T) (*srnicSender, *srnicReceiver, *HostMemory) {
	t.Helper()
	h := &HostMemory{}
	s, err := New(SRNIC, Params{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	return s.NewSender().(*srnicSender), s.NewReceiver().(*srnicReceiver), h
}

// TestSRNICOnChipBytes: 12 B of SR state per QP on chip (FaSR §V-A), the
// bitmaps in host memory, whatever the BDP cap.
func TestSRNICOnChipBytes(t *testing.T) {
	for _, bdp := range []int{0, 1024} {
		s, _ := New(SRNIC, Params{BDPPackets: bdp})
		if got := s.NewSender().OnChipBytes() + s.NewReceiver().OnChipBytes(); got != 12 {
			t.Fatalf("BDP %d: %d bytes per QP on chip, want 12", bdp, got)
		}
		irn, _ := New(IRN, Params{BDPPackets: bdp})
		if s.ReorderWindow() != irn.ReorderWindow() || s.SharedOnChipBytes() != irn.SharedOnChipBytes() {
			t.Fatalf("BDP %d: window or shared state differs from IRN's", bdp)
		}
	}
}

// TestSRNICReceiverHostAccess: keeping a packet out of order costs no
// stall; moving the expected PSN over kept packets reads the host bitmap
// once, and in-order progress with nothing kept never does.
func TestSRNICReceiverHostAccess(t *testing.T) {
	_, rcv, h := newSRNIC(t)
	start := qp.PSN(0xFFFFFE) // across the wrap
	rcv.Reset(start)
	accesses := func() uint64 { n, _ := h.Stats(); return n }
	rcv.OnInSequence(0, start.Add(1))
	rcv.OnInSequence(0, start.Add(2))
	if n := accesses(); n != 0 {
		t.Fatalf("%d host accesses for in-order progress", n)
	}
	// 2 is lost; 3 and 4 arrive and are kept.
	for _, d := range []uint32{3, 4} {
		if act := rcv.OnOutOfSequence(0, start.Add(2), start.Add(d), false); !act.Keep || act.Reply != ReplySack {
			t.Fatalf("PSN +%d: %+v", d, act)
		}
	}
	if n := accesses(); n != 0 {
		t.Fatalf("%d host accesses for recording out-of-order packets", n)
	}
	// The retransmission of 2 arrives; the walk moves RCV-NXT to 5.
	if kept, _ := rcv.Kept(start.Add(3)); !kept {
		t.Fatal("PSN +3 not kept")
	}
	rcv.OnInSequence(0, start.Add(5))
	if n := accesses(); n != 1 {
		t.Fatalf("%d host accesses for the walk, want 1", n)
	}
	if d := h.Take(); d != DefaultHostLatency {
		t.Fatalf("stall %v, want %v", d, DefaultHostLatency)
	}
	rcv.OnInSequence(0, start.Add(6))
	if n := accesses(); n != 1 || rcv.kept != 0 {
		t.Fatalf("%d host accesses, %d kept after the hole closed", n, rcv.kept)
	}
	// Two holes: filling the first still leaves a packet kept, and
	// the next move reads the bitmap again.
	rcv.OnOutOfSequence(0, start.Add(6), start.Add(7), false)
	rcv.OnOutOfSequence(0, start.Add(6), start.Add(9), false)
	rcv.OnInSequence(0, start.Add(8))
	rcv.OnInSequence(0, start.Add(10))
	if n := accesses(); n != 3 || rcv.kept != 0 {
		t.Fatalf("%d host accesses, %d kept; want 3 and 0", n, rcv.kept)
	}
}

// TestSRNICSenderHostAccess: IRN's loss rule, and each PSN collected
// for resending reads the host bitmap once.
func TestSRNICSenderHostAccess(t *testing.T) {
	snd, _, h := newSRNIC(t)
	snd.Reset(100)
	sent := qp.PSN(110)
	snd.OnSack(0, 105, 105, Received, sent)
	snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 100, Sent: sent})
	if n, _ := h.Stats(); n != 0 {
		t.Fatalf("%d host accesses for taking a SACK", n)
	}
	if got := drain(snd); !samePSNs(got, 100, 101, 102, 103, 104) {
		t.Fatalf("resent %v, want 100..104", got)
	}
	if n, d := h.Stats(); n != 5 || d != 5*DefaultHostLatency {
		t.Fatalf("%d host accesses (%v), want 5", n, d)
	}
}
