package main

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// neighbours is softnic switch's view of the kernel's neighbour table
// (ARP and IPv6 neighbour discovery), for the next hops of its routes.
//
// The poll loop looks a next hop up once per forwarded frame in a map
// published through an atomic pointer (no lock, no allocation). A miss is
// handed, without blocking, to a goroutine that makes the kernel resolve
// the address (a UDP datagram to its discard port from an ordinary socket:
// the kernel sends the ARP request or neighbour solicitation) and reads
// the table again by netlink (RTM_GETNEIGH) until the entry appears. The
// table is also reread every refreshEvery, so that a host that changed
// its MAC is followed. An address the kernel forgets (its entry is
// garbage-collected while only the switch's XDP path carries the host's
// traffic) keeps its last MAC here: the kernel's table only ever updates
// it.
type neighbours struct {
	table   atomic.Pointer[map[neighKey][6]byte]
	misses  chan neighKey
	ifindex []int // port -> ifindex
	log     *slog.Logger
	asked   map[neighKey]time.Time // the resolver's: when it last asked the kernel
}

type neighKey struct {
	port int
	addr netip.Addr
}

const (
	refreshEvery = time.Second
	// resolveAgain is how soon a miss makes the kernel resolve the same
	// address again.
	resolveAgain = 200 * time.Millisecond
	discardPort  = 9 // RFC 863: nothing answers it with anything that matters
)

func newNeighbours(ifindex []int, log *slog.Logger) *neighbours {
	n := &neighbours{misses: make(chan neighKey, 64), ifindex: ifindex, log: log, asked: map[neighKey]time.Time{}}
	empty := map[neighKey][6]byte{}
	n.table.Store(&empty)
	n.reload()
	return n
}

// lookup is the switch's NeighbourFunc: on the poll loop.
func (n *neighbours) lookup(port int, addr netip.Addr) ([6]byte, bool) {
	k := neighKey{port, addr}
	mac, ok := (*n.table.Load())[k]
	if !ok {
		select {
		case n.misses <- k:
		default: // the resolver is busy; the next miss asks again
		}
	}
	return mac, ok
}

// run resolves misses and rereads the table until ctx ends.
func (n *neighbours) run(ctx context.Context) {
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n.reload()
		case k := <-n.misses:
			if _, ok := (*n.table.Load())[k]; ok {
				continue
			}
			if t, ok := n.asked[k]; ok && time.Since(t) < resolveAgain {
				continue
			}
			n.asked[k] = time.Now()
			n.resolve(k.addr)
			// The kernel answers within a round trip; look a few times.
			for _, wait := range []time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond} {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				if n.reload(); n.has(k) {
					break
				}
			}
		}
	}
}

func (n *neighbours) has(k neighKey) bool {
	_, ok := (*n.table.Load())[k]
	return ok
}

// resolve makes the kernel resolve addr: it must send a datagram there.
func (n *neighbours) resolve(addr netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, discardPort)))
	if err != nil {
		n.log.Debug("neighbour resolution", "addr", addr, "err", err)
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte{0})
}

// reload reads the kernel's neighbour table and publishes it merged over
// the current one.
func (n *neighbours) reload() {
	entries, err := dumpNeighbours()
	if err != nil {
		n.log.Debug("neighbour table", "err", err)
		return
	}
	old := *n.table.Load()
	next := make(map[neighKey][6]byte, len(old)+len(entries))
	for k, v := range old {
		next[k] = v
	}
	changed := false
	for _, e := range entries {
		for port, idx := range n.ifindex {
			if idx != e.ifindex {
				continue
			}
			k := neighKey{port, e.addr}
			if cur, ok := next[k]; !ok || cur != e.mac {
				next[k] = e.mac
				changed = true
			}
		}
	}
	if changed {
		n.table.Store(&next)
	}
}

type neighEntry struct {
	ifindex int
	addr    netip.Addr
	mac     [6]byte
}

// ndmsg (uapi linux/neighbour.h): family, pad, pad, ifindex, state, flags, type.
const sizeofNdmsg = 12

// usable neighbour states: the entry has a link-layer address the kernel
// itself would send to.
const usableStates = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP

// dumpNeighbours reads every IPv4 and IPv6 neighbour entry with a MAC.
func dumpNeighbours() ([]neighEntry, error) {
	var out []neighEntry
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		rib, err := syscall.NetlinkRIB(unix.RTM_GETNEIGH, family)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(rib)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWNEIGH || len(m.Data) < sizeofNdmsg {
				continue
			}
			ifindex := int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))
			state := binary.NativeEndian.Uint16(m.Data[8:10])
			if state&usableStates == 0 {
				continue
			}
			e := neighEntry{ifindex: ifindex}
			var haveMAC bool
			walkAttrs(m.Data[sizeofNdmsg:], func(typ uint16, v []byte) {
				switch typ {
				case unix.NDA_DST:
					if a, ok := netip.AddrFromSlice(v); ok {
						e.addr = a.Unmap()
					}
				case unix.NDA_LLADDR:
					if len(v) == 6 {
						e.mac, haveMAC = [6]byte(v), true
					}
				}
			})
			if haveMAC && e.addr.IsValid() {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// walkAttrs walks netlink attributes (4-byte aligned).
func walkAttrs(b []byte, fn func(typ uint16, value []byte)) {
	for len(b) >= unix.SizeofNlAttr {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < unix.SizeofNlAttr || n > len(b) {
			return
		}
		fn(typ, b[unix.SizeofNlAttr:n])
		aligned := (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if aligned >= len(b) {
			return
		}
		b = b[aligned:]
	}
}
