package recovery

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

func TestRegistry(t *testing.T) {
	s, err := New(GBN, Params{})
	if err != nil || s.Name() != GBN {
		t.Fatalf("New(gbn) = %v, %v", s, err)
	}
	if p := s.Params(); p.NakInterval != DefaultNakInterval || p.AckReqInterval != DefaultAckReqInterval {
		t.Fatalf("defaults not applied: %+v", p)
	}
	if _, err := New("nope", Params{}); err == nil {
		t.Fatal("unknown scheme accepted")
	}
}

// TestGBNReceiverNakInterval: one NAK for the first out-of-sequence
// packet, none within the NAK interval, one again after it, and a fresh
// NAK right away once the expected PSN has arrived.
func TestGBNReceiverNakInterval(t *testing.T) {
	s, _ := New(GBN, Params{NakInterval: 100 * time.Microsecond})
	r := s.NewReceiver()
	r.Reset(10)
	us := time.Microsecond
	steps := []struct {
		now     time.Duration
		psn     qp.PSN
		wantNak bool
	}{
		{0, 11, true}, {10 * us, 12, false}, {99 * us, 13, false}, {100 * us, 14, true}, {150 * us, 15, false},
	}
	for _, st := range steps {
		a := r.OnOutOfSequence(st.now, 10, st.psn, false)
		if a.Keep || (a.Reply == ReplySeqNak) != st.wantNak {
			t.Fatalf("at %v psn %d: %+v, want nak %v and drop", st.now, st.psn, a, st.wantNak)
		}
	}
	r.OnInSequence(160*us, 11)
	if a := r.OnOutOfSequence(161*us, 11, 13, false); a.Reply != ReplySeqNak {
		t.Fatal("no NAK for a new hole after progress")
	}
	if _, ok := r.Deadline(); ok {
		t.Fatal("gbn wants a receiver timer")
	}
}

func TestGBNSender(t *testing.T) {
	s, _ := New(GBN, Params{})
	snd := s.NewSender()
	if r := snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 42, Sent: 50}); !r.GoBack || r.GoBackTo != 42 {
		t.Fatalf("OnNak: %+v", r)
	}
	if r := snd.OnTimeout(0, 7, 9); !r.GoBack || r.GoBackTo != 7 {
		t.Fatalf("OnTimeout: %+v", r)
	}
	if _, ok := snd.NextRetransmit(); ok || snd.Window() != 0 || snd.Copies(true) != 1 {
		t.Fatal("gbn sender retransmits selectively, windows or duplicates")
	}
	if d := snd.Timeout(time.Millisecond, 1000, RTT{}); d != time.Millisecond {
		t.Fatalf("timeout %v", d)
	}
	s, _ = New(GBN, Params{Knobs: KnobValues{"gbn.window": "110"}})
	if w := s.NewSender().Window(); w != 110 {
		t.Fatalf("gbn.window=110: window %d", w)
	}
}
