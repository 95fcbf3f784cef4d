package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// isSeqNak reports whether frame is a PSN sequence error NAK.
func isSeqNak(frame []byte) bool {
	f, err := bth.ParseFrame(frame)
	return err == nil && f.Pkt.Opcode() == bth.RCAcknowledge && f.Pkt.AETH().Syndrome().Kind() == bth.NakKind
}

// dropFirstMatch drops the first frame match accepts.
func dropFirstMatch(match func([]byte) bool) func([]byte) bool {
	done := false
	return func(frame []byte) bool {
		if !done && match(frame) {
			done = true
			return true
		}
		return false
	}
}

// TestAckTimeoutReasons: a go-back-N requester counts each ACK timeout
// under the one of Improved go-back-N's four reasons (Fig. 3/4) that
// caused it, from its own and the peer responder's state: one 4-packet
// WRITE (PSNs 0-3), with exactly the frames of each reason dropped.
func TestAckTimeoutReasons(t *testing.T) {
	for _, tc := range []struct {
		name       string
		atob, btoa func([]byte) bool
		want       func(Counters) uint64
	}{
		{"last-packet-lost", dropTimes(bth.RCWriteLast, 1, 3), nil, func(c Counters) uint64 { return c.AckTimeoutLastLost }},
		{"ack-lost", nil, dropFirstMatch(isAck), func(c Counters) uint64 { return c.AckTimeoutAckLost }},
		{"nak-lost", dropTimes(bth.RCWriteMiddle, 1, 1), dropFirstMatch(isSeqNak), func(c Counters) uint64 { return c.AckTimeoutNakLost }},
		{"lost-twice", dropTimes(bth.RCWriteMiddle, 2, 1), nil, func(c Counters) uint64 { return c.AckTimeoutLostTwice }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := SimConfig{Seed: 7, SchemeA: recovery.GBN, SchemeB: recovery.GBN}
			if tc.atob != nil {
				cfg.AtoB = fabric.LinkConfig{Drop: tc.atob}
			}
			if tc.btoa != nil {
				cfg.BtoA = fabric.LinkConfig{Drop: tc.btoa}
			}
			p := newTestPair(t, cfg, ConnParams{MTU: qp.MTU1024, Timeout: 10})
			p.sim.A.SetTimeoutPeer(p.sim.B)
			wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 4096))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
			p.postSend(wr)
			if !p.sim.RunUntil(func() bool { n, _ := p.sim.A.PollCQ(p.cqA, p.wcs); return n > 0 }, time.Second) {
				t.Fatal("no completion")
			}
			wantWC(t, p.wcs[0], 1, qp.WCSuccess, qp.WCRDMAWrite)
			a := p.sim.A.Counters()
			sum := a.AckTimeoutLastLost + a.AckTimeoutAckLost + a.AckTimeoutNakLost + a.AckTimeoutLostTwice
			if a.LocalAckTimeout != 1 || tc.want(a) != 1 || sum != 1 {
				t.Fatalf("local_ack_timeout_err %d; reasons last %d ack %d nak %d twice %d; want one timeout, of this reason",
					a.LocalAckTimeout, a.AckTimeoutLastLost, a.AckTimeoutAckLost, a.AckTimeoutNakLost, a.AckTimeoutLostTwice)
			}
		})
	}
	// Without a peer to read, a timeout is counted but not classified.
	p := newTestPair(t, SimConfig{Seed: 7, SchemeA: recovery.GBN, SchemeB: recovery.GBN, BtoA: fabric.LinkConfig{Drop: dropFirstMatch(isAck)}}, ConnParams{MTU: qp.MTU1024, Timeout: 10})
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 4096))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	if !p.sim.RunUntil(func() bool { n, _ := p.sim.A.PollCQ(p.cqA, p.wcs); return n > 0 }, time.Second) {
		t.Fatal("no completion")
	}
	if a := p.sim.A.Counters(); a.LocalAckTimeout != 1 || a.AckTimeoutAckLost != 0 {
		t.Fatalf("without a peer: local_ack_timeout_err %d, ack_lost %d; want 1, 0", a.LocalAckTimeout, a.AckTimeoutAckLost)
	}
}

// TestSTCopySkippedCounted: under ring pressure from many QPs a second
// copy that waited for room may find its packet acknowledged first; it is
// then not sent, and st_copy_skipped counts it. Every message's last
// packet goes out twice or is counted: sent_pkts = 2 x messages -
// st_copy_skipped on a lossless link.
func TestSTCopySkippedCounted(t *testing.T) {
	link := lossyLink(0)
	link.QueueFrames = 4
	sim, err := NewSim(SimConfig{Seed: 5, SchemeA: recovery.IGBN, SchemeB: recovery.IGBN, AtoB: link})
	if err != nil {
		t.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	mrA, _ := sim.A.RegMR(pdA, make([]byte, 4096), 0, all)
	mrB, _ := sim.B.RegMR(pdB, make([]byte, 4096), 0, all)
	cqA, _ := sim.A.CreateCQ(1024, nil)
	cqB, _ := sim.B.CreateCQ(64, nil)
	const nqp, per = 32, 20
	qps := make([]*QP, nqp)
	for i := range qps {
		qa, err := sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 1})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := sim.B.CreateQP(pdB, QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 1, MaxRecvWR: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := Connect(sim.A, qa, sim.B, qb, ConnParams{MTU: qp.MTU1024}); err != nil {
			t.Fatal(err)
		}
		qps[i] = qa
	}
	wr := sendWR(0, qp.WRRDMAWrite, sge(mrA, 0, 512))
	wr.RemoteAddr, wr.RKey = mrB.Addr, mrB.RKey
	post := func(i int) {
		w := wr
		w.WRID = uint64(i)
		if _, err := sim.A.PostSend(qps[i], []qp.SendWR{w}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range qps {
		post(i)
	}
	left := make([]int, nqp)
	for i := range left {
		left[i] = per - 1
	}
	done := 0
	wcs := make([]qp.WC, 64)
	ok := sim.RunUntil(func() bool {
		n, _ := sim.A.PollCQ(cqA, wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				t.Fatalf("QP %d: %v", wc.WRID, wc.Status)
			}
			done++
			if i := int(wc.WRID); left[i] > 0 {
				left[i]--
				post(i)
			}
		}
		return done == nqp*per
	}, time.Second)
	if !ok {
		t.Fatalf("%d of %d WRITEs completed", done, nqp*per)
	}
	sim.RunFor(time.Millisecond)
	a := sim.A.Counters()
	if a.Retransmits != 0 || a.STCopySkipped == 0 || a.SentPkts != 2*nqp*per-a.STCopySkipped {
		t.Fatalf("sent %d packets, st_copy_skipped %d, retransmitted %d: want some skipped, sent = %d - skipped, no retransmission",
			a.SentPkts, a.STCopySkipped, a.Retransmits, 2*nqp*per)
	}
	t.Logf("st_copy_skipped %d of %d second copies", a.STCopySkipped, nqp*per)
}
