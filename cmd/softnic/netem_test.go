package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/verbsd"
)

// TestNetemFlag: --netem takes netem's words (from the command line or a
// config file) and gets a seed if it has none; a bad word is a one-line
// usage error naming it.
func TestNetemFlag(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x", "--netem", "loss 1% delay 100us 20us reorder 2% duplicate 0.1% corrupt 0.01%"})
	if err != nil {
		t.Fatal(err)
	}
	if o.netem.LossPct != 1 || o.netem.Jitter != 20*time.Microsecond || !o.netem.HasSeed {
		t.Errorf("--netem parsed to %+v", o.netem)
	}
	if o, err := parseRun([]string{"--iface", "x", "--netem", "delay 1ms seed 7"}); err != nil || o.netem.Seed != 7 {
		t.Errorf("seed given: %+v, %v", o.netem, err)
	}
	if o, err := parseRun([]string{"--iface", "x"}); err != nil || o.netem.Active() || o.netem.HasSeed {
		t.Errorf("default: %+v, %v; want none", o.netem, err)
	}
	conf := filepath.Join(t.TempDir(), "softnic.conf")
	os.WriteFile(conf, []byte("iface = x\nnetem = loss gemodel 1% 25%\n"), 0o644)
	if o, err := parseRun([]string{"--config", conf}); err != nil || !o.netem.GE || o.netem.GER != 25 {
		t.Errorf("config file: %+v, %v", o.netem, err)
	}
	for _, c := range []struct{ spec, word string }{
		{"loss 1x%", `loss "1x%"`}, {"reorder 2%", "reorder needs a delay"}, {"rate 1gbit", `"rate"`}, {"lose 1%", `"lose"`},
	} {
		_, err := parseRun([]string{"--iface", "x", "--netem", c.spec})
		var stderr strings.Builder
		if code := exitStatus(err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), c.word) ||
			!strings.HasPrefix(stderr.String(), "softnic: run: --netem: netem: ") {
			t.Errorf("--netem %q: exit %d, stderr %q; want 2 and one line naming %s", c.spec, code, stderr.String(), c.word)
		}
	}
}

// TestNetemCommand: softnic netem sets a daemon's receive impairment over
// the control socket (the counters move on the frames it then receives),
// prints it, clears it, and turns bad words away with exit status 2
// before connecting.
func TestNetemCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "softnic.sock")
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := verbsd.New(sim.A, verbsd.Options{SocketPath: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	defer func() { cancel(); s.Close(); <-served }()

	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := netem(append([]string{"--socket", path}, args...), &out)
		return out.String(), err
	}
	if out, err := run(); err != nil || out != "" {
		t.Fatalf("show with none: %q, %v", out, err)
	}
	// Several words or one quoted argument alike.
	if out, err := run("loss", "100%", "seed", "5"); err != nil || out != "loss 100% seed 5\n" {
		t.Fatalf("set: %q, %v", out, err)
	}
	if out, err := run(); err != nil || out != "loss 100% seed 5\n" {
		t.Fatalf("show: %q, %v", out, err)
	}
	for range 50 {
		buf := sim.Fabric.B().TxBuffer()
		clear(buf[:64])
		sim.Fabric.B().Transmit(64)
	}
	sim.RunFor(time.Millisecond)
	counters, err := queryStats(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, c := range counters {
		got[c.Name] = c.Value
	}
	if got["impair_frames"] != 50 || got["impair_lost"] != 50 || got["rcvd_malformed"] != 0 {
		t.Fatalf("after 50 frames at loss 100%%: impair_frames %d, impair_lost %d, rcvd_malformed %d",
			got["impair_frames"], got["impair_lost"], got["rcvd_malformed"])
	}
	if out, err := run("delay 10us 2us reorder 1%"); err != nil || !strings.HasPrefix(out, "delay 10us 2us reorder 1% seed ") {
		t.Fatalf("set without a seed: %q, %v; want the seed the daemon chose", out, err)
	}
	if out, err := run("clear"); err != nil || out != "" {
		t.Fatalf("clear: %q, %v", out, err)
	}
	if sim.A.Netem().Active() {
		t.Fatal("clear left an impairment")
	}
	for _, bad := range [][]string{{"loss 200%"}, {"loss 2% lose 1%"}, {"--bogus"}} {
		_, err := run(bad...)
		var stderr strings.Builder
		if code := exitStatus(err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("netem %q: exit %d, stderr %q; want 2 and at most one line", bad, code, stderr.String())
		}
	}
	if err := netem([]string{"--socket", filepath.Join(t.TempDir(), "none.sock"), "loss 1%"}, io.Discard); exitStatus(err, io.Discard) != 1 ||
		!strings.Contains(err.Error(), "no softnic daemon is listening at") {
		t.Errorf("no daemon: %v, want exit 1 saying so", err)
	}
}
