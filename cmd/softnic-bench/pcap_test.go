package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
)

// TestEmbeddedPcap: write_bw --embedded --pcap FILE on a lossy fasr
// fabric writes a pcap file whose every frame is a whole RoCEv2 frame,
// with fasr's WRITEs and the SACKs the loss brings among them; without
// --embedded, --pcap is a usage error.
func TestEmbeddedPcap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bench.pcap")
	code, out, errs := bench(t, "write_bw", "--embedded", "-n", "100", "--scheme", "fasr", "--loss", "2", "--pcap", file)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcap.NewReader(fh)
	if err != nil {
		t.Fatalf("not a pcap file: %v", err)
	}
	ops := map[bth.Opcode]int{}
	n := 0
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", n+1, err)
		}
		n++
		off, ok := capture.BTHOffset(p.Data)
		if !ok || p.OrigLen != len(p.Data) {
			t.Fatalf("frame %d: %d of %d bytes, BTH found %v: %x", n, len(p.Data), p.OrigLen, ok, p.Data)
		}
		ops[bth.Opcode(p.Data[off])]++
	}
	t.Logf("%d frames: %v", n, ops)
	if ops[bth.RCWriteMiddleOOO] == 0 || ops[bth.RCAcknowledgeSACK] == 0 {
		t.Errorf("want fasr's WRITEs and SACKs among the frames: %v", ops)
	}
	code, _, errs = bench(t, "write_bw", "--pcap", file)
	if code != 2 || !strings.Contains(errs, "--pcap writes the embedded NICs' frames") {
		t.Errorf("--pcap without --embedded: exit %d, %q; want 2 and a usage error", code, errs)
	}
}
