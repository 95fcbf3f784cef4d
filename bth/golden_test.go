package bth_test

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/softnic/softnic/bth"
)

// The golden frames in testdata/golden.json were built by scapy, their
// ICRCs computed by scapy (IPv4) and by an independent Python
// implementation cross-checked against it (IPv6); see
// testdata/gen_golden.py. They pin field layout, byte order and the ICRC.

func TestGoldenParse(t *testing.T) {
	for _, v := range loadGolden(t) {
		t.Run(v.Name, func(t *testing.T) {
			frame := vectorFrame(t, &v)
			f, err := bth.ParseFrame(frame)
			if err != nil {
				t.Fatalf("ParseFrame: %v", err)
			}
			wantL3 := 14
			if v.VLAN != nil {
				wantL3 = 18
			}
			if f.IPv6 != v.IPv6 || f.L3Off != wantL3 || !bytes.Equal(f.Buf, frame) {
				t.Errorf("IPv6 %v L3Off %d len %d, want %v %d %d", f.IPv6, f.L3Off, len(f.Buf), v.IPv6, wantL3, len(frame))
			}
			wantL4 := wantL3 + 20
			if v.IPv6 {
				wantL4 = wantL3 + 40
			}
			if f.L4Off != wantL4 || f.BTHOff != wantL4+8 {
				t.Errorf("L4Off %d BTHOff %d, want %d %d", f.L4Off, f.BTHOff, wantL4, wantL4+8)
			}

			wantHdr := vectorHeader(t, &v)
			if !v.IPv6 {
				wantHdr.FlowLabel = 0
			}
			if got := f.Header(); got != wantHdr {
				t.Errorf("Header() = %+v, want %+v", got, wantHdr)
			}
			if f.SrcMAC() != wantHdr.SrcMAC || f.DstMAC() != wantHdr.DstMAC ||
				f.SrcAddr() != wantHdr.Src || f.DstAddr() != wantHdr.Dst || f.SrcPort() != wantHdr.SrcPort {
				t.Errorf("addressing accessors disagree with Header()")
			}

			p := &f.Pkt
			want := vectorFields(&v)
			if p.Opcode() != want.BTH.Opcode || p.Info != bth.Lookup(want.BTH.Opcode) {
				t.Fatalf("opcode %s info %p", p.Opcode(), p.Info)
			}
			if got := fieldsOf(p); got != want {
				t.Errorf("fields\n got %+v\nwant %+v", got, want)
			}
			checkViewPresence(t, p, &v)
			if payload := mustHex(t, v.Payload); !bytes.Equal(p.Payload(), payload) {
				t.Errorf("Payload() = %x, want %x", p.Payload(), payload)
			}

			if !f.VerifyICRC() {
				t.Error("VerifyICRC() = false")
			}
			if got := bth.ICRC(f.Buf, f.L3Off, f.IPv6); got != v.ICRC {
				t.Errorf("ICRC = %#08x, want %#08x", got, v.ICRC)
			}
		})
	}
}

func checkViewPresence(t *testing.T, p *bth.Packet, v *goldenVector) {
	t.Helper()
	for _, c := range []struct {
		name     string
		got      int
		present  bool
		wantSize int
	}{
		{"RETH", len(p.RETH()), v.RETH != nil, bth.RETHLen},
		{"AETH", len(p.AETH()), v.AETH != nil, bth.AETHLen},
		{"Imm", len(p.Imm()), v.Imm != nil, bth.ImmDtLen},
		{"IETH", len(p.IETH()), v.IETH != nil, bth.IETHLen},
		{"DETH", len(p.DETH()), v.DETH != nil, bth.DETHLen},
		{"AtomicETH", len(p.AtomicETH()), v.Atomic != nil, bth.AtomicETHLen},
		{"AtomicAck", len(p.AtomicAck()), v.AtomicAck != nil, bth.AtomicAckETHLen},
		{"PETH", len(p.PETH()), v.PETH != nil, bth.PETHLen},
		{"RWSNETH", len(p.RWSNETH()), v.RWSN != nil, bth.RWSNETHLen},
		{"SACKETH", len(p.SACKETH()), v.SACK != nil, bth.SACKETHLen},
		{"HolesETH", len(p.HolesETH()), v.Holes != nil, bth.HolesETHLen},
		{"WQEPETH", len(p.WQEPETH()), v.WQEP != nil, bth.WQEPETHLen},
		{"CQEPETH", len(p.CQEPETH()), v.CQEP != nil, bth.CQEPETHLen},
		{"EAETH", len(p.EAETH()), v.EA != nil, bth.EAETHLen},
		{"RDPETH", len(p.RDPETH()), v.RDP != nil, bth.RDPETHLen},
		{"GDETH", len(p.GDETH()), v.GD != nil, bth.GDETHLen},
		{"SDPETH", len(p.SDPETH()), v.SDP != nil, bth.SDPETHLen},
	} {
		want := 0
		if c.present {
			want = c.wantSize
		}
		if c.got != want {
			t.Errorf("%s view has %d bytes, want %d", c.name, c.got, want)
		}
	}
}

// Flipping any bit the ICRC covers must break it; flipping a variant field
// (masked to ones in the ICRC) or the Ethernet header must not.
func TestGoldenICRCCoverage(t *testing.T) {
	for _, v := range loadGolden(t) {
		t.Run(v.Name, func(t *testing.T) {
			frame := vectorFrame(t, &v)
			f, err := bth.ParseFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			l3, l4 := f.L3Off, f.L4Off
			variant := map[int]bool{l4 + 6: true, l4 + 7: true, f.BTHOff + 4: true}
			if f.IPv6 {
				for _, i := range []int{0, 1, 2, 3, 7} {
					variant[l3+i] = true // low bit of byte 0 is traffic class
				}
			} else {
				for _, i := range []int{1, 8, 10, 11} {
					variant[l3+i] = true
				}
			}
			for i := range frame {
				frame[i] ^= 0x01
				ok := f.VerifyICRC()
				frame[i] ^= 0x01
				if wantOK := i < l3 || variant[i]; ok != wantOK {
					t.Errorf("flip byte %d: VerifyICRC = %v, want %v", i, ok, wantOK)
				}
			}
		})
	}
}

// Encoding the same frame from its fields must reproduce the golden bytes.
func TestGoldenEncode(t *testing.T) {
	for _, v := range loadGolden(t) {
		t.Run(v.Name, func(t *testing.T) {
			want := vectorFrame(t, &v)
			if v.VLAN != nil { // softnic sends untagged; the ICRC does not cover L2
				want = append(want[:12:12], want[16:]...)
			}
			h := vectorHeader(t, &v)
			pf := vectorFields(&v)
			got := buildFrame(&h, &pf, mustHex(t, v.Payload))
			if !bytes.Equal(got, want) {
				t.Errorf("encoded frame differs\n got %x\nwant %x", got, want)
			}
		})
	}
}

// starGoldenNames are the golden vectors of StaR's opcodes, one or more per
// opcode (testdata/gen_golden.py).
var starGoldenNames = []string{
	"star_wqep_read_v4", "star_ea_wqep_v6", "star_rdp_last_v6", "star_ra_v4",
	"star_ra_nak_remote_access_v6", "star_cqep_v4", "star_gd_v6", "star_sdp_v4",
}

// TestGoldenStar: every StaR opcode has a golden vector, and its headers
// sit where docs/wire.md draws them, checked against the frame's bytes
// rather than through the views.
func TestGoldenStar(t *testing.T) {
	seen := map[bth.Opcode]bool{}
	for _, name := range starGoldenNames {
		f, err := bth.ParseFrame(goldenFrame(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen[f.Pkt.Opcode()] = true
		b := f.Pkt.Buf
		var want []byte
		switch f.Pkt.Opcode() {
		case bth.StarWQEP: // DriverSeq 1, READ, signaled, WRID 0xA01
			want = []byte{0, 0, 0, 1, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x01}
		case bth.StarCQEP: // DriverSeq 1, SUCCESS, RDMA_READ, no flags, 8253 bytes
			want = []byte{0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0x20, 0x3d}
		case bth.StarEA: // WQEP 1
			want = []byte{0, 0, 0, 0, 0, 0, 0, 1}
		case bth.StarRDP: // VA, R_Key 0x1001, last (the RA goes to the BTH's DestQP, 0x101)
			want = []byte{0, 0, 0x7f, 0, 0, 0x10, 0x20, 0, 0, 0, 0x10, 0x01, 1}
		case bth.StarRA: // an ACK or NAK, MSN 0
			want = []byte{b[12], 0, 0, 0}
		case bth.StarGD: // VA, R_Key 0x3003, 3000 bytes, MTU 1024 (the SDPs go to the BTH's DestQP, 0x101)
			want = []byte{0, 0, 0x7f, 0, 0, 0x30, 0, 0, 0, 0, 0x30, 0x03, 0x0b, 0xb8, 3, 0}
		case bth.StarSDP: // offset 2048
			want = []byte{0, 0, 0x08, 0}
		}
		if got := b[bth.BTHLen : bth.BTHLen+len(want)]; !bytes.Equal(got, want) {
			t.Errorf("%s: header % x, want % x", name, got, want)
		}
	}
	for op := bth.StarWQEP; op <= bth.StarSDP; op++ {
		if !seen[op] {
			t.Errorf("no golden vector for %s", op)
		}
	}
}

// TestWireDocExamples: every example in docs/wire.md that names a golden
// vector shows that vector's bytes from the BTH on, byte for byte (the
// hex at the start of each line; a payload line's bytes before its "...";
// an ICRC line the frame's last four bytes).
func TestWireDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/wire.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	n := 0
	for _, m := range regexp.MustCompile("golden vector\\s+`([a-z0-9_]+)`").FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		rest := text[m[1]:]
		start := strings.Index(rest, "```\n")
		if start < 0 {
			t.Fatalf("%s: no example after it", name)
		}
		block := rest[start+4:]
		block = block[:strings.Index(block, "```")]
		f, err := bth.ParseFrame(goldenFrame(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := f.Pkt.Buf
		off := 0
		for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
			var got []byte
			fields := strings.Fields(line)
			for _, w := range fields {
				if len(w) != 2 {
					break
				}
				v, err := strconv.ParseUint(w, 16, 8)
				if err != nil {
					break
				}
				got = append(got, byte(v))
			}
			desc := strings.TrimSpace(strings.TrimPrefix(line, strings.Join(fields[:len(got)], " ")))
			if strings.HasPrefix(desc, "ICRC") {
				if !bytes.Equal(got, b[len(b)-bth.ICRCLen:]) {
					t.Errorf("%s: ICRC line % x, frame % x", name, got, b[len(b)-bth.ICRCLen:])
				}
				continue
			}
			if off+len(got) > len(b) || !bytes.Equal(got, b[off:off+len(got)]) {
				t.Errorf("%s: bytes %d.. % x, frame % x", name, off, got, b[off:min(len(b), off+len(got))])
			}
			off += len(got)
		}
		if off < bth.BTHLen {
			t.Errorf("%s: example of %d bytes", name, off)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("%d examples name a golden vector", n)
	}
}
