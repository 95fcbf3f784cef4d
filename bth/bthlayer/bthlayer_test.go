package bthlayer_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/bth/bthlayer"
	"github.com/softnic/softnic/bth/internal/golden"
	"github.com/softnic/softnic/qp"
)

// vector is one entry of ../testdata/golden.json (package golden).
type vector = golden.Vector

func loadVectors(t *testing.T) ([]vector, [][]byte) {
	t.Helper()
	vs := golden.Load(t, "../testdata/golden.json")
	frames := make([][]byte, len(vs))
	for i, v := range vs {
		var err error
		if frames[i], err = hex.DecodeString(v.Frame); err != nil {
			t.Fatal(err)
		}
	}
	return vs, frames
}

// checkRoCE decodes frame with gopacket and compares the RoCE layer with v.
func checkRoCE(t *testing.T, v *vector, frame []byte) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("%s: decode error: %v", v.Name, el.Error())
	}
	l := pkt.Layer(bthlayer.LayerTypeRoCE)
	if l == nil {
		t.Fatalf("%s: no RoCE layer in %v", v.Name, pkt.Layers())
	}
	r := l.(*bthlayer.RoCE)
	if r.Opcode != bth.Opcode(v.BTH.Opcode) || r.PSN != v.BTH.PSN || r.DestQPN != v.BTH.DQPN ||
		r.AckReq != (v.BTH.AckReq != 0) || r.Info != bth.Lookup(r.Opcode) {
		t.Errorf("%s: BTH %+v", v.Name, r.BTHFields)
	}
	if r.Info != nil && len(r.Contents) != r.Info.Length {
		t.Errorf("%s: %d content bytes, want %d", v.Name, len(r.Contents), r.Info.Length)
	}
	var want bthlayer.RoCE
	if x := v.RETH; x != nil {
		want.RETH = bth.RETHFields{VA: x.VA, RKey: x.RKey, DMALen: x.DMALen}
	}
	if x := v.AETH; x != nil {
		want.AETH = bth.AETHFields{Syndrome: bth.Syndrome(x.Syndrome), MSN: x.MSN}
	}
	if v.Imm != nil {
		want.Imm = *v.Imm
	}
	if v.IETH != nil {
		want.InvalidateRKey = *v.IETH
	}
	if x := v.DETH; x != nil {
		want.DETH = bth.DETHFields{QKey: x.QKey, SrcQPN: x.SrcQPN}
	}
	if x := v.Atomic; x != nil {
		want.Atomic = bth.AtomicETHFields{VA: x.VA, RKey: x.RKey, SwapAdd: x.SwapAdd, Compare: x.Compare}
	}
	if v.AtomicAck != nil {
		want.AtomicOrigData = *v.AtomicAck
	}
	if x := v.PETH; x != nil {
		want.PETH = bth.PETHFields{RecvSN: x.RecvSN, Index: x.Index}
	}
	if v.RWSN != nil {
		want.RecvSN = *v.RWSN
	}
	if v.SACK != nil {
		want.SACKPSN, want.LostCnt = *v.SACK&0xFFFFFF, uint8(*v.SACK>>24)
	}
	if x := v.Holes; x != nil {
		want.HolesHigh = x.High
		for i, h := range x.Holes {
			want.Holes[i].Offset, want.Holes[i].Len = uint16(h[0]), uint16(h[1])
		}
	}
	if x := v.WQEP; x != nil {
		want.WQEP = bth.WQEPETHFields{DriverSeq: x.DriverSeq, Kind: bth.WQEPKind(x.Kind), Flags: bth.WQEPFlags(x.Flags),
			WRID: x.WRID, LocalVA: x.LocalVA, LocalKey: x.LocalKey, Length: x.Length,
			RemoteVA: x.RemoteVA, RemoteKey: x.RemoteKey, Imm: x.Imm}
	}
	if x := v.CQEP; x != nil {
		want.CQEP = bth.CQEPETHFields{DriverSeq: x.DriverSeq, Status: qp.WCStatus(x.Status), Opcode: qp.WCOpcode(x.Opcode),
			Flags: bth.CQEPFlags(x.Flags), ByteLen: x.ByteLen, Imm: x.Imm}
	}
	if x := v.EA; x != nil {
		want.EA = bth.EAETHFields{Kind: bth.EAKind(x.Kind), DriverSeq: x.DriverSeq}
	}
	if x := v.RDP; x != nil {
		want.RDP = bth.RDPETHFields{VA: x.VA, RKey: x.RKey, Flags: bth.RDPFlags(x.Flags)}
	}
	if x := v.GD; x != nil {
		want.GD = bth.GDETHFields{VA: x.VA, RKey: x.RKey, Length: x.Length, MTU: qp.MTU(x.MTU), Flags: x.Flags}
	}
	if x := v.SDP; x != nil {
		want.SDP = bth.SDPETHFields{Offset: x.Offset}
	}
	if r.RETH != want.RETH || r.AETH != want.AETH || r.Imm != want.Imm || r.InvalidateRKey != want.InvalidateRKey ||
		r.DETH != want.DETH || r.Atomic != want.Atomic || r.AtomicOrigData != want.AtomicOrigData ||
		r.PETH != want.PETH || r.SACKPSN != want.SACKPSN || r.LostCnt != want.LostCnt ||
		r.HolesHigh != want.HolesHigh || r.Holes != want.Holes ||
		r.WQEP != want.WQEP || r.CQEP != want.CQEP || r.EA != want.EA || r.RDP != want.RDP ||
		r.GD != want.GD || r.SDP != want.SDP {
		t.Errorf("%s: extension headers\n got %+v\nwant %+v", v.Name, r, &want)
	}
	if r.ICRC != v.ICRC {
		t.Errorf("%s: ICRC %#08x, want %#08x", v.Name, r.ICRC, v.ICRC)
	}
	payload, _ := hex.DecodeString(v.Payload)
	if !bytes.Equal(r.LayerPayload(), payload) {
		t.Errorf("%s: payload %x, want %x", v.Name, r.LayerPayload(), payload)
	}
	if len(payload) > 0 {
		app := pkt.ApplicationLayer()
		if app == nil || !bytes.Equal(app.Payload(), payload) {
			t.Errorf("%s: application layer %v", v.Name, app)
		}
	} else if r.NextLayerType() != gopacket.LayerTypeZero {
		t.Errorf("%s: NextLayerType %v without payload", v.Name, r.NextLayerType())
	}
	if !bthlayer.VerifyICRC(pkt) {
		t.Errorf("%s: VerifyICRC false", v.Name)
	}
}

func TestDecodeGolden(t *testing.T) {
	vs, frames := loadVectors(t)
	for i := range vs {
		checkRoCE(t, &vs[i], frames[i])
	}
}

func TestPcapRoundTrip(t *testing.T) {
	vs, frames := loadVectors(t)
	path := filepath.Join(t.TempDir(), "golden.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for i, frame := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", r.LinkType())
	}
	n := 0
	for ; ; n++ {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n >= len(vs) {
			t.Fatalf("more packets than written")
		}
		checkRoCE(t, &vs[n], data)
	}
	if n != len(vs) {
		t.Fatalf("read %d packets, wrote %d", n, len(vs))
	}
}

func TestDecodeMalformed(t *testing.T) {
	vs, frames := loadVectors(t)
	frame := frames[0]
	for _, v := range vs {
		if v.Name == "rc_ack_v4" {
			frame, _ = hex.DecodeString(v.Frame)
		}
	}
	// Cut the RoCE packet short, keeping IP and UDP lengths consistent so
	// that gopacket hands the layer the short UDP payload.
	short := bytes.Clone(frame[:14+20+8+10])
	short[14+3] = 20 + 8 + 10
	short[14+20+5] = 8 + 10
	pkt := gopacket.NewPacket(short, layers.LayerTypeEthernet, gopacket.Default)
	if pkt.Layer(bthlayer.LayerTypeRoCE) != nil {
		t.Fatal("decoded a RoCE layer from a truncated packet")
	}
	el := pkt.ErrorLayer()
	if el == nil || !errors.Is(el.Error(), bth.ErrTruncated) {
		t.Fatalf("error layer %v, want %v", el, bth.ErrTruncated)
	}
	if !pkt.Metadata().Truncated {
		t.Error("packet not marked truncated")
	}
	if bthlayer.VerifyICRC(pkt) {
		t.Error("VerifyICRC true for a truncated packet")
	}

	bad := bytes.Clone(frame)
	bad[len(bad)-1] ^= 1
	pkt = gopacket.NewPacket(bad, layers.LayerTypeEthernet, gopacket.Default)
	if pkt.Layer(bthlayer.LayerTypeRoCE) == nil || bthlayer.VerifyICRC(pkt) {
		t.Error("corrupt ICRC: want a RoCE layer and VerifyICRC false")
	}
}

func TestLayerString(t *testing.T) {
	_, frames := loadVectors(t)
	pkt := gopacket.NewPacket(frames[0], layers.LayerTypeEthernet, gopacket.Default)
	s := gopacket.LayerString(pkt.Layer(bthlayer.LayerTypeRoCE))
	if !bytes.Contains([]byte(s), []byte("RC_SEND_FIRST")) {
		t.Errorf("LayerString = %q, want it to name the opcode", s)
	}
}

// TestStarLayerString: gopacket shows StaR's headers field by field, with
// the names of their enums.
func TestStarLayerString(t *testing.T) {
	vs, frames := loadVectors(t)
	want := map[string][]string{
		"star_wqep_read_v4": {"STAR_WQEP", "WQEP={", "DriverSeq=1", "Kind=RDMA_READ", "WRID=2561", "RemoteKey=8194"},
		"star_cqep_v4":      {"STAR_CQEP", "CQEP={", "Status=SUCCESS", "Opcode=RDMA_READ", "ByteLen=8253"},
		"star_ea_wqep_v6":   {"STAR_EA", "EA={", "Kind=WQEP", "DriverSeq=1"},
		"star_rdp_last_v6":  {"STAR_RDP", "RDP={", "Flags=1", "DestQPN=257"},
		"star_ra_v4":        {"STAR_RA", "AETH={"},
		"star_gd_v6":        {"STAR_GD", "GD={", "Length=3000", "MTU=1024", "DestQPN=257"},
		"star_sdp_v4":       {"STAR_SDP", "SDP={", "Offset=2048"},
	}
	for i, v := range vs {
		names, ok := want[v.Name]
		if !ok {
			continue
		}
		delete(want, v.Name)
		pkt := gopacket.NewPacket(frames[i], layers.LayerTypeEthernet, gopacket.Default)
		l := pkt.Layer(bthlayer.LayerTypeRoCE)
		if l == nil {
			t.Fatalf("%s: no RoCE layer", v.Name)
		}
		s := gopacket.LayerString(l)
		for _, n := range names {
			if !strings.Contains(s, n) {
				t.Errorf("%s: LayerString lacks %q:\n%s", v.Name, n, s)
			}
		}
	}
	for name := range want {
		t.Errorf("no golden vector %s", name)
	}
}

// TestCNPLayer: gopacket decodes RoCEv2's congestion notification packet
// (bth.CNP) as a RoCE layer with its name, no payload, and a valid ICRC.
func TestCNPLayer(t *testing.T) {
	h := bth.FrameHeader{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.1.1"), SrcPort: 0xc000}
	info := bth.Lookup(bth.CNP)
	roceLen := info.PacketLen(0)
	frame := make([]byte, h.Len()+roceLen)
	off := h.Encode(frame, roceLen)
	bth.BTH(frame[off:]).Encode(&bth.BTHFields{Opcode: bth.CNP, PKey: 0xffff, BECN: true, DestQPN: 0x42})
	bth.FinishFrame(frame, &h)

	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("decode error: %v", el.Error())
	}
	l, ok := pkt.Layer(bthlayer.LayerTypeRoCE).(*bthlayer.RoCE)
	if !ok {
		t.Fatalf("no RoCE layer in %v", pkt.Layers())
	}
	if l.Opcode != bth.CNP || l.Info == nil || l.Info.Name != "CNP" || !l.BECN || l.DestQPN != 0x42 {
		t.Errorf("CNP decoded as %+v (info %+v)", l.BTHFields, l.Info)
	}
	if len(l.Contents) != bth.BTHLen+bth.CNPReservedLen || len(l.Payload) != 0 || l.NextLayerType() != gopacket.LayerTypeZero {
		t.Errorf("contents %d bytes, payload %d", len(l.Contents), len(l.Payload))
	}
	if !bthlayer.VerifyICRC(pkt) {
		t.Error("ICRC does not verify")
	}
}
