package verbsd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/softnic/softnic/verbs/cm/ibcm"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// TestCMProtocol: the cm_* operations need protocol version 7 (a
// version-6 client gets a protocol error naming it); a channel comes
// with its eventfd; a channel, a connection or a QP of no one (or of
// another client) is a bad handle; malformed params are a protocol
// error; a client's channels go with its connection.
func TestCMProtocol(t *testing.T) {
	s, _ := newServer(t)
	old := dial(t, s)
	old.hello(6)
	if _, err := old.call(proto.OpCMCreateChannel, nil, nil); !errors.Is(err, proto.ErrProtocol) || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("cm_create_channel from a version-6 client: %v", err)
	}
	old.c.C.Close()
	c := dial(t, s)
	c.hello(proto.Version)
	var ch proto.Handle
	fds, err := c.call(proto.OpCMCreateChannel, nil, &ch)
	if err != nil || len(fds) != 1 {
		t.Fatalf("cm_create_channel: %v, %d descriptors", err, len(fds))
	}
	proto.CloseFDs(fds)
	bad := func(what string, op string, args any) {
		t.Helper()
		fds, err := c.call(op, args, nil)
		proto.CloseFDs(fds)
		if !errors.Is(err, proto.ErrBadHandle) {
			t.Errorf("%s: %v, want a bad handle", what, err)
		}
	}
	bad("listen on no channel", proto.OpCMListen, proto.CMListenArgs{Channel: ch.Handle + 1, ServiceID: 1})
	bad("disconnect of no connection", proto.OpCMDisconnect, proto.CMConnArgs{Channel: ch.Handle, ID: 12345})
	params, _ := json.Marshal(ibcm.ConnectParams{QPN: 0x10})
	bad("connect with no QP of the client", proto.OpCMConnect, proto.CMConnectArgs{Channel: ch.Handle, Params: params})
	fds, err = c.call(proto.OpCMConnect, proto.CMConnectArgs{Channel: ch.Handle, Params: json.RawMessage(`"x"`)}, nil)
	proto.CloseFDs(fds)
	if !errors.Is(err, proto.ErrProtocol) {
		t.Errorf("connect with malformed params: %v", err)
	}
	fds, err = c.call(proto.OpCMListen, proto.CMListenArgs{Channel: ch.Handle, ServiceID: 0x1060000 | 80}, nil)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	var evs proto.CMGetEventsResult
	fds, err = c.call(proto.OpCMGetEvents, proto.CMChannelArgs{Channel: ch.Handle}, &evs)
	proto.CloseFDs(fds)
	if err != nil || len(evs.Events) != 0 {
		t.Fatalf("cm_get_events: %v, %d events", err, len(evs.Events))
	}
	// The listener goes with the client: another can listen there then.
	c.c.C.Close()
	waitFor(t, "the client's teardown", func() bool { return s.Objects() == Objects{} })
	d := dial(t, s)
	d.hello(proto.Version)
	fds, err = d.call(proto.OpCMCreateChannel, nil, &ch)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatal(err)
	}
	fds, err = d.call(proto.OpCMListen, proto.CMListenArgs{Channel: ch.Handle, ServiceID: 0x1060000 | 80}, nil)
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatalf("listen after the first listener's client went: %v", err)
	}
	d.c.C.Close()
	waitFor(t, "the client's teardown", func() bool {
		s.memReturn.mu.Lock()
		defer s.memReturn.mu.Unlock()
		return s.Objects() == Objects{} && !s.memReturn.running
	})
}
