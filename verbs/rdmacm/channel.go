package rdmacm

import (
	"encoding/binary"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Channel is an rdma_event_channel: a queue of CM events with a file
// descriptor that is readable while events are queued (an eventfd in
// semaphore mode: one count per queued event), so that a program can
// poll(2) it, and whose O_NONBLOCK flag (set by the program with fcntl,
// as librdmacm documents) makes Get fail with EAGAIN instead of
// blocking.
type Channel struct {
	fd  int
	mu  sync.Mutex
	q   []*CMEvent
	ids int // ids on the channel
	// closed: Destroy ran; fd is closed.
	closed bool
}

// NewChannel is rdma_create_event_channel.
func NewChannel() (*Channel, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_SEMAPHORE)
	if err != nil {
		return nil, err
	}
	return &Channel{fd: fd}, nil
}

// FD is the channel's file descriptor (rdma_event_channel.fd).
func (c *Channel) FD() int { return c.fd }

// Destroy is rdma_destroy_event_channel; it fails with EBUSY while ids
// use the channel (librdmacm's rule: destroy the ids first).
func (c *Channel) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return syscall.EINVAL
	}
	if c.ids > 0 {
		return syscall.EBUSY
	}
	c.closed = true
	return unix.Close(c.fd)
}

// push queues ev and counts it on the fd.
func (c *Channel) push(ev *CMEvent) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.q = append(c.q, ev)
	c.mu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(c.fd, one[:])
}

// next takes one count from the fd (blocking unless the program made
// the fd non-blocking) and the event it stands for; events of destroyed
// ids are skipped.
func (c *Channel) next() (*CMEvent, error) {
	for {
		var b [8]byte
		_, err := unix.Read(c.fd, b[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if len(c.q) == 0 {
			c.mu.Unlock()
			continue
		}
		ev := c.q[0]
		c.q[0] = nil
		c.q = c.q[1:]
		c.mu.Unlock()
		if ev.ID.gone() {
			continue
		}
		if ev.Type == EventConnectRequest && ev.Listen != nil && ev.Listen.gone() {
			// The listener went before the program took the request:
			// refuse it, as the kernel does with a listener's
			// pending requests.
			ev.ID.mu.Lock()
			conn := ev.ID.conn
			ev.ID.mu.Unlock()
			if conn != nil {
				conn.Reject(RejConsumer, nil)
			}
			ev.ID.Destroy()
			continue
		}
		return ev, nil
	}
}

// Get is rdma_get_cm_event: the next event, processed as librdmacm does
// in the caller's thread (a REP moves the id's QP to RTR and RTS and
// answers with the RTU: the program sees ESTABLISHED; a REJ moves the
// QP to the error state). Every event must be Acked.
func (c *Channel) Get() (*CMEvent, error) {
	for {
		ev, err := c.next()
		if err != nil {
			return nil, err
		}
		if ev.ID.process(ev) {
			return ev, nil
		}
	}
}
