package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs/verbsd"
)

// These tests need no privileges; the daemon as a whole is tested as root
// in tests/daemon_test.go.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestSchemeParams: --scheme-param sets a scheme's knob, repeatable, as
// do the older --melo-pool-bits, --fasr-units and --fasr-blocks; a knob
// or value no scheme takes is a usage error naming it; a config file's
// scheme-param lines fill in the knobs the command line did not set.
func TestSchemeParams(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x", "--scheme-param", "melo.pool_bits=2048", "--scheme-param", "fasr.units=4", "--fasr-blocks", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.params.Knobs.String(); got != "fasr.blocks=9,fasr.units=4,melo.pool_bits=2048" {
		t.Errorf("knobs %s", got)
	}
	if _, err := recovery.New(recovery.MELO, o.params); err != nil {
		t.Errorf("the knobs set do not build melo: %v", err)
	}
	for _, args := range [][]string{{"--scheme-param", "melo.pool=8"}, {"--scheme-param", "melo.pool_bits=many"},
		{"--scheme-param", "nope.x=1"}, {"--scheme-param", "pool_bits=8"}, {"--melo-pool-bits", "0"}} {
		if _, err := parseRun(append([]string{"--iface", "x"}, args...)); exitStatus(err, io.Discard) != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	conf := filepath.Join(t.TempDir(), "softnic.conf")
	os.WriteFile(conf, []byte("iface = x\nscheme-param = fasr.units=2\nscheme-param = melo.pool_bits=64\nfasr-blocks = 3\nmelo-pool-bits = 32\n"), 0o644)
	if o, err = parseRun([]string{"--config", conf, "--scheme-param", "melo.pool_bits=16"}); err != nil {
		t.Fatal(err)
	}
	if got := o.params.Knobs.String(); got != "fasr.blocks=3,fasr.units=2,melo.pool_bits=16" {
		t.Errorf("config file under --scheme-param melo.pool_bits=16: knobs %s", got)
	}
	os.WriteFile(conf, []byte("iface = x\nscheme-param = melo.pool=8\n"), 0o644)
	if _, err := parseRun([]string{"--config", conf}); err == nil || !strings.Contains(err.Error(), "softnic.conf:2") || !strings.Contains(err.Error(), "no knob") {
		t.Errorf("a config file's unknown knob: %v", err)
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "softnic.conf")
	os.WriteFile(conf, []byte("# a comment\n\niface = eth9\nmtu = 2048\nport=udp\nmetrics =\n"), 0o644)
	o, err := parseRun([]string{"--config", conf, "--mtu", "1024"})
	if err != nil {
		t.Fatal(err)
	}
	if o.iface != "eth9" || o.port != "udp" || o.mtu != 1024 || o.metrics != "" || o.socket != defaultSocket {
		t.Errorf("options %+v: want iface and port from the file, mtu from the flag, metrics off, default socket", o)
	}
	for _, bad := range []string{"colour = blue\n", "iface\n", "mtu = many\n", "config = other\n"} {
		os.WriteFile(conf, []byte(bad), 0o644)
		if _, err := parseRun([]string{"--config", conf}); err == nil || !strings.Contains(err.Error(), "softnic.conf:1") {
			t.Errorf("config %q: %v, want an error naming the line", bad, err)
		}
	}
	for _, args := range [][]string{{}, {"--iface", "x", "--port", "dpdk"}, {"--iface", "x", "--mtu", "8192"}, {"--iface", "x", "extra"}} {
		if _, err := parseRun(args); err == nil {
			t.Errorf("parseRun(%q) accepted", args)
		}
	}
}

// TestControlSocket: the verbs server answers the stats RPC with the
// engine's counters then the daemon's own, refuses a second daemon, and
// leaves a stale socket replaceable and a regular file alone.
func TestControlSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "softnic.sock")
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := verbsd.New(sim.A, verbsd.Options{SocketPath: path, SocketMode: 0o660,
		Counters: func(yield func(string, uint64)) { yield("port_rx_frames", 7); yield("xdp_steered", 5) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v (%v), want 0660", fi.Mode().Perm(), err)
	}
	got, err := queryStats(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || got[0].Name != "sent_pkts" || got[len(got)-2].Name != "port_rx_frames" || got[len(got)-1].Value != 5 {
		t.Fatalf("stats %v", got)
	}
	if err := checkControlFree(path); err == nil || !strings.Contains(err.Error(), "in use by a running daemon") {
		t.Errorf("second daemon: %v", err)
	}
	cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-served
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket not removed: %v", err)
	}

	// A socket file with no listener, as a SIGKILLed daemon leaves it.
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := checkControlFree(path); err != nil {
		t.Errorf("stale socket refused: %v", err)
	}
	file := filepath.Join(dir, "not-a-socket")
	os.WriteFile(file, nil, 0o644)
	if err := checkControlFree(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file: %v", err)
	}
}

func TestParseQueues(t *testing.T) {
	if q, err := parseQueues("0, 2,3"); err != nil || len(q) != 3 || q[1] != 2 {
		t.Errorf("parseQueues: %v %v", q, err)
	}
	if q, err := parseQueues(""); err != nil || q != nil {
		t.Errorf("empty: %v %v", q, err)
	}
	for _, bad := range []string{"a", "-1", "1,,2"} {
		if _, err := parseQueues(bad); err == nil {
			t.Errorf("parseQueues(%q) accepted", bad)
		}
	}
}

// TestEnsureSocketDir: a socket whose directory is missing gets it, and
// its missing parents, mode 0755 whatever the umask; an existing
// directory keeps its mode; a parent that is a file is a one-line error.
func TestEnsureSocketDir(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	sock := filepath.Join(dir, "missing", "softnic", "softnic.sock")
	if err := ensureSocketDir(sock); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "missing"), filepath.Dir(sock)} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want a directory of mode 0755", d, fi.Mode(), err)
		}
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket itself was made: %v", err)
	}
	// A socket path in the same directory again, and in an existing
	// directory of another mode: nothing changes.
	if err := ensureSocketDir(sock); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	if err := ensureSocketDir(filepath.Join(private, "s.sock")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(private); fi.Mode().Perm() != 0o700 {
		t.Errorf("an existing directory's mode changed to %v", fi.Mode().Perm())
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, bad := range []string{filepath.Join(file, "s.sock"), filepath.Join(file, "sub", "s.sock")} {
		err := ensureSocketDir(bad)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), file) {
			t.Errorf("socket %s under a regular file: %v, want a one-line error naming %s", bad, err, file)
		}
	}
}

// stubPort is a port that is no wire: enough for newControlPlane.
type stubPort struct {
	dataplane.Port
	closed int
}

func (*stubPort) Wait(time.Duration) {}
func (*stubPort) Wake()              {}
func (*stubPort) Watch(int) error    { return nil }
func (*stubPort) Unwatch(int) error  { return nil }
func (p *stubPort) Close() error     { p.closed++; return nil }

// TestPartialStartShutdown: a control plane that cannot start leaves the
// daemon's interface nil, not a nil *verbsd.Server (the typed nil that
// made shutdown panic), and shutdown undoes any prefix of start, a
// panicking step included, without stopping at it.
func TestPartialStartShutdown(t *testing.T) {
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sp := &stubPort{Port: sim.Fabric.A()}
	// Longer than a unix socket address holds: listen fails.
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 120), "softnic.sock")
	d := &daemon{opts: options{socket: long}, log: quiet, ifi: &net.Interface{Name: "test0"}, port: sp, engine: sim.A}
	if err := ensureSocketDir(long); err != nil {
		t.Fatal(err)
	}
	cp, err := newControlPlane(d)
	if err == nil {
		cp.Close()
		t.Fatal("a control socket path of 120+ bytes was accepted")
	}
	if cp != nil {
		t.Fatalf("failed newControlPlane returned a non-nil %T", cp)
	}
	if err := d.shutdown(); err != nil {
		t.Fatal(err)
	}
	if sp.closed != 1 || d.port != nil || d.engine != nil {
		t.Fatalf("port closed %d times, daemon %+v after shutdown", sp.closed, d)
	}
	if err := (&daemon{log: quiet}).shutdown(); err != nil {
		t.Fatalf("shutdown of a daemon that started nothing: %v", err)
	}
	// A step that panics is reported, and the port is still closed.
	sp.closed = 0
	d = &daemon{log: quiet, port: sp, cp: panicky{}}
	err = d.shutdown()
	if err == nil || !strings.Contains(err.Error(), "control socket: panic") || sp.closed != 1 {
		t.Fatalf("panicking control plane: %v, port closed %d times", err, sp.closed)
	}
	if line := oneLine(err); strings.Contains(line, "\n") {
		t.Errorf("oneLine(%q) = %q", err, line)
	}
}

type panicky struct{ controlPlane }

func (panicky) Close() error { panic("boom") }

// TestRTOFlag: the daemon's timeouts are adaptive unless --rto fixed
// (or a config file) says otherwise.
func TestRTOFlag(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x"})
	if err != nil || o.rto != dataplane.RTOAdaptive || o.params.RTOLow != daemonRTOLow || o.params.RTOHigh != daemonRTOHigh {
		t.Fatalf("defaults: rto %v, %v/%v (%v)", o.rto, o.params.RTOLow, o.params.RTOHigh, err)
	}
	if o, err = parseRun([]string{"--iface", "x", "--rto", "fixed"}); err != nil || o.rto != dataplane.RTOFixed {
		t.Fatalf("--rto fixed: %v (%v)", o.rto, err)
	}
	conf := filepath.Join(t.TempDir(), "softnic.conf")
	os.WriteFile(conf, []byte("iface = x\nrto = fixed\n"), 0o644)
	if o, err = parseRun([]string{"--config", conf}); err != nil || o.rto != dataplane.RTOFixed {
		t.Fatalf("rto = fixed in a config file: %v (%v)", o.rto, err)
	}
	if _, err := parseRun([]string{"--iface", "x", "--rto", "sometimes"}); err == nil {
		t.Fatal("--rto sometimes accepted")
	}
}

// TestEmulationScale: --model-rate scales the fetch penalty by
// model-rate/link-rate, and needs --link-rate.
func TestEmulationScale(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x", "--link-rate", "5gbit", "--model-rate", "100gbit"})
	if err != nil {
		t.Fatal(err)
	}
	if s := o.emulationScale(); s != 20 {
		t.Fatalf("scale %v, want 20", s)
	}
	if d := scaled(time.Microsecond, o.emulationScale()); d != 20*time.Microsecond {
		t.Fatalf("1µs scaled to %v, want 20µs", d)
	}
	o, err = parseRun([]string{"--iface", "x", "--link-rate", "5gbit"})
	if err != nil || o.emulationScale() != 1 {
		t.Fatalf("no --model-rate: scale %v, %v; want 1", o.emulationScale(), err)
	}
	if _, err := parseRun([]string{"--iface", "x", "--model-rate", "100gbit"}); err == nil || !strings.Contains(err.Error(), "--link-rate") {
		t.Fatalf("--model-rate alone: %v, want an error naming --link-rate", err)
	}
}

// TestExitStatus: a bad command line exits with status 2, as
// softnic-bench's does, when parseRun catches it as when the flag package
// does (tests/daemon_test.go's TestDaemonErrors runs those), on the
// command line or in a config file; a failure of the run exits with 1;
// each says what is wrong in one line.
func TestExitStatus(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "softnic.conf")
	os.WriteFile(conf, []byte("iface = x\nmtu = 8192\n"), 0o644)
	for _, args := range [][]string{
		{}, {"--iface", "x", "--mtu", "8192"}, {"--iface", "x", "--port", "dpdk"}, {"--iface", "x", "extra"},
		{"--iface", "x", "--log-level", "loud"}, {"--iface", "x", "--queues", "a"},
		{"--iface", "x", "--model-rate", "100gbit"}, {"--config", conf},
		{"--iface", "x", "--socket-mode", "0999"}, {"--iface", "x", "--socket-mode", "01660"},
		{"--iface", "x", "--socket-group", "no-such-group-softnic"},
	} {
		_, err := parseRun(args)
		var stderr strings.Builder
		if code := exitStatus(err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("run %q: %v: exit %d, stderr %q; want 2 and at most one line", args, err, code, stderr.String())
		}
	}
	if _, err := parseRun([]string{"--config", filepath.Join(t.TempDir(), "missing.conf")}); exitStatus(err, io.Discard) != 1 {
		t.Errorf("a config file that cannot be read: %v, want exit 1", err)
	}
	if err := versionCmd([]string{"extra"}, io.Discard); exitStatus(err, io.Discard) != 2 {
		t.Errorf("version extra: %v, want exit 2", err)
	}
	if err := statsCmd([]string{"extra"}); exitStatus(err, io.Discard) != 2 {
		t.Errorf("stats extra: %v, want exit 2", err)
	}
	var stderr strings.Builder
	if code := exitStatus(fmt.Errorf("no such interface %q", "nosuch0"), &stderr); code != 1 || stderr.String() != "softnic: no such interface \"nosuch0\"\n" {
		t.Errorf("a failed run: exit %d, stderr %q", code, stderr.String())
	}
	if code := exitStatus(flag.ErrHelp, io.Discard); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
}

// TestVersionCmd: `softnic version` prints the build information on one
// line.
func TestVersionCmd(t *testing.T) {
	var out strings.Builder
	if err := versionCmd(nil, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "softnic ") || !strings.Contains(s, "(commit ") || !strings.Contains(s, runtime.Version()) || strings.Count(s, "\n") != 1 {
		t.Errorf("softnic version printed %q", s)
	}
}

// TestSocketFlags: --socket-mode takes octal permission bits,
// --socket-group a group name or gid, on the command line or in a config
// file; an unknown group is a usage error that says how to make it.
func TestSocketFlags(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x"})
	if err != nil || o.socketMode != 0o660 || o.socketGID != 0 || o.socketMode.String() != "0660" {
		t.Fatalf("defaults: %04o gid %d, %v", o.socketMode, o.socketGID, err)
	}
	o, err = parseRun([]string{"--iface", "x", "--socket-mode", "640", "--socket-group", "4242"})
	if err != nil || o.socketMode != 0o640 || o.socketGID != 4242 {
		t.Fatalf("--socket-mode 640 --socket-group 4242: %04o gid %d, %v", o.socketMode, o.socketGID, err)
	}
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("skipping the group name: this process's group %d has none: %v", os.Getegid(), err)
	}
	conf := filepath.Join(t.TempDir(), "softnic.conf")
	os.WriteFile(conf, []byte("iface = x\nsocket-group = "+g.Name+"\nsocket-mode = 0600\n"), 0o644)
	if o, err = parseRun([]string{"--config", conf}); err != nil || o.socketMode != 0o600 || o.socketGID != os.Getegid() {
		t.Fatalf("config socket-group = %s: %04o gid %d, %v", g.Name, o.socketMode, o.socketGID, err)
	}
	_, err = parseRun([]string{"--iface", "x", "--socket-group", "no-such-group-softnic"})
	if err == nil || err.Error() != `run: --socket-group "no-such-group-softnic": no such group (create it: groupadd --system no-such-group-softnic)` {
		t.Errorf("unknown group: %v", err)
	}
}
