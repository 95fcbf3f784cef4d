package verbsd

import (
	"encoding/json"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// This file serves the communication manager the NIC runs on QP1
// (dataplane/gsi.go) to clients (protocol version 7): CM event channels,
// each an eventfd the client holds a duplicate of, and the listeners and
// connections made through them. A channel's events are queued here and
// taken with cm_get_events; the eventfd is written when the queue was
// empty. Only the client that made a listener or connection can name
// it, and a connection carries only that client's QPs. When the client
// goes, its listeners are closed and its connections let go as
// ib_destroy_cm_id does (rejected, or disconnected with a DREQ).

const (
	// maxCMChannels bounds a client's CM channels.
	maxCMChannels = 64
	// maxCMQueue bounds the events a channel holds for a client that
	// does not read them; later ones are dropped (and logged once).
	maxCMQueue = 4096
)

// cmChanObj is one client's CM channel.
type cmChanObj struct {
	h   uint32
	fd  int
	own *client

	// mu is a leaf lock: the engine's CM handler takes it with the
	// engine lock held.
	mu       sync.Mutex
	events   []proto.CMEvent
	ids      map[uint32]struct{} // its connections
	services map[uint64]struct{} // its listeners
	dropped  uint64
	handler  dataplane.CMHandler
}

func (ch *cmChanObj) deliver(ev dataplane.CMEvent) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.ids == nil { // destroyed
		return
	}
	if ev.Last {
		delete(ch.ids, ev.ID)
	} else if ev.Type == ibcm.EventREQReceived || ev.Type == ibcm.EventSIDRREQReceived {
		ch.ids[ev.ID] = struct{}{}
	}
	if len(ch.events) >= maxCMQueue {
		if ch.dropped == 0 {
			ch.own.log.Warn("CM channel full: the client does not read its events; dropping", "channel", ch.h)
		}
		ch.dropped++
		return
	}
	raw, err := json.Marshal(ev.Event)
	if err != nil { // cannot happen: ibcm.Event is plain data
		ch.dropped++
		return
	}
	if len(ch.events) == 0 {
		unix.Write(ch.fd, eventValue[:])
	}
	ch.events = append(ch.events, proto.CMEvent{Event: raw, Last: ev.Last, PeerMAC: ev.PeerMAC})
}

func (ch *cmChanObj) owns(id uint32) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if _, ok := ch.ids[id]; !ok {
		return badHandle("CM connection", id)
	}
	return nil
}

// cmOp serves one cm_* request.
func (s *Server) cmOp(c *client, op string, raw json.RawMessage) (any, reply, error) {
	if c.vers < 7 {
		return nil, reply{}, fmt.Errorf("%w: %s needs protocol version 7", proto.ErrProtocol, op)
	}
	args := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%w: %s arguments: %v", proto.ErrProtocol, op, err)
		}
		return nil
	}
	if op == proto.OpCMCreateChannel {
		return s.cmCreateChannel(c)
	}
	// Every other op names a channel (and most a connection of it).
	var a proto.CMConnArgs
	var chArgs proto.CMChannelArgs
	var listen proto.CMListenArgs
	var conn proto.CMConnectArgs
	var acc proto.CMAcceptArgs
	var cp ibcm.ConnectParams
	var ap ibcm.AcceptParams
	var sidrRes proto.CMSIDRResolveArgs
	var sp ibcm.SIDRParams
	var sidrRep proto.CMSIDRReplyArgs
	var h uint32
	switch op {
	case proto.OpCMSIDRResolve:
		if err := args(&sidrRes); err != nil {
			return nil, reply{}, err
		}
		if err := json.Unmarshal(sidrRes.Params, &sp); err != nil {
			return nil, reply{}, fmt.Errorf("%w: %s params: %v", proto.ErrProtocol, op, err)
		}
		h = sidrRes.Channel
	case proto.OpCMSIDRReply:
		if err := args(&sidrRep); err != nil {
			return nil, reply{}, err
		}
		h, a.ID = sidrRep.Channel, sidrRep.ID
	case proto.OpCMDestroyChannel, proto.OpCMGetEvents:
		if err := args(&chArgs); err != nil {
			return nil, reply{}, err
		}
		h = chArgs.Channel
	case proto.OpCMListen, proto.OpCMUnlisten:
		if err := args(&listen); err != nil {
			return nil, reply{}, err
		}
		h = listen.Channel
	case proto.OpCMConnect:
		if err := args(&conn); err != nil {
			return nil, reply{}, err
		}
		if err := json.Unmarshal(conn.Params, &cp); err != nil {
			return nil, reply{}, fmt.Errorf("%w: %s params: %v", proto.ErrProtocol, op, err)
		}
		h = conn.Channel
	case proto.OpCMAccept:
		if err := args(&acc); err != nil {
			return nil, reply{}, err
		}
		if err := json.Unmarshal(acc.Params, &ap); err != nil {
			return nil, reply{}, fmt.Errorf("%w: %s params: %v", proto.ErrProtocol, op, err)
		}
		h, a.ID = acc.Channel, acc.ID
	default:
		if err := args(&a); err != nil {
			return nil, reply{}, err
		}
		h = a.Channel
	}
	s.mu.Lock()
	ch := c.cm[h]
	s.mu.Unlock()
	if ch == nil {
		return nil, reply{}, badHandle("CM channel", h)
	}
	switch op {
	case proto.OpCMDestroyChannel:
		s.mu.Lock()
		delete(c.cm, h)
		s.mu.Unlock()
		s.cmClose(ch)
		return nil, reply{}, nil
	case proto.OpCMGetEvents:
		ch.mu.Lock()
		n := min(len(ch.events), proto.CMMaxEvents)
		if chArgs.Max > 0 {
			n = min(n, chArgs.Max)
		}
		res := proto.CMGetEventsResult{Events: append([]proto.CMEvent(nil), ch.events[:n]...)}
		ch.events = append(ch.events[:0], ch.events[n:]...)
		if len(ch.events) > 0 {
			unix.Write(ch.fd, eventValue[:]) // more wait
		}
		ch.mu.Unlock()
		return res, reply{}, nil
	case proto.OpCMListen:
		if err := s.e.CMListen(listen.ServiceID, listen.Mask, ch.handler); err != nil {
			return nil, reply{}, err
		}
		ch.mu.Lock()
		ch.services[listen.ServiceID] = struct{}{}
		ch.mu.Unlock()
		return nil, reply{}, nil
	case proto.OpCMUnlisten:
		ch.mu.Lock()
		_, mine := ch.services[listen.ServiceID]
		ch.mu.Unlock()
		if !mine {
			return nil, reply{}, fmt.Errorf("%w: 0x%016x on this channel", ibcm.ErrNotListen, listen.ServiceID)
		}
		if err := s.e.CMUnlisten(listen.ServiceID); err != nil {
			return nil, reply{}, err
		}
		ch.mu.Lock()
		delete(ch.services, listen.ServiceID)
		ch.mu.Unlock()
		return nil, reply{}, nil
	case proto.OpCMConnect:
		if err := s.ownsQPN(c, cp.QPN); err != nil {
			return nil, reply{}, err
		}
		id, err := s.e.CMConnect(cp, conn.DMAC, ch.handler)
		if err != nil {
			return nil, reply{}, err
		}
		ch.mu.Lock()
		ch.ids[id] = struct{}{}
		ch.mu.Unlock()
		return proto.CMConnectResult{ID: id}, reply{}, nil
	case proto.OpCMSIDRResolve:
		id, err := s.e.CMSIDRResolve(sp, sidrRes.DMAC, ch.handler)
		if err != nil {
			return nil, reply{}, err
		}
		ch.mu.Lock()
		ch.ids[id] = struct{}{}
		ch.mu.Unlock()
		return proto.CMConnectResult{ID: id}, reply{}, nil
	}
	if err := ch.owns(a.ID); err != nil {
		return nil, reply{}, err
	}
	var err error
	switch op {
	case proto.OpCMAccept:
		if err = s.ownsQPN(c, ap.QPN); err == nil {
			err = s.e.CMAccept(acc.ID, ap, nil)
		}
	case proto.OpCMReject:
		err = s.e.CMReject(a.ID, a.Reason, a.ARI, a.PrivateData)
	case proto.OpCMSIDRReply:
		if sidrRep.Status == ibcm.SIDRSuccess {
			err = s.ownsQPN(c, sidrRep.QPN)
		}
		if err == nil {
			err = s.e.CMSIDRReply(a.ID, sidrRep.Status, sidrRep.QPN, sidrRep.QKey, sidrRep.PrivateData)
		}
	case proto.OpCMRTU:
		err = s.e.CMSendRTU(a.ID, a.PrivateData)
	case proto.OpCMEstablished:
		err = s.e.CMEstablished(a.ID)
	case proto.OpCMDisconnect:
		err = s.e.CMDisconnect(a.ID, a.PrivateData)
	case proto.OpCMDestroy:
		err = s.e.CMClose(a.ID)
	case proto.OpCMInfo:
		info, ok := s.e.CMInfo(a.ID)
		if !ok {
			return nil, reply{}, fmt.Errorf("%w: %d", ibcm.ErrUnknownConn, a.ID)
		}
		return info, reply{}, nil
	default:
		return nil, reply{}, fmt.Errorf("%w: unknown operation %q", proto.ErrProtocol, op)
	}
	if op == proto.OpCMDestroy || ((op == proto.OpCMReject || op == proto.OpCMSIDRReply) && err == nil) {
		ch.mu.Lock()
		delete(ch.ids, a.ID)
		ch.mu.Unlock()
	}
	return nil, reply{}, err
}

// ownsQPN checks that qpn is one of c's QPs: a client's connection
// carries (and its disconnect moves to ERROR) only its own QPs.
func (s *Server) ownsQPN(c *client, qpn uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range c.qps {
		if q.eq.QPN() == qpn {
			return nil
		}
	}
	return fmt.Errorf("%w: QP %#x is not one of this client's", proto.ErrBadHandle, qpn)
}

func (s *Server) cmCreateChannel(c *client) (any, reply, error) {
	s.mu.Lock()
	n := len(c.cm)
	s.mu.Unlock()
	if n >= maxCMChannels {
		return nil, reply{}, fmt.Errorf("%w: %d CM channels per client", proto.ErrLimit, maxCMChannels)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, reply{}, fmt.Errorf("CM channel eventfd: %w", err)
	}
	ch := &cmChanObj{fd: fd, own: c, ids: map[uint32]struct{}{}, services: map[uint64]struct{}{}}
	ch.handler = ch.deliver
	s.mu.Lock()
	ch.h = c.handle()
	if c.cm == nil {
		c.cm = map[uint32]*cmChanObj{}
	}
	c.cm[ch.h] = ch
	s.mu.Unlock()
	// The client gets a duplicate; ours closes with the channel.
	return proto.Handle{Handle: ch.h}, reply{fds: []int{fd}}, nil
}

// cmClose closes a channel's listeners and lets its connections go (not
// under s.mu: it calls the engine, whose handler takes ch.mu).
func (s *Server) cmClose(ch *cmChanObj) {
	ch.mu.Lock()
	ids, services := ch.ids, ch.services
	ch.ids, ch.services, ch.events = nil, nil, nil
	ch.mu.Unlock()
	for sid := range services {
		if err := s.e.CMUnlisten(sid); err != nil {
			ch.own.log.Warn("CM unlisten", "service_id", fmt.Sprintf("0x%016x", sid), "err", err)
		}
	}
	for id := range ids {
		s.e.CMClose(id) // a connection already gone is no error worth a line
	}
	unix.Close(ch.fd)
}

// dropCM closes every CM channel of a client that went away.
func (s *Server) dropCM(c *client) {
	s.mu.Lock()
	chs := c.cm
	c.cm = nil
	s.mu.Unlock()
	for _, ch := range chs {
		s.cmClose(ch)
	}
}
