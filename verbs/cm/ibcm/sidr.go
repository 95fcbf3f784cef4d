package ibcm

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/dataplane/timer"
)

// SIDR (IBA 12.11): rdma_cm's UDP port space resolves a service ID to a UD
// QPN and Q_Key with one SIDR_REQ / SIDR_REP exchange, no connection.

// sidrReq is an outstanding SIDR_REQ (active side), keyed by request ID.
type sidrReq struct {
	cm          *CM
	id          uint32
	peer        Peer
	serviceID   uint64
	tid         uint64
	timeout     time.Duration
	retriesLeft int
	out         [MADSize]byte
	timer       timer.Timer
}

// sidrIn is a received SIDR_REQ waiting for SIDRReply (passive side).
type sidrIn struct {
	id        uint32
	peer      Peer
	requestID uint32
	serviceID uint64
	tid       uint64
	req       [MADSize]byte // the SIDR_REQ as received: its retries are the same bytes
}

type sidrKey struct {
	requestID uint32
	addr      netip.Addr
}

// SIDRParams is a SIDR_REQ (ib_cm_sidr_req_param).
type SIDRParams struct {
	Peer         Peer
	ServiceID    uint64
	PKey         uint16 // 0 means 0xFFFF
	Timeout      uint8  // IBA exponent: the wait for the SIDR_REP, plus transit
	MaxCMRetries int
	PrivateData  []byte // at most 216 bytes (rdma_cm: its 36-byte header first)
}

// SIDRResolve sends a SIDR_REQ and returns its request ID; the answer is
// EventSIDRREPReceived, or EventSIDRREQError once the retries run out.
func (c *CM) SIDRResolve(now time.Duration, p SIDRParams) (uint32, error) {
	if len(p.PrivateData) > SIDRREQPrivateDataSize {
		return 0, fmt.Errorf("%w: %d bytes, SIDR_REQ carries %d", ErrPrivateData, len(p.PrivateData), SIDRREQPrivateDataSize)
	}
	id, err := c.allocID()
	if err != nil {
		return 0, err
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = 0xFFFF
	}
	m := SIDRREQ{RequestID: id, PKey: pkey, ServiceID: p.ServiceID}
	copy(m.PrivateData[:], p.PrivateData)
	s := &sidrReq{cm: c, id: id, peer: p.Peer, serviceID: p.ServiceID, tid: c.newTID(),
		timeout: IBATime(p.Timeout) + c.transit(), retriesLeft: p.MaxCMRetries}
	if err := Marshal(s.out[:], s.tid, &m); err != nil {
		return 0, err
	}
	s.timer.Init(s.fire)
	c.sidr[id] = s
	c.ctr.TxMsgs[AttrIndex(AttrSIDRREQ)]++
	c.transmit(s.peer, s.out[:])
	c.wheel.Schedule(&s.timer, now+s.timeout)
	return id, nil
}

func (s *sidrReq) fire(now time.Duration) {
	c := s.cm
	if s.retriesLeft > 0 {
		s.retriesLeft--
		c.ctr.TxRetries[AttrIndex(AttrSIDRREQ)]++
		c.transmit(s.peer, s.out[:])
		c.wheel.Schedule(&s.timer, now+s.timeout)
		return
	}
	delete(c.sidr, s.id)
	c.emit(Event{Type: EventSIDRREQError, ID: s.id, Peer: s.peer, ServiceID: s.serviceID})
}

func (c *CM) onSIDRREQ(now time.Duration, from Peer, tid uint64, m *SIDRREQ, raw []byte) {
	key := sidrKey{m.RequestID, from.Addr}
	if c.sidrInKey == nil {
		c.sidrInKey, c.sidrIn = map[sidrKey]uint32{}, map[uint32]*sidrIn{}
	}
	if _, ok := c.sidrInKey[key]; ok {
		c.dup(AttrSIDRREQ) // still waiting for SIDRReply
		return
	}
	if rep := c.sidrDone.find(now, key, raw); rep != nil {
		// Answered already: the SIDR_REP was lost and the peer retried.
		// Send the same answer again rather than make a second request
		// (its consumer may have stopped taking requests).
		c.dup(AttrSIDRREQ)
		c.ctr.TxRetries[AttrIndex(AttrSIDRREP)]++
		c.transmit(from, rep[:])
		return
	}
	sid, ok := c.listening(m.ServiceID)
	if !ok {
		rep := SIDRREP{RequestID: m.RequestID, Status: SIDRUnsupported, ServiceID: m.ServiceID}
		_ = c.send(from, tid, &rep, nil)
		return
	}
	id, err := c.allocID()
	if err != nil {
		rep := SIDRREP{RequestID: m.RequestID, Status: SIDRReject, ServiceID: m.ServiceID}
		_ = c.send(from, tid, &rep, nil)
		return
	}
	c.sidrInKey[key] = id
	in := &sidrIn{id: id, peer: from, requestID: m.RequestID, serviceID: m.ServiceID, tid: tid}
	copy(in.req[:], raw)
	c.sidrIn[id] = in
	req := *m
	c.emit(Event{Type: EventSIDRREQReceived, ID: id, Peer: from, ServiceID: sid, SIDRREQ: &req})
}

// SIDRReply answers the SIDR_REQ of EventSIDRREQReceived id with the UD
// QPN and Q_Key (status SIDRSuccess) or a failure status.
func (c *CM) SIDRReply(now time.Duration, id uint32, status uint8, qpn, qkey uint32, priv []byte) error {
	in := c.sidrIn[id]
	if in == nil {
		return fmt.Errorf("%w: SIDR %d", ErrUnknownConn, id)
	}
	if len(priv) > SIDRREPPrivateDataSize {
		return fmt.Errorf("%w: %d bytes, SIDR_REP carries %d", ErrPrivateData, len(priv), SIDRREPPrivateDataSize)
	}
	rep := SIDRREP{RequestID: in.requestID, Status: status, QPN: qpn, ServiceID: in.serviceID, QKey: qkey}
	copy(rep.PrivateData[:], priv)
	var out [MADSize]byte
	if err := c.send(in.peer, in.tid, &rep, &out); err != nil {
		return err
	}
	c.sidrDone.add(now, sidrKey{in.requestID, in.peer.Addr}, &in.req, &out)
	delete(c.sidrIn, id)
	delete(c.sidrInKey, sidrKey{in.requestID, in.peer.Addr})
	return nil
}

func (c *CM) onSIDRREP(now time.Duration, from Peer, m *SIDRREP) {
	s := c.sidr[m.RequestID]
	if s == nil || s.peer.Addr.Unmap() != from.Addr.Unmap() {
		c.ctr.RxUnmatched++
		return
	}
	c.wheel.Stop(&s.timer)
	delete(c.sidr, s.id)
	rep := *m
	c.emit(Event{Type: EventSIDRREPReceived, ID: s.id, Peer: s.peer, ServiceID: s.serviceID, SIDRREP: &rep})
}

// SIDRCancel is ib_destroy_cm_id on a SIDR request: an outstanding
// SIDR_REQ of this side is forgotten (no retry, no event), a received one
// not yet answered gets a SIDR_REP with status SIDRReject, as Linux's
// cm_destroy_id answers it.
func (c *CM) SIDRCancel(now time.Duration, id uint32) error {
	if s := c.sidr[id]; s != nil {
		c.wheel.Stop(&s.timer)
		delete(c.sidr, id)
		return nil
	}
	if c.sidrIn[id] != nil {
		return c.SIDRReply(now, id, SIDRReject, 0, 0, nil)
	}
	return fmt.Errorf("%w: SIDR %d", ErrUnknownConn, id)
}

// sidrKeep is how long a SIDR_REP is kept to answer the peer's retried
// SIDR_REQ: rdma_cm's whole SIDR_REQ retry window (16 sends, 4.096 us *
// 2^20 apart).
var sidrKeep = time.Duration(CMAMaxCMRetries+1) * IBATime(CMAResponseTimeout)

// sidrMaxAnswered bounds the SIDR_REPs kept; past it the oldest goes.
const sidrMaxAnswered = 4096

// sidrAnswered holds the SIDR_REPs sent lately, oldest first, so that a
// retried SIDR_REQ (its SIDR_REP lost) gets the same answer again.
type sidrAnswered struct {
	byKey map[sidrKey]*sidrDone
	fifo  []*sidrDone
}

type sidrDone struct {
	key     sidrKey
	expires time.Duration
	req     [MADSize]byte // the request answered
	rep     [MADSize]byte
}

func (a *sidrAnswered) expire(now time.Duration) {
	n := 0
	for n < len(a.fifo) && (a.fifo[n].expires <= now || len(a.fifo)-n > sidrMaxAnswered) {
		if a.byKey[a.fifo[n].key] == a.fifo[n] {
			delete(a.byKey, a.fifo[n].key)
		}
		n++
	}
	if n > 0 {
		a.fifo = append(a.fifo[:0], a.fifo[n:]...)
	}
}

func (a *sidrAnswered) add(now time.Duration, key sidrKey, req, rep *[MADSize]byte) {
	if a.byKey == nil {
		a.byKey = map[sidrKey]*sidrDone{}
	}
	d := &sidrDone{key: key, expires: now + sidrKeep, req: *req, rep: *rep}
	a.byKey[key] = d
	a.fifo = append(a.fifo, d)
	a.expire(now)
}

// find is the SIDR_REP that answered key's request, if req is a retry
// of it: the same bytes (a requester's retry resends its SIDR_REQ as
// is; a new request that reuses the ID, from a restarted CM, differs in
// its transaction ID or private data).
func (a *sidrAnswered) find(now time.Duration, key sidrKey, req []byte) *[MADSize]byte {
	a.expire(now)
	if d := a.byKey[key]; d != nil && len(req) == MADSize && bytes.Equal(d.req[:], req) {
		return &d.rep
	}
	return nil
}
