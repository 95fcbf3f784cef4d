//go:build linux

package bpf

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testXSK is the smallest AF_XDP receiver that proves frames arrive: one
// UMEM, a fill ring handed to the kernel once, an RX ring, copy mode. The
// dataplane's real port lives elsewhere; this only serves the end-to-end
// steering test.
type testXSK struct {
	fd       int
	umem     []byte
	fill, rx []byte
	off      unix.XDPMmapOffsets
}

const (
	xskFrames = 16 // ring sizes must be powers of two
	xskChunk  = 4096
)

func sockopt(fd, name int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// ring returns the u32 producer or consumer index at off in a ring mapping.
func ring(m []byte, off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }

// openXSK binds an AF_XDP socket to (ifindex, queue) in copy mode, in the
// calling thread's network namespace.
func openXSK(ifindex, queue int) (x *testXSK, err error) {
	x = &testXSK{fd: -1}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	if x.umem, err = unix.Mmap(-1, 0, xskFrames*xskChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return x, fmt.Errorf("mmap umem: %w", err)
	}
	if x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return x, fmt.Errorf("socket: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), Len: uint64(len(x.umem)), Size: xskChunk}
	if err := sockopt(x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return x, fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	// bind insists on a completion ring for the UMEM's owner even when
	// nothing is transmitted.
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING} {
		if err := unix.SetsockoptInt(x.fd, unix.SOL_XDP, opt, xskFrames); err != nil {
			return x, fmt.Errorf("ring option %d: %w", opt, err)
		}
	}
	size := uint32(unsafe.Sizeof(x.off))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&x.off)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
		return x, fmt.Errorf("XDP_MMAP_OFFSETS: %w", errno)
	}
	mapRing := func(pgoff int64, o unix.XDPRingOffset, descSize uint64) ([]byte, error) {
		return unix.Mmap(x.fd, pgoff, int(o.Desc+xskFrames*descSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if x.fill, err = mapRing(unix.XDP_UMEM_PGOFF_FILL_RING, x.off.Fr, 8); err != nil {
		return x, fmt.Errorf("mmap fill ring: %w", err)
	}
	if x.rx, err = mapRing(unix.XDP_PGOFF_RX_RING, x.off.Rx, uint64(unsafe.Sizeof(unix.XDPDesc{}))); err != nil {
		return x, fmt.Errorf("mmap rx ring: %w", err)
	}
	// Hand every chunk to the kernel for receiving.
	for i := range uint64(xskFrames) {
		*(*uint64)(unsafe.Pointer(&x.fill[x.off.Fr.Desc+i*8])) = i * xskChunk
	}
	atomic.StoreUint32(ring(x.fill, x.off.Fr.Producer), xskFrames)
	if err := unix.Bind(x.fd, &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		return x, fmt.Errorf("bind: %w", err)
	}
	return x, nil
}

var errNoFrame = errors.New("no frame arrived")

// receive returns the next received frame, waiting up to timeout. At most
// xskFrames frames can be received: chunks are not recycled.
func (x *testXSK) receive(timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		cons := atomic.LoadUint32(ring(x.rx, x.off.Rx.Consumer))
		if atomic.LoadUint32(ring(x.rx, x.off.Rx.Producer)) != cons {
			desc := (*unix.XDPDesc)(unsafe.Pointer(&x.rx[x.off.Rx.Desc+uint64(cons%xskFrames)*uint64(unsafe.Sizeof(unix.XDPDesc{}))]))
			frame := slices.Clone(x.umem[desc.Addr : desc.Addr+uint64(desc.Len)])
			atomic.StoreUint32(ring(x.rx, x.off.Rx.Consumer), cons+1)
			return frame, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errNoFrame
		}
		fds := []unix.PollFd{{Fd: int32(x.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && !errors.Is(err, syscall.EINTR) {
			return nil, err
		}
	}
}

func (x *testXSK) Close() {
	for _, m := range [][]byte{x.rx, x.fill, x.umem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	if x.fd >= 0 {
		unix.Close(x.fd)
	}
}
