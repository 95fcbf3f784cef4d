package recovery

import (
	"math"
	"testing"
)

// TestMELOOnChipBytes: what softnic charges MELO on chip. Per connection
// 20 bytes at the receiver (three 4-byte holes, RCV.NXT and RCV.HIGH of
// 3 bytes, start_ptr and end_ptr of 1) and 2 at the sender (its chain's
// start_ptr and end_ptr); shared, two 1 Kb pools of 3 Kb each with their
// next pointers and free-slot stacks (§3.2.3), 768 bytes. Spread over the
// paper's 300 connections that is 24.56 bytes each: the paper's 23 B
// (§3.2.4) is 20 + 768/300, without the sender's pointers.
func TestMELOOnChipBytes(t *testing.T) {
	s, err := New(MELO, Params{})
	if err != nil {
		t.Fatal(err)
	}
	rx, tx, shared := s.NewReceiver().OnChipBytes(), s.NewSender().OnChipBytes(), s.SharedOnChipBytes()
	if rx != 20 || tx != 2 || shared != 768 {
		t.Fatalf("receiver %d B, sender %d B, shared %d B; want 20, 2, 768", rx, tx, shared)
	}
	if avg := float64(rx+tx) + float64(shared)/300; math.Abs(avg-24.56) > 1e-9 {
		t.Fatalf("%.4f B per connection at 300", avg)
	}
	if paper := 20 + float64(shared)/300; math.Round(paper) != 23 {
		t.Fatalf("the paper's count, %.2f B, does not round to its 23 B", paper)
	}
}
