//go:build linux

// Package netns is the test harness for softnic's privileged tests and
// for every test that runs an outside program: skip helpers that name the
// missing capability or the Debian package of the missing program
// (tools.go), a two-host testbed of network namespaces
// (scripts/testbed.sh) created and always removed by the test, and Do,
// which runs Go code inside a namespace on a locked OS thread.
//
// Skipping vs failing: the Require* helpers skip a test whose privileges or
// tools are missing, with a message "skipping: needs X: reason", so `go
// test ./...` passes on a fresh machine, with or without root. .ci/run
// installs the tools and, as root, sets SOFTNIC_REQUIRE_PRIVILEGED=1; with
// it set the same helpers call tb.Fatal instead, so a CI run in which the
// privileged tests silently did not run fails rather than passes.
package netns

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Capabilities the privileged tests use: namespaces and setns need
// CAP_SYS_ADMIN, interfaces and XDP attachment CAP_NET_ADMIN, loading BPF
// CAP_BPF (CAP_SYS_ADMIN also grants it on older kernels).
var requiredCaps = []struct {
	bit  uint
	name string
}{
	{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"},
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},
}

// RequireRoot skips unless the process has the effective capabilities of
// root for networking: CAP_NET_ADMIN and CAP_SYS_ADMIN. (uid 0 alone is not
// enough in an unprivileged container, so the capability set is checked.)
func RequireRoot(tb testing.TB) {
	tb.Helper()
	const need = "root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		skip(tb, need, "capget: %v", err)
		return
	}
	var missing []string
	for _, c := range requiredCaps {
		if data[c.bit/32].Effective&(1<<(c.bit%32)) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		skip(tb, need, "running as uid %d without %s", os.Geteuid(), strings.Join(missing, ", "))
	}
}

// RequireBPF skips unless the kernel lets this process load an XDP
// program (CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN): it loads a
// two-instruction one (return XDP_PASS). Running one with
// BPF_PROG_TEST_RUN needs nothing more; attaching it and namespaces need
// RequireRoot.
func RequireBPF(tb testing.TB) {
	tb.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "softnic_probe",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
		License: "MIT",
	})
	if err != nil {
		skip(tb, "BPF (root: CAP_BPF and CAP_NET_ADMIN; a kernel with XDP)", "loading a trivial XDP program: %v", err)
		return
	}
	prog.Close()
}

// RequireAFXDP skips unless the kernel has AF_XDP sockets
// (CONFIG_XDP_SOCKETS).
func RequireAFXDP(tb testing.TB) {
	tb.Helper()
	RequireBPF(tb)
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		skip(tb, "AF_XDP (CONFIG_XDP_SOCKETS)", "socket(AF_XDP): %v", err)
		return
	}
	unix.Close(fd)
}

// RequireIP skips unless iproute2's ip is installed; the testbed script is
// built on it.
func RequireIP(tb testing.TB) {
	tb.Helper()
	RequireTool(tb, "ip")
}

// nftProbe is a ruleset of the shape testbed.sh's loss fallback uses.
const nftProbe = `table inet softnic_probe {
	chain forward {
		type filter hook forward priority filter; policy accept;
		numgen random mod 1000000 < 1 counter drop
	}
}
`

// RequireNft skips unless nft is installed and the kernel accepts the
// numgen drop rule that testbed.sh falls back to for loss when sch_netem is
// missing. `nft --check` sends the batch to the kernel and aborts it, so
// the probe changes no ruleset.
func RequireNft(tb testing.TB) {
	tb.Helper()
	RequireRoot(tb)
	const need = "nftables"
	RequireTool(tb, "nft")
	cmd := exec.Command("nft", "--check", "-f", "-")
	cmd.Stdin = strings.NewReader(nftProbe)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		skip(tb, need, "kernel rejected a numgen drop rule: %v: %s", err, strings.TrimSpace(out.String()))
	}
}
