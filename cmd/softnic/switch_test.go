package main

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/dataplane/netsw"
)

func TestParseSwitchFlags(t *testing.T) {
	o, err := parseSwitch([]string{"--port", "p0", "--port", "p1", "--rate", "10gbit",
		"--ecn", "kmin=1000,kmax=9000,pmax=0.5", "--pfc", "xoff=50000,xon=40000,headroom=30000,quanta=1000,priority=5",
		"--buffer", "100000", "--route", "198.18.1.0/24=p1", "--route", "2001:db8::/32=p0@2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.rate != 10e9 || o.ecnCfg != (netsw.ECN{Enabled: true, KminBytes: 1000, KmaxBytes: 9000, Pmax: 0.5}) ||
		o.pfcCfg != (netsw.PFC{Enabled: true, XOFFBytes: 50000, XONBytes: 40000, HeadroomBytes: 30000, Quanta: 1000}) || o.priority != 5 {
		t.Errorf("parsed %+v", o)
	}
	routes, err := parseRoutes(o.routes, o.ports)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || routes[0].Port != 1 || routes[0].Via.IsValid() || routes[1].Via != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("routes %+v", routes)
	}
	if r, err := parseRoutes([]string{"10.0.0.0/8=p0@02:00:00:00:00:01"}, o.ports); err != nil || !r[0].HasMAC || r[0].MAC[5] != 1 {
		t.Errorf("MAC next hop: %+v, %v", r, err)
	}
	if o, err := parseSwitch([]string{"--port", "p0", "--port", "p1", "--ecn", "off", "--pfc", "off"}); err != nil || o.ecnCfg.Enabled || o.pfcCfg.Enabled || o.priority != 3 {
		t.Errorf("off: %+v, %v", o, err)
	}
}

func TestParseSwitchErrors(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rules, []byte(`{"rules": [{"action": "drop"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--port", "p0"},
		{"--port", "p0", "--port", "p0"},
		{"--port", "p0", "--port", "p1", "--ecn", "kmin=5000,kmax=10"},
		{"--port", "p0", "--port", "p1", "--ecn", "pmax=2"},
		{"--port", "p0", "--port", "p1", "--pfc", "priority=8"},
		{"--port", "p0", "--port", "p1", "--pfc", "xon=9,xoff=8"},
		{"--port", "p0", "--port", "p1", "--pfc", "on", "--buffer", "1000"},
		{"--port", "p0", "--port", "p1", "--rules", rules},
	} {
		_, err := parseSwitch(args)
		if !errors.As(err, new(usageError)) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error (exit 2)", args, err)
		}
	}
	for _, spec := range []string{"198.18.0.0/24", "x=p0", "198.18.0.0/24=p9", "198.18.0.0/24=p0@nonsense"} {
		if _, err := parseRoutes([]string{spec}, []string{"p0", "p1"}); err == nil {
			t.Errorf("--route %q accepted", spec)
		}
	}
}
