// Package shm is the shared-memory half of softnic's verbs across
// processes: memfd-backed mappings that a client and the daemon both map,
// the layout of the send, receive and completion rings inside them, and
// the single-producer single-consumer ring views each side uses.
//
// A ring is an array of fixed-size entries plus two free-running 32-bit
// indices, each written by exactly one side with sync/atomic and on its
// own cache line: the producer publishes its tail after writing the
// entries, the consumer publishes how far it has consumed. Neither side
// ever reads back its own index from shared memory (the other process
// could have scribbled on it); each keeps a private copy, and the daemon
// checks every index it reads from a client against the ring's capacity,
// so a corrupt or hostile client can break only its own queues.
//
// The file layout is in docs/verbs-ipc.md.
package shm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// PageSize is the granularity of mappings.
var PageSize = os.Getpagesize()

// RoundPage rounds n up to a whole number of pages.
func RoundPage(n int) int { return (n + PageSize - 1) &^ (PageSize - 1) }

// Seal sets. Rings and the device page are sealed against any change of
// size, so that neither side can make the other's mapping fault (SIGBUS)
// by truncating the file; client memory for MRs must at least be sealed
// against shrinking, which the daemon checks before it maps it.
const (
	SealSize = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	SealAll  = SealSize | unix.F_SEAL_SEAL
)

// Create makes a memfd of size bytes (rounded up to pages), maps it
// read-write and shared, and adds seals. The caller owns fd and mem.
func Create(name string, size int, seals int) (fd int, mem []byte, err error) {
	if size <= 0 {
		return -1, nil, errors.New("shm: size must be positive")
	}
	size = RoundPage(size)
	// MFD_NOEXEC_SEAL (Linux 6.3) keeps the kernel from warning about
	// executable memfds; older kernels refuse the flag, so fall back.
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	fail := func(step string, err error) (int, []byte, error) {
		if mem != nil {
			unix.Munmap(mem)
		}
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: %s: %w", step, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			return fail("add seals", err)
		}
	}
	return fd, mem, nil
}

// AddSeals adds seals to a memfd (F_SEAL_FUTURE_WRITE after the daemon
// mapped the device page, so that clients can only map it read-only).
func AddSeals(fd int, seals int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("shm: add seals: %w", err)
	}
	return nil
}

// Mapping is part of a file mapped into this process: Mem is the whole
// page-aligned mapping, Bytes the requested range inside it.
type Mapping struct {
	Mem   []byte
	Bytes []byte
}

// Unmap releases the mapping. Nothing may touch Bytes afterwards.
func (m *Mapping) Unmap() error {
	if m.Mem == nil {
		return nil
	}
	err := unix.Munmap(m.Mem)
	m.Mem, m.Bytes = nil, nil
	return err
}

// MapShared maps length bytes at offset off of fd, which must be a
// regular file (a memfd) at least off+length bytes long and sealed with
// requiredSeals. The daemon maps client memory only through here: the
// size check and the shrink seal together guarantee the mapping can never
// fault, whatever the client does to the file afterwards.
func MapShared(fd int, off, length int64, prot int, requiredSeals int) (Mapping, error) {
	if off < 0 || length <= 0 || off > 1<<62 || length > 1<<62 {
		return Mapping{}, fmt.Errorf("shm: bad range %d+%d", off, length)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Mapping{}, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Mapping{}, errors.New("shm: descriptor is not a memory file")
	}
	if st.Size < off+length {
		return Mapping{}, fmt.Errorf("shm: file has %d bytes, range needs %d", st.Size, off+length)
	}
	if requiredSeals != 0 {
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil {
			return Mapping{}, fmt.Errorf("shm: memory is not a sealable memfd: %w", err)
		}
		if seals&requiredSeals != requiredSeals {
			return Mapping{}, fmt.Errorf("shm: memfd seals %#x lack %#x (memory must come from AllocBuf)", seals, requiredSeals)
		}
	}
	start := off &^ int64(PageSize-1)
	end := (off + length + int64(PageSize) - 1) &^ int64(PageSize-1)
	if int64(int(end-start)) != end-start {
		return Mapping{}, errors.New("shm: range too large")
	}
	mem, err := unix.Mmap(fd, start, int(end-start), prot, unix.MAP_SHARED)
	if err != nil {
		return Mapping{}, fmt.Errorf("shm: mmap: %w", err)
	}
	lo := off - start
	return Mapping{Mem: mem, Bytes: mem[lo : lo+length : lo+length]}, nil
}
