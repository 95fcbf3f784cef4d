//go:build unix

package qp

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapping is an anonymous private mapping (zero-filled, as make is) that
// holds a ring's entries outside the Go heap.
type mapping struct {
	once sync.Once
	mem  []byte
	err  error       // what munmap said (tests: the pages were returned)
	done atomic.Bool // unmapped (tests; set after err)
}

func mapAnon(n uintptr) *mapping {
	mem, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil // the heap then, as if the ring were small
	}
	return &mapping{mem: mem}
}

func (m *mapping) base() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(m.mem)) }

// unmap returns the pages; once only, for Release and the cleanup of a
// ring dropped without it may both come.
func (m *mapping) unmap() {
	m.once.Do(func() {
		m.err = unix.Munmap(m.mem)
		m.mem = nil
		m.done.Store(true)
	})
}
