package recovery

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

func newIRN(t *testing.T, p Params) (*irnSender, *irnReceiver) {
	t.Helper()
	s, err := New(IRN, p)
	if err != nil {
		t.Fatal(err)
	}
	return s.NewSender().(*irnSender), s.NewReceiver().(*irnReceiver)
}

// drain collects what NextRetransmit hands out, reporting each one sent.
func drain(s Sender) []qp.PSN {
	var got []qp.PSN
	for psn, ok := s.NextRetransmit(); ok; psn, ok = s.NextRetransmit() {
		got = append(got, psn)
		s.Retransmitted(psn)
	}
	return got
}

func samePSNs(got []qp.PSN, want ...qp.PSN) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestIRNSenderLossRule walks IRN §3.1 across the 2^24 PSN wrap: a NACK
// starts recovery, the cumulative acknowledgement is resent first, then
// only packets below a selectively acknowledged one, each once; recovery
// ends when the cumulative acknowledgement passes the recovery sequence.
func TestIRNSenderLossRule(t *testing.T) {
	snd, _ := newIRN(t, Params{})
	const start = qp.PSN(0xFFFFFC)
	snd.Reset(start)
	sent := start.Add(12) // PSNs start .. start+11 are out
	if _, ok := snd.NextRetransmit(); ok {
		t.Fatal("retransmission outside recovery")
	}
	// Responder got start+0, +1 in order, then +3, +6, +9 (lost: 2, 4, 5, 7, 8).
	if got := snd.OnAck(0, start.Add(2)); got != start.Add(2) {
		t.Fatalf("cumulative %#x", got)
	}
	for _, k := range []uint32{3, 6, 9} {
		snd.OnSack(0, start.Add(k), start.Add(k), Received, sent)
	}
	got := drain(snd)
	if !samePSNs(got, start.Add(2), start.Add(4), start.Add(5), start.Add(7), start.Add(8)) {
		t.Fatalf("retransmitted %x", got)
	}
	// More NACKs for later packets reveal nothing new.
	snd.OnSack(0, start.Add(10), start.Add(10), Received, sent)
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %x again", got)
	}
	// The holes are filled: the cumulative acknowledgement jumps over the
	// selectively acknowledged PSNs, but start+11 was never acknowledged,
	// so recovery (sequence start+11) goes on.
	if got := snd.OnAck(0, start.Add(9)); got != start.Add(11) || !snd.recovery {
		t.Fatalf("cumulative %#x, recovery %v", got, snd.recovery)
	}
	if got := snd.OnAck(0, start.Add(12)); got != start.Add(12) || snd.recovery {
		t.Fatalf("recovery did not end past its sequence: %#x %v", got, snd.recovery)
	}
	// A new NACK starts a new episode with a new recovery sequence.
	sent = start.Add(20)
	snd.OnSack(0, start.Add(14), start.Add(14), Received, sent)
	if got := drain(snd); !samePSNs(got, start.Add(12), start.Add(13)) || snd.recoverSeq != start.Add(19) {
		t.Fatalf("second episode resent %x, recovery sequence %#x", got, snd.recoverSeq)
	}
}

// TestIRNSenderPeekAndRange: NextRetransmit does not consume (a full
// transmit ring loses nothing); a contiguous range acknowledged from the
// cumulative acknowledgement is no loss signal.
func TestIRNSenderPeekAndRange(t *testing.T) {
	snd, _ := newIRN(t, Params{})
	snd.Reset(100)
	snd.OnSack(0, 100, 104, Received, 110) // an ACK's SENDs and WRITEs, no hole below
	if snd.recovery {
		t.Fatal("a contiguous acknowledgement started recovery")
	}
	if got := snd.OnAck(0, 100); got != 105 {
		t.Fatalf("cumulative %d, want 105", got)
	}
	snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 105, Sent: 110})
	for range 3 {
		if psn, ok := snd.NextRetransmit(); !ok || psn != 105 {
			t.Fatalf("peek %d %v", psn, ok)
		}
	}
	snd.Retransmitted(105)
	if _, ok := snd.NextRetransmit(); ok {
		t.Fatal("a NAK without selective acknowledgements made more than the cumulative one lost")
	}
}

// TestIRNSenderTimeout: a retransmission that is lost again is only found
// by the timer, which restarts the scan from the cumulative acknowledgement.
func TestIRNSenderTimeout(t *testing.T) {
	snd, _ := newIRN(t, Params{})
	snd.Reset(0)
	snd.OnSack(0, 2, 2, Received, 4)
	if got := drain(snd); !samePSNs(got, 0, 1) {
		t.Fatalf("resent %v", got)
	}
	// 0 arrived, 1 was lost again.
	snd.OnAck(0, 1)
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %v without a new signal", got)
	}
	snd.OnTimeout(0, 1, 4)
	if got := drain(snd); !samePSNs(got, 1) {
		t.Fatalf("after the timeout resent %v, want [1]", got)
	}
	// A tail loss with nothing acknowledged after it: the timer resends
	// only the cumulative acknowledgement (§3.1).
	snd.OnAck(0, 4)
	snd.OnTimeout(0, 4, 7)
	if got := drain(snd); !samePSNs(got, 4) {
		t.Fatalf("tail timeout resent %v, want [4]", got)
	}
}

// TestIRNTimeoutAll: with irn.timeout_all=1 a timeout resends every
// packet out and not acknowledged, once, selectively acknowledged ones
// excepted; the next timeout does it again.
func TestIRNTimeoutAll(t *testing.T) {
	snd, _ := newIRN(t, Params{Knobs: KnobValues{"irn.timeout_all": "1"}})
	snd.Reset(0)
	snd.OnSack(0, 5, 5, Received, 9) // 0-8 out, 5 arrived
	if got := drain(snd); !samePSNs(got, 0, 1, 2, 3, 4) {
		t.Fatalf("after the SACK resent %v", got)
	}
	snd.OnAck(0, 2) // 0 and 1 arrived; 2-4 lost again, 6-8 lost
	snd.OnTimeout(0, 2, 9)
	if got := drain(snd); !samePSNs(got, 2, 3, 4, 6, 7, 8) {
		t.Fatalf("after the timeout resent %v, want 2-4 and 6-8", got)
	}
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %v twice in a round", got)
	}
	snd.OnTimeout(0, 2, 9)
	if got := drain(snd); !samePSNs(got, 2, 3, 4, 6, 7, 8) {
		t.Fatalf("after a second timeout resent %v", got)
	}
}

// TestIRNTimeoutChoice: RTO_low with at most N in flight, RTO_high
// otherwise, neither longer than the QP's ACK timeout.
func TestIRNTimeoutChoice(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		p        Params
		base     time.Duration
		inflight int
		want     time.Duration
	}{
		{Params{}, time.Millisecond, 1, 100 * us},
		{Params{}, time.Millisecond, 3, 100 * us},
		{Params{}, time.Millisecond, 4, 320 * us},
		{Params{RTOHigh: 2 * time.Millisecond}, time.Millisecond, 4, time.Millisecond},
		{Params{RTOLow: 50 * us, RTOLowThreshold: 8}, time.Millisecond, 8, 50 * us},
		{Params{}, 64 * us, 1, 64 * us},
		{Params{}, 64 * us, 100, 64 * us},
	} {
		snd, _ := newIRN(t, tc.p)
		if got := snd.Timeout(tc.base, tc.inflight, RTT{}); got != tc.want {
			t.Errorf("%+v base %v inflight %d: %v, want %v", tc.p, tc.base, tc.inflight, got, tc.want)
		}
	}
}

// TestIRNOnChipBytes charges IRN §6.1's figure: 160 bits of state and five
// bitmaps of the BDP cap per QP (each half rounded up to bytes), 10 shared
// bytes.
func TestIRNOnChipBytes(t *testing.T) {
	s, _ := New(IRN, Params{})
	snd, rcv := s.NewSender(), s.NewReceiver()
	if snd.Window() != DefaultBDPPackets || s.ReorderWindow() != DefaultBDPPackets {
		t.Fatalf("window %d, reorder window %d", snd.Window(), s.ReorderWindow())
	}
	total := snd.OnChipBytes() + rcv.OnChipBytes()
	if want := (160 + 5*128) / 8; total < want || total > want+1 || s.SharedOnChipBytes() != 10 {
		t.Fatalf("per QP %d+%d bytes (want %d), shared %d", snd.OnChipBytes(), rcv.OnChipBytes(), want, s.SharedOnChipBytes())
	}
	big, _ := New(IRN, Params{BDPPackets: 1024})
	if b := big.NewSender().OnChipBytes() + big.NewReceiver().OnChipBytes(); b < (160+5*1024)/8 || b > (160+5*1024)/8+1 {
		t.Fatalf("1024-packet cap: %d bytes", b)
	}
	if g, _ := New(GBN, Params{}); g.ReorderWindow() != 0 {
		t.Fatal("gbn keeps packets out of order")
	}
}

// TestIRNReceiver: packets in the window are kept and selectively
// acknowledged, a copy is acknowledged again, packets beyond the 2-bitmap
// are dropped silently; the walk finds them with their last-packet bits,
// across the PSN wrap.
func TestIRNReceiver(t *testing.T) {
	_, r := newIRN(t, Params{BDPPackets: 16})
	const e = qp.PSN(0xFFFFFE)
	r.Reset(e)
	if a := r.OnOutOfSequence(0, e, e.Add(2), false); !a.Keep || a.Reply != ReplySack {
		t.Fatalf("first out-of-order packet: %+v", a)
	}
	if a := r.OnOutOfSequence(0, e, e.Add(3), true); !a.Keep {
		t.Fatalf("last packet of a message: %+v", a)
	}
	if a := r.OnOutOfSequence(0, e, e.Add(2), false); a.Keep || a.Reply != ReplySack {
		t.Fatalf("a kept packet again: %+v", a)
	}
	if a := r.OnOutOfSequence(0, e, e.Add(16), false); a != (Decision{}) {
		t.Fatalf("beyond the window: %+v", a)
	}
	// e arrives in order; the transport walks: e+1 is missing.
	if kept, _ := r.Kept(e.Add(1)); kept {
		t.Fatal("e+1 reported kept")
	}
	r.OnInSequence(0, e.Add(1))
	// e+1 arrives: the walk takes e+2, then e+3 (last), and stops at e+4.
	for k, wantLast := range map[uint32]bool{2: false, 3: true} {
		if kept, last := r.Kept(e.Add(k)); !kept || last != wantLast {
			t.Fatalf("Kept(e+%d) = %v %v", k, kept, last)
		}
	}
	if kept, _ := r.Kept(e.Add(4)); kept {
		t.Fatal("e+4 reported kept")
	}
	r.OnInSequence(0, e.Add(4))
	if kept, _ := r.Kept(e.Add(2)); kept {
		t.Fatal("a PSN behind the expected one is still kept")
	}
	// The bits of consumed PSNs do not come back one window later.
	if kept, _ := r.Kept(e.Add(2 + 16)); kept {
		t.Fatal("stale bit after the window slid")
	}
	if _, ok := r.Deadline(); ok {
		t.Fatal("irn wants a receiver timer")
	}
}

// TestIRNSenderHeldAndAnswered: a READ or atomic request the responder
// holds out of order is not resent, though the cumulative acknowledgement
// waits for its response; a later response says the responses before it
// were lost. Each lost PSN goes out once per recovery, however often the
// news repeats.
func TestIRNSenderHeldAndAnswered(t *testing.T) {
	snd, _ := newIRN(t, Params{})
	snd.Reset(0)
	const sent = 10
	// READ requests 0..9, one response each. Request 2 is lost; the
	// responder holds 3 and 4 and NACKs them (expecting 2).
	snd.OnSack(0, 0, 0, Answered, sent)
	snd.OnSack(0, 1, 1, Answered, sent)
	if got := snd.OnAck(0, 0); got != 2 {
		t.Fatalf("cumulative %d, want 2", got)
	}
	snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 2, Sent: sent})
	snd.OnSack(0, 3, 3, Held, sent)
	snd.OnSack(0, 4, 4, Held, sent)
	if got := drain(snd); !samePSNs(got, 2) {
		t.Fatalf("resent %v, want [2] (3 and 4 are held)", got)
	}
	if got := snd.OnAck(0, 2); got != 2 {
		t.Fatalf("held requests moved the cumulative acknowledgement to %d", got)
	}
	// The responder executes 2, 3, 4; the response of 3 is lost, 2 and 4
	// arrive: 3 is lost now, resent once however many responses follow.
	snd.OnSack(0, 2, 2, Answered, sent)
	snd.OnSack(0, 4, 4, Answered, sent)
	snd.OnSack(0, 5, 5, Answered, sent)
	if got := drain(snd); !samePSNs(got, 3) {
		t.Fatalf("resent %v, want [3]", got)
	}
	snd.OnSack(0, 6, 6, Answered, sent)
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %v again", got)
	}
	if got := snd.OnAck(0, 3); got != 3 {
		t.Fatalf("cumulative %d, want 3", got)
	}
	snd.OnSack(0, 3, 3, Answered, sent)
	if got := snd.OnAck(0, 3); got != 7 {
		t.Fatalf("cumulative %d, want 7", got)
	}
}

// TestIRNSenderTimeoutForgetsHeld: the responder held the last READ
// request and its response was lost; nothing follows it, so only the timer
// finds it, and then it must be resent although it was held.
func TestIRNSenderTimeoutForgetsHeld(t *testing.T) {
	snd, _ := newIRN(t, Params{})
	snd.Reset(10)
	snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 10, Sent: 12})
	snd.OnSack(0, 11, 11, Held, 12)
	if got := drain(snd); !samePSNs(got, 10) {
		t.Fatalf("resent %v, want [10]", got)
	}
	snd.OnSack(0, 10, 10, Answered, 12)
	snd.OnAck(0, 10)
	snd.OnTimeout(0, 11, 12)
	if got := drain(snd); !samePSNs(got, 11) {
		t.Fatalf("after the timeout resent %v, want [11]", got)
	}
}
