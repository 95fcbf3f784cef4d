package netsw_test

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/softnic/softnic/dataplane/netsw"
)

// golden is an 802.1Qbb PFC frame written out by hand from the standard's
// layout (802.1Q-2011 clause 36 / 802.3 Annex 31D), field by field: it
// pauses priority 3 for 0x1234 quanta and resumes priority 0.
var golden = strings.Join([]string{
	"0180c2000001", // destination: MAC Control multicast
	"001122334455", // source
	"8808",         // EtherType: MAC Control
	"0101",         // opcode: PFC
	"0009",         // priority-enable vector: reserved octet, e[0] and e[3]
	"0000",         // time[0]: 0 = resume
	"0000", "0000", // time[1], time[2]
	"1234",                         // time[3]
	"0000", "0000", "0000", "0000", // time[4..7]
	strings.Repeat("00", 26), // reserved: pads to 60 bytes before the FCS
}, "")

func TestPFCFrameGolden(t *testing.T) {
	want, err := hex.DecodeString(golden)
	if err != nil || len(want) != netsw.PFCFrameLen {
		t.Fatalf("golden vector: %d bytes, %v", len(want), err)
	}
	f := netsw.PFCFrame{Src: [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, Enable: 1<<0 | 1<<3}
	f.Quanta[3] = 0x1234
	buf := bytes.Repeat([]byte{0xee}, 64)
	if n := f.Encode(buf); n != netsw.PFCFrameLen || !bytes.Equal(buf[:n], want) {
		t.Fatalf("encoded\n%x\nwant\n%x", buf[:n], want)
	}
	got, err := netsw.ParsePFC(want)
	if err != nil || got != f {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, f)
	}
	p := netsw.PausePriority(f.Src, 3, 0x1234)
	if p.Enable != 1<<3 || p.Quanta[3] != 0x1234 || p.Quanta[0] != 0 {
		t.Fatalf("PausePriority: %+v", p)
	}
}

func TestPFCFrameRoundTrip(t *testing.T) {
	buf := make([]byte, netsw.PFCFrameLen)
	for i := range 256 {
		f := netsw.PFCFrame{Src: [6]byte{2, byte(i), 3, 4, 5, 6}, Enable: uint8(i)}
		for p := range f.Quanta {
			f.Quanta[p] = uint16(i*257 + p*4099)
		}
		f.Encode(buf)
		if got, err := netsw.ParsePFC(buf); err != nil || got != f {
			t.Fatalf("round trip of %+v: %+v, %v", f, got, err)
		}
	}
}

func TestParsePFCErrors(t *testing.T) {
	good, _ := hex.DecodeString(golden)
	pause := append([]byte(nil), good...)
	pause[14] = 0x00 // opcode 0x0001: 802.3x PAUSE
	ipv4 := append([]byte(nil), good...)
	ipv4[12], ipv4[13] = 0x08, 0x00
	for _, c := range []struct {
		name string
		buf  []byte
		err  error
	}{
		{"empty", nil, netsw.ErrShortPFC},
		{"802.3x pause", pause, netsw.ErrNotPFC},
		{"IPv4", ipv4, netsw.ErrNotPFC},
		{"cut in the times", good[:33], netsw.ErrShortPFC},
	} {
		if _, err := netsw.ParsePFC(c.buf); err != c.err {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := netsw.ParsePFC(good[:34]); err != nil {
		t.Errorf("unpadded frame: %v", err)
	}
}

func FuzzParsePFC(f *testing.F) {
	good, _ := hex.DecodeString(golden)
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := netsw.ParsePFC(b)
		if err != nil {
			return
		}
		out := make([]byte, netsw.PFCFrameLen)
		p.Encode(out)
		if q, err := netsw.ParsePFC(out); err != nil || q != p {
			t.Fatalf("re-encoded %+v parses as %+v, %v", p, q, err)
		}
	})
}
