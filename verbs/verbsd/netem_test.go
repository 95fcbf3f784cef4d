package verbsd

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/verbs/internal/proto"
)

// TestNetemProtocol: set_netem changes the engine's receive impairment
// (counters move on the frames it then receives), netem reads it back,
// with the seed the daemon chose; bad specs are one-line errors; version
// 3 clients may not ask, and keep working.
func TestNetemProtocol(t *testing.T) {
	s, sim := newServer(t)
	old := dial(t, s)
	old.hello(3)
	if _, err := old.call(proto.OpNetem, nil, nil); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 4") {
		t.Fatalf("netem from a version-3 client: %v", err)
	}
	if _, err := old.call(proto.OpStats, nil, &proto.StatsResult{}); err != nil {
		t.Fatalf("stats from a version-3 client: %v", err)
	}

	c := dial(t, s)
	c.hello(proto.Version)
	var res proto.NetemResult
	if _, err := c.call(proto.OpNetem, nil, &res); err != nil || res.Spec != "" {
		t.Fatalf("netem before any: %q, %v", res.Spec, err)
	}
	if _, err := c.call(proto.OpSetNetem, proto.NetemArgs{Spec: "loss 50% delay 10us"}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Spec, "delay 10us loss 50% seed ") {
		t.Fatalf("set_netem answered %q, want the canonical spec with a seed", res.Spec)
	}
	var got proto.NetemResult
	if _, err := c.call(proto.OpNetem, nil, &got); err != nil || got.Spec != res.Spec {
		t.Fatalf("netem: %q, %v; want %q", got.Spec, err, res.Spec)
	}
	// Frames from B's side of the fabric now go through A's stage.
	for range 200 {
		buf := sim.Fabric.B().TxBuffer()
		clear(buf[:64])
		sim.Fabric.B().Transmit(64)
	}
	sim.RunFor(time.Millisecond)
	counters := map[string]uint64{}
	var st proto.StatsResult
	if _, err := c.call(proto.OpStats, nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range st.Counters {
		counters[k.Name] = k.Value
	}
	if counters["impair_frames"] != 200 || counters["impair_lost"] < 70 || counters["impair_lost"] > 130 ||
		counters["impair_delayed"] != 200-counters["impair_lost"] || counters["rcvd_malformed"] != counters["impair_delayed"] {
		t.Fatalf("counters after 200 frames at loss 50%%: %v", counters)
	}

	for _, bad := range []struct{ spec, want string }{
		{"loss 150%", `netem: loss "150%"`},
		{"lose 1%", `netem: unknown word "lose"`},
		{"limit 100000 loss 1%", "above the receive stage's"},
	} {
		_, err := c.call(proto.OpSetNetem, proto.NetemArgs{Spec: bad.spec}, nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("set_netem %q: %v, want one line with %q", bad.spec, err, bad.want)
		}
	}
	if _, err := c.call(proto.OpSetNetem, proto.NetemArgs{Spec: ""}, &res); err != nil || res.Spec != "" {
		t.Fatalf("clear: %q, %v", res.Spec, err)
	}
	if spec := sim.A.Netem(); spec.Active() {
		t.Fatalf("engine still impairs: %v", spec)
	}
}

func TestMayChangeNetem(t *testing.T) {
	for _, c := range []struct {
		uid, daemon uint32
		ok          bool
	}{{0, 0, true}, {0, 1000, true}, {1000, 1000, true}, {1001, 1000, false}, {65534, 0, false}} {
		if got := mayChangeNetem(c.uid, c.daemon); got != c.ok {
			t.Errorf("uid %d, daemon uid %d: %v", c.uid, c.daemon, got)
		}
	}
}

// TestNetemPermission: a client of another uid may read the impairment
// but not change it. As root the client is a copy of the test binary run
// as nobody (the socket opened to everyone for it).
func TestNetemPermission(t *testing.T) {
	if path := os.Getenv("SOFTNIC_TEST_NETEM"); path != "" {
		s := &Server{o: Options{SocketPath: path}}
		c := dial(t, s)
		c.hello(proto.Version)
		var res proto.NetemResult
		if _, err := c.call(proto.OpNetem, nil, &res); err != nil || res.Spec != "delay 1ms seed 1" {
			t.Fatalf("netem as nobody: %q, %v", res.Spec, err)
		}
		_, err := c.call(proto.OpSetNetem, proto.NetemArgs{Spec: "loss 100%"}, nil)
		if !errors.Is(err, proto.ErrPermission) || !strings.Contains(err.Error(), "uid 65534 may not change") {
			t.Fatalf("set_netem as nobody: %v, want a permission error", err)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root: the refused client runs as nobody (TestMayChangeNetem checks the rule)")
	}
	s, sim := newServer(t)
	if err := os.Chmod(s.SocketPath(), 0o666); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(s.SocketPath())
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // nobody must reach the socket and the binary
	}
	c := dial(t, s)
	c.hello(proto.Version)
	if _, err := c.call(proto.OpSetNetem, proto.NetemArgs{Spec: "delay 1ms seed 1"}, nil); err != nil {
		t.Fatalf("set_netem as root: %v", err)
	}
	bin := filepath.Join(dir, "verbsd.test")
	copyBinary(t, os.Args[0], bin)
	cmd := exec.Command(bin, "-test.run=^TestNetemPermission$", "-test.v")
	cmd.Env = append(os.Environ(), "SOFTNIC_TEST_NETEM="+s.SocketPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNetemPermission") {
		t.Fatalf("client as nobody: %v\n%s", err, out)
	}
	if spec := sim.A.Netem().String(); spec != "delay 1ms seed 1" {
		t.Fatalf("impairment after the refused request: %q", spec)
	}
}

func copyBinary(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
