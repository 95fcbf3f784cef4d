package dataplane

import (
	"net/netip"
	"time"

	"github.com/softnic/softnic/verbs/cm/ibcm"
)

// SIDR (IBA 12.11) on QP1: service ID resolution for UD, rdma_cm's UDP
// port space. A SIDR_REQ for a listened service ID goes to the
// listener's owner as ibcm.EventSIDRREQReceived (the owner answers with
// CMSIDRReply); one for a service nobody listens on is answered by the
// CM with status SIDRUnsupported. The answer to CMSIDRResolve,
// EventSIDRREPReceived or EventSIDRREQError (the retries ran out), is
// the request's last event.

// CMSIDRResolve sends a SIDR_REQ (ibcm.CM.SIDRResolve); h owns the
// request. A non-zero dmac is the Ethernet address MADs to p.Peer go to.
func (e *Engine) CMSIDRResolve(p ibcm.SIDRParams, dmac [6]byte, h CMHandler) (uint32, error) {
	var id uint32
	err := e.cmCall(func(g *gsi, now time.Duration) error {
		if p.Peer.QPN == 0 {
			p.Peer.QPN = GSIQPN
		}
		p.Peer.Addr = p.Peer.Addr.Unmap()
		g.learnMAC(p.Peer.Addr, dmac)
		var err error
		if id, err = g.cm.SIDRResolve(now, p); err == nil {
			g.owners[id] = h
		}
		return err
	})
	return id, err
}

// CMSIDRReply answers EventSIDRREQReceived id with a SIDR_REP: status
// ibcm.SIDRSuccess with the UD QP's number and Q_Key, or a failure
// status (SIDRReject for rdma_reject). The request is gone after it.
func (e *Engine) CMSIDRReply(id uint32, status uint8, qpn, qkey uint32, priv []byte) error {
	return e.cmCall(func(g *gsi, now time.Duration) error {
		err := g.cm.SIDRReply(now, id, status, qpn, qkey, priv)
		if err == nil {
			delete(g.owners, id)
		}
		return err
	})
}

// learnMAC makes dmac, if not zero, the next hop of MADs to addr.
func (g *gsi) learnMAC(addr netip.Addr, dmac [6]byte) {
	if dmac == ([6]byte{}) {
		return
	}
	if old, ok := g.macs[addr]; !ok || old != dmac {
		g.macs[addr] = dmac
		delete(g.peers, addr) // the AH is made again with it
	}
}
