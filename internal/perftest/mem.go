package perftest

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MmapBuf returns n bytes of anonymous memory outside the Go heap, for the
// embedded mode's memory regions. It stands in for what the daemon gives
// a process (shared memory) and for what a real NIC writes: memory that
// the NIC changes behind the program's back, which a latency test polls
// with plain loads (perftest spins on the last byte of its buffer). Memory
// on the Go heap would make every such poll a data race in the eyes of the
// race detector; mmapped memory is outside what it tracks, exactly like
// DMA into pinned pages. The memory is page aligned.
func MmapBuf(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("perftest: buffer of %d bytes", n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("perftest: mmap %d bytes: %w", n, err)
	}
	return b, nil
}

// MunmapBuf releases a buffer from MmapBuf.
func MunmapBuf(b []byte) error { return unix.Munmap(b) }

// loadByte reads buf[i] with an atomic load of the aligned 32-bit word
// that holds it, so that the compiler cannot keep the value in a register
// across a spin loop and the load sees the NIC's store. buf must start on
// a 4-byte boundary and its length must be a multiple of 4.
func loadByte(buf []byte, i int) byte {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&buf[i&^3])))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return b[i&3]
}

// aligned reports whether buf meets loadByte's and the atomics' needs.
func aligned(buf []byte) bool {
	return len(buf)%8 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%8 == 0
}
