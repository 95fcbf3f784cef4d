package cc

import (
	"testing"
	"time"
)

// TestPacerSpacing: at a rate, packets are spaced by their own wire time,
// to the nanosecond over a long run even when a packet's time is not a
// whole number of nanoseconds.
func TestPacerSpacing(t *testing.T) {
	var p Pacer
	now := Time(0)
	for i := range 1000 {
		if !p.Open(now) {
			t.Fatalf("packet %d: closed at %v, At %v", i, now, p.At())
		}
		next := p.NextSend(now, 1250, 10_000_000_000) // 1 µs at 10 Gbit/s
		if want := now + time.Microsecond; next != want {
			t.Fatalf("packet %d: next %v, want %v", i, next, want)
		}
		if p.Open(next - 1) {
			t.Fatalf("packet %d: open 1 ns early", i)
		}
		now = next
	}
	// 1 byte at 3 Gbit/s is 8/3 ns: three packets are exactly 8 ns.
	p = Pacer{}
	now = 0
	for range 300 {
		now = p.NextSend(now, 1, 3_000_000_000)
	}
	if now != 800 {
		t.Errorf("300 bytes at 3 Gbit/s end at %v, want 800ns", now)
	}
}

// TestPacerIdleAndBurst: an idle QP gets no credit beyond its burst, and
// from idle a burst of Burst·rate plus one packet goes back to back.
func TestPacerIdleAndBurst(t *testing.T) {
	p := Pacer{Burst: 2 * time.Microsecond}
	now := 100 * time.Microsecond
	sent := 0
	for p.Open(now) {
		p.NextSend(now, 1250, 10_000_000_000)
		sent++
	}
	if sent != 3 {
		t.Errorf("from idle %d packets back to back, want 3 (2 µs of burst and one)", sent)
	}
	if at := p.At(); at != now+time.Microsecond {
		t.Errorf("At %v, want %v", at, now+time.Microsecond)
	}
	// A long idle spell: the next packet may start at once, and the
	// burst is no larger than before.
	now += time.Second
	sent = 0
	for p.Open(now) {
		p.NextSend(now, 1250, 10_000_000_000)
		sent++
	}
	if sent != 3 {
		t.Errorf("after 1 s idle %d packets back to back, want 3", sent)
	}
}

// TestPacerRate: a new rate applies from the next packet; rate 0 opens
// the pacer at once.
func TestPacerRate(t *testing.T) {
	var p Pacer
	if next := p.NextSend(0, 1250, 10_000_000_000); next != time.Microsecond {
		t.Fatalf("next %v", next)
	}
	if next := p.NextSend(time.Microsecond, 1250, 5_000_000_000); next != 3*time.Microsecond {
		t.Errorf("at half the rate next %v, want 3µs", next)
	}
	if next := p.NextSend(3*time.Microsecond, 1250, 0); next != 3*time.Microsecond || !p.Open(3*time.Microsecond) {
		t.Errorf("rate 0: next %v, open %v", next, p.Open(3*time.Microsecond))
	}
}

// TestPacerAllocs: pacing allocates nothing.
func TestPacerAllocs(t *testing.T) {
	var p Pacer
	now := Time(0)
	if n := testing.AllocsPerRun(1000, func() {
		if p.Open(now) {
			now = p.NextSend(now, 1078, 25_000_000_000)
		}
	}); n != 0 {
		t.Errorf("%v allocations per packet", n)
	}
}
