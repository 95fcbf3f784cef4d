//go:build linux

package cm

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestNextHopOnLink: a destination the kernel reaches without a gateway
// (here: this host's loopback) keeps the MAC the peer announced.
func TestNextHopOnLink(t *testing.T) {
	peer := [6]byte{2, 0, 0, 0, 0, 7}
	for _, dst := range []string{"127.0.0.1", "::1"} {
		mac, err := NextHopMAC(netip.MustParseAddr(dst), peer, time.Second)
		if err != nil {
			if strings.Contains(err.Error(), "no route") {
				t.Skipf("%s: %v (no loopback route here)", dst, err)
			}
			t.Fatal(err)
		}
		if mac != peer {
			t.Fatalf("%s: %v, want the peer's %v", dst, mac, peer)
		}
	}
}

// TestNextHopTestbed: across the testbed's switch, the next hop of B's
// addresses seen from A is the switch's port, for IPv4 (ARP) and IPv6
// (neighbor discovery), including when the kernel has not resolved it
// yet; the switch's own address is on-link. Needs root.
func TestNextHopTestbed(t *testing.T) {
	tb := netns.NewTestbed(t)
	var swMAC [6]byte
	err := tb.Do(netns.HostSwitch, func() error {
		ifi, err := net.InterfaceByName(tb.SwitchA.Iface)
		if err == nil {
			swMAC = [6]byte(ifi.HardwareAddr)
		}
		// The switch routes only the testbed's two subnets.
		if _, err := NextHopMAC(netip.MustParseAddr("198.19.255.1"), [6]byte{}, time.Second); err == nil || !strings.Contains(err.Error(), "no route") {
			t.Errorf("unroutable destination: %v", err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	peer := [6]byte{2, 0, 0, 0, 0, 0xb}
	err = tb.Do(netns.HostA, func() error {
		for _, dst := range []netip.Addr{tb.B.IPv4, tb.B.IPv6} {
			mac, err := NextHopMAC(dst, peer, 3*time.Second)
			if err != nil {
				return err
			}
			if mac != swMAC {
				t.Errorf("next hop of %v: %x, want the switch's %x", dst, mac, swMAC)
			}
		}
		mac, err := NextHopMAC(tb.SwitchA.IPv4, peer, time.Second)
		if err != nil {
			return err
		}
		if mac != peer {
			t.Errorf("on-link switch address: %x, want the announced %x", mac, peer)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveMACTestbed: with no MAC from the peer (an ibverbs program's
// exchange), A resolves B's addresses to the switch's port, and the
// switch's own address to the switch's MAC from the neighbor table,
// on-link; the hop limit is the namespace's (set here to 77 for IPv4 and
// 66 for IPv6 on A's interface, to tell it from the default of 64), on
// a routed path and on-link alike, as the kernel gives a RoCEv2 address
// vector. Needs root.
func TestResolveMACTestbed(t *testing.T) {
	tb := netns.NewTestbed(t)
	ifi, err := netnsIface(tb, netns.HostSwitch, tb.SwitchA.Iface)
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Do(netns.HostA, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_default_ttl", []byte("77\n"), 0); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+tb.A.Iface+"/hop_limit", []byte("66\n"), 0); err != nil {
			return err
		}
		for _, dst := range []netip.Addr{tb.B.IPv4, netip.AddrFrom16(tb.B.IPv4.As16()), tb.B.IPv6, tb.SwitchA.IPv4} {
			mac, hl, err := ResolveMAC(dst, 3*time.Second)
			if err != nil {
				return err
			}
			want := uint8(77)
			if dst.Is6() && !dst.Is4In6() {
				want = 66
			}
			if mac != ifi || hl != want {
				t.Errorf("%v: %x hop limit %d, want the switch's %x, hop limit %d", dst, mac, hl, ifi, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// netnsIface is the MAC of interface name in host's namespace.
func netnsIface(tb *netns.Testbed, host, name string) (mac [6]byte, err error) {
	err = tb.Do(host, func() error {
		ifi, err := net.InterfaceByName(name)
		if err == nil {
			mac = [6]byte(ifi.HardwareAddr)
		}
		return err
	})
	return mac, err
}
