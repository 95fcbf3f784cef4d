package netns

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether a test that cannot run here fails instead of
// skipping: SOFTNIC_REQUIRE_PRIVILEGED=1, which .ci/run sets as root once
// it has installed every package in Packages.
func Strict() bool {
	return os.Getenv("SOFTNIC_REQUIRE_PRIVILEGED") == "1"
}

// skip skips the test, or fails it when Strict.
func skip(tb testing.TB, need, format string, args ...any) {
	tb.Helper()
	why := fmt.Sprintf("needs %s: %s", need, fmt.Sprintf(format, args...))
	if Strict() {
		tb.Fatalf("cannot run: %s (not skipped because SOFTNIC_REQUIRE_PRIVILEGED=1)", why)
	}
	tb.Skip("skipping: " + why)
}

// Packages names, for every program a test runs itself or through a
// script, the Debian package that installs it: what a test without it
// tells the user to install. .ci/run installs them.
var Packages = map[string]string{
	"bash":            "bash",
	"sh":              "dash",
	"timeout":         "coreutils",
	"ip":              "iproute2",
	"ping":            "iputils-ping", // the testbed scripts resolve next hops with it
	"nft":             "nftables",     // testbed.sh's loss where the kernel has no sch_netem
	"setpriv":         "util-linux",
	"unshare":         "util-linux",
	"mount":           "mount",
	"make":            "make",
	"systemd-analyze": "systemd",
	"tshark":          "tshark",
	"gcc":             "gcc",
	"ibv_devinfo":     "ibverbs-utils",
	"ibv_rc_pingpong": "ibverbs-utils",
	"ib_write_bw":     "perftest",
	"ib_read_bw":      "perftest",
	"ib_send_bw":      "perftest",
	"ib_write_lat":    "perftest",
	"ib_atomic_bw":    "perftest",
	"rping":           "rdmacm-utils",
	"stdbuf":          "coreutils",
	// tests/rxe_test.go: scripts/rxe-vm.sh boots Linux's rxe in QEMU.
	"qemu-system-x86_64": "qemu-system-x86",
}

// RequireTool returns the path of the program name, or skips the test
// with a message naming the Debian package that installs it ("skipping:
// needs ping (apt-get install -y iputils-ping): ..."), or fails it when
// Strict. name must be in Packages, except "go": the Go toolchain, which
// apt does not install at the version go.mod wants.
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if name == "go" {
		skip(tb, "the go command", "%v (the Go toolchain from https://go.dev/dl, as go.mod asks)", err)
		return ""
	}
	pkg, ok := Packages[name]
	if !ok {
		tb.Fatalf("netns.RequireTool(%q): no Debian package for it in netns.Packages (add it there and to .ci/run)", name)
	}
	skip(tb, fmt.Sprintf("%s (apt-get install -y %s)", name, pkg), "%v", err)
	return ""
}

// RequireTools is RequireTool for each name, in order.
func RequireTools(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		RequireTool(tb, n)
	}
}

// RequireFile skips the test (fails it when Strict) unless path exists;
// pkg is the Debian package that installs it, e.g. a header of
// libibverbs-dev.
func RequireFile(tb testing.TB, path, pkg string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		skip(tb, fmt.Sprintf("%s (apt-get install -y %s)", path, pkg), "%v", err)
	}
}
