package verbs

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/verbs/internal/shm"
)

// ErrShareOverlap is ShareMemory on a range that overlaps, without being
// inside, memory already shared: its pages are backed by another file.
var ErrShareOverlap = errors.New("verbs: ShareMemory: the range partly overlaps memory already shared")

// ShareMemory makes n bytes of ordinary memory of this process at p
// (memory that did not come from AllocBuf, such as a C program's malloc
// buffer) reachable by the NIC, and returns them as a slice that RegMR
// accepts. On a daemon context it rounds the range out to whole pages,
// copies their contents into a new sealed memfd and maps the memfd over
// the same addresses (MAP_FIXED|MAP_SHARED): the process's pointers stay
// valid, and from then on the daemon maps the same pages at RegMR, with
// no copy per operation. This is how the drop-in libibverbs (ibverbs/,
// docs/ibverbs.md) serves ibv_reg_mr.
//
// The costs: one copy of the pages at the first registration, and the
// pages stay memfd-backed (shared, not copy-on-write after fork) for the
// life of the process, also after the region is deregistered and the
// memory freed by its owner. Other data in the same pages moves with
// them; a thread writing the pages while ShareMemory copies them may lose
// its write. A range inside memory already shared (from AllocBuf or an
// earlier ShareMemory) is returned as it is; one that partly overlaps it
// fails with ErrShareOverlap. On an embedded context the memory is used
// as it is.
func (c *Context) ShareMemory(p unsafe.Pointer, n int) ([]byte, error) {
	if n <= 0 || p == nil {
		return nil, errors.New("verbs: ShareMemory: empty range")
	}
	buf := unsafe.Slice((*byte)(p), n)
	if c.remote == nil {
		return buf, nil
	}
	return c.remote.shareMemory(p, n, buf)
}

func (r *remote) shareMemory(p unsafe.Pointer, n int, buf []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, _ := r.findBuf(buf); sb != nil {
		return buf, nil
	}
	addr := uintptr(p)
	page := uintptr(unix.Getpagesize())
	start := addr &^ (page - 1)
	end := (addr + uintptr(n) + page - 1) &^ (page - 1)
	for _, sb := range r.bufs {
		base := uintptr(unsafe.Pointer(&sb.mem[0]))
		if start < base+uintptr(len(sb.mem)) && base < end {
			return nil, ErrShareOverlap
		}
	}
	size := int(end - start)
	fd, mem, err := shm.Create("softnic-mr", size, shm.SealAll)
	if err != nil {
		return nil, fmt.Errorf("verbs: ShareMemory: %w", err)
	}
	orig := unsafe.Slice((*byte)(unsafe.Add(p, -int(addr-start))), size)
	copy(mem, orig)
	unix.Munmap(mem)
	// Map the memfd over the original pages, keeping their protection
	// as read-write (registered memory is written by the NIC).
	got, _, errno := unix.Syscall6(unix.SYS_MMAP, start, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_FIXED, uintptr(fd), 0)
	if errno != 0 || got != start {
		unix.Close(fd)
		return nil, fmt.Errorf("verbs: ShareMemory: mmap over %#x: %v", start, errno)
	}
	r.bufs[&orig[0]] = &sharedBuf{fd: fd, mem: orig, fixed: true}
	return buf, nil
}
