package sim

import (
	"testing"
	"time"
)

// TestStepTo: StepTo never moves the clock past its target, moves it
// there when nothing is due before, and never moves it back.
func TestStepTo(t *testing.T) {
	s, err := New(Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s.StepTo(5*time.Millisecond) || s.Now() != 5*time.Millisecond {
		t.Fatalf("idle: StepTo(5ms) left the clock at %v", s.Now())
	}
	if s.StepTo(time.Millisecond) || s.Now() != 5*time.Millisecond {
		t.Fatalf("StepTo into the past moved the clock to %v", s.Now())
	}
}
