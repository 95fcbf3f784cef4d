package main

import (
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/softnic/softnic/internal/sweep"
)

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPaperIGBNFig6Quick runs igbn-fig6's smoke run: the four schemes at
// 0 and 1% loss (Fig. 6c's timeout), a CSV with the columns first
// and a PNG.
func TestPaperIGBNFig6Quick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["igbn-fig6"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "igbn-fig6c.csv"))
	if !slices.Equal(rows[0][:3], []string{"scheme", "loss", "relative"}) {
		t.Fatalf("header %v", rows[0])
	}
	var schemes []string
	for _, r := range rows[1:] {
		if r[1] == "0" {
			schemes = append(schemes, r[0])
			if r[2] != "1.0000" {
				t.Errorf("%s lossless relative %s", r[0], r[2])
			}
		}
	}
	if !slices.Equal(schemes, []string{"gbn", "gbn-st", "gbn-ce", "igbn"}) {
		t.Fatalf("schemes %v", schemes)
	}
	if _, err := os.Stat(filepath.Join(dir, "igbn-fig6c.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperIGBNFig3Quick runs igbn-fig3's smoke run: go-back-N's timeouts
// at 1% loss, every one classified under one of the four reasons.
func TestPaperIGBNFig3Quick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["igbn-fig3"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "igbn-fig3.csv"))
	if len(rows) != 6 || rows[5][0] != "unclassified" || rows[5][1] != "0" {
		t.Fatalf("rows %v: want four reasons and no unclassified timeout", rows)
	}
	if _, err := os.Stat(filepath.Join(dir, "igbn-fig3.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperIGBNFig7 draws Fig. 7 from three small Fig. 6 CSVs: the rows
// come out by scheme (Fig. 6's order), timeout longest first, then loss,
// with the panels' relative values; a missing panel or a CSV of another
// timeout is an error.
func TestPaperIGBNFig7(t *testing.T) {
	dir := t.TempDir()
	write := func(fig string, code uint8) {
		var rs []sweep.IGBNResult
		for _, s := range sweep.IGBNSchemes {
			for _, l := range []float64{0, 0.01} {
				rel := 1.0
				if l > 0 {
					rel = float64(code) / 100 // tells the panels apart
				}
				rs = append(rs, sweep.IGBNResult{IGBNConfig: sweep.IGBNConfig{Scheme: s, Loss: l, Timeout: code, Messages: 2}, Gbps: 10 * rel, Relative: rel})
			}
		}
		if _, err := sweep.SaveIGBN(dir, "igbn-fig"+fig, rs); err != nil {
			t.Fatal(err)
		}
	}
	write("6a", 15)
	write("6b", 11)
	run := func() error { return paperPresets["igbn-fig7"].Run(paperOpts{Out: dir, Stdout: io.Discard}) }
	if err := run(); err == nil {
		t.Fatal("drew Fig. 7 without igbn-fig6c.csv")
	}
	write("6c", 15) // Fig. 6c's file with 6a's timeout
	if err := run(); err == nil || !strings.Contains(err.Error(), "not Fig. 6c's") {
		t.Fatalf("igbn-fig6c.csv at 134 ms: err %v", err)
	}
	write("6c", 7)
	if err := run(); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "igbn-fig7.csv"))
	if !slices.Equal(rows[0], []string{"scheme", "timeout_ms", "loss", "relative"}) || len(rows) != 1+4*3*2 {
		t.Fatalf("rows %v", rows)
	}
	want := [][]string{{"gbn", "134.217", "0", "1.0000"}, {"gbn", "134.217", "0.01", "0.1500"}, {"gbn", "8.388", "0", "1.0000"},
		{"gbn", "8.388", "0.01", "0.1100"}, {"gbn", "0.524", "0", "1.0000"}, {"gbn", "0.524", "0.01", "0.0700"}, {"gbn-st", "134.217", "0", "1.0000"}}
	for i, w := range want {
		if !slices.Equal(rows[1+i], w) {
			t.Errorf("row %d: %v, want %v", 1+i, rows[1+i], w)
		}
	}
	if last := rows[len(rows)-1]; last[0] != "igbn" {
		t.Errorf("last row %v: want igbn's", last)
	}
	if _, err := os.Stat(filepath.Join(dir, "igbn-fig7.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperIGBNFig6TestbedEnv: -testbed hands sweep-loss.sh the paper's
// workload and the output directory, -quick a smoke run on top; run from
// elsewhere than the repository's top it says where the script must be.
func TestPaperIGBNFig6TestbedEnv(t *testing.T) {
	env := igbnTestbedEnv("6b", paperOpts{Out: "/x"})
	if !slices.Equal(env, []string{"SOFTNIC_SWEEP_PAPER=igbn-fig6b", "SOFTNIC_SWEEP_OUT=/x"}) {
		t.Fatalf("env %v", env)
	}
	env = igbnTestbedEnv("6a", paperOpts{Out: "/x", Quick: true})
	if !slices.Contains(env, "SOFTNIC_SWEEP_LOSSES=0 1") || !slices.Contains(env, "SOFTNIC_SWEEP_PAPER=igbn-fig6a") {
		t.Fatalf("quick env %v", env)
	}
	if !paperPresets["igbn-fig6"].Testbed {
		t.Fatal("igbn-fig6 does not run on the testbed")
	}
	// The test runs in cmd/softnic-sweep, where scripts/ is not.
	err := paperPresets["igbn-fig6"].Run(paperOpts{Out: t.TempDir(), Testbed: true, Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "top directory") {
		t.Fatalf("err %v", err)
	}
}
