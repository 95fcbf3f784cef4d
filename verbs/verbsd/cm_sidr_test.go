package verbsd

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// TestCMSIDRProtocol: cm_sidr_resolve returns a request of the channel,
// which cm_destroy cancels (and then names nothing); malformed params
// are a protocol error; cm_sidr_reply for a request of no one, or on
// another client's channel, is a bad handle.
func TestCMSIDRProtocol(t *testing.T) {
	s, _ := newServer(t)
	c := dial(t, s)
	c.hello(proto.Version)
	var ch proto.Handle
	fds, err := c.call(proto.OpCMCreateChannel, nil, &ch)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	call := func(op string, args, res any) error {
		t.Helper()
		fds, err := c.call(op, args, res)
		proto.CloseFDs(fds)
		return err
	}
	if err := call(proto.OpCMSIDRResolve, proto.CMSIDRResolveArgs{Channel: ch.Handle, Params: json.RawMessage(`"x"`)}, nil); !errors.Is(err, proto.ErrProtocol) {
		t.Errorf("sidr_resolve with malformed params: %v", err)
	}
	params, _ := json.Marshal(ibcm.SIDRParams{Peer: ibcm.Peer{Addr: netip.MustParseAddr("198.18.9.9")},
		ServiceID: 0x1110000 | 7174, Timeout: 14, MaxCMRetries: 1})
	if err := call(proto.OpCMSIDRResolve, proto.CMSIDRResolveArgs{Channel: ch.Handle + 1, Params: params}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Errorf("sidr_resolve on no channel: %v", err)
	}
	var res proto.CMConnectResult
	if err := call(proto.OpCMSIDRResolve, proto.CMSIDRResolveArgs{Channel: ch.Handle, Params: params}, &res); err != nil || res.ID == 0 {
		t.Fatalf("sidr_resolve: %v, id %d", err, res.ID)
	}
	if err := call(proto.OpCMSIDRReply, proto.CMSIDRReplyArgs{Channel: ch.Handle, ID: res.ID + 1, Status: ibcm.SIDRReject}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Errorf("sidr_reply for no request: %v", err)
	}
	d := dial(t, s)
	d.hello(proto.Version)
	var dch proto.Handle
	fds, err = d.call(proto.OpCMCreateChannel, nil, &dch)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	fds, err = d.call(proto.OpCMDestroy, proto.CMConnArgs{Channel: dch.Handle, ID: res.ID}, nil)
	proto.CloseFDs(fds)
	if !errors.Is(err, proto.ErrBadHandle) {
		t.Errorf("another client's cm_destroy of the request: %v", err)
	}
	if err := call(proto.OpCMDestroy, proto.CMConnArgs{Channel: ch.Handle, ID: res.ID}, nil); err != nil {
		t.Errorf("cm_destroy of the outstanding request: %v", err)
	}
	if err := call(proto.OpCMDestroy, proto.CMConnArgs{Channel: ch.Handle, ID: res.ID}, nil); !errors.Is(err, proto.ErrBadHandle) {
		t.Errorf("second cm_destroy: %v", err)
	}
}
