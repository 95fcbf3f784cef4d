package dataplane

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
)

// udPair is UD QPs on a Sim: qa (and qa2) on A, qb on B, RTS with Q_Key
// udQKey, an AH on A to B and one on B to A, a memory region and a CQ on
// each side.
type udPair struct {
	tb         testing.TB
	sim        *Sim
	pdA, pdB   uint32
	cqA, cqB   *CQ
	qa, qa2    *QP
	qb         *QP
	mrA, mrB   *MR
	ahAB, ahBA *AH
	wcs        []qp.WC
}

const udQKey = 0x11111111

func newUDPair(tb testing.TB, cfg SimConfig) *udPair {
	tb.Helper()
	sim, err := NewSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	p := &udPair{tb: tb, sim: sim, wcs: make([]qp.WC, 64)}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	p.pdA, p.pdB = sim.A.AllocPD(), sim.B.AllocPD()
	p.mrA, err = sim.A.RegMR(p.pdA, make([]byte, 1<<20), 0, qp.AccessLocalWrite)
	must(err)
	p.mrB, err = sim.B.RegMR(p.pdB, make([]byte, 1<<20), 0, qp.AccessLocalWrite)
	must(err)
	p.cqA, err = sim.A.CreateCQ(4096, nil)
	must(err)
	p.cqB, err = sim.B.CreateCQ(4096, nil)
	must(err)
	p.qa = p.udQP(sim.A, p.pdA, p.cqA)
	p.qa2 = p.udQP(sim.A, p.pdA, p.cqA)
	p.qb = p.udQP(sim.B, p.pdB, p.cqB)
	p.ahAB = p.ah(sim.A, p.pdA, sim.B)
	p.ahBA = p.ah(sim.B, p.pdB, sim.A)
	return p
}

// udQP makes a UD QP and moves it to RTS.
func (p *udPair) udQP(e *Engine, pd uint32, cq *CQ) *QP {
	p.tb.Helper()
	q, err := e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 1024, MaxRecvWR: 1024, Type: qp.QPTypeUD})
	if err != nil {
		p.tb.Fatal(err)
	}
	for _, st := range []struct {
		a    QPAttr
		mask qp.AttrMask
	}{
		{QPAttr{State: qp.Init, Port: 1, QKey: udQKey}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{QPAttr{State: qp.RTR}, qp.AttrState},
		{QPAttr{State: qp.RTS, SQPSN: 100}, qp.AttrState | qp.AttrSQPSN},
	} {
		if err := e.ModifyQP(q, &st.a, st.mask); err != nil {
			p.tb.Fatal(err)
		}
	}
	return q
}

// ah makes an AH on e to peer, its MAC from e's neighbour table.
func (p *udPair) ah(e *Engine, pd uint32, peer *Engine) *AH {
	p.tb.Helper()
	mac, ok := e.Neighbor(peer.Addr())
	if !ok {
		p.tb.Fatalf("%v does not know %v", e.Addr(), peer.Addr())
	}
	a, err := e.CreateAH(pd, AddressVector{DGID: peer.Addr(), DMAC: mac, HopLimit: 64})
	if err != nil {
		p.tb.Fatal(err)
	}
	return a
}

// udSend is a signaled datagram of sgl to QP dqpn with qkey through ah.
func udSend(id uint64, ah *AH, dqpn, qkey uint32, sgl ...qp.SGE) qp.SendWR {
	wr := sendWR(id, qp.WRSend, sgl...)
	wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah.Handle(), dqpn, qkey
	return wr
}

// collect runs until n completions arrived on cq of e (or limit passed)
// and returns them.
func (p *udPair) collect(e *Engine, cq *CQ, n int, limit time.Duration) []qp.WC {
	p.tb.Helper()
	var got []qp.WC
	p.sim.RunUntil(func() bool {
		k, err := e.PollCQ(cq, p.wcs)
		if err != nil {
			p.tb.Fatal(err)
		}
		got = append(got, p.wcs[:k]...)
		return len(got) >= n
	}, limit)
	for len(got) < n { // the run ended with completions still queued
		k, _ := e.PollCQ(cq, p.wcs)
		if k == 0 {
			break
		}
		got = append(got, p.wcs[:k]...)
	}
	return got
}

func (p *udPair) post(e *Engine, q *QP, wrs ...qp.SendWR) {
	p.tb.Helper()
	if _, err := e.PostSend(q, wrs); err != nil {
		p.tb.Fatal(err)
	}
}

func (p *udPair) recv(n int, size int) {
	p.tb.Helper()
	stride := 8192
	if n*stride > len(p.mrB.buf) {
		stride = size
	}
	for i := range n {
		if _, err := p.sim.B.PostRecv(p.qb, []qp.RecvWR{recvWR(uint64(1000+i), sge(p.mrB, i*stride, size))}); err != nil {
			p.tb.Fatal(err)
		}
	}
}

// TestUDSendRecv: datagrams arrive byte for byte after the 40-byte GRH
// area, which holds the IP header (IPv4 in its last 20 bytes, IPv6 whole),
// with the sender's QPN, the immediate and byte_len counting the GRH; the
// sender's PSN counts its packets from the SQ PSN.
func TestUDSendRecv(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "ipv4"
		if v6 {
			name = "ipv6"
		}
		t.Run(name, func(t *testing.T) {
			p := newUDPair(t, SimConfig{Seed: 1, IPv6: v6})
			mtu := p.sim.A.PortMTU().Bytes()
			if mtu != 4096 {
				t.Fatalf("port MTU %d on a %d-byte frame, want 4096", mtu, p.sim.A.MaxFrame())
			}
			fillRandom(p.mrA.buf, 7)
			sizes := []int{0, 1, 333, mtu}
			p.recv(len(sizes), mtu+qp.GRHLen)
			var caps []uint32
			p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, _ bool) {
				if d == fabric.AtoB {
					caps = append(caps, frame2psn(t, frame))
				}
			})
			for i, n := range sizes {
				wr := udSend(uint64(i), p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, i*8192, n))
				if i%2 == 1 {
					wr.Opcode, wr.ImmData = qp.WRSendWithImm, 0xA0B0C000+uint32(i)
				}
				p.post(p.sim.A, p.qa, wr)
			}
			sends := p.collect(p.sim.A, p.cqA, len(sizes), time.Millisecond)
			recvs := p.collect(p.sim.B, p.cqB, len(sizes), time.Millisecond)
			if len(sends) != len(sizes) || len(recvs) != len(sizes) {
				t.Fatalf("%d send and %d receive completions, want %d each", len(sends), len(recvs), len(sizes))
			}
			for i, n := range sizes {
				s, r := sends[i], recvs[i]
				wantWC(t, s, uint64(i), qp.WCSuccess, qp.WCSend)
				if s.ByteLen != uint32(n) {
					t.Errorf("send %d: byte_len %d, want %d", i, s.ByteLen, n)
				}
				wantWC(t, r, uint64(1000+i), qp.WCSuccess, qp.WCRecv)
				if r.ByteLen != uint32(n+qp.GRHLen) || r.SrcQP != p.qa.QPN() || r.QPNum != p.qb.QPN() {
					t.Errorf("receive %d: %+v, want byte_len %d src_qp %#x", i, r, n+qp.GRHLen, p.qa.QPN())
				}
				wantFlags := qp.WCGRH
				if i%2 == 1 {
					wantFlags |= qp.WCWithImm
					if r.ImmData != 0xA0B0C000+uint32(i) {
						t.Errorf("receive %d: imm %#x", i, r.ImmData)
					}
				}
				if r.Flags != wantFlags {
					t.Errorf("receive %d: flags %#x, want %#x", i, r.Flags, wantFlags)
				}
				buf := p.mrB.buf[i*8192:]
				mustEqual(t, "payload", buf[qp.GRHLen:qp.GRHLen+n], p.mrA.buf[i*8192:i*8192+n])
				grh := buf[:qp.GRHLen]
				if v6 {
					if grh[0]>>4 != 6 || netip.AddrFrom16([16]byte(grh[8:24])) != SimAddr6A || netip.AddrFrom16([16]byte(grh[24:40])) != SimAddr6B {
						t.Errorf("receive %d: GRH % x is not A's IPv6 header to B", i, grh)
					}
				} else {
					ip := grh[20:]
					if !allZero(grh[:20]) || ip[0] != 0x45 || netip.AddrFrom4([4]byte(ip[12:16])) != SimAddrA || netip.AddrFrom4([4]byte(ip[16:20])) != SimAddrB {
						t.Errorf("receive %d: GRH % x is not 20 zeros and A's IPv4 header to B", i, grh)
					}
				}
			}
			for i, psn := range caps {
				if psn != 100+uint32(i) {
					t.Fatalf("datagram %d has PSN %d, want %d", i, psn, 100+i)
				}
			}
			if c := p.sim.A.Counters(); c.Retransmits != 0 || c.AcksSent != 0 {
				t.Errorf("A retransmitted %d, acknowledged %d", c.Retransmits, c.AcksSent)
			}
			if c := p.sim.B.Counters(); c.AcksSent != 0 || c.SentPkts != 0 || c.RDMARecvs != uint64(len(sizes)) {
				t.Errorf("B sent %d packets (%d ACKs), %d rdma_recvs", c.SentPkts, c.AcksSent, c.RDMARecvs)
			}
		})
	}
}

func frame2psn(t *testing.T, frame []byte) uint32 {
	// Ethernet 14, IPv4 20 or IPv6 40, UDP 8; then the BTH's PSN.
	off := 14 + 20 + 8
	if binary.BigEndian.Uint16(frame[12:]) == 0x86DD {
		off = 14 + 40 + 8
	}
	return binary.BigEndian.Uint32(frame[off+8:]) & qp.PSNMask
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestUDManyToOne: two QPs send to one receiving QP, which tells them
// apart by src_qp.
func TestUDManyToOne(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 2})
	const each = 50
	p.recv(2*each, 256)
	for i := range each {
		p.post(p.sim.A, p.qa, udSend(uint64(i), p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 64)))
		p.post(p.sim.A, p.qa2, udSend(uint64(100+i), p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 64, 64)))
	}
	recvs := p.collect(p.sim.B, p.cqB, 2*each, 10*time.Millisecond)
	from := map[uint32]int{}
	for _, r := range recvs {
		if r.Status != qp.WCSuccess || r.ByteLen != 64+qp.GRHLen {
			t.Fatalf("receive %+v", r)
		}
		from[r.SrcQP]++
	}
	if len(recvs) != 2*each || from[p.qa.QPN()] != each || from[p.qa2.QPN()] != each {
		t.Fatalf("%d datagrams, by source QP %v; want %d from each of %#x and %#x (B %+v)", len(recvs), from, each, p.qa.QPN(), p.qa2.QPN(), p.sim.B.Counters())
	}
}

// TestUDQKey: a datagram whose Q_Key is not the receiver's is dropped and
// counted; a work request's Q_Key with the high bit set takes the sending
// QP's own.
func TestUDQKey(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 3})
	p.recv(2, 256)
	p.post(p.sim.A, p.qa, udSend(1, p.ahAB, p.qb.QPN(), udQKey+1, sge(p.mrA, 0, 8)))
	p.sim.RunFor(time.Millisecond)
	if c := p.sim.B.Counters(); c.RcvdQKeyViolation != 1 || c.RDMARecvs != 0 {
		t.Fatalf("rcvd_qkey_violation %d, rdma_recvs %d; want 1, 0", c.RcvdQKeyViolation, c.RDMARecvs)
	}
	p.post(p.sim.A, p.qa, udSend(2, p.ahAB, p.qb.QPN(), qp.QKeyUseQP|5, sge(p.mrA, 0, 8)))
	recvs := p.collect(p.sim.B, p.cqB, 1, time.Millisecond)
	if len(recvs) != 1 || recvs[0].WRID != 1000 || recvs[0].Status != qp.WCSuccess {
		t.Fatalf("receives %+v, want the second datagram in the first WQE", recvs)
	}
	// The receiver's Q_Key changes in RTS; the old one is refused.
	if err := p.sim.B.ModifyQP(p.qb, &QPAttr{State: qp.RTS, QKey: 0x2222}, qp.AttrState|qp.AttrQKey); err != nil {
		t.Fatal(err)
	}
	if got := p.sim.B.QueryQP(p.qb).QKey; got != 0x2222 {
		t.Fatalf("query: Q_Key %#x", got)
	}
	p.post(p.sim.A, p.qa, udSend(3, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)))
	p.sim.RunFor(time.Millisecond)
	if c := p.sim.B.Counters(); c.RcvdQKeyViolation != 2 {
		t.Fatalf("rcvd_qkey_violation %d, want 2", c.RcvdQKeyViolation)
	}
}

// TestUDPostChecks: a datagram larger than the port MTU, an opcode other
// than SEND, an AH of another PD or none are refused at post, and
// nothing is sent.
func TestUDPostChecks(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 4})
	mtu := p.sim.A.PortMTU().Bytes()
	otherPD := p.sim.A.AllocPD()
	foreign, err := p.sim.A.CreateAH(otherPD, AddressVector{DGID: SimAddrB, DMAC: SimMACB})
	if err != nil {
		t.Fatal(err)
	}
	write := udSend(3, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8))
	write.Opcode = qp.WRRDMAWrite
	for _, c := range []struct {
		name string
		wr   qp.SendWR
		want error
	}{
		{"above MTU", udSend(1, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, mtu), sge(p.mrA, mtu, 1)), ErrBadWR},
		{"write", write, ErrBadWR},
		{"foreign AH", udSend(4, foreign, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)), ErrBadAH},
		{"no AH", qp.SendWR{WRID: 5, Opcode: qp.WRSend, AH: 0}, ErrBadAH},
	} {
		if _, err := p.sim.A.PostSend(p.qa, []qp.SendWR{c.wr}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	p.sim.RunFor(time.Millisecond)
	if c := p.sim.A.Counters(); c.SentPkts != 0 {
		t.Fatalf("%d packets sent", c.SentPkts)
	}
	// Exactly the MTU goes.
	p.recv(1, mtu+qp.GRHLen)
	p.post(p.sim.A, p.qa, udSend(6, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, mtu)))
	if r := p.collect(p.sim.B, p.cqB, 1, time.Millisecond); len(r) != 1 || r[0].Status != qp.WCSuccess {
		t.Fatalf("MTU datagram: %+v", r)
	}
}

// TestUDNoRecvWQE: a datagram with no receive WQE is dropped and counted
// (no RNR NAK: nothing goes back); the next, with one, arrives.
func TestUDNoRecvWQE(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 5})
	p.post(p.sim.A, p.qa, udSend(1, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)))
	if s := p.collect(p.sim.A, p.cqA, 1, time.Millisecond); len(s) != 1 || s[0].Status != qp.WCSuccess {
		t.Fatalf("send completion %+v", s)
	}
	p.sim.RunFor(time.Millisecond)
	if c := p.sim.B.Counters(); c.RcvdNoRecvWQE != 1 || c.SentPkts != 0 || c.SendRNRErr != 0 {
		t.Fatalf("rcvd_no_recv_wqe %d, B sent %d (send_rnr_err %d); want 1, 0, 0", c.RcvdNoRecvWQE, c.SentPkts, c.SendRNRErr)
	}
	p.recv(1, 64)
	p.post(p.sim.A, p.qa, udSend(2, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)))
	if r := p.collect(p.sim.B, p.cqB, 1, time.Millisecond); len(r) != 1 || r[0].Status != qp.WCSuccess {
		t.Fatalf("receive %+v", r)
	}
}

// TestUDLengthError: a datagram that does not fit the receive WQE with
// its GRH completes it with a local length error (rxe's
// resp_local_length_error), and the next WQE takes the next datagram.
func TestUDLengthError(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 6})
	p.recv(2, 100+qp.GRHLen)
	p.post(p.sim.A, p.qa, udSend(1, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 101)))
	p.post(p.sim.A, p.qa, udSend(2, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 100)))
	r := p.collect(p.sim.B, p.cqB, 2, time.Millisecond)
	if len(r) != 2 {
		t.Fatalf("%d receive completions", len(r))
	}
	wantWC(t, r[0], 1000, qp.WCLocLenErr, qp.WCRecv)
	wantWC(t, r[1], 1001, qp.WCSuccess, qp.WCRecv)
	if c := p.sim.B.Counters(); c.RespLocalLength != 1 {
		t.Fatalf("resp_local_length_error %d", c.RespLocalLength)
	}
}

// TestUDUnreachable: an AH with no MAC (unresolved) takes the post but
// the send completes with LOC_QP_OP_ERR, counted, and the QP goes on; an
// AH destroyed after the post does the same; a destroyed AH is refused
// at post; AH attributes the port cannot use are refused at create.
func TestUDUnreachable(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 7})
	nomac, err := p.sim.A.CreateAH(p.pdA, AddressVector{DGID: netip.MustParseAddr("198.18.9.9")})
	if err != nil {
		t.Fatal(err)
	}
	p.recv(1, 64)
	p.post(p.sim.A, p.qa, udSend(1, nomac, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)),
		udSend(2, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8)))
	s := p.collect(p.sim.A, p.cqA, 2, time.Millisecond)
	if len(s) != 2 {
		t.Fatalf("%d send completions", len(s))
	}
	wantWC(t, s[0], 1, qp.WCLocQPOpErr, qp.WCSend)
	wantWC(t, s[1], 2, qp.WCSuccess, qp.WCSend)
	if c := p.sim.A.Counters(); c.UDSendUnresolved != 1 || c.SentPkts != 1 {
		t.Fatalf("ud_send_unresolved %d, sent_pkts %d; want 1, 1", c.UDSendUnresolved, c.SentPkts)
	}
	// Destroyed between post and send: the post is taken (the AH was
	// there), the send fails.
	gone := p.ah(p.sim.A, p.pdA, p.sim.B)
	if _, err := p.sim.A.PostSend(p.qa, []qp.SendWR{udSend(3, gone, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8))}); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.A.DestroyAH(gone); err != nil {
		t.Fatal(err)
	}
	if s := p.collect(p.sim.A, p.cqA, 1, time.Millisecond); len(s) != 1 || s[0].Status != qp.WCLocQPOpErr {
		t.Fatalf("send through a destroyed AH: %+v", s)
	}
	if _, err := p.sim.A.PostSend(p.qa, []qp.SendWR{udSend(4, gone, p.qb.QPN(), udQKey, sge(p.mrA, 0, 8))}); !errors.Is(err, ErrBadAH) {
		t.Fatalf("post through a destroyed AH: %v", err)
	}
	if err := p.sim.A.DestroyAH(gone); !errors.Is(err, ErrBadAH) {
		t.Fatalf("second destroy: %v", err)
	}
	for _, av := range []AddressVector{
		{},
		{DGID: SimAddr6B, DMAC: SimMACB},
		{DGID: SimAddrB, DMAC: SimMACB, SGIDIndex: 1},
	} {
		if _, err := p.sim.A.CreateAH(p.pdA, av); !errors.Is(err, ErrAHAttr) {
			t.Errorf("AH %+v: %v, want ErrAHAttr", av, err)
		}
	}
	if _, err := p.sim.A.CreateAH(999, AddressVector{DGID: SimAddrB}); !errors.Is(err, ErrBadPD) {
		t.Errorf("AH in no PD: %v", err)
	}
	// A PD with an AH is busy.
	if err := p.sim.A.DeallocPD(p.pdA); !errors.Is(err, ErrBusy) {
		t.Errorf("dealloc PD with AHs: %v", err)
	}
	if _, ok := p.sim.A.Neighbor(netip.MustParseAddr("198.18.9.9")); ok {
		t.Error("the fabric knows 198.18.9.9")
	}
}

// TestUDModify: UD's modify masks, not RC's; a UD QP has no path.
func TestUDModify(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 8})
	e := p.sim.A
	q, err := e.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 4, MaxRecvWR: 4, Type: qp.QPTypeUD})
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		a    QPAttr
		mask qp.AttrMask
	}{
		{QPAttr{State: qp.Init, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags}, // no Q_Key; RC's mask
		{QPAttr{State: qp.Init, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey | qp.AttrAccessFlags},
	}
	for _, b := range bad {
		if err := e.ModifyQP(q, &b.a, b.mask); !errors.Is(err, ErrAttrs) {
			t.Errorf("mask %#x: %v, want ErrAttrs", b.mask, err)
		}
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Init, Port: 1, QKey: 7}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey); err != nil {
		t.Fatal(err)
	}
	rtr := QPAttr{State: qp.RTR, AV: AddressVector{DGID: SimAddrB}, DestQPN: 5}
	if err := e.ModifyQP(q, &rtr, qp.AttrState|qp.AttrAV|qp.AttrDestQPN); !errors.Is(err, ErrAttrs) {
		t.Errorf("RTR with a path: %v, want ErrAttrs", err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTR}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTS}, qp.AttrState); !errors.Is(err, ErrAttrs) {
		t.Errorf("RTS without SQ PSN: %v, want ErrAttrs", err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTS, SQPSN: 9}, qp.AttrState|qp.AttrSQPSN); err != nil {
		t.Fatal(err)
	}
	a := e.QueryQP(q)
	if a.State != qp.RTS || a.QKey != 7 || a.SQPSN != 9 || a.PathMTU != e.PortMTU() {
		t.Fatalf("query %+v", a)
	}
	// A StaR role or an unknown type are refused.
	if _, err := e.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 4, MaxRecvWR: 4, Type: qp.QPTypeUD, Star: StarClient}); !errors.Is(err, ErrUDQP) {
		t.Errorf("UD StaR client: %v", err)
	}
	if _, err := e.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 4, MaxRecvWR: 4, Type: 3}); !errors.Is(err, ErrUDQP) {
		t.Errorf("QP type UC: %v", err)
	}
	// ERR flushes what waits.
	p.post(e, q, udSend(1, p.ahAB, 0x99, 7, sge(p.mrA, 0, 8)))
	if _, err := e.PostRecv(q, []qp.RecvWR{recvWR(2, sge(p.mrA, 0, 64))}); err != nil {
		t.Fatal(err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Err}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	n, _ := e.PollCQ(p.cqA, p.wcs)
	flushed := 0
	for _, wc := range p.wcs[:n] {
		if wc.QPNum == q.QPN() && wc.Status == qp.WCWRFlushErr {
			flushed++
		}
	}
	if flushed != 2 {
		t.Fatalf("%d flushed completions of %v", flushed, p.wcs[:n])
	}
}

// TestUDLoss: on a lossy link datagrams are simply lost: every one sent
// is delivered or dropped by the link, nothing is retransmitted or
// acknowledged, and each send completes successfully.
func TestUDLoss(t *testing.T) {
	link := fabric.LinkConfig{Loss: 0.05, Delay: 2 * time.Microsecond, RateBps: 25e9}
	p := newUDPair(t, SimConfig{Seed: 9, AtoB: link, BtoA: link})
	const n = 1000
	p.recv(n, 256)
	for i := range n {
		p.post(p.sim.A, p.qa, udSend(uint64(i), p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 128)))
	}
	sends := p.collect(p.sim.A, p.cqA, n, 10*time.Millisecond)
	p.sim.RunFor(time.Millisecond)
	recvs := p.collect(p.sim.B, p.cqB, n, time.Millisecond) // returns what came
	for _, s := range sends {
		if s.Status != qp.WCSuccess {
			t.Fatalf("send %+v", s)
		}
	}
	lost := p.sim.Fabric.Stats(fabric.AtoB).Dropped
	ca, cb := p.sim.A.Counters(), p.sim.B.Counters()
	t.Logf("%d sent, %d received, %d lost on the link", len(sends), len(recvs), lost)
	if len(sends) != n || lost == 0 || uint64(len(recvs))+lost != n || ca.SentPkts != n {
		t.Fatalf("%d sends completed, %d received, %d lost; A sent %d", len(sends), len(recvs), lost, ca.SentPkts)
	}
	if ca.Retransmits != 0 || cb.SentPkts != 0 || cb.RDMARecvs != uint64(len(recvs)) {
		t.Fatalf("A retransmitted %d, B sent %d, rdma_recvs %d", ca.Retransmits, cb.SentPkts, cb.RDMARecvs)
	}
}

// TestUDAllocs: posting, sending, receiving, placing and completing a
// datagram costs no allocation once warm.
func TestUDAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count is checked in the full run")
	}
	for _, v6 := range []bool{false, true} {
		p := newUDPair(t, SimConfig{Seed: 10, IPv6: v6})
		send := []qp.SendWR{udSend(1, p.ahAB, p.qb.QPN(), udQKey, sge(p.mrA, 0, 1024))}
		send[0].Opcode = qp.WRSendWithImm
		recv := []qp.RecvWR{recvWR(2, sge(p.mrB, 0, 1024+qp.GRHLen))}
		buf := make([]qp.WC, 4)
		done := 0
		cond := func() bool {
			n, _ := p.sim.A.PollCQ(p.cqA, buf)
			m, _ := p.sim.B.PollCQ(p.cqB, buf)
			done += n + m
			return done >= 2
		}
		round := func() {
			done = 0
			p.sim.B.PostRecv(p.qb, recv)
			p.sim.A.PostSend(p.qa, send)
			if !p.sim.RunUntil(cond, time.Second) {
				t.Fatal("round did not complete")
			}
		}
		for range 30 {
			round()
		}
		if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
			t.Fatalf("ipv6 %v: %.1f allocations per datagram round, want 0", v6, allocs)
		}
	}
}

// TestUDContextEviction: UD QPs whose contexts the cache evicts and
// fetches again (an SRAM of two contexts, four QPs on B taking turns)
// keep their PSNs and deliver every datagram.
func TestUDContextEviction(t *testing.T) {
	p := newUDPair(t, SimConfig{Seed: 11, SRAMBytes: 2 * 256})
	var qbs []*QP
	for range 4 {
		q := p.udQP(p.sim.B, p.pdB, p.cqB)
		for i := range 8 {
			if _, err := p.sim.B.PostRecv(q, []qp.RecvWR{recvWR(uint64(i), sge(p.mrB, i*128, 128))}); err != nil {
				t.Fatal(err)
			}
		}
		qbs = append(qbs, q)
	}
	for i := range 32 {
		q := qbs[i%4]
		p.post(p.sim.A, []*QP{p.qa, p.qa2}[i%2], udSend(uint64(i), p.ahAB, q.QPN(), udQKey, sge(p.mrA, i, 16)))
	}
	r := p.collect(p.sim.B, p.cqB, 32, 10*time.Millisecond)
	per := map[uint32]int{}
	for _, wc := range r {
		if wc.Status != qp.WCSuccess || wc.ByteLen != 16+qp.GRHLen {
			t.Fatalf("receive %+v", wc)
		}
		per[wc.QPNum]++
	}
	if len(r) != 32 || len(per) != 4 {
		t.Fatalf("%d datagrams over %d QPs (%v)", len(r), len(per), per)
	}
	if c := p.sim.B.Counters(); c.QPCEvictions == 0 {
		t.Fatal("no context was evicted")
	}
	if a := p.sim.A.QueryQP(p.qa); a.SQPSN != 100+16 {
		t.Fatalf("A's first QP is at PSN %d, want %d", a.SQPSN, 100+16)
	}
}
