package main

import (
	"context"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/verbsd"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests need no privileges; the daemon as a whole is tested as root
// in tests/daemon_test.go.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

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
	for _, args := range [][]string{{}, {"--iface", "x", "--port", "dpdk"}, {"--iface", "x", "--mtu", "4096"}, {"--iface", "x", "extra"}} {
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
	sim, err := dataplane.NewSim(dataplane.SimConfig{})
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
