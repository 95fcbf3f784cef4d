package cm

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzUnmarshal feeds the decoder arbitrary bytes: it must never panic,
// and whatever it accepts must re-encode to exactly the same bytes (the
// encoding is canonical, so the decoder cannot be lenient about anything).
func FuzzUnmarshal(f *testing.F) {
	for _, eps := range [][]Endpoint{
		sampleEndpoints(1, netip.MustParseAddr("198.18.0.1")),
		sampleEndpoints(3, netip.MustParseAddr("2001:db8::1")),
	} {
		msg, err := Marshal(eps)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
		f.Add(msg[:len(msg)-3])
	}
	star, err := Marshal(starEndpoints(netip.MustParseAddr("198.18.0.1")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(star)
	f.Add(star[:len(star)-5])
	f.Add([]byte("SNCM\x01\x01\x00\x00\x00\x00\x00\x02\x00\x00"))
	f.Add([]byte("SNCM\x01\x02\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		eps, err := Unmarshal(msg)
		if err != nil {
			return
		}
		again, err := Marshal(eps)
		if err != nil {
			t.Fatalf("decoded endpoints do not encode: %v", err)
		}
		if !bytes.Equal(again, msg) {
			t.Fatalf("not canonical:\n in % x\nout % x", msg, again)
		}
	})
}
