package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// This file is the communication manager the NIC runs on its QP1 (the
// IBA CM, package verbs/cm/ibcm; docs/rdmacm.md), as the verbs API
// offers it: what the kernel's ib_cm offers rdma_cm, through a CM event
// channel. Listeners and connections belong to the channel they are made
// through, and their events come only to it: a daemon delivers them to
// the client that made them, and when that client dies its listeners
// are closed and its connections rejected or disconnected (DREQ).
//
// A connection's QP is the caller's: the CM carries its number and PSN
// in the REQ or REP, and moves it to ERROR (its work requests flush with
// IBV_WC_WR_FLUSH_ERR) when the connection is disconnected from either
// side; moving it to RTR and RTS from the REQ's or REP's fields is the
// caller's, as with rdma_cm's rdma_init_qp_attr.

// CMEvent is one event of a CM channel: ibcm's event (its Type, the
// connection's comm ID, the peer, the received REQ, REP, REJ or MRA, the
// private data of an RTU, DREQ or DREP), Last when the connection is
// gone after it, and the peer's MAC (the source of its last MAD).
type CMEvent = dataplane.CMEvent

// CM parameters and descriptions, ibcm's.
type (
	CMConnectParams = ibcm.ConnectParams
	CMAcceptParams  = ibcm.AcceptParams
	CMConnInfo      = ibcm.ConnInfo
	CMPeer          = ibcm.Peer
	CMPath          = ibcm.Path
)

// CMChannel is a CM event channel (the ib_cm device file that rdma_cm's
// event channel sits on): its listeners, its connections and their
// events.
type CMChannel struct {
	ctx *Context
	fd  int    // eventfd: readable while events wait
	hup int    // daemon: a duplicate of the connection, polled for the daemon's hangup; -1 embedded
	h   uint32 // daemon handle

	mu       sync.Mutex
	closed   bool
	fdsShut  bool                // fd and hup are closed
	waiters  int                 // goroutines inside GetEvent
	q        []CMEvent           // events not yet returned
	ids      map[uint32]struct{} // embedded: the channel's connections
	services map[uint64]struct{} // embedded: its listeners
	handler  dataplane.CMHandler // embedded: the engine's hook
}

// ErrCMForeign is a comm ID that is not a connection of the channel.
var ErrCMForeign = errors.New("verbs: no such connection on this CM channel")

// CreateCMChannel opens a CM event channel.
func (c *Context) CreateCMChannel() (*CMChannel, error) {
	ch := &CMChannel{ctx: c, fd: -1, hup: -1}
	if c.remote != nil {
		return ch, c.remote.createCMChannel(ch)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("verbs: CM channel eventfd: %w", err)
	}
	ch.fd, ch.ids, ch.services = fd, map[uint32]struct{}{}, map[uint64]struct{}{}
	ch.handler = ch.deliver
	return ch, nil
}

// deliver is an embedded channel's engine hook (engine lock held).
func (ch *CMChannel) deliver(ev CMEvent) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return
	}
	if ev.Last {
		delete(ch.ids, ev.ID)
	} else if ev.Type == ibcm.EventREQReceived || ev.Type == ibcm.EventSIDRREQReceived {
		ch.ids[ev.ID] = struct{}{}
	}
	ch.q = append(ch.q, ev)
	unix.Write(ch.fd, eventValue[:])
}

// FD is the channel's file descriptor, readable while events wait (for
// epoll or poll). Do not read or close it.
func (ch *CMChannel) FD() int { return ch.fd }

// GetEvent blocks until the channel has an event and returns it. On an
// embedded context, something must run the engines meanwhile.
func (ch *CMChannel) GetEvent() (CMEvent, error) {
	ev, _, err := ch.getEvent(-1)
	return ev, err
}

// TryGetEvent waits at most timeout (0: not at all) for an event; ok is
// false when none came.
func (ch *CMChannel) TryGetEvent(timeout time.Duration) (ev CMEvent, ok bool, err error) {
	return ch.getEvent(max(timeout, 0))
}

func (ch *CMChannel) getEvent(timeout time.Duration) (CMEvent, bool, error) {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return CMEvent{}, false, ErrClosed
	}
	ch.waiters++
	ch.mu.Unlock()
	defer ch.leave()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var buf [8]byte
	for {
		// Drain the counter first, then look: an event queued after the
		// look writes the eventfd again and ends the poll below.
		unix.Read(ch.fd, buf[:])
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			return CMEvent{}, false, ErrClosed
		}
		if len(ch.q) == 0 && ch.ctx.remote != nil {
			ch.mu.Unlock()
			evs, err := ch.ctx.remote.cmGetEvents(ch)
			if err != nil {
				return CMEvent{}, false, err
			}
			ch.mu.Lock()
			ch.q = append(ch.q, evs...)
		}
		if len(ch.q) > 0 {
			ev := ch.q[0]
			ch.q = ch.q[1:]
			if len(ch.q) > 0 {
				unix.Write(ch.fd, eventValue[:]) // still readable
			}
			ch.mu.Unlock()
			return ev, true, nil
		}
		ch.mu.Unlock()
		fds := []unix.PollFd{{Fd: int32(ch.fd), Events: unix.POLLIN}}
		if ch.hup >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(ch.hup), Events: unix.POLLRDHUP})
		}
		var ts *unix.Timespec
		if timeout >= 0 {
			left := max(time.Until(deadline), 0)
			if timeout == 0 {
				left = 0
			}
			t := unix.NsecToTimespec(int64(left))
			ts = &t
		}
		n, err := unix.Ppoll(fds, ts, nil)
		if err != nil && err != unix.EINTR {
			return CMEvent{}, false, fmt.Errorf("verbs: get CM event: %w", err)
		}
		if len(fds) == 2 && fds[1].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
			return CMEvent{}, false, ErrDisconnected
		}
		if n == 0 && err == nil && ts != nil && (timeout == 0 || !time.Now().Before(deadline)) {
			return CMEvent{}, false, nil
		}
	}
}

// leave ends a GetEvent; the last one out of a channel its context
// closed closes its descriptors (the hangup duplicate holds the daemon
// connection open).
func (ch *CMChannel) leave() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.waiters--
	ch.shutFDs()
}

// shutFDs closes the descriptors of a closed channel nobody waits on
// (ch.mu held).
func (ch *CMChannel) shutFDs() {
	if !ch.closed || ch.waiters > 0 || ch.fdsShut {
		return
	}
	ch.fdsShut = true
	ch.closeFDs()
}

// engine is the embedded channel's engine, or nil on a daemon context.
func (ch *CMChannel) engine() (*dataplane.Engine, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrClosed
	}
	return ch.ctx.e, nil
}

// owns checks that id is a connection of an embedded channel.
func (ch *CMChannel) owns(id uint32) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if _, ok := ch.ids[id]; !ok {
		return fmt.Errorf("%w: %d", ErrCMForeign, id)
	}
	return nil
}

func (ch *CMChannel) forget(id uint32) {
	ch.mu.Lock()
	delete(ch.ids, id)
	ch.mu.Unlock()
}

// Listen makes REQs for serviceID (under mask; 0: all 64 bits) arrive on
// the channel as EventREQReceived, each a new connection of the channel.
func (ch *CMChannel) Listen(serviceID, mask uint64) error {
	e, err := ch.engine()
	if err != nil {
		return err
	}
	if e == nil {
		return ch.ctx.remote.cmCall(proto.OpCMListen, proto.CMListenArgs{Channel: ch.h, ServiceID: serviceID, Mask: mask}, nil)
	}
	if err := e.CMListen(serviceID, mask, ch.handler); err != nil {
		return err
	}
	ch.mu.Lock()
	ch.services[serviceID] = struct{}{}
	ch.mu.Unlock()
	return nil
}

// Unlisten stops Listen's REQs; connections already made live on.
func (ch *CMChannel) Unlisten(serviceID uint64) error {
	e, err := ch.engine()
	if err != nil {
		return err
	}
	if e == nil {
		return ch.ctx.remote.cmCall(proto.OpCMUnlisten, proto.CMListenArgs{Channel: ch.h, ServiceID: serviceID}, nil)
	}
	ch.mu.Lock()
	_, mine := ch.services[serviceID]
	ch.mu.Unlock()
	if !mine {
		return fmt.Errorf("%w: 0x%016x on this channel", ibcm.ErrNotListen, serviceID)
	}
	if err := e.CMUnlisten(serviceID); err != nil {
		return err
	}
	ch.mu.Lock()
	delete(ch.services, serviceID)
	ch.mu.Unlock()
	return nil
}

// Connect sends a REQ (ibcm.CM.Connect) and returns the connection's
// comm ID; its answer arrives as EventREPReceived, EventREJReceived or
// EventREQError. p.QPN is the caller's RC QP; p.Peer.QPN 0 means QP1.
// dmac, if not zero, is the Ethernet address of the next hop to
// p.Peer.Addr; zero: the NIC's neighbours, or the source MAC of the
// peer's last MAD.
func (ch *CMChannel) Connect(p CMConnectParams, dmac [6]byte) (uint32, error) {
	e, err := ch.engine()
	if err != nil {
		return 0, err
	}
	if e == nil {
		raw, err := json.Marshal(p)
		if err != nil {
			return 0, err
		}
		var res proto.CMConnectResult
		err = ch.ctx.remote.cmCall(proto.OpCMConnect, proto.CMConnectArgs{Channel: ch.h, Params: raw, DMAC: dmac}, &res)
		return res.ID, err
	}
	return ch.track(e.CMConnect(p, dmac, ch.handler))
}

// track records id, a request the channel's embedded engine just made,
// as the channel's (closing the channel closes it), unless err.
func (ch *CMChannel) track(id uint32, err error) (uint32, error) {
	if err == nil {
		ch.mu.Lock()
		if ch.ids != nil {
			ch.ids[id] = struct{}{}
		}
		ch.mu.Unlock()
	}
	return id, err
}

// Accept answers EventREQReceived id with a REP; the RTU arrives as
// EventRTUReceived.
func (ch *CMChannel) Accept(id uint32, p CMAcceptParams) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return ch.connOp(proto.OpCMAccept, id, func(e *dataplane.Engine) error { return e.CMAccept(id, p, nil) },
		proto.CMAcceptArgs{Channel: ch.h, ID: id, Params: raw})
}

// Reject answers a REQ (passive) or a REP (active) with a REJ of reason
// (ibcm.RejConsumerDefined for an application's), ARI and private data;
// the connection is gone.
func (ch *CMChannel) Reject(id uint32, reason uint16, ari, priv []byte) error {
	err := ch.connOp(proto.OpCMReject, id, func(e *dataplane.Engine) error { return e.CMReject(id, reason, ari, priv) },
		proto.CMConnArgs{Channel: ch.h, ID: id, Reason: reason, ARI: ari, PrivateData: priv})
	if err == nil && ch.ctx.e != nil {
		ch.forget(id)
	}
	return err
}

// RTU completes the active side after EventREPReceived, once its QP is
// in RTS: the connection is established.
func (ch *CMChannel) RTU(id uint32, priv []byte) error {
	return ch.connOp(proto.OpCMRTU, id, func(e *dataplane.Engine) error { return e.CMSendRTU(id, priv) },
		proto.CMConnArgs{Channel: ch.h, ID: id, PrivateData: priv})
}

// Established tells the passive side's CM that its QP received a packet
// before the RTU (IBV_EVENT_COMM_EST): EventUserEstablished follows.
func (ch *CMChannel) Established(id uint32) error {
	return ch.connOp(proto.OpCMEstablished, id, func(e *dataplane.Engine) error { return e.CMEstablished(id) },
		proto.CMConnArgs{Channel: ch.h, ID: id})
}

// Disconnect moves the connection's QP to ERROR and sends a DREQ: the
// DREP arrives as EventDREPReceived (or the DREQ's retries run out,
// EventDREQError), then EventTimewaitExit.
func (ch *CMChannel) Disconnect(id uint32, priv []byte) error {
	return ch.connOp(proto.OpCMDisconnect, id, func(e *dataplane.Engine) error { return e.CMDisconnect(id, priv) },
		proto.CMConnArgs{Channel: ch.h, ID: id, PrivateData: priv})
}

// DestroyConn is ib_destroy_cm_id: the channel lets the connection go. A
// REQ or REP waiting for this side's answer is rejected, an established
// connection disconnected (DREQ, its QP to ERROR), one already
// disconnecting left to finish; no more events of it come.
func (ch *CMChannel) DestroyConn(id uint32) error {
	err := ch.connOp(proto.OpCMDestroy, id, func(e *dataplane.Engine) error { return e.CMClose(id) },
		proto.CMConnArgs{Channel: ch.h, ID: id})
	if ch.ctx.e != nil {
		ch.forget(id)
	}
	return err
}

// Info describes a connection of the channel.
func (ch *CMChannel) Info(id uint32) (CMConnInfo, error) {
	var info CMConnInfo
	e, err := ch.engine()
	switch {
	case err != nil:
	case e == nil:
		err = ch.ctx.remote.cmCall(proto.OpCMInfo, proto.CMConnArgs{Channel: ch.h, ID: id}, &info)
	default:
		if err = ch.owns(id); err == nil {
			var ok bool
			if info, ok = e.CMInfo(id); !ok {
				err = fmt.Errorf("%w: %d", ibcm.ErrUnknownConn, id)
			}
		}
	}
	return info, err
}

// connOp runs an operation on connection id of the channel: embedded,
// local after checking that the channel owns id; daemon, the RPC op with
// args.
func (ch *CMChannel) connOp(op string, id uint32, local func(*dataplane.Engine) error, args any) error {
	e, err := ch.engine()
	if err != nil {
		return err
	}
	if e == nil {
		return ch.ctx.remote.cmCall(op, args, nil)
	}
	if err := ch.owns(id); err != nil {
		return err
	}
	return local(e)
}

// Destroy closes the channel: its listeners stop, its connections are
// let go as DestroyConn does, its descriptor is closed.
func (ch *CMChannel) Destroy() error {
	ch.mu.Lock()
	if ch.closed { // the context closed it
		ch.mu.Unlock()
		return ErrClosed
	}
	ch.closed = true
	ids, services := ch.ids, ch.services
	ch.ids, ch.services, ch.q = nil, nil, nil
	unix.Write(ch.fd, eventValue[:]) // a blocked GetEvent returns ErrClosed
	ch.mu.Unlock()
	var err error
	if r := ch.ctx.remote; r != nil {
		err = r.cmCall(proto.OpCMDestroyChannel, proto.CMChannelArgs{Channel: ch.h}, nil)
		r.mu.Lock()
		r.cmChs = remove(r.cmChs, ch)
		r.mu.Unlock()
	} else {
		e := ch.ctx.e
		for sid := range services {
			e.CMUnlisten(sid)
		}
		for id := range ids {
			e.CMClose(id)
		}
	}
	ch.mu.Lock()
	ch.shutFDs()
	ch.mu.Unlock()
	return err
}

func (ch *CMChannel) closeFDs() {
	unix.Close(ch.fd)
	if ch.hup >= 0 {
		unix.Close(ch.hup)
	}
}

// createCMChannel: the daemon makes the channel's eventfd and passes it;
// the channel also keeps a duplicate of the connection, which GetEvent
// polls for the daemon's hangup.
func (r *remote) createCMChannel(ch *CMChannel) error {
	var h proto.Handle
	fds, err := r.call(proto.OpCMCreateChannel, nil, nil, &h)
	if err != nil {
		return err
	}
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return fmt.Errorf("%w: %d descriptors with a CM channel, want 1", proto.ErrProtocol, len(fds))
	}
	hup, err := r.dupConn()
	if err != nil {
		unix.Close(fds[0])
		r.call(proto.OpCMDestroyChannel, proto.CMChannelArgs{Channel: h.Handle}, nil, nil)
		return fmt.Errorf("verbs: CM channel: %w", err)
	}
	ch.fd, ch.hup, ch.h = fds[0], hup, h.Handle
	r.mu.Lock()
	r.cmChs = append(r.cmChs, ch)
	r.mu.Unlock()
	return nil
}

// cmGetEvents takes the events the daemon holds for ch.
func (r *remote) cmGetEvents(ch *CMChannel) ([]CMEvent, error) {
	var res proto.CMGetEventsResult
	if _, err := r.call(proto.OpCMGetEvents, proto.CMChannelArgs{Channel: ch.h}, nil, &res); err != nil {
		return nil, err
	}
	evs := make([]CMEvent, len(res.Events))
	for i, ev := range res.Events {
		if err := json.Unmarshal(ev.Event, &evs[i].Event); err != nil {
			return nil, fmt.Errorf("verbs: %s: %w: %v", proto.OpCMGetEvents, proto.ErrProtocol, err)
		}
		evs[i].Last, evs[i].PeerMAC = ev.Last, ev.PeerMAC
	}
	return evs, nil
}

// cmCall is a CM operation's RPC.
func (r *remote) cmCall(op string, args, result any) error {
	_, err := r.call(op, args, nil, result)
	return err
}

// shutCM marks a daemon context's CM channels closed when it closes; a
// blocked GetEvent returns ErrClosed.
func (r *remote) shutCM() {
	r.mu.Lock()
	chs := r.cmChs
	r.cmChs = nil
	r.mu.Unlock()
	for _, ch := range chs {
		ch.mu.Lock()
		if !ch.closed {
			ch.closed = true
			unix.Write(ch.fd, eventValue[:])
		}
		ch.shutFDs()
		ch.mu.Unlock()
	}
}
