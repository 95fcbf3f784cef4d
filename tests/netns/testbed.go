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
	// Hosts are every host, A and B first, as `testbed.sh hosts` lists
	// them: more than two with NewTestbedHosts.
	Hosts []Host

	tb     testing.TB
	script string
	hosts  int // SOFTNIC_HOSTS
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
var stalePrefix = regexp.MustCompile(`^(sn([0-9a-f]+)g[0-9a-f]+)-([a-z]|sw)$`)

// NewTestbed brings up a testbed with a prefix unique to this process and
// call, and removes it in tb.Cleanup, also when the test fails. Namespaces
// left by an earlier test process that was killed (its pid is gone) are
// removed first. Skips (see RequireRoot) without root or iproute2.
func NewTestbed(tb testing.TB) *Testbed {
	tb.Helper()
	return NewTestbedHosts(tb, 2)
}

// NewTestbedHosts is NewTestbed with n hosts (testbed.sh up N): A, B,
// then c, d, ... in Hosts, each named by its letter for Exec, Do and NS.
func NewTestbedHosts(tb testing.TB, n int) *Testbed {
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
		hosts:   n,
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
	if out, err = t.run("hosts"); err != nil {
		tb.Fatalf("testbed hosts: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var name, ns, iface, v4, v6 string
		if _, err := fmt.Sscan(line, &name, &ns, &iface, &v4, &v6); err != nil {
			tb.Fatalf("testbed hosts: line %q: %v", line, err)
		}
		a4, err4 := netip.ParseAddr(v4)
		a6, err6 := netip.ParseAddr(v6)
		if err4 != nil || err6 != nil {
			tb.Fatalf("testbed hosts: line %q: addresses %v, %v", line, err4, err6)
		}
		t.Hosts = append(t.Hosts, Host{NS: ns, Iface: iface, IPv4: a4, IPv6: a6})
	}
	if len(t.Hosts) != n || t.Hosts[0] != t.A || t.Hosts[1] != t.B {
		tb.Fatalf("testbed hosts lists %+v; want %d hosts, A %+v and B %+v first", t.Hosts, n, t.A, t.B)
	}
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
	return runScriptEnv(script, prefix, nil, args...)
}

func runScriptEnv(script, prefix string, env []string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(append(os.Environ(), "SOFTNIC_NS_PREFIX="+prefix), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (t *Testbed) run(args ...string) (string, error) {
	return runScriptEnv(t.script, t.Prefix, []string{"SOFTNIC_HOSTS=" + strconv.Itoa(t.hosts), "SOFTNIC_SWITCH=kernel"}, args...)
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

// Namespaces returns the namespace names: A's, the switch's, B's, then
// the other hosts'.
func (t *Testbed) Namespaces() []string {
	ns := []string{t.A.NS, t.SwitchA.NS, t.B.NS}
	for _, h := range t.Hosts[min(2, len(t.Hosts)):] {
		ns = append(ns, h.NS)
	}
	return ns
}

// NS returns the namespace of host "a", "sw", "b", "c", ... (or a
// namespace name); it panics on anything else.
func (t *Testbed) NS(host string) string {
	switch host {
	case HostA, t.A.NS:
		return t.A.NS
	case HostSwitch, t.SwitchA.NS:
		return t.SwitchA.NS
	case HostB, t.B.NS:
		return t.B.NS
	}
	for _, h := range t.Hosts {
		if host == h.NS || t.Prefix+"-"+host == h.NS {
			return h.NS
		}
	}
	// A typo in a test, not a condition to handle.
	panic(fmt.Sprintf("netns: unknown testbed host %q (a, sw, b, ...)", host))
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
