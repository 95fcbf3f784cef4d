//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xsk is one AF_XDP socket bound to one receive queue, with a UMEM of its
// own. The UMEM's chunks are split once, at Open: the first half only ever
// circulates between the fill ring, the RX ring and the engine (rxSpare
// holds those the fill ring has no room for); the second half between the
// TX free list, the TX ring and the completion ring. Keeping the two pools
// apart means a burst of transmission can never starve reception of
// buffers, or the reverse.
type xsk struct {
	fd        int
	queue     int
	umem      []byte
	chunkMask uint64 // ^(FrameSize-1): chunk start of an RX address

	fill addrRing
	comp addrRing
	rx   descRing
	tx   descRing

	rxSpare []uint64 // RX chunks waiting for room in the fill ring
	held    []uint64 // RX chunks of the frames the engine holds
	txFree  []uint64 // TX chunks ready for TxBuffer
	txBatch uint32   // descriptors written to tx since the last Flush
	// frames written to tx since the last Flush (txBatch counts
	// descriptors: a multi-buffer frame takes several)
	txFrameBatch uint32

	zeroCopy   bool // bound with XDP_ZEROCOPY
	needWakeup bool // bound with XDP_USE_NEED_WAKEUP
	sg         bool // bound with XDP_USE_SG (multi-buffer)

	// Multi-buffer state (multibuf.go). TX chunks go out in groups of
	// txGroup bytes (one chunk unless frames span several) from
	// txBase; asm are the reassembly buffers, asmUsed of them hold
	// frames of the current batch; rxSkip: the rest of a chain being
	// dropped is still to come.
	txBase, txGroup uint64
	asm             [][]byte
	asmUsed         int
	rxSkip          bool
	// Counted during one receive, then added to the atomics below.
	rxMBFrames, rxChainDrops uint64
	mbFrames, chainDrops     atomic.Uint64

	// Frames through this socket, added once per batch by the poll
	// loop (the port's totals are their sums) and read by
	// Port.QueueStats from other goroutines, hence atomics.
	rxFrames, txFrames atomic.Uint64
}

// sockopt is setsockopt(SOL_XDP) with a pointer argument.
func sockopt(fd, name int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// getsockopt is getsockopt(SOL_XDP) into the struct at p; it returns the
// length the kernel wrote.
func getsockopt(fd, name int, p unsafe.Pointer, size uintptr) (uintptr, error) {
	n := uint32(size)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(p), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return 0, errno
	}
	return uintptr(n), nil
}

// bindModes are tried in order: zero-copy where the driver has it, copy
// mode otherwise (veth); with need-wakeup where the kernel has it (5.3+),
// so that an idle ring costs no system calls.
var bindModes = []struct {
	flags      uint16
	zeroCopy   bool
	needWakeup bool
}{
	{unix.XDP_ZEROCOPY | unix.XDP_USE_NEED_WAKEUP, true, true},
	{unix.XDP_COPY | unix.XDP_USE_NEED_WAKEUP, false, true},
	{unix.XDP_COPY, false, false},
}

// openXSK creates a socket with its UMEM and rings and binds it to
// (ifindex, queue) in the calling thread's network namespace.
func openXSK(ifindex, queue int, cfg *Config, maxFrame int, sg bool) (x *xsk, err error) {
	x = &xsk{fd: -1, queue: queue, chunkMask: ^uint64(cfg.FrameSize - 1), sg: sg}
	defer func() {
		if err != nil {
			x.close()
			x = nil
		}
	}()
	frames, chunk, ringSize := cfg.NumFrames, uint64(cfg.FrameSize), uint32(cfg.RingSize)
	x.umem, err = unix.Mmap(-1, 0, frames*cfg.FrameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return x, fmt.Errorf("mmap UMEM of %d bytes: %w", frames*cfg.FrameSize, err)
	}
	if x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return x, os.NewSyscallError("socket(AF_XDP)", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), Len: uint64(len(x.umem)), Size: uint32(chunk)}
	if err := sockopt(x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return x, os.NewSyscallError("setsockopt(XDP_UMEM_REG)", err)
	}
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(x.fd, unix.SOL_XDP, opt, int(ringSize)); err != nil {
			return x, os.NewSyscallError(fmt.Sprintf("setsockopt(SOL_XDP, %d, %d)", opt, ringSize), err)
		}
	}
	var off unix.XDPMmapOffsets
	if _, err := getsockopt(x.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return x, os.NewSyscallError("getsockopt(XDP_MMAP_OFFSETS)", err)
	}
	descSize := unsafe.Sizeof(unix.XDPDesc{})
	for _, r := range []struct {
		name  string
		pgoff int64
		off   unix.XDPRingOffset
		esize uintptr
		set   func([]byte)
	}{
		{"fill", unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, 8, func(m []byte) { x.fill = newAddrRing(m, off.Fr, ringSize) }},
		{"completion", unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, 8, func(m []byte) { x.comp = newAddrRing(m, off.Cr, ringSize) }},
		{"rx", unix.XDP_PGOFF_RX_RING, off.Rx, descSize, func(m []byte) { x.rx = newDescRing(m, off.Rx, ringSize) }},
		{"tx", unix.XDP_PGOFF_TX_RING, off.Tx, descSize, func(m []byte) { x.tx = newDescRing(m, off.Tx, ringSize) }},
	} {
		m, err := mapRing(x.fd, r.pgoff, r.off, ringSize, r.esize)
		if err != nil {
			return x, fmt.Errorf("mmap %s ring: %w", r.name, err)
		}
		r.set(m)
	}

	rxFrames := frames / 2
	x.rxSpare = make([]uint64, 0, rxFrames)
	x.held = make([]uint64, 0, rxFrames)
	x.txFree = make([]uint64, 0, frames-rxFrames)
	for i := range rxFrames {
		x.rxSpare = append(x.rxSpare, uint64(i)*chunk)
	}
	// TX chunks in groups of as many adjacent chunks as a frame of
	// maxFrame bytes covers (1 without multi-buffer).
	group := (maxFrame + cfg.FrameSize - 1) / cfg.FrameSize
	x.txBase, x.txGroup = uint64(rxFrames)*chunk, uint64(group)*chunk
	for i := rxFrames; i+group <= frames; i += group {
		x.txFree = append(x.txFree, uint64(i)*chunk)
	}
	x.refill()

	if err := x.bind(ifindex, queue); err != nil {
		return x, err
	}
	if !x.zeroCopy {
		// In copy mode one sendto transmits at most max_tx_budget
		// descriptors (32 by default, then EAGAIN); raise it to the
		// ring size so that one sendto sends a whole batch. The option
		// is new (Linux 6.17); without it Flush loops on EAGAIN.
		budget := uint32(ringSize)
		_ = sockopt(x.fd, unix.XDP_MAX_TX_SKB_BUDGET, unsafe.Pointer(&budget), unsafe.Sizeof(budget))
	}
	return x, nil
}

// bindBusyWait is how long bind retries a queue that is busy. Closing a
// socket frees its queue asynchronously (the kernel releases the buffer
// pool from a workqueue, xp_put_pool), so a port closed and opened again
// at once, as the daemon and the tests do, briefly finds its own old
// socket still registered on the queue.
const bindBusyWait = time.Second

// bind binds the socket in the first mode of bindModes that the device
// takes, retrying while the queue is busy for at most bindBusyWait.
func (x *xsk) bind(ifindex, queue int) error {
	deadline := time.Now().Add(bindBusyWait)
	for {
		var errs []error
		for _, m := range bindModes {
			flags := m.flags
			if x.sg {
				flags |= unix.XDP_USE_SG
			}
			sa := unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
			err := unix.Bind(x.fd, &sa)
			if err == nil {
				x.zeroCopy, x.needWakeup = m.zeroCopy, m.needWakeup
				return nil
			}
			errs = append(errs, fmt.Errorf("flags %#x: %w", flags, err))
			if errors.Is(err, unix.EBUSY) {
				break // the queue has a socket: no other mode helps
			}
		}
		err := fmt.Errorf("bind AF_XDP socket to ifindex %d queue %d: %w", ifindex, queue, lineJoin(errs))
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lineJoin is errors.Join on one line: the errors of the bind modes
// tried, separated by "; " rather than newlines, so that the error a
// command prints is one line. errors.Is and errors.As see each of them.
type lineJoin []error

func (e lineJoin) Error() string {
	s := ""
	for i, err := range e {
		if i > 0 {
			s += "; "
		}
		s += err.Error()
	}
	return s
}

func (e lineJoin) Unwrap() []error { return e }

// refill moves RX chunks from rxSpare into the fill ring, as many as fit,
// and publishes them with one index store. It returns how many it moved.
func (x *xsk) refill() int {
	n := min(uint32(len(x.rxSpare)), x.fill.free(uint32(len(x.rxSpare))))
	if n == 0 {
		return 0
	}
	spare := x.rxSpare[uint32(len(x.rxSpare))-n:]
	for i, addr := range spare {
		x.fill.addrs[(x.fill.cachedProd+uint32(i))&x.fill.mask] = addr
	}
	x.fill.cachedProd += n
	x.fill.publish()
	x.rxSpare = x.rxSpare[:uint32(len(x.rxSpare))-n]
	return int(n)
}

// receive appends up to len(frames) received frames, remembering their
// chunks in held, and releases their RX descriptors in one store. A frame
// in several descriptors (XDP_PKT_CONTD) is reassembled into one of
// maxFrame bytes (multibuf.go).
func (x *xsk) receive(frames [][]byte, rxCap, maxFrame int) int {
	avail := x.rx.available()
	n, i := 0, uint32(0)
	for i < avail && n < len(frames) {
		if x.rxSkip {
			i += x.skipChain(i, avail)
			continue
		}
		d := &x.rx.descs[(x.rx.cachedCons+i)&x.rx.mask]
		if d.Options&unix.XDP_PKT_CONTD != 0 {
			used, f := x.receiveChain(i, avail, rxCap, maxFrame)
			if used == 0 {
				// Its end is not among the entries the cached
				// producer index shows: look again once.
				if fresh := atomic.LoadUint32(x.rx.producer); fresh != x.rx.cachedProd {
					x.rx.cachedProd = fresh
					avail = fresh - x.rx.cachedCons
					continue
				}
				break // not in the ring yet: the next receive
			}
			i += used
			if f != nil {
				frames[n] = f
				n++
			}
			continue
		}
		// The kernel validated addr and len against the UMEM; cap
		// anyway, so that a frame can never reach into the next chunk.
		ln := min(uint64(d.Len), uint64(rxCap))
		frames[n] = x.umem[d.Addr : d.Addr+ln : d.Addr+ln]
		x.held = append(x.held, d.Addr&x.chunkMask)
		n++
		i++
	}
	if i > 0 {
		x.rx.cachedCons += i
		x.rx.release()
	}
	if x.rxMBFrames > 0 {
		x.mbFrames.Add(x.rxMBFrames)
		x.rxMBFrames = 0
	}
	if x.rxChainDrops > 0 {
		x.chainDrops.Add(x.rxChainDrops)
		x.rxChainDrops = 0
	}
	return n
}

// recycle returns the chunks of the last batch, and any the fill ring had
// no room for before, to the fill ring, and takes back the reassembly
// buffers.
func (x *xsk) recycle() int {
	x.rxSpare = append(x.rxSpare, x.held...)
	x.held = x.held[:0]
	x.asmUsed = 0
	if len(x.rxSpare) == 0 {
		return 0
	}
	return x.refill()
}

// reap moves completed TX chunks from the completion ring to txFree.
func (x *xsk) reap() {
	n := x.comp.available()
	if n == 0 {
		return
	}
	for i := range n {
		// A frame of several chunks completes each; the free list
		// keeps its group's first.
		if addr := x.comp.addrs[(x.comp.cachedCons+i)&x.comp.mask]; x.txGroupStart(addr) {
			x.txFree = append(x.txFree, addr)
		}
	}
	x.comp.cachedCons += n
	x.comp.release()
}

// txPending reports whether descriptors sit in the TX ring that the
// kernel has not consumed yet.
func (x *xsk) txPending() bool {
	x.tx.cachedCons = atomic.LoadUint32(x.tx.consumer)
	return x.tx.cachedCons != x.tx.cachedProd
}

// kickTx asks the kernel to transmit (sendto with no data, MSG_DONTWAIT).
// EAGAIN means the per-call budget ran out or the device pushed back; the
// descriptors stay in the ring for the next kick.
func (x *xsk) kickTx() unix.Errno {
	_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// kickRx asks the kernel to refill its RX path from the fill ring.
func (x *xsk) kickRx() {
	_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// statistics reads the kernel's XDP_STATISTICS for the socket.
func (x *xsk) statistics() (unix.XDPStatistics, error) {
	var s unix.XDPStatistics
	_, err := getsockopt(x.fd, unix.XDP_STATISTICS, unsafe.Pointer(&s), unsafe.Sizeof(s))
	return s, err
}

// close releases the socket, the rings and the UMEM, in that order: the
// kernel keeps its own reference to the UMEM pages until the socket is
// gone, so unmapping last keeps user and kernel views alike valid until
// then. It is safe on a partly opened xsk.
func (x *xsk) close() error {
	var errs []error
	if x.fd >= 0 {
		errs = append(errs, unix.Close(x.fd))
		x.fd = -1
	}
	for _, m := range []*[]byte{&x.fill.mem, &x.comp.mem, &x.rx.mem, &x.tx.mem, &x.umem} {
		if *m != nil {
			errs = append(errs, unix.Munmap(*m))
			*m = nil
		}
	}
	return errors.Join(errs...)
}
