package perftest

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPrintBW(t *testing.T) {
	var b bytes.Buffer
	PrintHeader(&b, WriteBW, false)
	PrintRow(&b, Row{Bytes: 65536, Iters: 5000, PeakGbps: 8 * 1.048576, AvgGbps: 4 * 1.048576, MsgRateMpps: 0.25}, false)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 || lines[1] != " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]" {
		t.Fatalf("header:\n%s", b.String())
	}
	// perftest's MiB is 2^20 bytes: 8.388608 Gb/s is 1000 MiB/sec.
	if f := strings.Fields(lines[2]); len(f) != 5 || f[0] != "65536" || f[1] != "5000" || f[2] != "1000.00" || f[3] != "500.00" || f[4] != "0.250000" {
		t.Fatalf("row %q", lines[2])
	}
	b.Reset()
	PrintHeader(&b, ReadBW, true)
	PrintRow(&b, Row{Bytes: 2, Iters: 7, PeakGbps: 1.5, AvgGbps: 1.25, MsgRateMpps: 1}, true)
	if !strings.Contains(b.String(), "BW peak[Gb/sec]    BW average[Gb/sec]") || !strings.Contains(b.String(), " 2          7                1.50               1.25               1.000000") {
		t.Fatalf("Gb/s table:\n%s", b.String())
	}
}

func TestPrintLat(t *testing.T) {
	var b bytes.Buffer
	PrintHeader(&b, WriteLat, false)
	us := time.Microsecond
	PrintRow(&b, Row{Bytes: 2, Iters: 1000, Lat: &LatStats{Min: 1 * us, Max: 9 * us, Typical: 2 * us, Avg: 2500 * time.Nanosecond, Stdev: 500 * time.Nanosecond, P99: 5 * us, P999: 9 * us}}, false)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]") {
		t.Fatalf("header:\n%s", b.String())
	}
	want := []string{"2", "1000", "1.00", "9.00", "2.00", "2.50", "0.50", "5.00", "9.00"}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != strings.Join(want, " ") {
		t.Fatalf("row %q, want fields %v", lines[2], want)
	}
}

func TestCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	bw := Row{Test: "write_bw", Bytes: 65536, Iters: 5000, PeakGbps: 20, AvgGbps: 18.5, MsgRateMpps: 0.035, Scheme: "gbn", LossPct: 1}
	lat := Row{Test: "write_lat", Bytes: 2, Iters: 1000, Lat: &LatStats{Min: 2 * time.Microsecond, P999: 1500 * time.Nanosecond}, Scheme: "gbn"}
	if err := AppendCSV(path, bw); err != nil {
		t.Fatal(err)
	}
	if err := AppendCSV(path, lat); err != nil { // appends, no second header
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || strings.Join(recs[0], ",") != "test,bytes,iterations,bw_peak,bw_avg,msg_rate,t_min,t_max,t_typical,t_avg,t_stdev,p99,p99_9,scheme,loss" {
		t.Fatalf("records %q", recs)
	}
	if got := strings.Join(recs[1], ","); got != "write_bw,65536,5000,20.0000,18.5000,0.035000,,,,,,,,gbn,1" {
		t.Fatalf("bw record %s", got)
	}
	if got := strings.Join(recs[2], ","); got != "write_lat,2,1000,,,,2.000,0.000,0.000,0.000,0.000,0.000,1.500,gbn,0" {
		t.Fatalf("lat record %s", got)
	}
	for _, r := range recs[1:] {
		if _, err := strconv.Atoi(r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := AppendCSV(filepath.Join(t.TempDir(), "no", "such", "dir.csv"), bw); err == nil {
		t.Fatal("unwritable path accepted")
	}
}

func TestParseTest(t *testing.T) {
	for _, name := range Tests() {
		tt, err := ParseTest(name)
		if err != nil || tt.String() != name || tt.Title() == name {
			t.Errorf("%s: %v %v %q", name, tt, err, tt.Title())
		}
	}
	if _, err := ParseTest("write"); err == nil {
		t.Error("unknown test accepted")
	}
	if len(Tests()) != 8 { // perftest's seven and rpc_lat
		t.Errorf("tests %v", Tests())
	}
}
