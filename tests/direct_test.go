//go:build linux

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/internal/qowner"
	"github.com/softnic/softnic/tests/netns"
)

// cleanQueueLocks removes, at cleanup, the queue lock files of the
// hosts' interfaces in the testbed's namespaces: a direct-mode client
// killed at the end of a test leaves its file behind (harmless: nobody
// holds its lock, docs/direct.md), which is not to stay on the machine.
// Call it after the testbed is made and before any client starts, so that
// it runs after the clients are killed and before the namespaces go.
func cleanQueueLocks(t *testing.T, tb *netns.Testbed, hosts ...*e2eHost) {
	t.Cleanup(func() {
		for _, h := range hosts {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(netns.Dir, tb.NS(h.name)), &st); err != nil {
				t.Errorf("clean queue locks: %v", err)
				continue
			}
			l, _ := filepath.Glob(filepath.Join(qowner.Dir, fmt.Sprintf("%s.q*.net%d.lock", h.self.Iface, st.Ino)))
			for _, f := range l {
				if err := os.Remove(f); err != nil {
					t.Errorf("clean queue locks: %v", err)
				}
			}
		}
	})
}

// waitXDP waits until h's interface carries softnic's XDP program: a
// direct-mode client has taken its queue (the lock comes first).
func waitXDP(t *testing.T, tb *netns.Testbed, h *e2eHost, c *clientProc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(xdpOn(t, tb, h.name, h.self.Iface), "xdp_steer") {
		select {
		case <-c.exited:
			t.Fatalf("client %s exited (%v) before attaching XDP:\n%s", c.name, c.err, c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no XDP program on %s 30 s after client %s started:\n%s", h.self.Iface, c.name, c.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refused runs a direct-mode client on h that must fail at once, and
// returns its output.
func refused(t *testing.T, tb *netns.Testbed, h *e2eHost) string {
	t.Helper()
	c := startClient(t, tb, h.name, "second owner on "+h.name, "--direct", h.self.Iface, "--listen", "127.0.0.1:1", "--timeout", "5s")
	if code := c.wait(t, 30*time.Second); code == 0 {
		t.Fatalf("a second owner of %s queue 0 ran (exit 0):\n%s", h.self.Iface, c.out.String())
	}
	return c.out.String()
}

// TestDirectQueueOwner: a queue has one owner. A second direct-mode
// program on a queue that a live one owns is refused with one line naming
// it (program and pid); once the owner is SIGKILLed its lock file stays
// behind and does not block: a new pair runs on the queue. A daemon on
// the interface owns its queues too.
func TestDirectQueueOwner(t *testing.T) {
	tb := requireE2E(t)
	a, b := newE2EHosts(t, tb)
	a.direct, a.ip = true, tb.A.IPv4
	b.direct, b.ip = true, tb.B.IPv4
	cleanQueueLocks(t, tb, a, b)

	// The first owner: a responder waiting for a peer that never comes.
	first := startClient(t, tb, a.name, "first owner on "+a.name, "--direct", a.self.Iface,
		"--listen", fmt.Sprintf("%v:%d", a.ip, tcpPort.Add(1)), "--timeout", "2m")
	waitXDP(t, tb, a, first)
	out := refused(t, tb, a)
	t.Logf("second owner: %s", strings.TrimSpace(out))
	want := fmt.Sprintf("queue 0 of %s is owned by e2eclient (pid %d)", a.self.Iface, first.cmd.Process.Pid)
	if !strings.Contains(out, want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("second owner said %q, want one line with %q", out, want)
	}
	// The refusal took nothing from the owner.
	if x := xdpOn(t, tb, a.name, a.self.Iface); !strings.Contains(x, "xdp_steer") {
		t.Errorf("the owner's XDP program is gone after a refused second owner: %q", x)
	}

	// A daemon started on the interface is turned away, naming the
	// direct-mode owner, and leaves it running.
	out, code := runSoftnic(t, []string{"ip", "netns", "exec", tb.NS(a.name)}, "run", "--iface", a.self.Iface,
		"--socket", filepath.Join(t.TempDir(), "refused.sock"), "--metrics", "")
	want = fmt.Sprintf("interface %s is in use: XDP program", a.self.Iface)
	wantWho := fmt.Sprintf("attached by e2eclient (pid %d,", first.cmd.Process.Pid)
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, wantWho) {
		t.Errorf("softnic run beside a direct-mode owner: exit %d, %q; want 1, %q and %q", code, out, want, wantWho)
	}
	t.Logf("daemon beside a direct-mode owner: %s", strings.TrimSpace(out))
	select {
	case <-first.exited:
		t.Fatalf("the direct-mode owner exited when a daemon was refused:\n%s", first.out.String())
	default:
	}

	// SIGKILL: no cleanup runs; the lock file stays, naming the dead pid.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 10*time.Second)
	locks, _ := filepath.Glob(filepath.Join(qowner.Dir, a.self.Iface+".q0.net*.lock"))
	if len(locks) != 1 {
		t.Fatalf("lock files of %s queue 0 after SIGKILL: %v, want the dead owner's one", a.self.Iface, locks)
	}
	if pid, prog := qowner.Owner(locks[0]); pid != first.cmd.Process.Pid || prog != "e2eclient" {
		t.Fatalf("stale lock file names %d %q, want the killed %d e2eclient", pid, prog, first.cmd.Process.Pid)
	}
	// The kernel released the killed owner's XDP link with the process.
	if x := xdpOn(t, tb, a.name, a.self.Iface); x != "" {
		t.Errorf("XDP program left on %s after its direct-mode owner was killed: %q", a.self.Iface, x)
	}
	// Recovered: a pair runs over the queue the dead owner had.
	runPair(t, tb, a, b, 7, "--sizes", "4095", "--seed", "11")
	for _, h := range []*e2eHost{a, b} {
		if l, _ := filepath.Glob(filepath.Join(qowner.Dir, h.self.Iface+".q0.net*.lock")); len(l) != 0 {
			t.Errorf("lock files left after clean exits: %v", l)
		}
	}

	// A daemon on the interface owns its queues.
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	out = refused(t, tb, a)
	t.Logf("beside a daemon: %s", strings.TrimSpace(out))
	want = fmt.Sprintf("queue 0 of %s is owned by softnic (pid %d), a softnic daemon", a.self.Iface, a.d.cmd.Process.Pid)
	if !strings.Contains(out, want) {
		t.Errorf("direct mode beside a daemon said %q, want %q", out, want)
	}
	mustStats(t, a.socket) // the daemon is unharmed
	stopE2EDaemon(t, tb, a)
}

// ibvProcOn runs an ibverbs program on host h over the drop-in library:
// through h's daemon, or in direct mode (SOFTNIC_DIRECT=IFACE) when h
// has none.
func ibvProcOn(t *testing.T, tb *netns.Testbed, h *e2eHost, argv ...string) *childProc {
	t.Helper()
	if !h.direct {
		return ibvProc(t, tb, h.name, h.socket, argv...)
	}
	env := []string{"LD_LIBRARY_PATH=" + ibverbsLib(t), "SOFTNIC_DIRECT=" + h.self.Iface}
	args := append(append([]string{"netns", "exec", tb.NS(h.name), "env"}, env...), argv...)
	return startChild(t, exec.Command("ip", args...), "")
}

// TestIbverbsDirect: Debian's ibv_rc_pingpong (with and without
// completion events, data checked) and perftest's ib_write_lat and
// ib_write_bw over the drop-in library in direct mode on both hosts: no
// daemon, SOFTNIC_DIRECT=IFACE. ib_write_lat's receiver waits for each
// RDMA WRITE by watching its buffer, without calling the library: only
// the library's progress goroutine can land the data. Each side exits 0
// with its report, and the programs leave no XDP program behind.
func TestIbverbsDirect(t *testing.T) {
	needIbverbs(t, "ibv_rc_pingpong", "ib_write_lat", "ib_write_bw")
	tb := requireE2E(t)
	ibverbsLib(t)
	a, b := newE2EHosts(t, tb)
	a.direct, a.ip = true, tb.A.IPv4
	b.direct, b.ip = true, tb.B.IPv4
	cleanQueueLocks(t, tb, a, b)
	port := 18700
	for _, extra := range [][]string{nil, {"-e"}} {
		port++
		argv := append([]string{"ibv_rc_pingpong", "-g", "0", "-p", fmt.Sprint(port), "-n", "1000", "-c"}, extra...)
		cli, srv := ibvPair(t, tb, a, b, port, argv...)
		for side, out := range map[string]string{"client": cli, "server": srv} {
			if !strings.Contains(out, "1000 iters in") || strings.Contains(out, "invalid data") {
				t.Errorf("ibv_rc_pingpong %v %s: no report, or data differs:\n%s", extra, side, out)
			}
		}
		t.Logf("ibv_rc_pingpong %v, client:\n%s", extra, lastLines(cli, 2))
	}
	for _, p := range [][]string{
		{"ib_write_lat", "-s", "8", "-m", "1024", "-n", "1000"},
		{"ib_write_bw", "-s", "65536", "-m", "1024", "-n", "2000"},
	} {
		port++
		argv := append(append([]string{}, p...), "-F", "-p", fmt.Sprint(port))
		cli, srv := ibvPair(t, tb, a, b, port, argv...)
		for side, out := range map[string]string{"client": cli, "server": srv} {
			if !strings.Contains(out, "#bytes") {
				t.Errorf("%s %s: no perftest table:\n%s", p[0], side, out)
			}
		}
		t.Logf("%s\n%s", strings.Join(argv, " "), lastLines(cli, 3))
	}
	for _, h := range []*e2eHost{a, b} {
		if x := xdpOn(t, tb, h.name, h.self.Iface); x != "" {
			t.Errorf("XDP program left on %s after the programs exited: %s", h.self.Iface, x)
		}
	}

	// A queue another program owns: the library says who, in one line
	// on stderr, and the program sees no device.
	owner := startClient(t, tb, a.name, "owner on "+a.name, "--direct", a.self.Iface,
		"--listen", fmt.Sprintf("%v:%d", a.ip, tcpPort.Add(1)), "--timeout", "2m")
	waitXDP(t, tb, a, owner)
	dev := ibvProcOn(t, tb, a, "ibv_devinfo")
	<-dev.exited
	out := dev.out.String()
	want := fmt.Sprintf("softnic libibverbs: SOFTNIC_DIRECT=%s: verbs: direct mode: queue 0 of %s is owned by e2eclient (pid %d)", a.self.Iface, a.self.Iface, owner.cmd.Process.Pid)
	if !strings.Contains(out, want) || strings.Contains(out, "PORT_ACTIVE") {
		t.Errorf("ibv_devinfo on an owned queue:\n%s\nwant the line %q and no device", out, want)
	}
	t.Logf("ibv_devinfo on an owned queue: %s", strings.TrimSpace(out))
}

// benchArgs are softnic-bench's flags that reach h's NIC.
func (h *e2eHost) benchArgs() []string {
	if h.direct {
		return []string{"--direct", h.self.Iface}
	}
	return []string{"--socket", h.socket}
}

// runBenchOn runs softnic-bench's server on b and its client on a, each
// reaching its NIC its own way, and returns both outputs; both must exit
// 0.
func runBenchOn(t *testing.T, tb *netns.Testbed, a, b *e2eHost, port int, args ...string) (client, server string) {
	t.Helper()
	p := fmt.Sprint(port)
	srv := startChild(t, exec.Command("ip", append([]string{"netns", "exec", tb.NS(b.name), benchBinary(t)}, append(append(append([]string{}, args...), b.benchArgs()...), "-p", p)...)...), "")
	waitListen(t, tb, b.name, port, srv)
	cli := startChild(t, exec.Command("ip", append([]string{"netns", "exec", tb.NS(a.name), benchBinary(t)}, append(append(append([]string{}, args...), a.benchArgs()...), "-p", p, b.ip.String())...)...), "")
	client = waitExit(t, cli, "client softnic-bench "+args[0], 3*time.Minute)
	server = waitExit(t, srv, "server softnic-bench "+args[0], 30*time.Second)
	return client, server
}

// TestBenchDirect: softnic-bench --direct IFACE on both hosts runs every
// verbs test (bandwidth, latency, with completion events), each side
// exiting 0 with perftest's table, its device named as direct; the
// passive side of a WRITE test never polls, so its engine runs on the
// progress goroutine. Then the same wire with the modes mixed: the
// e2e table between a direct-mode client on A and a daemon on B.
func TestBenchDirect(t *testing.T) {
	tb := requireE2E(t)
	benchBinary(t)
	a, b := newE2EHosts(t, tb)
	a.direct, a.ip = true, tb.A.IPv4
	b.direct, b.ip = true, tb.B.IPv4
	cleanQueueLocks(t, tb, a, b)
	port := 18800
	for _, args := range [][]string{
		{"write_bw", "-s", "65536", "-n", "500"},
		{"read_bw", "-s", "65536", "-n", "300"},
		{"send_bw", "-s", "65536", "-n", "300"},
		{"atomic_bw", "-n", "500"},
		{"write_lat", "-s", "8", "-n", "500"},
		{"read_lat", "-s", "8", "-n", "500"},
		{"send_lat", "-s", "8", "-n", "500"},
		{"write_bw", "-s", "4096", "-n", "500", "-e"},
		{"send_lat", "-s", "64", "-n", "300", "-e"},
	} {
		port++
		cli, srv := runBenchOn(t, tb, a, b, port, args...)
		for side, out := range map[string]string{"client": cli, "server": srv} {
			if !strings.Contains(out, "#bytes") || !strings.Contains(out, "(direct mode, queue 0)") {
				t.Errorf("%v %s: no table or not in direct mode:\n%s", args, side, out)
			}
		}
		t.Logf("%v: %s", args, lastLines(cli, 2))
	}
	for _, h := range []*e2eHost{a, b} {
		if x := xdpOn(t, tb, h.name, h.self.Iface); x != "" {
			t.Errorf("XDP program left on %s: %s", h.self.Iface, x)
		}
	}
	// One wire: direct mode on A, a daemon on B, the whole table each way.
	b.direct = false
	startE2EDaemon(t, tb, b, tb.B.IPv4)
	runPair(t, tb, a, b, e2eSteps, "--sizes", e2eSizes, "--seed", "21")
	runPair(t, tb, b, a, e2eSteps, "--sizes", e2eSizes, "--seed", "22")
	stopE2EDaemon(t, tb, b)
}
