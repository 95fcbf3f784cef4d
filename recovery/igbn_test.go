package recovery

import (
	"testing"
	"time"
)

func TestIGBNSendsLastTwice(t *testing.T) {
	s, _ := New(IGBN, Params{})
	snd := s.NewSender()
	if snd.Copies(true) != 2 || snd.Copies(false) != 1 {
		t.Fatal("ST: the last packet of a message is not sent twice")
	}
	if r := snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: 9, Sent: 12}); !r.GoBack || r.GoBackTo != 9 {
		t.Fatalf("igbn does not go back on NAK: %+v", r)
	}
}

// TestIGBNCheckEPSN walks the CE timer of Fig. 5: armed by the last packet
// arriving early, NAKing EPSN again when it fires, restarted when EPSN
// arrives, disarmed when the message is complete.
func TestIGBNCheckEPSN(t *testing.T) {
	const nak = 100 * time.Microsecond
	us := time.Microsecond
	s, _ := New(IGBN, Params{NakInterval: nak})
	r := s.NewReceiver()
	r.Reset(0)
	// Packet 0 lost; 1 arrives: NAK(0) now.
	if a := r.OnOutOfSequence(10*us, 0, 1, false); a.Reply != ReplySeqNak {
		t.Fatal("no NAK for the first out-of-sequence packet")
	}
	if _, ok := r.Deadline(); ok {
		t.Fatal("CE armed before the last packet")
	}
	// The last packet (5) arrives at 20 µs: timer for the rest of the interval.
	r.OnOutOfSequence(20*us, 0, 5, true)
	at, ok := r.Deadline()
	if !ok || at != 110*us {
		t.Fatalf("CE deadline %v %v, want 110µs", at, ok)
	}
	if r.OnTimer(109*us, 0) {
		t.Fatal("fired early")
	}
	// The NAK was lost: at 110 µs EPSN is still 0, so NAK again.
	if !r.OnTimer(110*us, 0) {
		t.Fatal("CE did not re-NAK EPSN")
	}
	if at, _ := r.Deadline(); at != 210*us {
		t.Fatalf("restarted at %v, want 210µs", at)
	}
	// EPSN arrives at 150 µs: restart only.
	r.OnInSequence(150*us, 1)
	if at, ok := r.Deadline(); !ok || at != 250*us {
		t.Fatalf("after progress deadline %v %v, want 250µs", at, ok)
	}
	// The message completes: disarmed.
	r.OnInSequence(160*us, 6)
	if _, ok := r.Deadline(); ok {
		t.Fatal("CE still armed after the last PSN arrived")
	}
	if r.OnChipBytes() <= gbnReceiverOnChipBytes {
		t.Fatal("the CE state is not charged as on-chip bytes")
	}
}

// TestGBNSTAndCE: the paper's two halves of IGBN on their own (§IV):
// gbn-st sends a message's last packet twice and has no CE timer, gbn-ce
// has the CE timer and sends everything once.
func TestGBNSTAndCE(t *testing.T) {
	const nak = 100 * time.Microsecond
	for _, tc := range []struct {
		name   string
		copies int
		ce     bool
	}{{GBN, 1, false}, {GBNST, 2, false}, {GBNCE, 1, true}, {IGBN, 2, true}} {
		s, err := New(tc.name, Params{NakInterval: nak})
		if err != nil {
			t.Fatal(err)
		}
		if s.Name() != tc.name {
			t.Fatalf("%s: Name() %q", tc.name, s.Name())
		}
		if n := s.NewSender().Copies(true); n != tc.copies {
			t.Fatalf("%s: last packet sent %d times, want %d", tc.name, n, tc.copies)
		}
		r := s.NewReceiver()
		r.Reset(0)
		r.OnOutOfSequence(0, 0, 1, false)
		r.OnOutOfSequence(time.Microsecond, 0, 5, true) // the last packet, early
		if _, armed := r.Deadline(); armed != tc.ce {
			t.Fatalf("%s: CE timer armed %v, want %v", tc.name, armed, tc.ce)
		}
		if r.OnTimer(nak+time.Microsecond, 0) != tc.ce {
			t.Fatalf("%s: NAK again at the end of the interval: want %v", tc.name, tc.ce)
		}
	}
}
