//go:build linux

package netns_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// Ping returns as soon as every reply is in, so the wait only costs time
// when frames are dropped. Replies on veth take microseconds; the long wait
// is for a machine loaded by parallel test packages, the short one for
// counting what loss let through.
const (
	pingWait     = 3 * time.Second
	pingLossWait = 300 * time.Millisecond
)

func TestTestbed(t *testing.T) {
	tb := netns.NewTestbed(t)

	t.Run("addresses", func(t *testing.T) {
		// The Go description and the script must agree.
		for _, h := range []netns.Host{tb.A, tb.SwitchA, tb.SwitchB, tb.B} {
			out, err := tb.Exec(h.NS, "ip", "-br", "addr", "show", "dev", h.Iface)
			if err != nil {
				t.Fatalf("%s %s: %v %s", h.NS, h.Iface, err, out)
			}
			for _, a := range []netip.Addr{h.IPv4, h.IPv6} {
				if !strings.Contains(out, a.String()+"/") {
					t.Errorf("%s %s lacks %v: %s", h.NS, h.Iface, a, out)
				}
			}
			out, _ = tb.Exec(h.NS, "ip", "link", "show", "dev", h.Iface)
			if !strings.Contains(out, "mtu 3000") && tb.MTU == netns.DefaultMTU {
				t.Errorf("%s %s: want mtu %d: %s", h.NS, h.Iface, tb.MTU, out)
			}
		}
	})

	t.Run("ping", func(t *testing.T) {
		pingAll(t, tb, 3, 3, pingWait)
	})

	t.Run("loss", func(t *testing.T) {
		netns.RequireNft(t)
		mech := setLoss(t, tb, 100)
		if !strings.Contains(mech, "netem") && !strings.Contains(mech, "nftables") {
			t.Errorf("loss report does not name its mechanism: %q", mech)
		}
		pingAll(t, tb, 3, 0, pingLossWait)

		// Each round trip crosses the switch twice, so with 50% loss in
		// both directions 1/4 of the pings come back; with loss in one
		// direction only it would be 1/2. For 400 pings: mean 100,
		// sigma 8.7; [40, 160] is 7 sigma wide either way and excludes
		// 200 by the same margin.
		setLoss(t, tb, 50)
		const n = 400
		got, err := tb.Ping(netns.HostA, tb.B.IPv4, n, pingLossWait)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("loss 50%% both ways: %d of %d pings answered", got, n)
		if got < 40 || got > 160 {
			t.Errorf("loss 50%% both ways: %d of %d pings answered, want about %d", got, n, n/4)
		}

		setLoss(t, tb, 0)
		pingAll(t, tb, 3, 3, pingWait)
	})
}

func setLoss(t *testing.T, tb *netns.Testbed, pct float64) string {
	t.Helper()
	report, err := tb.Loss(pct)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(report)
	return report
}

// pingAll pings each host's addresses from the other host and wants
// exactly want of count replies each time.
func pingAll(t *testing.T, tb *netns.Testbed, count, want int, wait time.Duration) {
	t.Helper()
	for _, c := range []struct {
		from string
		to   netip.Addr
	}{
		{netns.HostA, tb.B.IPv4}, {netns.HostA, tb.B.IPv6},
		{netns.HostB, tb.A.IPv4}, {netns.HostB, tb.A.IPv6},
	} {
		got, err := tb.Ping(c.from, c.to, count, wait)
		if err != nil {
			t.Fatalf("ping %s -> %v: %v", c.from, c.to, err)
		}
		if got != want {
			t.Errorf("ping %s -> %v: %d of %d replies, want %d", c.from, c.to, got, count, want)
		}
	}
}

func TestTestbedCleanup(t *testing.T) {
	var names []string
	t.Run("up", func(t *testing.T) {
		tb := netns.NewTestbed(t)
		names = tb.Namespaces()
		for _, ns := range names {
			if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err != nil {
				t.Errorf("namespace %s missing while up: %v", ns, err)
			}
		}
	})
	if len(names) == 0 {
		t.SkipNow() // the subtest skipped
	}
	for _, ns := range names {
		if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err == nil {
			t.Errorf("namespace %s still exists after the test's cleanup", ns)
		}
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v %s", err, out)
	}
	for _, ns := range names {
		if strings.Contains(string(out), ns) {
			t.Errorf("ip netns list still shows %s:\n%s", ns, out)
		}
	}
}

func TestSweepStale(t *testing.T) {
	netns.RequireRoot(t)
	netns.RequireIP(t)
	// A testbed of a process that no longer exists: pid 0x3ffffe is above
	// the default pid_max, so no live process has it.
	const stale = "sn3ffffeg1-sw"
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	netns.NewTestbed(t)
	if _, err := os.Stat(filepath.Join(netns.Dir, stale)); err == nil {
		t.Errorf("NewTestbed did not remove stale namespace %s", stale)
	}
}

// interfaces lists the interface names the calling thread's namespace has.
func interfaces() (map[string]bool, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, i := range ifs {
		names[i.Name] = true
	}
	return names, nil
}

func TestDo(t *testing.T) {
	tb := netns.NewTestbed(t)

	// Many rounds, so that a thread left in the namespace would be
	// picked up again by some later goroutine and show up below.
	for range 50 {
		var inside map[string]bool
		if err := tb.Do(netns.HostA, func() (err error) {
			inside, err = interfaces()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !inside["a-sw"] || inside["b-sw"] {
			t.Fatalf("inside A: interfaces %v, want a-sw and not b-sw", inside)
		}
		outside, err := interfaces()
		if err != nil {
			t.Fatal(err)
		}
		if outside["a-sw"] {
			t.Fatalf("after Do, the caller sees A's interfaces: %v", outside)
		}
	}

	t.Run("socket stays in the namespace", func(t *testing.T) {
		// A UDP socket made in B receives what A sends to B, although
		// it is read outside Do.
		var conn *net.UDPConn
		if err := tb.Do(netns.HostB, func() (err error) {
			conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tb.B.IPv4, 0)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		dst := conn.LocalAddr().(*net.UDPAddr)
		if err := tb.Do(netns.HostA, func() error {
			c, err := net.DialUDP("udp", nil, dst)
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("hello"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 16)
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != "hello" || from.AddrPort().Addr() != tb.A.IPv4 {
			t.Errorf("got %q from %v, want hello from %v", buf[:n], from, tb.A.IPv4)
		}
	})

	t.Run("error, panic and Goexit", func(t *testing.T) {
		want := errors.New("fn failed")
		if err := tb.Do(netns.HostA, func() error { return want }); !errors.Is(err, want) {
			t.Errorf("Do returned %v, want %v", err, want)
		}
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("recovered %v, want the panic from fn", v)
				}
			}()
			tb.Do(netns.HostA, func() error { panic("boom") })
		}()
		if err := netns.Do(tb.A.NS, func() error {
			// What t.FailNow would do on fn's goroutine.
			runtime.Goexit()
			return nil
		}); err == nil || !strings.Contains(err.Error(), "Goexit") {
			t.Errorf("Do after Goexit: %v, want an error naming Goexit", err)
		}
		if err := netns.Do("softnic-no-such-namespace", func() error { return nil }); err == nil {
			t.Error("Do into a missing namespace succeeded")
		}
		// The namespace is still usable and the caller is still home.
		outside, _ := interfaces()
		if outside["a-sw"] {
			t.Errorf("after panic/Goexit, the caller sees A's interfaces")
		}
	})
}
