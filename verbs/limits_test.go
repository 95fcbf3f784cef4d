package verbs

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/verbsd"
)

// TestDaemonLimits: through the client library, a refused request is an
// error that is ErrLimit and names the limit and its flag, and the stats
// RPC carries the refusal counters the daemon adds.
func TestDaemonLimits(t *testing.T) {
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var s *verbsd.Server
	s, err = verbsd.New(sim.A, verbsd.Options{SocketPath: filepath.Join(t.TempDir(), "v.sock"), Wake: sim.Wake,
		Limits:   verbsd.Limits{ConnsPerUID: 2, CQs: 2},
		Counters: func(yield func(string, uint64)) { s.LimitCounters(yield) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ctx) })
	t.Cleanup(func() { s.Close(); cancel(); wg.Wait() })

	a, err := Dial(s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 2 {
		if _, err := a.CreateCQ(8); err != nil {
			t.Fatal(err)
		}
	}
	_, err = a.CreateCQ(8)
	if !errors.Is(err, ErrLimit) || err.Error() != "verbs: limit: 2 CQs per connection (softnic run --max-cqs)" {
		t.Fatalf("third CQ: %v", err)
	}
	b, err := Dial(s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateCQ(8); err != nil {
		t.Fatalf("another client's CQ: %v", err)
	}
	c, err := Dial(s.SocketPath())
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, ErrLimit) || err.Error() != "verbs: limit: 2 connections per uid (softnic run --max-conns-per-uid)" {
		t.Fatalf("third connection: %v", err)
	}
	counters, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, c := range counters {
		got[c.Name] = c.Value
	}
	if got["client_limit_refusals"] != 1 || got["client_conn_refusals"] != 1 {
		t.Fatalf("refusal counters: limit %d, conn %d", got["client_limit_refusals"], got["client_conn_refusals"])
	}
}
