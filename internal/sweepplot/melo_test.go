package sweepplot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/internal/sweep"
)

// TestMeloCopy draws Fig. 6a from points (a lossless one, which has no
// place on the log axis, is left out) with the worst-case line beside
// them, on a y axis from 0 that holds that line.
func TestMeloCopy(t *testing.T) {
	ps := []sweep.MeloCopyPoint{{Loss: 0}, {Loss: 1e-3, OOOBytesPerSec: 2e9, CoreFraction: 2e9 / sweep.MeloCopyBytesPerSec},
		{Loss: 1e-2, OOOBytesPerSec: 4e9, CoreFraction: 4e9 / sweep.MeloCopyBytesPerSec}}
	path := filepath.Join(t.TempDir(), "f.png")
	if err := MeloCopy(path, "t", ps); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Fatalf("%v %v", st, err)
	}
	c := meloCopyChart("t", ps)
	all := 100 * sweep.MeloLinkBps / 8 / sweep.MeloCopyBytesPerSec
	if len(c.lines) != 2 || len(c.lines[0].pts) != 2 || c.lines[0].pts[1].Y != 100*ps[2].CoreFraction || c.lines[1].pts[0].Y != all ||
		c.yMin != 0 || c.yMax < all {
		t.Fatalf("chart %+v", c)
	}
}
