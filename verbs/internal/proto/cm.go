package proto

import "encoding/json"

// The communication manager's operations (version 7). A client makes a
// CM event channel (cm_create_channel: a handle and an eventfd, readable
// while events wait); each listener and connection belongs to the
// channel it was made through, and only that channel gets its events
// (cm_get_events). A connection's QPN must be one of the client's QPs.

// The CM's own types (ibcm.Event, ibcm.ConnectParams, ibcm.AcceptParams)
// travel as their JSON, in json.RawMessage fields: this package links
// neither the engine nor the CM (protoconv and the two ends convert).

// CMEvent is one CM event (dataplane.CMEvent): Event is the ibcm.Event.
// Last: the connection is gone after it (its comm ID names nothing any
// more). PeerMAC: the Ethernet source of the peer's last MAD.
type CMEvent struct {
	Event   json.RawMessage `json:"event"`
	Last    bool            `json:"last"`
	PeerMAC [6]byte         `json:"peer_mac"`
}

// CMChannelArgs names a channel (cm_destroy_channel, cm_get_events).
type CMChannelArgs struct {
	Channel uint32 `json:"channel"`
	Max     int    `json:"max,omitempty"` // cm_get_events: at most this many (0: all, up to CMMaxEvents)
}

// CMMaxEvents bounds one cm_get_events answer.
const CMMaxEvents = 64

// CMGetEventsResult is the events taken, oldest first.
type CMGetEventsResult struct {
	Events []CMEvent `json:"events"`
}

// CMListenArgs is cm_listen's and cm_unlisten's.
type CMListenArgs struct {
	Channel   uint32 `json:"channel"`
	ServiceID uint64 `json:"service_id"`
	Mask      uint64 `json:"mask,omitempty"`
}

// CMConnectArgs is cm_connect's: the REQ and the MAC of the next hop to
// the peer (zero: the daemon's neighbours, or the source MAC of the
// peer's last MAD).
type CMConnectArgs struct {
	Channel uint32          `json:"channel"`
	Params  json.RawMessage `json:"params"` // ibcm.ConnectParams
	DMAC    [6]byte         `json:"dmac"`
}

// CMConnectResult is the new connection's local comm ID.
type CMConnectResult struct {
	ID uint32 `json:"id"`
}

// CMAcceptArgs is cm_accept's: the REP.
type CMAcceptArgs struct {
	Channel uint32          `json:"channel"`
	ID      uint32          `json:"id"`
	Params  json.RawMessage `json:"params"` // ibcm.AcceptParams
}

// CMConnArgs names a connection of a channel, with what the operation
// sends: cm_reject's reason, ARI and private data; cm_rtu's and
// cm_disconnect's private data; nothing for cm_established, cm_destroy
// and cm_info.
type CMConnArgs struct {
	Channel     uint32 `json:"channel"`
	ID          uint32 `json:"id"`
	Reason      uint16 `json:"reason,omitempty"`
	ARI         []byte `json:"ari,omitempty"`
	PrivateData []byte `json:"private_data,omitempty"`
}

// CMSIDRResolveArgs is cm_sidr_resolve's: the SIDR_REQ and the MAC of
// the next hop to the peer (as cm_connect's). The result is a
// CMConnectResult: the request's ID, which its events carry.
type CMSIDRResolveArgs struct {
	Channel uint32          `json:"channel"`
	Params  json.RawMessage `json:"params"` // ibcm.SIDRParams
	DMAC    [6]byte         `json:"dmac"`
}

// CMSIDRReplyArgs is cm_sidr_reply's: the SIDR_REP's status, and with
// status 0 (success) the UD QP, which must be one of the client's, and
// its Q_Key.
type CMSIDRReplyArgs struct {
	Channel     uint32 `json:"channel"`
	ID          uint32 `json:"id"`
	Status      uint8  `json:"status"`
	QPN         uint32 `json:"qpn,omitempty"`
	QKey        uint32 `json:"qkey,omitempty"`
	PrivateData []byte `json:"private_data,omitempty"`
}
