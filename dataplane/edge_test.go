package dataplane

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// dropFirst returns a fabric drop hook that drops the first n frames with
// opcode op.
func dropFirst(op bth.Opcode, n int) func([]byte) bool {
	return func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil || f.Pkt.Opcode() != op || n == 0 {
			return false
		}
		n--
		return true
	}
}

// TestDuplicateAtomicNotReexecuted: the atomic ACK is lost, the requester
// resends the atomic, and the responder answers from its resources ring
// without adding twice.
func TestDuplicateAtomicNotReexecuted(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 8, BtoA: fabric.LinkConfig{Drop: dropFirst(bth.RCAtomicAcknowledge, 2)}}, ConnParams{Timeout: 8})
	binary.LittleEndian.PutUint64(p.mrB.Bytes()[64:], 40)
	wr := sendWR(1, qp.WRAtomicFetchAndAdd, sge(p.mrA, 0, 8))
	wr.RemoteAddr, wr.RKey, wr.CompareAdd = p.mrB.Addr+64, p.mrB.RKey, 2
	p.postSend(wr)
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCFetchAdd)
	if got := binary.LittleEndian.Uint64(p.mrB.Bytes()[64:]); got != 42 {
		t.Fatalf("remote value %d, want 42 (added once)", got)
	}
	if got := binary.LittleEndian.Uint64(p.mrA.Bytes()); got != 40 {
		t.Fatalf("returned %d, want 40", got)
	}
	if c := p.sim.B.Counters(); c.DuplicateRequest != 2 {
		t.Fatalf("duplicate_request %d, want 2", c.DuplicateRequest)
	}
}

// TestDuplicateReadReexecuted: lost READ responses make the requester
// retry the READ for the missing part only, and the responder re-reads
// memory from there.
func TestDuplicateReadReexecuted(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 9, BtoA: fabric.LinkConfig{Drop: dropFirst(bth.RCReadResponseMiddle, 3)}}, ConnParams{MTU: qp.MTU1024, Timeout: 8})
	p.checkRead(1, 10<<10)
	a := p.sim.A.Counters()
	if a.ImpliedNakSeqErr == 0 {
		t.Fatalf("no implied NAK after losing READ responses: %+v", a)
	}
}

// TestDuplicateReadWhileStreaming: ST's second copy of a READ request
// reaches the responder while the first response still streams (the NIC
// is paced at 1 Gb/s). The responder rewinds the stream in place to the
// copy's PSN rather than queue a second one (a long READ under loss
// would otherwise resend its whole remainder per retry), and sends the
// response's last packet twice, as ST sends the last packet of every
// message: losing the first copy of it costs no timeout. Before, the
// last packet went once and its loss cost the ACK timeout.
func TestDuplicateReadWhileStreaming(t *testing.T) {
	const size = 8 << 10
	p := newSchemePair(t, recovery.GBNST, recovery.Params{}, SimConfig{Seed: 9, BtoA: fabric.LinkConfig{Drop: dropFirst(bth.RCReadResponseLast, 1)},
		LinkRate: 1e9, LinkDelay: time.Microsecond}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
	responses, lasts := 0, 0
	p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, _ bool) {
		f, err := bth.ParseFrame(frame)
		if err != nil || d != fabric.BtoA || f.Pkt.Info.Flags&(bth.IsRead|bth.IsResponse) != bth.IsRead|bth.IsResponse {
			return
		}
		responses++
		if f.Pkt.Opcode() == bth.RCReadResponseLast {
			lasts++
		}
	})
	p.checkRead(1, size)
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	if a.LocalAckTimeout != 0 || b.DuplicateRequest != 1 {
		t.Fatalf("local_ack_timeout %d (want 0), duplicate_request %d (want 1)", a.LocalAckTimeout, b.DuplicateRequest)
	}
	if lasts != 2 || responses >= 2*size/1024 {
		t.Fatalf("%d READ response frames, %d of them the last packet: want one stream, rewound by the copy, its last packet twice", responses, lasts)
	}
}

// TestImpliedNakByAck: the only READ response is lost but the SEND behind
// it is acknowledged; the ACK implies the READ response was lost.
func TestImpliedNakByAck(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 10, BtoA: fabric.LinkConfig{Drop: dropFirst(bth.RCReadResponseOnly, 1)}}, ConnParams{Timeout: 20})
	fillRandom(p.mrB.Bytes()[:100], 10)
	p.postRecv(recvWR(5, sge(p.mrB, 4096, 100)))
	rd := sendWR(1, qp.WRRDMARead, sge(p.mrA, 0, 100))
	rd.RemoteAddr, rd.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(rd, sendWR(2, qp.WRSend, sge(p.mrA, 200, 100)))
	start := p.sim.Now()
	wcs := p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
	wantWC(t, wcs[0], 1, qp.WCSuccess, qp.WCRDMARead)
	wantWC(t, wcs[1], 2, qp.WCSuccess, qp.WCSend)
	if took := p.sim.Now() - start; took > time.Millisecond {
		t.Fatalf("recovery took %v: waited for the 4 s timeout instead of the implied NAK", took)
	}
	mustEqual(t, "READ", p.mrA.Bytes()[:100], p.mrB.Bytes()[:100])
}

// TestGBNNakInterval: after one loss the receiver NAKs once, and not
// again within the NAK interval however many packets arrive out of order.
func TestGBNNakInterval(t *testing.T) {
	dropped := false
	drop := func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err == nil && f.Pkt.Opcode() == bth.RCWriteMiddle && !dropped {
			dropped = true
			return true
		}
		return false
	}
	p := newTestPair(t, SimConfig{Seed: 11, AtoB: fabric.LinkConfig{Drop: drop, Delay: time.Microsecond, RateBps: 10e9, QueueFrames: 64}}, ConnParams{MTU: qp.MTU1024})
	p.checkWrite(1, 256<<10, false)
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	if b.SeqNakSent != 1 || a.RcvdSeqErr != 1 || b.OutOfSeqRequest < 2 {
		t.Fatalf("seq_nak_sent %d, rcvd_seq_err %d (want 1 each), out_of_seq_request %d", b.SeqNakSent, a.RcvdSeqErr, b.OutOfSeqRequest)
	}
	if a.LocalAckTimeout != 0 {
		t.Fatalf("a NAKed loss needed a timeout")
	}
}

// TestMalformedFrames feeds the receive path garbage, truncations, bad
// ICRCs, unknown QPNs and out-of-place opcodes: nothing panics, nothing
// is placed, and every frame is counted under one reason; under every
// scheme, so that softnic's extension opcodes are mutated too.
func TestMalformedFrames(t *testing.T) {
	for _, scheme := range recovery.Names() {
		t.Run(scheme, func(t *testing.T) { malformedFrames(t, scheme) })
	}
}

func malformedFrames(t *testing.T, scheme string) {
	p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 12}, ConnParams{})
	// A valid frame to mutate: capture the first WRITE A sends.
	var good []byte
	p.sim.Fabric.Tap(func(d fabric.Direction, _ time.Duration, frame []byte, _ bool) {
		if good == nil && d == fabric.AtoB {
			good = append([]byte(nil), frame...)
		}
	})
	p.checkWrite(1, 100, false)
	p.sim.Fabric.Tap(nil)
	e := p.sim.B
	before := e.Counters()
	inject := func(frame []byte) {
		e.mu.Lock()
		e.receive(frame)
		e.mu.Unlock()
	}
	for n := 0; n < len(good); n++ {
		inject(good[:n])
	}
	badICRC := append([]byte(nil), good...)
	badICRC[len(badICRC)-1] ^= 1
	inject(badICRC)
	unknownQP := append([]byte(nil), good...)
	f, _ := bth.ParseFrame(unknownQP)
	f.Pkt.BTH().SetDestQPN(0xABCDE)
	bth.FinishFrame(unknownQP, &bth.FrameHeader{Src: SimAddrA, Dst: SimAddrB})
	inject(unknownQP)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		frame := append([]byte(nil), good...)
		for k := r.IntN(4) + 1; k > 0; k-- {
			frame[r.IntN(len(frame))] = byte(r.Uint32())
		}
		inject(frame)
	}
	after := e.Counters()
	if after.RcvdICRCErr-before.RcvdICRCErr < 20000/2 || after.RcvdMalformed-before.RcvdMalformed < uint64(len(good))-1 {
		t.Fatalf("drops not counted: before %+v after %+v", before, after)
	}
	if after.RcvdUnknownQPN != before.RcvdUnknownQPN+1 {
		t.Fatalf("rcvd_unknown_qpn %d -> %d", before.RcvdUnknownQPN, after.RcvdUnknownQPN)
	}
	// The connection still works.
	p.checkWrite(2, 5000, false)
}

// FuzzReceive: no frame can panic the engine, under any scheme; the seeds
// are the frames of lossy transfers under every scheme.
func FuzzReceive(f *testing.F) {
	var engines []*Engine
	for _, scheme := range recovery.Names() {
		p := newSchemePair(f, scheme, recovery.Params{}, SimConfig{Seed: 13, AtoB: lossyLink(0.05), BtoA: lossyLink(0.05)}, ConnParams{Timeout: 8})
		p.sim.Fabric.Tap(func(_ fabric.Direction, _ time.Duration, frame []byte, _ bool) {
			f.Add(append([]byte(nil), frame...))
		})
		p.checkWrite(1, 3000, false)
		p.checkRead(2, 3000)
		p.checkSend(3, 100, true)
		p.checkAtomics()
		p.sim.Fabric.Tap(nil)
		engines = append(engines, p.sim.A, p.sim.B)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		// Half the time the mutated frame gets a valid ICRC, so that the
		// mutations reach the transport (every scheme's NAK and SACK
		// parsing: SACKETH, HolesETH, lost-cnt) instead of stopping at the
		// ICRC check.
		if len(frame) > 0 && frame[len(frame)-1]&1 == 0 {
			if fr, err := bth.ParseFrame(frame); err == nil {
				bth.WriteICRC(fr.Buf, fr.L3Off, fr.IPv6)
			}
		}
		for _, e := range engines {
			e.mu.Lock()
			e.receive(frame)
			e.mu.Unlock()
		}
	})
}

// TestModifyQP checks the state machine and the attribute masks.
func TestModifyQP(t *testing.T) {
	sim, err := NewSim(SimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e := sim.A
	pd := e.AllocPD()
	cq, _ := e.CreateCQ(16, nil)
	q, err := e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTS}, qp.AttrState); err == nil {
		t.Fatal("RESET -> RTS accepted")
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Init}, qp.AttrState); err == nil {
		t.Fatal("RESET -> INIT without required attributes accepted")
	}
	if _, err := e.PostSend(q, []qp.SendWR{sendWR(1, qp.WRSend)}); err == nil {
		t.Fatal("post send in RESET accepted")
	}
	initMask := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags
	if err := e.ModifyQP(q, &QPAttr{State: qp.Init}, initMask|qp.AttrSQPSN); err == nil {
		t.Fatal("RESET -> INIT with an SQ PSN accepted")
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Init}, initMask); err != nil {
		t.Fatal(err)
	}
	rtr := QPAttr{State: qp.RTR, AV: AddressVector{DGID: SimAddrB}, PathMTU: 7, DestQPN: 0x11}
	rtrMask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	if err := e.ModifyQP(q, &rtr, rtrMask); err == nil {
		t.Fatal("path MTU enum 7 accepted")
	}
	rtr.PathMTU, rtr.RQPSN = qp.MTU2048, 1<<24
	if err := e.ModifyQP(q, &rtr, rtrMask); err == nil {
		t.Fatal("25-bit PSN accepted")
	}
	rtr.RQPSN = 5
	if err := e.ModifyQP(q, &rtr, rtrMask); err != nil {
		t.Fatal(err)
	}
	if got := e.QueryQP(q); got.State != qp.RTR || got.PathMTU != qp.MTU2048 || got.RQPSN != 5 {
		t.Fatalf("query after RTR: %+v", got)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.SQD}, qp.AttrState); err == nil {
		t.Fatal("RTR -> SQD accepted")
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Err}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTS}, qp.AttrState); err == nil {
		t.Fatal("ERR -> RTS accepted")
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.Reset}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := e.DeallocPD(pd); err == nil {
		t.Fatal("PD with a live QP deallocated")
	}
	if err := e.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if err := e.DeallocPD(pd); err != nil {
		t.Fatal(err)
	}
}

// TestSteadyStateAllocs proves the data path does not allocate: posting,
// segmenting, transmitting, receiving, placing, acknowledging and
// completing a 64 KiB WRITE and an 8-byte SEND cost zero allocations
// once warm, under every scheme, with and without an emulated link rate.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count is checked in the full run")
	}
	for _, scheme := range recovery.Names() {
		for _, loss := range []float64{0, 0.01} {
			t.Run(fmt.Sprintf("%s/loss%v", scheme, loss), func(t *testing.T) { steadyStateAllocs(t, scheme, loss, 0, 0) })
		}
		// Every frame paced by the link's bucket (5 Gbit/s on a 25 Gbit/s
		// fabric), retransmissions included.
		t.Run(scheme+"/loss0.01/paced", func(t *testing.T) { steadyStateAllocs(t, scheme, 0.01, 5e9, 0) })
		// Every received frame held in the link's delay line.
		t.Run(scheme+"/loss0.01/delayed", func(t *testing.T) { steadyStateAllocs(t, scheme, 0.01, 5e9, 20*time.Microsecond) })
		// DCQCN on both NICs, one frame in 8 CE-marked on the way: CNPs
		// sent and handled, the rate cut and recovering, the requester
		// paced (docs/cc.md).
		t.Run(scheme+"/dcqcn", func(t *testing.T) { ccAllocs(t, scheme, cc.DCQCN) })
	}
}

// noRoundAllocs runs rounds of a 64 KiB WRITE and an 8-byte SEND on p
// until they are warm, then fails if one allocates.
func noRoundAllocs(t *testing.T, p *testPair) {
	t.Helper()
	write := []qp.SendWR{sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 64<<10))}
	write[0].RemoteAddr, write[0].RKey = p.mrB.Addr, p.mrB.RKey
	send := []qp.SendWR{sendWR(2, qp.WRSend, sge(p.mrA, 0, 8))}
	recv := []qp.RecvWR{recvWR(3, sge(p.mrB, 0, 8))}
	round := writeSendRound(t, p, write, send, recv, 3)
	for i := 0; i < 30; i++ {
		round()
	}
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round (66 packets, 2 ACKs, 3 completions), want 0", allocs)
	}
}

// ccAllocs is steadyStateAllocs with congestion control alg on both
// NICs and every 8th frame from A to B marked CE.
func ccAllocs(t *testing.T, scheme, alg string) {
	n := 0
	mark := func(frame []byte) bool {
		if n++; n%8 == 0 {
			netsw.MarkCE(frame)
		}
		return false
	}
	p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 14, AtoB: fabric.LinkConfig{Drop: mark}, CC: alg}, ConnParams{MTU: qp.MTU1024})
	noRoundAllocs(t, p)
	if b, a := p.sim.B.Counters(), p.sim.A.Counters(); b.NPCNPSent == 0 || a.RPCNPHandled != b.NPCNPSent {
		t.Fatalf("%s: %d CNPs sent, %d handled: the rounds did not exercise congestion control", alg, b.NPCNPSent, a.RPCNPHandled)
	}
}

// steadyStateAllocs: with loss, the selective schemes' recovery (pools,
// SACKs, the reorder buffer, FNACKs) allocates nothing either.
func steadyStateAllocs(t *testing.T, scheme string, loss float64, linkRate uint64, delay time.Duration) {
	{
		{
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 14, AtoB: lossyLink(loss), BtoA: lossyLink(loss), LinkRate: linkRate, LinkDelay: delay}, ConnParams{MTU: qp.MTU1024})
			noRoundAllocs(t, p)
			if c := p.sim.A.Counters(); loss > 0 && c.Retransmits == 0 {
				t.Fatalf("no retransmission at %v%% loss: the lossy rounds did not exercise recovery", loss*100)
			}
			if c := p.sim.A.Counters(); linkRate > 0 && (c.LinkPaced == 0 || c.LinkPacedNs == 0) {
				t.Fatal("the link never held a packet back: the rounds did not exercise pacing")
			}
		}
	}
}

// writeSendRound returns one round of an allocation test: post recv at
// B, then write and send at A, and run until wcs completions came on the
// two CQs together. Its closures and slices are made here, once, so that
// a round allocates only what the engines do.
func writeSendRound(t *testing.T, p *testPair, write, send []qp.SendWR, recv []qp.RecvWR, wcs int) func() {
	buf := make([]qp.WC, 4)
	done := 0
	cond := func() bool {
		n, _ := p.sim.A.PollCQ(p.cqA, buf)
		m, _ := p.sim.B.PollCQ(p.cqB, buf)
		done += n + m
		return done >= wcs
	}
	return func() {
		done = 0
		p.sim.B.PostRecv(p.qb, recv)
		p.sim.A.PostSend(p.qa, write)
		p.sim.A.PostSend(p.qa, send)
		if !p.sim.RunUntil(cond, time.Second) {
			t.Fatal("round did not complete")
		}
	}
}

// dropNaks drops the first n PSN-sequence-error NAKs.
func dropNaks(n int) func([]byte) bool {
	return func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil || f.Pkt.Opcode() != bth.RCAcknowledge || n == 0 {
			return false
		}
		if s := f.Pkt.AETH().Syndrome(); s.Kind() == bth.NakKind && s.NakCode() == bth.NakPSNSeqError {
			n--
			return true
		}
		return false
	}
}

// TestIGBNRecoversLostNak: one data packet and then its NAK are lost in a
// single-message transfer. Go-back-N has nothing left to trigger another
// NAK and waits for the ACK timeout; Improved go-back-N's CE timer NAKs
// again after the NAK interval (paper 002, Fig. 4(c)).
func TestIGBNRecoversLostNak(t *testing.T) {
	for _, tc := range []struct {
		scheme       string
		wantTimeouts uint64
	}{{recovery.GBN, 1}, {recovery.IGBN, 0}} {
		t.Run(tc.scheme, func(t *testing.T) {
			link := lossyLink(0)
			link.Drop = dropFirst(bth.RCWriteMiddle, 1)
			back := lossyLink(0)
			back.Drop = dropNaks(1)
			p := newTestPair(t, SimConfig{Seed: 17, AtoB: link, BtoA: back, SchemeA: tc.scheme, SchemeB: tc.scheme}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
			start := p.sim.Now()
			p.checkWrite(1, 32<<10, false)
			took := p.sim.Now() - start
			a, b := p.sim.A.Counters(), p.sim.B.Counters()
			if a.LocalAckTimeout != tc.wantTimeouts {
				t.Fatalf("%d ACK timeouts, want %d (took %v, NAKs sent %d)", a.LocalAckTimeout, tc.wantTimeouts, took, b.SeqNakSent)
			}
			if tc.scheme == recovery.IGBN && (took > 2*time.Millisecond || b.SeqNakSent < 2) {
				t.Fatalf("CE did not re-NAK: took %v, %d NAKs", took, b.SeqNakSent)
			}
		})
	}
}

// TestIGBNSendTwice: the last packet of each message goes out twice.
func TestIGBNSendTwice(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 18, SchemeA: recovery.IGBN}, ConnParams{MTU: qp.MTU1024})
	p.checkWrite(1, 4096, false) // 4 packets, the last twice
	if a, b := p.sim.A.Counters(), p.sim.B.Counters(); a.SentPkts != 5 || b.DuplicateRequest != 1 {
		t.Fatalf("sent %d packets (want 5), duplicates at the responder %d (want 1)", a.SentPkts, b.DuplicateRequest)
	}
}

// TestDuplicateNaksSpendOneRetry: a burst of identical PSN-sequence NAKs
// (a busy responder's queue, or its NAK-interval repeats) makes one
// go-back and spends at most one retry, not one per copy: none when the
// NAK acknowledged new packets (the first here acknowledges the message's
// FIRST packet), one when it names the oldest unacknowledged PSN.
func TestDuplicateNaksSpendOneRetry(t *testing.T) {
	t.Run("progress", func(t *testing.T) { testDuplicateNaks(t, bth.RCWriteMiddle, 0) })
	t.Run("stall", func(t *testing.T) { testDuplicateNaks(t, bth.RCWriteFirst, 1) })
}

func testDuplicateNaks(t *testing.T, drop bth.Opcode, wantRetries uint64) {
	var nak []byte
	back := lossyLink(0)
	back.Drop = func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err == nil && nak == nil && f.Pkt.Opcode() == bth.RCAcknowledge && f.Pkt.AETH().Syndrome().Kind() == bth.NakKind {
			nak = append([]byte(nil), frame...)
			return true // the test delivers it, many times
		}
		return false
	}
	link := lossyLink(0)
	link.Drop = dropFirst(drop, 1)
	p := newTestPair(t, SimConfig{Seed: 23, AtoB: link, BtoA: back}, ConnParams{MTU: qp.MTU1024, RetryCnt: 2, RetryCntSet: true, Timeout: 14})
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 16<<10))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	if !p.sim.RunUntil(func() bool { return nak != nil }, time.Second) {
		t.Fatal("no NAK")
	}
	before := p.sim.A.Counters()
	p.sim.A.mu.Lock()
	for i := 0; i < 10; i++ {
		p.sim.A.receive(nak)
	}
	p.sim.A.mu.Unlock()
	after := p.sim.A.Counters()
	if after.RcvdSeqErr-before.RcvdSeqErr != 10 || after.CompleterRetry-before.CompleterRetry != wantRetries {
		t.Fatalf("10 NAKs: rcvd_seq_err +%d, retries +%d (want +10, +%d)", after.RcvdSeqErr-before.RcvdSeqErr, after.CompleterRetry-before.CompleterRetry, wantRetries)
	}
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCRDMAWrite)
}

// TestPerQPScheme: QPs of one engine can run different schemes; an
// unknown name is refused.
func TestPerQPScheme(t *testing.T) {
	sim, err := NewSim(SimConfig{Seed: 24})
	if err != nil {
		t.Fatal(err)
	}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	mrA, _ := sim.A.RegMR(pdA, make([]byte, 8192), 0, all)
	mrB, _ := sim.B.RegMR(pdB, make([]byte, 8192), 0, all)
	cqA, _ := sim.A.CreateCQ(16, nil)
	cqB, _ := sim.B.CreateCQ(16, nil)
	if _, err := sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 4, Scheme: "nope"}); err == nil {
		t.Fatal("unknown scheme accepted")
	}
	sent := map[string]uint64{}
	for _, name := range []string{recovery.GBN, recovery.IGBN} {
		qa, err := sim.A.CreateQP(pdA, QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 4, Scheme: name})
		if err != nil {
			t.Fatal(err)
		}
		qb, _ := sim.B.CreateQP(pdB, QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 4, MaxRecvWR: 4, Scheme: name})
		if qa.Scheme() != name {
			t.Fatalf("scheme %q, want %q", qa.Scheme(), name)
		}
		if err := Connect(sim.A, qa, sim.B, qb, ConnParams{MTU: qp.MTU1024}); err != nil {
			t.Fatal(err)
		}
		before := sim.A.Counters().SentPkts
		w := sendWR(1, qp.WRRDMAWrite, sge(mrA, 0, 4096))
		w.RemoteAddr, w.RKey = mrB.Addr, mrB.RKey
		sim.A.PostSend(qa, []qp.SendWR{w})
		wcs := make([]qp.WC, 1)
		if !sim.RunUntil(func() bool { n, _ := sim.A.PollCQ(cqA, wcs); return n == 1 }, time.Second) || wcs[0].Status != qp.WCSuccess {
			t.Fatalf("%s: %+v", name, wcs[0])
		}
		sent[name] = sim.A.Counters().SentPkts - before
	}
	if sent[recovery.GBN] != 4 || sent[recovery.IGBN] != 5 {
		t.Fatalf("packets sent per scheme %v, want gbn 4, igbn 5 (ST)", sent)
	}
}

// TestReadAfterWritesNoImpliedNak: a READ queued behind WRITEs on a clean
// link completes with no implied NAK and no retry: its own responses do
// not count as acknowledgements passing it.
func TestReadAfterWritesNoImpliedNak(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 25}, ConnParams{MTU: qp.MTU1024})
	var wrs []qp.SendWR
	for i := 0; i < 3; i++ {
		w := sendWR(uint64(i), qp.WRRDMAWrite, sge(p.mrA, 0, 5000))
		w.RemoteAddr, w.RKey, w.Flags = p.mrB.Addr, p.mrB.RKey, 0
		wrs = append(wrs, w)
	}
	r := sendWR(9, qp.WRRDMARead, sge(p.mrA, 8000, 5000))
	r.RemoteAddr, r.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(append(wrs, r)...)
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 9, qp.WCSuccess, qp.WCRDMARead)
	if c := p.sim.A.Counters(); c.ImpliedNakSeqErr != 0 || c.CompleterRetry != 0 || c.Retransmits != 0 {
		t.Fatalf("implied_nak_seq_err %d, completer_retry_err %d, retransmitted %d on a clean link", c.ImpliedNakSeqErr, c.CompleterRetry, c.Retransmits)
	}
}

// TestIGBNSendTwiceRingFull: ST's second copy is not lost when the
// transmit ring fills up between the two copies; it goes out as soon as
// there is room, and only once.
func TestIGBNSendTwiceRingFull(t *testing.T) {
	link := lossyLink(0)
	link.QueueFrames = 4 // a tiny ring: the copies of a 4-packet message's last packet collide with it
	p := newTestPair(t, SimConfig{Seed: 26, SchemeA: recovery.IGBN, AtoB: link}, ConnParams{MTU: qp.MTU1024})
	for i := uint64(1); i <= 20; i++ {
		p.checkWrite(i, 4096, false) // 4 packets, the last twice
	}
	p.settle() // the last copy may still be on the wire
	if a, b := p.sim.A.Counters(), p.sim.B.Counters(); a.SentPkts != 20*5 || b.DuplicateRequest != 20 || a.Retransmits != 0 {
		t.Fatalf("sent %d packets (want 100), duplicates at the responder %d (want 20), retransmitted %d", a.SentPkts, b.DuplicateRequest, a.Retransmits)
	}
}
