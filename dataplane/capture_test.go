package dataplane

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

type captured struct {
	dir   CaptureDir
	at    time.Duration
	frame []byte
}

// TestCaptureSeesWireFrames: the tap sees exactly the frames the engine
// puts on the fabric, sealed (valid ICRC), in order, and every frame the
// fabric delivers to it, before parsing (a truncated frame too).
func TestCaptureSeesWireFrames(t *testing.T) {
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 3, AtoB: lossyLink(0.02), BtoA: lossyLink(0.02)}, ConnParams{MTU: qp.MTU1024})
	var onA, onB []captured
	p.sim.A.SetCapture(func(d CaptureDir, now time.Duration, f []byte) {
		onA = append(onA, captured{d, now, append([]byte(nil), f...)})
	})
	p.sim.B.SetCapture(func(d CaptureDir, now time.Duration, f []byte) {
		onB = append(onB, captured{d, now, append([]byte(nil), f...)})
	})
	var wireAB, deliveredAB [][]byte
	p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, f []byte, dropped bool) {
		if d != fabric.AtoB {
			return
		}
		wireAB = append(wireAB, append([]byte(nil), f...))
		if !dropped {
			deliveredAB = append(deliveredAB, wireAB[len(wireAB)-1])
		}
	})
	for i := uint64(1); i <= 4; i++ {
		p.checkWrite(i, 40<<10, false)
	}
	p.settle()
	var txA, rxB [][]byte
	for _, c := range onA {
		if c.dir == CaptureTX {
			txA = append(txA, c.frame)
		}
	}
	for _, c := range onB {
		if c.dir == CaptureRX {
			rxB = append(rxB, c.frame)
		}
	}
	if len(txA) == 0 || len(txA) != len(wireAB) {
		t.Fatalf("A's tap saw %d transmitted frames, the fabric carried %d", len(txA), len(wireAB))
	}
	if len(deliveredAB) == len(wireAB) {
		t.Fatal("no frame lost: the run did not exercise loss")
	}
	ext := 0
	for i := range txA {
		if !bytes.Equal(txA[i], wireAB[i]) {
			t.Fatalf("transmitted frame %d differs from the wire's", i)
		}
		f, err := bth.ParseFrame(txA[i])
		if err != nil || !f.VerifyICRC() {
			t.Fatalf("transmitted frame %d: parse %v, ICRC ok %v", i, err, err == nil && f.VerifyICRC())
		}
		if f.Pkt.Opcode() >= 0xC0 {
			ext++
		}
	}
	if ext == 0 {
		t.Fatal("no extension opcode among fasr's frames")
	}
	// The hop duplicates and reorders: B receives every delivered frame,
	// the duplicated ones twice, in any order.
	dups := int(p.sim.Fabric.Stats(fabric.AtoB).Duplicated)
	if len(rxB) != len(deliveredAB)+dups {
		t.Fatalf("B's tap saw %d received frames, the fabric delivered %d and duplicated %d", len(rxB), len(deliveredAB), dups)
	}
	want := map[string]int{}
	for _, f := range deliveredAB {
		want[string(f)]++
	}
	for i, f := range rxB {
		if want[string(f)] == 0 {
			t.Fatalf("received frame %d was not delivered by the fabric", i)
		}
	}
	for i := 1; i < len(onA); i++ {
		if onA[i].at < onA[i-1].at {
			t.Fatalf("capture times go back: %v then %v", onA[i-1].at, onA[i].at)
		}
	}
	// Before parsing: a truncated frame is captured, and counted malformed.
	n := len(onB)
	p.sim.B.mu.Lock()
	p.sim.B.receive(deliveredAB[0][:20])
	p.sim.B.mu.Unlock()
	if len(onB) != n+1 || onB[n].dir != CaptureRX || len(onB[n].frame) != 20 {
		t.Fatalf("truncated frame not captured: %d -> %d frames", n, len(onB))
	}
	// Removed: nothing more is seen.
	p.sim.A.SetCapture(nil)
	p.sim.B.SetCapture(nil)
	n, m := len(onA), len(onB)
	p.checkWrite(9, 4096, false)
	if len(onA) != n || len(onB) != m {
		t.Fatalf("tap still called after SetCapture(nil): %d->%d, %d->%d", n, len(onA), m, len(onB))
	}
}

// TestCaptureDoesNotAllocate: a tap that copies into memory it owns
// keeps the lossy steady state allocation-free (the nil tap is covered by
// the other AllocsPerRun tests).
func TestCaptureDoesNotAllocate(t *testing.T) {
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 14, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)}, ConnParams{MTU: qp.MTU1024})
	buf := make([]byte, 1<<16)
	var frames, bytesSeen int
	tap := func(_ CaptureDir, _ time.Duration, f []byte) {
		frames++
		bytesSeen += copy(buf, f)
	}
	p.sim.A.SetCapture(tap)
	p.sim.B.SetCapture(tap)
	write := []qp.SendWR{sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))}
	write[0].RemoteAddr, write[0].RKey = p.mrB.Addr, p.mrB.RKey
	wcs := make([]qp.WC, 4)
	done := 0
	cond := func() bool {
		n, _ := p.sim.A.PollCQ(p.cqA, wcs)
		done += n
		return done >= 1
	}
	round := func() {
		done = 0
		p.sim.A.PostSend(p.qa, write)
		if !p.sim.RunUntil(cond, time.Second) {
			t.Fatal("round did not complete")
		}
	}
	for i := 0; i < 30; i++ {
		round()
	}
	before := frames
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round with a capture tap, want 0", allocs)
	}
	if frames-before < 50*64 || bytesSeen == 0 {
		t.Fatalf("tap saw %d frames in 50 rounds of 64 packets", frames-before)
	}
}
