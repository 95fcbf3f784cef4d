package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func TestStatsRPC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "softnic.sock")
	ln, err := listenControl(path, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v (%v), want 0660", fi.Mode().Perm(), err)
	}
	snap := []counter{{"sent_pkts", 3}, {"rcvd_pkts", 2}, {"port_rx_frames", 2}, {"xdp_steered", 2}}
	s := newStatsServer(ln, path, func() []counter { return snap }, quiet)
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()

	got, err := queryStats(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(snap) {
		t.Fatalf("got %v, want %v", got, snap)
	}
	for i := range snap {
		if got[i] != snap[i] {
			t.Errorf("counter %d: %v, want %v (order kept)", i, got[i], snap[i])
		}
	}
	// A client holding a connection open does not stop Close.
	idle, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.Write([]byte(`{"op":"frobnicate"}` + "\n"))
	buf := make([]byte, 200)
	n, _ := idle.Read(buf)
	if !strings.Contains(string(buf[:n]), `"error":"unknown op`) {
		t.Errorf("unknown op answered %q", buf[:n])
	}

	// A second daemon on the same path is refused while this one runs.
	if _, err := listenControl(path, quiet); err == nil || !strings.Contains(err.Error(), "in use by a running daemon") {
		t.Errorf("second listen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket not removed: %v", err)
	}
}

func TestStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "softnic.sock")
	// A socket file with no listener, as a SIGKILLed daemon leaves it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := listenControl(path, quiet)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()

	// Anything that is not a socket is left alone.
	file := filepath.Join(dir, "not-a-socket")
	os.WriteFile(file, nil, 0o644)
	if _, err := listenControl(file, quiet); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("listen on a regular file: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the regular file was removed: %v", err)
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
