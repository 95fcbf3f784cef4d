// Package hostaddr picks the address a NIC on a host interface answers
// to, the same way for the daemon (softnic run --ip) and direct mode
// (verbs.OpenDirect's IP).
package hostaddr

import (
	"fmt"
	"net"
	"net/netip"
)

// Bench is the benchmarking range (RFC 2544) softnic's testbeds use.
var Bench = netip.MustParsePrefix("198.18.0.0/15")

// Local picks the address: want if given (it must be on the interface),
// else the interface's first address in 198.18.0.0/15, else its first
// global unicast one. flag names want in errors (e.g. "--ip").
func Local(ifi *net.Interface, want, flag string) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	var have []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				have = append(have, ip.Unmap())
			}
		}
	}
	return pick(ifi.Name, have, want, flag)
}

// pick is Local's choice among the interface's addresses have.
func pick(iface string, have []netip.Addr, want, flag string) (netip.Addr, error) {
	if want != "" {
		ip, err := netip.ParseAddr(want)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("%s: %w", flag, err)
		}
		for _, h := range have {
			if h == ip.Unmap() {
				return h, nil
			}
		}
		return netip.Addr{}, fmt.Errorf("%s %v is not an address of %s (it has %v)", flag, ip, iface, have)
	}
	for _, h := range have {
		if Bench.Contains(h) {
			return h, nil
		}
	}
	for _, h := range have {
		if h.IsGlobalUnicast() {
			return h, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no global address; give one with %s", iface, flag)
}
