package main

import (
	"fmt"
	"net/netip"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// openDirect opens the softnic device in direct mode on iface's queue:
// the engine runs in this process (verbs.OpenDirect), driven by the
// goroutine that posts and polls, with no daemon hop. The UMEM chunk
// follows -m as softnic run --mtu does.
func openDirect(iface string, queue, mtu int) (perftest.Device, func() error, error) {
	chunkMTU := 1024
	if mtu > 1024 {
		chunkMTU = mtu
	}
	c, err := verbs.OpenDirect(iface, verbs.DirectOptions{Queue: queue, MTU: chunkMTU, Program: "softnic-bench"})
	if err != nil {
		return perftest.Device{}, nil, err
	}
	attr, err := c.QueryDevice()
	if err != nil {
		c.Close()
		return perftest.Device{}, nil, fmt.Errorf("query the softnic device: %w", err)
	}
	dev := perftest.Device{Ctx: c, GID: attr.GID, MAC: attr.MAC, Scheme: attr.Scheme, Schemes: attr.Schemes,
		AllocBuf: c.AllocBuf, FreeBuf: c.FreeBuf,
		// The kernel's routes and neighbours, as with a daemon.
		NextHop: func(gid netip.Addr, peerMAC [6]byte) ([6]byte, error) {
			return cm.NextHopMAC(gid, peerMAC, nextHopTimeout)
		}}
	return dev, c.Close, nil
}
