package main

import (
	"testing"
)

// TestPortFrames: each --mtu gets a chunk size and a frame limit that its
// largest packets fit, and --mtu 4096 is accepted (AF_XDP multi-buffer).
func TestPortFrames(t *testing.T) {
	for _, c := range []struct{ mtu, frameSize, maxFrame int }{
		{1024, 2048, 1792}, {2048, 4096, 3840}, {4096, 4096, 4352},
	} {
		fs, mf := portFrames(c.mtu)
		if fs != c.frameSize || mf != c.maxFrame {
			t.Errorf("--mtu %d: chunk %d, max frame %d; want %d, %d", c.mtu, fs, mf, c.frameSize, c.maxFrame)
		}
		if need := mtuFrameNeed(c.mtu); mf < need {
			t.Errorf("--mtu %d: max frame %d below the %d bytes a full packet needs", c.mtu, mf, need)
		}
		o, err := parseRun([]string{"--iface", "x", "--mtu", map[int]string{1024: "1024", 2048: "2048", 4096: "4096"}[c.mtu]})
		if err != nil || o.mtu != c.mtu {
			t.Errorf("--mtu %d: %v", c.mtu, err)
		}
	}
}
