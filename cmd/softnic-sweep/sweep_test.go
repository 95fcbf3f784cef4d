package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/internal/pcap"
	"github.com/softnic/softnic/internal/sweep"
)

// TestPlotFromCSV: plot-loss and plot-qps draw the figures from CSVs
// alone (how docs/results' PNGs are regenerated without rerunning a
// sweep), and plot-qps writes a CSV only when asked (-csv), so it never
// rewrites its input.
func TestPlotFromCSV(t *testing.T) {
	dir := t.TempDir()
	loss := filepath.Join(dir, "loss.csv")
	os.WriteFile(loss, []byte("scheme,loss,size,iterations,mtu,goodput_gbps,relative,retransmits,ack_timeouts\n"+
		"gbn,0,65536,100,1024,20.0,1,0,0\ngbn,0.01,65536,100,1024,10.0,0.5,100,0\ngbn,0.05,65536,100,1024,1.0,0.05,900,3\n"), 0o644)
	qps := filepath.Join(dir, "qps.csv")
	qpsRows := "scheme,qps,size,loss,msg_rate,sr_bytes\ngbn,1,8,0,1000,5\ngbn,300,8,0,200000,1500\ngbn,1,8,0.01,10,5\ngbn,300,8,0.01,9000,1500\n"
	os.WriteFile(qps, []byte(qpsRows), 0o644)
	for _, args := range [][]string{
		{"plot-loss", "-in", loss, "-out", filepath.Join(dir, "loss.png")},
		{"plot-qps", "-in", qps, "-out", dir, "-prefix", "qps"},
		{"plot-qps", "-in", qps, "-out", filepath.Join(dir, "sub"), "-prefix", "t", "-csv", filepath.Join(dir, "t.csv")},
	} {
		if err := sweepCmd(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, f := range []string{"loss.png", "qps_msgrate_8B.png", "qps_sr_bytes.png", "sub/t_msgrate_8B.png", "sub/t_sr_bytes.png", "t.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(qps); string(b) != qpsRows {
		t.Error("plot-qps rewrote its input")
	}
}

// TestUsage: a bad command line exits 2 with one line naming the problem.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"plot-loss"}, {"plot-qps"}} {
		var stderr bytes.Buffer
		if code := exitStatus(sweepCmd(args), &stderr); code != 2 || !strings.HasPrefix(stderr.String(), "softnic-sweep: ") {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := exitStatus(sweepCmd([]string{"plot-loss", "-in", filepath.Join(t.TempDir(), "none.csv"), "-out", "x.png"}), &stderr); code != 1 {
		t.Errorf("missing input: exit %d, %q", code, stderr.String())
	}
}

// TestLossPcap: `softnic-sweep loss -pcap FILE` on one point writes a pcap
// of the writer's NIC's frames, with fasr's extension opcodes among them;
// on more than one point it is a usage error.
func TestLossPcap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "point.pcap")
	if err := sweepCmd([]string{"loss", "-schemes", "fasr", "-loss", "2", "-n", "100", "-out", dir, "-pcap", file}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	frames, ext := 0, 0
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		fr, perr := bth.ParseFrame(p.Data)
		if perr != nil {
			t.Fatalf("frame %d does not parse: %v", frames, perr)
		}
		if fr.Pkt.Opcode() >= 0xC0 {
			ext++
		}
		frames++
	}
	if frames == 0 || ext == 0 {
		t.Errorf("%d frames, %d with extension opcodes", frames, ext)
	}
	var stderr bytes.Buffer
	if code := exitStatus(sweepCmd([]string{"loss", "-pcap", file, "-out", dir}), &stderr); code != 2 {
		t.Errorf("-pcap over many points: exit %d, %q", code, stderr.String())
	}
}

// TestPaperPresets: every preset names its paper and figure, lists its
// parameters with their sources, and runs; an unknown preset is a usage
// error naming the ones there are.
func TestPaperPresets(t *testing.T) {
	for _, n := range paperNames() {
		p := paperPresets[n]
		if p.Paper == "" || p.Figure == "" || p.Summary == "" || len(p.Params) == 0 || p.Run == nil || p.TestbedNote == "" {
			t.Errorf("%s: incomplete preset %+v (every preset says how or why not on the testbed)", n, p)
		}
		for _, pa := range p.Params {
			if pa.Name == "" || pa.Value == "" || pa.Source == "" {
				t.Errorf("%s: parameter %+v lacks a name, value or source", n, pa)
			}
		}
	}
	var stderr bytes.Buffer
	if code := exitStatus(sweepCmd([]string{"paper", "no-such-figure"}), &stderr); code != 2 || !strings.Contains(stderr.String(), "no preset") {
		t.Errorf("unknown preset: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := exitStatus(sweepCmd([]string{"paper", "fasr-fig7c", "-testbed"}), &stderr); code != 2 || !strings.Contains(stderr.String(), "context cache") {
		t.Errorf("fasr-fig7c -testbed: exit %d, %q (want the reason it runs on the fabric only)", code, stderr.String())
	}
}

// TestSweepSchemeParam: loss and qps take -scheme-param, a scheme knob of
// both NICs: melo with a one-block bits pool falls back to go-back-N and
// resends more than with its default pool. A knob no scheme has is a
// usage error.
func TestSweepSchemeParam(t *testing.T) {
	retransmits := func(extra ...string) uint64 {
		dir := t.TempDir()
		if err := sweepCmd(append([]string{"loss", "-schemes", "melo", "-loss", "0,2", "-n", "100", "-out", dir}, extra...)); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(dir, "loss.csv"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rs, err := sweep.ReadLossCSV(f)
		if err != nil || len(rs) != 2 {
			t.Fatalf("loss.csv: %d rows, %v", len(rs), err)
		}
		return rs[1].Retransmits
	}
	if def, tiny := retransmits(), retransmits("-scheme-param", "melo.pool_bits=8"); tiny <= def {
		t.Errorf("retransmits at 2%%: %d with melo.pool_bits=8, %d with the default pool", tiny, def)
	}
	for _, args := range [][]string{{"loss", "-scheme-param", "melo.pool=8"}, {"qps", "-scheme-param", "fasr.units=0"}} {
		var stderr bytes.Buffer
		if code := exitStatus(sweepCmd(args), &stderr); code != 2 {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}
