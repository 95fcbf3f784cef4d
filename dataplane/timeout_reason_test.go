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
