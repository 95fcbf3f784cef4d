package cm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

func sampleEndpoints(n int, gid netip.Addr) []Endpoint {
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{
			QPN: 0x10 + uint32(i), PSN: qp.PSN(0xabcdef - i), GID: gid,
			MAC:  [6]byte{0x02, 0x53, 0x4e, 0, 0, byte(i)},
			RKey: 0x1234500 + uint32(i), Addr: 0x7f00_0000_1000 + uint64(i)<<20, Size: 1 << 20,
			Schemes: []string{"irn", "gbn"},
		}
	}
	return eps
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, gid := range []string{"198.18.0.1", "2001:db8:a::1"} {
		want := sampleEndpoints(3, netip.MustParseAddr(gid))
		want[1].Schemes = nil
		msg, err := Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Unmarshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", gid, got, want)
		}
	}
}

// TestGoldenBytes pins the byte order and the IPv4-mapped GID form.
func TestGoldenBytes(t *testing.T) {
	msg, err := Marshal([]Endpoint{{QPN: 0x11, PSN: 0x010203, GID: netip.MustParseAddr("198.18.0.1"),
		MAC: [6]byte{2, 0x53, 0x4e, 0, 0, 0x0a}, RKey: 0x0a0b0c0d, Addr: 0x1122334455667788, Size: 4096,
		Schemes: []string{"gbn"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'S', 'N', 'C', 'M', 1, 1, 0, 0, 0, 0, 0, 57, // header: version 1, endpoints, 57-byte body
		0, 1, // one endpoint
		0, 0, 0, 0x11, 0, 1, 2, 3,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1,
		2, 0x53, 0x4e, 0, 0, 0x0a,
		0x0a, 0x0b, 0x0c, 0x0d,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0, 0, 0, 0, 0, 0, 0x10, 0,
		1, 3, 'g', 'b', 'n',
	}
	if !bytes.Equal(msg, want) {
		t.Fatalf("encoding\n got % x\nwant % x", msg, want)
	}
}

func TestMarshalRejects(t *testing.T) {
	gid := netip.MustParseAddr("198.18.0.1")
	for name, eps := range map[string][]Endpoint{
		"none":         nil,
		"wide QPN":     {{QPN: 1 << 24, GID: gid}},
		"wide PSN":     {{PSN: 1 << 24, GID: gid}},
		"no GID":       {{}},
		"zero GID":     {{GID: netip.IPv4Unspecified()}},
		"multicast":    {{GID: netip.MustParseAddr("ff02::1")}},
		"scheme chars": {{GID: gid, Schemes: []string{"Go Back N"}}},
		"empty scheme": {{GID: gid, Schemes: []string{""}}},
		"long scheme":  {{GID: gid, Schemes: []string{strings.Repeat("x", MaxSchemeLen+1)}}},
		"many schemes": {{GID: gid, Schemes: make([]string, MaxSchemes+1)}},
		"too many QPs": make([]Endpoint, MaxQPs+1),
		"too large":    bigEndpoints(MaxQPs, MaxSchemes, MaxSchemeLen),
	} {
		if _, err := Marshal(eps); err == nil {
			t.Errorf("%s: Marshal accepted %+v", name, eps)
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good, err := Marshal(sampleEndpoints(2, netip.MustParseAddr("2001:db8::1")))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", good[:7], ErrTruncated},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"http", []byte("GET / HTTP/1.1\r\n\r\n"), ErrBadMagic},
		{"version", edit(func(b []byte) []byte { b[4] = 3; return b }), ErrVersion},
		{"type", edit(func(b []byte) []byte { b[5] = 9; return b }), ErrMalformed},
		{"sync type", edit(func(b []byte) []byte { b[5] = typeSync; return b }), ErrMalformed},
		{"reserved", edit(func(b []byte) []byte { b[7] = 1; return b }), ErrMalformed},
		{"oversized", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], MaxBody+1); return b }), ErrTooLarge},
		{"huge", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0xffffffff); return b }), ErrTooLarge},
		{"short body", good[:len(good)-1], ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), ErrMalformed},
		{"zero count", edit(func(b []byte) []byte { b[12], b[13] = 0, 0; return b }), ErrMalformed},
		{"count beyond body", edit(func(b []byte) []byte { b[13] = 3; return b }), ErrTruncated},
		{"count below body", edit(func(b []byte) []byte { b[13] = 1; return b }), ErrMalformed},
		{"wide QPN", edit(func(b []byte) []byte { b[14] = 1; return b }), ErrMalformed},
		{"wide PSN", edit(func(b []byte) []byte { b[18] = 1; return b }), ErrMalformed},
		{"zero GID", edit(func(b []byte) []byte { clear(b[22:38]); return b }), ErrMalformed},
		{"scheme count", edit(func(b []byte) []byte { b[14+50] = MaxSchemes + 1; return b }), ErrMalformed},
		{"scheme past end", edit(func(b []byte) []byte { b[14+51] = 200; return b }), ErrTruncated},
		{"scheme chars", edit(func(b []byte) []byte { b[14+52] = 'I'; return b }), ErrMalformed},
	} {
		eps, err := Unmarshal(tc.msg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v (%v), want %v", tc.name, err, eps, tc.want)
		}
	}
}

// pipeExchange runs Exchange on both ends of c1/c2 at once.
func pipeExchange(t *testing.T, c1, c2 net.Conn, l1, l2 []Endpoint) (r1, r2 []Endpoint, err1, err2 error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r2, err2 = Exchange(c2, l2)
	}()
	r1, err1 = Exchange(c1, l1)
	<-done
	return
}

func TestExchangePipe(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	l1 := sampleEndpoints(4, netip.MustParseAddr("198.18.0.1"))
	l2 := sampleEndpoints(4, netip.MustParseAddr("198.18.1.1"))
	r1, r2, err1, err2 := pipeExchange(t, c1, c2, l1, l2)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !reflect.DeepEqual(r1, l2) || !reflect.DeepEqual(r2, l1) {
		t.Fatal("endpoints changed in transit")
	}
	// The same connection then serves as a barrier carrying a report.
	done := make(chan []byte)
	go func() {
		p, err := Sync(c2, nil)
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	got, err := Sync(c1, []byte("report"))
	if err != nil {
		t.Fatal(err)
	}
	if p := <-done; string(p) != "report" || len(got) != 0 {
		t.Fatalf("sync payloads %q %q", p, got)
	}
}

// bigEndpoints is n endpoints, each offering k schemes of nameLen bytes.
func bigEndpoints(n, k, nameLen int) []Endpoint {
	eps := sampleEndpoints(n, netip.MustParseAddr("198.18.0.1"))
	schemes := make([]string, k)
	for j := range schemes {
		schemes[j] = strings.Repeat(string(rune('a'+j)), nameLen)
	}
	for i := range eps {
		eps[i].QPN, eps[i].Schemes = uint32(0x10+i)&qp.PSNMask, schemes
	}
	return eps
}

// TestExchangeMaxQPs: MaxQPs endpoints offering three schemes each (what
// softnic-bench -q sends) cross in one message.
func TestExchangeMaxQPs(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	l1, l2 := bigEndpoints(MaxQPs, 3, 4), bigEndpoints(MaxQPs, 3, 4)
	r1, r2, err1, err2 := pipeExchange(t, c1, c2, l1, l2)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !reflect.DeepEqual(r1, l2) || !reflect.DeepEqual(r2, l1) {
		t.Fatal("endpoints changed in transit")
	}
}

func TestExchangeTCP(t *testing.T) {
	// Pick a free loopback port, then start the client before the server
	// listens: Client must retry until it is there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		c   net.Conn
		err error
	}
	cl := make(chan result, 1)
	go func() {
		c, err := Client(ctx, addr, 5*time.Second)
		cl <- result{c, err}
	}()
	time.Sleep(150 * time.Millisecond)
	srv, err := Server(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := <-cl
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	l1 := sampleEndpoints(2, netip.MustParseAddr("2001:db8:a::1"))
	l2 := sampleEndpoints(2, netip.MustParseAddr("2001:db8:b::1"))
	r1, r2, err1, err2 := pipeExchange(t, r.c, srv, l1, l2)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !reflect.DeepEqual(r1, l2) || !reflect.DeepEqual(r2, l1) {
		t.Fatal("endpoints changed in transit")
	}
}

func TestExchangeErrors(t *testing.T) {
	gid := netip.MustParseAddr("198.18.0.1")

	// Different QP counts on the two sides.
	c1, c2 := net.Pipe()
	_, _, err1, err2 := pipeExchange(t, c1, c2, sampleEndpoints(1, gid), sampleEndpoints(2, gid))
	if err1 == nil || err2 == nil || !strings.Contains(err1.Error(), "-q") {
		t.Fatalf("QP count mismatch: %v / %v", err1, err2)
	}
	c1.Close()
	c2.Close()

	// A peer that sends garbage, one that hangs up mid-message, and one
	// that announces an oversized body: clear errors, no hang, no panic.
	for name, tc := range map[string]struct {
		peer []byte
		want error
	}{
		"garbage":   {[]byte("hello, this is not softnic\n"), ErrBadMagic},
		"hang up":   {[]byte{'S', 'N', 'C', 'M', 1, 1, 0, 0, 0, 0, 1, 0, 0}, ErrTruncated},
		"oversized": {[]byte{'S', 'N', 'C', 'M', 1, 1, 0, 0, 0x10, 0, 0, 0}, ErrTooLarge},
		"short hdr": {[]byte{'S', 'N', 'C'}, ErrTruncated},
	} {
		c1, c2 := net.Pipe()
		go func() {
			buf := make([]byte, 4096)
			_, _ = c2.Read(buf) // take our endpoints, then misbehave
			_, _ = c2.Write(tc.peer)
			c2.Close()
		}()
		_, err := Exchange(c1, sampleEndpoints(1, gid))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
		c1.Close()
	}

	// A peer that sends a sync where endpoints belong.
	c1, c2 = net.Pipe()
	go func() { _, _ = Sync(c2, nil) }()
	if _, err := Exchange(c1, sampleEndpoints(1, gid)); !errors.Is(err, ErrMalformed) {
		t.Errorf("sync for endpoints: %v", err)
	}
	c1.Close()
	c2.Close()

	// A deadline bounds a silent peer.
	c1, c2 = net.Pipe()
	go func() { _, _ = c2.Read(make([]byte, 4096)) }()
	_ = c1.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := Exchange(c1, sampleEndpoints(1, gid)); err == nil {
		t.Error("silent peer: no error")
	}
	c1.Close()
	c2.Close()

	if _, err := Sync(c1, make([]byte, MaxBody+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized sync: %v", err)
	}
}

func TestAccessClientCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := Accept(ctx, ln); !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept after cancel: %v", err)
	}
	// Nothing listens on the closed listener's port any more.
	if _, err := Client(context.Background(), ln.Addr().String(), 0); err == nil {
		t.Fatal("Client to a closed port succeeded")
	}
}

func TestAgreeScheme(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want string
	}{
		{[]string{"irn", "gbn"}, []string{"irn", "gbn"}, "irn"},
		{[]string{"irn", "gbn"}, []string{"gbn"}, "gbn"},
		{[]string{"melo"}, []string{"fasr"}, "gbn"},
		{nil, nil, "gbn"},
		{[]string{"irn", "melo", "gbn"}, []string{"melo", "irn", "gbn"}, "irn"}, // tie: by name
		{[]string{"fasr", "igbn", "gbn"}, []string{"igbn", "gbn"}, "igbn"},
		{[]string{"fasr", "igbn", "gbn"}, []string{"gbn", "igbn"}, "gbn"}, // tie 2 = 2: by name
	} {
		x, y := AgreeScheme(tc.a, tc.b), AgreeScheme(tc.b, tc.a)
		if x != tc.want || y != tc.want {
			t.Errorf("AgreeScheme(%v, %v) = %q / reversed %q, want %q", tc.a, tc.b, x, y, tc.want)
		}
	}
}

func TestRandomPSN(t *testing.T) {
	seen := map[qp.PSN]bool{}
	for range 64 {
		p := RandomPSN()
		if !p.Valid() {
			t.Fatalf("PSN %#x wider than 24 bits", uint32(p))
		}
		seen[p] = true
	}
	if len(seen) < 60 {
		t.Fatalf("only %d distinct PSNs in 64 draws", len(seen))
	}
}

// TestConnectQP connects two embedded NICs through a real exchange and
// moves data both ways with the PSNs the exchange chose.
func TestConnectQP(t *testing.T) {
	m, err := verbs.NewEmbedded(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	type side struct {
		ctx *verbs.Context
		mr  *verbs.MR
		cq  *verbs.CQ
		qp  *verbs.QP
		ep  Endpoint
	}
	mk := func(c *verbs.Context) *side {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		s := &side{ctx: c}
		if s.mr, err = pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic); err != nil {
			t.Fatal(err)
		}
		if s.cq, err = c.CreateCQ(16); err != nil {
			t.Fatal(err)
		}
		if s.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 8, MaxRecvWR: 8}); err != nil {
			t.Fatal(err)
		}
		e := c.Engine()
		s.ep = Endpoint{QPN: s.qp.QPN(), PSN: RandomPSN(), GID: e.Addr(), MAC: e.MAC(), RKey: s.mr.RKey,
			Addr: s.mr.Addr, Size: uint64(s.mr.Length), Schemes: []string{"gbn"}}
		return s
	}
	a, b := mk(m.A), mk(m.B)
	a.ep.PSN = qp.PSNMask - 1 // the write below wraps the PSN space

	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	ra, rb, err1, err2 := pipeExchange(t, c1, c2, []Endpoint{a.ep}, []Endpoint{b.ep})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if err := ConnectQP(a.qp, a.ep, ra[0], verbs.ConnParam{MTU: qp.MTU1024}); err != nil {
		t.Fatal(err)
	}
	if err := ConnectQP(b.qp, b.ep, rb[0], verbs.ConnParam{MaxRdAtomic: 200}); err != nil {
		t.Fatal(err)
	}
	attr := b.qp.Query()
	if attr.State != verbs.QPSRTS || attr.DestQPN != a.ep.QPN || attr.RQPSN != a.ep.PSN || attr.Timeout != 14 ||
		attr.RetryCnt != 7 || attr.RNRRetry != 7 || attr.MinRNRTimer != 12 || attr.MaxRdAtomic != 16 || attr.PathMTU != qp.MTU1024 {
		t.Fatalf("B's QP after connect: %+v", attr)
	}

	copy(a.mr.Buf(), bytes.Repeat([]byte{0x5a}, 3000))
	wr := verbs.SendWR{WRID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, NumSGE: 1,
		RemoteAddr: ra[0].Addr, RKey: ra[0].RKey}
	wr.SGL[0] = a.mr.SGE(0, 3000)
	if err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	var wc [1]verbs.WC
	if !m.RunUntil(func() bool { n, _ := a.cq.Poll(wc[:]); return n == 1 }, time.Second) {
		t.Fatal("write did not complete")
	}
	if wc[0].Status != verbs.WCSuccess || !bytes.Equal(b.mr.Buf()[:3000], a.mr.Buf()[:3000]) {
		t.Fatalf("write: %v", wc[0].Status)
	}

	// Misuse is refused with a reason.
	other := a.ep
	other.QPN++
	if err := ConnectQP(a.qp, other, ra[0], verbs.ConnParam{}); err == nil || !strings.Contains(err.Error(), "names QP") {
		t.Errorf("wrong local endpoint: %v", err)
	}
	v6 := ra[0]
	v6.GID = netip.MustParseAddr("2001:db8::2")
	if err := ConnectQP(a.qp, a.ep, v6, verbs.ConnParam{}); err == nil || !strings.Contains(err.Error(), "IP versions") {
		t.Errorf("mixed IP versions: %v", err)
	}
	if err := ConnectQP(nil, a.ep, ra[0], verbs.ConnParam{}); err == nil {
		t.Error("nil QP accepted")
	}
}

// TestConnectDefaultsAgree: ConnectQP and the embedded Connect
// (dataplane.Connect) fill a ConnParam the same way, so that a QP
// connected either way ends with the same attributes, for zero fields, for
// a MaxRdAtomic above the device's (both clamp it) and for values the
// engine refuses (both fail with ErrAttrValue).
func TestConnectDefaultsAgree(t *testing.T) {
	const psnA, psnB = 0x123456, 0xabcdef
	for _, p := range []verbs.ConnParam{
		{},
		{MaxRdAtomic: 200},
		{MaxRdAtomic: dataplane.MaxRdAtomic + 1, MTU: qp.MTU4096, Timeout: 8, RetryCntSet: true, RNRRetrySet: true},
		{TimeoutDisabled: true, MinRNRTimer: 31, MaxRdAtomic: 3, Access: verbs.AccessRemoteWrite},
		{RetryCnt: 8},
		{RNRRetry: 200},
		{Timeout: 32},
		{MinRNRTimer: 32},
		{MTU: 9},
	} {
		m, err := verbs.NewEmbedded(sim.Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		mkQP := func(c *verbs.Context) *verbs.QP {
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := c.CreateCQ(4)
			if err != nil {
				t.Fatal(err)
			}
			q, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		endpoint := func(c *verbs.Context, q *verbs.QP, psn qp.PSN) Endpoint {
			e := c.Engine()
			return Endpoint{QPN: q.QPN(), PSN: psn, GID: e.Addr(), MAC: e.MAC(), Size: 1}
		}

		// The embedded Connect.
		sa, sb := mkQP(m.A), mkQP(m.B)
		sp := p
		sp.PSNA, sp.PSNB = psnA, psnB
		errSim := m.Connect(sa, sb, sp)

		// ConnectQP, each side towards the other's endpoint.
		ca, cb := mkQP(m.A), mkQP(m.B)
		ea, eb := endpoint(m.A, ca, psnA), endpoint(m.B, cb, psnB)
		errCM := ConnectQP(ca, ea, eb, p)
		if err := ConnectQP(cb, eb, ea, p); (err == nil) != (errCM == nil) {
			t.Fatalf("%+v: ConnectQP: A %v, B %v", p, errCM, err)
		}

		if (errSim == nil) != (errCM == nil) || errSim != nil && (!errors.Is(errSim, dataplane.ErrAttrValue) || !errors.Is(errCM, dataplane.ErrAttrValue)) {
			t.Errorf("%+v: Connect: %v; ConnectQP: %v", p, errSim, errCM)
			continue
		}
		if errSim != nil {
			continue
		}
		for _, pair := range [][2]*verbs.QP{{sa, ca}, {sb, cb}} {
			sim, cm := pair[0].Query(), pair[1].Query()
			sim.DestQPN, cm.DestQPN = 0, 0 // the peers differ
			if sim != cm {
				t.Errorf("%+v:\nConnect   %+v\nConnectQP %+v", p, sim, cm)
			}
			if sim.State != verbs.QPSRTS {
				t.Errorf("%+v: QP in %v", p, sim.State)
			}
		}
	}
}
