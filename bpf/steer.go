//go:build linux

// Package bpf loads and attaches softnic's XDP steering program.
//
// The program (xdp_steer.c) runs on every frame an interface receives. A
// complete, unfragmented IPv4 or IPv6 UDP datagram to port 4791 (RoCEv2),
// optionally only to a configured local address, is redirected with
// bpf_redirect_map into the XSKMAP slot of the receive queue it arrived on,
// where the dataplane's AF_XDP socket for that queue picks it up. The
// redirect falls back to XDP_PASS when that slot is empty, so while no
// daemon is bound RoCEv2 frames still reach the kernel; every other frame
// is always passed, untouched. Each frame increments one per-CPU counter
// naming the reason for its verdict, which Counters sums for the daemon.
//
// The C source is compiled by bpf2go (`go generate ./bpf`, needs clang and
// libbpf headers); the generated steer_bpfel.go and steer_bpfel.o are
// committed so that building softnic needs only Go. Loading and attaching
// need CAP_BPF and CAP_NET_ADMIN (root).
package bpf

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// RoCEv2Port is the UDP destination port the program steers (IBA Annex
// A17, RoCEv2).
const RoCEv2Port = 4791

// Options configure Load.
type Options struct {
	// LocalIPv4 and LocalIPv6, when either is valid, turn the destination
	// filter on: a RoCEv2 frame is then steered only if its destination
	// equals the address of its family, and a family left zero steers
	// nothing (its frames go to the kernel, counted as OtherDst). Both
	// zero: every RoCEv2 frame is steered, whatever its destination.
	LocalIPv4 netip.Addr
	LocalIPv6 netip.Addr
	// SteerPause also redirects MAC Control frames (EtherType 0x8808:
	// 802.3x PAUSE and 802.1Qbb PFC), whatever their destination, for a
	// daemon that honours pauses and for softnic's switch. Off, they go
	// to the kernel (counted as NotIP), which drops them.
	SteerPause bool
}

// Steer is the loaded program and its maps. It is not attached to any
// interface; see Attach.
type Steer struct {
	// Program is the XDP program, for Attach.
	Program *ebpf.Program
	// XSKMap is the BPF_MAP_TYPE_XSKMAP: key = receive queue index,
	// value = AF_XDP socket fd (Put(uint32(queue), uint32(fd))).
	XSKMap *ebpf.Map
	// MaxQueues is the number of XSKMap slots; frames on a higher queue
	// are passed to the kernel.
	MaxQueues int
	// Frags says the program was loaded for multi-buffer frames
	// (section "xdp.frags", BPF_F_XDP_HAS_FRAGS; Linux 5.18+): a driver
	// may then hand it frames larger than one buffer, which AF_XDP
	// sockets bound with XDP_USE_SG receive in several descriptors.
	// False on older kernels, where it was loaded without the flag.
	Frags bool

	objs steerObjects
}

// Load loads the steering program into the kernel with opts baked into
// its read-only configuration, so the verifier drops the filter code when
// the filter is off.
func Load(opts Options) (*Steer, error) {
	spec, err := loadSteer()
	if err != nil {
		return nil, err
	}
	var vars steerVariableSpecs
	if err := spec.Assign(&vars); err != nil {
		return nil, fmt.Errorf("bpf: steer object: %w", err)
	}
	if err := configure(&vars, opts); err != nil {
		return nil, err
	}
	var countersInObject uint32
	if err := vars.CounterMax.Get(&countersInObject); err != nil {
		return nil, fmt.Errorf("bpf: read counter_max: %w", err)
	}
	if countersInObject != uint32(steerCounterCOUNTER_MAX) {
		// Cannot happen with the committed files; guards against a
		// hand-edited object that was not regenerated with the Go side.
		return nil, fmt.Errorf("bpf: object has %d counters, loader expects %d: run go generate ./bpf",
			countersInObject, steerCounterCOUNTER_MAX)
	}

	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; on newer
	// ones (memcg accounting) this is a no-op.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("bpf: remove memlock rlimit: %w", err)
	}

	s := &Steer{Frags: true}
	err = spec.LoadAndAssign(&s.objs, nil)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 5.18 know no BPF_F_XDP_HAS_FRAGS and refuse
		// the flag: load the same program for single buffers.
		if p := spec.Programs[ProgramName]; p != nil && p.Flags&unix.BPF_F_XDP_HAS_FRAGS != 0 {
			p.Flags &^= unix.BPF_F_XDP_HAS_FRAGS
			s.Frags = false
			err = spec.LoadAndAssign(&s.objs, nil)
		}
	}
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			// The full log says which access the verifier rejected.
			return nil, fmt.Errorf("bpf: load xdp_steer: %+v", verr)
		}
		return nil, fmt.Errorf("bpf: load xdp_steer: %w", err)
	}
	s.Program = s.objs.XdpSteer
	s.XSKMap = s.objs.Xsks
	s.MaxQueues = int(s.objs.Xsks.MaxEntries())
	return s, nil
}

// configure writes opts into the object's .rodata variables.
func configure(vars *steerVariableSpecs, opts Options) error {
	var filter, pause uint32
	if opts.SteerPause {
		pause = 1
	}
	var ip4 [4]byte
	var ip6 [16]byte
	if opts.LocalIPv4.IsValid() {
		if !opts.LocalIPv4.Is4() || opts.LocalIPv4.IsUnspecified() {
			return fmt.Errorf("bpf: LocalIPv4 %v is not a unicast IPv4 address", opts.LocalIPv4)
		}
		filter = 1
		ip4 = opts.LocalIPv4.As4()
	}
	if opts.LocalIPv6.IsValid() {
		// An IPv4-mapped address never appears as an IPv6 destination
		// on the wire, and the program reads an all-zero address as
		// "unset": accepting either would silently match nothing.
		if !opts.LocalIPv6.Is6() || opts.LocalIPv6.Is4In6() || opts.LocalIPv6.IsUnspecified() {
			return fmt.Errorf("bpf: LocalIPv6 %v is not a unicast IPv6 address", opts.LocalIPv6)
		}
		filter = 1
		ip6 = opts.LocalIPv6.As16()
	}
	// The addresses are byte arrays in network order, which is what the
	// program compares against the headers; filter_dst is a host-order
	// integer.
	for _, set := range []struct {
		v   *ebpf.VariableSpec
		val any
	}{
		{vars.FilterDst, filter},
		{vars.LocalIp4, ip4},
		{vars.LocalIp6, ip6},
		{vars.SteerPause, pause},
	} {
		if err := set.v.Set(set.val); err != nil {
			return fmt.Errorf("bpf: configure: %w", err)
		}
	}
	return nil
}

// Close unloads the program and maps. An attachment made with Attach holds
// its own reference and keeps the program running until it is closed.
func (s *Steer) Close() error {
	return s.objs.Close()
}

// Counters are the program's verdict counts since it was loaded, summed
// over CPUs. Every frame the program saw is in exactly one field.
type Counters struct {
	// Steered: RoCEv2 frames redirected to an AF_XDP socket.
	Steered uint64
	// NoSocket: RoCEv2 frames passed because their receive queue had no
	// socket in the XSKMAP.
	NoSocket uint64
	// NotIP: neither IPv4 nor IPv6 (ARP, two VLAN tags, ...).
	NotIP uint64
	// NotUDP: IP but not UDP (ICMP, TCP, IPv6 extension headers).
	NotUDP uint64
	// OtherPort: UDP to a port other than 4791.
	OtherPort uint64
	// OtherDst: RoCEv2 to an address other than the configured one.
	OtherDst uint64
	// Fragment: IPv4 fragments and IPv6 frames with a Fragment header.
	Fragment uint64
	// Truncated: frames that end inside a header needed to classify them.
	Truncated uint64
	// Malformed: inconsistent IP headers (version, IHL, lengths).
	Malformed uint64
	// PauseSteered: MAC Control (pause) frames redirected to an AF_XDP
	// socket (Options.SteerPause).
	PauseSteered uint64
}

// field returns the Counters field for a C counter index, keeping the one
// mapping between the generated constants and the Go names in one place.
func (c *Counters) field(idx steerCounter) *uint64 {
	switch idx {
	case steerCounterCOUNTER_STEERED:
		return &c.Steered
	case steerCounterCOUNTER_NO_SOCKET:
		return &c.NoSocket
	case steerCounterCOUNTER_NOT_IP:
		return &c.NotIP
	case steerCounterCOUNTER_NOT_UDP:
		return &c.NotUDP
	case steerCounterCOUNTER_OTHER_PORT:
		return &c.OtherPort
	case steerCounterCOUNTER_OTHER_DST:
		return &c.OtherDst
	case steerCounterCOUNTER_FRAGMENT:
		return &c.Fragment
	case steerCounterCOUNTER_TRUNCATED:
		return &c.Truncated
	case steerCounterCOUNTER_MALFORMED:
		return &c.Malformed
	case steerCounterCOUNTER_PAUSE_STEERED:
		return &c.PauseSteered
	}
	return nil
}

// counterNames are the metric names, indexed like the C enum.
var counterNames = [steerCounterCOUNTER_MAX]string{
	steerCounterCOUNTER_STEERED:       "steered",
	steerCounterCOUNTER_NO_SOCKET:     "pass_no_socket",
	steerCounterCOUNTER_NOT_IP:        "pass_not_ip",
	steerCounterCOUNTER_NOT_UDP:       "pass_not_udp",
	steerCounterCOUNTER_OTHER_PORT:    "pass_other_port",
	steerCounterCOUNTER_OTHER_DST:     "pass_other_dst",
	steerCounterCOUNTER_FRAGMENT:      "pass_fragment",
	steerCounterCOUNTER_TRUNCATED:     "pass_truncated",
	steerCounterCOUNTER_MALFORMED:     "pass_malformed",
	steerCounterCOUNTER_PAUSE_STEERED: "pause_steered",
}

// All yields every counter as (metric name, value), in a fixed order, for
// the daemon's metrics and logs.
func (c Counters) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for idx := range steerCounterCOUNTER_MAX {
			if !yield(counterNames[idx], *c.field(idx)) {
				return
			}
		}
	}
}

// Passed is the number of frames left to the kernel, for any reason.
func (c Counters) Passed() uint64 {
	var n uint64
	for name, v := range c.All() {
		if name != counterNames[steerCounterCOUNTER_STEERED] && name != counterNames[steerCounterCOUNTER_PAUSE_STEERED] {
			n += v
		}
	}
	return n
}

// Counters reads the per-CPU counters and sums them.
func (s *Steer) Counters() (Counters, error) {
	var c Counters
	// A per-CPU lookup fills one value per possible CPU.
	var perCPU []uint64
	for idx := range steerCounterCOUNTER_MAX {
		if err := s.objs.Counters.Lookup(uint32(idx), &perCPU); err != nil {
			return Counters{}, fmt.Errorf("bpf: read counter %s: %w", counterNames[idx], err)
		}
		sum := c.field(idx)
		for _, v := range perCPU {
			*sum += v
		}
	}
	return c, nil
}
