package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
)

// TestDemoPcap: softnic demo --pcap FILE writes the lossy run's frames to
// a valid pcap file, every one a whole RoCEv2 frame.
func TestDemoPcap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "demo.pcap")
	if err := demo([]string{"-n", "50", "--scheme", "fasr", "--loss", "2", "--pcap", file}); err != nil {
		t.Fatal(err)
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
		if _, ok := capture.BTHOffset(p.Data); !ok || p.OrigLen != len(p.Data) {
			t.Fatalf("frame %d: %d of %d bytes, BTH found %v", n, len(p.Data), p.OrigLen, ok)
		}
	}
	if n == 0 {
		t.Fatal("no frames in the file")
	}
	t.Logf("%d frames", n)
}
