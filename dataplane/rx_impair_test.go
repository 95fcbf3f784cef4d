package dataplane

import (
	"encoding/binary"
	"math/bits"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// rxBench is a receive stage on port B of a lossless fabric, with the
// engine's clock played by now.
type rxBench struct {
	t      *testing.T
	clock  fabric.FakeClock
	f      *fabric.Fabric
	rx     *rxImpair
	now    time.Duration
	frames [][]byte
	sentAt map[uint64]time.Duration
	nextID uint64
}

func newRxBench(t *testing.T, spec string, prop time.Duration, slots int) *rxBench {
	t.Helper()
	s, err := impair.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	b := &rxBench{t: t, frames: make([][]byte, 16), sentAt: map[uint64]time.Duration{}}
	b.f = fabric.New(&b.clock, 1, fabric.LinkConfig{}, fabric.LinkConfig{}, 256)
	b.rx = newRxImpair(b.f.B(), prop, s, slots, 16, &b.now)
	return b
}

// send transmits a 64-byte frame carrying its id twice, then zeros.
func (b *rxBench) send() {
	b.nextID++
	buf := b.f.A().TxBuffer()
	clear(buf[:64])
	binary.BigEndian.PutUint64(buf, b.nextID)
	binary.BigEndian.PutUint64(buf[8:], b.nextID)
	b.f.A().Transmit(64)
	b.sentAt[b.nextID] = b.clock.Now()
}

// advance moves both clocks by d.
func (b *rxBench) advance(d time.Duration) {
	b.clock.Advance(d)
	b.now = b.clock.Now()
}

// receive returns the ids lent by one Receive and the bits flipped in
// each frame.
func (b *rxBench) receive() (ids []uint64, flipped []int) {
	n := b.rx.Receive(b.frames)
	for _, f := range b.frames[:n] {
		x, y := binary.BigEndian.Uint64(f), binary.BigEndian.Uint64(f[8:])
		d := bits.OnesCount64(x ^ y)
		for _, c := range f[16:] {
			d += bits.OnesCount8(c)
		}
		ids, flipped = append(ids, min(x, y)), append(flipped, d)
	}
	return ids, flipped
}

// TestRxImpairFIFO: a fixed delay (--link-delay, or netem's delay without
// jitter) keeps arrival order and delays every frame exactly.
func TestRxImpairFIFO(t *testing.T) {
	for _, c := range []struct {
		spec string
		prop time.Duration
	}{{"", 10 * time.Microsecond}, {"delay 7us", 3 * time.Microsecond}} {
		b := newRxBench(t, c.spec, c.prop, 64)
		var last uint64
		for step := range 200 {
			if step < 150 {
				b.send()
			}
			ids, _ := b.receive()
			for _, id := range ids {
				if id != last+1 || b.now-b.sentAt[id] != 10*time.Microsecond {
					t.Fatalf("%q: frame %d after %d, %v after it was sent; want FIFO and 10us", c.spec, id, last, b.now-b.sentAt[id])
				}
				last = id
			}
			b.advance(time.Microsecond)
		}
		if last != 150 || b.rx.drops != 0 || b.rx.delayed != 150 {
			t.Fatalf("%q: %d frames out, %d drops, %d delayed", c.spec, last, b.rx.drops, b.rx.delayed)
		}
	}
}

// TestRxImpairJitter: with jitter frames come out in due order, each
// within [delay-jitter, delay+jitter) of its arrival, and some overtake.
func TestRxImpairJitter(t *testing.T) {
	b := newRxBench(t, "delay 20us 10us seed 4", 0, 256)
	overtaken, out := 0, 0
	var last uint64
	for step := range 3000 {
		if step < 2000 {
			b.send()
		}
		ids, _ := b.receive()
		for _, id := range ids {
			if d := b.now - b.sentAt[id]; d < 10*time.Microsecond || d >= 30*time.Microsecond+100 {
				t.Fatalf("frame %d out %v after it arrived, want in [10us, 30us)", id, d)
			}
			if id < last {
				overtaken++
			}
			last = max(last, id)
			out++
		}
		b.advance(100 * time.Nanosecond)
	}
	if out != 2000 || overtaken < 100 {
		t.Fatalf("%d of 2000 frames out, %d overtaken", out, overtaken)
	}
}

// TestRxImpairFullAndCopies: loss drops without a slot, duplicates take a
// second slot and are not corrupted, corruption flips exactly one bit, and
// a full stage (the netem limit) drops and counts.
func TestRxImpairFullAndCopies(t *testing.T) {
	b := newRxBench(t, "delay 1ms duplicate 100% corrupt 100% limit 8", 0, 16)
	for range 10 {
		b.send()
	}
	b.receive()
	if b.rx.drops != 12 || len(b.rx.heap) != 8 {
		t.Fatalf("20 frames and copies into a stage of limit 8: %d dropped, %d held", b.rx.drops, len(b.rx.heap))
	}
	b.advance(time.Millisecond)
	ids, flipped := b.receive()
	if len(ids) != 8 {
		t.Fatalf("%d frames out, want 8", len(ids))
	}
	for i := 0; i < 8; i += 2 {
		if ids[i] != ids[i+1] || flipped[i]+flipped[i+1] != 1 {
			t.Fatalf("frame %d: a copy of %d, bits flipped %d and %d: want one corrupted and one clean", ids[i], ids[i+1], flipped[i], flipped[i+1])
		}
	}
	st := b.rx.stage.Stats()
	if st.Duplicated != 10 || st.Corrupted != 10 {
		t.Fatalf("stats %+v", st)
	}

	loss := newRxBench(t, "loss 100%", 0, 4)
	for range 10 {
		loss.send()
	}
	if ids, _ := loss.receive(); len(ids) != 0 || loss.rx.drops != 0 || loss.rx.stage.Stats().Lost != 10 {
		t.Fatalf("loss 100%%: %d out, %d full drops, stats %+v", len(ids), loss.rx.drops, loss.rx.stage.Stats())
	}
}

// TestRxImpairAllocs: the stage allocates nothing frame by frame.
func TestRxImpairAllocs(t *testing.T) {
	b := newRxBench(t, "loss gemodel 2% 30% delay 5us 2us reorder 5% duplicate 5% corrupt 5% hold 5% 3us", 0, 64)
	cycle := func() {
		for range 4 {
			buf := b.f.A().TxBuffer()
			binary.BigEndian.PutUint64(buf, 1)
			b.f.A().Transmit(64)
		}
		b.rx.Receive(b.frames)
		b.advance(2 * time.Microsecond)
	}
	for range 100 {
		cycle()
	}
	if n := testing.AllocsPerRun(500, cycle); n != 0 {
		t.Fatalf("%v allocations per cycle", n)
	}
}

// TestNetemEngine: a netem Spec set on running engines impairs what they
// receive (counters move, corrupted frames fail the ICRC), the transport
// recovers, and clearing it stops the stage.
func TestNetemEngine(t *testing.T) {
	spec, err := impair.Parse("loss 1% delay 20us 5us reorder 5% duplicate 1% corrupt 1% hold 2% 10us seed 9")
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		params := recovery.Params{RTOLow: time.Millisecond, RTOHigh: 2 * time.Millisecond}
		p := newSchemePair(t, scheme, params, SimConfig{Seed: 81, AtoB: delayLink(time.Microsecond), BtoA: delayLink(time.Microsecond)},
			ConnParams{MTU: qp.MTU1024, Timeout: 14})
		p.checkWrite(1, 4096, false)
		for _, e := range []*Engine{p.sim.A, p.sim.B} {
			if err := e.SetNetem(spec); err != nil {
				t.Fatal(err)
			}
		}
		if got := p.sim.B.Netem(); got != spec {
			t.Fatalf("Netem() = %v, want %v", got, spec)
		}
		for i := range uint64(20) {
			p.checkWrite(i+2, 64<<10, false)
		}
		b := p.sim.B.Counters()
		if b.ImpairFrames < 1000 || b.ImpairLost == 0 || b.ImpairDuplicated == 0 || b.ImpairReordered == 0 ||
			b.ImpairHeld == 0 || b.ImpairCorrupted == 0 || b.ImpairDelayed == 0 || b.RcvdICRCErr+b.RcvdMalformed == 0 {
			t.Fatalf("%s: counters did not move: %+v", scheme, b)
		}
		// Setting a seeded Spec again restarts the streams, not the counters.
		if err := p.sim.B.SetNetem(spec); err != nil {
			t.Fatal(err)
		}
		if again := p.sim.B.Counters(); again.ImpairFrames != b.ImpairFrames || again.ImpairLost != b.ImpairLost {
			t.Fatalf("%s: counters went from %d frames, %d lost to %d, %d", scheme, b.ImpairFrames, b.ImpairLost, again.ImpairFrames, again.ImpairLost)
		}
		for _, e := range []*Engine{p.sim.A, p.sim.B} {
			if err := e.SetNetem(impair.Spec{}); err != nil {
				t.Fatal(err)
			}
		}
		p.checkWrite(40, 64<<10, false) // drains what the stage held
		before := p.sim.B.Counters().ImpairFrames
		p.checkWrite(41, 64<<10, false)
		if after := p.sim.B.Counters().ImpairFrames; after != before {
			t.Fatalf("%s: cleared stage still decided %d frames", scheme, after-before)
		}
	}
	// Errors: a bad Spec, and a limit above the stage's slots.
	p := newTestPair(t, SimConfig{}, ConnParams{MTU: qp.MTU1024})
	if err := p.sim.A.SetNetem(impair.Spec{LossPct: 200}); err == nil {
		t.Error("loss 200% accepted")
	}
	if err := p.sim.A.SetNetem(impair.Spec{Limit: DefaultLinkDelaySlots + 1, LossPct: 1}); err == nil {
		t.Error("limit above the slots accepted")
	}
}

// TestNetemSteadyStateAllocs: the engine with a netem stage on receive
// allocates nothing in steady state.
func TestNetemSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count is checked in the full run")
	}
	spec, _ := impair.Parse("loss 0.5% delay 10us 2us reorder 2% duplicate 0.5% corrupt 0.1% seed 1")
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 14, AtoB: lossyLink(0), BtoA: lossyLink(0), Netem: spec}, ConnParams{MTU: qp.MTU1024})
	write := []qp.SendWR{sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))}
	write[0].RemoteAddr, write[0].RKey = p.mrB.Addr, p.mrB.RKey
	wcs := make([]qp.WC, 4)
	round := func() {
		p.sim.A.PostSend(p.qa, write)
		if !p.sim.RunUntil(func() bool { n, _ := p.sim.A.PollCQ(p.cqA, wcs); return n > 0 }, time.Second) {
			t.Fatal("round did not complete")
		}
	}
	for range 30 {
		round()
	}
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round, want 0", allocs)
	}
	if c := p.sim.B.Counters(); c.ImpairFrames == 0 || c.ImpairLost == 0 {
		t.Fatalf("the stage did not run: %+v", c)
	}
}
