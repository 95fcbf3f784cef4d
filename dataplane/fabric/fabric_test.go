package fabric

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/impair"
)

const testMaxFrame = 1500

// send transmits a frame of size bytes (at least 8) from p carrying id in
// its first 8 bytes, and reports whether the queue had room.
func send(p *Port, id uint64, size int) bool {
	buf := p.TxBuffer()
	if buf == nil {
		return false
	}
	binary.BigEndian.PutUint64(buf, id)
	for i := 8; i < size; i++ {
		buf[i] = byte(id) ^ byte(i)
	}
	p.Transmit(size)
	return true
}

func frameID(frame []byte) uint64 { return binary.BigEndian.Uint64(frame) }

// delivery is one frame seen by a receiving port.
type delivery struct {
	to   string
	at   time.Duration
	id   uint64
	size int
}

// receiveAll drains everything deliverable at the clock's time.
func receiveAll(clock Clock, name string, p *Port, into []delivery) []delivery {
	frames := make([][]byte, 7) // deliberately not a divisor of the batches
	for {
		n := p.Receive(frames)
		for _, f := range frames[:n] {
			into = append(into, delivery{to: name, at: clock.Now(), id: frameID(f), size: len(f)})
		}
		if n < len(frames) {
			return into
		}
	}
}

var impaired = LinkConfig{
	Loss: 0.05, Duplicate: 0.03, Reorder: 0.05, ReorderDelay: 30 * time.Microsecond,
	Delay: 10 * time.Microsecond, Jitter: 5 * time.Microsecond, RateBps: 10e9,
}

// runTraffic drives both directions for a while and returns every delivery.
func runTraffic(seed uint64, aToB, bToA LinkConfig) []delivery {
	var clock FakeClock
	f := New(&clock, seed, aToB, bToA, testMaxFrame)
	var got []delivery
	id := uint64(0)
	for range 2000 {
		for range 3 {
			id++
			send(f.A(), id, 64+int(id%1000))
		}
		id++
		send(f.B(), id, 64)
		clock.Advance(700 * time.Nanosecond)
		got = receiveAll(&clock, "A", f.A(), got)
		got = receiveAll(&clock, "B", f.B(), got)
	}
	for {
		next, ok := f.NextDelivery()
		if !ok {
			return got
		}
		clock.Set(max(next, clock.Now()))
		got = receiveAll(&clock, "A", f.A(), got)
		got = receiveAll(&clock, "B", f.B(), got)
	}
}

func TestSeedDeterminism(t *testing.T) {
	first := runTraffic(1, impaired, impaired)
	if len(first) < 5000 {
		t.Fatalf("only %d deliveries", len(first))
	}
	if again := runTraffic(1, impaired, impaired); !slices.Equal(first, again) {
		t.Fatal("same seed gave a different run")
	}
	if other := runTraffic(2, impaired, impaired); slices.Equal(first, other) {
		t.Fatal("different seeds gave the same run")
	}
}

// TestDirectionsAreIndependent checks that A->B's random decisions depend
// only on the seed and A->B's own frames: changing B->A traffic, or turning
// on jitter, leaves the set of frames lost A->B unchanged.
func TestDirectionsAreIndependent(t *testing.T) {
	lost := func(bToA LinkConfig, jitter time.Duration) []uint64 {
		var clock FakeClock
		aToB := LinkConfig{Loss: 0.2, Jitter: jitter}
		f := New(&clock, 7, aToB, bToA, testMaxFrame)
		var dropped []uint64
		f.Tap(func(d Direction, _ time.Duration, frame []byte, drop bool) {
			if d == AtoB && drop {
				dropped = append(dropped, frameID(frame))
			}
		})
		frames := make([][]byte, 64)
		for id := range uint64(1000) {
			send(f.A(), id, 64)
			if id%3 == 0 {
				send(f.B(), id, 64)
			}
			clock.Advance(time.Second)
			f.A().Receive(frames)
			f.B().Receive(frames)
		}
		return dropped
	}
	base := lost(LinkConfig{}, 0)
	if len(base) < 150 {
		t.Fatalf("only %d frames lost", len(base))
	}
	if other := lost(LinkConfig{Loss: 0.5, Duplicate: 0.5}, 0); !slices.Equal(base, other) {
		t.Fatal("B->A configuration changed A->B losses")
	}
	if jittered := lost(LinkConfig{}, time.Millisecond); !slices.Equal(base, jittered) {
		t.Fatal("jitter changed which frames were lost")
	}
}

// statBounds fails unless got is within 6 standard deviations of a binomial
// mean n*p; the seed is fixed, so this checks the model, it cannot flake.
func statBounds(t *testing.T, what string, got uint64, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(got)-mean) > 6*sd {
		t.Errorf("%s = %d, want %.0f ± %.0f", what, got, mean, 6*sd)
	}
}

func TestRandomImpairmentRates(t *testing.T) {
	const n = 100_000
	var clock FakeClock
	cfg := LinkConfig{Loss: 0.1, Duplicate: 0.05, Reorder: 0.2, ReorderDelay: time.Microsecond, QueueFrames: 64}
	f := New(&clock, 42, cfg, LinkConfig{}, testMaxFrame)
	frames := make([][]byte, 64)
	var delivered, inversions int
	var lastID uint64
	for id := uint64(1); id <= n; id++ {
		if !send(f.A(), id, 64) {
			t.Fatal("queue full")
		}
		clock.Advance(100 * time.Nanosecond)
		if id%16 == 0 || id == n {
			clock.Advance(2 * time.Microsecond)
			got := f.B().Receive(frames)
			for _, fr := range frames[:got] {
				if frameID(fr) < lastID {
					inversions++
				}
				lastID = frameID(fr)
			}
			delivered += got
		}
	}
	s := f.Stats(AtoB)
	statBounds(t, "Dropped", s.Dropped, n, cfg.Loss)
	sent := int(s.Transmitted - s.Dropped)
	statBounds(t, "Duplicated", s.Duplicated, sent, cfg.Duplicate)
	statBounds(t, "Reordered", s.Reordered, sent, cfg.Reorder)
	if s.Transmitted != n || s.Delivered != uint64(delivered) ||
		s.Delivered != s.Transmitted-s.Dropped+s.Duplicated || f.B().Pending() != 0 {
		t.Errorf("stats %+v, %d received, %d pending", s, delivered, f.B().Pending())
	}
	if inversions == 0 {
		t.Error("reordering produced no out-of-order delivery")
	}
}

func TestDuplicateIsAnExactCopy(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 3, LinkConfig{Duplicate: 1, Jitter: time.Microsecond}, LinkConfig{}, testMaxFrame)
	send(f.A(), 77, 300)
	clock.Advance(time.Microsecond)
	frames := make([][]byte, 4)
	if n := f.B().Receive(frames); n != 2 || !bytes.Equal(frames[0], frames[1]) || &frames[0][0] == &frames[1][0] {
		t.Fatalf("got %d frames, want two equal frames in separate buffers", n)
	}
	if s := f.Stats(AtoB); s.Duplicated != 1 || s.Delivered != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCopiesGetTheirOwnJitter(t *testing.T) {
	var clock FakeClock
	const delay, jitter = 10 * time.Microsecond, time.Millisecond
	f := New(&clock, 4, LinkConfig{Duplicate: 1, Delay: delay, Jitter: jitter}, LinkConfig{}, testMaxFrame)
	for id := range uint64(100) {
		send(f.A(), id, 64)
	}
	arrivals := map[uint64][]time.Duration{}
	for {
		next, ok := f.NextDelivery()
		if !ok {
			break
		}
		clock.Set(next)
		for _, d := range receiveAll(&clock, "B", f.B(), nil) {
			if d.at < delay || d.at >= delay+jitter {
				t.Fatalf("frame %d delivered at %v, outside [%v, %v)", d.id, d.at, delay, delay+jitter)
			}
			arrivals[d.id] = append(arrivals[d.id], d.at)
		}
	}
	apart := 0
	for id, at := range arrivals {
		if len(at) != 2 {
			t.Fatalf("frame %d delivered %d times", id, len(at))
		}
		if at[0] != at[1] {
			apart++
		}
	}
	if len(arrivals) != 100 || apart < 90 {
		t.Fatalf("%d frames, %d with copies at different times", len(arrivals), apart)
	}
}

func TestDeliveryTimesFollowRateAndDelay(t *testing.T) {
	var clock FakeClock
	const delay = 5 * time.Microsecond
	// 3 Gbit/s: a 1000-byte frame takes 2666.67 ns, so departures round up
	// within a frame but do not drift: the third leaves at exactly 8 µs.
	f := New(&clock, 1, LinkConfig{RateBps: 3e9, Delay: delay}, LinkConfig{}, testMaxFrame)
	var departures []time.Duration
	f.Tap(func(_ Direction, at time.Duration, _ []byte, _ bool) { departures = append(departures, at) })
	frames := make([][]byte, 8)
	// expect receives frames first..len(departures)-1, each exactly at its
	// departure plus the delay and not a nanosecond earlier.
	expect := func(first int) {
		t.Helper()
		for id := first; id < len(departures); id++ {
			at := departures[id] + delay
			clock.Set(max(clock.Now(), at-1))
			if n := f.B().Receive(frames); n != 0 {
				t.Fatalf("frame %d delivered at %v, before %v", frameID(frames[0]), clock.Now(), at)
			}
			if next, ok := f.NextDelivery(); !ok || next != at {
				t.Fatalf("NextDelivery() = %v, %v; want %v", next, ok, at)
			}
			clock.Set(at)
			if n := f.B().Receive(frames); n != 1 || frameID(frames[0]) != uint64(id) {
				t.Fatalf("at %v got %d frames", at, n)
			}
		}
	}
	for id := range uint64(3) {
		send(f.A(), id, 1000)
	}
	if want := []time.Duration{2667, 5334, 8000}; !slices.Equal(departures, want) {
		t.Fatalf("departures %v, want %v", departures, want)
	}
	expect(0)
	clock.Set(20 * time.Microsecond) // after an idle gap the serializer starts at now
	send(f.A(), 3, 375)              // 1000 ns
	clock.Set(20*time.Microsecond + 200)
	send(f.A(), 4, 375) // queued behind the previous frame
	if want := []time.Duration{2667, 5334, 8000, 21000, 22000}; !slices.Equal(departures, want) {
		t.Fatalf("departures %v, want %v", departures, want)
	}
	expect(3)
}

// TestSerializationIsExact compares back-to-back departures with the exact
// rational ceil(start + bits*1e9/rate) for rates that do not divide a
// nanosecond evenly: the serializer must neither drift nor round early.
func TestSerializationIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, rate := range []uint64{1, 3e9, 10e9, 25e9, 1_234_567_891, 99_999_999_977} {
		var clock FakeClock
		clock.Set(1 << 50) // large times must not lose precision
		start := clock.Now()
		f := New(&clock, 1, LinkConfig{RateBps: float64(rate)}, LinkConfig{}, testMaxFrame)
		var departures []time.Duration
		f.Tap(func(_ Direction, at time.Duration, _ []byte, _ bool) { departures = append(departures, at) })
		var bitNanos uint64
		for k := range 2000 {
			size := 8 + rng.IntN(testMaxFrame-8)
			send(f.A(), uint64(k), size)
			bitNanos += uint64(size) * 8 * 1e9
			want := start + time.Duration((bitNanos+rate-1)/rate)
			if departures[k] != want {
				t.Fatalf("rate %d frame %d: departure %v, want %v", rate, k, departures[k], want)
			}
			f.B().Receive(make([][]byte, 1))
		}
	}
}

func TestSetLinkRateFinishesFrameAtOldRate(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{RateBps: 3e9}, LinkConfig{}, testMaxFrame)
	var departures []time.Duration
	f.Tap(func(_ Direction, at time.Duration, _ []byte, _ bool) { departures = append(departures, at) })
	send(f.A(), 0, 1000) // 2666.67 ns
	f.SetLink(AtoB, LinkConfig{RateBps: 8e9})
	send(f.A(), 1, 1000) // 1000 ns, after the first frame's rounded-up end
	if want := []time.Duration{2667, 3667}; !slices.Equal(departures, want) {
		t.Fatalf("departures %v, want %v", departures, want)
	}
}

func TestFrameQueuesBehindAFractionalNanosecond(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{RateBps: 3e9}, LinkConfig{}, testMaxFrame)
	var departures []time.Duration
	f.Tap(func(_ Direction, at time.Duration, _ []byte, _ bool) { departures = append(departures, at) })
	send(f.A(), 0, 1000) // on the wire until 2666.67 ns
	clock.Set(2666)      // the serializer is still busy for 2/3 ns
	send(f.A(), 1, 1000) // so this one ends at 5333.33, not 5332.67
	if want := []time.Duration{2667, 5334}; !slices.Equal(departures, want) {
		t.Fatalf("departures %v, want %v", departures, want)
	}
}

func TestHugeDelaysSaturate(t *testing.T) {
	var clock FakeClock
	clock.Set(time.Hour)
	f := New(&clock, 1, LinkConfig{Delay: math.MaxInt64, Jitter: math.MaxInt64}, LinkConfig{}, testMaxFrame)
	send(f.A(), 0, 64)
	if next, ok := f.NextDelivery(); !ok || next != math.MaxInt64 {
		t.Fatalf("NextDelivery() = %v, %v; want the end of time", next, ok)
	}
	if f.B().Receive(make([][]byte, 1)) != 0 {
		t.Fatal("a frame delayed forever was delivered")
	}
}

func TestFIFOWithoutJitterOrReorder(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 9, LinkConfig{Delay: 3 * time.Microsecond, RateBps: 1e9, Loss: 0.1}, LinkConfig{}, testMaxFrame)
	var got []uint64
	frames := make([][]byte, 5)
	for id := uint64(0); id < 5000; id++ {
		send(f.A(), id, 64+int(id*37%1400))
		clock.Advance(time.Duration(id % 3000))
		for n := f.B().Receive(frames); n > 0; n = f.B().Receive(frames) {
			for _, fr := range frames[:n] {
				got = append(got, frameID(fr))
			}
		}
	}
	clock.Advance(time.Second)
	for n := f.B().Receive(frames); n > 0; n = f.B().Receive(frames) {
		for _, fr := range frames[:n] {
			got = append(got, frameID(fr))
		}
	}
	if !slices.IsSorted(got) || len(got) != int(f.Stats(AtoB).Delivered) || len(got) < 4000 {
		t.Fatalf("%d frames delivered, in order %v", len(got), slices.IsSorted(got))
	}
}

func TestEqualDeliveryTimesKeepTransmitOrder(t *testing.T) {
	var clock FakeClock
	// Frames transmitted at different times with different delays, all
	// arriving at 3 µs: they must come out in transmit order.
	f := New(&clock, 1, LinkConfig{Delay: 3 * time.Microsecond}, LinkConfig{}, testMaxFrame)
	id := uint64(0)
	for range 10 {
		send(f.A(), id, 64)
		id++
	}
	clock.Set(2 * time.Microsecond)
	f.SetLink(AtoB, LinkConfig{Delay: time.Microsecond})
	for range 10 {
		send(f.A(), id, 64)
		id++
	}
	clock.Set(3 * time.Microsecond)
	frames := make([][]byte, 32)
	n := f.B().Receive(frames)
	for i, fr := range frames[:n] {
		if frameID(fr) != uint64(i) {
			t.Fatalf("position %d holds frame %d", i, frameID(fr))
		}
	}
	if n != int(id) {
		t.Fatalf("got %d frames", n)
	}
}

func TestBackPressure(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{QueueFrames: 4, Delay: time.Microsecond}, LinkConfig{}, testMaxFrame)
	for id := range uint64(4) {
		if !send(f.A(), id, 64) {
			t.Fatalf("frame %d refused", id)
		}
	}
	if f.A().TxBuffer() != nil || f.B().Pending() != 4 {
		t.Fatal("TxBuffer succeeded on a full queue")
	}
	// Delivered but not yet received frames still occupy the queue.
	clock.Advance(time.Microsecond)
	if f.A().TxBuffer() != nil {
		t.Fatal("queue freed before Receive")
	}
	frames := make([][]byte, 1)
	f.B().Receive(frames)
	if !send(f.A(), 4, 64) || f.A().TxBuffer() != nil {
		t.Fatal("Receive did not free exactly one slot")
	}
	if s := f.Stats(AtoB); s.Dropped != 0 || s.Transmitted != 5 {
		t.Fatalf("back-pressure lost frames: %+v", s)
	}

	// Dropped frames free their slot at once; duplicates take a slot, and a
	// copy that does not fit is not made.
	f.SetLink(AtoB, LinkConfig{QueueFrames: 2, Duplicate: 1})
	clock.Advance(time.Second)
	for f.B().Receive(make([][]byte, 8)) > 0 {
	}
	send(f.A(), 5, 64)
	if f.B().Pending() != 2 || f.A().TxBuffer() != nil {
		t.Fatalf("frame and copy: %d pending", f.B().Pending())
	}
	f.SetLink(AtoB, LinkConfig{QueueFrames: 3, Duplicate: 1})
	send(f.A(), 6, 64)
	if f.B().Pending() != 3 || f.Stats(AtoB).Duplicated != 1 {
		t.Fatalf("copy beyond the bound: %d pending, stats %+v", f.B().Pending(), f.Stats(AtoB))
	}
	f.SetLink(AtoB, LinkConfig{QueueFrames: 3, Drop: func([]byte) bool { return true }})
	for range 3 {
		if f.A().TxBuffer() != nil {
			t.Fatal("TxBuffer on a full queue")
		}
	}
	f.B().Receive(make([][]byte, 1))
	for id := range uint64(100) {
		if !send(f.A(), 10+id, 64) {
			t.Fatal("dropped frames kept their slots")
		}
	}
}

func TestReceivedFramesStayValidUntilNextReceive(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{}, LinkConfig{}, testMaxFrame)
	for id := range uint64(4) {
		send(f.A(), id, 100)
	}
	frames := make([][]byte, 2)
	if n := f.B().Receive(frames); n != 2 || f.B().Pending() != 2 {
		t.Fatalf("Receive into 2 slots: %d, %d pending", n, f.B().Pending())
	}
	want := [][]byte{bytes.Clone(frames[0]), bytes.Clone(frames[1])}
	held := map[*byte]bool{&frames[0][0]: true, &frames[1][0]: true}
	// Heavy transmitting must not hand out the buffers the receiver holds.
	for id := uint64(10); id < 20; id++ {
		buf := f.A().TxBuffer()
		if held[&buf[0]] {
			t.Fatal("TxBuffer lent a buffer the receiver still holds")
		}
		for i := range buf {
			buf[i] = 0xee
		}
		f.A().Transmit(100)
	}
	if !bytes.Equal(frames[0], want[0]) || !bytes.Equal(frames[1], want[1]) {
		t.Fatal("held frames changed before the next Receive")
	}
	// The next Receive returns them to the pool, and they are reused.
	f.B().Receive(frames)
	reused := 0
	for range 2 {
		buf := f.A().TxBuffer()
		if held[&buf[0]] {
			reused++
		}
		f.A().Transmit(8)
	}
	if reused != 2 {
		t.Fatalf("%d of 2 released buffers reused", reused)
	}
	if len(f.A().TxBuffer()) != testMaxFrame || f.A().MaxFrame() != testMaxFrame {
		t.Fatal("TxBuffer length is not MaxFrame")
	}
}

func TestTxBufferTwiceReturnsSameBuffer(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{}, LinkConfig{}, testMaxFrame)
	first := f.A().TxBuffer()
	if second := f.A().TxBuffer(); &first[0] != &second[0] {
		t.Fatal("second TxBuffer returned another buffer")
	}
	f.A().Transmit(10)
	defer func() {
		if recover() == nil {
			t.Fatal("Transmit without TxBuffer did not panic")
		}
	}()
	f.A().Transmit(10)
}

func TestDropHook(t *testing.T) {
	var clock FakeClock
	var seen []uint64
	dropOdd := func(frame []byte) bool {
		seen = append(seen, frameID(frame))
		return frameID(frame)%2 == 1
	}
	f := New(&clock, 1, LinkConfig{}, LinkConfig{Drop: dropOdd}, testMaxFrame)
	for id := range uint64(10) {
		send(f.B(), id, 64)
	}
	got := receiveAll(&clock, "A", f.A(), nil)
	if len(got) != 5 || len(seen) != 10 || f.Stats(BtoA).Dropped != 5 {
		t.Fatalf("delivered %v, hook saw %v", got, seen)
	}
	for i, d := range got {
		if d.id != uint64(2*i) {
			t.Fatalf("delivered %v", got)
		}
	}
}

func TestTap(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{Delay: time.Microsecond, Drop: func(fr []byte) bool { return frameID(fr) == 2 }},
		LinkConfig{RateBps: 8e9}, testMaxFrame)
	var log []string
	f.Tap(func(d Direction, at time.Duration, frame []byte, dropped bool) {
		log = append(log, fmt.Sprintf("%v %v id=%d len=%d dropped=%v", d, at, frameID(frame), len(frame), dropped))
	})
	clock.Set(100)
	send(f.A(), 1, 64)
	send(f.A(), 2, 65)
	send(f.B(), 3, 1000)
	f.Tap(nil)
	send(f.B(), 4, 64)
	f.B().Flush() // a no-op: Transmit already queued the frame
	if f.A().Pending() != 2 {
		t.Fatalf("%d frames pending towards A", f.A().Pending())
	}
	want := []string{
		"A->B 100ns id=1 len=64 dropped=false",
		"A->B 100ns id=2 len=65 dropped=true",
		"B->A 1.1µs id=3 len=1000 dropped=false",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("tap saw\n%v\nwant\n%v", log, want)
	}
	if s := Direction(7).String(); s != "Direction(7)" {
		t.Fatalf("Direction(7).String() = %q", s)
	}
}

func TestSetLink(t *testing.T) {
	var clock FakeClock
	f := New(&clock, 1, LinkConfig{Delay: 10 * time.Microsecond}, LinkConfig{}, testMaxFrame)
	send(f.A(), 1, 64)
	f.SetLink(AtoB, LinkConfig{Delay: 2 * time.Microsecond})
	send(f.A(), 2, 64)
	// The frame in flight keeps its old delay; the new one overtakes it.
	if next, _ := f.NextDelivery(); next != 2*time.Microsecond {
		t.Fatalf("NextDelivery() = %v", next)
	}
	clock.Set(10 * time.Microsecond)
	got := receiveAll(&clock, "B", f.B(), nil)
	if len(got) != 2 || got[0].id != 2 || got[1].id != 1 {
		t.Fatalf("delivered %v", got)
	}
	f.SetLink(AtoB, LinkConfig{Loss: 1})
	for id := range uint64(50) {
		send(f.A(), id, 64)
	}
	if s := f.Stats(AtoB); s.Dropped != 50 || f.B().Pending() != 0 || s.Transmitted != 52 {
		t.Fatalf("Loss 1: stats %+v", s)
	}
	if _, ok := f.NextDelivery(); ok {
		t.Fatal("NextDelivery with nothing queued")
	}
}

func TestInvalidConfigurationPanics(t *testing.T) {
	bad := []LinkConfig{
		{Loss: -0.1}, {Loss: 1.5}, {Duplicate: math.NaN()}, {Reorder: 2},
		{Delay: -1}, {Jitter: -1}, {ReorderDelay: -1},
		{RateBps: -1}, {RateBps: 0.5}, {RateBps: math.NaN()}, {RateBps: math.Inf(1)}, {RateBps: 1e16},
		{QueueFrames: -1},
	}
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		f()
	}
	for _, c := range bad {
		mustPanic(fmt.Sprintf("New with %+v", c), func() { New(new(FakeClock), 1, LinkConfig{}, c, testMaxFrame) })
	}
	mustPanic("New without a clock", func() { New(nil, 1, LinkConfig{}, LinkConfig{}, testMaxFrame) })
	mustPanic("New with maxFrame 0", func() { New(new(FakeClock), 1, LinkConfig{}, LinkConfig{}, 0) })
	f := New(new(FakeClock), 1, LinkConfig{}, LinkConfig{}, testMaxFrame)
	f.A().TxBuffer()
	mustPanic("Transmit beyond MaxFrame", func() { f.A().Transmit(testMaxFrame + 1) })
	mustPanic("Transmit of a negative length", func() { f.A().Transmit(-1) })
}

func TestFakeClock(t *testing.T) {
	var c FakeClock
	c.Advance(5)
	c.Set(10)
	c.Set(10)
	if c.Now() != 10 {
		t.Fatalf("Now() = %v", c.Now())
	}
	for name, f := range map[string]func(){"Set backwards": func() { c.Set(9) }, "negative Advance": func() { c.Advance(-1) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// cycle transmits batch 1 KiB frames from A, lets 50 µs pass (longer than
// the impaired link needs to serialize and deliver them) and receives them
// at B.
func cycle(tb testing.TB, clock *FakeClock, f *Fabric, frames [][]byte, batch int) {
	a, b := f.A(), f.B()
	for range batch {
		buf := a.TxBuffer()
		if buf == nil {
			tb.Fatal("queue full")
		}
		buf[0]++
		a.Transmit(1024)
	}
	clock.Advance(50 * time.Microsecond)
	for b.Receive(frames) > 0 {
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	var clock FakeClock
	cfg := impaired
	cfg.Drop = func(frame []byte) bool { return frame[0] == 0xff }
	cfg.ReorderDelay = 20 * time.Microsecond
	f := New(&clock, 1, cfg, cfg, 2048)
	taps := 0
	f.Tap(func(Direction, time.Duration, []byte, bool) { taps++ })
	frames := make([][]byte, 32)
	for range 1000 { // warm-up: the pools and heaps reach their high-water mark
		cycle(t, &clock, f, frames, 32)
	}
	if allocs := testing.AllocsPerRun(1000, func() { cycle(t, &clock, f, frames, 32) }); allocs != 0 {
		t.Fatalf("%v allocations per 32-frame transmit/receive cycle", allocs)
	}
	if taps == 0 || f.Stats(AtoB).Delivered == 0 {
		t.Fatal("nothing went through")
	}
}

func BenchmarkTransmitReceive(b *testing.B) {
	for _, tc := range []struct {
		name  string
		cfg   LinkConfig
		batch int
	}{
		{"clean/1", LinkConfig{}, 1},
		{"clean/32", LinkConfig{}, 32},
		{"impaired/32", impaired, 32},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var clock FakeClock
			f := New(&clock, 1, tc.cfg, LinkConfig{}, 2048)
			frames := make([][]byte, tc.batch)
			b.SetBytes(int64(1024 * tc.batch))
			b.ReportAllocs()
			for b.Loop() {
				cycle(b, &clock, f, frames, tc.batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tc.batch), "ns/frame")
		})
	}
}

// TestPortNextDelivery: each port reports only the frames queued towards
// it, earliest first.
func TestPortNextDelivery(t *testing.T) {
	clock := &FakeClock{}
	f := New(clock, 1, LinkConfig{Delay: 5 * time.Microsecond}, LinkConfig{Delay: 2 * time.Microsecond}, 256)
	if _, ok := f.B().NextDelivery(); ok {
		t.Fatal("empty port has a delivery")
	}
	f.A().TxBuffer()
	f.A().Transmit(64) // towards B, at 5 µs
	f.B().TxBuffer()
	f.B().Transmit(64) // towards A, at 2 µs
	if at, ok := f.B().NextDelivery(); !ok || at != 5*time.Microsecond {
		t.Fatalf("B: %v %v, want 5µs", at, ok)
	}
	if at, ok := f.A().NextDelivery(); !ok || at != 2*time.Microsecond {
		t.Fatalf("A: %v %v, want 2µs", at, ok)
	}
}

// TestNetemLink: a link given netem words loses, delays with netem's
// jitter (uniform around the delay), corrupts one bit of a frame, and
// refuses to be combined with the legacy fields.
func TestNetemLink(t *testing.T) {
	spec, err := impair.Parse("loss 10% delay 20us 5us corrupt 5% duplicate 2%")
	if err != nil {
		t.Fatal(err)
	}
	var clock FakeClock
	const n = 20000
	f := New(&clock, 5, LinkConfig{Delay: time.Microsecond, Netem: spec}, LinkConfig{}, testMaxFrame)
	sent := map[uint64]time.Duration{}
	frames := make([][]byte, 64)
	received, flipped := 0, 0
	// Frames carry their id twice, then zeros: one flipped bit shows
	// wherever it is.
	check := func() {
		for {
			k := f.B().Receive(frames)
			for _, fr := range frames[:k] {
				received++
				a, b := binary.BigEndian.Uint64(fr), binary.BigEndian.Uint64(fr[8:])
				diff := bits.OnesCount64(a ^ b)
				for _, c := range fr[16:] {
					diff += bits.OnesCount8(c)
				}
				if diff > 1 {
					t.Fatalf("frame %d/%d: %d bits flipped", a, b, diff)
				}
				flipped += diff
				if a != b {
					continue
				}
				if d := clock.Now() - sent[a]; d < 16*time.Microsecond || d >= 26*time.Microsecond+100 {
					t.Fatalf("frame %d delivered %v after it was sent, want in [16us, 26us) (+100ns of clock step)", a, d)
				}
			}
			if k < len(frames) {
				return
			}
		}
	}
	for id := uint64(1); id <= n; id++ {
		sent[id] = clock.Now()
		buf := f.A().TxBuffer()
		clear(buf[:200])
		binary.BigEndian.PutUint64(buf, id)
		binary.BigEndian.PutUint64(buf[8:], id)
		f.A().Transmit(200)
		clock.Advance(100 * time.Nanosecond)
		check()
	}
	for {
		next, ok := f.NextDelivery()
		if !ok {
			break
		}
		clock.Set(max(next, clock.Now()))
		check()
	}
	st := f.Stats(AtoB)
	if st.Dropped < n*8/100 || st.Dropped > n*12/100 {
		t.Errorf("%d of %d dropped, want about 10%%", st.Dropped, n)
	}
	if st.Corrupted == 0 || uint64(flipped) != st.Corrupted {
		t.Errorf("%d frames corrupted, %d bits found flipped", st.Corrupted, flipped)
	}
	if uint64(received) != st.Transmitted-st.Dropped+st.Duplicated || st.Duplicated == 0 {
		t.Errorf("received %d, stats %+v", received, st)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "use one or the other") {
			t.Errorf("Netem with Loss: %v", r)
		}
	}()
	f.SetLink(AtoB, LinkConfig{Loss: 0.1, Netem: spec})
}
