package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/softnic/softnic/internal/sweep"
)

// TestPaperIGBNFig6aQuick runs igbn-fig6a's smoke run: the four schemes
// at 0 and 1% loss, 2 seeds each; the summary CSV has the single-run
// columns first and an interval per point that holds its mean, the runs
// CSV one row per seed, and Fig. 7 reads the summary.
func TestPaperIGBNFig6aQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["igbn-fig6a"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "igbn-fig6a.csv"))
	h := rows[0]
	if !slices.Equal(h[:3], []string{"scheme", "loss", "relative"}) || !slices.Contains(h, "relative_ci95_lo") || len(rows) != 1+4*2 {
		t.Fatalf("summary %v", rows)
	}
	col := func(name string) int { return slices.Index(h, name) }
	for _, r := range rows[1:] {
		if r[col("seeds")] != "2" || r[col("messages")] != "4" {
			t.Errorf("row %v: want 2 seeds of 2 messages", r)
		}
		num := func(name string) float64 {
			x, err := strconv.ParseFloat(r[col(name)], 64)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		lo, mean, hi := num("relative_ci95_lo"), num("relative"), num("relative_ci95_hi")
		if r[1] == "0" && (mean != 1 || lo != 1 || hi != 1) {
			t.Errorf("lossless row %v", r)
		}
		if !(lo <= mean && mean <= hi) || num("relative_min") > mean || num("relative_max") < mean {
			t.Errorf("row %v: mean outside its interval or its seeds' range", r)
		}
	}
	runs := readCSV(t, filepath.Join(dir, "igbn-fig6a-runs.csv"))
	sc := slices.Index(runs[0], "seed")
	if sc < 0 || len(runs) != 1+4*2*2 || runs[1][sc] != "1" || runs[2][sc] != "2" {
		t.Fatalf("runs %v", runs)
	}
	f, err := os.Open(filepath.Join(dir, "igbn-fig6a.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rs, err := sweep.ReadIGBNCSV(f); err != nil || len(rs) != 8 || rs[0].Timeout != 15 {
		t.Fatalf("ReadIGBNCSV: %d rows, %v", len(rs), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "igbn-fig6a.png")); err != nil {
		t.Fatal(err)
	}
}

// TestIGBNConfigsJobs: the points come out the same, in the same order,
// however many goroutines run them.
func TestIGBNConfigsJobs(t *testing.T) {
	var cfgs []sweep.IGBNConfig
	for _, s := range []string{"gbn", "igbn"} {
		for seed := uint64(1); seed <= 2; seed++ {
			cfgs = append(cfgs, sweep.IGBNConfig{Scheme: s, Loss: 0.01, Timeout: 7, Messages: 2, Seed: seed})
		}
	}
	one, err := runIGBNConfigs(paperOpts{Stdout: io.Discard}, cfgs, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := runIGBNConfigs(paperOpts{Stdout: io.Discard}, cfgs, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range one {
		one[i].Wall, two[i].Wall = 0, 0
		if one[i] != two[i] {
			t.Errorf("point %d: %+v alone, %+v beside another", i, one[i], two[i])
		}
	}
	if one[0].Retransmits == one[1].Retransmits && one[0].Elapsed == one[1].Elapsed {
		t.Errorf("seeds 1 and 2 ran alike: %+v", one[:2])
	}
}

// TestPaperSeedsFlag: -seeds is refused by a preset that runs one seed,
// and below 1.
func TestPaperSeedsFlag(t *testing.T) {
	if err := paperCmd([]string{"igbn-fig3", "-seeds", "3"}); err == nil || !strings.Contains(err.Error(), "one seed") {
		t.Fatalf("igbn-fig3 -seeds 3: %v", err)
	}
	if err := paperCmd([]string{"igbn-fig6a", "-seeds", "-1"}); err == nil || !strings.Contains(err.Error(), "want 1 or more") {
		t.Fatalf("igbn-fig6a -seeds -1: %v", err)
	}
	if paperPresets["igbn-fig6a"].Seeds != 5 || paperPresets["igbn-fig6"].Seeds != 5 {
		t.Fatal("igbn-fig6a's default is not 5 seeds")
	}
}
