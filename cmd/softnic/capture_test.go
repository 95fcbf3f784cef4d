package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
	"github.com/softnic/softnic/verbs/verbsd"
)

func goldenFrames(t *testing.T) [][]byte {
	raw, err := os.ReadFile("../../bth/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct{ Frame string }
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, g := range golden {
		b, _ := hex.DecodeString(g.Frame)
		out = append(out, b)
	}
	return out
}

// runCapture runs softnic capture with args against a daemon on sim's
// NIC A, feeds A every golden vector rounds times once it listens, and
// returns its error and stderr; interrupt sends SIGINT after the frames.
func runCapture(t *testing.T, rounds int, interrupt bool, args ...string) (error, string) {
	path := filepath.Join(t.TempDir(), "softnic.sock")
	s, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := verbsd.New(s.A, verbsd.Options{SocketPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go srv.Serve(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := captureCmd(append([]string{"-i", path}, args...), io.Discard, pw)
		pw.Close()
		done <- err
	}()
	var stderr strings.Builder
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || !strings.Contains(lines.Text(), "listening on") {
		t.Fatalf("capture did not start: %q", lines.Text())
	}
	stderr.WriteString(lines.Text() + "\n")
	frames := goldenFrames(t)
	for r := 0; r < rounds; r++ {
		for _, f := range frames {
			buf := s.Fabric.B().TxBuffer()
			s.Fabric.B().Transmit(copy(buf, f))
		}
		s.RunFor(time.Millisecond)
	}
	if interrupt {
		time.Sleep(100 * time.Millisecond) // the records reach the client
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	}
	for lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
	}
	select {
	case err := <-done:
		return err, stderr.String()
	case <-time.After(10 * time.Second):
		t.Fatal("softnic capture did not end")
	}
	return nil, ""
}

func readPcap(t *testing.T, path string) []pcap.Packet {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []pcap.Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
}

// TestCaptureCommand: -c stops at the count, --opcode filters, -w writes
// a pcap file, -s cuts frames, and the summary line counts; SIGINT ends
// a capture without -c the same way.
func TestCaptureCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.pcap")
	err, stderr := runCapture(t, 3, false, "-w", file, "-c", "5", "-s", "40", "--opcode", "RC_ACKNOWLEDGE_SACK")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "5 packets captured, 0 dropped") {
		t.Fatalf("stderr %q", stderr)
	}
	sacks := map[string]int{} // the golden SACKs' first 40 bytes and lengths
	for _, f := range goldenFrames(t) {
		if (capture.Filter{QPN: -1, Opcode: 0xD1}).Match(f) {
			sacks[string(f[:40])] = len(f)
		}
	}
	pkts := readPcap(t, file)
	if len(pkts) != 5 || len(sacks) == 0 {
		t.Fatalf("%d packets in the file, want 5", len(pkts))
	}
	for i, p := range pkts {
		if len(p.Data) != 40 || sacks[string(p.Data)] != p.OrigLen {
			t.Fatalf("packet %d: %d of %d bytes, not the first 40 bytes of a golden RC_ACKNOWLEDGE_SACK", i, len(p.Data), p.OrigLen)
		}
	}
	// Until interrupted, all of it.
	file2 := filepath.Join(t.TempDir(), "g.pcap")
	err, stderr = runCapture(t, 2, true, "-w", file2)
	if err != nil {
		t.Fatal(err)
	}
	n := 2 * len(goldenFrames(t))
	if got := len(readPcap(t, file2)); got != n || !strings.Contains(stderr, "packets captured, 0 dropped") {
		t.Fatalf("interrupted capture: %d packets in the file, want %d; stderr %q", got, n, stderr)
	}
	if err := captureCmd([]string{"--opcode", "NOPE"}, io.Discard, io.Discard); exitStatus(err, io.Discard) != 2 {
		t.Fatalf("bad opcode: %v", err)
	}
}
