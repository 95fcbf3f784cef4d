package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRPCLatFlag: rpc_lat runs -q N connections embedded, ordinary and
// with --star, prints its calls/s and latency table (2,800-byte requests
// and 1,400-byte responses by default) and a CSV row with the call rate;
// --response-size or -Q on another test, -q on send_lat, a bad --stall
// and a bad -Q are usage errors.
func TestRPCLatFlag(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "rpc.csv")
	for _, args := range [][]string{
		{"rpc_lat", "--embedded", "-q", "6", "-n", "120", "--csv", csv},
		{"rpc_lat", "--embedded", "--star", "client", "-q", "6", "-n", "120", "--response-size", "1K", "--stall", "30", "-Q", "16"},
	} {
		code, out, errs := bench(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		header, rows := tableRows(t, out)
		if !strings.Contains(header, "calls/sec") || len(rows) != 1 {
			t.Fatalf("%q: table %q %v:\n%s", args, header, rows, out)
		}
		resp := "1400"
		if args[2] == "--star" {
			resp = "1024"
		}
		if rows[0][0] != "2800" || rows[0][1] != resp || rows[0][2] != "120" {
			t.Errorf("%q: row %v", args, rows[0])
		}
		positiveNumbers(t, rows[0])
		if !strings.Contains(out, "Number of qps   : 6 ") {
			t.Errorf("%q: banner:\n%s", args, out)
		}
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "rpc_lat,2800,120,,,0.") {
		t.Errorf("CSV:\n%s", b)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send_lat", "--response-size", "100"}, "--response-size is rpc_lat's"},
		{[]string{"send_lat", "-q", "2"}, "latency tests run on one QP"},
		{[]string{"rpc_lat", "--response-size", "0"}, "--response-size 0"},
		{[]string{"rpc_lat", "--stall", "0"}, "--stall 0"},
		{[]string{"send_lat", "-Q", "4"}, "-Q is rpc_lat's"},
		{[]string{"rpc_lat", "--cq-mod", "0"}, "-Q 0"},
	} {
		code, out, errs := bench(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stderr %q (want exit 2 and %q)", tc.args, code, errs, tc.want)
		}
	}
}
