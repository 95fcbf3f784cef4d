package verbsd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// Shared receive queues and asynchronous events for the daemon's clients
// (docs/verbs-ipc.md, "Shared receive queues and asynchronous events").
//
// An SRQ is a client object like a QP: the engine's SRQ under a handle of
// the connection, and a ring file (a QP file whose receive ring is the
// SRQ's; its send ring of one entry is unused) into which the client
// posts receive work requests as it does a QP's. The pump looks at every
// SRQ's ring each round (an SRQ has no doorbell slot), moves what the
// client published into the engine's SRQ and releases the slots of the
// WQEs the engine has taken from it (the SRQ's depth), so that the ring
// bounds the SRQ's WQEs as the engine's own queue does. A work request
// the engine refuses (the client library checks them first: only a
// broken client writes one) is dropped, and the client warned in the
// log; a corrupt ring index stops the pump looking at that SRQ. An SRQ's
// ring has a fixed size, so resizing (IBV_SRQ_MAX_WR) is refused.
// post_srq_recv is the same post as a request, for a client that has no
// ring.
//
// The engine's event queue is drained by the pump (and after the control
// operations that raise events), and each event goes to the client that
// owns the QP, CQ or SRQ it names, never to another: into that client's
// bounded queue, and one count into its async eventfd (semaphore mode),
// which the client polls and reads one count per event it then fetches
// with get_async_events. PORT_ACTIVE is queued for every client at
// hello, as its context opens on an active port.

// srqObj is a client's SRQ.
type srqObj struct {
	h       uint32
	owner   *client
	pd      *pdObj
	es      *dataplane.SRQ
	cost    int64 // counted in client.ringBytes
	mem     shm.Mapping
	rq      shm.Consumer[qp.RecvWR]
	retired uint32 // ring index up to which slots are released
	broken  bool   // a ring index was corrupt: the ring is ignored
	warned  bool   // a refused work request was logged
}

// clientExt is a client's SRQs and asynchronous events (Server.mu).
type clientExt struct {
	srqs   map[uint32]*srqObj
	events []proto.AsyncEvent
	lost   uint64
	fd     int // async eventfd, -1 until async_fd
}

// maxClientEvents bounds the events a client has not fetched.
const maxClientEvents = 256

// serverEvents is the server's side of the engine's event queue.
type serverEvents struct {
	pending atomic.Bool // the engine raised an event since the last drain
	batch   [64]dataplane.Event
	srqs    []*srqObj // every client's SRQs, for the pump
}

// initEvents hooks the server to the engine's event queue.
func (s *Server) initEvents() {
	s.e.SetEventNotify(func() {
		s.ev.pending.Store(true)
		s.wake()
	})
}

// initClientExt readies c's SRQ table and event queue with PORT_ACTIVE.
func (c *client) initExt() {
	c.ext = clientExt{srqs: map[uint32]*srqObj{}, fd: -1,
		events: []proto.AsyncEvent{{Type: int(dataplane.EventPortActive), Port: 1}}}
}

// deliverEvents moves the engine's events to their owners (s.mu held).
// It does not allocate while a client's queue has room in its backing
// array.
func (s *Server) deliverEvents() {
	if !s.ev.pending.Swap(false) {
		return
	}
	for {
		n := s.e.PollEvents(s.ev.batch[:])
		for i := range n {
			s.deliverEvent(&s.ev.batch[i])
			s.ev.batch[i] = dataplane.Event{}
		}
		if n < len(s.ev.batch) {
			return
		}
	}
}

// deliverEvent finds the client that owns ev's object; an event for an
// object already destroyed goes nowhere.
func (s *Server) deliverEvent(ev *dataplane.Event) {
	var owner *client
	var h uint32
	switch {
	case ev.QP != nil:
		if q := s.byQPN[ev.QP.QPN()]; q != nil && q.eq == ev.QP {
			owner, h = q.owner, q.h
		}
	case ev.CQ != nil:
		// The engine's CQ overran: the client's ring overflows with it,
		// and cqOverflow raises CQ_ERR once for either.
		for _, c := range s.cqs {
			if c.ecq == ev.CQ {
				s.cqOverflow(c)
				return
			}
		}
	case ev.SRQ != nil:
		for _, o := range s.ev.srqs {
			if o.es == ev.SRQ {
				owner, h = o.owner, o.h
			}
		}
	}
	if owner == nil {
		return
	}
	owner.queueEvent(proto.AsyncEvent{Type: int(ev.Type), Handle: h, Port: ev.Port})
}

// queueEvent adds ev to c's queue and counts it in c's eventfd.
func (c *client) queueEvent(ev proto.AsyncEvent) {
	if len(c.ext.events) >= maxClientEvents {
		c.ext.lost++
		return
	}
	c.ext.events = append(c.ext.events, ev)
	if c.ext.fd >= 0 {
		signalCount(c.ext.fd, 1)
	}
}

func signalCount(fd int, n uint64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], n)
	unix.Write(fd, b[:]) // EAGAIN only with 2^64-2 counts pending
}

// asyncFD makes c's async eventfd (semaphore mode, blocking unless the
// client sets O_NONBLOCK on it) counting the events already queued.
func (s *Server) asyncFD(c *client) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ext.fd >= 0 {
		return nil, reply{}, fmt.Errorf("%w: async_fd asked twice", proto.ErrProtocol)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_SEMAPHORE)
	if err != nil {
		return nil, reply{}, fmt.Errorf("verbsd: async eventfd: %w", err)
	}
	c.ext.fd = fd
	if n := len(c.ext.events); n > 0 {
		signalCount(fd, uint64(n))
	}
	return nil, reply{fds: []int{fd}}, nil
}

// getAsyncEvents hands c the events it has not fetched.
func (s *Server) getAsyncEvents(c *client) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ev.pending.Store(true) // an event raised by this client's last call, not yet drained
	s.deliverEvents()
	res := proto.AsyncEventsResult{Events: c.ext.events, Lost: c.ext.lost}
	c.ext.events = nil
	return res, reply{}, nil
}

func (s *Server) createSRQ(c *client, a proto.SRQAttr) (any, reply, error) {
	// The ring file first (outside the lock), if the size makes one: the
	// engine refuses the sizes that do not.
	l, lerr := shm.NewQPLayout(1, a.MaxWR)
	fd, mem := -1, []byte(nil)
	if lerr == nil && a.MaxWR <= dataplane.MaxWR {
		var err error
		if fd, mem, err = shm.Create("softnic-srq", l.Size, shm.SealAll); err != nil {
			return nil, reply{}, err
		}
		l.Init(mem)
	}
	fail := func(err error) (any, reply, error) {
		if fd >= 0 {
			unix.Munmap(mem)
			unix.Close(fd)
		}
		return nil, reply{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := c.pds[a.PD]
	if pd == nil {
		return fail(badHandle("PD", a.PD))
	}
	if err := s.count(len(c.ext.srqs), s.lim.QPs, "SRQs", "max-qps"); err != nil {
		return fail(err)
	}
	var cost int64
	if fd >= 0 {
		cost = int64(l.Size) + dataplane.SRQBytes(a.MaxWR)
		if err := s.reserveRings(c, cost); err != nil {
			return fail(err)
		}
	}
	es, attr, err := s.e.CreateSRQ(pd.id, dataplane.SRQAttr{MaxWR: a.MaxWR, MaxSGE: a.MaxSGE, Limit: a.Limit})
	if err == nil && uint32(attr.MaxWR) != l.RQCap {
		s.e.DestroySRQ(es)
		err = fmt.Errorf("verbsd: SRQ of %d WQEs, ring of %d", attr.MaxWR, l.RQCap)
	}
	if err != nil {
		if cost > 0 {
			s.releaseRings(c, cost)
		}
		return fail(err)
	}
	o := &srqObj{h: c.handle(), owner: c, pd: pd, es: es, cost: cost,
		mem: shm.Mapping{Mem: mem, Bytes: mem}, rq: shm.NewConsumer(l.RQ(mem))}
	c.ext.srqs[o.h] = o
	s.ev.srqs = append(s.ev.srqs, o)
	return proto.SRQAttr{Handle: o.h, MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, Limit: attr.Limit, Size: l.Size},
		reply{fds: []int{fd}, owned: []int{fd}}, nil
}

// pumpSRQs moves what clients published in their SRQ rings into the
// engine and releases the slots of WQEs the engine has taken (s.mu held).
// It does not allocate.
func (s *Server) pumpSRQs() bool {
	moved := false
	for _, o := range s.ev.srqs {
		if o.broken {
			continue
		}
		for {
			n, err := o.rq.Available()
			if err != nil {
				o.broken = true
				o.owner.log.Warn("corrupt SRQ ring: ignored from now on", "srq", o.h, "err", err)
				break
			}
			if n == 0 {
				break
			}
			n = min(n, uint32(len(s.recvBatch)))
			for i := range n {
				s.recvBatch[i] = *o.rq.At(i)
			}
			k, err := s.e.PostSRQRecv(o.es, s.recvBatch[:n])
			o.rq.Advance(uint32(k))
			moved = moved || k > 0
			if err != nil {
				if errors.Is(err, dataplane.ErrQueueFull) {
					break // the client posted past its ring's retired slots: it waits
				}
				o.rq.Advance(1) // a WR the client library would have refused: dropped
				if !o.warned {
					o.warned = true
					o.owner.log.Warn("SRQ work request refused and dropped", "srq", o.h, "err", err)
				}
			}
		}
		if o.rq.Head() != o.retired {
			if r := o.rq.Head() - uint32(s.e.SRQDepth(o.es)); r != o.retired {
				o.retired = r
				o.rq.Release(r)
			}
		}
	}
	return moved
}

func (s *Server) modifySRQ(c *client, a proto.SRQAttr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := c.ext.srqs[a.SRQ]
	if o == nil {
		return badHandle("SRQ", a.SRQ)
	}
	if dataplane.SRQAttrMask(a.Mask)&dataplane.SRQAttrMaxWR != 0 {
		return fmt.Errorf("%w: resizing an SRQ (IBV_SRQ_MAX_WR) is not supported over the daemon: its ring file has a fixed size", dataplane.ErrSRQAttr)
	}
	return s.e.ModifySRQ(o.es, dataplane.SRQAttr{MaxWR: a.MaxWR, Limit: a.Limit}, dataplane.SRQAttrMask(a.Mask))
}

func (s *Server) querySRQ(c *client, h uint32) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := c.ext.srqs[h]
	if o == nil {
		return nil, reply{}, badHandle("SRQ", h)
	}
	a, err := s.e.QuerySRQ(o.es)
	if err != nil {
		return nil, reply{}, err
	}
	return proto.SRQAttr{Handle: h, MaxWR: a.MaxWR, MaxSGE: a.MaxSGE, Limit: a.Limit}, reply{}, nil
}

func (s *Server) destroySRQ(c *client, h uint32) error {
	s.mu.Lock()
	o := c.ext.srqs[h]
	if o == nil {
		s.mu.Unlock()
		return badHandle("SRQ", h)
	}
	if err := s.e.DestroySRQ(o.es); err != nil {
		s.mu.Unlock()
		return err
	}
	s.forgetSRQ(c, o)
	s.mu.Unlock()
	o.mem.Unmap() // nothing (engine or pump) reaches it now
	return nil
}

// forgetSRQ takes a destroyed SRQ out of c and the pump (s.mu held).
func (s *Server) forgetSRQ(c *client, o *srqObj) {
	delete(c.ext.srqs, o.h)
	s.ev.srqs = remove(s.ev.srqs, o)
	s.releaseRings(c, o.cost)
}

func (s *Server) postSRQRecv(c *client, a proto.PostSRQRecvArgs) (any, reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := c.ext.srqs[a.SRQ]
	if o == nil {
		return nil, reply{}, badHandle("SRQ", a.SRQ)
	}
	n, err := s.e.PostSRQRecv(o.es, a.WRs)
	res := proto.PostSRQRecvResult{Posted: n}
	if err != nil {
		res.Error = protoconv.EncodeError(err)
	}
	return res, reply{}, nil
}

// srqOf resolves create_qp's SRQ handle (s.mu held): nil for none.
func (c *client) srqOf(h uint32) (*dataplane.SRQ, error) {
	if h == 0 {
		return nil, nil
	}
	o := c.ext.srqs[h]
	if o == nil {
		return nil, badHandle("SRQ", h)
	}
	return o.es, nil
}

// dropExt destroys c's SRQs (its QPs are gone) and closes its async
// eventfd (s.mu held); it returns the SRQ rings to unmap once unlocked.
func (s *Server) dropExt(c *client) []shm.Mapping {
	var maps []shm.Mapping
	for h, o := range c.ext.srqs {
		if err := s.e.DestroySRQ(o.es); err != nil {
			c.log.Warn("destroy SRQ", "srq", h, "err", err)
		}
		s.forgetSRQ(c, o)
		maps = append(maps, o.mem)
	}
	if c.ext.fd >= 0 {
		unix.Close(c.ext.fd)
		c.ext.fd = -1
	}
	c.ext.events = nil
	return maps
}

// handleExt runs the operations of this file; ok is false for others.
func (s *Server) handleExt(c *client, req *proto.Request, args func(any) error) (res any, out reply, err error, ok bool) {
	var h proto.Handle
	var a proto.SRQAttr
	switch req.Op {
	case proto.OpCreateSRQ:
		if err := args(&a); err != nil {
			return nil, reply{}, err, true
		}
		res, out, err = s.createSRQ(c, a)
	case proto.OpModifySRQ:
		if err := args(&a); err != nil {
			return nil, reply{}, err, true
		}
		err = s.modifySRQ(c, a)
	case proto.OpQuerySRQ:
		if err := args(&h); err != nil {
			return nil, reply{}, err, true
		}
		res, out, err = s.querySRQ(c, h.Handle)
	case proto.OpDestroySRQ:
		if err := args(&h); err != nil {
			return nil, reply{}, err, true
		}
		err = s.destroySRQ(c, h.Handle)
	case proto.OpPostSRQRecv:
		var p proto.PostSRQRecvArgs
		if err := args(&p); err != nil {
			return nil, reply{}, err, true
		}
		res, out, err = s.postSRQRecv(c, p)
	case proto.OpAsyncFD:
		res, out, err = s.asyncFD(c)
	case proto.OpGetAsyncEvents:
		res, out, err = s.getAsyncEvents(c)
	default:
		return nil, reply{}, nil, false
	}
	return res, out, err, true
}
