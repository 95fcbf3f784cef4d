package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPaperFasrFig7aQuick: `softnic-sweep paper fasr-fig7a -quick` and
// `fasr-fig2 -quick` write their CSVs in the columns, a row for
// each scheme (or rate) and loss, and Fig. 7a's PNGs.
func TestPaperFasrFig7aQuick(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fasr-fig7a", "fasr-fig2"} {
		if err := paperPresets[name].Run(paperOpts{Out: dir, Quick: true, Stdout: io.Discard}); err != nil {
			t.Fatal(name, err)
		}
	}
	for _, c := range []struct {
		file, header string
		rows         []string
	}{
		{"fasr-fig7a.csv", "scheme,loss,goodput_gbps,relative", []string{"gbn,0,", "gbn,0.01,", "srnic,0.01,", "irn,0.01,", "fasr,0,", "fasr,0.01,"}},
		{"fasr-fig7a-noservice.csv", "scheme,loss,goodput_gbps,relative", []string{"srnic,0.01,", "irn,0.01,"}},
		{"fasr-fig2.csv", "link_gbps,loss,goodput_gbps,relative", []string{"100,0,", "100,0.01,", "400,0,", "400,0.01,"}},
	} {
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(string(b), "\n"); lines[0] != c.header {
			t.Errorf("%s: header %q, want %q", c.file, lines[0], c.header)
		}
		for _, want := range c.rows {
			if !strings.Contains(string(b), "\n"+want) {
				t.Errorf("%s: no row %q in\n%s", c.file, want, b)
			}
		}
	}
	for _, png := range []string{"fasr-fig7a.png", "fasr-fig7a-noservice.png"} {
		if st, err := os.Stat(filepath.Join(dir, png)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", png, err)
		}
	}
}
