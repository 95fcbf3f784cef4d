package ibcm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// unhex reads a hand-written byte vector: hex digits, with spaces,
// newlines and "|" separators and "#" comments ignored.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, r := range line {
			if r != ' ' && r != '|' && r != '\t' {
				sb.WriteRune(r)
			}
		}
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pad extends a vector with zeros to a full MAD.
func pad(t testing.TB, b []byte) []byte {
	t.Helper()
	if len(b) > MADSize {
		t.Fatalf("vector of %d bytes", len(b))
	}
	return append(b, make([]byte, MADSize-len(b))...)
}

func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

func goldenREQ() REQ {
	m := REQ{LocalCommID: 0x11223344, ServiceID: 0x0000000001061234, LocalCAGUID: 0x0202c9fffe000001,
		LocalQKey: 0x11111111, LocalQPN: 0x000123, ResponderResources: 0x10, InitiatorDepth: 0x08,
		RemoteCMResponseTimeout: 20, TransportServiceType: TransportRC, EndToEndFlowControl: true,
		StartingPSN: 0xabcdef, LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: 3,
		RNRRetryCount: 7, MaxCMRetries: 15, SRQ: true,
		Primary: Path{LocalLID: LIDPermissive, RemoteLID: LIDPermissive,
			LocalGID:  GIDFromAddr(netip.MustParseAddr("198.18.0.1")),
			RemoteGID: GIDFromAddr(netip.MustParseAddr("198.18.0.2")),
			FlowLabel: 0x12345, PacketRate: 7, TrafficClass: 0x60, HopLimit: 64, SL: 3, LocalACKTimeout: 17}}
	copy(m.PrivateData[:], seq(REQPrivateDataSize, 1))
	return m
}

// The REQ vector is written field by field from IBA table 106 (offsets
// after the 24-byte header, in the comments) and checked by hand against
// Linux's ibta_vol1_c12.h masks.
const goldenREQHex = `
01 07 02 03 | 0000 | 0000 | 0102030405060708 | 0010 | 0000 | 00000000   # MAD header
11223344                  # 0   local comm ID
00000000                  # 4   reserved
0000000001061234          # 8   service ID
0202c9fffe000001          # 16  local CA GUID
00000000                  # 24  reserved
11111111                  # 28  local Q_Key
000123 10                 # 32  local QPN, responder resources
000000 08                 # 36  local EECN, initiator depth
000000 a1                 # 40  remote EECN; 43: remote CM response timeout 20<<3 | RC<<1 | flow control
abcdef a7                 # 44  starting PSN; 47: local CM response timeout 20<<3 | retry count 7
ffff                      # 48  P_Key
37                        # 50  path MTU 3<<4 | RDC 0 | RNR retry 7
f8                        # 51  max CM retries 15<<4 | SRQ<<3 | extended transport 0
ffff ffff                 # 52  primary local LID, remote LID (permissive)
00000000000000000000ffffc6120001   # 56  primary local GID ::ffff:198.18.0.1
00000000000000000000ffffc6120002   # 72  primary remote GID ::ffff:198.18.0.2
12345007                  # 88  flow label 0x12345<<12 | packet rate 7
60 40                     # 92  traffic class, hop limit
30                        # 94  SL 3<<4 | subnet local 0
88                        # 95  local ACK timeout 17<<3
`

func TestGoldenREQ(t *testing.T) {
	want := unhex(t, goldenREQHex)
	want = append(want, make([]byte, 164-len(want))...) // alternate path: zero
	want = pad(t, append(want, seq(REQPrivateDataSize, 1)...))
	m := goldenREQ()
	got := make([]byte, MADSize)
	if err := Marshal(got, 0x0102030405060708, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("REQ encoding\n got %x\nwant %x", got, want)
	}
	var back REQ
	h, err := Unmarshal(want, &back)
	if err != nil {
		t.Fatal(err)
	}
	if h.TID != 0x0102030405060708 || h.AttrID != AttrREQ {
		t.Fatalf("header %+v", h)
	}
	if back != m {
		t.Fatalf("REQ decoding\n got %+v\nwant %+v", back, m)
	}
	if back.Primary.LocalGID.Addr() != netip.MustParseAddr("198.18.0.1") {
		t.Fatalf("GID %v", back.Primary.LocalGID)
	}
}

func TestGoldenREQAlternatePathAndFlags(t *testing.T) {
	// Alternate path at 96, its SAP bit (139 bit 5), subnet local (bit 4
	// of the SL byte), RDC exists, extended transport type, UC.
	m := REQ{TransportServiceType: TransportUC, RDCExists: true, ExtendedTransportType: 5, SAPSupported: true,
		Alternate: Path{LocalLID: 0x0102, RemoteLID: 0x0304, SL: 0xf, SubnetLocal: true, LocalACKTimeout: 31,
			FlowLabel: 0xfffff, PacketRate: 0x3f, TrafficClass: 0xaa, HopLimit: 0xbb}}
	got := make([]byte, MADSize)
	if err := Marshal(got, 0, &m); err != nil {
		t.Fatal(err)
	}
	d := got[HeaderSize:]
	checks := []struct {
		off  int
		want []byte
	}{
		{43, []byte{0x02}},       // UC<<1
		{50, []byte{0x08}},       // RDC exists
		{51, []byte{0x05}},       // extended transport type
		{96, []byte{1, 2, 3, 4}}, // alternate LIDs
		{132, []byte{0xff, 0xff, 0xf0 | 0x00, 0x3f}},
		{136, []byte{0xaa, 0xbb, 0xf8, 0xfc}}, // TC, hop limit, SL 15<<4|subnet local, ACK timeout 31<<3|SAP
	}
	for _, c := range checks {
		if !bytes.Equal(d[c.off:c.off+len(c.want)], c.want) {
			t.Errorf("offset %d: %x, want %x", c.off, d[c.off:c.off+len(c.want)], c.want)
		}
	}
	var back REQ
	if _, err := Unmarshal(got, &back); err != nil || back != m {
		t.Fatalf("round trip %+v, %v", back, err)
	}
}

func TestGoldenREP(t *testing.T) {
	m := REP{LocalCommID: 0xa1a2a3a4, RemoteCommID: 0x11223344, LocalQKey: 0x22222222, LocalQPN: 0x000456,
		StartingPSN: 0x123456, ResponderResources: 4, InitiatorDepth: 2, TargetACKDelay: 15,
		FailoverAccepted: 2, EndToEndFlowControl: true, RNRRetryCount: 6, SRQ: true, LocalCAGUID: 0x0202c9fffe000002}
	copy(m.PrivateData[:], seq(REPPrivateDataSize, 0x40))
	want := unhex(t, `
01 07 02 03 0000 0000 00000000000000aa 0013 0000 00000000
a1a2a3a4          # 0  local comm ID
11223344          # 4  remote comm ID
22222222          # 8  local Q_Key
000456 00         # 12 local QPN
000000 00         # 16 local EECN
123456 00         # 20 starting PSN
04 02             # 24 responder resources, initiator depth
7d                # 26 target ACK delay 15<<3 | failover 2<<1 | flow control
d0                # 27 RNR retry 6<<5 | SRQ<<4
0202c9fffe000002  # 28 local CA GUID
`)
	want = pad(t, append(want, seq(REPPrivateDataSize, 0x40)...))
	got := make([]byte, MADSize)
	if err := Marshal(got, 0xaa, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("REP\n got %x\nwant %x", got, want)
	}
	var back REP
	if _, err := Unmarshal(want, &back); err != nil || back != m {
		t.Fatalf("REP decoding %+v, %v", back, err)
	}
}

func TestGoldenREJ(t *testing.T) {
	// What Linux's cm_issue_rej sends for a REQ to a service nobody listens
	// on: reason 8, message rejected REQ, remote comm ID the REQ's.
	m := REJ{LocalCommID: 0, RemoteCommID: 0x11223344, MessageRejected: MsgREQ, Reason: RejInvalidServiceID}
	want := pad(t, unhex(t, `
01 07 02 03 0000 0000 0102030405060708 0012 0000 00000000
00000000  # 0  local comm ID
11223344  # 4  remote comm ID
00 00     # 8  message rejected 0<<6; 9: ARI length 0<<1
0008      # 10 reason
`))
	got := make([]byte, MADSize)
	if err := Marshal(got, 0x0102030405060708, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("REJ\n got %x\nwant %x", got, want)
	}
	// A timeout REJ carries the CA GUID as an 8-byte ARI.
	m = REJ{LocalCommID: 5, RemoteCommID: 6, MessageRejected: MsgOther, Reason: RejTimeout, ARILength: 8}
	copy(m.ARI[:], guidARI(0x0202c9fffe000001))
	copy(m.PrivateData[:], seq(REJPrivateDataSize, 9))
	want = unhex(t, `
01 07 02 03 0000 0000 0000000000000001 0012 0000 00000000
00000005 00000006
80        # message rejected 2<<6
10        # ARI length 8<<1
0004      # reason 4, timeout
0202c9fffe000001`)
	want = append(want, make([]byte, HeaderSize+84-len(want))...)
	want = pad(t, append(want, seq(REJPrivateDataSize, 9)...))
	if err := Marshal(got, 1, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("timeout REJ\n got %x\nwant %x", got, want)
	}
	var back REJ
	if _, err := Unmarshal(want, &back); err != nil || back != m || !bytes.Equal(back.ARIBytes(), guidARI(0x0202c9fffe000001)) {
		t.Fatalf("REJ decoding %+v, %v", back, err)
	}
}

func TestGoldenMRADREQ(t *testing.T) {
	mra := MRA{LocalCommID: 1, RemoteCommID: 2, MessageMRAed: MsgREP, ServiceTimeout: 24}
	want := pad(t, unhex(t, `01 07 02 03 0000 0000 0000000000000003 0011 0000 00000000
00000001 00000002
40     # message MRAed 1<<6
c0     # service timeout 24<<3`))
	got := make([]byte, MADSize)
	if err := Marshal(got, 3, &mra); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("MRA %v\n got %x\nwant %x", err, got, want)
	}
	dreq := DREQ{LocalCommID: 7, RemoteCommID: 8, RemoteQPN: 0xfedcba}
	copy(dreq.PrivateData[:], seq(DREQPrivateDataSize, 0))
	want = unhex(t, `01 07 02 03 0000 0000 0000000000000004 0015 0000 00000000
00000007 00000008
fedcba 00 # remote QPN/EECN`)
	want = pad(t, append(want, seq(DREQPrivateDataSize, 0)...))
	if err := Marshal(got, 4, &dreq); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("DREQ %v\n got %x\nwant %x", err, got, want)
	}
	sidr := SIDRREP{RequestID: 9, Status: SIDRSuccess, QPN: 0x000321, ServiceID: ServiceID(PortSpaceUDP, 7471), QKey: 0x01234567}
	want = pad(t, unhex(t, `01 07 02 03 0000 0000 0000000000000005 0018 0000 00000000
00000009
00 00 0000       # status, additional information length, reserved
000321 00        # QPN
0000000001111d2f # service ID: RDMA_IB_IP_PS_UDP | 7471
01234567         # Q_Key`))
	if err := Marshal(got, 5, &sidr); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("SIDR_REP %v\n got %x\nwant %x", err, got, want)
	}
}

// randMessages is one of each message with every field random within its
// IBA width.
func randMessages(r *rand.Rand) []Message {
	u := func(bits uint) uint32 { return r.Uint32() & (1<<bits - 1) }
	b := func() bool { return r.IntN(2) == 1 }
	path := func() Path {
		var p Path
		p.LocalLID, p.RemoteLID = uint16(u(16)), uint16(u(16))
		for i := range p.LocalGID {
			p.LocalGID[i], p.RemoteGID[i] = byte(u(8)), byte(u(8))
		}
		p.FlowLabel, p.PacketRate, p.TrafficClass, p.HopLimit = u(20), uint8(u(6)), uint8(u(8)), uint8(u(8))
		p.SL, p.SubnetLocal, p.LocalACKTimeout = uint8(u(4)), b(), uint8(u(5))
		return p
	}
	fill := func(p []byte) {
		for i := range p {
			p[i] = byte(u(8))
		}
	}
	req := &REQ{LocalCommID: r.Uint32(), ServiceID: r.Uint64(), LocalCAGUID: r.Uint64(), LocalQKey: r.Uint32(),
		LocalQPN: u(24), ResponderResources: uint8(u(8)), LocalEECN: u(24), InitiatorDepth: uint8(u(8)),
		RemoteEECN: u(24), RemoteCMResponseTimeout: uint8(u(5)), TransportServiceType: uint8(u(2)),
		EndToEndFlowControl: b(), StartingPSN: u(24), LocalCMResponseTimeout: uint8(u(5)), RetryCount: uint8(u(3)),
		PKey: uint16(u(16)), PathMTU: uint8(u(4)), RDCExists: b(), RNRRetryCount: uint8(u(3)),
		MaxCMRetries: uint8(u(4)), SRQ: b(), ExtendedTransportType: uint8(u(3)), Primary: path(), Alternate: path(),
		SAPSupported: b()}
	fill(req.PrivateData[:])
	mra := &MRA{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), MessageMRAed: uint8(u(2)), ServiceTimeout: uint8(u(5))}
	fill(mra.PrivateData[:])
	rej := &REJ{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), MessageRejected: uint8(u(2)),
		ARILength: uint8(r.IntN(REJARILength + 1)), Reason: uint16(u(16))}
	fill(rej.ARI[:])
	fill(rej.PrivateData[:])
	rep := &REP{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), LocalQKey: r.Uint32(), LocalQPN: u(24),
		LocalEECN: u(24), StartingPSN: u(24), ResponderResources: uint8(u(8)), InitiatorDepth: uint8(u(8)),
		TargetACKDelay: uint8(u(5)), FailoverAccepted: uint8(u(2)), EndToEndFlowControl: b(),
		RNRRetryCount: uint8(u(3)), SRQ: b(), LocalCAGUID: r.Uint64()}
	fill(rep.PrivateData[:])
	rtu := &RTU{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32()}
	fill(rtu.PrivateData[:])
	dreq := &DREQ{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), RemoteQPN: u(24)}
	fill(dreq.PrivateData[:])
	drep := &DREP{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32()}
	fill(drep.PrivateData[:])
	sreq := &SIDRREQ{RequestID: r.Uint32(), PKey: uint16(u(16)), ServiceID: r.Uint64()}
	fill(sreq.PrivateData[:])
	srep := &SIDRREP{RequestID: r.Uint32(), Status: uint8(u(8)), InfoLength: uint8(r.IntN(SIDRREPInfoLength + 1)),
		QPN: u(24), ServiceID: r.Uint64(), QKey: r.Uint32()}
	fill(srep.Info[:])
	fill(srep.PrivateData[:])
	return []Message{req, mra, rej, rep, rtu, dreq, drep, sreq, srep}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, MADSize)
	for i := range 2000 {
		for _, m := range randMessages(r) {
			tid := r.Uint64()
			if err := Marshal(buf, tid, m); err != nil {
				t.Fatalf("%d %T: %v", i, m, err)
			}
			back := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
			h, err := Unmarshal(buf, back)
			if err != nil {
				t.Fatalf("%d %T: %v", i, m, err)
			}
			if h.TID != tid || h.AttrID != m.AttrID() || h.BaseVersion != 1 || h.MgmtClass != 7 || h.ClassVersion != 2 || h.Method != 3 {
				t.Fatalf("header %+v", h)
			}
			if !reflect.DeepEqual(back, m) {
				t.Fatalf("%d %T round trip\n got %+v\nwant %+v", i, m, back, m)
			}
			// Re-encoding the decoded message gives the same bytes: no
			// field overlaps another.
			again := make([]byte, MADSize)
			if err := Marshal(again, tid, back); err != nil || !bytes.Equal(again, buf) {
				t.Fatalf("%d %T re-encode differs: %v", i, m, err)
			}
		}
	}
}

func TestMarshalRejectsOversizedFields(t *testing.T) {
	buf := make([]byte, MADSize)
	for _, m := range []Message{
		&REQ{LocalQPN: 1 << 24}, &REQ{StartingPSN: 1 << 24}, &REQ{RemoteCMResponseTimeout: 32},
		&REQ{RetryCount: 8}, &REQ{MaxCMRetries: 16}, &REQ{PathMTU: 16}, &REQ{Primary: Path{FlowLabel: 1 << 20}},
		&REQ{Primary: Path{SL: 16}}, &REQ{Alternate: Path{PacketRate: 64}}, &REQ{TransportServiceType: 4},
		&REP{LocalQPN: 1 << 24}, &REP{RNRRetryCount: 8}, &REP{TargetACKDelay: 32},
		&MRA{ServiceTimeout: 32}, &MRA{MessageMRAed: 4}, &REJ{ARILength: 73}, &REJ{MessageRejected: 4},
		&DREQ{RemoteQPN: 1 << 24}, &SIDRREP{QPN: 1 << 24}, &SIDRREP{InfoLength: 73},
	} {
		if err := Marshal(buf, 0, m); !errors.Is(err, ErrField) {
			t.Errorf("%T %+v: %v, want ErrField", m, m, err)
		}
	}
	if err := Marshal(buf[:255], 0, &RTU{}); !errors.Is(err, ErrBuffer) {
		t.Errorf("short buffer: %v", err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := make([]byte, MADSize)
	if err := Marshal(good, 1, &RTU{}); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:255], ErrLength},
		{"empty", nil, ErrLength},
		{"long", append(append([]byte(nil), good...), 0), ErrLength},
		{"base version", mod(func(b []byte) []byte { b[0] = 2; return b }), ErrBaseVersion},
		{"class", mod(func(b []byte) []byte { b[1] = 0x03; return b }), ErrMgmtClass},
		{"class version", mod(func(b []byte) []byte { b[2] = 1; return b }), ErrClassVersion},
		{"method GetResp", mod(func(b []byte) []byte { b[3] = 0x81; return b }), ErrMethod},
		{"attr ClassPortInfo", mod(func(b []byte) []byte { b[16], b[17] = 0, 0x01; return b }), ErrAttr},
		{"attr 0x1b", mod(func(b []byte) []byte { b[16], b[17] = 0, 0x1b; return b }), ErrAttr},
	}
	for _, c := range cases {
		if _, err := ParseHeader(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	var rep REP
	if _, err := Unmarshal(good, &rep); !errors.Is(err, ErrWrongAttr) {
		t.Errorf("RTU read as REP: %v", err)
	}
}

func TestCMAHeader(t *testing.T) {
	h := CMAHeader{SrcPort: 0xc001, Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2")}
	b := make([]byte, CMAHeaderSize)
	if err := h.Put(b); err != nil {
		t.Fatal(err)
	}
	// cma_hdr: version 0, ip_version 4<<4, port, then two cma_ip_addr
	// unions with the IPv4 address in their last 4 bytes.
	want := unhex(t, `00 40 c001
000000000000000000000000 c6120001
000000000000000000000000 c6120002`)
	if !bytes.Equal(b, want) {
		t.Fatalf("IPv4 cma_hdr\n got %x\nwant %x", b, want)
	}
	back, err := ParseCMAHeader(b)
	if err != nil || back != h {
		t.Fatalf("parse %+v %v", back, err)
	}
	h6 := CMAHeader{SrcPort: 1, Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2")}
	if err := h6.Put(b); err != nil {
		t.Fatal(err)
	}
	if b[1] != 0x60 || b[4] != 0x20 || b[19] != 1 || b[35] != 2 {
		t.Fatalf("IPv6 cma_hdr %x", b)
	}
	if back, err := ParseCMAHeader(b); err != nil || back != h6 {
		t.Fatalf("parse v6 %+v %v", back, err)
	}
	for _, bad := range [][]byte{b[:35], append([]byte{1}, b[1:]...), append([]byte{0, 0x50}, b[2:]...)} {
		if _, err := ParseCMAHeader(bad); !errors.Is(err, ErrCMAHeader) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	mixed := CMAHeader{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("2001:db8::2")}
	if err := mixed.Put(b); !errors.Is(err, ErrCMAHeader) {
		t.Errorf("mixed families: %v", err)
	}
}

func TestServiceID(t *testing.T) {
	if got := ServiceID(PortSpaceTCP, 7471); got != 0x0000000001061d2f {
		t.Fatalf("TCP port 7471: %#x", got)
	}
	for _, c := range []struct {
		ps     uint16
		prefix uint64
	}{{PortSpaceTCP, ServiceIDPrefixTCP}, {PortSpaceUDP, ServiceIDPrefixUDP}, {PortSpaceIB, ServiceIDPrefixIB}} {
		sid := ServiceID(c.ps, 0xbeef)
		if sid&ServiceIDPSMask != c.prefix {
			t.Errorf("ps %#x: %#x", c.ps, sid)
		}
		ps, port, ok := ServicePort(sid)
		if !ok || ps != c.ps || port != 0xbeef {
			t.Errorf("ServicePort(%#x) = %#x %d %v", sid, ps, port, ok)
		}
	}
	if _, _, ok := ServicePort(0x0000000001070000); ok {
		t.Error("unknown port space accepted")
	}
	if IBATime(0) != 4096 || IBATime(20).Seconds() < 4.29 || IBATime(20).Seconds() > 4.30 {
		t.Errorf("IBATime: %v %v", IBATime(0), IBATime(20))
	}
}

func TestRoCEPath(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	p := RoCEPath(src, dst, 0x60, 64, 17)
	want := Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: GIDFromAddr(src), RemoteGID: GIDFromAddr(dst),
		TrafficClass: 0x60, HopLimit: 64, LocalACKTimeout: 17}
	if p != want {
		t.Fatalf("%+v", p)
	}
	if !RoCEPath(src, dst, 0, 1, 17).SubnetLocal {
		t.Fatal("hop limit 1 is subnet local")
	}
	if p.LocalGID.Addr() != src || p.RemoteGID.String() != "198.18.0.2" {
		t.Fatalf("GIDs %v %v", p.LocalGID, p.RemoteGID)
	}
	six := netip.MustParseAddr("2001:db8::1")
	if GIDFromAddr(six).Addr() != six {
		t.Fatal("IPv6 GID")
	}
}
