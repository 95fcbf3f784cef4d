//go:build linux

package tests

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestSweepLossPaperIGBN runs scripts/sweep-loss.sh's paper workload
// (SOFTNIC_SWEEP_PAPER=igbn-fig6a) small: gbn and igbn, lossless and 1%
// loss, one run of 1 s each, 1 MiB WRITEs (the preset's 4 MiB
// overridden). Every run must be softnic-bench with one WRITE outstanding
// (-t 1) at ACK timeout code 15 (134 ms) and succeed, and the merged CSV
// must have the paper preset's columns first and a row per point.
func TestSweepLossPaperIGBN(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the sweep builds three binaries and runs four points")
	}
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	// What the script runs: it builds the binaries, brings up the
	// testbed, resolves the next hops with ping, runs the bench under
	// timeout and drops 1% on the switch (testbed.sh loss: sch_netem
	// where the kernel has it, else nftables, which the tests ask for
	// as TestE2EVerbs's loss does). Checked here, so that a machine
	// without one skips in a second, naming its package.
	netns.RequireTools(t, "go", "bash", "ip", "ping", "timeout")
	netns.RequireNft(t)
	script, err := netns.ScriptPath()
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(filepath.Dir(script), "sweep-loss.sh")
	out := t.TempDir()
	// A prefix of NewTestbed's form, so that a later test run removes
	// the namespaces of a test process that was killed.
	prefix := fmt.Sprintf("sn%xgffe", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	// SOFTNIC_NO_EMBEDDED: a testbed that does not come up fails the
	// script at once, where a user gets the embedded preset instead
	// (minutes of simulated Fig. 6 inside this test's time limit).
	cmd.Env = append(os.Environ(), "SOFTNIC_NO_EMBEDDED=1", "SOFTNIC_NS_PREFIX="+prefix, "SOFTNIC_SWEEP_PAPER=igbn-fig6a", "SOFTNIC_SWEEP_OUT="+out,
		"SOFTNIC_SWEEP_SCHEMES=gbn igbn", "SOFTNIC_SWEEP_LOSSES=0 1", "SOFTNIC_SWEEP_SECONDS=1",
		"SOFTNIC_SWEEP_LOSSLESS_RUNS=1", "SOFTNIC_SWEEP_RUNS=1", "SOFTNIC_SWEEP_SIZE=1048576")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	start := time.Now()
	b, err := cmd.CombinedOutput()
	t.Logf("sweep-loss.sh (%.1f s):\n%s", time.Since(start).Seconds(), b)
	if _, serr := os.Stat(filepath.Join(netns.Dir, prefix+"-a")); serr == nil {
		t.Errorf("sweep-loss.sh left namespace %s-a", prefix)
		down := exec.Command("bash", filepath.Join(filepath.Dir(script), "testbed.sh"), "down")
		down.Env = append(os.Environ(), "SOFTNIC_NS_PREFIX="+prefix)
		down.Run()
	}
	if err != nil {
		t.Fatalf("sweep-loss.sh: %v", err)
	}
	read := func(name string) []map[string]string {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]string
		for _, r := range recs[1:] {
			m := map[string]string{"": strings.Join(recs[0], ",")}
			for i, h := range recs[0] {
				m[h] = r[i]
			}
			rows = append(rows, m)
		}
		return rows
	}
	runs := read("testbed-igbn-fig6a-runs.csv")
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 4 (2 schemes x 2 losses)", len(runs))
	}
	for _, r := range runs {
		if r["status"] != "ok" || r["tx_depth"] != "1" || r["ack_timeout_us"] != "134217" || r["size"] != "1048576" || r["nic_scheme"] != r["scheme"] {
			t.Errorf("run %v", r)
		}
	}
	merged := read("testbed-igbn-fig6a.csv")
	if len(merged) != 4 || !strings.HasPrefix(merged[0][""], "scheme,loss,relative,") {
		t.Fatalf("merged rows %v", merged)
	}
	var points []string
	for _, r := range merged {
		points = append(points, r["scheme"]+"@"+r["loss"])
		if r["loss"] == "0" && r["relative"] != "1.0000" {
			t.Errorf("%s lossless relative %s", r["scheme"], r["relative"])
		}
	}
	if !slices.Equal(points, []string{"gbn@0", "gbn@0.01", "igbn@0", "igbn@0.01"}) {
		t.Errorf("points %v", points)
	}
	if _, err := os.Stat(filepath.Join(out, "testbed-igbn-fig6a.png")); err != nil {
		t.Fatal(err)
	}
}
