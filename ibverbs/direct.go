//go:build ibverbs

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/softnic/softnic/verbs"
)

// Direct mode (docs/direct.md): with SOFTNIC_DIRECT=IFACE (or
// IFACE:QUEUE) in the environment, the library runs the NIC inside the
// program, on its own AF_XDP socket on the interface's queue (default 0),
// instead of using the daemon at SOFTNIC_SOCKET. The program's verbs then
// drive the engine themselves, and a progress goroutine runs the poll
// loop beside them (verbs.ProgressAlways): perftest's ib_write_lat waits
// for the peer's RDMA WRITE by watching its buffer, without calling the
// library, and the data must land meanwhile.
//
// One device per process: ibv_get_device_list opens it (the device's GID
// and MAC come from the running engine), and every ibv_open_device uses
// the same engine; the last ibv_close_device closes it, giving back the
// queue, the socket and the XDP program.
var direct struct {
	mu   sync.Mutex
	c    *verbs.Context
	refs int // open contexts
}

// directEnv is SOFTNIC_DIRECT: the interface and queue ("" if unset).
func directEnv() (iface string, queue int, err error) {
	v := os.Getenv("SOFTNIC_DIRECT")
	if v == "" {
		return "", 0, nil
	}
	iface, q, ok := strings.Cut(v, ":")
	if ok {
		if queue, err = strconv.Atoi(q); err != nil || queue < 0 {
			return "", 0, fmt.Errorf("SOFTNIC_DIRECT=%s: want IFACE or IFACE:QUEUE", v)
		}
	}
	return iface, queue, nil
}

// directContext returns the process's direct-mode context, opening it if
// needed; ref counts an ibv_open_device. A failure is printed on stderr
// whatever SOFTNIC_DEBUG says: ibverbs programs only see "no device".
func directContext(iface string, queue int, ref bool) (*verbs.Context, error) {
	direct.mu.Lock()
	defer direct.mu.Unlock()
	if direct.c == nil {
		c, err := verbs.OpenDirect(iface, verbs.DirectOptions{Queue: queue, Progress: verbs.ProgressAlways})
		if err != nil {
			fmt.Fprintf(os.Stderr, "softnic libibverbs: SOFTNIC_DIRECT=%s: %v\n", os.Getenv("SOFTNIC_DIRECT"), err)
			return nil, err
		}
		direct.c = c
	}
	if ref {
		direct.refs++
	}
	return direct.c, nil
}

// releaseDirect is ibv_close_device of a direct-mode context.
func releaseDirect() error {
	direct.mu.Lock()
	defer direct.mu.Unlock()
	if direct.refs--; direct.refs > 0 || direct.c == nil {
		return nil
	}
	err := direct.c.Close()
	direct.c = nil
	return err
}

// openDevice opens the device for ibv_get_device_list (ref false: the
// caller does not keep it) or ibv_open_device (ref true): direct mode
// with SOFTNIC_DIRECT, else the daemon at path. closeFn undoes it.
func openDevice(path string, ref bool) (c *verbs.Context, closeFn func() error, err error) {
	iface, queue, err := directEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "softnic libibverbs: %v\n", err)
		return nil, nil, err
	}
	if iface != "" {
		c, err := directContext(iface, queue, ref)
		if err != nil {
			return nil, nil, err
		}
		if !ref {
			return c, func() error { return nil }, nil
		}
		return c, releaseDirect, nil
	}
	c, err = verbs.Dial(path)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}
