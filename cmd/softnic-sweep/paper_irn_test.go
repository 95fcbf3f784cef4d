package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPaperIRNFig1Quick: `softnic-sweep paper irn-fig1 -quick` runs a
// k = 4 fat tree for 50 µs of arrivals and writes its CSV, in the
// issue's columns, a row per scheme and PFC setting, every flow complete
// but gbn's without PFC, no drop with PFC and no pause without, and its
// PNG.
func TestPaperIRNFig1Quick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["irn-fig1"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "irn-fig1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.HasPrefix(lines[0], "scheme,pfc,cc,load,seed,avg_slowdown,avg_fct_us,p99_fct_us,drops,pauses,cnps,ecn_marks,") || len(lines) != 5 {
		t.Fatalf("csv:\n%s", b)
	}
	for _, want := range []string{"irn,off,none,0.70,1,", "irn,on,none,", "gbn,on,none,", "gbn,off,none,"} {
		if !strings.Contains(string(b), "\n"+want) {
			t.Errorf("no row %q in\n%s", want, b)
		}
	}
	col := strings.Split(lines[0], ",")
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		for i, c := range col {
			// gbn without PFC collapses (go-back-N resending at line
			// rate into full queues) and may be censored 10 ms on.
			if c == "unfinished" && f[i] != "0" && !strings.HasPrefix(l, "gbn,off,") {
				t.Errorf("%s = %s in %s", c, f[i], l)
			}
			if c == "pauses" && strings.Contains(l, ",off,") && f[i] != "0" {
				t.Errorf("pauses without PFC: %s", l)
			}
			if c == "drops" && strings.Contains(l, ",on,") && f[i] != "0" {
				t.Errorf("drops with PFC: %s", l)
			}
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "irn-fig1.png")); err != nil || st.Size() < 1000 {
		t.Errorf("png: %v", err)
	}
}

// TestPaperIRNFig4Registered: the congestion-control variants exist and
// name their algorithm among their parameters.
func TestPaperIRNFig4Registered(t *testing.T) {
	for _, cc := range []string{"dcqcn", "timely"} {
		p, ok := paperPresets["irn-fig4-"+cc]
		if !ok {
			t.Fatalf("no irn-fig4-%s", cc)
		}
		found := false
		for _, pa := range p.Params {
			found = found || (pa.Name == "congestion control" && strings.HasPrefix(pa.Value, cc))
		}
		if !found {
			t.Errorf("irn-fig4-%s: no congestion control parameter", cc)
		}
	}
}

// TestPaperIRNFig7Quick: `softnic-sweep paper irn-fig7 -quick` writes a
// row for irn and each of its two variants, none with PFC, every flow
// complete.
func TestPaperIRNFig7Quick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["irn-fig7"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "irn-fig7.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("csv:\n%s", b)
	}
	for i, want := range []string{"irn,off,none,", "irn-gbn,off,none,", "irn-nobdpfc,off,none,"} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("row %d %q, want %q...", i+1, lines[i+1], want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "irn-fig7.png")); err != nil || st.Size() < 1000 {
		t.Errorf("png: %v", err)
	}
}

// TestPaperIRNFig9Quick: `softnic-sweep paper irn-fig9 -quick` runs a
// 2 MB incast from 4 senders in a k = 4 fat tree: irn without PFC (as
// §3.1 and with irn.timeout_all) and gbn with PFC, the latter without a
// drop, and a positive RCT for all.
func TestPaperIRNFig9Quick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["irn-fig9"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "irn-fig9.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || lines[0] != strings.Join([]string{"scheme", "pfc", "cc", "m", "seed", "rct_us", "drops", "pauses", "cnps", "ecn_marks",
		"queue_p99_bytes", "retransmits", "failed", "qps", "k", "total_bytes", "wall_s"}, ",") {
		t.Fatalf("csv:\n%s", b)
	}
	if !strings.HasPrefix(lines[1], "irn,off,none,4,1,") || !strings.HasPrefix(lines[2], "irn-timeoutall,off,none,4,1,") || !strings.HasPrefix(lines[3], "gbn,on,none,4,1,") {
		t.Errorf("rows:\n%s", b)
	}
	if f := strings.Split(lines[3], ","); f[6] != "0" || f[5] == "0.0" {
		t.Errorf("gbn with PFC: drops %s, RCT %s", f[6], f[5])
	}
	if st, err := os.Stat(filepath.Join(dir, "irn-fig9.png")); err != nil || st.Size() < 1000 {
		t.Errorf("png: %v", err)
	}
}

// TestPlotIRN: `softnic-sweep plot-irn` redraws a preset's PNG from its
// CSV, the bars' and the incast's, and refuses a CSV without its columns.
func TestPlotIRN(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"irn-fig7", "irn-fig9"} {
		if err := paperPresets[name].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"-in", filepath.Join(dir, "irn-fig7.csv"), "-out", filepath.Join(dir, "again7.png"), "-title", "t"},
		{"-incast", "-in", filepath.Join(dir, "irn-fig9.csv"), "-out", filepath.Join(dir, "again9.png"), "-title", "t"},
	} {
		if err := plotIRNCmd(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, f := range []string{"again7.png", "again9.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := plotIRNCmd([]string{"-incast", "-in", filepath.Join(dir, "irn-fig7.csv"), "-out", filepath.Join(dir, "x.png")}); err == nil || !strings.Contains(err.Error(), `no "m" column`) {
		t.Errorf("irn-fig7.csv as an incast: %v", err)
	}
}

// TestPaperIRNLongQuick: `softnic-sweep paper irn-long -quick` writes its
// four rows: irn with and without PFC, gbn with DCQCN with and without.
func TestPaperIRNLongQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["irn-long"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "irn-long.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nirn,off,none,0.70,1,", "\nirn,on,none,", "\ngbn,on,dcqcn,", "\ngbn,off,dcqcn,"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no row %q in\n%s", want[1:], b)
		}
	}
}
