//go:build linux

package bpf

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// xdpMD is struct xdp_md, the context BPF_PROG_TEST_RUN takes for XDP.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// runLinear runs frame with its first linear bytes in the first buffer and
// the rest in fragments, as a multi-buffer driver hands it over. linear 0
// leaves the split to the kernel (a page less headroom and tailroom). It
// returns the verdict and the one counter that moved, like run.
func runLinear(tb testing.TB, s *Steer, frame []byte, linear int) (uint32, string, error) {
	tb.Helper()
	before := counterMap(tb, s)
	opts := &ebpf.RunOptions{Data: frame}
	if linear > 0 {
		opts.Context = xdpMD{DataEnd: uint32(linear)}
	}
	verdict, err := s.Program.Run(opts)
	if err != nil {
		return 0, "", err
	}
	after := counterMap(tb, s)
	var moved []string
	for name, v := range after {
		if d := v - before[name]; d == 1 {
			moved = append(moved, name)
		} else if d != 0 {
			tb.Fatalf("counter %s moved by %d for one frame", name, d)
		}
	}
	if len(moved) != 1 {
		tb.Fatalf("one frame moved counters %v, want exactly one", moved)
	}
	return verdict, moved[0], nil
}

// TestMultiBufferFrames runs frames longer than a page, which the kernel's
// test run hands to the program in several buffers (only a program loaded
// with BPF_F_XDP_HAS_FRAGS may see them): RoCEv2 of every family is
// steered, other traffic passed, exactly as for one buffer.
func TestMultiBufferFrames(t *testing.T) {
	s := loadForTest(t, Options{})
	if !s.Frags {
		t.Skip("the kernel refused BPF_F_XDP_HAS_FRAGS (before Linux 5.18): no multi-buffer XDP")
	}
	withSocket(t, s)
	big := func(f frame) frame { f.payload = 8000; return f }
	for _, c := range []struct {
		name  string
		frame frame
		want  string
	}{
		{"IPv4 UDP 4791", big(v4()), "steered"},
		{"IPv6 UDP 4791", big(v6()), "steered"},
		{"802.1Q IPv6 UDP 4791", func() frame { f := big(v6()); f.tags = []uint16{eth8021Q}; return f }(), "steered"},
		{"IPv4 UDP other port", func() frame { f := big(v4()); f.dport = 4792; return f }(), "pass_other_port"},
		{"IPv6 TCP", func() frame { f := big(v6()); f.proto = protoTCP; return f }(), "pass_not_udp"},
	} {
		full, _ := c.frame.build()
		verdict, counter, err := runLinear(t, s, full, 0)
		if err != nil {
			t.Fatalf("%s, %d bytes: %v", c.name, len(full), err)
		}
		if counter != c.want || verdict != wantVerdict(c.want) {
			t.Errorf("%s, %d bytes: verdict %d counter %s, want %s", c.name, len(full), verdict, counter, c.want)
		}
	}
}

// TestHeadersAcrossBuffers splits a frame at every offset inside its
// headers: a first buffer that ends inside them must not change the
// verdict, since the program then reads the headers with
// bpf_xdp_load_bytes. It needs a kernel whose test run takes the linear
// length from xdp_md.data_end (Linux 6.18); older ones refuse it and the
// test skips, saying so.
func TestHeadersAcrossBuffers(t *testing.T) {
	s := loadForTest(t, Options{LocalIPv4: dstIPv4, LocalIPv6: dstIPv6})
	if !s.Frags {
		t.Skip("the kernel refused BPF_F_XDP_HAS_FRAGS (before Linux 5.18): no multi-buffer XDP")
	}
	withSocket(t, s)
	for _, c := range []struct {
		name  string
		frame frame
		want  string
	}{
		{"IPv4", v4(), "steered"},
		{"IPv4 IHL 15", func() frame { f := v4(); f.ihl = 15; return f }(), "steered"},
		{"IPv6", v6(), "steered"},
		{"802.1Q IPv6", func() frame { f := v6(); f.tags = []uint16{eth8021Q}; return f }(), "steered"},
		{"IPv4 other port", func() frame { f := v4(); f.dport = 53; return f }(), "pass_other_port"},
		{"IPv6 other dst", func() frame { f := v6(); f.dst = srcIPv6; return f }(), "pass_other_dst"},
	} {
		f := c.frame
		f.payload = 5000
		full, udpEnd := f.build()
		for linear := 14; linear <= udpEnd+8; linear++ {
			verdict, counter, err := runLinear(t, s, full, linear)
			if errors.Is(err, unix.EINVAL) && linear == 14 {
				t.Skipf("this kernel's BPF_PROG_TEST_RUN does not take a linear length for XDP (%v)", err)
			}
			if err != nil {
				t.Fatalf("%s split at %d: %v", c.name, linear, err)
			}
			if counter != c.want || verdict != wantVerdict(c.want) {
				t.Errorf("%s split at %d (UDP header ends at %d): verdict %d counter %s, want %s", c.name, linear, udpEnd, verdict, counter, c.want)
			}
		}
	}
	// A frame whose headers are cut short stays truncated however it is
	// split.
	full, udpEnd := v4().build()
	full = full[:udpEnd-1]
	if _, counter, err := runLinear(t, s, full, 14); err == nil && counter != "pass_truncated" {
		t.Errorf("a %d-byte frame split at 14: counter %s, want pass_truncated", len(full), counter)
	}
}
