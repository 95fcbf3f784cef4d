//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// (The build constraint above keeps the Go tool from taking this file for
// cgo source; bpf2go compiles it, see gen.go.)
//
// xdp_steer: hand RoCEv2 frames (UDP destination port 4791, IANA "roce") to
// the AF_XDP socket bound to the receive queue they arrived on, and leave
// every other frame to the kernel untouched.
//
// The program never drops and never rewrites: its only verdicts are
// XDP_REDIRECT (into the XSKMAP) and XDP_PASS. A frame that is not a
// complete, unfragmented IPv4/IPv6 UDP datagram to port 4791 (and, when the
// destination filter is on, to the configured local address) is passed, so
// ARP, neighbour discovery, ICMP, SSH and the kernel's own UDP keep working
// on an interface softnic is attached to. Every verdict increments exactly
// one per-CPU counter naming its reason, so the daemon can report why
// frames did or did not reach it (STYLE.md item 5).
//
// Build: `go generate ./bpf` (see gen.go); the generated object is
// committed so that building softnic needs only Go.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// The IANA-assigned UDP destination port of RoCEv2 (IBA Annex A17).
#define ROCE_V2_PORT 4791

// Upper bound on AF_XDP sockets, one per receive queue. A frame arriving on
// a queue >= this bound (or on a queue without a socket) is passed to the
// kernel by bpf_redirect_map's fallback action.
#define MAX_QUEUES 64

// IPv4 fragment bits of iphdr.frag_off (host order), RFC 791 §3.1.
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

// An 802.1Q / 802.1ad tag following the MAC addresses. The uapi headers do
// not export struct vlan_hdr (it lives in the kernel's linux/if_vlan.h).
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

// Why a frame got its verdict: exactly one counter per frame. The Go side
// uses the bpf2go-generated constants for these, so the two cannot drift.
enum counter {
	// RoCEv2 frame redirected to the queue's AF_XDP socket.
	COUNTER_STEERED = 0,
	// RoCEv2 frame, but no socket in the XSKMAP for its receive queue:
	// bpf_redirect_map fell back to XDP_PASS and the kernel got it.
	COUNTER_NO_SOCKET,
	// Not IPv4/IPv6 (ARP, LLDP, two VLAN tags, ...).
	COUNTER_NOT_IP,
	// IP but not UDP (ICMP, TCP, IPv6 extension headers other than
	// Fragment, ...).
	COUNTER_NOT_UDP,
	// UDP to a port other than 4791.
	COUNTER_OTHER_PORT,
	// UDP/4791 to an address other than the configured local one.
	COUNTER_OTHER_DST,
	// IPv4 fragment (MF set or offset != 0) or IPv6 Fragment header: the
	// kernel reassembles; RoCEv2 sets DF and never fragments.
	COUNTER_FRAGMENT,
	// Frame ends before the headers the classification needs.
	COUNTER_TRUNCATED,
	// Headers present but inconsistent (IP version, IHL < 5, lengths
	// shorter than the UDP header).
	COUNTER_MALFORMED,
	// MAC Control frame (EtherType 0x8808: 802.3x PAUSE, 802.1Qbb PFC)
	// redirected to the queue's AF_XDP socket; only with steer_pause.
	COUNTER_PAUSE_STEERED,
	COUNTER_MAX,
};

// A variable of the enum type puts the enum into BTF, where bpf2go finds it
// and emits it as Go constants (steerCounter*). It lives in .rodata, which
// the configuration below needs anyway, so it costs no extra map; the Go
// loader also checks it against its own count.
volatile const enum counter counter_max = COUNTER_MAX;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Load-time configuration (.rodata), set by the Go loader before the
// program is verified, so the verifier prunes the filter when it is off.
//
// filter_dst: when non-zero, steer only frames whose destination address
// equals local_ip4 (IPv4) or local_ip6 (IPv6). A family whose address is
// unset (all zero) then steers nothing: a daemon configured for one family
// must not swallow the other family's frames.
volatile const __u32 filter_dst = 0;
// Network byte order.
volatile const __be32 local_ip4 = 0;
volatile const __be32 local_ip6[4] = {0, 0, 0, 0};
// steer_pause: when non-zero, MAC Control frames (EtherType 0x8808, the
// 802.3x PAUSE and 802.1Qbb PFC frames) are redirected too, so that a
// daemon can honour a pause and softnic's switch can see one. A frame on a
// queue without a socket still goes to the kernel (which drops it).
volatile const __u32 steer_pause = 0;

// ETH_P_MAC_CONTROL is 802.3's MAC Control EtherType (linux/if_ether.h
// names it ETH_P_PAUSE).
#define ETH_P_MAC_CONTROL 0x8808

// count adds one to the per-CPU counter for reason. The lookup cannot fail
// for reason < COUNTER_MAX, but the verifier needs the NULL check.
static __always_inline void count(__u32 reason)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &reason);

	if (value)
		*value += 1;
}

static __always_inline int pass(__u32 reason)
{
	count(reason);
	return XDP_PASS;
}

// ipv4_udp stores the UDP destination port (network order) of an
// unfragmented IPv4 UDP datagram in *dport and returns 1, or sets *reason
// and returns 0.
//
// The parsers read the port themselves instead of returning a pointer to
// the UDP header: clang may recompute a returned pointer from its base and
// offset after the bounds check, and the verifier then sees an unchecked
// packet pointer ("invalid access to packet").
static __always_inline int ipv4_udp(void *l3, void *data_end, __be16 *dport, __u32 *reason)
{
	struct iphdr *ip = l3;
	struct udphdr *udp;
	__u32 hlen;

	if ((void *)(ip + 1) > data_end) {
		*reason = COUNTER_TRUNCATED;
		return 0;
	}
	if (ip->version != 4 || ip->ihl < 5) {
		*reason = COUNTER_MALFORMED;
		return 0;
	}
	if (ip->protocol != IPPROTO_UDP) {
		*reason = COUNTER_NOT_UDP;
		return 0;
	}
	// Non-first fragments carry no UDP header; first fragments carry one
	// but the datagram is incomplete. Both belong to the kernel.
	if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		*reason = COUNTER_FRAGMENT;
		return 0;
	}
	// IHL is 4 bits, so hlen is in [20, 60]: the verifier tracks that
	// bound and accepts the variable-offset packet pointer below.
	hlen = ip->ihl * 4;
	udp = l3 + hlen;
	if ((void *)(udp + 1) > data_end) {
		*reason = COUNTER_TRUNCATED;
		return 0;
	}
	if (bpf_ntohs(ip->tot_len) < hlen + sizeof(*udp)) {
		*reason = COUNTER_MALFORMED;
		return 0;
	}
	*dport = udp->dest;
	return 1;
}

// ipv6_udp is ipv4_udp for an IPv6 datagram whose first next header is
// UDP. RoCEv2 puts UDP right after the fixed header, so extension headers
// are not walked: such frames pass.
static __always_inline int ipv6_udp(void *l3, void *data_end, __be16 *dport, __u32 *reason)
{
	struct ipv6hdr *ip6 = l3;
	struct udphdr *udp;

	if ((void *)(ip6 + 1) > data_end) {
		*reason = COUNTER_TRUNCATED;
		return 0;
	}
	if (ip6->version != 6) {
		*reason = COUNTER_MALFORMED;
		return 0;
	}
	// Fragment extension header, RFC 8200 §4.5.
	if (ip6->nexthdr == IPPROTO_FRAGMENT) {
		*reason = COUNTER_FRAGMENT;
		return 0;
	}
	if (ip6->nexthdr != IPPROTO_UDP) {
		*reason = COUNTER_NOT_UDP;
		return 0;
	}
	udp = (void *)(ip6 + 1);
	if ((void *)(udp + 1) > data_end) {
		*reason = COUNTER_TRUNCATED;
		return 0;
	}
	if (bpf_ntohs(ip6->payload_len) < sizeof(*udp)) {
		*reason = COUNTER_MALFORMED;
		return 0;
	}
	*dport = udp->dest;
	return 1;
}

// local_dst reports whether the destination address of the IP header at l3
// passes the configured filter. The callers have bounds-checked the header
// already; the checks are repeated so this function stands on its own for
// the verifier.
static __always_inline int local_dst(__be16 proto, void *l3, void *data_end)
{
	if (!filter_dst)
		return 1;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > data_end)
			return 0;
		return local_ip4 != 0 && ip->daddr == local_ip4;
	} else {
		struct ipv6hdr *ip6 = l3;
		__u32 *dst;

		if ((void *)(ip6 + 1) > data_end)
			return 0;
		if ((local_ip6[0] | local_ip6[1] | local_ip6[2] | local_ip6[3]) == 0)
			return 0;
		dst = ip6->daddr.in6_u.u6_addr32;
		return dst[0] == local_ip6[0] && dst[1] == local_ip6[1] &&
		       dst[2] == local_ip6[2] && dst[3] == local_ip6[3];
	}
}

// HDR_MAX is the most any classification reads: Ethernet (14), one VLAN
// tag (4), an IPv4 header with options (60) and UDP (8) is 86; IPv6 needs
// 14 + 4 + 40 + 8 = 66.
#define HDR_MAX 96

// classify gives the frame whose first bytes lie in [data, data_end) its
// verdict. It is inlined twice: over the packet itself (the first buffer
// of a multi-buffer frame) and over a copy of the frame's first bytes on
// the stack, for a frame whose first buffer ends inside its headers.
static __always_inline int classify(struct xdp_md *ctx, void *data, void *data_end)
{
	struct ethhdr *eth = data;
	__be16 dport = 0;
	// Every 0 return from the parsers sets reason; the initial value
	// only keeps the compiler from warning about an unset variable.
	__u32 reason = COUNTER_MALFORMED;
	__be16 proto;
	void *l3;
	long action;
	int ok;

	if ((void *)(eth + 1) > data_end)
		return pass(COUNTER_TRUNCATED);
	proto = eth->h_proto;
	l3 = eth + 1;

	// Pause frames are never tagged (802.1Qbb sends them untagged).
	if (steer_pause && proto == bpf_htons(ETH_P_MAC_CONTROL)) {
		action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
		count(action == XDP_REDIRECT ? COUNTER_PAUSE_STEERED : COUNTER_NO_SOCKET);
		return action;
	}

	// One 802.1Q (or 802.1ad) tag. NICs usually strip the tag into
	// metadata before XDP; veth and VLAN-unaware drivers do not.
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vlan = l3;

		if ((void *)(vlan + 1) > data_end)
			return pass(COUNTER_TRUNCATED);
		proto = vlan->h_vlan_encapsulated_proto;
		l3 = vlan + 1;
	}

	if (proto == bpf_htons(ETH_P_IP))
		ok = ipv4_udp(l3, data_end, &dport, &reason);
	else if (proto == bpf_htons(ETH_P_IPV6))
		ok = ipv6_udp(l3, data_end, &dport, &reason);
	else
		return pass(COUNTER_NOT_IP);
	if (!ok)
		return pass(reason);
	if (dport != bpf_htons(ROCE_V2_PORT))
		return pass(COUNTER_OTHER_PORT);
	// After the port check, so that other_dst counts only RoCEv2 frames
	// meant for another address (e.g. another softnic on the same link).
	if (!local_dst(proto, l3, data_end))
		return pass(COUNTER_OTHER_DST);

	// The low bits of flags are the action when the queue has no socket:
	// XDP_PASS keeps RoCEv2 reaching the kernel (and its ICMP port
	// unreachable) while no daemon is bound.
	action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	count(action == XDP_REDIRECT ? COUNTER_STEERED : COUNTER_NO_SOCKET);
	return action;
}

// The program is built for multi-buffer frames ("xdp.frags": loaded with
// BPF_F_XDP_HAS_FRAGS), so that a driver may hand it frames larger than
// one buffer (path MTU 4096 over AF_XDP with XDP_USE_SG; veth then also
// allows driver-mode XDP above a page's MTU). data..data_end is then only
// the first buffer. Drivers put at least the headers there in practice;
// when the first buffer ends inside the headers and the frame goes on,
// the headers are copied out with bpf_xdp_load_bytes and classified from
// the copy, so a verdict never depends on where a driver split the frame.
// The verdict is the same for the whole frame: XDP_REDIRECT hands every
// buffer of it to the AF_XDP socket.
SEC("xdp.frags")
int xdp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	// The copy starts 2 bytes in, so that the IP header after the
	// 14-byte Ethernet header (and after a 4-byte tag) is 4-byte aligned:
	// the verifier refuses misaligned stack reads.
	__u8 buf[HDR_MAX + 2] __attribute__((aligned(8))) = {};
	void *hdr = buf + 2;
	__u64 total, n;

	if (data + HDR_MAX <= data_end)
		return classify(ctx, data, data_end);
	total = bpf_xdp_get_buff_len(ctx);
	if (total <= (__u64)(data_end - data))
		// A single buffer: it is the whole frame.
		return classify(ctx, data, data_end);
	n = total < HDR_MAX ? total : HDR_MAX;
	if (n == 0 || bpf_xdp_load_bytes(ctx, 0, hdr, n) != 0)
		return pass(COUNTER_TRUNCATED);
	return classify(ctx, hdr, hdr + n);
}

char __license[] SEC("license") = "Dual MIT/GPL";
