//go:build linux

package bpf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/tests/netns"
)

// How these tests see steering: BPF_PROG_TEST_RUN runs the program on a
// buffer without an interface and returns its verdict. bpf_redirect_map
// into an empty XSKMAP slot returns the fallback, XDP_PASS, so a test with
// no socket cannot tell steering from passing by the verdict. The kernel
// does accept an AF_XDP socket that is not bound to any device in an XSKMAP,
// and with one in slot 0 (test runs use rx_queue_index 0) bpf_redirect_map
// returns XDP_REDIRECT; in test-run mode nothing is actually redirected.
// So every case is run twice, with and without a socket, and checks both
// the verdict and that exactly the expected counter moved by one.

func loadForTest(tb testing.TB, opts Options) *Steer {
	tb.Helper()
	netns.RequireBPF(tb)
	s, err := Load(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// withSocket puts an unbound AF_XDP socket into XSKMAP slot 0.
func withSocket(tb testing.TB, s *Steer) {
	tb.Helper()
	netns.RequireAFXDP(tb)
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	if err := s.XSKMap.Put(uint32(0), uint32(fd)); err != nil {
		tb.Fatalf("put AF_XDP socket into XSKMAP: %v", err)
	}
}

func counterMap(tb testing.TB, s *Steer) map[string]uint64 {
	tb.Helper()
	c, err := s.Counters()
	if err != nil {
		tb.Fatal(err)
	}
	return maps.Collect(c.All())
}

// run runs one frame and returns the verdict and the one counter that
// moved; it fails the test if not exactly one counter moved by exactly one.
func run(tb testing.TB, s *Steer, frame []byte) (uint32, string, error) {
	tb.Helper()
	before := counterMap(tb, s)
	verdict, err := s.Program.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return 0, "", err
	}
	after := counterMap(tb, s)
	var moved []string
	for name, v := range after {
		switch d := v - before[name]; d {
		case 0:
		case 1:
			moved = append(moved, name)
		default:
			tb.Fatalf("counter %s moved by %d for one frame", name, d)
		}
	}
	if len(moved) != 1 {
		tb.Fatalf("one frame moved counters %v, want exactly one", moved)
	}
	return verdict, moved[0], nil
}

func wantVerdict(counter string) uint32 {
	if counter == "steered" {
		return xdpRedirect
	}
	return xdpPass
}

func TestVerdicts(t *testing.T) {
	tagged := func(f frame, tags ...uint16) frame { f.tags = tags; return f }
	cases := []struct {
		name  string
		frame frame
		want  string // with a socket in the queue's slot
	}{
		{"IPv4 UDP 4791", v4(), "steered"},
		{"IPv6 UDP 4791", v6(), "steered"},
		{"802.1Q IPv4 UDP 4791", tagged(v4(), eth8021Q), "steered"},
		{"802.1Q IPv6 UDP 4791", tagged(v6(), eth8021Q), "steered"},
		{"802.1ad IPv4 UDP 4791", tagged(v4(), eth8021A), "steered"},
		{"IPv4 options (IHL 6) UDP 4791", func() frame { f := v4(); f.ihl = 6; return f }(), "steered"},
		{"IPv4 options (IHL 15) UDP 4791", func() frame { f := v4(); f.ihl = 15; return f }(), "steered"},
		{"IPv4 DF set UDP 4791", func() frame { f := v4(); f.frag = 0x4000; return f }(), "steered"},
		{"IPv4 UDP 4791 no payload", func() frame { f := v4(); f.payload = 0; return f }(), "steered"},
		{"IPv4 UDP other port", func() frame { f := v4(); f.dport = 4792; return f }(), "pass_other_port"},
		{"IPv6 UDP other port", func() frame { f := v6(); f.dport = 53; return f }(), "pass_other_port"},
		{"IPv4 UDP from 4791 to other port", func() frame { f := v4(); f.sport = RoCEv2Port; f.dport = 5000; return f }(), "pass_other_port"},
		{"IPv4 TCP 4791", func() frame { f := v4(); f.proto = protoTCP; return f }(), "pass_not_udp"},
		{"IPv6 TCP 4791", func() frame { f := v6(); f.proto = protoTCP; return f }(), "pass_not_udp"},
		{"IPv4 ICMP", func() frame { f := v4(); f.proto = protoICMP; return f }(), "pass_not_udp"},
		{"IPv6 hop-by-hop then UDP 4791", func() frame { f := v6(); f.noProto = true; return f }(), "pass_not_udp"},
		{"ARP", frame{ethType: ethARP}, "pass_not_ip"},
		{"802.1Q ARP", frame{ethType: ethARP, tags: []uint16{eth8021Q}}, "pass_not_ip"},
		{"two VLAN tags", tagged(v4(), eth8021A, eth8021Q), "pass_not_ip"},
		{"IPv4 first fragment (MF)", func() frame { f := v4(); f.frag = 0x2000; return f }(), "pass_fragment"},
		{"IPv4 later fragment (offset)", func() frame { f := v4(); f.frag = 0x0010; return f }(), "pass_fragment"},
		{"IPv4 last fragment (offset, no MF)", func() frame { f := v4(); f.frag = 0x1fff; return f }(), "pass_fragment"},
		{"IPv6 fragment header", func() frame { f := v6(); f.proto = protoFragment; return f }(), "pass_fragment"},
		{"IPv4 IHL 4", func() frame { f := v4(); f.ihl = 4; return f }(), "pass_malformed"},
		{"IPv4 ethertype, version 6", func() frame { f := v4(); f.version = 6; return f }(), "pass_malformed"},
		{"IPv6 ethertype, version 4", func() frame { f := v6(); f.version = 4; return f }(), "pass_malformed"},
		{"IPv4 total length shorter than UDP header", func() frame { f := v4(); f.ipLen = 27; return f }(), "pass_malformed"},
		{"IPv6 payload length shorter than UDP header", func() frame { f := v6(); f.ipLen = 7; return f }(), "pass_malformed"},
	}

	for _, socket := range []bool{true, false} {
		s := loadForTest(t, Options{})
		name := "no socket"
		if socket {
			withSocket(t, s)
			name = "socket in slot 0"
		}
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				b, _ := c.frame.build()
				want := c.want
				if want == "steered" && !socket {
					want = "pass_no_socket"
				}
				if ref := classify(b, Options{}, socket); ref != want {
					t.Fatalf("%s: reference model says %s, test table %s", c.name, ref, want)
				}
				verdict, counter, err := run(t, s, b)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if verdict != wantVerdict(want) || counter != want {
					t.Errorf("%s: verdict %d counter %s, want %d %s", c.name, verdict, counter, wantVerdict(want), want)
				}
			}
		})
	}
}

// TestTruncated cuts each steerable frame at every length: below the end
// of the UDP header nothing may be steered, from there on it must be (the
// dataplane checks the rest), and nothing may fail to run.
func TestTruncated(t *testing.T) {
	s := loadForTest(t, Options{})
	withSocket(t, s)
	for _, f := range []frame{
		v4(), v6(),
		func() frame { f := v4(); f.tags = []uint16{eth8021Q}; return f }(),
		func() frame { f := v6(); f.tags = []uint16{eth8021Q}; return f }(),
		func() frame { f := v4(); f.ihl = 15; return f }(),
	} {
		full, udpEnd := f.build()
		rejected := 0
		for n := 0; n <= len(full); n++ {
			verdict, counter, err := run(t, s, full[:n])
			if err != nil {
				// BPF_PROG_TEST_RUN refuses buffers shorter than an
				// Ethernet header (EINVAL); no driver delivers one.
				if n < 14 && errors.Is(err, unix.EINVAL) {
					rejected++
					continue
				}
				t.Fatalf("%d of %d bytes: %v", n, len(full), err)
			}
			want := "pass_truncated"
			if n >= udpEnd {
				want = "steered"
			}
			if counter != want || verdict != wantVerdict(want) {
				t.Errorf("%d of %d bytes (UDP header ends at %d): verdict %d counter %s, want %s",
					n, len(full), udpEnd, verdict, counter, want)
			}
			if ref := classify(full[:n], Options{}, true); ref != counter {
				t.Errorf("%d bytes: reference model says %s, program %s", n, ref, counter)
			}
		}
		t.Logf("%d-byte frame: lengths 0..13 rejected by the kernel's test run (%d), 14..%d checked", len(full), rejected, len(full))
	}
}

func TestDestinationFilter(t *testing.T) {
	netns.RequireAFXDP(t)
	otherIPv4 := netip.MustParseAddr("198.18.1.2")
	otherIPv6 := netip.MustParseAddr("2001:db8:b::2")
	to := func(f frame, dst netip.Addr) frame { f.dst = dst; return f }
	both := Options{LocalIPv4: dstIPv4, LocalIPv6: dstIPv6}
	cases := []struct {
		name  string
		opts  Options
		frame frame
		want  string
	}{
		{"v4 to local", both, v4(), "steered"},
		{"v6 to local", both, v6(), "steered"},
		{"v4 to other", both, to(v4(), otherIPv4), "pass_other_dst"},
		{"v6 to other", both, to(v6(), otherIPv6), "pass_other_dst"},
		{"v6 differing in the last word", both, to(v6(), netip.MustParseAddr("2001:db8:b::1:1")), "pass_other_dst"},
		{"v6 differing in the first word", both, to(v6(), netip.MustParseAddr("2001:db9:b::1")), "pass_other_dst"},
		{"802.1Q v4 to other", both, func() frame { f := to(v4(), otherIPv4); f.tags = []uint16{eth8021Q}; return f }(), "pass_other_dst"},
		{"other port to other address counts as port", both, func() frame { f := to(v4(), otherIPv4); f.dport = 53; return f }(), "pass_other_port"},
		{"only v4 configured: v4 to local", Options{LocalIPv4: dstIPv4}, v4(), "steered"},
		{"only v4 configured: v6 is not ours", Options{LocalIPv4: dstIPv4}, v6(), "pass_other_dst"},
		{"only v6 configured: v6 to local", Options{LocalIPv6: dstIPv6}, v6(), "steered"},
		{"only v6 configured: v4 is not ours", Options{LocalIPv6: dstIPv6}, v4(), "pass_other_dst"},
		{"only v6 configured: v4 to 0.0.0.0 is not ours", Options{LocalIPv6: dstIPv6}, to(v4(), netip.IPv4Unspecified()), "pass_other_dst"},
		{"no filter: any address", Options{}, to(v6(), otherIPv6), "steered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := loadForTest(t, c.opts)
			withSocket(t, s)
			b, _ := c.frame.build()
			if ref := classify(b, c.opts, true); ref != c.want {
				t.Fatalf("reference model says %s, test table %s", ref, c.want)
			}
			verdict, counter, err := run(t, s, b)
			if err != nil {
				t.Fatal(err)
			}
			if verdict != wantVerdict(c.want) || counter != c.want {
				t.Errorf("verdict %d counter %s, want %d %s", verdict, counter, wantVerdict(c.want), c.want)
			}
		})
	}
}

// TestDifferential runs random mutations of valid frames through the
// program and the Go reference model; both must agree on every frame.
func TestDifferential(t *testing.T) {
	opts := Options{LocalIPv4: dstIPv4, LocalIPv6: dstIPv6}
	s := loadForTest(t, opts)
	withSocket(t, s)
	var seeds [][]byte
	for _, f := range []frame{v4(), v6(), func() frame { f := v4(); f.tags = []uint16{eth8021Q}; f.ihl = 7; return f }()} {
		b, _ := f.build()
		seeds = append(seeds, b)
	}
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed: reproducible
	const rounds = 3000
	seen := map[string]int{}
	for range rounds {
		b := slices.Clone(seeds[rng.IntN(len(seeds))])
		// Flip a few bytes, mostly in the headers, and sometimes cut.
		for range 1 + rng.IntN(3) {
			b[rng.IntN(min(len(b), 70))] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 {
			b = b[:14+rng.IntN(len(b)-13)]
		}
		want := classify(b, opts, true)
		verdict, counter, err := run(t, s, b)
		if err != nil {
			t.Fatalf("frame %x: %v", b, err)
		}
		if counter != want || verdict != wantVerdict(want) {
			t.Fatalf("frame %x: program %s (verdict %d), reference %s", b, counter, verdict, want)
		}
		seen[counter]++
	}
	t.Logf("%d random frames agreed: %v", rounds, seen)
}

func TestLoadOptions(t *testing.T) {
	bad := []Options{
		{LocalIPv4: dstIPv6},
		{LocalIPv4: netip.IPv4Unspecified()},
		{LocalIPv6: dstIPv4},
		{LocalIPv6: netip.AddrFrom16(dstIPv4.As16())}, // ::ffff:198.18.1.1
		{LocalIPv6: netip.IPv6Unspecified()},
	}
	for _, opts := range bad {
		// Rejected before anything is loaded, so no privileges needed.
		if s, err := Load(opts); err == nil {
			s.Close()
			t.Errorf("Load(%+v) succeeded, want an error", opts)
		} else if !strings.Contains(err.Error(), "address") {
			t.Errorf("Load(%+v): %v, want an address error", opts, err)
		}
	}
}

func TestCounters(t *testing.T) {
	c := Counters{Steered: 1, NoSocket: 2, NotIP: 3, NotUDP: 4, OtherPort: 5, OtherDst: 6, Fragment: 7, Truncated: 8, Malformed: 9, PauseSteered: 10}
	got := maps.Collect(c.All())
	if len(got) != int(steerCounterCOUNTER_MAX) {
		t.Fatalf("All yields %d names, want %d: %v", len(got), steerCounterCOUNTER_MAX, got)
	}
	// Each field appears under exactly one name: the values are distinct.
	values := slices.Sorted(maps.Values(got))
	if !slices.Equal(values, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("All values %v, want each field once", values)
	}
	if got["steered"] != 1 || got["pause_steered"] != 10 || c.Passed() != 44 {
		t.Errorf("steered %d pause_steered %d passed %d, want 1, 10 and 44", got["steered"], got["pause_steered"], c.Passed())
	}
}

// TestGeneratedCurrent fails when xdp_steer.c changed after the committed
// object was generated (go generate ./bpf writes the hash).
func TestGeneratedCurrent(t *testing.T) {
	src, err := os.ReadFile("xdp_steer.c")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("xdp_steer.c.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	fields := strings.Fields(string(recorded))
	if len(fields) == 0 || fields[0] != hex.EncodeToString(sum[:]) {
		t.Errorf("xdp_steer.c changed since steer_bpfel.o was generated: run `go generate ./bpf` and commit the result")
	}
}
