//go:build linux

// Package doorbell is the blocking half of a kernel-backed port: the
// dataplane.Waiter that the AF_XDP port (package afxdp) and the kernel UDP
// port (package udpport) share. Wait is one ppoll(2) over the port's
// sockets and an eventfd; Wake writes the eventfd.
//
// A system call costs more than a microsecond on the target machines, and
// the engine rings its doorbell every time work is posted, usually while
// its poll loop is wide awake. So Wake writes the eventfd only when a Wait
// is in progress or about to start: two flags (sleeping, set by Wait around
// the ppoll; rung, set by Wake) make the common case a pair of atomic
// operations. The ordering argument is the classic one: Wait publishes
// sleeping before it checks rung, Wake publishes rung before it checks
// sleeping, so at least one of them sees the other and no wake-up is lost.
//
// It lives under afxdp only because afxdp was its first user; it depends on
// nothing but x/sys/unix.
package doorbell

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Doorbell is a dataplane.Waiter over a fixed set of file descriptors,
// plus a changing set of other processes' doorbells (Watch).
//
// Watched doorbells are the verbs clients' eventfds. They sit in an epoll
// set whose own fd is one of the fds ppoll waits on, so a client that
// rings wakes the poll loop directly: one hop, no goroutine relaying the
// ring (that relay cost a runtime netpoller wake-up, a read and a write
// per ring). They are registered edge-triggered and never read: every
// write to an eventfd raises a new edge, and the one epoll_wait after a
// wake-up consumes them all, whatever the number of clients.
type Doorbell struct {
	efd      int
	epfd     int // epoll set of watched doorbells
	events   [16]unix.EpollEvent
	fds      []unix.PollFd // the port's fds, the epoll set, then the eventfd last
	sleeping atomic.Bool   // a Wait is in (or entering) ppoll
	rung     atomic.Bool   // Wake was called since the last Wait began
	closed   atomic.Bool
	drain    uint64 // eventfd read target
	one      uint64 // eventfd write source: always 1
}

// New returns a Doorbell that wakes on POLLIN of any of fds.
func New(fds ...int) (*Doorbell, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("doorbell: eventfd: %w", err)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("doorbell: epoll_create1: %w", err)
	}
	d := &Doorbell{efd: efd, epfd: epfd, one: 1}
	for _, fd := range fds {
		d.fds = append(d.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	d.fds = append(d.fds, unix.PollFd{Fd: int32(epfd), Events: unix.POLLIN})
	d.fds = append(d.fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	return d, nil
}

// Watch adds fd (an eventfd another process writes) to what Wait wakes
// on. Safe from any goroutine. The fd stays the caller's: Unwatch it
// before closing it.
func (d *Doorbell) Watch(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("doorbell: watch fd %d: %w", fd, err)
	}
	return nil
}

// Unwatch removes fd from what Wait wakes on.
func (d *Doorbell) Unwatch(fd int) error {
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("doorbell: unwatch fd %d: %w", fd, err)
	}
	return nil
}

// Wait blocks until one of the fds is readable, Wake is called, or timeout
// passes (at nanosecond resolution: the engine's timers are finer than
// poll(2)'s milliseconds). It never allocates.
func (d *Doorbell) Wait(timeout time.Duration) { d.WaitOut(timeout, false) }

// WaitOut is Wait that also returns when a watched fd becomes writable, if
// out is set: a port with frames stuck in its transmit queue waits for
// room, and for AF_XDP in copy mode the poll itself drives transmission.
func (d *Doorbell) WaitOut(timeout time.Duration, out bool) {
	d.sleeping.Store(true)
	if d.rung.Swap(false) || d.closed.Load() {
		d.sleeping.Store(false)
		return
	}
	events := int16(unix.POLLIN)
	if out {
		events |= unix.POLLOUT
	}
	for i := range len(d.fds) - 2 {
		d.fds[i].Events = events
	}
	ts := unix.NsecToTimespec(int64(max(timeout, 0)))
	// A raw ppoll keeps the slice and timespec on the stack: the wrapper
	// in x/sys would be fine too, but this is the loop's hot idle path
	// and AllocsPerRun covers it.
	_, _, _ = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&d.fds[0])), uintptr(len(d.fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	d.sleeping.Store(false)
	d.rung.Store(false)
	if d.fds[len(d.fds)-1].Revents&unix.POLLIN != 0 {
		// Reset the counter so the next Wait blocks again. EAGAIN (a
		// racing read) is harmless.
		_, _, _ = unix.Syscall(unix.SYS_READ, uintptr(d.efd), uintptr(unsafe.Pointer(&d.drain)), 8)
	}
	if d.fds[len(d.fds)-2].Revents&unix.POLLIN != 0 {
		d.consumeWatched()
	}
}

// consumeWatched takes the edges of the watched doorbells that rang, so
// that the epoll set reads as idle again. The events say nothing the poll
// loop needs: it looks at every client's doorbell bits anyway.
func (d *Doorbell) consumeWatched() {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(d.epfd), uintptr(unsafe.Pointer(&d.events[0])),
			uintptr(len(d.events)), 0, 0, 0)
		if errno != 0 || int(n) < len(d.events) {
			return
		}
	}
}

// Wake makes a current or the next Wait return at once. It is safe from
// any goroutine and costs a system call only when the waiter sleeps.
func (d *Doorbell) Wake() {
	if d.rung.Swap(true) {
		return // already rung; the waiter has not consumed it yet
	}
	if d.sleeping.Load() {
		_, _, _ = unix.Syscall(unix.SYS_WRITE, uintptr(d.efd), uintptr(unsafe.Pointer(&d.one)), 8)
	}
}

// Close releases the eventfd; later Waits return at once. It must not run
// concurrently with Wait (stop the poll loop first). The watched fds belong
// to the caller and stay open.
func (d *Doorbell) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return errors.Join(unix.Close(d.epfd), unix.Close(d.efd))
}
