package hostaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPick(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	have := []netip.Addr{a("fe80::1"), a("10.0.0.1"), a("198.18.0.1"), a("2001:db8::1")}
	for _, c := range []struct {
		have []netip.Addr
		want string
		got  string
		err  string
	}{
		{have, "", "198.18.0.1", ""},
		{have, "2001:db8::1", "2001:db8::1", ""},
		{have, "198.18.9.9", "", "--ip 198.18.9.9 is not an address of eth0"},
		{have, "x", "", "--ip: "},
		{[]netip.Addr{a("fe80::1"), a("10.0.0.1")}, "", "10.0.0.1", ""},
		{[]netip.Addr{a("fe80::1")}, "", "", "eth0 has no global address; give one with --ip"},
	} {
		got, err := pick("eth0", c.have, c.want, "--ip")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("pick(%v, %q) = %v, %v; want error %q", c.have, c.want, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.got {
			t.Errorf("pick(%v, %q) = %v, %v; want %s", c.have, c.want, got, err, c.got)
		}
	}
}
