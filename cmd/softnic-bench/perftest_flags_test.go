package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPerftestFlags: softnic-bench takes each perftest flag a user brings
// from ib_write_bw and friends, in getopt's spellings. Each row is a flag,
// whether softnic acts on it or only accepts it, and the effect checked:
// in the parsed options, and for the flags that act, in a run's output.
func TestPerftestFlags(t *testing.T) {
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		flag  string
		args  []string
		acted bool // acts on the run (false: accepted and reported as ignored)
		// effect checks the parsed options; out, if set, runs the test
		// (embedded) and checks its output.
		effect func(*options) bool
		out    []string
	}{
		{"-d", []string{"write_bw", "-d", "mlx5_0", "h"}, false,
			func(o *options) bool { return o.ibDev == "mlx5_0" }, nil},
		{"-x", []string{"write_bw", "-x", "3", "h"}, false,
			func(o *options) bool { return o.gidIndex == 3 }, nil},
		{"-F", []string{"write_bw", "-F", "h"}, false,
			func(o *options) bool { return o.cpuFreq }, nil},
		{"-i", []string{"write_bw", "-i", "1", "h"}, false,
			func(o *options) bool { return o.ibPort == 1 }, nil},
		{"hardware flags in the banner", []string{"write_bw", "--embedded", "-n", "50", "-d", "mlx5_0", "-x", "3", "-F", "-i", "1"}, false, nil,
			[]string{" -d mlx5_0       : ignored: ", " -x 3            : ignored: ", " -i 1            : ignored: ", " -F              : ignored: "}},
		{"-c RC", []string{"write_bw", "-c", "RC", "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.conn == "RC" }, []string{" Connection type : RC"}},
		{"-R", []string{"write_bw", "-R", "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.rdmaCM }, []string{" rdma_cm QPs     : OFF (-R: softnic has no RDMA CM; the QPs are connected by the TCP exchange on port 18515"}},
		{"-a", []string{"write_bw", "-a", "--sweep_max", "8", "--embedded", "-n", "20"}, true,
			func(o *options) bool { return len(o.config().Sizes) == 23 || o.sweepMax == 8 }, []string{"\n 2 ", "\n 4 ", "\n 8 "}},
		{"-b", []string{"write_bw", "-b", "--embedded", "-n", "100"}, true,
			func(o *options) bool { return o.config().Bidirectional }, []string{"RDMA_Write Bidirectional BW Test"}},
		{"-b send_bw", []string{"send_bw", "-b", "--embedded", "-n", "100", "-r", "16"}, true,
			func(o *options) bool { return o.config().Bidirectional }, []string{"Send Bidirectional BW Test"}},
		{"--report-both", []string{"read_bw", "-b", "--report-both", "--embedded", "-n", "100"}, true,
			func(o *options) bool { return o.reportBoth }, []string{"\n Local results: \n", "\n Remote results: \n"}},
		{"-e", []string{"send_lat", "-e", "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.config().Events }, []string{" Test with events"}},
		{"-l", []string{"write_bw", "-l", "4", "--embedded", "-n", "100"}, true,
			func(o *options) bool { return o.config().PostList == 4 }, []string{"RDMA_Write Post List BW Test", " Post List       : 4"}},
		{"-u", []string{"write_bw", "-u", "9", "--embedded", "-n", "50"}, true,
			func(o *options) bool { c := o.config(); return c.QPTimeout == 9 && c.QPTimeoutSet },
			[]string{" QP timeout      : 9 (local ACK timeout 2.097152ms)"}},
		{"-N", []string{"write_bw", "-N", "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.config().NoPeak }, []string{"WARNING: BW peak won't be measured"}},
		{"--out_json", []string{"write_bw", "--out_json", "--out_json_file", jsonFile, "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.outJSON == jsonFile }, nil},
		{"--out_json=FILE", []string{"write_lat", "--out_json=" + jsonFile, "--embedded", "-n", "50"}, true,
			func(o *options) bool { return o.outJSON == jsonFile }, nil},
		{"--out_json alone", []string{"write_bw", "--out_json", "h"}, true,
			func(o *options) bool { return o.outJSON == "perftest_out.json" && o.server == "h" }, nil},
		{"-s 64K", []string{"write_bw", "-s", "64K", "h"}, true,
			func(o *options) bool { return o.config().Sizes[0] == 65536 }, nil},
		{"-s 1M", []string{"write_bw", "--size=1M", "h"}, true,
			func(o *options) bool { return o.config().Sizes[0] == 1<<20 }, nil},
		{"-s 1G", []string{"read_lat", "-s", "1G", "h"}, true,
			func(o *options) bool { return o.config().Sizes[0] == 1<<30 }, nil},
		{"-s 0x100", []string{"write_bw", "-s", "0x100", "h"}, true,
			func(o *options) bool { return o.config().Sizes[0] == 256 }, nil},
		{"-s4096", []string{"write_bw", "-s4096", "-n100", "-q2", "h"}, true,
			func(o *options) bool { c := o.config(); return c.Sizes[0] == 4096 && c.Iters == 100 && c.QPs == 2 }, nil},
		{"-bs 64K clustered", []string{"write_bw", "-bN", "-es", "64K", "h"}, true,
			func(o *options) bool {
				c := o.config()
				return c.Bidirectional && c.NoPeak && c.Events && c.Sizes[0] == 65536
			}, nil},
		{"--run_infinitely", []string{"write_bw", "--run_infinitely", "-D", "0.02", "h"}, true,
			func(o *options) bool { c := o.config(); return c.Infinite && c.Duration == 20*time.Millisecond }, nil},
		{"--run_infinitely default", []string{"send_bw", "--run_infinitely", "h"}, true,
			func(o *options) bool { c := o.config(); return c.Infinite && c.Duration == 5*time.Second }, nil},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			o, err := parseArgs(tc.args)
			if err != nil {
				t.Fatalf("%q refused: %v", tc.args, err)
			}
			if tc.effect != nil && !tc.effect(o) {
				t.Fatalf("%q: no effect on the options %+v", tc.args, o)
			}
			if !slices.Contains(tc.args, "--embedded") {
				return
			}
			code, out, errs := bench(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errs, out)
			}
			for _, want := range tc.out {
				if !strings.Contains(out, want) {
					t.Fatalf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.acted && strings.Contains(out, "ignored") {
				t.Fatalf("a flag that acts reported as ignored:\n%s", out)
			}
		})
	}
	// The JSON file has perftest's keys.
	for _, tc := range []struct {
		args []string
		keys []string
	}{
		{[]string{"write_bw", "--embedded", "-n", "50", "--out_json_file", jsonFile, "--out_json"},
			[]string{"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}},
		{[]string{"send_lat", "--embedded", "-n", "50", "--out_json=" + jsonFile},
			[]string{"MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "percentile_99", "percentile_99.9"}},
	} {
		os.Remove(jsonFile)
		if code, _, errs := bench(t, tc.args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errs)
		}
		data, err := os.ReadFile(jsonFile)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Info    map[string]any     `json:"test_info"`
			Results map[string]float64 `json:"results"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%q: not JSON: %v\n%s", tc.args, err, data)
		}
		if len(doc.Results) != len(tc.keys) || doc.Info["Connection_type"] != "RC" || doc.Info["Mtu"] != 1024.0 {
			t.Fatalf("%q: %s", tc.args, data)
		}
		for _, k := range tc.keys {
			if _, ok := doc.Results[k]; !ok || k != "BW_peak" && !(doc.Results[k] > 0) {
				t.Fatalf("%q: results lack %s: %s", tc.args, k, data)
			}
		}
		if doc.Results["n_iterations"] != 50 || doc.Results["MsgSize"] != map[bool]float64{true: 2, false: 65536}[tc.args[0] == "send_lat"] {
			t.Fatalf("%q: %s", tc.args, data)
		}
	}
}

// TestPerftestFlagsRefused: the flags softnic cannot honour are refused
// with a one-line error naming what it does.
func TestPerftestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "-c", "UD"}, "-c UD: softnic runs RC only"},
		{[]string{"write_bw", "-c", "XRC"}, "softnic runs RC only"},
		{[]string{"write_lat", "-b"}, "-b applies to the bandwidth tests"},
		{[]string{"write_lat", "--run_infinitely"}, "--run_infinitely applies to the bandwidth tests"},
		{[]string{"write_bw", "--run_infinitely", "-n", "5"}, "-n and -a do not apply"},
		{[]string{"write_bw", "--run_infinitely", "-b"}, "not supported"},
		{[]string{"write_bw", "-l", "200"}, "-l 200"},
		{[]string{"write_bw", "-l", "3", "-n", "100"}, "multiple of the post list"},
		{[]string{"write_bw", "-u", "32"}, "-u 32"},
		{[]string{"write_bw", "-x", "256"}, "-x 256"},
		{[]string{"write_bw", "-i", "0"}, "-i 0"},
		{[]string{"write_bw", "-s", "64X"}, "not a size"},
		{[]string{"write_bw", "-s", "2T"}, "not a size"},
		{[]string{"write_bw", "-s", "4G"}, "-s 4294967296"},
		{[]string{"write_bw", "-sx"}, "not a size"},
		{[]string{"raw", "--iface", "lo", "-b"}, "does not apply to raw"},
	} {
		code, out, errs := bench(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" || strings.Count(errs, "\n") != 2 {
			t.Errorf("%q: exit %d, stderr %q (want exit 2 and %q)", tc.args, code, errs, tc.want)
		}
	}
}

// TestRunInfinitely: --run_infinitely prints a row every -D seconds
// until interrupted, then ends cleanly (exit 0).
func TestRunInfinitely(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out, errb strings.Builder
	code := run(ctx, []string{"write_bw", "--embedded", "--run_infinitely", "-D", "0.03", "-s", "4096"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	_, rows := tableRows(t, out.String())
	// About 10 rows of 30 ms in 300 ms; a loaded machine may run fewer.
	if len(rows) < 3 {
		t.Fatalf("%d rows in 300 ms at one per 30 ms:\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		if len(r) != 5 || r[0] != "4096" || r[2] != "0.00" {
			t.Fatalf("row %q (perftest prints no peak in an infinite run)", r)
		}
		positiveNumbers(t, append([]string{r[1]}, r[3:]...))
	}
	if !strings.Contains(out.String(), "until interrupted") {
		t.Fatalf("banner:\n%s", out.String())
	}
}
