package verbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// Shared receive queues (ibv_create_srq, ...) and asynchronous events
// (ibv_get_async_event) in both modes. An SRQ's receive work requests go
// straight into the engine on an embedded context, and into the receive
// ring of the SRQ's ring file on a daemon context, as a QP's do
// (docs/verbs-ipc.md).

// SRQAttr is struct ibv_srq_attr (MaxWR, MaxSGE, Limit).
type SRQAttr = dataplane.SRQAttr

// SRQAttrMask is enum ibv_srq_attr_mask.
type SRQAttrMask = dataplane.SRQAttrMask

// IBV_SRQ_MAX_WR (resize) and IBV_SRQ_LIMIT (arm).
const (
	SRQAttrMaxWR = dataplane.SRQAttrMaxWR
	SRQAttrLimit = dataplane.SRQAttrLimit
)

// SRQ is a shared receive queue (struct ibv_srq).
type SRQ struct {
	pd     *PD
	es     *dataplane.SRQ // embedded
	h      uint32         // daemon handle
	maxSGE int
	users  atomic.Int32 // QPs using it
	dead   atomic.Bool
	mu     sync.Mutex // daemon: one post at a time, and the ring's life
	mem    shm.Mapping
	ring   *shm.Producer[qp.RecvWR] // daemon; nil once unmapped
}

// CreateSRQ is ibv_create_srq: a queue of at least attr.MaxWR receive
// work requests of at most attr.MaxSGE SGEs, which RC QPs created with it
// (QPInitAttr.SRQ) take from; attr.Limit, if not 0, arms it. It returns
// the SRQ's actual attributes, as ibv_create_srq writes them back.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, SRQAttr, error) {
	if pd.dead {
		return nil, SRQAttr{}, ErrClosed
	}
	s := &SRQ{pd: pd}
	var got SRQAttr
	switch b := pd.ctx.b.(type) {
	case *embedded:
		es, a, err := b.e.CreateSRQ(pd.h, attr)
		if err != nil {
			return nil, SRQAttr{}, err
		}
		s.es, got = es, a
	case *remote:
		var res proto.SRQAttr
		fds, err := b.call(proto.OpCreateSRQ, proto.SRQAttr{PD: pd.h, MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, Limit: attr.Limit}, nil, &res)
		if err != nil {
			return nil, SRQAttr{}, err
		}
		l, err := shm.NewQPLayout(1, res.MaxWR)
		if err == nil && (int(l.RQCap) != res.MaxWR || l.Size != res.Size) {
			err = fmt.Errorf("%w: SRQ ring of %d entries in %d bytes, expected %d in %d", proto.ErrProtocol, res.MaxWR, res.Size, l.RQCap, l.Size)
		}
		var m shm.Mapping
		if err == nil {
			m, err = mapRing(fds, l.Size)
			fds = nil
		}
		if err == nil {
			if err = l.Check(m.Bytes); err != nil {
				m.Unmap()
			}
		}
		if err != nil {
			proto.CloseFDs(fds)
			b.call(proto.OpDestroySRQ, proto.Handle{Handle: res.Handle}, nil, nil)
			return nil, SRQAttr{}, err
		}
		p := shm.NewProducer(l.RQ(m.Bytes))
		s.h, s.mem, s.ring = res.Handle, m, &p
		got = SRQAttr{MaxWR: res.MaxWR, MaxSGE: res.MaxSGE, Limit: res.Limit}
	default:
		return nil, SRQAttr{}, errors.New("verbs: SRQs need an embedded or daemon context")
	}
	s.maxSGE = got.MaxSGE
	pd.ctx.events().track(s.key(), s)
	return s, got, nil
}

func (s *SRQ) key() any {
	if s.es != nil {
		return s.es
	}
	return s.h
}

// Modify is ibv_modify_srq: SRQAttrMaxWR resizes the queue, SRQAttrLimit
// arms it with attr.Limit (SRQ_LIMIT_REACHED fires once when fewer WQEs
// than that remain, then the limit is 0 again).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if s.dead.Load() {
		return ErrClosed
	}
	switch b := s.pd.ctx.b.(type) {
	case *embedded:
		return b.e.ModifySRQ(s.es, attr, mask)
	case *remote:
		_, err := b.call(proto.OpModifySRQ, proto.SRQAttr{SRQ: s.h, MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, Limit: attr.Limit, Mask: int(mask)}, nil, nil)
		return err
	}
	return ErrForeign
}

// Query is ibv_query_srq.
func (s *SRQ) Query() (SRQAttr, error) {
	if s.dead.Load() {
		return SRQAttr{}, ErrClosed
	}
	switch b := s.pd.ctx.b.(type) {
	case *embedded:
		return b.e.QuerySRQ(s.es)
	case *remote:
		var res proto.SRQAttr
		if _, err := b.call(proto.OpQuerySRQ, proto.Handle{Handle: s.h}, nil, &res); err != nil {
			return SRQAttr{}, err
		}
		return SRQAttr{MaxWR: res.MaxWR, MaxSGE: res.MaxSGE, Limit: res.Limit}, nil
	}
	return SRQAttr{}, ErrForeign
}

// Destroy is ibv_destroy_srq; an SRQ a QP still uses is busy (an error
// that errors.Is dataplane.ErrBusy, EBUSY).
func (s *SRQ) Destroy() error {
	if s.dead.Load() {
		return ErrClosed
	}
	if n := s.users.Load(); n > 0 {
		return fmt.Errorf("%w: shared receive queue is used by %d QPs", dataplane.ErrBusy, n)
	}
	var err error
	switch b := s.pd.ctx.b.(type) {
	case *embedded:
		err = b.e.DestroySRQ(s.es)
	case *remote:
		_, err = b.call(proto.OpDestroySRQ, proto.Handle{Handle: s.h}, nil, nil)
	}
	if err != nil {
		return err
	}
	s.dead.Store(true)
	s.unmap()
	s.pd.ctx.events().untrack(s.key())
	return nil
}

// unmap ends a daemon SRQ's ring (Destroy, Context.Close): later posts
// fail.
func (s *SRQ) unmap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ring != nil {
		s.ring = nil
		s.mem.Unmap()
	}
}

// PostRecv is ibv_post_srq_recv. On a daemon context the requests are
// checked here as the engine checks them (SGE count within max_sge, SGEs
// in locally writable regions of the SRQ's PD), copied into the SRQ's
// shared receive ring and published, with no system call unless the
// daemon's loop sleeps (docs/verbs-ipc.md, "Doorbell").
func (s *SRQ) PostRecv(wrs ...RecvWR) error {
	switch b := s.pd.ctx.b.(type) {
	case *embedded:
		if s.dead.Load() {
			return &PostError{Index: 0, Err: dataplane.ErrSRQDestroyed}
		}
		if n, err := b.e.PostSRQRecv(s.es, wrs); err != nil {
			return &PostError{Index: n, Err: err}
		}
		return nil
	case *remote:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ring == nil {
			return &PostError{Index: 0, Err: dataplane.ErrSRQDestroyed}
		}
		var perr error
		for i := range wrs {
			wr := &wrs[i]
			if wr.NumSGE < 0 || wr.NumSGE > s.maxSGE {
				perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: SRQ: WR %d: %w: %d SGEs (max_sge %d)", i, dataplane.ErrBadWR, wr.NumSGE, s.maxSGE)}
				break
			}
			if !b.recvSGLOK(s.pd.h, wr.SGEs()) {
				perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: SRQ: WR %d: %w: SGE not in a locally writable region", i, dataplane.ErrBadWR)}
				break
			}
			if s.ring.Free() == 0 {
				perr = &PostError{Index: i, Err: fmt.Errorf("dataplane: SRQ: %w: %d receive WRs outstanding", dataplane.ErrQueueFull, s.ring.Cap())}
				break
			}
			s.ring.Push(wr)
		}
		s.ring.Publish()
		b.kick()
		return perr
	}
	return &PostError{Err: ErrForeign}
}

// The asynchronous event types (enum ibv_event_type).
type EventType = dataplane.EventType

const (
	EventCQErr            = dataplane.EventCQErr
	EventQPFatal          = dataplane.EventQPFatal
	EventQPReqErr         = dataplane.EventQPReqErr
	EventQPAccessErr      = dataplane.EventQPAccessErr
	EventCommEst          = dataplane.EventCommEst
	EventSQDrained        = dataplane.EventSQDrained
	EventPortActive       = dataplane.EventPortActive
	EventSRQLimitReached  = dataplane.EventSRQLimitReached
	EventQPLastWQEReached = dataplane.EventQPLastWQEReached
)

// AsyncEvent is struct ibv_async_event: the event and the object it
// names (QP, CQ or SRQ of this context, or the port).
type AsyncEvent struct {
	Type EventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
	Port int
}

// ErrNoEvent is GetAsyncEvent on a context with no event waiting when it
// does not block: its async descriptor has O_NONBLOCK (ibv_get_async_event's
// EAGAIN), or the context is embedded. It wraps unix.EAGAIN.
var ErrNoEvent = fmt.Errorf("verbs: no asynchronous event waiting: %w", unix.EAGAIN)

// asyncState is a context's events: the descriptor, the events fetched
// and not yet returned, and the objects events may name (by engine
// object on an embedded context, by handle on a daemon one).
type asyncState struct {
	mu     sync.Mutex
	fd     int
	queue  []proto.AsyncEvent // daemon: fetched, not returned
	local  []AsyncEvent       // embedded: drained, not returned
	objs   map[any]any
	evBuf  [16]dataplane.Event
	closed bool
}

// events returns c's event state, made on first use.
func (c *Context) events() *asyncState {
	if a := c.ev.Load(); a != nil {
		return a
	}
	a := &asyncState{fd: -1, objs: map[any]any{}}
	if c.ev.CompareAndSwap(nil, a) {
		return a
	}
	return c.ev.Load()
}

func (a *asyncState) track(k, v any) {
	a.mu.Lock()
	a.objs[k] = v
	a.mu.Unlock()
}

func (a *asyncState) untrack(k any) {
	a.mu.Lock()
	delete(a.objs, k)
	a.mu.Unlock()
}

// AsyncFD is the descriptor that is readable (poll, select) while an
// asynchronous event waits: ibv_context's async_fd. It is an eventfd in
// semaphore mode counting the waiting events; on a daemon context
// GetAsyncEvent blocks on it unless the caller sets O_NONBLOCK. The
// context owns it (Close closes it). A PORT_ACTIVE event for port 1
// waits from the start, as the context opened on an active port.
func (c *Context) AsyncFD() (int, error) {
	a := c.events()
	a.mu.Lock()
	defer a.mu.Unlock()
	return c.asyncFDLocked(a)
}

func (c *Context) asyncFDLocked(a *asyncState) (int, error) {
	if a.closed {
		return -1, ErrClosed
	}
	if a.fd >= 0 {
		return a.fd, nil
	}
	switch b := c.b.(type) {
	case *embedded:
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK|unix.EFD_SEMAPHORE)
		if err != nil {
			return -1, fmt.Errorf("verbs: async eventfd: %w", err)
		}
		a.fd = fd
		a.local = append(a.local, AsyncEvent{Type: EventPortActive, Port: 1})
		b.e.SetEventNotify(func() { addCount(fd, 1) })
		a.drainEngine(b.e) // events raised before
		addCount(fd, uint64(len(a.local)))
	case *remote:
		fds, err := b.call(proto.OpAsyncFD, nil, nil, nil)
		if err != nil {
			return -1, err
		}
		if len(fds) != 1 {
			proto.CloseFDs(fds)
			return -1, fmt.Errorf("%w: %d descriptors with async_fd, want 1", proto.ErrProtocol, len(fds))
		}
		a.fd = fds[0]
	default:
		return -1, ErrForeign
	}
	return a.fd, nil
}

func addCount(fd int, n uint64) {
	if n == 0 {
		return
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], n)
	unix.Write(fd, b[:])
}

// drainEngine moves an embedded engine's events into a.local, naming
// this context's objects (a.mu held).
func (a *asyncState) drainEngine(e *dataplane.Engine) {
	for {
		n := e.PollEvents(a.evBuf[:])
		for i := range n {
			ev := &a.evBuf[i]
			out := AsyncEvent{Type: ev.Type, Port: ev.Port}
			switch {
			case ev.QP != nil:
				out.QP, _ = a.objs[ev.QP].(*QP)
			case ev.CQ != nil:
				out.CQ, _ = a.objs[ev.CQ].(*CQ)
			case ev.SRQ != nil:
				out.SRQ, _ = a.objs[ev.SRQ].(*SRQ)
			}
			*ev = dataplane.Event{}
			if out.QP != nil || out.CQ != nil || out.SRQ != nil || out.Port != 0 {
				a.local = append(a.local, out)
			}
		}
		if n < len(a.evBuf) {
			return
		}
	}
}

// GetAsyncEvent is ibv_get_async_event: the oldest waiting asynchronous
// event. On a daemon context it blocks until one comes, unless the
// async descriptor has O_NONBLOCK (then ErrNoEvent); on an embedded one
// it never blocks (simulated time moves only when the caller runs it),
// returning ErrNoEvent when none waits. Events name only this context's
// objects: a daemon delivers an event to the client that owns the object.
func (c *Context) GetAsyncEvent() (AsyncEvent, error) {
	a := c.events()
	a.mu.Lock()
	fd, err := c.asyncFDLocked(a)
	a.mu.Unlock()
	if err != nil {
		return AsyncEvent{}, err
	}
	switch b := c.b.(type) {
	case *embedded:
		a.mu.Lock()
		defer a.mu.Unlock()
		a.drainEngine(b.e)
		if len(a.local) == 0 {
			return AsyncEvent{}, ErrNoEvent
		}
		ev := a.local[0]
		a.local = a.local[1:]
		var cnt [8]byte
		unix.Read(fd, cnt[:]) // one count per event (EAGAIN if the notify has not counted it)
		return ev, nil
	case *remote:
		for {
			var cnt [8]byte
			if _, err := unix.Read(fd, cnt[:]); err != nil {
				if err == unix.EINTR {
					continue
				}
				if err == unix.EAGAIN {
					return AsyncEvent{}, ErrNoEvent
				}
				return AsyncEvent{}, fmt.Errorf("verbs: async event: %w", err)
			}
			a.mu.Lock()
			if len(a.queue) == 0 {
				var res proto.AsyncEventsResult
				if _, err := b.call(proto.OpGetAsyncEvents, nil, nil, &res); err != nil {
					a.mu.Unlock()
					return AsyncEvent{}, err
				}
				a.queue = append(a.queue, res.Events...)
			}
			if len(a.queue) == 0 {
				a.mu.Unlock()
				continue // cannot happen: a count is an event fetched or held
			}
			w := a.queue[0]
			a.queue = a.queue[1:]
			ev := AsyncEvent{Type: EventType(w.Type), Port: w.Port}
			if w.Handle != 0 {
				switch o := a.objs[w.Handle].(type) {
				case *QP:
					ev.QP = o
				case *CQ:
					ev.CQ = o
				case *SRQ:
					ev.SRQ = o
				default:
					a.mu.Unlock()
					continue // the object is destroyed: its event went with it
				}
			}
			a.mu.Unlock()
			return ev, nil
		}
	}
	return AsyncEvent{}, ErrForeign
}

// closeEvents closes the async descriptor (Context.Close).
func (c *Context) closeEvents() {
	a := c.ev.Load()
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, o := range a.objs {
		if s, ok := o.(*SRQ); ok {
			s.unmap()
		}
	}
	if a.fd >= 0 {
		if b, ok := c.b.(*embedded); ok {
			b.e.SetEventNotify(nil)
		}
		unix.Close(a.fd)
		a.fd = -1
	}
}

// trackKey is how an event names o on its context.
func trackKey(o any) any {
	switch o := o.(type) {
	case *QP:
		if o.q != nil {
			return o.q
		}
		return o.h
	case *CQ:
		if o.ecq != nil {
			return o.ecq
		}
		return o.h
	}
	return nil
}

// srqOf is the engine's SRQ of an embedded s (nil: none).
func srqOf(s *SRQ) *dataplane.SRQ {
	if s == nil {
		return nil
	}
	return s.es
}

// srqHandle is the daemon's handle of s (0: none).
func srqHandle(s *SRQ) uint32 {
	if s == nil {
		return 0
	}
	return s.h
}
