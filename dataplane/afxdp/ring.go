//go:build linux

package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ringHead is the shared part of an AF_XDP ring: a single-producer,
// single-consumer queue of 2^k entries in memory mapped from the socket,
// whose free-running u32 producer and consumer indices are shared with the
// kernel. Like libxdp's xsk_ring_prod/xsk_ring_cons, each side keeps a
// cached copy of the other side's index and reads the shared one (an
// atomic load, a cache miss on another core) only when the cache says the
// ring is full or empty; and it publishes its own index once per batch, not
// per entry. Go's atomics are sequentially consistent, which covers the
// release/acquire pairs the kernel's ring protocol needs (xsk_queue.h).
type ringHead struct {
	mem        []byte // the mapping, for munmap
	producer   *uint32
	consumer   *uint32
	flags      *uint32 // XDP_RING_NEED_WAKEUP
	mask       uint32
	cachedProd uint32
	cachedCons uint32
}

func newRingHead(mem []byte, off unix.XDPRingOffset, size uint32) ringHead {
	return ringHead{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:     size - 1,
	}
}

// free returns how many entries a producer can write without overrunning
// the consumer, reloading the consumer index only if fewer than want are
// known to be free.
func (r *ringHead) free(want uint32) uint32 {
	size := r.mask + 1
	n := size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return size - (r.cachedProd - r.cachedCons)
}

// publish makes the entries written so far visible to the kernel.
func (r *ringHead) publish() { atomic.StoreUint32(r.producer, r.cachedProd) }

// available returns how many entries a consumer can read, reloading the
// producer index only when the cached one says none.
func (r *ringHead) available() uint32 {
	if n := r.cachedProd - r.cachedCons; n > 0 {
		return n
	}
	r.cachedProd = atomic.LoadUint32(r.producer)
	return r.cachedProd - r.cachedCons
}

// release hands the entries read so far back to the kernel.
func (r *ringHead) release() { atomic.StoreUint32(r.consumer, r.cachedCons) }

// needWakeup reports whether the kernel asked for a system call to make
// progress on this ring (XDP_USE_NEED_WAKEUP).
func (r *ringHead) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// addrRing is a fill or completion ring: entries are UMEM addresses.
type addrRing struct {
	ringHead
	addrs []uint64
}

// descRing is an RX or TX ring: entries are descriptors.
type descRing struct {
	ringHead
	descs []unix.XDPDesc
}

// mapRing maps one of the socket's four rings.
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, entrySize uintptr) ([]byte, error) {
	return unix.Mmap(fd, pgoff, int(off.Desc)+int(size)*int(entrySize),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
}

func newAddrRing(mem []byte, off unix.XDPRingOffset, size uint32) addrRing {
	return addrRing{
		ringHead: newRingHead(mem, off, size),
		addrs:    unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off.Desc])), size),
	}
}

func newDescRing(mem []byte, off unix.XDPRingOffset, size uint32) descRing {
	return descRing{
		ringHead: newRingHead(mem, off, size),
		descs:    unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&mem[off.Desc])), size),
	}
}
