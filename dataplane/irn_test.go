package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// newSchemePair is newTestPair with both NICs on the named scheme.
func newSchemePair(tb testing.TB, scheme string, params recovery.Params, cfg SimConfig, p ConnParams) *testPair {
	tb.Helper()
	cfg.SchemeA, cfg.SchemeB, cfg.SchemeParams = scheme, scheme, params
	return newTestPair(tb, cfg, p)
}

// dropOnce drops the first transmission of each listed PSN whose opcode
// is op (retransmissions of it pass).
func dropOnce(op bth.Opcode, psns ...qp.PSN) func([]byte) bool {
	return dropTimes(op, 1, psns...)
}

// dropTimes drops the first n transmissions of each listed PSN whose
// opcode is op.
func dropTimes(op bth.Opcode, n int, psns ...qp.PSN) func([]byte) bool {
	seen := map[qp.PSN]int{}
	return func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil || f.Pkt.Opcode() != op {
			return false
		}
		psn := qp.PSN(f.Pkt.BTH().PSN())
		for _, p := range psns {
			if p == psn && seen[psn] < n {
				seen[psn]++
				return true
			}
		}
		return false
	}
}

// TestIRNWireFormat: every frame an irn connection sends, under loss,
// decodes with bth.ParseFrame and has a valid ICRC; SENDs and WRITEs use
// softnic's extension opcodes and NAKs carry SACKs. gbn and igbn send
// pure RoCEv2: not one extension opcode.
func TestIRNWireFormat(t *testing.T) {
	for _, scheme := range recovery.Names() {
		t.Run(scheme, func(t *testing.T) {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 31, AtoB: lossyLink(0.05), BtoA: lossyLink(0.05)},
				ConnParams{MTU: qp.MTU1024, Timeout: 8})
			ops := map[bth.Opcode]int{}
			bad := 0
			p.sim.Fabric.Tap(func(_ fabric.Direction, _ time.Duration, frame []byte, _ bool) {
				f, err := bth.ParseFrame(frame)
				if err != nil || !f.VerifyICRC() {
					bad++
					return
				}
				ops[f.Pkt.Opcode()]++
			})
			for id := uint64(1); id <= 3; id++ {
				p.checkWrite(id, 40<<10, id == 2)
				p.checkSend(id, 20<<10, id == 3)
				p.checkRead(id, 30<<10)
			}
			p.checkAtomics()
			p.sim.Fabric.Tap(nil)
			if bad != 0 {
				t.Fatalf("%d frames do not decode or fail the ICRC", bad)
			}
			ext := 0
			for op, n := range ops {
				if op.IsExtension() {
					ext += n
				}
			}
			s, _ := recovery.New(scheme, recovery.Params{})
			ooo := s.ReorderWindow() > 0
			nak := bth.RCAcknowledgeSACK // IRN NACK, FaSR SACK
			if scheme == recovery.MELO {
				nak = bth.RCAcknowledgeHoles
			}
			switch {
			case !ooo && ext != 0:
				t.Fatalf("%s sent %d frames with extension opcodes: %v", scheme, ext, ops)
			case ooo && (ops[bth.RCWriteMiddleOOO] == 0 || ops[bth.RCSendFirstOOO] == 0 || ops[nak] == 0):
				t.Fatalf("%s frames %v: no extension WRITE, SEND or %v", scheme, ops, nak)
			case ooo && ops[bth.RCWriteMiddle]+ops[bth.RCSendFirst]+ops[bth.RCReadResponseMiddle] != 0:
				t.Fatalf("%s sent standard SEND/WRITE or streamed READ responses: %v", scheme, ops)
			}
		})
	}
}

// TestIRNOutOfOrderPlacement: the second packet of a SEND is lost once.
// Everything after it — the rest of the SEND, a SEND with immediate, a
// WRITE with immediate — is placed on arrival, but not one receive
// completion reaches the application before the lost packet is resent, and
// then all three come in posting order, with their data.
func TestIRNOutOfOrderPlacement(t *testing.T) {
	link := lossyLink(0)
	link.Drop = dropOnce(bth.RCSendMiddleOOO, 0x101)
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 32, AtoB: link, BtoA: lossyLink(0)},
		ConnParams{MTU: qp.MTU1024, PSNA: 0x100})
	const n = 3000
	fillRandom(p.mrA.Bytes()[:3*n], 32)
	p.postRecv(recvWR(900, sge(p.mrB, dstOff, n)), recvWR(901, sge(p.mrB, dstOff+n, n)), recvWR(902))
	w := sendWR(3, qp.WRRDMAWriteWithImm, sge(p.mrA, 2*n, n))
	w.RemoteAddr, w.RKey, w.ImmData = p.mrB.Addr+dstOff+2*n, p.mrB.RKey, 7
	s2 := sendWR(2, qp.WRSendWithImm, sge(p.mrA, n, n))
	s2.ImmData = 5
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, n)), s2, w)
	// Run until the packets after the hole are all in: 1 (SEND last), 3
	// (SEND with immediate), 3 (WRITE with immediate).
	if !p.sim.RunUntil(func() bool { return p.sim.B.Counters().OOOKept >= 7 }, time.Second) {
		t.Fatalf("kept %d packets out of order", p.sim.B.Counters().OOOKept)
	}
	if k, _ := p.sim.B.PollCQ(p.cqB, p.wcs); k != 0 || p.sim.B.Counters().RDMARecvs != 0 {
		t.Fatalf("%d completions, %d messages done before the hole was filled", k, p.sim.B.Counters().RDMARecvs)
	}
	rc := p.waitWCs(p.sim.B, p.cqB, 3, time.Second)
	for i, want := range []struct {
		id  uint64
		op  qp.WCOpcode
		imm uint32
	}{{900, qp.WCRecv, 0}, {901, qp.WCRecv, 5}, {902, qp.WCRecvRDMAWithImm, 7}} {
		if rc[i].WRID != want.id || rc[i].Opcode != want.op || rc[i].Status != qp.WCSuccess || rc[i].ByteLen != n || rc[i].ImmData != want.imm {
			t.Fatalf("receive completion %d: %+v, want wr_id %d %v imm %d", i, rc[i], want.id, want.op, want.imm)
		}
	}
	got := p.waitWCs(p.sim.A, p.cqA, 3, time.Second)
	for i := range got {
		wantWC(t, got[i], uint64(i+1), qp.WCSuccess, qp.WCOpcodeFor([]qp.WROpcode{qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWriteWithImm}[i]))
	}
	b := p.mrB.Bytes()
	mustEqual(t, "SEND", b[dstOff:dstOff+3*n], p.mrA.Bytes()[:3*n])
	if a := p.sim.A.Counters(); a.Retransmits != 1 || a.LocalAckTimeout != 0 {
		t.Fatalf("%d retransmissions, %d timeouts: want 1 and 0", a.Retransmits, a.LocalAckTimeout)
	}
}

// TestIRNSingleLoss: one packet of a 256-packet WRITE is lost. IRN resends
// that packet and nothing else, without a timeout; go-back-N resends
// everything after it. Twice in a row, so the second loss finds recovery
// ended and starts a new one.
func TestIRNSingleLoss(t *testing.T) {
	resent := map[string][]uint64{}
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		link := lossyLink(0)
		op := bth.RCWriteMiddle
		if scheme == recovery.IRN {
			op = bth.RCWriteMiddleOOO
		}
		link.Drop = dropOnce(op, 40, 256+200)
		p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 33, AtoB: link, BtoA: lossyLink(0)},
			ConnParams{MTU: qp.MTU1024, Timeout: 14})
		for id := uint64(1); id <= 2; id++ {
			before := p.sim.A.Counters().Retransmits
			p.checkWrite(id, 256<<10, false)
			resent[scheme] = append(resent[scheme], p.sim.A.Counters().Retransmits-before)
		}
		if a := p.sim.A.Counters(); a.LocalAckTimeout != 0 {
			t.Fatalf("%s: %d timeouts", scheme, a.LocalAckTimeout)
		}
	}
	t.Logf("packets resent per lost packet: %v", resent)
	for i, n := range resent[recovery.IRN] {
		if n != 1 || resent[recovery.GBN][i] < 10 {
			t.Fatalf("write %d resent gbn %d, irn %d packets: want go-back-N, and exactly 1", i+1, resent[recovery.GBN][i], n)
		}
	}
}

// TestIRNTimeouts: a lost single-packet message is recovered after RTO_low,
// not the QP's 67 ms ACK timeout; a lost last packet of a 32-packet message
// waits RTO_high while more than N packets are out, and the one left after
// the retransmitted cumulative acknowledgement RTO_low.
func TestIRNTimeouts(t *testing.T) {
	t.Run("low", func(t *testing.T) {
		link := lossyLink(0)
		link.Drop = dropOnce(bth.RCWriteOnlyOOO, 0)
		p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 34, AtoB: link}, ConnParams{Timeout: 14})
		start := p.sim.Now()
		p.checkWrite(1, 100, false)
		took := p.sim.Now() - start
		if a := p.sim.A.Counters(); a.LocalAckTimeout != 1 || took < recovery.DefaultRTOLow || took > recovery.DefaultRTOLow+50*time.Microsecond {
			t.Fatalf("%d timeouts, took %v: want one RTO_low (%v)", a.LocalAckTimeout, took, recovery.DefaultRTOLow)
		}
	})
	t.Run("high", func(t *testing.T) {
		link := lossyLink(0)
		link.Drop = dropOnce(bth.RCWriteLastOOO, 31)
		p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 35, AtoB: link}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
		start := p.sim.Now()
		p.checkWrite(1, 32<<10, false)
		took := p.sim.Now() - start
		want := recovery.DefaultRTOHigh + recovery.DefaultRTOLow
		if a := p.sim.A.Counters(); a.LocalAckTimeout != 2 || took < want || took > want+100*time.Microsecond {
			t.Fatalf("%d timeouts, took %v: want RTO_high then RTO_low (%v)", a.LocalAckTimeout, took, want)
		}
	})
}

// TestIRNWindow: with a 16-packet BDP cap no more than 16 packets are ever
// unacknowledged, lossy or not, while go-back-N (no cap) goes past it on
// the same transfer; go-back-N with gbn.window=16 (IRN Fig. 7's "IRN with
// go-back-N") keeps the cap too, on the WRITE (its READ request is one
// packet for all its responses' PSNs, as go-back-N's always is).
func TestIRNWindow(t *testing.T) {
	const bdp = 16
	for _, scheme := range []string{recovery.GBN, recovery.IRN, "gbn.window"} {
		params := recovery.Params{BDPPackets: bdp}
		capped := scheme != recovery.GBN
		if scheme == "gbn.window" {
			scheme, params.Knobs = recovery.GBN, recovery.KnobValues{"gbn.window": "16"}
		}
		for _, loss := range []float64{0, 0.02} {
			p := newSchemePair(t, scheme, params, SimConfig{Seed: 36, AtoB: lossyLink(loss), BtoA: lossyLink(loss)},
				ConnParams{MTU: qp.MTU1024, Timeout: 8})
			wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 512<<10))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
			rd := sendWR(2, qp.WRRDMARead, sge(p.mrA, 1<<20, 256<<10))
			rd.RemoteAddr, rd.RKey = p.mrB.Addr+2<<20, p.mrB.RKey
			wrs := []qp.SendWR{wr, rd}
			if params.Knobs != nil {
				wrs = wrs[:1]
			}
			p.postSend(wrs...)
			most, done := 0, 0
			for more := true; more && done < len(wrs); {
				more = p.sim.Step()
				most = max(most, int(p.qa.maxSentPSN.Diff(p.qa.unacked)))
				n, _ := p.sim.A.PollCQ(p.cqA, p.wcs)
				done += n
			}
			if done != len(wrs) {
				t.Fatalf("%s loss %v: %d of %d completions", scheme, loss, done, len(wrs))
			}
			if capped && most > bdp || !capped && most <= bdp {
				t.Fatalf("%s %v loss %v: at most %d packets in flight (cap %d)", scheme, params.Knobs, loss, most, bdp)
			}
		}
	}
}

// TestIRNReadResponsesLost: READ responses lost in the middle and at the
// end of a READ are placed around and asked for again one by one, with
// no timeout for the middle ones. (No jitter: it reorders the small READ
// requests, and IRN resends what arrives out of order as if it were lost.)
func TestIRNReadResponsesLost(t *testing.T) {
	link := lossyLink(0)
	link.Jitter = 0
	back := link
	back.Drop = dropOnce(bth.RCReadResponseOnly, 0x10+5, 0x10+6, 0x10+40)
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 37, AtoB: link, BtoA: back},
		ConnParams{MTU: qp.MTU1024, PSNA: 0x10, Timeout: 14})
	p.checkRead(1, 64<<10)
	a := p.sim.A.Counters()
	if a.Retransmits != 3 || a.LocalAckTimeout != 0 || a.OOOResponses == 0 {
		t.Fatalf("re-requested %d READ responses (want 3), %d timeouts, %d placed out of order", a.Retransmits, a.LocalAckTimeout, a.OOOResponses)
	}
	// The last response lost: nothing comes after it, RTO_low finds it.
	back.Drop = dropOnce(bth.RCReadResponseOnly, 0x10+64+63)
	p.sim.Fabric.SetLink(fabric.BtoA, back)
	p.checkRead(2, 64<<10)
	if a := p.sim.A.Counters(); a.LocalAckTimeout != 1 {
		t.Fatalf("%d timeouts for a lost last response, want 1", a.LocalAckTimeout)
	}
}

// TestIRNNoReceiveWQE: a SEND that arrives early for a receive WQE not yet
// posted is dropped without a NAK (IRN Appendix B.3); in order it gets an
// RNR NAK, and it completes once the receive is posted.
func TestIRNNoReceiveWQE(t *testing.T) {
	link := lossyLink(0)
	link.Drop = dropOnce(bth.RCSendOnlyOOO, 0)
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 38, AtoB: link, BtoA: lossyLink(0)},
		ConnParams{MinRNRTimer: 1})
	p.postRecv(recvWR(900, sge(p.mrB, 0, 100)))
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, 100)), sendWR(2, qp.WRSend, sge(p.mrA, 100, 100)))
	wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, time.Second)[0], 900, qp.WCSuccess, qp.WCRecv)
	p.sim.RunUntil(func() bool { return p.sim.B.Counters().SendRNRErr > 0 }, time.Millisecond)
	if b := p.sim.B.Counters(); b.OOODiscarded != 1 || b.SendRNRErr == 0 {
		t.Fatalf("ooo_discarded %d (want 1), send_rnr_err %d", b.OOODiscarded, b.SendRNRErr)
	}
	p.postRecv(recvWR(901, sge(p.mrB, 100, 100)))
	wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, time.Second)[0], 901, qp.WCSuccess, qp.WCRecv)
	wcs := p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
	wantWC(t, wcs[0], 1, qp.WCSuccess, qp.WCSend)
	wantWC(t, wcs[1], 2, qp.WCSuccess, qp.WCSend)
	mustEqual(t, "SENDs", p.mrB.Bytes()[:200], p.mrA.Bytes()[:200])
}

// TestIRNVersusGBN runs the same lossy workload, same seed, under gbn and
// irn and compares the packets each resends.
func TestIRNVersusGBN(t *testing.T) {
	resent := map[string]uint64{}
	for _, scheme := range []string{recovery.GBN, recovery.IRN} {
		for _, loss := range []float64{0.01, 0.05} {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 39, AtoB: lossyLink(loss), BtoA: lossyLink(loss)},
				ConnParams{MTU: qp.MTU1024, Timeout: 8})
			for id := uint64(1); id <= 4; id++ {
				p.checkWrite(id, 1<<20, false)
				p.checkRead(id, 512<<10)
				p.checkSend(id, 256<<10, true)
			}
			a := p.sim.A.Counters()
			resent[fmt.Sprintf("%s/%v", scheme, loss)] = a.Retransmits
			t.Logf("%s loss %v: sent %d, resent %d, timeouts %d, simulated %v", scheme, loss, a.SentPkts, a.Retransmits, a.LocalAckTimeout, p.sim.Now())
		}
	}
	for _, loss := range []string{"0.01", "0.05"} {
		if resent["irn/"+loss]*4 > resent["gbn/"+loss] {
			t.Fatalf("at %s loss irn resent %d packets, gbn %d: want at most a quarter", loss, resent["irn/"+loss], resent["gbn/"+loss])
		}
	}
}

// TestWindowFullNoAckReqTimer: the state the incast reached, made by
// hand: a full window out, none of it asking for an acknowledgement (the
// stride that asks every ackReqInterval packets was restarted by
// retransmissions, which ask but lie behind). armRetry must run the ACK
// timer, and when the window was lost the timeout resends it and the
// WRITE completes.
func TestWindowFullNoAckReqTimer(t *testing.T) {
	for _, c := range []struct {
		scheme string
		knobs  recovery.KnobValues
	}{{recovery.IRN, nil}, {recovery.GBN, recovery.KnobValues{"gbn.window": "16"}}} {
		t.Run(c.scheme, func(t *testing.T) {
			dropAll := true
			link := lossyLink(0)
			link.Drop = func([]byte) bool { return dropAll }
			p := newSchemePair(t, c.scheme, recovery.Params{BDPPackets: 16, Knobs: c.knobs}, SimConfig{Seed: 42, AtoB: link, BtoA: lossyLink(0)},
				ConnParams{MTU: qp.MTU1024, Timeout: 8})
			src := p.mrA.Bytes()[:64<<10]
			fillRandom(src, 42)
			wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))
			wr.RemoteAddr, wr.RKey = p.mrB.Addr+dstOff, p.mrB.RKey
			p.postSend(wr)
			q := p.qa
			for i := 0; i < 100 && q.maxSentPSN.Diff(q.unacked) < 16; i++ {
				p.sim.Step()
			}
			if n := q.maxSentPSN.Diff(q.unacked); n != 16 {
				t.Fatalf("%d packets out, want a full window of 16", n)
			}
			q.ackReqOut = false // none of them asks
			rc := q.tr.(*rcTransport)
			rc.armRetry()
			if !rc.timers.retry.Armed() {
				t.Fatal("a full window out, none asking: no ACK timer")
			}
			dropAll = false
			wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, waitLimit)[0], 1, qp.WCSuccess, qp.WCRDMAWrite)
			mustEqual(t, "WRITE", p.mrB.Bytes()[dstOff:dstOff+64<<10], src)
		})
	}
}
