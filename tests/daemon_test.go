//go:build linux

// Package tests holds softnic's end-to-end tests: the daemon binary, run
// in the namespaces of the two-host testbed, driven only through its
// command line, signals, control socket and metrics endpoint.
package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/internal/metricslint"
	"github.com/softnic/softnic/tests/netns"
)

var (
	dirOnce sync.Once
	binDir  string // the test binaries' directory, removed by TestMain
	dirErr  error
	daemon  built
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// built is a program built once per test process into binDir, a
// directory that an unprivileged user may enter (the not-root case runs
// the daemon as nobody).
type built struct {
	once sync.Once
	path string
	err  error
}

// get builds pkg as name on first use and returns its path.
func (b *built) get(t *testing.T, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		dirOnce.Do(func() {
			if binDir, dirErr = os.MkdirTemp("", "softnic-test-"); dirErr == nil {
				dirErr = os.Chmod(binDir, 0o755)
			}
		})
		if b.err = dirErr; b.err != nil {
			return
		}
		b.path = filepath.Join(binDir, name)
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// softnicBinary builds cmd/softnic once per test process.
func softnicBinary(t *testing.T) string {
	return daemon.get(t, "softnic", "github.com/softnic/softnic/cmd/softnic")
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemonProc is a `softnic run` started in a testbed namespace.
type daemonProc struct {
	t *testing.T
	*childProc
}

// childProc is a process a test started: its combined output and, once
// exited is closed, cmd.Wait's error.
type childProc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startChild starts cmd with its output collected; at cleanup it is
// killed if still running and, when the test failed and logAs is not
// empty, its output is logged under logAs.
func startChild(t *testing.T, cmd *exec.Cmd, logAs string) *childProc {
	t.Helper()
	c := &childProc{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() && logAs != "" {
			t.Logf("%s:\n%s", logAs, c.out.String())
		}
	})
	return c
}

// startDaemon starts `softnic run args...` in host's namespace. `ip netns
// exec` execs the daemon in place, so the process is the daemon and
// signals reach it directly. The daemon is killed at cleanup if the test
// left it running.
func startDaemon(t *testing.T, tb *netns.Testbed, host string, args ...string) *daemonProc {
	t.Helper()
	return startDaemonIn(t, tb, host, nil, args...)
}

// startDaemonIn is startDaemon with the daemon run by wrap, a command
// that ends by exec'ing its arguments (so the process is still the
// daemon's).
func startDaemonIn(t *testing.T, tb *netns.Testbed, host string, wrap []string, args ...string) *daemonProc {
	t.Helper()
	bin := softnicBinary(t)
	argv := append(append(append([]string{"netns", "exec", tb.NS(host)}, wrap...), bin, "run"), args...)
	d := &daemonProc{t: t, childProc: startChild(t, exec.Command("ip", argv...), "daemon output")}
	return d
}

// stats runs `softnic stats --socket socket` and returns its output.
func stats(t *testing.T, socket string) (string, error) {
	out, err := exec.Command(softnicBinary(t), "stats", "--socket", socket).CombinedOutput()
	return string(out), err
}

// waitReady waits until the daemon answers `softnic stats` on socket and
// returns the answer; it fails the test if the daemon exits first.
func (d *daemonProc) waitReady(socket string) string {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-d.exited:
			d.t.Fatalf("daemon exited before it answered: %v\n%s", d.err, d.out.String())
		default:
		}
		out, err := stats(d.t, socket)
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("softnic stats got no answer on %s: %v %s\ndaemon output:\n%s", socket, err, out, d.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig and waits for the daemon to exit.
func (d *daemonProc) signal(sig os.Signal) error {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.exited:
		return d.err
	case <-time.After(15 * time.Second):
		d.t.Fatalf("daemon did not exit within 15 s of %v\n%s", sig, d.out.String())
		return nil
	}
}

// runSoftnic runs softnic to completion and returns its output and exit
// code.
func runSoftnic(t *testing.T, prefix []string, args ...string) (string, int) {
	t.Helper()
	argv := append(append(prefix, softnicBinary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	done := make(chan struct{})
	time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%v: %v", argv, err)
	return "", 0
}

// xdpOn returns the XDP part of `ip -d link show` for the interface.
func xdpOn(t *testing.T, tb *netns.Testbed, host, iface string) string {
	t.Helper()
	out, err := tb.Exec(host, "ip", "-d", "link", "show", "dev", iface)
	if err != nil {
		t.Fatalf("ip link show: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "prog/xdp") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return strings.Join(lines, "\n")
}

// httpGetIn fetches url from inside host's namespace (the metrics
// endpoint listens on that namespace's loopback).
func httpGetIn(tb *netns.Testbed, host, url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := tb.Do(host, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

// statValue returns the value of name in `softnic stats` output.
func statValue(t *testing.T, out, name string) uint64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		var n string
		var v uint64
		if _, err := fmt.Sscanf(l, "%s %d", &n, &v); err == nil && n == name {
			return v
		}
	}
	t.Fatalf("no counter %s in:\n%s", name, out)
	return 0
}

// sendUDP sends one datagram from host to dst with the kernel's stack.
func sendUDP(t *testing.T, tb *netns.Testbed, host string, dst netip.AddrPort, payload []byte) {
	t.Helper()
	err := tb.Do(host, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func requireDaemon(t *testing.T) *netns.Testbed {
	t.Helper()
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	netns.RequireTool(t, "go") // builds cmd/softnic
	return netns.NewTestbed(t)
}

func TestDaemonLifecycle(t *testing.T) {
	tb := requireDaemon(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "softnic.sock")
	// The config file sets the interface and metrics; the flag wins
	// where both set a key.
	config := filepath.Join(dir, "softnic.conf")
	os.WriteFile(config, []byte("# softnic test\niface = a-sw\nmetrics = 127.0.0.1:9479\nlog-level = warn\n"), 0o644)
	d := startDaemon(t, tb, netns.HostA, "--config", config, "--log-level", "debug", "--socket", socket, "--pprof", "127.0.0.1:6060")
	out := d.waitReady(socket)
	if !strings.HasPrefix(out, "sent_pkts 0\nrcvd_pkts 0\n") {
		t.Errorf("stats do not start with the engine's counters in rxe order:\n%s", out)
	}
	for _, name := range []string{"port_rx_frames", "port_rx_dropped", "xdp_steered", "xdp_pass_not_ip"} {
		statValue(t, out, name)
	}
	// At the file's level (warn) the start-up messages would not show.
	if !strings.Contains(d.out.String(), `level=INFO msg="softnic running"`) {
		t.Errorf("--log-level debug did not override the config file's warn:\n%s", d.out.String())
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("control socket: %v, mode %v, want 0660", err, fi.Mode().Perm())
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); !strings.Contains(x, "xdp_steer") {
		t.Errorf("no xdp_steer on %s while the daemon runs: %q", tb.A.Iface, x)
	}

	// A datagram to A:4791 from B's kernel crosses the switch, is
	// steered to the AF_XDP socket and reaches the engine, which drops it
	// as malformed (it is not RoCE): the whole receive path, counted.
	sendUDP(t, tb, netns.HostB, netip.AddrPortFrom(tb.A.IPv4, 4791), []byte("not a RoCE packet, but to its port"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := stats(t, socket)
		if err != nil {
			t.Fatal(err, out)
		}
		if statValue(t, out, "xdp_steered") == 1 && statValue(t, out, "port_rx_frames") == 1 && statValue(t, out, "rcvd_malformed") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the datagram to port 4791 did not reach the engine:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}

	metrics, err := httpGetIn(tb, netns.HostA, "http://127.0.0.1:9479/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# TYPE softnic_rcvd_pkts_total counter\nsoftnic_rcvd_pkts_total 0\n", "softnic_rcvd_malformed_total 1\n",
		"softnic_xdp_steered_total 1\n", "# TYPE softnic_qpc_resident gauge\n", "softnic_build_info{",
		// The AF_XDP port's per-queue counters, by queue (veth: queue 0).
		"\nsoftnic_port_rx_frames_total{queue=\"0\"} 1\n", "\nsoftnic_port_rx_ring_full_total{queue=\"0\"} 0\n", "\nsoftnic_port_wakeups_total "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Only by queue: not also as an unlabelled sum.
	if strings.Contains(metrics, "\nsoftnic_port_rx_frames_total ") {
		t.Errorf("/metrics has softnic_port_rx_frames_total both with and without the queue label")
	}
	// The running daemon's page, XDP and AF_XDP counters included, is
	// clean by Prometheus's conventions.
	problems, err := metricslint.Problems(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("/metrics: %s", p)
	}
	// Profiles on their own listener (--pprof), not on the metrics one.
	if _, err := httpGetIn(tb, netns.HostA, "http://127.0.0.1:6060/debug/pprof/goroutine?debug=1"); err != nil {
		t.Errorf("--pprof: %v", err)
	}
	if _, err := httpGetIn(tb, netns.HostA, "http://127.0.0.1:9479/debug/pprof/"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the metrics listener serves /debug/pprof/: %v", err)
	}

	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: daemon exited with %v, want 0\n%s", err, d.out.String())
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind: %v", err)
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); x != "" {
		t.Errorf("XDP program left on %s after SIGTERM: %s", tb.A.Iface, x)
	}
}

func TestDaemonRestartAfterKill(t *testing.T) {
	tb := requireDaemon(t)
	socket := filepath.Join(t.TempDir(), "softnic.sock")
	args := []string{"--iface", tb.A.Iface, "--socket", socket, "--metrics", ""}
	d := startDaemon(t, tb, netns.HostA, args...)
	d.waitReady(socket)
	if err := d.signal(syscall.SIGKILL); err == nil {
		t.Fatal("daemon exited cleanly on SIGKILL?")
	}
	if _, err := os.Lstat(socket); err != nil {
		t.Fatalf("a SIGKILLed daemon should leave its socket: %v", err)
	}
	// A program attached the netlink way, as an older build or `ip link
	// set xdp` leaves it, outlives its process: the next daemon must
	// replace it. iproute2 without libbpf cannot load the object; then
	// only the stale socket is exercised.
	stale := false
	if out, err := tb.Exec(netns.HostA, "ip", "link", "set", "dev", tb.A.Iface, "xdpgeneric", "obj", "../bpf/steer_bpfel.o", "sec", "xdp"); err != nil {
		t.Logf("could not attach a stale program with iproute2 (%v: %s); testing the stale socket only", err, strings.TrimSpace(out))
	} else {
		stale = true
	}

	d = startDaemon(t, tb, netns.HostA, args...)
	d.waitReady(socket)
	if !strings.Contains(d.out.String(), "removed stale verbs socket") {
		t.Errorf("the restarted daemon did not report the stale socket:\n%s", d.out.String())
	}
	if stale && !strings.Contains(d.out.String(), "removed a stale softnic XDP program") {
		t.Errorf("the restarted daemon did not report the stale XDP program:\n%s", d.out.String())
	}
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.out.String())
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); x != "" {
		t.Errorf("XDP program left on %s: %s", tb.A.Iface, x)
	}
}

func TestDaemonUDPPort(t *testing.T) {
	tb := requireDaemon(t)
	socket := filepath.Join(t.TempDir(), "softnic.sock")
	d := startDaemon(t, tb, netns.HostB, "--iface", tb.B.Iface, "--port", "udp", "--ip", tb.B.IPv6.String(), "--socket", socket, "--metrics", "")
	out := d.waitReady(socket)
	statValue(t, out, "port_syscalls")
	if strings.Contains(out, "xdp_") {
		t.Errorf("a UDP-port daemon reports XDP counters:\n%s", out)
	}
	if x := xdpOn(t, tb, netns.HostB, tb.B.Iface); x != "" {
		t.Errorf("a UDP-port daemon attached XDP: %s", x)
	}
	if err := d.signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v\n%s", err, d.out.String())
	}
}

func TestDaemonErrors(t *testing.T) {
	tb := requireDaemon(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "softnic.sock")
	inA := []string{"ip", "netns", "exec", tb.A.NS}
	inB := []string{"ip", "netns", "exec", tb.B.NS}

	expect := func(t *testing.T, out string, code, wantCode int, want string) {
		t.Helper()
		if code != wantCode || !strings.Contains(out, want) {
			t.Errorf("exit %d, output %q; want exit %d and %q", code, out, wantCode, want)
		}
	}
	t.Run("no subcommand", func(t *testing.T) {
		out, code := runSoftnic(t, nil)
		expect(t, out, code, 2, "usage: softnic <command>")
	})
	// A bad command line exits with status 2, as softnic-bench's does,
	// whether the flag package catches it or parseRun does.
	t.Run("unknown flag", func(t *testing.T) {
		out, code := runSoftnic(t, inA, "run", "--iface", tb.A.Iface, "--colour", "blue", "--socket", socket)
		expect(t, out, code, 2, "flag provided but not defined: -colour")
	})
	t.Run("flag value of the wrong kind", func(t *testing.T) {
		out, code := runSoftnic(t, inA, "run", "--iface", tb.A.Iface, "--mtu", "many", "--socket", socket)
		expect(t, out, code, 2, `invalid value "many" for flag -mtu`)
	})
	t.Run("bad flag value", func(t *testing.T) {
		out, code := runSoftnic(t, inA, "run", "--iface", tb.A.Iface, "--mtu", "8192", "--socket", socket)
		expect(t, out, code, 2, "softnic: run: --mtu 8192: want 1024, 2048 or 4096")
		if strings.Count(out, "\n") != 1 {
			t.Errorf("output %q, want one line", out)
		}
	})
	t.Run("stats: unknown flag", func(t *testing.T) {
		out, code := runSoftnic(t, nil, "stats", "--colour", "blue")
		expect(t, out, code, 2, "flag provided but not defined: -colour")
		if strings.Contains(out, "softnic: flag provided") {
			t.Errorf("the flag error printed twice:\n%s", out)
		}
	})
	t.Run("no such interface", func(t *testing.T) {
		out, code := runSoftnic(t, inA, "run", "--iface", "nosuch0", "--socket", socket)
		expect(t, out, code, 1, `softnic: no such interface "nosuch0"`)
	})
	t.Run("not root", func(t *testing.T) {
		setpriv := netns.RequireTool(t, "setpriv") // runs it as nobody
		out, code := runSoftnic(t, []string{setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"},
			"run", "--iface", "lo", "--socket", socket)
		expect(t, out, code, 1, "softnic: needs root (CAP_NET_ADMIN, CAP_BPF) to attach XDP; use --port udp or run as root\n")
	})

	// With a daemon running on A: its socket and its interface are taken.
	d := startDaemon(t, tb, netns.HostA, "--iface", tb.A.Iface, "--socket", socket, "--metrics", "")
	d.waitReady(socket)
	t.Run("socket in use", func(t *testing.T) {
		out, code := runSoftnic(t, inB, "run", "--iface", tb.B.Iface, "--socket", socket, "--metrics", "")
		expect(t, out, code, 1, "control socket "+socket+" is in use by a running daemon")
	})
	t.Run("interface in use", func(t *testing.T) {
		out, code := runSoftnic(t, inA, "run", "--iface", tb.A.Iface, "--socket", filepath.Join(dir, "other.sock"), "--metrics", "")
		expect(t, out, code, 1, "interface "+tb.A.Iface+" is in use")
		if _, err := os.Lstat(filepath.Join(dir, "other.sock")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused daemon left its socket: %v", err)
		}
	})
	// The first daemon is untouched by both attempts.
	if _, err := stats(t, socket); err != nil {
		t.Errorf("the running daemon stopped answering: %v", err)
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); !strings.Contains(x, "xdp_steer") {
		t.Errorf("the running daemon's XDP program is gone: %q", x)
	}
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// TestDaemonDefaultSocket: the README's `softnic run --iface IFACE`, with
// no --socket, on a host without /run/softnic: the daemon makes the
// directory (0755) and serves on /run/softnic/softnic.sock. The host's
// /run is shared, so the daemon runs in a private mount namespace in
// which a temporary directory is mounted on /run.
func TestDaemonDefaultSocket(t *testing.T) {
	netns.RequireTools(t, "unshare", "mount", "sh") // a private mount namespace
	tb := requireDaemon(t)
	run := t.TempDir() // the daemon's /run
	os.Chmod(run, 0o755)
	wrap := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /run && exec "$@"`, run}
	d := startDaemonIn(t, tb, netns.HostA, wrap, "--iface", tb.A.Iface, "--metrics", "")
	socket := filepath.Join(run, "softnic", "softnic.sock") // /run/softnic/softnic.sock in the daemon's namespace
	d.waitReady(socket)
	if fi, err := os.Stat(filepath.Dir(socket)); err != nil || fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("socket directory: %v, mode %v; want root's, 0755", err, fi.Mode())
	}
	if !strings.Contains(d.out.String(), "socket=/run/softnic/softnic.sock") {
		t.Errorf("the daemon did not use the default socket:\n%s", d.out.String())
	}
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.out.String())
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind: %v", err)
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); x != "" {
		t.Errorf("XDP program left on %s: %s", tb.A.Iface, x)
	}
}

// TestDaemonSocketDirMissing: a --socket whose directory and its parent
// are missing gets them, mode 0755.
func TestDaemonSocketDirMissing(t *testing.T) {
	tb := requireDaemon(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "missing", "dir", "s.sock")
	d := startDaemon(t, tb, netns.HostB, "--iface", tb.B.Iface, "--socket", socket, "--metrics", "")
	d.waitReady(socket)
	for _, sub := range []string{"missing", "missing/dir"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, mode %v; want a directory, 0755", sub, err, fi.Mode())
		}
	}
	if err := d.signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v\n%s", err, d.out.String())
	}
}

// TestDaemonStartFailures: a start-up that fails, before XDP is attached
// or after, exits with status 1 and one line "softnic: ...", never
// panics, and leaves no XDP program on the interface and no socket.
func TestDaemonStartFailures(t *testing.T) {
	tb := requireDaemon(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	inA := []string{"ip", "netns", "exec", tb.A.NS}
	for _, tc := range []struct {
		name        string
		socket      string
		metrics     string
		want        string
		afterAttach bool
		extra       []string // more flags
	}{
		{"socket path is a file", file, "", "softnic: control socket path " + file + " exists and is not a socket", false, nil},
		{"socket directory cannot be made", filepath.Join(file, "sub", "s.sock"), "", "softnic: create control socket directory: mkdir " + file + ": not a directory", false, nil},
		// The verbs server binds in a temporary directory beside the
		// socket: a path this long does not fit a sockaddr_un.
		{"socket path too long", filepath.Join(dir, strings.Repeat("d", 100), "s.sock"), "", "softnic: verbsd: listen:", true, nil},
		// Not an address of A's namespace: the metrics listener, the
		// last thing started, cannot bind.
		{"metrics cannot listen", filepath.Join(dir, "m.sock"), "198.18.255.254:9479", "softnic: metrics: listen tcp 198.18.255.254:9479", true, nil},
		// A veth has one RX queue: queue 7 is refused before XDP is
		// attached, in one line (not one per bind mode tried).
		{"no such queue", filepath.Join(dir, "q.sock"), "", "softnic: --queues 7: " + tb.A.Iface + " has 1 RX queue (0), no queue 7", false, []string{"--queues", "7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, level := range []string{"info", "error"} {
				args := append([]string{"run", "--iface", tb.A.Iface, "--socket", tc.socket, "--metrics", tc.metrics, "--log-level", level}, tc.extra...)
				out, code := runSoftnic(t, inA, args...)
				var errLines, other []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					switch {
					case strings.HasPrefix(l, "softnic: "):
						errLines = append(errLines, l)
					case !strings.HasPrefix(l, "time="):
						// Neither the error nor a log record: the
						// rest of a multi-line error.
						other = append(other, l)
					}
				}
				if len(other) > 0 {
					t.Errorf("log level %s: lines that are neither the error nor a log record: %q", level, other)
				}
				if code != 1 || len(errLines) != 1 || !strings.HasPrefix(errLines[0], tc.want) ||
					strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
					t.Errorf("log level %s: exit %d, output:\n%s\nwant exit 1 and one line starting %q", level, code, out, tc.want)
				}
				if level == "error" && len(errLines) == 1 && out != errLines[0]+"\n" {
					t.Errorf("log level error: output %q, want only the error line", out)
				}
				if attached := strings.Contains(out, "XDP steering program attached"); level == "info" && attached != tc.afterAttach {
					t.Errorf("failed after XDP was attached: %v, want %v:\n%s", attached, tc.afterAttach, out)
				}
				if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); x != "" {
					t.Fatalf("XDP program left on %s after a failed start: %s", tb.A.Iface, x)
				}
				if fi, err := os.Lstat(tc.socket); err == nil && fi.Mode().Type() == os.ModeSocket {
					t.Errorf("the failed daemon left its socket %s", tc.socket)
				}
			}
		})
	}
}
