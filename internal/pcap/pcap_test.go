package pcap

import (
	"bytes"
	"encoding/hex"
	"io"
	"testing"
	"time"
)

// TestFileLayout pins the bytes of a one-packet file against
// pcap-savefile(5): magic, version 2.4, snaplen, LINKTYPE_ETHERNET, then
// seconds, microseconds, included and original length.
func TestFileLayout(t *testing.T) {
	var b bytes.Buffer
	w, err := NewWriter(&b, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(3*time.Second+5*time.Microsecond+999, 6, []byte{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	want := "d4c3b2a1" + "0200" + "0400" + "00000000" + "00000000" + "04000000" + "01000000" +
		"03000000" + "05000000" + "04000000" + "06000000" + "01020304"
	if got := hex.EncodeToString(b.Bytes()); got != want {
		t.Fatalf("file\n got %s\nwant %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w, err := NewWriter(&b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.SnapLen() != DefaultSnapLen {
		t.Fatalf("snaplen %d", w.SnapLen())
	}
	pkts := []Packet{{Time: time.Second, OrigLen: 3, Data: []byte{1, 2, 3}}, {Time: 90 * time.Minute, OrigLen: 1, Data: []byte{9}}}
	for _, p := range pkts {
		if err := w.WritePacket(p.Time, p.OrigLen, p.Data); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType != LinkTypeEthernet {
		t.Fatalf("link type %d", r.LinkType)
	}
	for i, want := range pkts {
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got.Time != want.Time || got.OrigLen != want.OrigLen || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("packet %d: %+v, want %+v", i, got, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last packet: %v", err)
	}
	if _, err := NewReader(bytes.NewReader(make([]byte, 24))); err != ErrFormat {
		t.Fatalf("zero header: %v", err)
	}
}

func TestWriteDoesNotAllocate(t *testing.T) {
	w, _ := NewWriter(io.Discard, 128)
	data := make([]byte, 1500)
	if n := testing.AllocsPerRun(100, func() { w.WritePacket(time.Second, len(data), data) }); n != 0 {
		t.Fatalf("%.1f allocations per packet", n)
	}
}
