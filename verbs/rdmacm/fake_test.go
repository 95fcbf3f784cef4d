package rdmacm

import (
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// A fake CM service: connections between Services of one fakeNet in
// memory, each MAD delivered synchronously to the peer's Handler (from
// inside the sender's call, which the Service contract allows).
type fakeNet struct {
	mu        sync.Mutex
	listeners map[fakeKey]Handler
	dropREQ   bool // REQs get no answer: the CM reports EventUnreachable
	// async: each side's events come from a goroutine of its own, in
	// order, after the sender's call returned (a real CM's receive
	// path); else synchronously from inside the sender's call.
	async bool
	reqs  []ConnParam
	reps  []ConnParam
}

type fakeKey struct {
	gid netip.Addr
	sid uint64
}

func newFakeNet() *fakeNet { return &fakeNet{listeners: map[fakeKey]Handler{}} }

type fakeSvc struct {
	n   *fakeNet
	gid netip.Addr
}

type fakeListener struct {
	n   *fakeNet
	key fakeKey
}

func (l *fakeListener) Close() error {
	l.n.mu.Lock()
	delete(l.n.listeners, l.key)
	l.n.mu.Unlock()
	return nil
}

func (s *fakeSvc) Listen(sid uint64, local netip.Addr, h Handler) (Listener, error) {
	if !local.IsValid() {
		local = s.gid
	}
	k := fakeKey{local.Unmap(), sid}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.n.listeners[k] != nil {
		return nil, syscall.EADDRINUSE
	}
	s.n.listeners[k] = h
	return &fakeListener{s.n, k}, nil
}

// fakeConn is one side of a connection.
type fakeConn struct {
	n       *fakeNet
	mu      sync.Mutex
	h       Handler
	peer    *fakeConn
	gotDREQ bool
	sent    []string // the MADs this side sent
	closed  bool
	mbox    chan Event // async delivery, in order
	// disconnectErr, if set, is what Disconnect returns, sending
	// nothing: a CM that already took the peer's DREQ (and answered
	// it) before its event reached the id.
	disconnectErr error
	ud            bool // a SIDR request: Accept and Reject send a SIDR_REP
}

func (c *fakeConn) send(mad string) {
	c.mu.Lock()
	c.sent = append(c.sent, mad)
	c.mu.Unlock()
}

func (c *fakeConn) deliver(ev Event) {
	ev.Conn = c
	if c.n.async {
		c.mu.Lock()
		if c.mbox == nil {
			c.mbox = make(chan Event, 64)
			go func() {
				for ev := range c.mbox {
					c.mu.Lock()
					h := c.h
					c.mu.Unlock()
					if h != nil {
						h(ev)
					}
				}
			}()
		}
		mbox := c.mbox
		c.mu.Unlock()
		mbox <- ev
		return
	}
	c.mu.Lock()
	h := c.h
	c.mu.Unlock()
	if h != nil {
		h(ev)
	}
}

func (c *fakeConn) MADs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

func (s *fakeSvc) Connect(sid uint64, path Path, p ConnParam, h Handler) (Conn, error) {
	a := &fakeConn{n: s.n, h: h}
	b := &fakeConn{n: s.n, peer: a}
	a.peer = b
	a.send("REQ")
	s.n.mu.Lock()
	s.n.reqs = append(s.n.reqs, p)
	lh := s.n.listeners[fakeKey{path.DGID.Unmap(), sid}]
	drop := s.n.dropREQ
	s.n.mu.Unlock()
	switch {
	case drop:
		a.deliver(Event{Kind: EventUnreachable, Status: -int(syscall.ETIMEDOUT)})
	case lh == nil:
		b.send("REJ")
		a.deliver(Event{Kind: EventRejected, Reason: RejInvalidServiceID})
	default:
		// The passive side sees the path from its end.
		back := path
		back.SGID, back.DGID = path.DGID, path.SGID
		p.PrivateData = append([]byte(nil), p.PrivateData...)
		if s.n.async {
			go lh(Event{Kind: EventRequest, Conn: b, Param: p, Path: back})
		} else {
			lh(Event{Kind: EventRequest, Conn: b, Param: p, Path: back})
		}
	}
	return a, nil
}

// Resolve is SIDR: a SIDR_REQ to the listener, answered by its Accept
// or Reject; nobody listening: status 1; dropREQ: the retries run out.
func (s *fakeSvc) Resolve(sid uint64, path Path, pdata []byte, h Handler) (Conn, error) {
	a := &fakeConn{n: s.n, h: h, ud: true}
	b := &fakeConn{n: s.n, peer: a, ud: true}
	a.peer = b
	a.send("SIDR_REQ")
	s.n.mu.Lock()
	s.n.reqs = append(s.n.reqs, ConnParam{PrivateData: append([]byte(nil), pdata...)})
	lh := s.n.listeners[fakeKey{path.DGID.Unmap(), sid}]
	drop := s.n.dropREQ
	s.n.mu.Unlock()
	switch {
	case drop:
		a.deliver(Event{Kind: EventUnreachable, Status: -int(syscall.ETIMEDOUT)})
	case lh == nil:
		b.send("SIDR_REP(1)")
		a.deliver(Event{Kind: EventUnreachable, Status: 1})
	default:
		back := path
		back.SGID, back.DGID = path.DGID, path.SGID
		back.MTU = 0
		ev := Event{Kind: EventRequest, UD: true, Conn: b, Param: ConnParam{PrivateData: append([]byte(nil), pdata...)}, Path: back}
		if s.n.async {
			go lh(ev)
		} else {
			lh(ev)
		}
	}
	return a, nil
}

func (c *fakeConn) Accept(p ConnParam, h Handler) error {
	c.mu.Lock()
	c.h = h
	c.mu.Unlock()
	if c.ud {
		c.send("SIDR_REP")
		c.n.mu.Lock()
		c.n.reps = append(c.n.reps, p)
		c.n.mu.Unlock()
		c.peer.deliver(Event{Kind: EventReply, Param: p})
		return nil
	}
	c.send("REP")
	c.n.mu.Lock()
	c.n.reps = append(c.n.reps, p)
	c.n.mu.Unlock()
	c.peer.deliver(Event{Kind: EventReply, Param: p})
	return nil
}

func (c *fakeConn) Reject(reason uint16, pdata []byte) error {
	if c.ud {
		c.send("SIDR_REP(2)")
		c.peer.deliver(Event{Kind: EventUnreachable, Status: 2, PrivateData: append([]byte(nil), pdata...)})
		return nil
	}
	c.send(fmt.Sprintf("REJ(%d)", reason))
	c.peer.deliver(Event{Kind: EventRejected, Reason: reason, PrivateData: append([]byte(nil), pdata...)})
	return nil
}

func (c *fakeConn) RTU() error {
	c.send("RTU")
	c.peer.deliver(Event{Kind: EventEstablished})
	return nil
}

func (c *fakeConn) CommEstablished() error {
	c.deliver(Event{Kind: EventEstablished})
	return nil
}

func (c *fakeConn) Disconnect(pdata []byte) error {
	c.mu.Lock()
	got, derr := c.gotDREQ, c.disconnectErr
	c.mu.Unlock()
	if derr != nil {
		return derr
	}
	if got {
		c.send("DREP")
		c.peer.deliver(Event{Kind: EventDisconnected})
		c.deliver(Event{Kind: EventTimewaitExit})
		c.peer.deliver(Event{Kind: EventTimewaitExit})
		return nil
	}
	c.send("DREQ")
	c.peer.mu.Lock()
	c.peer.gotDREQ = true
	c.peer.mu.Unlock()
	c.peer.deliver(Event{Kind: EventDisconnected, PrivateData: pdata})
	return nil
}

func (c *fakeConn) Close() {
	c.mu.Lock()
	c.closed = true
	c.h = nil
	c.mu.Unlock()
}

// fakeResolver: one device per host; destinations in reach resolve to
// a MAC and hop limit 64, the others fail with the errno in unreach.
type fakeResolver struct {
	dev     Device
	unreach map[netip.Addr]syscall.Errno
}

func (r *fakeResolver) Device(a netip.Addr) (Device, error) {
	a = a.Unmap()
	if a.IsUnspecified() && a.Is4() == r.dev.GID.Is4() || a == r.dev.GID {
		return r.dev, nil
	}
	return Device{}, syscall.ENODEV
}

func (r *fakeResolver) Resolve(dev Device, dst netip.Addr, timeout time.Duration) ([6]byte, uint8, error) {
	if e, ok := r.unreach[dst]; ok {
		return [6]byte{}, 0, e
	}
	return [6]byte{2, 0, 0, 0, 0, dst.As4()[3]}, 64, nil
}

// fakeQP follows a QP's state and the attributes of each move.
type fakeQP struct {
	qpn   uint32
	mu    sync.Mutex
	state qp.State
	moves []qp.State
	attrs map[qp.State]verbs.QPAttr
	masks map[qp.State]verbs.AttrMask
	fail  qp.State // a move to this state fails (0: none)
	ud    bool     // a UD QP: UD's required attributes
}

func newFakeQP(qpn uint32) *fakeQP {
	return &fakeQP{qpn: qpn, attrs: map[qp.State]verbs.QPAttr{}, masks: map[qp.State]verbs.AttrMask{}}
}

func (q *fakeQP) QPN() uint32 { return q.qpn }

func (q *fakeQP) Modify(a *verbs.QPAttr, m verbs.AttrMask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m&verbs.AttrState == 0 {
		return syscall.EINVAL
	}
	if q.fail != 0 && a.State == q.fail {
		return syscall.EINVAL
	}
	req := qp.RequiredAttrs(q.state, a.State)
	if q.ud {
		req = qp.RequiredAttrsUD(q.state, a.State)
	}
	if a.State != qp.Err && m&req != req {
		return fmt.Errorf("move %v->%v lacks attributes %#x", q.state, a.State, req&^m)
	}
	if !qp.CanTransition(q.state, a.State) {
		return fmt.Errorf("illegal move %v->%v", q.state, a.State)
	}
	q.state = a.State
	q.moves = append(q.moves, a.State)
	q.attrs[a.State], q.masks[a.State] = *a, m
	return nil
}

func (q *fakeQP) State() qp.State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}
