package ibcm

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// discard is a Transport that drops everything.
type discard struct{ n int }

func (d *discard) SendMAD(to Peer, mad []byte) error {
	if len(mad) != MADSize {
		panic("ibcm sent a MAD that is not 256 bytes")
	}
	d.n++
	return nil
}

// FuzzHandleMAD feeds arbitrary bytes to a CM that listens and holds
// connections in several states, and to every decoder: nothing panics,
// every input is either a parsed message or one counted drop, and a
// decoded message encodes back to a MAD that decodes to the same message.
func FuzzHandleMAD(f *testing.F) {
	seeds := [][]byte{nil, {1}, make([]byte, 255), make([]byte, 256), make([]byte, 257)}
	req := goldenREQ()
	for _, m := range []Message{&req, &MRA{}, &REJ{Reason: RejTimeout, ARILength: 8}, &REP{}, &RTU{},
		&DREQ{}, &DREP{}, &SIDRREQ{}, &SIDRREP{}} {
		b := make([]byte, MADSize)
		if err := Marshal(b, 1, m); err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	peer := Peer{netip.MustParseAddr("198.18.0.1"), GSIQPN}
	f.Fuzz(func(t *testing.T, mad []byte) {
		tr := &discard{}
		c := New(Config{CAGUID: 2, Seed: 3, QPError: func(uint32, uint32) {}}, tr)
		if err := c.Listen(req.ServiceID, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.Listen(ServiceID(PortSpaceUDP, 1), 0); err != nil {
			t.Fatal(err)
		}
		// An active connection in REQ_SENT and a passive one in REP_SENT.
		if _, err := c.Connect(0, ConnectParams{Peer: peer, ServiceID: 5, MaxCMRetries: 2}); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, MADSize)
		if err := Marshal(b, 9, &req); err != nil {
			t.Fatal(err)
		}
		c.HandleMAD(0, peer, b)
		for {
			e, ok := c.PollEvent()
			if !ok {
				break
			}
			if e.Type == EventREQReceived {
				if err := c.Accept(0, e.ID, AcceptParams{QPN: 7}); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := c.Counters()
		c.HandleMAD(time.Millisecond, peer, mad)
		for {
			if _, ok := c.PollEvent(); !ok {
				break
			}
		}
		c.Tick(time.Hour)
		after := c.Counters()
		drops := func(x Counters) uint64 {
			return x.RxBadLength + x.RxBadBaseVersion + x.RxBadClass + x.RxBadClassVersion + x.RxBadMethod + x.RxUnknownAttr
		}
		_, perr := ParseHeader(mad)
		if (perr != nil) != (drops(after) == drops(before)+1) {
			t.Fatalf("parse error %v but drop counters %d -> %d", perr, drops(before), drops(after))
		}
		for _, m := range []Message{&REQ{}, &MRA{}, &REJ{}, &REP{}, &RTU{}, &DREQ{}, &DREP{}, &SIDRREQ{}, &SIDRREP{}} {
			h, err := Unmarshal(mad, m)
			if err != nil {
				continue
			}
			out := make([]byte, MADSize)
			if err := Marshal(out, h.TID, m); err != nil {
				// Only a REJ or SIDR_REP length field above its array
				// can fail to re-encode.
				if _, ok := m.(*REJ); ok {
					continue
				}
				if _, ok := m.(*SIDRREP); ok {
					continue
				}
				t.Fatalf("%T decoded but does not encode: %v", m, err)
			}
			again := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
			if _, err := Unmarshal(out, again); err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("%T re-encoded decodes differently: %v", m, err)
			}
		}
	})
}
