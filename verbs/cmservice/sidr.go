package cmservice

import (
	"syscall"

	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// SIDR (IBA 12.11) for rdma_cm's UDP port space, as Linux's rdma_cm
// uses it (cma_resolve_ib_udp, cma_sidr_rep_handler, cma_send_sidr_rep):
// the active side's SIDR_REQ names the service ID of the port and
// carries the RDMA IP CM header and the program's private data; the
// passive side's SIDR_REP carries its UD QP's number and Q_Key. A
// SIDR_REP with a non-zero status is rdma_cm's UNREACHABLE with that
// status, no answer after the retries UNREACHABLE with -ETIMEDOUT.

// Resolve sends a SIDR_REQ for serviceID along path; h gets EventReply
// (the SIDR_REP's QPN, Q_Key and private data) or EventUnreachable.
func (m *CM) Resolve(serviceID uint64, path Path, privateData []byte, h Handler) (Conn, error) {
	p := verbs.CMSIDRParams{Peer: verbs.CMPeer{Addr: path.DGID.Unmap(), QPN: 1}, ServiceID: serviceID,
		PKey: path.PKey, Timeout: m.opt.ResponseTimeout, MaxCMRetries: int(m.opt.MaxCMRetries), PrivateData: privateData}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, syscall.EBADF
	}
	m.mu.Unlock()
	id, err := m.ch.SIDRResolve(p, path.DMAC)
	if err != nil {
		return nil, errno(err)
	}
	c := &conn{m: m, id: id, h: h, ud: true}
	m.mu.Lock()
	m.conns[id] = c
	early := m.pending[id]
	delete(m.pending, id)
	m.mu.Unlock()
	for _, ev := range early { // the answer came before SIDRResolve returned
		m.deliver(c, ev)
	}
	return c, nil
}

// sidrRequest hands a SIDR_REQ to its listener as an EventRequest with
// UD set; one for no listener here is answered with status 1 (the
// service ID is not supported). Called with m.mu held; unlocks it.
func (m *CM) sidrRequest(ev verbs.CMEvent) {
	l := m.listeners[ev.ServiceID]
	if l == nil {
		m.mu.Unlock()
		m.ch.SIDRReply(ev.ID, ibcm.SIDRUnsupported, 0, 0, nil)
		return
	}
	c := &conn{m: m, id: ev.ID, lh: l.h, ud: true}
	m.conns[ev.ID] = c
	m.mu.Unlock()
	r := ev.SIDRREQ
	l.h(Event{Kind: EventRequest, UD: true, Conn: c,
		Param: ConnParam{PrivateData: append([]byte(nil), r.PrivateData[:]...)},
		// The path back to the requester: a SIDR_REQ names no GIDs; the
		// peer is the GRH's source, its MAC the frame's.
		Path: Path{SGID: m.gid, DGID: ev.Peer.Addr, DMAC: ev.PeerMAC, PKey: r.PKey}})
}

// sidrEvent is a SIDR request's answer as rdma_cm shows it.
func sidrEvent(c *conn, ev verbs.CMEvent) Event {
	out := Event{Conn: c}
	if ev.Type == ibcm.EventSIDRREQError {
		out.Kind, out.Status = EventUnreachable, -int(syscall.ETIMEDOUT)
		return out
	}
	r := ev.SIDRREP
	pd := append([]byte(nil), r.PrivateData[:]...)
	if r.Status != ibcm.SIDRSuccess {
		out.Kind, out.Status, out.PrivateData = EventUnreachable, int(r.Status), pd
		return out
	}
	out.Kind = EventReply
	out.Param = ConnParam{QPN: r.QPN, QKey: r.QKey, PrivateData: pd}
	return out
}

// sidrReply answers a received SIDR_REQ; the request is gone after it.
func (c *conn) sidrReply(status uint8, qpn, qkey uint32, priv []byte) error {
	if len(priv) > ibcm.SIDRREPPrivateDataSize {
		return syscall.EINVAL
	}
	err := c.m.ch.SIDRReply(c.id, status, qpn, qkey, priv)
	if err == nil {
		c.m.mu.Lock()
		c.closed = true // nothing follows a SIDR_REP
		c.m.mu.Unlock()
		c.forget()
	}
	return errno(err)
}
