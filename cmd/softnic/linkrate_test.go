package main

import (
	"strings"
	"testing"
)

func TestParseLinkRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"0", 0}, {"5Gbit", 5e9}, {"5gbit", 5e9}, {"5GBIT", 5e9}, {"2.5Gbit", 2.5e9},
		{"100mbit", 100e6}, {"100Mbit", 100e6}, {"64kbit", 64e3}, {"64Kbit", 64e3},
		{"1tbit", 1e12}, {"1200bit", 1200}, {"1200", 1200}, {"1e9", 1e9}, {" 10Gbit ", 10e9},
		{"1000Tbit", 1e15},
	} {
		got, err := parseLinkRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseLinkRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "fast", "5G", "5gb", "5Gbps", "5mbps", "bit", "-1gbit", "NaN", "Inf", "2000Tbit", "0.4bit", "5 Gbit/s", "5kibit"} {
		got, err := parseLinkRate(in)
		if err == nil {
			t.Errorf("parseLinkRate(%q) = %d, want an error", in, got)
		} else if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "link rate") {
			t.Errorf("parseLinkRate(%q): error %q, want one line naming the link rate", in, err)
		}
	}
}

func TestLinkRateFlags(t *testing.T) {
	o, err := parseRun([]string{"--iface", "x", "--link-rate", "5Gbit", "--link-burst", "65536"})
	if err != nil {
		t.Fatal(err)
	}
	if o.linkRate != 5e9 || o.linkBurst != 65536 || o.linkRate.String() != "5Gbit" {
		t.Errorf("options: link rate %v (%d), burst %d", o.linkRate.String(), o.linkRate, o.linkBurst)
	}
	if o, err := parseRun([]string{"--iface", "x"}); err != nil || o.linkRate != 0 || o.linkBurst != 0 {
		t.Errorf("defaults: %v, rate %d, burst %d; want unlimited", err, o.linkRate, o.linkBurst)
	}
	for _, args := range [][]string{{"--iface", "x", "--link-rate", "5Gbps"}, {"--iface", "x", "--link-burst", "-1"}} {
		if _, err := parseRun(args); err == nil {
			t.Errorf("parseRun(%q) accepted", args)
		}
	}
	for _, c := range []struct {
		r    linkRate
		want string
	}{{0, "0"}, {1e9, "1Gbit"}, {2.5e9, "2500Mbit"}, {1234, "1234bit"}, {64e3, "64Kbit"}} {
		if got := c.r.String(); got != c.want {
			t.Errorf("linkRate(%d).String() = %q, want %q", uint64(c.r), got, c.want)
		}
	}
}
