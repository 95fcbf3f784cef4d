package sweep

import (
	"testing"
	"time"
)

// TestMeloCopyRisesWithLoss: in Fig. 6a's setup more loss leaves more
// packets out of order, so more bytes come out of the reorder buffer and
// the copy takes more of a core; lossless, none do. The trace is the
// measured stretch's own: the bytes copied during the warm-up are not in
// it.
func TestMeloCopyRisesWithLoss(t *testing.T) {
	var prev MeloCopyPoint
	for i, l := range []float64{0, 5e-4, 5e-3} {
		p, err := RunMeloCopy(MeloFig6aConfig(l, time.Millisecond, 4*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("loss %g: %.3f GB/s out of order (%d packets), %.1f%% of a core, %.2f Gb/s", l, p.OOOBytesPerSec/1e9, p.Run.ROBPackets, 100*p.CoreFraction, p.Run.GoodputGbps)
		switch {
		case i == 0 && (p.Run.ROBBytes != 0 || p.CoreFraction != 0):
			t.Fatalf("lossless: %d bytes out of order", p.Run.ROBBytes)
		case i > 0 && (p.OOOBytesPerSec <= prev.OOOBytesPerSec || p.CoreFraction <= prev.CoreFraction):
			t.Fatalf("loss %g: %v B/s, not above %v at loss %g", l, p.OOOBytesPerSec, prev.OOOBytesPerSec, prev.Loss)
		case p.Run.ROBBytes > p.Run.ROBPackets*1024:
			t.Fatalf("%d bytes in %d packets of at most 1024", p.Run.ROBBytes, p.Run.ROBPackets)
		}
		if p.CoreFraction != p.OOOBytesPerSec/MeloCopyBytesPerSec {
			t.Fatalf("core fraction %v, want %v", p.CoreFraction, p.OOOBytesPerSec/MeloCopyBytesPerSec)
		}
		prev = p
	}
}
