package verbs_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/internal/qowner"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/tests/netns"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// openDirect opens direct mode on host's interface, inside its namespace.
func openDirect(t *testing.T, tb *netns.Testbed, host string, h netns.Host, lockDir string, progress verbs.Progress) (*verbs.Context, error) {
	t.Helper()
	var c *verbs.Context
	err := tb.Do(host, func() error {
		var err error
		c, err = verbs.OpenDirect(h.Iface, verbs.DirectOptions{LockDir: lockDir, Program: "verbs.test", Progress: progress})
		return err
	})
	return c, err
}

// directDevice is a perftest device on a direct-mode context whose next
// hops the kernel of host's namespace resolves.
func directDevice(t *testing.T, tb *netns.Testbed, host string, c *verbs.Context) perftest.Device {
	t.Helper()
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	return perftest.Device{Ctx: c, GID: attr.GID, MAC: attr.MAC, Scheme: attr.Scheme, Schemes: attr.Schemes,
		AllocBuf: c.AllocBuf, FreeBuf: c.FreeBuf,
		NextHop: func(gid netip.Addr, peer [6]byte) (mac [6]byte, err error) {
			err = tb.Do(host, func() error {
				var err error
				mac, err = cm.NextHopMAC(gid, peer, 5*time.Second)
				return err
			})
			return mac, err
		}}
}

// runPerftest runs one perftest test between the two devices, server on
// b, over a loopback TCP exchange, and returns the client's rows.
func runPerftest(t *testing.T, a, b perftest.Device, cfg perftest.Config) []perftest.Row {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		_, err = perftest.Run(ctx, b, conn, perftest.Server, cfg, perftest.Hooks{})
		srvErr <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := perftest.Run(ctx, a, conn, perftest.Client, cfg, perftest.Hooks{})
	if serr := <-srvErr; err != nil || serr != nil {
		t.Fatalf("%v: client %v, server %v", cfg.Test, err, serr)
	}
	return rows
}

// TestDirect runs the engine in this process in direct mode on both
// testbed hosts (each context made in its host's namespace): perftest's
// bandwidth and latency tests pass between them, with the progress
// goroutine standing by (the passive side of a WRITE test never polls)
// and running all the time, and with completion events. A second
// context on a queue this process owns is refused naming it; Close gives
// back the queue, the socket and the XDP program, so the queue opens
// again.
func TestDirect(t *testing.T) {
	netns.RequireRoot(t)
	netns.RequireAFXDP(t)
	tb := netns.NewTestbed(t)
	locks := t.TempDir()
	for _, progress := range []verbs.Progress{verbs.ProgressStandby, verbs.ProgressAlways} {
		ca, err := openDirect(t, tb, netns.HostA, tb.A, locks, progress)
		if err != nil {
			t.Fatal(err)
		}
		cb, err := openDirect(t, tb, netns.HostB, tb.B, locks, progress)
		if err != nil {
			ca.Close()
			t.Fatal(err)
		}
		a, b := directDevice(t, tb, netns.HostA, ca), directDevice(t, tb, netns.HostB, cb)
		if out, _ := tb.Exec(netns.HostA, "ip", "-d", "link", "show"); !containsXDP(out) {
			t.Fatalf("no XDP program in A while a direct-mode context is open:\n%s", out)
		}
		for _, cfg := range []perftest.Config{
			{Test: perftest.WriteBW, Sizes: []int{65536}, Iters: 300, MTU: qp.MTU1024},
			{Test: perftest.ReadBW, Sizes: []int{65536}, Iters: 200, MTU: qp.MTU1024},
			{Test: perftest.WriteLat, Sizes: []int{8}, Iters: 300, MTU: qp.MTU1024},
			{Test: perftest.SendLat, Sizes: []int{64}, Iters: 200, MTU: qp.MTU1024, Events: true},
		} {
			rows := runPerftest(t, a, b, cfg)
			if len(rows) != 1 {
				t.Errorf("progress %d, %v: %d rows, want 1", progress, cfg.Test, len(rows))
			}
		}

		// The queue is this process's: a second context is refused,
		// naming it, and the first keeps working.
		_, err = openDirect(t, tb, netns.HostA, tb.A, locks, progress)
		var owned *qowner.OwnedError
		if !errors.As(err, &owned) || owned.PID != os.Getpid() || owned.Program != "verbs.test" {
			t.Errorf("second OpenDirect on A's queue: %v, want an OwnedError naming verbs.test (pid %d)", err, os.Getpid())
		}
		runPerftest(t, a, b, perftest.Config{Test: perftest.WriteBW, Sizes: []int{4096}, Iters: 100, MTU: qp.MTU1024})

		// Polling drives the engine (a receive, timers, a transmit):
		// still no allocation.
		cq, err := ca.CreateCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		var wcs [4]verbs.WC
		if n := testing.AllocsPerRun(200, func() { cq.Poll(wcs[:]) }); n != 0 {
			t.Errorf("progress %d: CQ.Poll in direct mode allocates %v times per call", progress, n)
		}
		cq.Destroy()

		if st, err := ca.Stats(); err != nil {
			t.Error(err)
		} else if v := counter(st, "port_tx_frames"); v == 0 {
			t.Errorf("progress %d: A's port sent no frame", progress)
		}
		for _, c := range []*verbs.Context{ca, cb} {
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
		if l, _ := filepath.Glob(filepath.Join(locks, "*.lock")); len(l) != 0 {
			t.Errorf("lock files after Close: %v", l)
		}
		for _, h := range []string{netns.HostA, netns.HostB} {
			if out, _ := tb.Exec(h, "ip", "-d", "link", "show"); containsXDP(out) {
				t.Errorf("XDP program left in %s after Close:\n%s", h, out)
			}
		}
	}
}

func counter(cs []verbs.Counter, name string) uint64 {
	for _, c := range cs {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

func containsXDP(ipLink string) bool {
	return strings.Contains(ipLink, "prog/xdp")
}
