package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// newStarPair is a StaR connection on a Sim: A's QP is the client (scheme
// scheme), B's the stateless server (B has StarServer on). Each side has
// one big region; B's region is the server memory table the client gets.
func newStarPair(tb testing.TB, scheme string, cfg SimConfig, p ConnParams) *testPair {
	tb.Helper()
	t := newStarPairUnconnected(tb, scheme, cfg)
	if err := Connect(t.sim.A, t.qa, t.sim.B, t.qb, p); err != nil {
		tb.Fatal(err)
	}
	return t
}

// newStarPairUnconnected is newStarPair with both QPs left in RESET.
func newStarPairUnconnected(tb testing.TB, scheme string, cfg SimConfig) *testPair {
	tb.Helper()
	cfg.SchemeA, cfg.SchemeB, cfg.StarServerB = scheme, scheme, true
	sim, err := NewSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	t := &testPair{tb: tb, sim: sim, wcs: make([]qp.WC, 64)}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	t.pdA, t.pdB = sim.A.AllocPD(), sim.B.AllocPD()
	t.mrA, err = sim.A.RegMR(t.pdA, make([]byte, testMRSize), 0, qp.AccessLocalWrite)
	must(err)
	t.mrB, err = sim.B.RegMR(t.pdB, make([]byte, testMRSize), 0, qp.AccessLocalWrite|qp.AccessRemoteWrite|qp.AccessRemoteRead)
	must(err)
	t.cqA, err = sim.A.CreateCQ(4096, nil)
	must(err)
	t.cqB, err = sim.B.CreateCQ(1024, nil)
	must(err)
	t.qa, err = sim.A.CreateQP(t.pdA, QPInitAttr{SendCQ: t.cqA, RecvCQ: t.cqA, MaxSendWR: 256, MaxRecvWR: 256, Star: StarClient})
	must(err)
	t.qb, err = sim.B.CreateQP(t.pdB, QPInitAttr{SendCQ: t.cqB, RecvCQ: t.cqB, MaxSendWR: 256, MaxRecvWR: 256, Star: StarServer})
	must(err)
	return t
}

func starWR(p *testPair, id uint64, op qp.WROpcode, localOff, remoteOff, n int) qp.SendWR {
	wr := sendWR(id, op, sge(p.mrA, localOff, n))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr+uint64(remoteOff), p.mrB.RKey
	return wr
}

// TestStarClientData: through a StaR connection, WRITEs of every size
// class land in the server's memory and READs bring it back byte for
// byte, completions in posting order, at 0, 1 and 5% loss with
// reordering and duplication, under every scheme a client can run. The
// server's context cache is never touched: 0 misses, 0 contexts and 0
// bytes on chip.
func TestStarClientData(t *testing.T) {
	for _, scheme := range []string{recovery.IRN, recovery.MELO, recovery.FaSR, recovery.SRNIC} {
		for _, loss := range []float64{0, 0.01, 0.05} {
			t.Run(fmt.Sprintf("%s/loss%v", scheme, loss), func(t *testing.T) {
				spec, err := impair.Parse(fmt.Sprintf("loss %v%% delay 5us 3us reorder 2%% duplicate 1%%", loss*100))
				if err != nil {
					t.Fatal(err)
				}
				link := fabric.LinkConfig{Netem: spec, RateBps: 10e9, QueueFrames: 256}
				p := newStarPair(t, scheme, SimConfig{Seed: 7, AtoB: link, BtoA: link, RTO: RTOAdaptive}, ConnParams{MTU: qp.MTU1024, Timeout: 8})
				sizes := []int{0, 1, 1024, 1025, 3000, 8192, 20000}
				src := p.mrA.Bytes()
				fillRandom(src[:1<<20], uint64(loss*1000)+1)
				var wrs []qp.SendWR
				off := 0
				for i, n := range sizes {
					wrs = append(wrs, starWR(p, uint64(i), qp.WRRDMAWrite, off, off, n))
					off += n + 64
				}
				p.postSend(wrs...)
				wcs := p.waitWCs(p.sim.A, p.cqA, len(wrs), 20*time.Second)
				for i, wc := range wcs {
					wantWC(t, wc, uint64(i), qp.WCSuccess, qp.WCRDMAWrite)
				}
				off = 0
				for _, n := range sizes {
					mustEqual(t, "server memory", p.mrB.Bytes()[off:off+n], src[off:off+n])
					off += n + 64
				}
				// READ it back into A at 2 MiB.
				const back = 2 << 20
				wrs = wrs[:0]
				off = 0
				for i, n := range sizes {
					wrs = append(wrs, starWR(p, uint64(100+i), qp.WRRDMARead, back+off, off, n))
					off += n + 64
				}
				p.postSend(wrs...)
				wcs = p.waitWCs(p.sim.A, p.cqA, len(wrs), 20*time.Second)
				for i, wc := range wcs {
					wantWC(t, wc, uint64(100+i), qp.WCSuccess, qp.WCRDMARead)
				}
				off = 0
				for _, n := range sizes {
					mustEqual(t, "read back", src[back+off:back+off+n], src[off:off+n])
					off += n + 64
				}
				p.settle()
				cs, c := p.sim.B.CacheStats(), p.sim.B.Counters()
				if cs.Misses != 0 || cs.Hits != 0 || cs.PeakResident != 0 || c.QPCResidentBytesPeak != 0 {
					t.Errorf("server context cache touched: %+v, resident bytes peak %d", cs, c.QPCResidentBytesPeak)
				}
				if c.StarRDPRcvd == 0 || c.StarGDRcvd == 0 || p.sim.A.Counters().StarRARcvd == 0 || p.sim.A.Counters().StarSDPRcvd == 0 {
					t.Errorf("StaR counters: server %+v, client %+v", c, p.sim.A.Counters())
				}
				if loss > 0 && p.sim.A.Counters().Retransmits == 0 {
					t.Errorf("no retransmission at %v loss", loss)
				}
			})
		}
	}
}

// TestStarSecurityTable: a client's RDP or GD outside the memory table the
// server installed never leaves the client NIC: it is counted in
// star_security_drops, the server sees nothing, and the work request fails
// with a local protection error. Installing a table is for a client QP
// only, and the client's verbs cannot reach it (only the connection
// exchange, with what the server sent).
func TestStarSecurityTable(t *testing.T) {
	cases := []struct {
		name string
		wr   func(p *testPair) qp.SendWR
	}{
		{"write past the region", func(p *testPair) qp.SendWR {
			return starWR(p, 1, qp.WRRDMAWrite, 0, testMRSize-512, 1024)
		}},
		{"read before the region", func(p *testPair) qp.SendWR {
			w := starWR(p, 1, qp.WRRDMARead, 0, 0, 64)
			w.RemoteAddr = p.mrB.Addr - 64
			return w
		}},
		{"wrong key", func(p *testPair) qp.SendWR {
			w := starWR(p, 1, qp.WRRDMAWrite, 0, 0, 64)
			w.RKey ^= 0x100
			return w
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newStarPair(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
			p.postSend(c.wr(p))
			wcs := p.waitWCs(p.sim.A, p.cqA, 1, time.Second)
			if wcs[0].Status != qp.WCLocProtErr {
				t.Fatalf("completion %+v, want %v", wcs[0], qp.WCLocProtErr)
			}
			p.settle()
			if n := p.sim.A.Counters().StarSecurityDrops; n != 1 {
				t.Errorf("star_security_drops %d, want 1", n)
			}
			if c := p.sim.B.Counters(); c.StarRDPRcvd+c.StarGDRcvd != 0 {
				t.Errorf("the server received %d RDPs and %d GDs", c.StarRDPRcvd, c.StarGDRcvd)
			}
		})
	}
	t.Run("later registrations reach the table in band", func(t *testing.T) {
		p := newStarPair(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
		m, err := p.sim.B.RegMR(p.pdB, make([]byte, 4096), 0, qp.AccessLocalWrite|qp.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		p.settle() // its MR_REG WQEP reaches the client (an application learns the key through the connection, after it)
		w := starWR(p, 1, qp.WRRDMAWrite, 0, 0, 64)
		w.RemoteAddr, w.RKey = m.Addr+64, m.RKey
		p.postSend(w)
		if wcs := p.waitWCs(p.sim.A, p.cqA, 1, time.Second); wcs[0].Status != qp.WCSuccess {
			t.Fatalf("WRITE to a region registered after the connection: %+v", wcs[0])
		}
		if err := p.sim.B.DeregMR(m); err != nil {
			t.Fatal(err)
		}
		p.settle()
		p.postSend(w)
		if wcs := p.waitWCs(p.sim.A, p.cqA, 1, time.Second); wcs[0].Status != qp.WCLocProtErr {
			t.Fatalf("WRITE to a deregistered region: %+v", wcs[0])
		}
	})
	t.Run("a forged table update has no effect", func(t *testing.T) {
		p := newStarPair(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
		p.settle()
		before := p.sim.A.StarTable(p.qa)
		// An MR_REG for all memory under key 0x77, in the driver's next
		// sequence number, from a host that is not the server.
		for _, src := range []netip.Addr{netip.MustParseAddr("198.18.9.9"), SimAddrA} { // another host; the client's own address
			h := bth.FrameHeader{SrcMAC: SimMACB, DstMAC: SimMACA, Src: src, Dst: SimAddrA, SrcPort: 49152, TTL: 64}
			info := bth.Lookup(bth.StarWQEP)
			roceLen := info.Length + bth.ICRCLen
			buf := p.sim.Fabric.B().TxBuffer()
			off := h.Encode(buf, roceLen)
			roce := buf[off : off+roceLen]
			bth.BTH(roce).Encode(&bth.BTHFields{Opcode: bth.StarWQEP, PKey: defaultPKey, DestQPN: p.qa.QPN(), PSN: 1})
			bth.WQEPETH(roce[bth.BTHLen:]).Encode(&bth.WQEPETHFields{DriverSeq: 1, Kind: bth.WQEPMRReg, LocalKey: 0x77, Length: 1<<32 - 1, Flags: bth.WQEPRemoteWrite | bth.WQEPRemoteRead | bth.WQEPTableDone})
			bth.FinishFrame(buf[:off+roceLen], &h)
			p.sim.Fabric.B().Transmit(off + roceLen)
		}
		p.settle()
		if got := p.sim.A.StarTable(p.qa); !slices.Equal(got, before) {
			t.Errorf("table %+v after a forged MR_REG, was %+v", got, before)
		}
		if c := p.sim.A.Counters(); c.RcvdBadAddr != 2 || c.StarWQEPRcvd != 1 { // the server's own MR_REG only
			t.Errorf("client counters %+v", c)
		}
	})
}

// TestStarRoles: a role is checked when the QP is made and when it
// connects, and a StaR QP refuses what it cannot run, each with its
// error.
func TestStarRoles(t *testing.T) {
	sim, err := NewSim(SimConfig{Seed: 1, SchemeA: recovery.GBN, SchemeB: recovery.IRN})
	if err != nil {
		t.Fatal(err)
	}
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	cqA, _ := sim.A.CreateCQ(16, nil)
	cqB, _ := sim.B.CreateCQ(16, nil)
	attr := func(cq *CQ, r StarRole, scheme string) QPInitAttr {
		return QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, Star: r, Scheme: scheme}
	}
	if _, err := sim.B.CreateQP(pdB, attr(cqB, StarServer, "")); !errors.Is(err, ErrStarServerOff) {
		t.Errorf("server QP on a NIC without StarServer: %v", err)
	}
	if _, err := sim.A.CreateQP(pdA, attr(cqA, StarClient, recovery.GBN)); !errors.Is(err, ErrStarScheme) {
		t.Errorf("gbn client QP: %v", err)
	}
	qa, err := sim.A.CreateQP(pdA, attr(cqA, StarClient, recovery.IRN))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.A.SetQPScheme(qa, recovery.GBN); !errors.Is(err, ErrStarScheme) {
		t.Errorf("client QP set to gbn: %v", err)
	}
	if err := sim.A.SetQPScheme(qa, recovery.FaSR); err != nil || qa.Star() != StarClient {
		t.Errorf("client QP set to fasr: %v (role %v)", err, qa.Star())
	}
	qb, err := sim.B.CreateQP(pdB, attr(cqB, StarNone, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := Connect(sim.A, qa, sim.B, qb, ConnParams{}); !errors.Is(err, ErrStarPeer) {
		t.Errorf("client with an ordinary QP: %v", err)
	}
	for _, c := range []struct {
		op   qp.WROpcode
		want error
	}{
		{qp.WRAtomicFetchAndAdd, ErrStarAtomic}, {qp.WRAtomicCmpAndSwp, ErrStarAtomic},
		{qp.WRRDMAWriteWithImm, ErrStarOpcode},
	} {
		if err := qa.tr.(*starClient).checkWR(&qp.SendWR{Opcode: c.op}); !errors.Is(err, c.want) {
			t.Errorf("%v on a client QP: %v, want %v", c.op, err, c.want)
		}
	}
	for _, op := range []qp.WROpcode{qp.WRRDMAWrite, qp.WRRDMARead, qp.WRSend, qp.WRSendWithImm} {
		if err := qa.tr.(*starClient).checkWR(&qp.SendWR{Opcode: op}); err != nil {
			t.Errorf("%v on a client QP: %v", op, err)
		}
	}
	if err := checkSendWR(&qp.SendWR{Opcode: qp.WRSend, Flags: sendStarPull}); !errors.Is(err, ErrBadWR) {
		t.Errorf("the internal pull flag from an application: %v", err)
	}
}

// TestStarServerQPStateless: a stateless server QP's context never enters
// the context cache, whatever its driver pushes; the driver takes SENDs
// and RECVs of one buffer each, and refuses the rest with its reason.
func TestStarServerQPStateless(t *testing.T) {
	p := newStarPair(t, recovery.IRN, SimConfig{Seed: 1, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
	w := sendWR(1, qp.WRRDMAWrite, sge(p.mrB, 0, 8))
	w.RemoteAddr, w.RKey = p.mrA.Addr, p.mrA.RKey
	if _, err := p.sim.B.PostSend(p.qb, []qp.SendWR{w}); !errors.Is(err, ErrStarServerWR) {
		t.Errorf("a server WRITE: %v", err)
	}
	if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(1, sge(p.mrB, 0, 8), sge(p.mrB, 8, 8))}); !errors.Is(err, ErrBadWR) {
		t.Errorf("a server RECV of two buffers: %v", err)
	}
	if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(2, sge(p.mrB, 0, 64))}); err != nil {
		t.Fatal(err)
	}
	p.settle()
	if cs := p.sim.B.CacheStats(); cs.Hits+cs.Misses != 0 || cs.PeakResident != 0 {
		t.Errorf("server cache %+v", cs)
	}
	// The memory table's MR_REG at RTR, acknowledged at once (the
	// connection's first WQEP: the driver's probe), then the RECV,
	// acknowledged by one cumulative EA (no CQEP came to carry it).
	if c := p.sim.B.Counters(); c.StarWQEPSent != 2 || c.StarEARcvd != 2 || c.StarWQEPResent != 0 {
		t.Errorf("server counters %+v", c)
	}
}

// TestStarSendRecv: SENDs both ways through a stateless server, as StaR's
// RPC test makes them (§4.2). The server's RECVs and SENDs go to the
// client as WQEPs; the client's SEND fills a server RECV with RDPs and
// pushes its completion back in a CQEP; a server SEND is pulled into a
// client RECV with GDs. Data intact and every completion in posting
// order, at 0, 1 and 5% loss with reordering and duplication, and the
// server's context cache never touched.
func TestStarSendRecv(t *testing.T) {
	for _, tc := range []struct {
		loss   float64
		signal int // every signal-th server SEND is signaled
	}{{0, 1}, {0.01, 1}, {0.05, 1}, {0, 4}, {0.01, 4}, {0.05, 4}} {
		loss := tc.loss
		t.Run(fmt.Sprintf("loss%v/signal%d", loss, tc.signal), func(t *testing.T) {
			spec, err := impair.Parse(fmt.Sprintf("loss %v%% delay 5us 3us reorder 2%% duplicate 1%%", loss*100))
			if err != nil {
				t.Fatal(err)
			}
			link := fabric.LinkConfig{Netem: spec, RateBps: 10e9, QueueFrames: 256}
			p := newStarPair(t, recovery.IRN, SimConfig{Seed: 9, AtoB: link, BtoA: link, RTO: RTOAdaptive}, ConnParams{MTU: qp.MTU1024, Timeout: 8})
			const calls, req, resp = 20, 2800, 1400
			a, b := p.mrA.Bytes(), p.mrB.Bytes()
			fillRandom(a[:calls*req], 1)           // requests at A [0, calls*req)
			fillRandom(b[4<<20:][:calls*resp], 2)  // responses at B from 4 MiB
			const reqAt, respAt = 1 << 20, 2 << 20 // where they land: B's RECVs, A's RECVs
			for i := 0; i < calls; i++ {
				if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(uint64(1000+i), sge(p.mrB, reqAt+i*req, req))}); err != nil {
					t.Fatal(err)
				}
				if _, err := p.sim.A.PostRecv(p.qa, []qp.RecvWR{recvWR(uint64(2000+i), sge(p.mrA, respAt+i*resp, resp))}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < calls; i++ {
				p.postSend(sendWR(uint64(i), qp.WRSend, sge(p.mrA, i*req, req)))
				w := sendWR(uint64(3000+i), qp.WRSend, sge(p.mrB, 4<<20+i*resp, resp))
				if i%tc.signal != tc.signal-1 {
					w.Flags &^= qp.SendSignaled
				}
				if _, err := p.sim.B.PostSend(p.qb, []qp.SendWR{w}); err != nil {
					t.Fatal(err)
				}
			}
			// A: 20 SEND completions and 20 RECV completions; B 20 RECV
			// completions and one for each signaled SEND.
			wa := p.waitWCs(p.sim.A, p.cqA, 2*calls, 20*time.Second)
			wb := p.waitWCs(p.sim.B, p.cqB, calls+calls/tc.signal, 20*time.Second)
			check := func(side string, wcs []qp.WC, sendID, recvID uint64, recvLen uint32, every uint64) {
				t.Helper()
				var s, r uint64
				for _, wc := range wcs {
					switch wc.Opcode {
					case qp.WCSend:
						wantWC(t, wc, sendID+s*every+every-1, qp.WCSuccess, qp.WCSend)
						s++
					case qp.WCRecv:
						wantWC(t, wc, recvID+r, qp.WCSuccess, qp.WCRecv)
						if wc.ByteLen != recvLen {
							t.Fatalf("%s: receive completion %+v, want %d bytes", side, wc, recvLen)
						}
						r++
					default:
						t.Fatalf("%s: completion %+v", side, wc)
					}
				}
			}
			check("client", wa, 0, 2000, resp, 1)
			check("server", wb, 3000, 1000, req, uint64(tc.signal))
			mustEqual(t, "requests at the server", b[reqAt:reqAt+calls*req], a[:calls*req])
			mustEqual(t, "responses at the client", a[respAt:respAt+calls*resp], b[4<<20:4<<20+calls*resp])
			p.settle()
			cs, c := p.sim.B.CacheStats(), p.sim.B.Counters()
			if cs.Misses != 0 || cs.Hits != 0 || cs.PeakResident != 0 {
				t.Errorf("server context cache touched: %+v", cs)
			}
			ca := p.sim.A.Counters()
			cqeps := uint64(calls + calls/tc.signal) // a CQEP for each RECV and each signaled SEND
			if c.StarWQEPSent < 2*calls || ca.StarCQEPSent < cqeps || c.StarCQEPRcvd < cqeps || ca.StarEARcvd == 0 {
				t.Errorf("exchange counters: server %+v\nclient %+v", c, ca)
			}
			if loss == 0 && (ca.StarCQEPSent != cqeps || c.StarWQEPResent != 0 || 4*ca.StarEASent > c.StarWQEPSent) {
				// Without loss every CQEP goes once, and the CQEPs carry the
				// acknowledgement of most WQEPs (docs/star.md
				// "Acknowledgements"): EAs go for a duplicate, when the
				// driver's window half fills, and when none came in time.
				t.Errorf("lossless exchange: %d CQEPs (want %d), %d WQEPs resent, %d EAs from the client", ca.StarCQEPSent, cqeps, c.StarWQEPResent, ca.StarEASent)
			}
			t.Logf("server: %d WQEPs (%d resent), %d CQEPs in, %d RDPs, %d GDs; client: %d WQEPs in (%d dropped), %d CQEPs (%d resent), %d EAs, %d retransmits",
				c.StarWQEPSent, c.StarWQEPResent, c.StarCQEPRcvd, c.StarRDPRcvd, c.StarGDRcvd, ca.StarWQEPRcvd, ca.StarWQEPDropped, ca.StarCQEPSent, ca.StarCQEPResent, ca.StarEASent, ca.Retransmits)
		})
	}
}

// TestStarDriverQueues: a StaR server's driver holds at most the QP's
// queue capacities of work requests (ErrQueueFull past them, and
// QueueDepths counts them until their completions are delivered, so
// that a daemon releases ring slots by them); it keeps at most
// maxEarlyWQEPs+1 WQEPs unacknowledged on the wire, however many RECVs
// are posted at once; and a server QP moved to ERR flushes what it holds,
// in posting order, as it flushes what is posted after.
func TestStarDriverQueues(t *testing.T) {
	p := newStarPair(t, recovery.IRN, SimConfig{Seed: 3}, ConnParams{MTU: qp.MTU1024})
	const n = 256 // the server QP's MaxRecvWR
	for i := range n {
		if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(uint64(i), sge(p.mrB, i*64, 64))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(n, sge(p.mrB, 0, 64))}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("receive %d past the capacity: %v, want ErrQueueFull", n+1, err)
	}
	if s, r := p.sim.B.QueueDepths(p.qb); s != 0 || r != n {
		t.Fatalf("queue depths %d/%d, want 0/%d", s, r, n)
	}
	maxOut := 0
	p.sim.RunUntil(func() bool {
		out := 0
		for _, w := range p.qb.tr.(*starDriver).ws {
			if w.sent && !w.acked {
				out++
			}
		}
		maxOut = max(maxOut, out)
		return len(p.qa.tr.(*starClient).shadow.recvs) == n
	}, time.Second)
	if got := len(p.qa.tr.(*starClient).shadow.recvs); got != n {
		t.Fatalf("client shadow holds %d RECVs, want %d", got, n)
	}
	if maxOut == 0 || maxOut > maxEarlyWQEPs+1 {
		t.Errorf("up to %d WQEPs unacknowledged on the wire, want 1 to %d", maxOut, maxEarlyWQEPs+1)
	}
	// Two SENDs take the first two RECVs: their completions retire them.
	for i := range 2 {
		p.postSend(sendWR(uint64(100+i), qp.WRSend, sge(p.mrA, 0, 64)))
	}
	p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
	wb := p.waitWCs(p.sim.B, p.cqB, 2, time.Second)
	for i, wc := range wb {
		wantWC(t, wc, uint64(i), qp.WCSuccess, qp.WCRecv)
	}
	if _, r := p.sim.B.QueueDepths(p.qb); r != n-2 {
		t.Fatalf("receive depth %d after two completions, want %d", r, n-2)
	}
	if err := p.sim.B.ModifyQP(p.qb, &QPAttr{State: qp.Err}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(n, sge(p.mrB, 0, 64))}); err != nil {
		t.Fatal(err)
	}
	// The flush completes at once: poll the CQ dry, no time need pass.
	wb = wb[:0]
	for {
		k, err := p.sim.B.PollCQ(p.cqB, p.wcs)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
		wb = append(wb, p.wcs[:k]...)
	}
	if len(wb) != n-1 {
		t.Fatalf("%d flushed completions, want %d", len(wb), n-1)
	}
	for i, wc := range wb {
		wantWC(t, wc, uint64(i+2), qp.WCWRFlushErr, qp.WCRecv)
	}
	if s, r := p.sim.B.QueueDepths(p.qb); s != 0 || r != 0 {
		t.Fatalf("queue depths %d/%d after the flush, want 0/0", s, r)
	}
}
