package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIbverbsAHFromWC: the drop-in libibverbs' ibv_init_ah_from_wc and
// ibv_create_ah_from_wc on GRH areas of both layouts (docs/ud.md):
// RoCE v2 over IPv4 (the IPv4 header in the last 20 bytes: the
// IPv4-mapped source, TOS, TTL) and an IPv6 header (source, traffic
// class, flow label, hop limit 0xff); a datagram to another GID, one
// without a known header and a completion without IBV_WC_GRH fail; the
// address handle from the IPv4 one is made (its MAC the kernel's
// neighbour of B, from A's namespace). udaddy's server uses it in
// TestRdmacmUDaddy.
func TestIbverbsAHFromWC(t *testing.T) {
	needIbverbs(t)
	tb := requireE2E(t)
	ibv := ibverbsLib(t)
	prog := filepath.Join(binDir, "ahfromwc")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-o", prog, "ahfromwc/main.c", "-L"+ibv,
		"-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	a, _ := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	B := tb.B.IPv4.String()
	args := []string{"netns", "exec", tb.NS(a.name), "env", "LD_LIBRARY_PATH=" + ibv, "SOFTNIC_SOCKET=" + a.socket, prog, B}
	p := startChild(t, exec.Command("ip", args...), "")
	out := waitExit(t, p, "ahfromwc", time.Minute)
	t.Logf("ahfromwc:\n%s", out)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	want := map[string]string{
		"ipv4":                     "rc 0 global 1 port 1 dgid ::ffff:" + B + " sgid_index 0 tclass 0x28 hop_limit 63 flow 0x0",
		"create_ah_from_wc":        "ah 1 errno=0",
		"ipv6":                     "rc 0 global 1 port 1 dgid 2001:db8:b::1 sgid_index 0 tclass 0x12 hop_limit 255 flow 0xabcde",
		"other_dgid":               "rc -1 errno=22",
		"no_header":                "rc -1 errno=93",
		"no_grh":                   "rc -1 errno=22",
		"create_ah_from_wc_no_grh": "ah 0 errno=22",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
}
