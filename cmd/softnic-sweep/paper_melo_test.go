package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/softnic/softnic/internal/sweep"
)

// TestPaperMeloFig5aQuick runs melo-fig5a's smoke run: go-back-N and MELO
// at 0 and 1% loss, MELO's 1% point above go-back-N's.
func TestPaperMeloFig5aQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["melo-fig5a"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rel := map[string]float64{}
	for _, r := range readCSV(t, filepath.Join(dir, "melo-fig5a.csv"))[1:] {
		if r[1] == "0.01" {
			rel[r[0]], _ = strconv.ParseFloat(r[6], 64)
		}
	}
	if rel["melo"] <= rel["gbn"] || rel["melo"] == 0 {
		t.Fatalf("relative goodput at 1%%: %v", rel)
	}
	if _, err := os.Stat(filepath.Join(dir, "melo-fig5a.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperMeloFig6bQuick runs melo-fig6b's smoke run at 2% loss: one
// connection, capped at the path's 976 packets, peaks near the paper's
// 96.9% of the pool and never runs out (no fallbacks); twenty use less of
// it.
func TestPaperMeloFig6bQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["melo-fig6b"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "melo-fig6b.csv"))
	if len(rows) != 3 || rows[0][0] != "connections" || rows[0][3] != "window_pkts" || rows[0][6] != "pool_usage" || rows[0][9] != "fallbacks" {
		t.Fatalf("rows %v", rows)
	}
	one, twenty := rows[1], rows[2]
	u1, _ := strconv.ParseFloat(one[6], 64)
	if one[0] != "1" || one[3] != "976" || u1 < 0.9 || u1 >= 1 || one[9] != "0" {
		t.Fatalf("one connection: %v; want a 976-packet cap, 90-100%% of the pool and no fallbacks", one)
	}
	if u, _ := strconv.ParseFloat(twenty[6], 64); twenty[0] != "20" || twenty[3] != "48" || u >= u1 || u == 0 {
		t.Fatalf("twenty connections: %v; want 48 packets each and less of the pool than one", twenty)
	}
	if _, err := os.Stat(filepath.Join(dir, "melo-fig6b.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperMeloFig5bQuick runs melo-fig5b's smoke run: 30 web search
// flows at load 0.5 for each scheme, every one completed, both schemes
// under the same 128-packet cap.
func TestPaperMeloFig5bQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["melo-fig5b"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "melo-fig5b.csv"))
	if len(rows) != 3 || rows[0][5] != "fct_p99_us" || rows[0][10] != "window_pkts" || rows[1][0] != "gbn" || rows[2][0] != "melo" {
		t.Fatalf("rows %v", rows)
	}
	for _, r := range rows[1:] {
		if p99, _ := strconv.Atoi(r[5]); p99 <= 0 || r[3] != "30" || r[10] != "128" {
			t.Fatalf("row %v: want 30 flows, a positive p99 and a 128-packet cap", r)
		}
	}
}

// TestPaperMeloFig5aDCQCNQuick runs melo-fig5a-dcqcn's smoke run: both
// schemes with DCQCN through the switch at 0 and 1% loss, then go-back-N
// with a 262 µs timeout; MELO's 1% point above go-back-N's, and go-back-N
// with the shorter timeout faster at 1% than with perftest's 67 ms.
func TestPaperMeloFig5aDCQCNQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["melo-fig5a-dcqcn"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "melo-fig5a-dcqcn.csv"))
	if len(rows) != 7 || rows[0][0] != "scheme" || rows[0][1] != "cc" {
		t.Fatalf("csv: %v", rows)
	}
	gbps := map[string]float64{}
	for _, r := range rows[1:] {
		if r[1] != "dcqcn" {
			t.Errorf("row without dcqcn: %v", r)
		}
		if r[2] == "0.01" {
			gbps[r[0]+"/"+r[5]], _ = strconv.ParseFloat(r[6], 64)
		}
	}
	if gbps["melo/14"] <= gbps["gbn/14"] || gbps["gbn/6"] <= gbps["gbn/14"] {
		t.Fatalf("goodput at 1%% (scheme/timeout code): %v", gbps)
	}
	if _, err := os.Stat(filepath.Join(dir, "melo-fig5a-dcqcn.png")); err != nil {
		t.Fatal(err)
	}
}

// TestPaperMeloFig6aQuick runs melo-fig6a's smoke run: one point at 0.2%
// loss, written with exactly the figure's three columns, its CPU share the
// out-of-order bytes over the stated copy rate.
func TestPaperMeloFig6aQuick(t *testing.T) {
	dir := t.TempDir()
	if err := paperPresets["melo-fig6a"].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "melo-fig6a.csv"))
	if len(rows) != 2 || len(rows[0]) != 3 || rows[0][0] != "loss" || rows[0][1] != "ooo_bytes_per_s" || rows[0][2] != "copy_core_fraction" || rows[1][0] != "0.002" {
		t.Fatalf("rows %v", rows)
	}
	ooo, _ := strconv.ParseFloat(rows[1][1], 64)
	frac, _ := strconv.ParseFloat(rows[1][2], 64)
	if ooo <= 0 || frac <= 0 || math.Abs(frac-ooo/sweep.MeloCopyBytesPerSec) > 1e-4 {
		t.Fatalf("ooo %v B/s, core fraction %v; want positive and ooo/%g", ooo, frac, sweep.MeloCopyBytesPerSec)
	}
	if _, err := os.Stat(filepath.Join(dir, "melo-fig6a.png")); err != nil {
		t.Fatal(err)
	}
}
