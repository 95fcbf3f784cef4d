package main

import (
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/verbs"
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
	dev, closeDev, err := deviceOf(c)
	// The bench's goroutine drives the engine in its polls (the progress
	// goroutine takes over only after a millisecond without one).
	dev.PollDriven = true
	return dev, closeDev, err
}
