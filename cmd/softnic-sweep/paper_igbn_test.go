package main

import (
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
