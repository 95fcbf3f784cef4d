package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// This file is QP1, the general services QP (IBA Volume 1 §10.2.5,
// §13.4), and the communication manager (package verbs/cm/ibcm) the NIC
// runs on it. QP1 is a UD QP the NIC makes for itself when it starts:
// QP number 1, Q_Key GSIQKey (0x80010000), the default P_Key, receive
// WQEs of 40 (GRH) + 256 (MAD) bytes that the NIC posts and reposts
// itself, its memory and address handles in tables of its own that no
// client can name. On the wire a MAD is what Linux rxe sends and takes
// for QP1: a UD SEND to BTH destination QP 1 whose DETH carries Q_Key
// 0x80010000 and source QP 1 (rxe_recv.c's check_keys holds a datagram
// to QP1 to GSI_QKEY, as the receive path here holds QP1 to its Q_Key).
//
// Each received MAD goes to the CM's HandleMAD with the GRH's source
// address and the DETH's source QPN; the CM answers through SendMAD,
// which posts a UD SEND on QP1 to that address and QPN (as ib_cm answers
// a REQ to the address and QP of its GRH and work completion) through an
// address handle per peer, its MAC from the neighbours the NIC knows:
// one a connection named (CMConnect), the source MAC of the peer's last
// MAD, or the fabric's (AddNeighbor). The CM's timers run on the
// engine's clock: Poll ticks it, NextDeadline includes its deadline.
// Its events go to the handler that owns the listener or connection
// (CMHandler), called on the poll loop.

const (
	// GSIQPN is QP1's number.
	GSIQPN = 1
	// GSIQKey is QP1's Q_Key (IB_QP1_QKEY): every MAD to QP1 carries it.
	GSIQKey = 0x80010000
	// MADSize is the size of a MAD.
	MADSize = 256

	gsiRecvWQEs = 64
	gsiSendWQEs = 64
	gsiRecvLen  = qp.GRHLen + MADSize
	// gsiPD is QP1's protection domain: no client's (AllocPD counts
	// from 1), and only in QP1's own tables.
	gsiPD = ^uint32(0)
	// gsiMaxPeers bounds QP1's address handles; beyond it the table is
	// emptied and rebuilt as MADs go out.
	gsiMaxPeers = 1024
)

// ErrNoCM is a CM call on an engine whose CM is not running.
var ErrNoCM = errors.New("dataplane: no communication manager on this NIC")

// CMEvent is one CM event for the owner of its listener or connection.
type CMEvent struct {
	ibcm.Event
	// Last: the connection is gone after this event (its comm ID names
	// nothing any more).
	Last bool `json:"last"`
	// PeerMAC is the Ethernet source of the peer's last MAD, the next
	// hop back to it (zero if none came): what the passive side's QP
	// sends to, as ib_cm resolves a REQ's reply path from its GRH.
	PeerMAC [6]byte `json:"peer_mac"`
}

// CMHandler receives the CM events of the listeners and connections it
// owns. It runs on the engine's poll loop with the engine lock held: it
// must not block, nor call back into the engine; ev is its to keep.
type CMHandler func(ev CMEvent)

// gsi is QP1 and the CM on it.
type gsi struct {
	e   *Engine
	q   *QP
	u   *udTransport
	cq  *CQ // QP1's send and receive completions
	mem memTable
	ahs ahTable

	peers map[netip.Addr]uint32  // address -> QP1's AH to it
	macs  map[netip.Addr][6]byte // learned: a connection's path, a MAD's source
	recv  []byte                 // gsiRecvWQEs slots of gsiRecvLen
	send  []byte                 // gsiSendWQEs slots of MADSize
	free  []uint32               // free send slots
	lkey  uint32
	base  uint64 // address of recv's first byte in QP1's region
	wcs   [16]qp.WC

	cm        *ibcm.CM
	owners    map[uint32]CMHandler // connection -> its owner
	listeners map[uint64]CMHandler // listened service ID -> its owner
	handled   bool                 // the CM did something this poll
}

// newGSI makes QP1, posts its receive WQEs and starts the CM.
func newGSI(e *Engine) *gsi {
	g := &gsi{e: e, peers: map[netip.Addr]uint32{}, macs: map[netip.Addr][6]byte{},
		owners: map[uint32]CMHandler{}, listeners: map[uint64]CMHandler{}}
	mem := make([]byte, gsiRecvWQEs*gsiRecvLen+gsiSendWQEs*MADSize)
	g.recv, g.send = mem[:gsiRecvWQEs*gsiRecvLen], mem[gsiRecvWQEs*gsiRecvLen:]
	g.lkey = 1<<8 | 1
	g.base = addrOf(mem)
	g.mem.mrs = []*MR{nil, {PD: gsiPD, Addr: g.base, LKey: g.lkey, RKey: g.lkey, Access: qp.AccessLocalWrite, buf: mem}}
	g.mem.keyTag = 1
	g.cq = &CQ{ring: qp.NewRing[qp.WC](gsiRecvWQEs + gsiSendWQEs), users: 2}
	q := &QP{qpn: GSIQPN, pd: gsiPD, sendCQ: g.cq, recvCQ: g.cq, sigAll: true,
		sq: qp.NewRing[sendWQE](gsiSendWQEs), rq: qp.NewRing[recvWQE](gsiRecvWQEs),
		qpType: qp.QPTypeUD, qkey: GSIQKey, scheme: e.scheme}
	q.cache.HostOnly = true // the NIC's own QP: its context never competes for the SRAM
	g.q = q
	g.u = newUD(onNIC{e, q})
	g.u.mem, g.u.ahs = &g.mem, &g.ahs
	q.tr = g.u
	e.setState(q, qp.Init)
	e.setState(q, qp.RTR)
	e.setState(q, qp.RTS)
	for i := range gsiRecvWQEs {
		g.postRecv(uint32(i))
	}
	for i := gsiSendWQEs - 1; i >= 0; i-- {
		g.free = append(g.free, uint32(i))
	}
	// The CA GUID is the port's MAC as an EUI-64, as rxe makes its node
	// GUID (addrconf_addr_eui48); it seeds the comm IDs too.
	guid := e.CAGUID()
	a16 := e.cfg.Addr.As16()
	g.cm = ibcm.New(ibcm.Config{CAGUID: guid, Seed: guid ^ binary.BigEndian.Uint64(a16[8:]), QPError: g.qpError}, g)
	return g
}

// postRecv puts receive slot i back on QP1's receive queue.
func (g *gsi) postRecv(i uint32) {
	w := g.q.rq.Push()
	if w == nil {
		return
	}
	w.wr = qp.RecvWR{WRID: uint64(i), NumSGE: 1}
	w.wr.SGL[0] = qp.SGE{Addr: g.base + uint64(i)*gsiRecvLen, Length: gsiRecvLen, LKey: g.lkey}
	w.length = gsiRecvLen
}

// receive takes a frame to QP1 (engine.receive, after the P_Key): as
// any UD QP's, from any source to this port's address; the source MAC of
// an accepted one is where MADs to its source address go from now on.
func (g *gsi) receive(f *bth.Frame) {
	e := g.e
	if f.DstAddr() != e.cfg.Addr {
		e.cnt.RcvdBadAddr++
		return
	}
	before := e.cnt.RDMARecvs + e.cnt.RespLocalLength
	g.u.receive(&f.Pkt)
	if e.cnt.RDMARecvs+e.cnt.RespLocalLength == before {
		e.cnt.GSIRecvDropped++ // the UD checks dropped it (Q_Key, opcode, no WQE), each under its counter
		return
	}
	src, mac := f.SrcAddr().Unmap(), f.SrcMAC()
	if old, ok := g.macs[src]; !ok || old != mac {
		if len(g.macs) >= gsiMaxPeers {
			clear(g.macs)
		}
		g.macs[src] = mac
		delete(g.peers, src) // its AH is made again with the new MAC
	}
}

// SendMAD is the CM's transport: a UD SEND of mad on QP1 to the peer's
// address and QP, with QP1's Q_Key. It runs under the engine lock.
func (g *gsi) SendMAD(to ibcm.Peer, mad []byte) error {
	e := g.e
	addr := to.Addr.Unmap()
	ah, ok := g.peers[addr]
	if !ok {
		mac, known := g.macs[addr]
		if !known {
			mac, known = e.neighbors[addr]
		}
		if !known {
			e.cnt.GSISendErrors++
			return fmt.Errorf("%w: %v", ErrNoNeighbor, addr)
		}
		if addr.Is6() != e.ipv6 {
			e.cnt.GSISendErrors++
			return fmt.Errorf("%w: %v is not of the port's address family", ErrAHAttr, addr)
		}
		if len(g.peers) >= gsiMaxPeers {
			clear(g.peers)
			g.ahs = ahTable{tag: g.ahs.tag}
		}
		ah = g.addAH(AddressVector{DGID: addr, DMAC: mac, HopLimit: 64})
		g.peers[addr] = ah
	}
	if len(g.free) == 0 {
		e.cnt.GSISendErrors++
		return fmt.Errorf("%w: QP1's %d send slots are in use", ErrQueueFull, gsiSendWQEs)
	}
	slot := g.free[len(g.free)-1]
	g.free = g.free[:len(g.free)-1]
	copy(g.send[int(slot)*MADSize:], mad[:min(len(mad), MADSize)])
	wr := qp.SendWR{WRID: uint64(slot), Opcode: qp.WRSend, NumSGE: 1, AH: ah, RemoteQPN: to.QPN, RemoteQKey: GSIQKey}
	wr.SGL[0] = qp.SGE{Addr: g.base + uint64(len(g.recv)) + uint64(slot)*MADSize, Length: uint32(min(len(mad), MADSize)), LKey: g.lkey}
	if _, err := g.u.postSend([]qp.SendWR{wr}); err != nil {
		g.free = append(g.free, slot)
		e.cnt.GSISendErrors++
		return err
	}
	e.cnt.GSISentMADs++
	return nil
}

// addAH makes an address handle in QP1's own table.
func (g *gsi) addAH(av AddressVector) uint32 {
	e, t := g.e, &g.ahs
	if len(t.ahs) == 0 {
		t.ahs = append(t.ahs, nil) // handle 0 is never valid
	}
	t.tag++
	a := &AH{pd: gsiPD, handle: uint32(len(t.ahs))<<8 | uint32(t.tag), av: av,
		hdr: bth.FrameHeader{SrcMAC: e.cfg.MAC, DstMAC: av.DMAC, Src: e.cfg.Addr, Dst: av.DGID,
			TOS: av.TrafficClass, TTL: av.HopLimit, FlowLabel: av.FlowLabel}}
	t.ahs = append(t.ahs, a)
	return a.handle
}

// qpError is the CM's QPError: the QP goes to ERROR and its work
// requests flush (IBV_WC_WR_FLUSH_ERR), as rdma_cm's disconnect does.
func (g *gsi) qpError(_, qpn uint32) {
	e := g.e
	q := e.qps[qpn]
	if q == nil || q.state == qp.Err || q.state == qp.Reset {
		return
	}
	e.touch(q, true)
	e.setState(q, qp.Err)
	e.cnt.CMQPErrors++
}

// poll takes QP1's completions (MADs to the CM, send slots back), fires
// the CM's due timers and hands its events to their owners. It reports
// whether it did anything. Engine lock held.
func (g *gsi) poll(now time.Duration) bool {
	did := g.handled
	g.handled = false
	for {
		n := 0
		for n < len(g.wcs) {
			wc := g.cq.ring.Front()
			if wc == nil {
				break
			}
			g.wcs[n] = *wc
			g.cq.ring.Pop()
			n++
		}
		if n == 0 {
			break
		}
		did = true
		for i := range n {
			g.complete(now, &g.wcs[i])
		}
	}
	if d, ok := g.cm.NextDeadline(); ok && d <= now {
		g.cm.Tick(now)
		did = true
	}
	for {
		ev, ok := g.cm.PollEvent()
		if !ok {
			break
		}
		did = true
		g.dispatch(now, ev)
	}
	return did
}

// complete handles one QP1 completion.
func (g *gsi) complete(now time.Duration, wc *qp.WC) {
	e := g.e
	slot := uint32(wc.WRID)
	if wc.Opcode != qp.WCRecv {
		if slot < gsiSendWQEs {
			g.free = append(g.free, slot)
		}
		return
	}
	if slot >= gsiRecvWQEs {
		return
	}
	defer g.postRecv(slot)
	if wc.Status != qp.WCSuccess || wc.ByteLen < qp.GRHLen {
		e.cnt.GSIRecvDropped++ // longer than a MAD (IBV_WC_LOC_LEN_ERR)
		return
	}
	buf := g.recv[int(slot)*gsiRecvLen:][:gsiRecvLen]
	var src netip.Addr
	if e.ipv6 {
		src = netip.AddrFrom16([16]byte(buf[8:24]))
	} else {
		src = netip.AddrFrom4([4]byte(buf[qp.GRHLen-20+12 : qp.GRHLen-20+16]))
	}
	e.cnt.GSIRecvMADs++
	before := g.cm.Counters()
	g.cm.HandleMAD(now, ibcm.Peer{Addr: src, QPN: wc.SrcQP}, buf[qp.GRHLen:wc.ByteLen])
	if after := g.cm.Counters(); cmDropped(&after) != cmDropped(&before) {
		e.cnt.GSIRecvDropped++
	}
}

// cmDropped sums the CM's drop reasons: what HandleMAD did not act on.
func cmDropped(c *ibcm.Counters) uint64 {
	return c.RxBadLength + c.RxBadBaseVersion + c.RxBadClass + c.RxBadClassVersion + c.RxBadMethod +
		c.RxUnknownAttr + c.RxUnsupported + c.RxUnmatched + c.RxBadState
}

// dispatch hands ev to the owner of its listener or connection.
func (g *gsi) dispatch(now time.Duration, ev ibcm.Event) {
	var h CMHandler
	last := false
	switch ev.Type {
	case ibcm.EventREQReceived:
		h = g.listeners[ev.ServiceID]
		if h == nil { // unlistened since: nobody will answer
			_ = g.cm.Reject(now, ev.ID, ibcm.RejInvalidServiceID, nil, nil)
			return
		}
		g.owners[ev.ID] = h
	case ibcm.EventSIDRREQReceived:
		h = g.listeners[ev.ServiceID]
		if h == nil { // unlistened since: the service ID is not supported
			_ = g.cm.SIDRReply(now, ev.ID, ibcm.SIDRUnsupported, 0, 0, nil)
			return
		}
		g.owners[ev.ID] = h
	default: // SIDR_REP_RECEIVED and SIDR_REQ_ERROR end their request: last
		h = g.owners[ev.ID]
		if g.cm.State(ev.ID) == ibcm.StateIdle {
			delete(g.owners, ev.ID) // the connection is gone: its last event
			last = true
		}
	}
	e := g.e
	e.cnt.CMEvents++
	if h != nil {
		h(CMEvent{Event: ev, Last: last, PeerMAC: g.macs[ev.Peer.Addr.Unmap()]})
	} else {
		e.cnt.CMEventsOrphaned++
	}
}

// cmCall runs f on the CM under the engine lock at the engine's time,
// then wakes the poll loop for what it sent and the events it queued.
func (e *Engine) cmCall(f func(g *gsi, now time.Duration) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gsi == nil {
		return ErrNoCM
	}
	err := f(e.gsi, e.now)
	e.gsi.handled = true
	e.ring()
	return err
}

// CMListen routes the REQs for serviceID (under mask; 0: all 64 bits)
// to h as ibcm.EventREQReceived; h then owns each new connection until
// CMAccept names another owner.
func (e *Engine) CMListen(serviceID, mask uint64, h CMHandler) error {
	return e.cmCall(func(g *gsi, _ time.Duration) error {
		if err := g.cm.Listen(serviceID, mask); err != nil {
			return err
		}
		g.listeners[serviceID] = h
		return nil
	})
}

// CMUnlisten stops CMListen's REQs; connections already made live on.
func (e *Engine) CMUnlisten(serviceID uint64) error {
	return e.cmCall(func(g *gsi, _ time.Duration) error {
		if err := g.cm.Unlisten(serviceID); err != nil {
			return err
		}
		delete(g.listeners, serviceID)
		return nil
	})
}

// CMConnect sends a REQ (ibcm.CM.Connect); h owns the connection. A
// non-zero dmac is the Ethernet address MADs to p.Peer go to (the path's
// next hop, as the caller resolved it).
func (e *Engine) CMConnect(p ibcm.ConnectParams, dmac [6]byte, h CMHandler) (uint32, error) {
	var id uint32
	err := e.cmCall(func(g *gsi, now time.Duration) error {
		if p.Peer.QPN == 0 {
			p.Peer.QPN = GSIQPN
		}
		p.Peer.Addr = p.Peer.Addr.Unmap()
		if dmac != ([6]byte{}) {
			if old, ok := g.macs[p.Peer.Addr]; !ok || old != dmac {
				g.macs[p.Peer.Addr] = dmac
				delete(g.peers, p.Peer.Addr) // the AH is made again with it
			}
		}
		var err error
		if id, err = g.cm.Connect(now, p); err == nil {
			g.owners[id] = h
		}
		return err
	})
	return id, err
}

// CMAccept answers a REQ with a REP; a non-nil h takes the connection
// over from the listener's owner.
func (e *Engine) CMAccept(id uint32, p ibcm.AcceptParams, h CMHandler) error {
	return e.cmCall(func(g *gsi, now time.Duration) error {
		if err := g.cm.Accept(now, id, p); err != nil {
			return err
		}
		if h != nil {
			g.owners[id] = h
		}
		return nil
	})
}

// CMReject answers a REQ (passive) or a REP (active) with a REJ; the
// connection is forgotten.
func (e *Engine) CMReject(id uint32, reason uint16, ari, priv []byte) error {
	return e.cmCall(func(g *gsi, now time.Duration) error {
		err := g.cm.Reject(now, id, reason, ari, priv)
		if err == nil {
			delete(g.owners, id)
		}
		return err
	})
}

// CMSendRTU completes the active side after its REP (ibcm.CM.SendRTU).
func (e *Engine) CMSendRTU(id uint32, priv []byte) error {
	return e.cmCall(func(g *gsi, now time.Duration) error { return g.cm.SendRTU(now, id, priv) })
}

// CMEstablished is ib_cm_notify(IB_EVENT_COMM_EST) on the passive side.
func (e *Engine) CMEstablished(id uint32) error {
	return e.cmCall(func(g *gsi, now time.Duration) error { return g.cm.Established(now, id) })
}

// CMDisconnect moves the connection's QP to ERROR and sends a DREQ
// (ibcm.CM.Disconnect).
func (e *Engine) CMDisconnect(id uint32, priv []byte) error {
	return e.cmCall(func(g *gsi, now time.Duration) error { return g.cm.Disconnect(now, id, priv) })
}

// CMClose is ib_destroy_cm_id: the connection's owner is gone. As
// Linux's cm_destroy_id, a connection whose REQ or REP waits for this
// side's answer is rejected (consumer defined), one past its REP is
// disconnected (DREQ, its QP to ERROR) and lives on ownerless until its
// timewait ends, one in a disconnect or timewait is left to end, and an
// outstanding REQ of this side is forgotten.
func (e *Engine) CMClose(id uint32) error {
	return e.cmCall(func(g *gsi, now time.Duration) error {
		delete(g.owners, id)
		switch g.cm.State(id) {
		case ibcm.StateIdle:
			return fmt.Errorf("%w: %d", ibcm.ErrUnknownConn, id)
		case ibcm.StateREQRcvd, ibcm.StateMRAREQSent, ibcm.StateREPRcvd, ibcm.StateMRAREPSent:
			return g.cm.Reject(now, id, ibcm.RejConsumerDefined, nil, nil)
		case ibcm.StateREPSent, ibcm.StateMRAREPRcvd, ibcm.StateEstablished:
			return g.cm.Disconnect(now, id, nil)
		case ibcm.StateDREQSent, ibcm.StateDREQRcvd, ibcm.StateTimewait:
			return nil
		case ibcm.StateSIDRREQSent, ibcm.StateSIDRREQRcvd:
			return g.cm.SIDRCancel(now, id)
		default:
			return g.cm.Destroy(id)
		}
	})
}

// CMDestroy forgets a connection at once, sending nothing.
func (e *Engine) CMDestroy(id uint32) error {
	return e.cmCall(func(g *gsi, _ time.Duration) error {
		delete(g.owners, id)
		return g.cm.Destroy(id)
	})
}

// CMInfo describes a connection.
func (e *Engine) CMInfo(id uint32) (ibcm.ConnInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gsi == nil {
		return ibcm.ConnInfo{}, false
	}
	return e.gsi.cm.Info(id)
}

// CMCounters is the CM's statistics.
func (e *Engine) CMCounters() ibcm.Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gsi == nil {
		return ibcm.Counters{}
	}
	return e.gsi.cm.Counters()
}

// CAGUID is the CA GUID the NIC's CM sends in REQ and REP.
func (e *Engine) CAGUID() uint64 {
	m := e.cfg.MAC
	return uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xFFFE<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}
