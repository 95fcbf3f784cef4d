package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPaperFasrFig7cQuick: `softnic-sweep paper fasr-fig7c -quick` runs a
// smoke version of Fig. 7c and writes its CSV, in the columns,
// with a row for each of the four NICs and loss, and its PNG.
func TestPaperFasrFig7cQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["fasr-fig7c"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "fasr-fig7c.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "scheme,loss,goodput_gbps" || len(lines) != 9 {
		t.Fatalf("csv:\n%s", b)
	}
	for _, want := range []string{"gbn,0,", "gbn,0.01,", "srnic,0,", "srnic,0.01,", "irn,0,", "irn,0.01,", "fasr,0,", "fasr,0.01,"} {
		if !strings.Contains(string(b), "\n"+want) {
			t.Errorf("no row %q in\n%s", want, b)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "fasr-fig7c.png")); err != nil || st.Size() < 1000 {
		t.Errorf("png: %v", err)
	}
}

// TestPaperFasrDiveQuick: the Fig. 9b and Fig. 10 presets' smoke runs
// write their CSVs (a row per QP count) and PNGs.
func TestPaperFasrDiveQuick(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fasr-fig9", "fasr-fig10"} {
		if err := paperPresets[name].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
			t.Fatal(name, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if !strings.HasPrefix(lines[0], "qps,loss,rx_fast,rx_slow,tx_fast,tx_slow,fast_share,bitmap_blocks_peak") || len(lines) != 3 {
			t.Errorf("%s csv:\n%s", name, b)
		}
		if st, err := os.Stat(filepath.Join(dir, name+".png")); err != nil || st.Size() < 1000 {
			t.Errorf("%s png: %v", name, err)
		}
	}
}

// TestQPSweepFlags: -nics takes server or both, -rto fixed or adaptive;
// anything else is a usage error.
func TestQPSweepFlags(t *testing.T) {
	for _, args := range [][]string{{"qps", "-nics", "client"}, {"qps", "-rto", "slow"}} {
		var stderr bytes.Buffer
		if code := exitStatus(sweepCmd(args), &stderr); code != 2 {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}

// TestQPSweepOneTimeout: `qps -one-timeout` is the sweep before issue 14
// (every scheme's timeout the fixed 16.8 ms), and at 16 QPs and 1% loss
// fasr waits out lost tails there; by default, with its own timeouts, it
// does not.
func TestQPSweepOneTimeout(t *testing.T) {
	rate := func(extra ...string) float64 {
		dir := t.TempDir()
		args := append([]string{"qps", "-schemes", "fasr", "-qps", "16", "-sizes", "8192", "-loss", "1", "-measure", "10ms", "-out", dir}, extra...)
		if err := sweepCmd(args); err != nil {
			t.Fatal(args, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "qps.csv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("%v: csv\n%s", args, b)
		}
		v, err := strconv.ParseFloat(strings.Split(lines[1], ",")[7], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	own, one := rate(), rate("-one-timeout")
	if own < 10*one {
		t.Fatalf("fasr at 16 QPs, 1%% loss: own timeouts %.0f msg/s, one 16.8 ms timeout %.0f msg/s", own, one)
	}
}
