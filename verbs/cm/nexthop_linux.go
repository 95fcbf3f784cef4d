package cm

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NextHopMAC returns the Ethernet address frames to the GID dst must
// carry when they leave this host: peerMAC (what the exchange carried,
// the peer's own port) when dst is on-link, else the MAC of the gateway
// the kernel routes dst through. It is what the kernel's
// ib_resolve_eth_dmac does for a hardware RoCE NIC at modify-to-RTR: the
// exchange can only tell the peer's own MAC, which is wrong on a routed
// path, such as the testbed's hosts behind their switch.
//
// The route is the kernel's answer for dst in the calling thread's
// network namespace (policy rules included); the gateway's MAC comes from
// the neighbor table. If the kernel has not resolved the gateway yet, one
// UDP datagram to its discard port makes it do so, and NextHopMAC waits
// up to timeout for the answer.
func NextHopMAC(dst netip.Addr, peerMAC [6]byte, timeout time.Duration) ([6]byte, error) {
	dst = dst.Unmap()
	gw, oif, err := routeTo(dst)
	if err != nil {
		return [6]byte{}, err
	}
	if !gw.IsValid() {
		return peerMAC, nil
	}
	return waitNeighbor(gw, dst, oif, timeout)
}

// ResolveMAC returns the Ethernet address frames to dst must carry when
// the caller knows no MAC for dst at all, such as an ibverbs program,
// whose connection exchange carries GIDs only (the kernel resolves the
// MAC for a hardware RoCE NIC): the MAC of the gateway on a routed path,
// else dst's own, from the neighbor table, prompting the kernel to
// resolve it as NextHopMAC does. hopLimit is the hop limit the kernel
// gives the path, which it writes into a RoCEv2 address vector whatever
// the program asked for (rdma_addr_find_l2_eth_by_grh, then
// ib_resolve_unicast_gid_dmac: grh.hop_limit = the route's), on-link or
// routed: ibv_rc_pingpong asks for 1. It is the network namespace's
// net.ipv4.ip_default_ttl for IPv4, the outgoing device's IPv6 hop_limit
// for IPv6 (64 by default, and 64 if they cannot be read); a route's own
// hoplimit metric is not read.
func ResolveMAC(dst netip.Addr, timeout time.Duration) (mac [6]byte, hopLimit uint8, err error) {
	dst = dst.Unmap()
	gw, oif, err := routeTo(dst)
	if err != nil {
		return [6]byte{}, 0, err
	}
	next := dst
	if gw.IsValid() {
		next = gw
	}
	mac, err = waitNeighbor(next, dst, oif, timeout)
	return mac, pathHopLimit(dst, oif), err
}

// defaultHopLimit is the kernel's default TTL and IPv6 hop limit.
const defaultHopLimit = 64

// pathHopLimit is the hop limit the kernel uses towards dst out of
// interface oif (ip4_dst_hoplimit, ip6_dst_hoplimit without a route
// metric): the calling thread's namespace's sysctl.
func pathHopLimit(dst netip.Addr, oif int) uint8 {
	path := "/proc/sys/net/ipv4/ip_default_ttl"
	if dst.Is6() {
		path = "/proc/sys/net/ipv6/conf/default/hop_limit"
		if ifi, err := net.InterfaceByIndex(oif); err == nil {
			path = "/proc/sys/net/ipv6/conf/" + ifi.Name + "/hop_limit"
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return defaultHopLimit
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 || n > 255 {
		return defaultHopLimit
	}
	return uint8(n)
}

// waitNeighbor waits up to timeout for the kernel's link-layer address of
// the next hop ip (towards dst) on interface oif.
func waitNeighbor(ip, dst netip.Addr, oif int, timeout time.Duration) ([6]byte, error) {
	deadline := time.Now().Add(timeout)
	for prompted := false; ; {
		mac, ok, err := neighbor(ip, oif)
		if err != nil || ok {
			return mac, err
		}
		if !prompted {
			prompt(ip)
			prompted = true
		}
		if time.Now().After(deadline) {
			return [6]byte{}, fmt.Errorf("cm: the kernel has no MAC address for %v (towards %v) after %v", ip, dst, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// routeTo asks the kernel (RTM_GETROUTE, as `ip route get` does) how it
// reaches dst: through gateway gw (invalid when on-link) out of oif.
func routeTo(dst netip.Addr) (gw netip.Addr, oif int, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("cm: netlink: %w", err)
	}
	defer unix.Close(fd)
	family, bits := byte(unix.AF_INET), byte(32)
	if dst.Is6() {
		family, bits = unix.AF_INET6, 128
	}
	addr := dst.AsSlice()
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg+unix.SizeofRtAttr+len(addr))
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_GETROUTE)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence number
	rt := req[unix.SizeofNlMsghdr:]
	rt[0], rt[1] = family, bits // rtm_family, rtm_dst_len
	attr := rt[unix.SizeofRtMsg:]
	ne.PutUint16(attr[0:], uint16(unix.SizeofRtAttr+len(addr)))
	ne.PutUint16(attr[2:], unix.RTA_DST)
	copy(attr[unix.SizeofRtAttr:], addr)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return netip.Addr{}, 0, fmt.Errorf("cm: netlink route request: %w", err)
	}
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("cm: netlink route answer: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("cm: netlink route answer: %w", err)
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := -int32(ne.Uint32(m.Data)); errno != 0 {
					return netip.Addr{}, 0, fmt.Errorf("cm: no route to %v: %w", dst, syscall.Errno(errno))
				}
			}
		case unix.RTM_NEWROUTE:
			attrs, err := syscall.ParseNetlinkRouteAttr(m)
			if err != nil {
				return netip.Addr{}, 0, fmt.Errorf("cm: netlink route answer: %w", err)
			}
			for _, a := range attrs {
				switch a.Attr.Type {
				case unix.RTA_GATEWAY:
					gw, _ = netip.AddrFromSlice(a.Value)
				case unix.RTA_OIF:
					if len(a.Value) == 4 {
						oif = int(ne.Uint32(a.Value))
					}
				}
			}
			return gw.Unmap(), oif, nil
		}
	}
	return netip.Addr{}, 0, fmt.Errorf("cm: the kernel gave no route to %v", dst)
}

// usableNeighbor are the neighbor states whose link-layer address the
// kernel itself would send to (include/uapi/linux/neighbour.h).
const usableNeighbor = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT

// neighbor looks ip up in the kernel's neighbor table on interface oif.
func neighbor(ip netip.Addr, oif int) (mac [6]byte, ok bool, err error) {
	family := unix.AF_INET
	if ip.Is6() {
		family = unix.AF_INET6
	}
	dump, err := syscall.NetlinkRIB(unix.RTM_GETNEIGH, family)
	if err != nil {
		return mac, false, fmt.Errorf("cm: netlink neighbor dump: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(dump)
	if err != nil {
		return mac, false, fmt.Errorf("cm: netlink neighbor dump: %w", err)
	}
	ne := binary.NativeEndian
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWNEIGH || len(m.Data) < unix.SizeofNdMsg {
			continue
		}
		ifindex := int(int32(ne.Uint32(m.Data[4:])))
		state := ne.Uint16(m.Data[8:])
		if ifindex != oif || state&usableNeighbor == 0 {
			continue
		}
		var dst netip.Addr
		var lladdr []byte
		for b := m.Data[unix.SizeofNdMsg:]; len(b) >= unix.SizeofRtAttr; {
			l := int(ne.Uint16(b))
			if l < unix.SizeofRtAttr || l > len(b) {
				break
			}
			switch ne.Uint16(b[2:]) {
			case unix.NDA_DST:
				dst, _ = netip.AddrFromSlice(b[unix.SizeofRtAttr:l])
			case unix.NDA_LLADDR:
				lladdr = b[unix.SizeofRtAttr:l]
			}
			b = b[min(len(b), (l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1)):]
		}
		if dst.Unmap() == ip && len(lladdr) == 6 {
			return [6]byte(lladdr), true, nil
		}
	}
	return mac, false, nil
}

// prompt makes the kernel resolve ip's link-layer address by sending it
// one UDP datagram to the discard port (RFC 863); errors do not matter,
// only the ARP or neighbor solicitation it causes.
func prompt(ip netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 9)))
	if err != nil {
		return
	}
	_, _ = c.Write([]byte{0})
	c.Close()
}
