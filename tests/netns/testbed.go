//go:build linux

package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// Host is one end of a veth link in the testbed.
type Host struct {
	// NS is the network namespace name (for Do, `ip netns exec`).
	NS string
	// Iface is the veth end in NS.
	Iface string
	IPv4  netip.Addr
	IPv6  netip.Addr
}

// Testbed is a running scripts/testbed.sh instance:
//
//	A (a-sw) <-> (sw-a) switch (sw-b) <-> (b-sw) B
//
// A and B route to each other through the switch, which forwards and
// injects loss (Loss). The addresses are testbed.sh's; TestTestbed checks
// that the two agree.
type Testbed struct {
	// Prefix is the SOFTNIC_NS_PREFIX of this instance.
	Prefix string
	// A and B are the hosts.
	A, B Host
	// SwitchA and SwitchB are the switch's ports facing A and B (same
	// namespace); their addresses are the hosts' default gateways.
	SwitchA, SwitchB Host
	// MTU is the veth MTU.
	MTU int

	tb     testing.TB
	script string
}

// Hosts by the names testbed.sh's exec command takes.
const (
	HostA      = "a"
	HostSwitch = "sw"
	HostB      = "b"
)

// DefaultMTU is testbed.sh's veth MTU; see the script for why 3000.
const DefaultMTU = 3000

var testbedSeq atomic.Uint32

// stalePrefix matches the namespaces NewTestbed makes: "sn" + the test
// process id in hex + "g" + a sequence number in hex, then the host.
var stalePrefix = regexp.MustCompile(`^(sn([0-9a-f]+)g[0-9a-f]+)-(a|sw|b)$`)

// NewTestbed brings up a testbed with a prefix unique to this process and
// call, and removes it in tb.Cleanup, also when the test fails. Namespaces
// left by an earlier test process that was killed (its pid is gone) are
// removed first. Skips (see RequireRoot) without root or iproute2.
func NewTestbed(tb testing.TB) *Testbed {
	tb.Helper()
	RequireRoot(tb)
	RequireIP(tb)
	script, err := ScriptPath()
	if err != nil {
		tb.Fatal(err)
	}
	sweepStale(tb, script)

	// At most 2+6+1+3 = 12 characters, the script's limit; pids are at
	// most 2^22 (6 hex digits).
	prefix := fmt.Sprintf("sn%xg%x", os.Getpid(), testbedSeq.Add(1)&0xfff)
	t := &Testbed{
		Prefix:  prefix,
		A:       Host{NS: prefix + "-a", Iface: "a-sw", IPv4: netip.MustParseAddr("198.18.0.1"), IPv6: netip.MustParseAddr("2001:db8:a::1")},
		SwitchA: Host{NS: prefix + "-sw", Iface: "sw-a", IPv4: netip.MustParseAddr("198.18.0.254"), IPv6: netip.MustParseAddr("2001:db8:a::fe")},
		SwitchB: Host{NS: prefix + "-sw", Iface: "sw-b", IPv4: netip.MustParseAddr("198.18.1.254"), IPv6: netip.MustParseAddr("2001:db8:b::fe")},
		B:       Host{NS: prefix + "-b", Iface: "b-sw", IPv4: netip.MustParseAddr("198.18.1.1"), IPv6: netip.MustParseAddr("2001:db8:b::1")},
		MTU:     DefaultMTU,
		tb:      tb,
		script:  script,
	}
	if v := os.Getenv("SOFTNIC_MTU"); v != "" {
		if t.MTU, err = strconv.Atoi(v); err != nil {
			tb.Fatalf("SOFTNIC_MTU=%q: %v", v, err)
		}
	}
	// Registered before up, so a half-made testbed is removed too.
	tb.Cleanup(t.down)
	out, err := t.run("up")
	if err != nil {
		tb.Fatalf("testbed up: %v\n%s", err, out)
	}
	tb.Logf("%s", strings.TrimSpace(out))
	return t
}

// ScriptPath finds scripts/testbed.sh: $SOFTNIC_TESTBED_SCRIPT, else next
// to this source file (the module checkout), else in a parent of the
// working directory (when built with -trimpath).
func ScriptPath() (string, error) {
	if p := os.Getenv("SOFTNIC_TESTBED_SCRIPT"); p != "" {
		return p, nil
	}
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "scripts", "testbed.sh"))
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			candidates = append(candidates, filepath.Join(dir, "scripts", "testbed.sh"))
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("netns: scripts/testbed.sh not found (set SOFTNIC_TESTBED_SCRIPT)")
}

// sweepStale removes testbeds whose creating process no longer exists.
func sweepStale(tb testing.TB, script string) {
	tb.Helper()
	entries, err := os.ReadDir(Dir)
	if err != nil {
		return // no named namespaces at all
	}
	seen := map[string]bool{}
	for _, e := range entries {
		m := stalePrefix.FindStringSubmatch(e.Name())
		if m == nil || seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		pid, err := strconv.ParseInt(m[2], 16, 32)
		if err != nil || syscall.Kill(int(pid), 0) != syscall.ESRCH {
			continue // alive (or not ours to judge)
		}
		out, err := runScript(script, m[1], "down")
		tb.Logf("removed stale testbed %s of dead process %d: %v %s", m[1], pid, err, strings.TrimSpace(out))
	}
}

func runScript(script, prefix string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "SOFTNIC_NS_PREFIX="+prefix)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (t *Testbed) run(args ...string) (string, error) {
	return runScript(t.script, t.Prefix, args...)
}

// down removes the testbed and checks that nothing is left.
func (t *Testbed) down() {
	out, err := t.run("down")
	if err != nil {
		t.tb.Errorf("testbed down: %v\n%s", err, out)
	}
	for _, ns := range t.Namespaces() {
		if _, err := os.Stat(filepath.Join(Dir, ns)); err == nil {
			t.tb.Errorf("testbed down left namespace %s", ns)
		}
	}
}

// Namespaces returns the three namespace names.
func (t *Testbed) Namespaces() []string {
	return []string{t.A.NS, t.SwitchA.NS, t.B.NS}
}

// NS returns the namespace of host "a", "sw" or "b" (or a namespace name);
// it panics on anything else.
func (t *Testbed) NS(host string) string {
	switch host {
	case HostA, t.A.NS:
		return t.A.NS
	case HostSwitch, t.SwitchA.NS:
		return t.SwitchA.NS
	case HostB, t.B.NS:
		return t.B.NS
	}
	// A typo in a test, not a condition to handle.
	panic(fmt.Sprintf("netns: unknown testbed host %q (a, sw or b)", host))
}

// Exec runs a command in host's namespace (`ip netns exec`) and returns
// its combined output. A non-zero exit is an error, not a test failure, so
// tests can expect failures.
func (t *Testbed) Exec(host string, args ...string) (string, error) {
	return t.run(append([]string{"exec", t.NS(host)}, args...)...)
}

// Do runs fn inside host's namespace; see the package-level Do.
func (t *Testbed) Do(host string, fn func() error) error {
	return Do(t.NS(host), fn)
}

// Loss makes the switch drop pct percent (0..100, fractional allowed) of
// the frames it forwards, in both directions; 0 removes the loss. It
// returns the script's report, which names the mechanism (netem or
// nftables). Call RequireNft first: this machine's kernel has no sch_netem.
//
// It returns an error rather than failing the test so that it is safe to
// call from subtests and other goroutines.
func (t *Testbed) Loss(pct float64) (string, error) {
	out, err := t.run("loss", strconv.FormatFloat(pct, 'f', -1, 64))
	out = strings.TrimSpace(out)
	if err != nil {
		return "", fmt.Errorf("testbed loss %v: %w: %s", pct, err, out)
	}
	return out, nil
}
