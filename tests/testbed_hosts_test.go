//go:build linux

package tests

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestTestbedFourHosts brings up testbed.sh with four hosts (a unique
// prefix; removed at cleanup, also on failure), checks that each host has
// the addresses `testbed.sh hosts` lists (198.18.<i>.1, 2001:db8:<x>::1)
// and that every host reaches every other through the switch over IPv4
// and IPv6; with the switch dropping everything (testbed.sh loss 100,
// nftables) no ping between any two hosts comes back, and with the loss
// off they all do again.
func TestTestbedFourHosts(t *testing.T) {
	const n = 4
	tb := netns.NewTestbedHosts(t, n)
	for i, h := range tb.Hosts {
		letter := string(rune('a' + i))
		want := testbedHost4(i)
		if h.NS != tb.Prefix+"-"+letter || h.Iface != letter+"-sw" || h.IPv4 != want || h.IPv6 != netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::1", 10+i)) {
			t.Errorf("host %d: %+v, want namespace %s-%s, iface %s-sw, %v, 2001:db8:%x::1", i, h, tb.Prefix, letter, letter, want, 10+i)
		}
		out, err := tb.Exec(letter, "ip", "-br", "addr", "show", "dev", h.Iface)
		if err != nil {
			t.Fatalf("%s: %v %s", h.NS, err, out)
		}
		for _, a := range []netip.Addr{h.IPv4, h.IPv6} {
			if !strings.Contains(out, a.String()+"/") {
				t.Errorf("%s %s lacks %v: %s", h.NS, h.Iface, a, out)
			}
		}
	}
	pingEvery := func(t *testing.T, want int, wait time.Duration) {
		t.Helper()
		for i := range tb.Hosts {
			from := string(rune('a' + i))
			for j, to := range tb.Hosts {
				if i == j {
					continue
				}
				for _, dst := range []netip.Addr{to.IPv4, to.IPv6} {
					got, err := tb.Ping(from, dst, 2, wait)
					if err != nil {
						t.Fatalf("ping %s -> %v: %v", from, dst, err)
					}
					if got != want {
						t.Errorf("ping %s -> %v: %d of 2 replies, want %d", from, dst, got, want)
					}
				}
			}
		}
	}
	t.Run("ping", func(t *testing.T) { pingEvery(t, 2, 3*time.Second) })
	t.Run("loss", func(t *testing.T) {
		netns.RequireNft(t)
		if _, err := tb.Loss(100); err != nil {
			t.Fatal(err)
		}
		pingEvery(t, 0, 200*time.Millisecond)
		if _, err := tb.Loss(0); err != nil {
			t.Fatal(err)
		}
		pingEvery(t, 2, 3*time.Second)
	})
	// Every namespace is there while up (down, at cleanup, checks that
	// none is left).
	if got := tb.Namespaces(); len(got) != n+1 {
		t.Errorf("Namespaces() = %v, want %d", got, n+1)
	}
	for _, ns := range tb.Namespaces() {
		if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
}

// testbedHost4 is testbed.sh's IPv4 address of host i: 198.18.<i>.1.
func testbedHost4(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i), 1}) }
