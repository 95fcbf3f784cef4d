package verbs

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// ErrDisconnected is GetEvent's answer when the daemon behind the context
// closed the connection (it exited, or dropped this client).
var ErrDisconnected = errors.New("verbs: the daemon closed the connection")

// CompChannel is a completion event channel (struct ibv_comp_channel):
// CQs created on it signal it when they have been armed with ReqNotify
// and a completion arrives. The pattern, as with ibverbs:
//
//	cq.ReqNotify(false)      // arm for one event
//	n, _ := cq.Poll(wcs)     // poll again: a completion that arrived
//	if n == 0 {              // before the arm does not fire the event
//		cq, _ = ch.GetEvent() // sleep until the event
//		cq.AckEvents(1)
//		cq.ReqNotify(false)  // re-arm, then poll until empty
//		...
//	}
//
// Arming costs no system call on either backend: on a daemon context the
// arm is a word in the CQ's shared memory that the daemon's pump reads
// after it publishes completions, and the pump writes the channel's
// eventfd only for a CQ that was armed.
type CompChannel struct {
	ctx *Context
	fd  int    // eventfd: readable while an event is pending
	hup int    // daemon: a duplicate of the connection, polled for the daemon's hangup; -1 embedded
	h   uint32 // daemon handle

	mu      sync.Mutex
	closed  bool // destroyed, or the context closed
	fdsShut bool // fd and hup are closed (when the last waiter left)
	waiters int  // goroutines inside GetEvent
	cqs     []*CQ
	next    int // where the next scan for a fired CQ starts (fairness)
}

// CreateCompChannel is ibv_create_comp_channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	ch := &CompChannel{ctx: c, fd: -1, hup: -1}
	if err := c.b.createCompChannel(ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// FD is the channel's file descriptor (ibv_comp_channel.fd), for epoll
// or poll: it is readable while an event is pending, and GetEvent then
// does not block. Do not read or close it. It is closed by Destroy (or
// the context's Close).
func (ch *CompChannel) FD() int { return ch.fd }

// GetEvent is ibv_get_cq_event: it blocks until a CQ of the channel that
// was armed with ReqNotify fires, and returns that CQ. Each event must
// be acknowledged with CQ.AckEvents. It returns ErrClosed once the
// channel is destroyed or its context closed (a GetEvent blocked at
// that moment returns too), and ErrDisconnected when the daemon closed
// the connection: it never blocks on a daemon that is gone.
func (ch *CompChannel) GetEvent() (*CQ, error) { return ch.getEvent(-1) }

// TryGetEvent is GetEvent that waits at most timeout (0: not at all, as
// ibv_get_cq_event on a non-blocking channel): it returns nil and no
// error when no event came.
func (ch *CompChannel) TryGetEvent(timeout time.Duration) (*CQ, error) {
	return ch.getEvent(max(timeout, 0))
}

func (ch *CompChannel) getEvent(timeout time.Duration) (*CQ, error) {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil, ErrClosed
	}
	ch.waiters++
	ch.mu.Unlock()
	defer ch.leave()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var buf [8]byte
	var fds [2]unix.PollFd
	fds[0] = unix.PollFd{Fd: int32(ch.fd), Events: unix.POLLIN}
	nfds := 1
	if ch.hup >= 0 {
		fds[1] = unix.PollFd{Fd: int32(ch.hup), Events: unix.POLLRDHUP}
		nfds = 2
	}
	for {
		// Drain the counter first, then look: an event fired after the
		// look writes the eventfd again and ends the poll below.
		unix.Read(ch.fd, buf[:])
		ch.mu.Lock()
		closed := ch.closed
		var cq *CQ
		if !closed {
			cq = ch.fired()
		}
		ch.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cq != nil:
			return cq, nil
		}
		var ts *unix.Timespec
		if timeout >= 0 {
			left := time.Until(deadline)
			if timeout == 0 || left <= 0 {
				left = 0
			}
			t := unix.NsecToTimespec(int64(left))
			ts = &t
		}
		if timeout != 0 && ch.ctx.drv != nil {
			ch.ctx.drv.idle() // direct mode: the engine is the progress goroutine's until the next call
		}
		n, err := unix.Ppoll(fds[:nfds], ts, nil)
		if err != nil && err != unix.EINTR {
			return nil, fmt.Errorf("verbs: get CQ event: %w", err)
		}
		if nfds == 2 && fds[1].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
			return nil, ErrDisconnected
		}
		if n == 0 && err == nil && ts != nil && (timeout == 0 || !time.Now().Before(deadline)) {
			return nil, nil
		}
	}
}

// fired takes one event of a CQ of the channel (ch.mu held).
func (ch *CompChannel) fired() *CQ {
	for i := range ch.cqs {
		k := (ch.next + i) % len(ch.cqs)
		cq := ch.cqs[k]
		if cq.notify.Events.Load() != cq.taken {
			cq.taken++
			ch.next = k + 1
			return cq
		}
	}
	return nil
}

// leave ends a GetEvent; the last one out of a closed channel closes its
// descriptors.
func (ch *CompChannel) leave() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.waiters--
	ch.shutFDs()
}

// shutFDs closes the descriptors of a closed channel nobody waits on
// (ch.mu held).
func (ch *CompChannel) shutFDs() {
	if !ch.closed || ch.waiters > 0 || ch.fdsShut {
		return
	}
	ch.fdsShut = true
	unix.Close(ch.fd)
	if ch.hup >= 0 {
		unix.Close(ch.hup)
	}
}

// shut marks the channel closed and wakes its waiters; the descriptors
// close when the last waiter has left (ch.mu held).
func (ch *CompChannel) shut() {
	if ch.closed {
		return
	}
	ch.closed = true
	unix.Write(ch.fd, eventValue[:])
	ch.shutFDs()
}

var eventValue = [8]byte{1} // eventfd adds this little-endian 1

// Destroy is ibv_destroy_comp_channel. A channel still used by a CQ is
// busy (EBUSY, dataplane.ErrBusy).
func (ch *CompChannel) Destroy() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return ErrClosed
	}
	if len(ch.cqs) > 0 {
		return fmt.Errorf("%w: completion channel is used by %d CQs", dataplane.ErrBusy, len(ch.cqs))
	}
	err := ch.ctx.b.destroyCompChannel(ch)
	if errors.Is(err, dataplane.ErrBusy) {
		return err
	}
	// Any other failure (the daemon is gone) leaves nothing to keep.
	ch.shut()
	return err
}

// CreateCQWithChannel is ibv_create_cq with a completion channel: the
// CQ's events, once requested with ReqNotify, signal ch. A nil ch is
// CreateCQ.
func (c *Context) CreateCQWithChannel(cqe int, ch *CompChannel) (*CQ, error) {
	if ch == nil {
		return c.CreateCQ(cqe)
	}
	if ch.ctx != c {
		return nil, ErrForeign
	}
	ch.mu.Lock()
	defer ch.mu.Unlock() // held across the creation: Destroy cannot race it
	if ch.closed {
		return nil, ErrClosed
	}
	cq := &CQ{ctx: c, ch: ch}
	if err := c.b.createCQ(cq, cqe); err != nil {
		return nil, err
	}
	cq.taken = cq.notify.Events.Load()
	ch.cqs = append(ch.cqs, cq)
	c.events().track(trackKey(cq), cq)
	return cq, nil
}

// ReqNotify is ibv_req_notify_cq: it arms the CQ for one completion
// event on its channel. With solicitedOnly false, the next completion
// added to the CQ fires it; with solicitedOnly true, only the next
// receive completion of a message sent with SendSolicited, or the next
// unsuccessful completion, does. The event fires once; the CQ is then
// disarmed until the next ReqNotify. Arming an armed CQ keeps one arm
// (for any completion if either call asked for any).
//
// As with ibverbs, completions already in the CQ when it is armed do not
// fire the event: arm, then poll once more before waiting. (A completion
// added while ReqNotify runs may fire it; the following poll then finds
// it, and the event is spurious but harmless.) ReqNotify makes no system
// call and does not allocate.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.ch == nil {
		return errors.New("verbs: req notify on a CQ created without a completion channel")
	}
	if cq.ring != nil {
		return cq.ring.reqNotify(cq.notify, solicitedOnly)
	}
	if cq.dead.Load() {
		return ErrClosed
	}
	cq.notify.Request(solicitedOnly)
	return nil
}

// AckEvents is ibv_ack_cq_events: it acknowledges n events GetEvent
// returned for this CQ. Destroy fails while events are unacknowledged.
func (cq *CQ) AckEvents(n int) {
	if cq.ch == nil || n <= 0 {
		return
	}
	cq.ch.mu.Lock()
	cq.acked += uint32(n)
	cq.ch.mu.Unlock()
}

// Channel is the CQ's completion channel, nil if it has none.
func (cq *CQ) Channel() *CompChannel { return cq.ch }

// detach takes the CQ off its channel before it is destroyed, after
// checking that its events were acknowledged; attach undoes it.
func (cq *CQ) detach() error {
	ch := cq.ch
	if ch == nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if cq.acked != cq.taken {
		return fmt.Errorf("%w: %d completion events of the CQ are not acknowledged (AckEvents)", dataplane.ErrBusy, cq.taken-cq.acked)
	}
	ch.cqs = remove(ch.cqs, cq)
	return nil
}

func (cq *CQ) attach() {
	if ch := cq.ch; ch != nil {
		ch.mu.Lock()
		ch.cqs = append(ch.cqs, cq)
		ch.mu.Unlock()
	}
}

// embeddedNotify is the engine's hook for an embedded CQ on a channel:
// it runs on the engine's goroutine (the Sim's, or its poll loop) with
// the engine lock held, for every completion added, and writes the
// channel's eventfd only when the CQ was armed for it.
func embeddedNotify(cq *CQ) func(*qp.WC) {
	n, fd := cq.notify, cq.ch.fd
	return func(wc *qp.WC) {
		if n.Trigger(shm.Solicited(wc)) {
			unix.Write(fd, eventValue[:])
		}
	}
}
