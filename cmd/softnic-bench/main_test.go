package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// bench runs the command in-process.
func bench(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// tableRows returns the rows of the perftest table in out: the lines
// between the column header and the next rule, split into fields.
func tableRows(t *testing.T, out string) (header string, rows [][]string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, " #bytes") {
			continue
		}
		header = l
		for _, r := range lines[i+1:] {
			if strings.HasPrefix(r, "----") || r == "" {
				return header, rows
			}
			rows = append(rows, strings.Fields(r))
		}
	}
	t.Fatalf("no table in:\n%s", out)
	return "", nil
}

func positiveNumbers(t *testing.T, row []string) {
	t.Helper()
	for _, f := range row {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0) {
			t.Fatalf("field %q of row %q is not a positive number", f, row)
		}
	}
}

// TestEmbeddedTables runs every verbs test the way a user does, with
// --embedded, and checks that perftest's table comes out.
func TestEmbeddedTables(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		columns int
		header  string
	}{
		{[]string{"write_bw", "--embedded", "-n", "200"}, 5, "BW peak[MiB/sec]"},
		{[]string{"read_bw", "--embedded", "-n", "200", "--report_gbits"}, 5, "BW peak[Gb/sec]"},
		{[]string{"send_bw", "--embedded", "-n", "200", "-q", "2", "--rx-depth", "8"}, 5, "MsgRate[Mpps]"},
		{[]string{"atomic_bw", "--embedded", "-n", "200"}, 5, "BW average[MiB/sec]"},
		{[]string{"write_lat", "--embedded", "-n", "200"}, 9, "t_typical[usec]"},
		{[]string{"read_lat", "--embedded", "-n", "200"}, 9, "99.9% percentile[usec]"},
		{[]string{"send_lat", "--embedded", "-n", "200", "--ipv6"}, 9, "t_stdev[usec]"},
		{[]string{"write_bw", "--embedded", "-D", "0.05", "--loss", "0.5", "--delay", "0", "--rate", "0"}, 5, "BW peak"},
		{[]string{"write_bw", "--embedded", "-n", "400", "-q", "200", "-t", "1", "-s", "8", "--scheme", "igbn"}, 5, "BW peak"},
		// -e: completion waits block on the CQ's completion channel,
		// which fires from the Sim's goroutine.
		{[]string{"write_bw", "--embedded", "-e", "-n", "300"}, 5, "BW peak"},
		{[]string{"send_bw", "--embedded", "--events", "-n", "300", "--rx-depth", "8"}, 5, "MsgRate"},
		{[]string{"send_lat", "--embedded", "-e", "-n", "200"}, 9, "t_typical"},
		{[]string{"read_lat", "--embedded", "-e", "-n", "100"}, 9, "t_typical"},
		{[]string{"write_lat", "--embedded", "-e", "-n", "100"}, 9, "t_typical"},
		// Timed: the server's loop, blocked on its channel, must notice
		// that the client finished.
		{[]string{"send_lat", "--embedded", "-e", "-D", "0.05"}, 9, "t_typical"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := bench(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errs, out)
			}
			header, rows := tableRows(t, out)
			if !strings.Contains(header, tc.header) {
				t.Fatalf("header %q lacks %q", header, tc.header)
			}
			if len(rows) != 1 || len(rows[0]) != tc.columns {
				t.Fatalf("rows %q, want one of %d columns", rows, tc.columns)
			}
			if slices.Contains(tc.args, "-D") {
				// perftest measures no peak in timed runs: it prints 0.
				if len(rows[0]) == 5 && rows[0][2] == "0.00" {
					rows[0] = slices.Delete(rows[0], 2, 3)
				} else if len(rows[0]) == 5 {
					t.Fatalf("timed run with a peak: %q", rows[0])
				}
			}
			positiveNumbers(t, rows[0])
			scheme := "gbn"
			if i := slices.Index(tc.args, "--scheme"); i >= 0 {
				scheme = tc.args[i+1]
			}
			if !strings.Contains(out, "local address") || !strings.Contains(out, "Recovery scheme : "+scheme+" (agreed") ||
				strings.Contains(out, "QPs run") {
				t.Fatalf("banner missing:\n%s", out)
			}
		})
	}
}

// TestSweepCSV: -a sweeps sizes (limited by the hidden --sweep_max) and
// --csv appends one record per size after a single header.
func TestSweepCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bw.csv")
	code, out, errs := bench(t, "write_bw", "--embedded", "-a", "--sweep_max", "64", "-n", "50", "--csv", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, rows := tableRows(t, out)
	if len(rows) != 6 {
		t.Fatalf("sweep 2..64 gave %d rows:\n%s", len(rows), out)
	}
	for i, r := range rows {
		if r[0] != strconv.Itoa(2<<i) {
			t.Fatalf("row %d is for %s bytes", i, r[0])
		}
	}
	code, _, errs = bench(t, "write_lat", "--embedded", "-n", "50", "--csv", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
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
	if len(recs) != 8 || recs[0][0] != "test" || recs[0][14] != "loss" {
		t.Fatalf("csv %q", recs)
	}
	if recs[1][0] != "write_bw" || recs[1][1] != "2" || recs[1][3] == "" || recs[1][6] != "" || recs[1][13] != "gbn" {
		t.Fatalf("bw record %q", recs[1])
	}
	if recs[7][0] != "write_lat" || recs[7][3] != "" || recs[7][8] == "" {
		t.Fatalf("lat record %q", recs[7])
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no test"},
		{[]string{"write"}, "unknown test"},
		{[]string{"--embedded"}, "test comes first"},
		{[]string{"write_bw", "--bogus"}, "flag provided but not defined"},
		{[]string{"write_bw", "-s"}, "flag needs an argument"},
		{[]string{"write_bw", "-s", "x"}, "invalid value"},
		{[]string{"write_bw", "-s", "0"}, "-s 0"},
		{[]string{"write_bw", "-n", "-1"}, "-n -1"},
		{[]string{"write_bw", "-D", "0"}, "-D 0"},
		{[]string{"write_bw", "-n", "5", "-D", "1"}, "exclude"},
		{[]string{"write_bw", "-a", "-s", "8"}, "exclude"},
		{[]string{"write_bw", "-m", "1500"}, "path MTU"},
		{[]string{"write_bw", "-q", "0"}, "-q 0"},
		{[]string{"write_lat", "-q", "2"}, "one QP"},
		{[]string{"write_bw", "-t", "0"}, "tx depth"},
		{[]string{"send_bw", "-r", "0"}, "rx depth"},
		{[]string{"write_bw", "-p", "70000"}, "TCP port"},
		{[]string{"atomic_bw", "-s", "16"}, "8 bytes"},
		{[]string{"write_bw", "--embedded", "--scheme", "nope"}, "--scheme"},
		{[]string{"write_bw", "--scheme", "Bad Name"}, "--scheme"},
		{[]string{"write_bw", "--embedded", "--loss", "101"}, "--loss"},
		{[]string{"write_bw", "--embedded", "--rate", "-1"}, "--rate"},
		{[]string{"write_bw", "--embedded", "--delay", "-1s"}, "--delay"},
		{[]string{"write_bw", "--loss", "1"}, "--embedded"},
		{[]string{"write_bw", "--embedded", "host"}, "no server address"},
		{[]string{"write_bw", "a", "b"}, "one server address"},
		{[]string{"write_bw", "--iface", "eth0"}, "raw"},
		{[]string{"raw", "--embedded"}, "no embedded mode"},
		{[]string{"raw"}, "--iface"},
		{[]string{"raw", "--iface", "lo", "-n", "5"}, "does not apply to raw"},
		{[]string{"raw", "--iface", "lo", "server"}, "--dst-mac"},
		{[]string{"raw", "--iface", "lo", "--dst-mac", "zz", "--src-ip", "198.18.0.1", "--dst-ip", "198.18.1.1", "s"}, "--dst-mac"},
		{[]string{"raw", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--src-ip", "198.18.0.1", "--dst-ip", "2001:db8::1", "s"}, "IP versions"},
		{[]string{"write_bw", "--direct", "eth0", "--embedded"}, "give one"},
		{[]string{"write_bw", "--direct", "eth0", "--socket", "/tmp/s"}, "no daemon socket"},
		{[]string{"write_bw", "--direct", "eth0", "--direct-queue", "-1"}, "--direct-queue -1"},
		{[]string{"write_bw", "--direct-queue", "1"}, "needs --direct"},
	} {
		code, out, errs := bench(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stderr %q (want exit 2 and %q)", tc.args, code, errs, tc.want)
		}
		if code == 2 && !strings.Contains(errs, "softnic-bench -h") {
			t.Errorf("%q: no hint at the usage", tc.args)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help", "help"} {
		code, out, _ := bench(t, h)
		if code != 0 || !strings.Contains(out, "usage: softnic-bench <test>") || strings.Contains(out, "sweep_max") {
			t.Fatalf("%s: exit %d\n%s", h, code, out)
		}
	}
	if code, out, _ := bench(t, "write_bw", "-h"); code != 0 || !strings.Contains(out, "--report_gbits") {
		t.Fatalf("write_bw -h: exit %d", code)
	}
}

// TestFlagsAfterServer: perftest takes flags on either side of the
// server address.
func TestFlagsAfterServer(t *testing.T) {
	o, err := parseArgs([]string{"write_bw", "-s", "1024", "server.example", "-n", "7", "--size", "2048"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.config()
	if o.server != "server.example" || c.Sizes[0] != 2048 || c.Iters != 7 {
		t.Fatalf("%+v %+v", o, c)
	}
	// The defaults follow the test, as in perftest.
	o, _ = parseArgs([]string{"send_lat"})
	if c := o.config(); c.Sizes[0] != 2 || c.Iters != 1000 {
		t.Fatalf("latency defaults %+v", c)
	}
	o, _ = parseArgs([]string{"read_bw", "-a"})
	if c := o.config(); len(c.Sizes) != 23 || c.Sizes[22] != 1<<23 || c.Iters != 1000 {
		t.Fatalf("sweep %v", c.Sizes)
	}
	o, _ = parseArgs([]string{"write_bw", "--scheme", "irn", "h"})
	if c := o.config(); strings.Join(c.Schemes, ",") != "irn,gbn" {
		t.Fatalf("schemes %v", c.Schemes)
	}
	// Against a daemon, no --scheme offers the daemon's default (the run
	// fills it in); embedded, both NICs run --scheme's default, gbn.
	o, _ = parseArgs([]string{"write_bw", "h"})
	if c := o.config(); len(c.Schemes) != 0 {
		t.Fatalf("daemon mode without --scheme offers %v", c.Schemes)
	}
	o, _ = parseArgs([]string{"write_bw", "--embedded"})
	if c := o.config(); strings.Join(c.Schemes, ",") != "gbn" {
		t.Fatalf("embedded schemes %v", c.Schemes)
	}
	// -q goes up to the exchange's limit.
	if _, err := parseArgs([]string{"write_bw", "-q", "5000", "-t", "1", "h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := parseArgs([]string{"write_bw", "-q", "16385", "h"}); err == nil {
		t.Fatal("-q 16385 accepted")
	}
}

// TestDaemonModeUnavailable: without --embedded the client needs the
// daemon; when it cannot be reached the error says what to do.
func TestDaemonModeUnavailable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	code, _, errs := bench(t, "write_bw", "--socket", sock, "198.18.0.1")
	want := "softnic-bench: no softnic daemon is listening at " + sock + ": the socket does not exist"
	if code != 1 || !strings.HasPrefix(errs, want) || !strings.HasSuffix(errs, "; --socket names the daemon's control socket, --embedded needs no daemon\n") ||
		strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d: %q, want exit 1 and %q...", code, errs, want)
	}
}

func TestCSVUnwritable(t *testing.T) {
	code, out, errs := bench(t, "write_bw", "--embedded", "-n", "10", "--csv", filepath.Join(t.TempDir(), "no", "dir", "x.csv"))
	if code != 1 || !strings.Contains(errs, "x.csv") || strings.Contains(out, "#bytes") {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errs, out)
	}
}

// TestVersion: `softnic-bench version` and --version print the build
// information on one line; an argument after it is a usage error.
func TestVersion(t *testing.T) {
	for _, v := range []string{"version", "--version", "-version"} {
		code, out, errs := bench(t, v)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "softnic-bench ") || !strings.Contains(out, "(commit ") ||
			!strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", v, code, out, errs)
		}
	}
	if code, _, errs := bench(t, "version", "extra"); code != 2 || !strings.Contains(errs, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, stderr %q; want 2", code, errs)
	}
}

// TestDirectNoInterface: --direct with an interface the host lacks fails
// in one line naming it (exit 1: the command line was fine).
func TestDirectNoInterface(t *testing.T) {
	code, out, errs := bench(t, "write_bw", "--direct", "softnic-none0")
	if code != 1 || !strings.Contains(errs, `no such interface "softnic-none0"`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("exit %d, stderr %q, stdout %q: want exit 1 and one line naming the interface", code, errs, out)
	}
}
