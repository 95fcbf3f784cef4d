package cc

import (
	"testing"
	"time"
)

// TestNone: none never limits a QP, never asks for a CNP, wants no timer
// and ignores every CNP, whatever happens to the QP.
func TestNone(t *testing.T) {
	a, err := New(None, Params{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != None || a.Caps().ECN || a.Counters() != nil {
		t.Errorf("none: name %q, caps %+v, counters %v", a.Name(), a.Caps(), a.Counters())
	}
	s, r := a.NewSender(), a.NewReceiver()
	s.Reset(0)
	r.Reset(0)
	var p Pacer
	for i := range 10_000 {
		now := Time(i) * 100 * time.Nanosecond
		if s.OnCNP(now) {
			t.Fatalf("%v: a CNP handled", now)
		}
		s.OnRTT(now, time.Duration(i%500)*time.Microsecond)
		s.OnSent(now, 1078)
		s.OnTimer(now)
		if r.OnCE(now) {
			t.Fatalf("%v: a CNP asked for", now)
		}
		if s.Rate() != 0 {
			t.Fatalf("%v: rate %d", now, s.Rate())
		}
		if _, ok := s.Deadline(); ok {
			t.Fatalf("%v: a deadline", now)
		}
		if !p.Open(now) {
			t.Fatalf("%v: paced", now)
		}
		p.NextSend(now, 1078, s.Rate())
	}
}

// TestNoneAllocs: none's halves are built and called without allocating.
func TestNoneAllocs(t *testing.T) {
	a, err := New(None, Params{})
	if err != nil {
		t.Fatal(err)
	}
	var s Sender
	var r Receiver
	if n := testing.AllocsPerRun(100, func() { s, r = a.NewSender(), a.NewReceiver() }); n != 0 {
		t.Errorf("building: %v allocations", n)
	}
	now := Time(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += time.Microsecond
		s.OnSent(now, 1078)
		s.OnCNP(now)
		s.OnRTT(now, 10*time.Microsecond)
		s.OnTimer(now)
		_, _ = s.Deadline()
		_ = s.Rate()
		_ = r.OnCE(now)
	}); n != 0 {
		t.Errorf("calls: %v allocations", n)
	}
}
