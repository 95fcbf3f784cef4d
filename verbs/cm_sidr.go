package verbs

import (
	"encoding/json"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// SIDR (IBA 12.11) on a CM channel: service ID resolution for UD QPs,
// what rdma_cm's UDP port space connects with. A listener of the channel
// gets the SIDR_REQs for its service ID as ibcm.EventSIDRREQReceived, a
// request of the channel until SIDRReply answers it (or DestroyConn,
// which answers with status ibcm.SIDRReject). SIDRResolve's answer is
// ibcm.EventSIDRREPReceived (the SIDR_REP's status, QPN and Q_Key) or
// ibcm.EventSIDRREQError, the request's last event.

// CMSIDRParams is a SIDR_REQ (ibcm.SIDRParams).
type CMSIDRParams = ibcm.SIDRParams

// SIDRResolve sends a SIDR_REQ and returns the request's ID. dmac is as
// Connect's.
func (ch *CMChannel) SIDRResolve(p CMSIDRParams, dmac [6]byte) (uint32, error) {
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
		err = ch.ctx.remote.cmCall(proto.OpCMSIDRResolve, proto.CMSIDRResolveArgs{Channel: ch.h, Params: raw, DMAC: dmac}, &res)
		return res.ID, err
	}
	return ch.track(e.CMSIDRResolve(p, dmac, ch.handler))
}

// SIDRReply answers EventSIDRREQReceived id with a SIDR_REP: status
// ibcm.SIDRSuccess with a UD QP of the caller and its Q_Key, or a
// failure status. The request is gone after it.
func (ch *CMChannel) SIDRReply(id uint32, status uint8, qpn, qkey uint32, priv []byte) error {
	err := ch.connOp(proto.OpCMSIDRReply, id,
		func(e *dataplane.Engine) error { return e.CMSIDRReply(id, status, qpn, qkey, priv) },
		proto.CMSIDRReplyArgs{Channel: ch.h, ID: id, Status: status, QPN: qpn, QKey: qkey, PrivateData: priv})
	if err == nil && ch.ctx.e != nil {
		ch.forget(id)
	}
	return err
}
