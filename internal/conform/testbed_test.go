//go:build linux

package conform

import (
	"strings"
	"testing"

	"github.com/softnic/softnic/tests/netns"
)

// requireTestbed skips without root, AF_XDP, iproute2 or go (which
// builds softnic), and returns a runner on a fresh testbed removed at
// cleanup.
func requireTestbed(t *testing.T) *TestbedRunner {
	t.Helper()
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	netns.RequireTool(t, "go")
	dir := t.TempDir()
	bin, err := FindSoftnic("", dir)
	if err != nil {
		t.Fatal(err)
	}
	tb := netns.NewTestbed(t)
	return &TestbedRunner{Softnic: bin, Dir: dir, Hosts: TestbedHosts{
		A:      TestbedHost{NS: tb.A.NS, Iface: tb.A.Iface, IP: tb.A.IPv4},
		B:      TestbedHost{NS: tb.B.NS, Iface: tb.B.Iface, IP: tb.B.IPv4},
		Switch: tb.SwitchA.NS, SwitchA: tb.SwitchA.Iface, SwitchB: tb.SwitchB.Iface,
	}}
}

// TestTestbedSameVerdicts is the suite's CI-sized run on the testbed:
// one scheme, two cases, two runs each, through softnic switch between
// two daemons; every check must have the fabric's verdict in every run.
func TestTestbedSameVerdicts(t *testing.T) {
	r := requireTestbed(t)
	// ×128 (RTO_low 12.8 ms), not the command's default ×32: CI runs this
	// beside other packages' race-detector tests, which hold both cores,
	// and a daemon answered a SACK 8 ms late there (RTO_low at ×32 is
	// 3.2 ms), so the timer, not the signal, resent the packet.
	r.TimerShift = 7
	var plan []TestbedPlan
	for _, c := range Cases() {
		if c.Name == "write-drop-middle" || c.Name == "write-ecn" {
			plan = append(plan, TestbedPlan{Scheme: "irn", Case: c, Reps: 2})
		}
	}
	res, err := RunTestbedSuite(r, plan, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := res.WriteTables(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if res.Runs != 4 || len(res.Schemes) != 1 || len(res.Schemes[0].Cases) != 2 {
		t.Fatalf("%d runs, %d schemes: want 4 runs of one scheme's two cases", res.Runs, len(res.Schemes))
	}
	for _, c := range res.Schemes[0].Cases {
		if len(c.Errors) > 0 || c.RunsWithSwitchDrops > 0 {
			t.Errorf("%s: runs that failed %q, with switch drops %d", c.Case, c.Errors, c.RunsWithSwitchDrops)
		}
		if len(c.Checks) < 2 {
			t.Errorf("%s: %d checks", c.Case, len(c.Checks))
		}
		for _, l := range c.Latencies {
			if l.N != 2 || l.Median <= 0 {
				t.Errorf("%s %s: %d samples, median %d ns", c.Case, l.Metric, l.N, l.Median)
			}
		}
	}
	for _, d := range res.Differ {
		t.Errorf("verdict differs from the fabric's: %s", d)
	}
}
