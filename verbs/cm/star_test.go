package cm

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs"
)

// starEndpoints is sampleEndpoints with a server's role and memory table
// on the first and a client's role on the second.
func starEndpoints(gid netip.Addr) []Endpoint {
	eps := sampleEndpoints(3, gid)
	eps[0].Star = verbs.StarServer
	eps[0].StarTable = []verbs.StarRegion{
		{RKey: 0x1234500, VA: 0x7f00_0000_1000, Length: 1 << 20, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
		{RKey: 7, VA: 1 << 40, Length: 4096, Access: verbs.AccessRemoteRead},
	}
	eps[1].Star = verbs.StarClient
	return eps
}

// TestStarWire: endpoints with StaR roles travel as version 2 and come
// back as they were; without a role the message is version 1, as an
// older peer reads it; the version-2 trailer's bytes are pinned.
func TestStarWire(t *testing.T) {
	want := starEndpoints(netip.MustParseAddr("198.18.0.1"))
	msg, err := Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if msg[4] != 2 {
		t.Fatalf("version %d with StaR roles, want 2", msg[4])
	}
	got, err := Unmarshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
	}
	plain, err := Marshal(sampleEndpoints(2, netip.MustParseAddr("198.18.0.1")))
	if err != nil || plain[4] != 1 {
		t.Fatalf("without roles: version %d (%v), want 1", plain[4], err)
	}

	one, err := Marshal([]Endpoint{{QPN: 0x11, GID: netip.MustParseAddr("198.18.0.1"), Star: verbs.StarServer,
		StarTable: []verbs.StarRegion{{RKey: 0x0a0b0c0d, VA: 0x1122334455667788, Length: 0x1000, Access: verbs.AccessRemoteRead}}}})
	if err != nil {
		t.Fatal(err)
	}
	if one[4] != 2 {
		t.Fatalf("version %d", one[4])
	}
	trailer := []byte{
		1,    // role: server
		0, 1, // one region
		0x0a, 0x0b, 0x0c, 0x0d,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0, 0, 0, 0, 0, 0, 0x10, 0,
		2, // remote read
	}
	if !bytes.HasSuffix(one, trailer) || len(one) != HeaderLen+2+endpointFixedLen+len(trailer) {
		t.Fatalf("encoding\n got % x\nwant ... % x", one, trailer)
	}
}

func TestStarWireRejects(t *testing.T) {
	gid := netip.MustParseAddr("198.18.0.1")
	client := []Endpoint{{GID: gid, Star: verbs.StarClient, StarTable: []verbs.StarRegion{{RKey: 1, Length: 1, Access: verbs.AccessRemoteWrite}}}}
	for name, eps := range map[string][]Endpoint{
		"role":              {{GID: gid, Star: 3}},
		"table from client": client,
		"table from none":   {{GID: gid, StarTable: client[0].StarTable}, {GID: gid, Star: verbs.StarServer}},
		"access none":       {{GID: gid, Star: verbs.StarServer, StarTable: []verbs.StarRegion{{RKey: 1, Length: 1}}}},
		"access atomic":     {{GID: gid, Star: verbs.StarServer, StarTable: []verbs.StarRegion{{RKey: 1, Length: 1, Access: verbs.AccessRemoteAtomic}}}},
		"wraps":             {{GID: gid, Star: verbs.StarServer, StarTable: []verbs.StarRegion{{VA: 1 << 63, Length: 1 << 63, Access: verbs.AccessRemoteRead}}}},
		"too many regions":  {{GID: gid, Star: verbs.StarServer, StarTable: make([]verbs.StarRegion, MaxStarRegions+1)}},
	} {
		if _, err := Marshal(eps); err == nil {
			t.Errorf("%s: Marshal accepted it", name)
		}
	}

	// One server endpoint with one region: the region's access byte is
	// the message's last.
	good, err := Marshal([]Endpoint{{GID: gid, Star: verbs.StarServer, StarTable: []verbs.StarRegion{{RKey: 1, Length: 8, Access: verbs.AccessRemoteWrite}}}})
	if err != nil {
		t.Fatal(err)
	}
	role := HeaderLen + 2 + endpointFixedLen
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	for _, tc := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"role 3", edit(func(b []byte) { b[role] = 3 }), ErrMalformed},
		{"table from a client", edit(func(b []byte) { b[role] = 2 }), ErrMalformed},
		{"no role in version 2", edit(func(b []byte) { b[role] = 0 }), ErrMalformed},
		{"region count", edit(func(b []byte) { b[role+1], b[role+2] = 0x04, 0x01 }), ErrMalformed},
		{"region past end", edit(func(b []byte) { b[role+2] = 2 }), ErrTruncated},
		{"access 0", edit(func(b []byte) { b[len(b)-1] = 0 }), ErrMalformed},
		{"access 4", edit(func(b []byte) { b[len(b)-1] = 4 }), ErrMalformed},
		{"no trailer", append(bytes.Clone(good[:8]), append([]byte{0, 0, 0, byte(len(good) - HeaderLen - 24)}, good[HeaderLen:len(good)-24]...)...), ErrTruncated},
		{"sync of version 2", []byte("SNCM\x02\x02\x00\x00\x00\x00\x00\x00"), ErrMalformed},
	} {
		eps, err := Unmarshal(tc.msg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v (%+v), want %v", tc.name, err, eps, tc.want)
		}
	}
}

// TestAgreeStar: a server pairs only with a client, a client only with a
// server, none only with none; the error names both roles.
func TestAgreeStar(t *testing.T) {
	roles := []verbs.StarRole{verbs.StarNone, verbs.StarServer, verbs.StarClient}
	for _, l := range roles {
		for _, r := range roles {
			err := AgreeStar(l, r)
			ok := l == verbs.StarNone && r == verbs.StarNone || l == verbs.StarServer && r == verbs.StarClient || l == verbs.StarClient && r == verbs.StarServer
			if ok != (err == nil) || err != nil && !errors.Is(err, ErrStarRoles) {
				t.Errorf("%v with %v: %v", l, r, err)
			}
		}
	}
	if err := AgreeStar(verbs.StarServer, verbs.StarNone); err == nil || err.Error() != "cm: StaR roles do not pair: this side server, the peer none" {
		t.Errorf("server with none: %v", err)
	}
}

// TestConnectStar: through the exchange, a StaR client QP gets its
// server's memory table before RTS and WRITEs into it and READs from it;
// a WRITE outside the table fails with LOC_PROT_ERR and never leaves; a
// client with an ordinary peer, or an endpoint whose role is not its
// QP's, is refused before the QP moves.
func TestConnectStar(t *testing.T) {
	m, err := verbs.NewEmbedded(sim.Config{Seed: 3, StarServerB: true})
	if err != nil {
		t.Fatal(err)
	}
	type side struct {
		mr *verbs.MR
		cq *verbs.CQ
		qp *verbs.QP
		ep Endpoint
	}
	mk := func(c *verbs.Context, role verbs.StarRole) *side {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		s := &side{}
		if s.mr, err = pd.RegMR(make([]byte, 8192), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
			t.Fatal(err)
		}
		if s.cq, err = c.CreateCQ(16); err != nil {
			t.Fatal(err)
		}
		if s.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 8, MaxRecvWR: 8, Scheme: "fasr", Star: role}); err != nil {
			t.Fatal(err)
		}
		e := c.Engine()
		s.ep = Endpoint{QPN: s.qp.QPN(), PSN: RandomPSN(), GID: e.Addr(), MAC: e.MAC(), RKey: s.mr.RKey,
			Addr: s.mr.Addr, Size: uint64(s.mr.Length), Schemes: []string{"fasr"}, Star: role}
		if role == verbs.StarServer {
			if s.ep.StarTable, err = s.qp.StarTable(); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	a, b := mk(m.A, verbs.StarClient), mk(m.B, verbs.StarServer)
	plain := mk(m.B, verbs.StarNone)
	if err := ConnectQP(a.qp, a.ep, plain.ep, verbs.ConnParam{}); !errors.Is(err, ErrStarRoles) || a.qp.Query().State != verbs.QPSReset {
		t.Errorf("client with an ordinary peer: %v (state %v)", err, a.qp.Query().State)
	}
	lie := a.ep
	lie.Star = verbs.StarNone
	if err := ConnectQP(a.qp, lie, plain.ep, verbs.ConnParam{}); err == nil || a.qp.Query().State != verbs.QPSReset {
		t.Errorf("endpoint without the QP's role: %v", err)
	}

	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	ra, rb, err1, err2 := pipeExchange(t, c1, c2, []Endpoint{a.ep}, []Endpoint{b.ep})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if ra[0].Star != verbs.StarServer || len(ra[0].StarTable) != 1 || rb[0].Star != verbs.StarClient {
		t.Fatalf("exchanged roles: %+v, %+v", ra[0], rb[0])
	}
	if err := ConnectQP(b.qp, b.ep, rb[0], verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	if err := ConnectQP(a.qp, a.ep, ra[0], verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	run := func(id uint64, op verbs.WROpcode, local, remote, n int) verbs.WCStatus {
		t.Helper()
		wr := verbs.SendWR{WRID: id, Opcode: op, Flags: verbs.SendSignaled, NumSGE: 1, RemoteAddr: ra[0].Addr + uint64(remote), RKey: ra[0].RKey}
		wr.SGL[0] = a.mr.SGE(local, n)
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		var wc [1]verbs.WC
		if !m.RunUntil(func() bool { n, _ := a.cq.Poll(wc[:]); return n == 1 }, time.Second) {
			t.Fatalf("WR %d did not complete", id)
		}
		return wc[0].Status
	}
	copy(a.mr.Buf(), bytes.Repeat([]byte{0xa5}, 3000))
	if st := run(1, verbs.WRRDMAWrite, 0, 0, 3000); st != verbs.WCSuccess || !bytes.Equal(b.mr.Buf()[:3000], a.mr.Buf()[:3000]) {
		t.Fatalf("WRITE: %v", st)
	}
	if st := run(2, verbs.WRRDMARead, 4096, 0, 3000); st != verbs.WCSuccess || !bytes.Equal(a.mr.Buf()[4096:7096], b.mr.Buf()[:3000]) {
		t.Fatalf("READ: %v", st)
	}
	if st := run(3, verbs.WRRDMAWrite, 0, 8192-8, 16); st != verbs.WCLocProtErr {
		t.Fatalf("WRITE past the server's region: %v, want LOC_PROT_ERR", st)
	}
	if n := m.Sim.A.Counters().StarSecurityDrops; n != 1 {
		t.Errorf("star_security_drops %d, want 1", n)
	}
}
