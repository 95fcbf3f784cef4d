//go:build linux

package tests

import (
	"strings"
	"syscall"
	"testing"
)

// mtu4096VethMTU is the testbed's veth MTU for path MTU 4096: a full
// packet (4096 + IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ICRC 4) with room to
// spare, more than one 4096-byte UMEM chunk holds after its headroom, so
// every full packet crosses AF_XDP in two descriptors.
const mtu4096VethMTU = "4500"

// TestE2EMTU4096: two daemons with --mtu 4096 on a testbed whose veths
// carry 4500 bytes. e2eclient pairs connect at path MTU 4096 and run
// WRITE, WRITE with immediate, READ, SEND and SEND with immediate at sizes
// around one and many packets, byte-exact with their completions checked;
// softnic-bench write_bw -m 4096 completes between the same daemons. Both
// daemons' ports received frames in several AF_XDP descriptors
// (port_rx_multi_buffer) and dropped none (port_rx_chains_dropped,
// port_rx_dropped).
func TestE2EMTU4096(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", mtu4096VethMTU)
	tb := requireE2E(t)
	if tb.MTU != 4500 {
		t.Fatalf("testbed MTU %d, want %s", tb.MTU, mtu4096VethMTU)
	}
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4, "--mtu", "4096")
	startE2EDaemon(t, tb, b, tb.B.IPv4, "--mtu", "4096")
	// The frags program lets veth run XDP in driver mode at this MTU
	// (without it, veth refuses an MTU beyond a page); the port binds
	// with XDP_USE_SG.
	for _, h := range []*e2eHost{a, b} {
		log := h.d.out.String()
		if !strings.Contains(log, "mode=driver") || !strings.Contains(log, "multi_buffer=true") {
			t.Errorf("%s: want XDP in driver mode and a multi-buffer port:\n%s", h.name, log)
		}
	}
	ops := []string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ", "SEND", "SEND_WITH_IMM"}
	sizes := []string{"0", "1", "4095", "4096", "4097", "12288", "65536", "1048576"}
	runPair(t, tb, a, b, len(ops)*len(sizes), "--mtu", "4096", "--ops", strings.Join(ops, ","), "--sizes", strings.Join(sizes, ","))

	out := runBenchPair(t, tb, a, b, 18790, []string{"write_bw", "-m", "4096", "-s", "65536", "-n", "500"}, nil, nil)
	if !strings.Contains(out, "4096[B]") {
		t.Errorf("write_bw: no path MTU 4096 in the banner:\n%s", out)
	}
	for _, h := range []*e2eHost{a, b} {
		st := mustStats(t, h.socket)
		mb, bad, dropped := statValue(t, st, "port_rx_multi_buffer"), statValue(t, st, "port_rx_chains_dropped"), statValue(t, st, "port_rx_dropped")
		t.Logf("%s: port_rx_multi_buffer %d, port_rx_chains_dropped %d, port_rx_dropped %d", h.name, mb, bad, dropped)
		if mb == 0 || bad != 0 || dropped != 0 {
			t.Errorf("%s: want frames in several descriptors and none dropped", h.name)
		}
	}
	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
}

// TestSwitchMTU4096: softnic switch forwards path MTU 4096 between two
// daemons run with --mtu 4096 on 4500-byte veths: its AF_XDP ports take
// frames up to their MTU, so full packets arrive and leave in two
// descriptors each, and every transfer is byte-exact.
func TestSwitchMTU4096(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", mtu4096VethMTU)
	tb := requireE2E(t)
	// TestSwitch's buffer: PFC headroom for what the daemons have in
	// flight when a pause reaches them, so that the switch drops
	// nothing.
	sw := startSwitch(t, tb, "--buffer", "2000000", "--pfc", "xoff=200000,xon=100000,headroom=1500000")
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4, "--mtu", "4096")
	startE2EDaemon(t, tb, b, tb.B.IPv4, "--mtu", "4096")
	ops := []string{"RDMA_WRITE", "RDMA_READ", "SEND"}
	sizes := []string{"1", "4096", "4097", "65536", "1048576"}
	runPair(t, tb, a, b, len(ops)*len(sizes), "--mtu", "4096", "--ops", strings.Join(ops, ","), "--sizes", strings.Join(sizes, ","))
	out := mustStats(t, sw.socket)
	fwd := statValue(t, out, "forwarded")
	mb := statValue(t, out, "port0_xsk_rx_multi_buffer") + statValue(t, out, "port1_xsk_rx_multi_buffer")
	t.Logf("switch: forwarded %d, xsk_rx_multi_buffer %d", fwd, mb)
	// The 1 MiB WRITE, READ and SEND are 256 full packets each.
	if fwd < 3*256 || mb < 3*256 {
		t.Errorf("switch forwarded %d frames, %d of them in several descriptors; want at least %d each:\n%s", fwd, mb, 3*256, out)
	}
	for _, c := range []string{"no_route", "ttl_expired", "malformed", "too_big", "dropped",
		"port0_xsk_rx_chains_dropped", "port1_xsk_rx_chains_dropped", "port0_xsk_rx_dropped", "port1_xsk_rx_dropped"} {
		if v := statValue(t, out, c); v != 0 {
			t.Errorf("switch: %s = %d, want 0", c, v)
		}
	}
	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
	if err := sw.signal(syscall.SIGTERM); err != nil {
		t.Errorf("switch: SIGTERM: exited with %v, want 0\n%s", err, sw.out.String())
	}
}

// TestDirectMTU4096: the same transfers at path MTU 4096 between two
// e2eclients in direct mode (verbs.OpenDirect, no daemon) on 4500-byte
// veths: each process's own AF_XDP socket carries full packets over
// multi-buffer, byte-exact.
func TestDirectMTU4096(t *testing.T) {
	t.Setenv("SOFTNIC_MTU", mtu4096VethMTU)
	tb := requireE2E(t)
	if tb.MTU != 4500 {
		t.Fatalf("testbed MTU %d, want %s", tb.MTU, mtu4096VethMTU)
	}
	a, b := newE2EHosts(t, tb)
	a.direct, a.ip = true, tb.A.IPv4
	b.direct, b.ip = true, tb.B.IPv4
	ops := []string{"RDMA_WRITE", "RDMA_READ", "SEND"}
	sizes := []string{"1", "4096", "4097", "65536", "1048576"}
	runPair(t, tb, a, b, len(ops)*len(sizes), "--mtu", "4096", "--ops", strings.Join(ops, ","), "--sizes", strings.Join(sizes, ","))
}
