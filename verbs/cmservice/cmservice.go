// Package cmservice is the connection manager librdmacm's state machine
// runs on (its Service interface, shapes.go), over the IBA CM that the
// softnic NIC runs on its QP1 (package dataplane's gsi.go), reached
// through a verbs.Context's CM channel: embedded or through the daemon.
// A goroutine reads the channel's events and turns each into the
// rdma_cm-level event of its connection's Handler.
package cmservice

import (
	"errors"
	"net/netip"
	"sync"
	"syscall"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// Options are the CM timing a Service's REQs ask for.
type Options struct {
	// ResponseTimeout is both CM response timeouts of a REQ as an IBA
	// exponent (4.096 us * 2^n); 0 is rdma_cm's 20 (4.3 s).
	ResponseTimeout uint8
	// MaxCMRetries of a REQ; 0 is rdma_cm's 15.
	MaxCMRetries uint8
}

// CM is a Service on one verbs context's CM channel.
type CM struct {
	ch  *verbs.CMChannel
	gid netip.Addr
	opt Options

	mu        sync.Mutex
	conns     map[uint32]*conn
	listeners map[uint64]*listener
	pending   map[uint32][]verbs.CMEvent // events of a Connect not yet returned
	closed    bool
	done      chan struct{}
}

// New opens a CM channel on ctx and starts reading its events.
func New(ctx *verbs.Context, opt Options) (*CM, error) {
	if opt.ResponseTimeout == 0 {
		opt.ResponseTimeout = ibcm.CMAResponseTimeout
	}
	if opt.MaxCMRetries == 0 {
		opt.MaxCMRetries = ibcm.CMAMaxCMRetries
	}
	dev, err := ctx.QueryDevice()
	if err != nil {
		return nil, err
	}
	ch, err := ctx.CreateCMChannel()
	if err != nil {
		return nil, err
	}
	m := &CM{ch: ch, gid: dev.GID.Unmap(), opt: opt, conns: map[uint32]*conn{}, listeners: map[uint64]*listener{},
		pending: map[uint32][]verbs.CMEvent{}, done: make(chan struct{})}
	go m.run()
	return m, nil
}

// Close destroys the channel: listeners stop, connections are let go
// (rejected, or disconnected with a DREQ), no Handler is called after it
// returns.
func (m *CM) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	err := m.ch.Destroy()
	<-m.done
	return err
}

// run delivers the channel's events until it is destroyed.
func (m *CM) run() {
	defer close(m.done)
	for {
		ev, err := m.ch.GetEvent()
		if err != nil {
			return
		}
		m.dispatch(ev)
	}
}

// listener is one Listen.
type listener struct {
	m   *CM
	sid uint64
	h   Handler
}

func (l *listener) Close() error {
	l.m.mu.Lock()
	if l.m.listeners[l.sid] != l {
		l.m.mu.Unlock()
		return nil
	}
	delete(l.m.listeners, l.sid)
	l.m.mu.Unlock()
	return l.m.ch.Unlisten(l.sid)
}

// conn is one connection.
type conn struct {
	m       *CM
	id      uint32
	h       Handler
	lh      Handler // passive: the listener's, until Accept
	gotDREQ bool    // the peer disconnected: the CM answered with the DREP
	closed  bool
	ud      bool // a SIDR request (sidr.go)
}

// Listen: REQs for serviceID on the port whose GID is local (or any)
// come to h as EventRequest.
func (m *CM) Listen(serviceID uint64, local netip.Addr, h Handler) (Listener, error) {
	if local.IsValid() && !local.IsUnspecified() && local.Unmap() != m.gid {
		return nil, syscall.EADDRNOTAVAIL
	}
	l := &listener{m: m, sid: serviceID, h: h}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, syscall.EBADF
	}
	if m.listeners[serviceID] != nil {
		return nil, syscall.EADDRINUSE
	}
	if err := m.ch.Listen(serviceID, 0); err != nil {
		if errors.Is(err, ibcm.ErrListening) {
			return nil, syscall.EADDRINUSE // another process's listener on the NIC
		}
		return nil, err
	}
	m.listeners[serviceID] = l
	return l, nil
}

// Connect sends a REQ along path carrying p; h gets the REP, REJ or the
// timeout.
func (m *CM) Connect(serviceID uint64, path Path, p ConnParam, h Handler) (Conn, error) {
	mtu := uint8(path.MTU)
	if mtu == 0 {
		mtu = uint8(qp.MTU1024)
	}
	primary := ibcm.RoCEPath(path.SGID.Unmap(), path.DGID.Unmap(), path.TrafficClass, path.HopLimit, p.LocalAckTimeout)
	primary.FlowLabel = path.FlowLabel
	cp := verbs.CMConnectParams{Peer: verbs.CMPeer{Addr: path.DGID.Unmap(), QPN: 1}, ServiceID: serviceID,
		QPN: p.QPN, StartingPSN: uint32(p.StartingPSN) & 0xFFFFFF, TransportServiceType: ibcm.TransportRC,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: m.opt.ResponseTimeout, LocalCMResponseTimeout: m.opt.ResponseTimeout,
		MaxCMRetries: m.opt.MaxCMRetries, RetryCount: p.RetryCount & 7, RNRRetryCount: p.RNRRetryCount & 7,
		FlowControl: p.FlowControl, SRQ: p.SRQ, PKey: path.PKey, PathMTU: mtu, Primary: primary,
		PrivateData: p.PrivateData}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, syscall.EBADF
	}
	m.mu.Unlock()
	id, err := m.ch.Connect(cp, path.DMAC)
	if err != nil {
		return nil, err
	}
	c := &conn{m: m, id: id, h: h}
	m.mu.Lock()
	m.conns[id] = c
	early := m.pending[id]
	delete(m.pending, id)
	m.mu.Unlock()
	for _, ev := range early { // events that came before Connect returned
		m.deliver(c, ev)
	}
	return c, nil
}

// dispatch finds the event's connection and delivers it.
func (m *CM) dispatch(ev verbs.CMEvent) {
	m.mu.Lock()
	if ev.Type == ibcm.EventSIDRREQReceived {
		m.sidrRequest(ev) // unlocks m.mu
		return
	}
	if ev.Type == ibcm.EventREQReceived {
		l := m.listeners[ev.ServiceID]
		if l == nil {
			m.mu.Unlock()
			m.ch.Reject(ev.ID, ibcm.RejInvalidServiceID, nil, nil)
			return
		}
		c := &conn{m: m, id: ev.ID, lh: l.h}
		m.conns[ev.ID] = c
		m.mu.Unlock()
		r := ev.REQ
		pd := append([]byte(nil), r.PrivateData[:]...)
		l.h(Event{Kind: EventRequest, Conn: c,
			Param: ConnParam{QPN: r.LocalQPN, StartingPSN: qp.PSN(r.StartingPSN), ResponderResources: r.ResponderResources,
				InitiatorDepth: r.InitiatorDepth, FlowControl: r.EndToEndFlowControl, RetryCount: r.RetryCount,
				RNRRetryCount: r.RNRRetryCount, SRQ: r.SRQ, LocalAckTimeout: r.Primary.LocalACKTimeout, PrivateData: pd},
			// The path seen from this side: the REQ's remote GID is ours.
			Path: Path{SGID: r.Primary.RemoteGID.Addr(), DGID: ev.Peer.Addr, DMAC: ev.PeerMAC,
				HopLimit: r.Primary.HopLimit, TrafficClass: r.Primary.TrafficClass, FlowLabel: r.Primary.FlowLabel,
				MTU: qp.MTU(r.PathMTU), PKey: r.PKey}})
		return
	}
	c := m.conns[ev.ID]
	if c == nil {
		if !ev.Last {
			m.pending[ev.ID] = append(m.pending[ev.ID], ev) // a Connect not yet returned
		}
		m.mu.Unlock()
		return
	}
	if ev.Last {
		delete(m.conns, ev.ID)
	}
	m.mu.Unlock()
	m.deliver(c, ev)
}

// deliver turns an ibcm event into the rdma_cm-level one (as rdma_cm's
// cma_ib_handler does) and calls the connection's Handler.
func (m *CM) deliver(c *conn, ev verbs.CMEvent) {
	out := Event{Conn: c}
	switch ev.Type {
	case ibcm.EventREPReceived:
		r := ev.REP
		out.Kind = EventReply
		out.Param = ConnParam{QPN: r.LocalQPN, StartingPSN: qp.PSN(r.StartingPSN), ResponderResources: r.ResponderResources,
			InitiatorDepth: r.InitiatorDepth, FlowControl: r.EndToEndFlowControl, RNRRetryCount: r.RNRRetryCount,
			SRQ: r.SRQ, PrivateData: append([]byte(nil), r.PrivateData[:]...)}
	case ibcm.EventRTUReceived, ibcm.EventUserEstablished:
		out.Kind = EventEstablished
	case ibcm.EventREJReceived:
		if ev.REJ.Reason == ibcm.RejTimeout { // the peer gave up waiting: rdma_cm's UNREACHABLE
			out.Kind, out.Status = EventUnreachable, -int(syscall.ETIMEDOUT)
		} else {
			out.Kind, out.Reason = EventRejected, ev.REJ.Reason
			out.PrivateData = append([]byte(nil), ev.REJ.PrivateData[:]...)
		}
	case ibcm.EventREQError, ibcm.EventREPError:
		out.Kind, out.Status = EventUnreachable, -int(syscall.ETIMEDOUT)
	case ibcm.EventDREQReceived:
		m.mu.Lock()
		c.gotDREQ = true
		m.mu.Unlock()
		out.Kind, out.PrivateData = EventDisconnected, ev.PrivateData
	case ibcm.EventDREPReceived:
		out.Kind, out.PrivateData = EventDisconnected, ev.PrivateData
	case ibcm.EventDREQError:
		out.Kind, out.Status = EventDisconnected, -int(syscall.ETIMEDOUT)
	case ibcm.EventTimewaitExit:
		out.Kind = EventTimewaitExit
	case ibcm.EventSIDRREPReceived, ibcm.EventSIDRREQError:
		out = sidrEvent(c, ev)
	default: // MRA_RECEIVED: the CM stretched its wait; nothing for rdma_cm
		return
	}
	m.mu.Lock()
	h := c.h
	if h == nil {
		h = c.lh
	}
	if c.closed {
		h = nil
	}
	m.mu.Unlock()
	if h != nil {
		h(out)
	}
}

// Accept sends the REP carrying p; h gets the connection's events.
func (c *conn) Accept(p ConnParam, h Handler) error {
	c.m.mu.Lock()
	c.h = h
	c.m.mu.Unlock()
	if c.ud {
		return c.sidrReply(ibcm.SIDRSuccess, p.QPN, p.QKey, p.PrivateData)
	}
	return errno(c.m.ch.Accept(c.id, verbs.CMAcceptParams{QPN: p.QPN, StartingPSN: uint32(p.StartingPSN) & 0xFFFFFF,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl,
		RNRRetryCount: p.RNRRetryCount & 7, SRQ: p.SRQ, PrivateData: p.PrivateData}))
}

// Reject sends a REJ.
func (c *conn) Reject(reason uint16, privateData []byte) error {
	if c.ud {
		return c.sidrReply(ibcm.SIDRReject, 0, 0, privateData)
	}
	err := c.m.ch.Reject(c.id, reason, nil, privateData)
	if err == nil {
		c.forget()
	}
	return errno(err)
}

// RTU sends the RTU: established.
func (c *conn) RTU() error { return errno(c.m.ch.RTU(c.id, nil)) }

// CommEstablished: the QP received before the RTU.
func (c *conn) CommEstablished() error { return errno(c.m.ch.Established(c.id)) }

// Disconnect sends a DREQ; after the peer's DREQ the CM has answered
// with the DREP already, and there is nothing to send.
func (c *conn) Disconnect(privateData []byte) error {
	c.m.mu.Lock()
	got := c.gotDREQ
	c.m.mu.Unlock()
	if got {
		return nil
	}
	return errno(c.m.ch.Disconnect(c.id, privateData))
}

// Close forgets the connection: an established one is disconnected
// first (DREQ), one waiting for this side's answer rejected; no event of
// it follows.
func (c *conn) Close() {
	c.m.mu.Lock()
	closed := c.closed
	c.closed = true
	c.m.mu.Unlock()
	if !closed {
		c.m.ch.DestroyConn(c.id)
		c.forget()
	}
}

func (c *conn) forget() {
	c.m.mu.Lock()
	if c.m.conns[c.id] == c {
		delete(c.m.conns, c.id)
	}
	c.m.mu.Unlock()
}

// errno maps the CM's state errors (a call the connection's state does
// not take, a connection already gone) to EINVAL, as rdma_cm returns.
func errno(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ibcm.ErrState), errors.Is(err, ibcm.ErrUnknownConn),
		errors.Is(err, verbs.ErrCMForeign), errors.Is(err, verbs.ErrBadHandle):
		return syscall.EINVAL
	}
	return err
}
