package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"syscall"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// nextHopTimeout bounds the wait for the kernel to resolve a gateway.
const nextHopTimeout = 3 * time.Second

// openDaemon opens the softnic device of the daemon listening on socket.
// Memory regions come from shared memory the daemon maps (AllocBuf), and
// the device's GID and MAC are what the peer's QPs address.
func openDaemon(socket string) (perftest.Device, func() error, error) {
	c, err := verbs.Dial(socket)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			// Perhaps the wrong socket, or no daemon wanted.
			return perftest.Device{}, nil, fmt.Errorf("%w; --socket names the daemon's control socket, --embedded needs no daemon", err)
		}
		return perftest.Device{}, nil, err
	}
	return deviceOf(c)
}

// deviceOf is the perftest device of an open softnic context (a daemon's
// or direct mode's): its GID and MAC are what the peer's QPs address,
// and the next hop comes from the kernel's routes and neighbours, which
// do not resolve it for softnic (it sends from user space) as they would
// for a hardware RoCE NIC. It closes c if it fails.
func deviceOf(c *verbs.Context) (perftest.Device, func() error, error) {
	attr, err := c.QueryDevice()
	if err != nil {
		c.Close()
		return perftest.Device{}, nil, fmt.Errorf("query the softnic device: %w", err)
	}
	dev := perftest.Device{Ctx: c, GID: attr.GID, MAC: attr.MAC, Scheme: attr.Scheme, Schemes: attr.Schemes,
		AllocBuf: c.AllocBuf, FreeBuf: c.FreeBuf,
		NextHop: func(gid netip.Addr, peerMAC [6]byte) ([6]byte, error) {
			return cm.NextHopMAC(gid, peerMAC, nextHopTimeout)
		}}
	return dev, c.Close, nil
}
