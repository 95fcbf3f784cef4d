//go:build linux

package conform

import (
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
