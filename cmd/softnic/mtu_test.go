package main

import (
	"bytes"
	"log/slog"
	"strings"
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

// TestWarnSmallMTU: a port whose frames are smaller than --mtu's full
// packets need gets a warning naming the interface MTU to set; one that
// carries them gets none.
func TestWarnSmallMTU(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	o := options{iface: "b-sw", mtu: 4096}
	warnSmallMTU(log, o, 3014) // a 3000-byte interface MTU
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "iface=b-sw") || !strings.Contains(got, "need_iface_mtu=4180") {
		t.Errorf("MTU 3000 with --mtu 4096: log %q, want a warning asking for 4180", got)
	}
	buf.Reset()
	warnSmallMTU(log, o, 4352)
	warnSmallMTU(log, options{iface: "b-sw", mtu: 1024}, 1514)
	if buf.Len() != 0 {
		t.Errorf("frames that fit: log %q, want nothing", buf.String())
	}
}
