package perftest

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// lossless is a fast embedded wire for tests: the runs are about the
// measurement code, not about the link model.
var lossless = Fabric{Link: Link{Ring: 256}}

func checkRows(t *testing.T, cfg Config, rows []Row) {
	t.Helper()
	if len(rows) != len(cfg.Sizes) {
		t.Fatalf("%d rows for %d sizes", len(rows), len(cfg.Sizes))
	}
	for i, r := range rows {
		if r.Test != cfg.Test.String() || r.Bytes != cfg.Sizes[i] || r.Iters <= 0 || r.Scheme != "gbn" {
			t.Fatalf("row %d: %+v", i, r)
		}
		if cfg.Duration <= 0 && r.Iters != cfg.Iters {
			t.Fatalf("row %d: %d iterations, want %d", i, r.Iters, cfg.Iters)
		}
		if cfg.Test.IsLatency() {
			l := r.Lat
			if l == nil || l.Min <= 0 || l.Min > l.Typical || l.Typical > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.Avg < l.Min || l.Avg > l.Max {
				t.Fatalf("row %d: latencies out of order: %+v", i, l)
			}
		} else if r.Lat != nil || !(r.AvgGbps > 0) || !(r.MsgRateMpps > 0) {
			t.Fatalf("row %d: %+v", i, r)
		} else if noPeak := cfg.Duration > 0 || cfg.NoPeak || cfg.Iters > MaxPeakIters; r.NoPeak != noPeak {
			t.Fatalf("row %d: NoPeak %v, want %v (perftest measures no peak in timed runs)", i, r.NoPeak, noPeak)
		} else if noPeak && r.PeakGbps != 0 || !noPeak && r.PeakGbps < r.AvgGbps {
			// The peak's candidates include the whole run, so it is never
			// below the average.
			t.Fatalf("row %d: peak %v, average %v", i, r.PeakGbps, r.AvgGbps)
		}
	}
}

// TestEmbeddedTests runs every test through the client and server code
// on the embedded NICs, with the options that change the loops: several
// QPs, a size sweep, a timed run, loss, IPv6.
func TestEmbeddedTests(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		fab  Fabric
	}{
		{"write_bw", Config{Test: WriteBW, Sizes: []int{4096}, Iters: 300}, lossless},
		{"write_bw -q 3 odd", Config{Test: WriteBW, Sizes: []int{1000}, Iters: 301, QPs: 3, TxDepth: 5}, lossless},
		{"read_bw -q 2", Config{Test: ReadBW, Sizes: []int{8192}, Iters: 200, QPs: 2}, lossless},
		{"send_bw -q 2 small rx", Config{Test: SendBW, Sizes: []int{3000}, Iters: 400, QPs: 2, RxDepth: 4}, lossless},
		{"atomic_bw", Config{Test: AtomicBW, Sizes: []int{8}, Iters: 300}, lossless},
		{"write_lat sweep", Config{Test: WriteLat, Sizes: []int{2, 4, 1500, 3}, Iters: 300}, lossless},
		{"read_lat", Config{Test: ReadLat, Sizes: []int{2, 5000}, Iters: 100}, lossless},
		{"send_lat sweep", Config{Test: SendLat, Sizes: []int{1, 2048}, Iters: 100}, lossless},
		{"write_bw timed", Config{Test: WriteBW, Sizes: []int{1024}, Duration: 30 * time.Millisecond}, lossless},
		{"send_bw timed", Config{Test: SendBW, Sizes: []int{64, 128}, Duration: 20 * time.Millisecond}, lossless},
		{"write_lat timed", Config{Test: WriteLat, Sizes: []int{8}, Duration: 20 * time.Millisecond}, lossless},
		{"send_lat timed", Config{Test: SendLat, Sizes: []int{8}, Duration: 20 * time.Millisecond}, lossless},
		{"write_bw loss ipv6", Config{Test: WriteBW, Sizes: []int{16384}, Iters: 100, TxDepth: 8},
			Fabric{Link: Link{Loss: 0.01, Ring: 256}, Seed: 7, IPv6: true}},
		{"send_lat loss", Config{Test: SendLat, Sizes: []int{100}, Iters: 200}, Fabric{Link: Link{Loss: 0.05, Ring: 256}, Seed: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var connected Connection
			var hooked []Row
			var client, server dataplane.Counters
			rows, err := RunEmbedded(context.Background(), tc.cfg, tc.fab, Hooks{
				Connected: func(c Connection) { connected = c },
				Row:       func(r Row) { hooked = append(hooked, r) },
				Counters:  func(c, s dataplane.Counters) { client, server = c, s },
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			if err := cfg.fill(); err != nil {
				t.Fatal(err)
			}
			checkRows(t, cfg, rows)
			if len(hooked) != len(rows) || len(connected.Local) != cfg.QPs || connected.Scheme != "gbn" {
				t.Fatalf("hooks saw %d rows, connection %+v", len(hooked), connected)
			}
			if connected.Local[0].GID.Is4() == tc.fab.IPv6 {
				t.Fatalf("GID %v with IPv6 %v", connected.Local[0].GID, tc.fab.IPv6)
			}
			if client.SentPkts == 0 || server.SentPkts == 0 {
				t.Fatalf("counters %+v / %+v", client, server)
			}
			if tc.fab.Link.Loss > 0 && client.Retransmits+server.Retransmits == 0 {
				t.Fatal("a lossy run retransmitted nothing")
			}
		})
	}
}

// TestRunDaemonShape runs the two sides as the daemon mode does: two
// devices, a TCP connection, Run on each side with its own hooks; the
// server prints the rows the client measured.
func TestRunDaemonShape(t *testing.T) {
	m, err := verbs.NewEmbedded(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sim sync.WaitGroup
	sim.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
	defer sim.Wait()
	defer cancel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Test: SendBW, Sizes: []int{100, 200}, Iters: 100}
	var srvRows []Row
	var srvErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := cm.Accept(ctx, ln)
		if err != nil {
			srvErr = err
			return
		}
		defer conn.Close()
		srvRows, srvErr = Run(ctx, device(m.B), conn, Server, cfg, Hooks{})
	})
	conn, err := cm.Client(ctx, ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := Run(ctx, device(m.A), conn, Client, cfg, Hooks{})
	wg.Wait()
	if err != nil || srvErr != nil {
		t.Fatal(err, srvErr)
	}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	checkRows(t, cfg, rows)
	checkRows(t, cfg, srvRows)
	if srvRows[1] != rows[1] {
		t.Fatalf("server printed %+v, client measured %+v", srvRows[1], rows[1])
	}
}

func device(c *verbs.Context) Device {
	e := c.Engine()
	return Device{Ctx: c, GID: e.Addr(), MAC: e.MAC(), AllocBuf: MmapBuf, FreeBuf: MunmapBuf}
}

// TestRunMismatch: two sides started with different tests stop with an
// error naming both, instead of hanging.
func TestRunMismatch(t *testing.T) {
	m, err := verbs.NewEmbedded(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	var srvErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, srvErr = Run(context.Background(), device(m.B), c2, Server, Config{Test: ReadBW, Sizes: []int{64}, Iters: 10}, Hooks{})
	})
	_, err = Run(context.Background(), device(m.A), c1, Client, Config{Test: WriteBW, Sizes: []int{64}, Iters: 10}, Hooks{})
	wg.Wait()
	for _, e := range []error{err, srvErr} {
		if e == nil || !strings.Contains(e.Error(), "write_bw") || !strings.Contains(e.Error(), "read_bw") {
			t.Fatalf("mismatch errors: %v / %v", err, srvErr)
		}
	}

	// Different -q is caught by the exchange itself.
	c3, c4 := net.Pipe()
	defer c3.Close()
	defer c4.Close()
	wg.Go(func() {
		_, srvErr = Run(context.Background(), device(m.B), c4, Server, Config{Test: WriteBW, Sizes: []int{64}, Iters: 10, QPs: 2}, Hooks{})
	})
	_, err = Run(context.Background(), device(m.A), c3, Client, Config{Test: WriteBW, Sizes: []int{64}, Iters: 10}, Hooks{})
	wg.Wait()
	if err == nil || srvErr == nil || !strings.Contains(err.Error(), "-q") {
		t.Fatalf("QP count mismatch: %v / %v", err, srvErr)
	}
}

func TestConfigChecks(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Test: WriteBW, Iters: 1},
		{Test: WriteBW, Sizes: []int{0}, Iters: 1},
		{Test: WriteBW, Sizes: []int{MaxSize + 1}, Iters: 1},
		{Test: WriteBW, Sizes: []int{8}},
		{Test: WriteBW, Sizes: []int{8}, Iters: 1, QPs: cm.MaxQPs + 1},
		{Test: WriteLat, Sizes: []int{8}, Iters: 1, QPs: 2},
		{Test: AtomicBW, Sizes: []int{16}, Iters: 1},
		{Test: WriteBW, Sizes: []int{8}, Iters: 1, TxDepth: -1},
		{Test: WriteBW, Sizes: []int{8}, Iters: 1, TxDepth: dataplane.MaxWR + 1},
		{Test: WriteBW, Sizes: []int{8}, Iters: 1, MTU: 9},
	} {
		if err := cfg.fill(); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := RunEmbedded(context.Background(), Config{Test: WriteBW, Sizes: []int{8}, Iters: 1}, Fabric{Scheme: "nope"}, Hooks{}); err == nil {
		t.Error("unknown scheme accepted")
	}
	m, _ := verbs.NewEmbedded(sim.Config{})
	c1, _ := net.Pipe()
	defer c1.Close()
	if _, err := Run(context.Background(), Device{Ctx: m.A}, c1, Client, Config{Test: WriteBW, Sizes: []int{8}, Iters: 1}, Hooks{}); err == nil {
		t.Error("device without an allocator accepted")
	}
	odd := device(m.A)
	odd.AllocBuf = func(n int) ([]byte, error) { return make([]byte, n+1)[1:], nil }
	odd.FreeBuf = nil // heap memory: nothing to unmap
	if _, err := Run(context.Background(), odd, c1, Client, Config{Test: WriteBW, Sizes: []int{8}, Iters: 1}, Hooks{}); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("misaligned buffer: %v", err)
	}
}

// TestWaiter: a loop waiting on nothing gives up after the stall limit
// or when its context ends, with an error that says what it waited for.
func TestWaiter(t *testing.T) {
	w := newWaiter(context.Background(), 30*time.Millisecond, throughputPace)
	start := time.Now()
	var err error
	for err == nil {
		err = w.wait("godot")
	}
	if !errors.Is(err, errStalled) || !strings.Contains(err.Error(), "godot") || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("stall: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = newWaiter(ctx, 0, latencyPace)
	for err = nil; err == nil; {
		err = w.wait("nothing")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
}

// TestPerftestModes runs the perftest options that change the loops:
// bidirectional runs (each side's row kept, the sum printed), post lists,
// the QP timeout, and an infinite run ended by Stop.
func TestPerftestModes(t *testing.T) {
	lossless := Fabric{Link: Link{Ring: 256}}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"write_bw -b", Config{Test: WriteBW, Sizes: []int{4096}, Iters: 300, QPs: 2, Bidirectional: true}},
		{"send_bw -b", Config{Test: SendBW, Sizes: []int{512}, Iters: 300, RxDepth: 16, TxDepth: 8, Bidirectional: true}},
		{"read_bw -b -D", Config{Test: ReadBW, Sizes: []int{1024}, Duration: 20 * time.Millisecond, Bidirectional: true}},
		{"atomic_bw -b", Config{Test: AtomicBW, Sizes: []int{8}, Iters: 200, Bidirectional: true}},
		{"write_bw -l 4 -q 3", Config{Test: WriteBW, Sizes: []int{64}, Iters: 400, QPs: 3, TxDepth: 16, PostList: 4}},
		{"write_bw -u 9", Config{Test: WriteBW, Sizes: []int{64}, Iters: 100, QPTimeout: 9, QPTimeoutSet: true}},
		{"write_bw -N", Config{Test: WriteBW, Sizes: []int{64}, Iters: 100, NoPeak: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conn Connection
			rows, err := RunEmbedded(context.Background(), tc.cfg, lossless, Hooks{Connected: func(c Connection) { conn = c }})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			if err := cfg.fill(); err != nil {
				t.Fatal(err)
			}
			checkRows(t, cfg, rows)
			r := rows[0]
			if cfg.Bidirectional {
				b := r.Both
				if b == nil || b.Local.Iters != r.Iters || b.Remote.Iters <= 0 || !(b.Remote.AvgGbps > 0) {
					t.Fatalf("bidirectional row without both sides: %+v", r)
				}
				if math.Abs(r.AvgGbps-b.Local.AvgGbps-b.Remote.AvgGbps) > 1e-9 || math.Abs(r.MsgRateMpps-b.Local.MsgRateMpps-b.Remote.MsgRateMpps) > 1e-9 {
					t.Fatalf("row %+v is not the sum of %+v and %+v", r, b.Local, b.Remote)
				}
				if cfg.Duration <= 0 && b.Remote.Iters != cfg.Iters {
					t.Fatalf("the server sent %d messages, want %d", b.Remote.Iters, cfg.Iters)
				}
			} else if r.Both != nil {
				t.Fatalf("one-way row with both sides: %+v", r)
			}
			want := uint8(14) // perftest's default
			if cfg.QPTimeoutSet {
				want = cfg.QPTimeout
			}
			if conn.QPTimeout != want {
				t.Fatalf("QPs run with timeout %d, want %d", conn.QPTimeout, want)
			}
		})
	}
}

// TestInfinite: an infinite run reports a row every Duration until Stop
// is closed, then ends cleanly on both sides.
func TestInfinite(t *testing.T) {
	stop := make(chan struct{})
	cfg := Config{Test: WriteBW, Sizes: []int{1024}, Duration: 20 * time.Millisecond, Infinite: true, Stop: stop}
	var hooked []Row
	var mu sync.Mutex
	time.AfterFunc(150*time.Millisecond, func() { close(stop) })
	rows, err := RunEmbedded(context.Background(), cfg, Fabric{Link: Link{Ring: 256}}, Hooks{Row: func(r Row) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// About 7 intervals of 20 ms in 150 ms; a loaded machine may run
	// fewer, but never only the last one.
	if len(hooked) < 3 || len(rows) > 1 {
		t.Fatalf("%d rows reported, %d returned", len(hooked), len(rows))
	}
	for i, r := range hooked {
		if r.Test != "write_bw" || r.Iters <= 0 || !(r.AvgGbps > 0) || r.PeakGbps != 0 || !r.NoPeak {
			t.Fatalf("interval %d: %+v", i, r)
		}
	}
	if _, err := RunEmbedded(context.Background(), Config{Test: WriteBW, Sizes: []int{8}, Duration: time.Second, Infinite: true, Bidirectional: true},
		Fabric{}, Hooks{}); err == nil {
		t.Fatal("an infinite bidirectional run was accepted")
	}
}
