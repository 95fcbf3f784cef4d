package fabric

import (
	"fmt"
	"net/netip"
)

// TopologyConfig configures the networks Star, LeafSpine and FatTree
// build: every link the same, every switch the same.
type TopologyConfig struct {
	Link         LinkParams
	Switch       SwitchConfig
	TxRingFrames int    // each host's transmit ring (0: DefaultTxRingFrames)
	MaxFrame     int    // 0: DefaultMaxFrame
	Seed         uint64 // the switches' draws and ECMP hashes
}

// DefaultMaxFrame is room for a 4096-byte MTU, as the simulator's.
const DefaultMaxFrame = 4096 + 128

// HostAddr is host i's IPv4 address in the networks built here:
// 198.18.0.1 for host 0, then on, in the benchmarking range
// 198.18.0.0/15 (RFC 2544), so up to 131070 hosts.
func HostAddr(i int) netip.Addr {
	a := uint32(198)<<24 | uint32(18)<<16 + uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// HostAddr6 is host i's IPv6 address: 2001:db8:5::(i+1) (documentation
// prefix, RFC 3849).
func HostAddr6(i int) netip.Addr {
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0x00, 0x05}
	v := uint32(i) + 1
	b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return netip.AddrFrom16(b)
}

// HostMAC is host i's MAC address (locally administered).
func HostMAC(i int) [6]byte {
	return [6]byte{0x02, 0x53, 0x4e, byte(i >> 16), byte(i >> 8), byte(i)}
}

func newTopology(clock Clock, cfg TopologyConfig, hosts int) *Network {
	maxFrame := cfg.MaxFrame
	if maxFrame == 0 {
		maxFrame = DefaultMaxFrame
	}
	n := NewNetwork(clock, maxFrame, cfg.Seed)
	for i := range hosts {
		n.AddHost(HostConfig{Addrs: []netip.Addr{HostAddr(i), HostAddr6(i)}, TxRingFrames: cfg.TxRingFrames})
	}
	return n
}

// Star is N hosts on one switch: host i on port i.
func Star(clock Clock, hosts int, cfg TopologyConfig) (*Network, error) {
	if hosts < 1 {
		return nil, fmt.Errorf("fabric: Star of %d hosts", hosts)
	}
	n := newTopology(clock, cfg, hosts)
	s := n.AddSwitch(hosts, cfg.Switch)
	for i, h := range n.Hosts() {
		if err := n.Connect(HostEnd(h), SwitchEnd(s, i), cfg.Link); err != nil {
			return nil, err
		}
	}
	return n, n.Build()
}

// LeafSpine is a two-tier Clos network: leaves switches with hostsPerLeaf
// hosts each, every leaf joined to every one of spines switches. Leaf l
// has its hosts on ports 0 to hostsPerLeaf-1 and spine s on port
// hostsPerLeaf+s; spine s has leaf l on port l. Hosts are numbered leaf
// by leaf; Switches returns the leaves, then the spines.
func LeafSpine(clock Clock, leaves, spines, hostsPerLeaf int, cfg TopologyConfig) (*Network, error) {
	if leaves < 1 || spines < 1 || hostsPerLeaf < 1 {
		return nil, fmt.Errorf("fabric: LeafSpine of %d leaves, %d spines, %d hosts per leaf", leaves, spines, hostsPerLeaf)
	}
	n := newTopology(clock, cfg, leaves*hostsPerLeaf)
	leaf := make([]*Switch, leaves)
	for l := range leaf {
		leaf[l] = n.AddSwitch(hostsPerLeaf+spines, cfg.Switch)
	}
	for s := range spines {
		spine := n.AddSwitch(leaves, cfg.Switch)
		for l := range leaf {
			if err := n.Connect(SwitchEnd(leaf[l], hostsPerLeaf+s), SwitchEnd(spine, l), cfg.Link); err != nil {
				return nil, err
			}
		}
	}
	for i, h := range n.Hosts() {
		if err := n.Connect(HostEnd(h), SwitchEnd(leaf[i/hostsPerLeaf], i%hostsPerLeaf), cfg.Link); err != nil {
			return nil, err
		}
	}
	return n, n.Build()
}

// FatTree is the three-tier fat tree of k-port switches (Al-Fares et al.,
// SIGCOMM 2008), IRN's topology (§4.1: k = 6, 54 hosts, 45 switches): k
// pods of k/2 edge and k/2 aggregation switches, (k/2)^2 core switches,
// k^3/4 hosts. In pod p, edge switch e has hosts on ports 0 to k/2-1 and
// aggregation switch a of the pod on port k/2+a; aggregation switch a has
// edge e on port e and core switch a*k/2+c on port k/2+c; core switch j
// has pod p on port p. Host p*(k/2)^2 + e*k/2 + i is port i of edge e of
// pod p. Switches returns the k^2/2 edge switches (pod by pod), then the
// k^2/2 aggregation switches, then the core switches. k must be even.
func FatTree(clock Clock, k int, cfg TopologyConfig) (*Network, error) {
	if k < 2 || k%2 != 0 {
		return nil, fmt.Errorf("fabric: FatTree k = %d, need an even k >= 2", k)
	}
	h := k / 2
	n := newTopology(clock, cfg, k*k*k/4)
	edge := make([]*Switch, k*h)
	agg := make([]*Switch, k*h)
	core := make([]*Switch, h*h)
	for i := range edge {
		edge[i] = n.AddSwitch(k, cfg.Switch)
	}
	for i := range agg {
		agg[i] = n.AddSwitch(k, cfg.Switch)
	}
	for i := range core {
		core[i] = n.AddSwitch(k, cfg.Switch)
	}
	for p := range k {
		for e := range h {
			for a := range h {
				if err := n.Connect(SwitchEnd(edge[p*h+e], h+a), SwitchEnd(agg[p*h+a], e), cfg.Link); err != nil {
					return nil, err
				}
			}
		}
		for a := range h {
			for c := range h {
				if err := n.Connect(SwitchEnd(agg[p*h+a], h+c), SwitchEnd(core[a*h+c], p), cfg.Link); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, host := range n.Hosts() {
		if err := n.Connect(HostEnd(host), SwitchEnd(edge[i/h], i%h), cfg.Link); err != nil {
			return nil, err
		}
	}
	return n, n.Build()
}
