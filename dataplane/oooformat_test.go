package dataplane

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// heldFrames is an irn pair whose A->B link holds every frame back: the
// test reads the packets A built and hands B crafted ones.
func heldFrames(t *testing.T) (*testPair, func(op bth.Opcode) []byte) {
	t.Helper()
	var held [][]byte
	link := lossyLink(0)
	link.Drop = func(frame []byte) bool {
		held = append(held, bytes.Clone(frame))
		return true
	}
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 41, AtoB: link, BtoA: lossyLink(0)},
		ConnParams{MTU: qp.MTU1024, PSNA: 0x10})
	first := func(op bth.Opcode) []byte {
		t.Helper()
		for _, f := range held {
			if fr, err := bth.ParseFrame(f); err == nil && fr.Pkt.Opcode() == op {
				return bytes.Clone(f)
			}
		}
		t.Fatalf("A sent no %v", op)
		return nil
	}
	return p, first
}

// TestOOOCompactHeaderChecks: the responder checks what the compact
// out-of-order headers say (docs/wire.md): a WRITE MIDDLE or LAST is placed
// at its RETH's DMA length minus its payload, which must be a positive
// multiple of the MTU, and its RETH's range must lie in the region; a
// SEND's PETH index times the MTU must stay inside its receive WQE and
// below 2^31.
func TestOOOCompactHeaderChecks(t *testing.T) {
	p, first := heldFrames(t)
	const n, dst = 3000, 0x1000
	p.postRecv(recvWR(900, sge(p.mrB, 0, n)))
	w := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, n))
	w.RemoteAddr, w.RKey = p.mrB.Addr+dst, p.mrB.RKey
	p.postSend(w, sendWR(2, qp.WRSend, sge(p.mrA, 0, n)))
	p.sim.RunFor(100 * time.Microsecond)

	// What A built: a RETH on every WRITE packet, DMA length the bytes up
	// to the packet's end past the first; a PETH with the index on SENDs.
	for _, c := range []struct {
		op     bth.Opcode
		dmaLen uint32
	}{{bth.RCWriteFirstOOO, n}, {bth.RCWriteMiddleOOO, 2048}, {bth.RCWriteLastOOO, n}} {
		fr, _ := bth.ParseFrame(first(c.op))
		if r := fr.Pkt.RETH().Fields(); r != (bth.RETHFields{VA: w.RemoteAddr, RKey: w.RKey, DMALen: c.dmaLen}) || fr.Pkt.PETH() != nil {
			t.Fatalf("%v: RETH %+v, PETH %x; want DMA length %d, no PETH", c.op, r, fr.Pkt.PETH(), c.dmaLen)
		}
	}
	for op, index := range map[bth.Opcode]uint32{bth.RCSendFirstOOO: 0, bth.RCSendMiddleOOO: 1, bth.RCSendLastOOO: 2} {
		fr, _ := bth.ParseFrame(first(op))
		if f := fr.Pkt.PETH().Fields(); f != (bth.PETHFields{RecvSN: 0, Index: index}) {
			t.Fatalf("%v: PETH %+v, want index %d", op, f, index)
		}
	}

	e := p.sim.B
	mrEnd := p.mrB.Addr + testMRSize
	for _, c := range []struct {
		name string
		op   bth.Opcode
		edit func(pkt *bth.Packet)
		want verdict
		off  uint32 // where an admitted packet goes
	}{
		{"WRITE MIDDLE as sent", bth.RCWriteMiddleOOO, nil, admitted, 1024},
		{"WRITE LAST as sent", bth.RCWriteLastOOO, nil, admitted, 2048},
		{"WRITE MIDDLE at 1025", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetDMALen(2049) }, refusedInvalid, 0},
		{"WRITE MIDDLE at 0", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetDMALen(1024) }, refusedInvalid, 0},
		{"WRITE MIDDLE before 0", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetDMALen(100) }, refusedInvalid, 0},
		{"WRITE LAST at 2047", bth.RCWriteLastOOO, func(k *bth.Packet) { k.RETH().SetDMALen(n - 1) }, refusedInvalid, 0},
		{"WRITE MIDDLE past the region", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetVA(mrEnd - 2047) }, refusedAccess, 0},
		{"WRITE MIDDLE wrapping", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetVA(^uint64(0) - 1023) }, refusedAccess, 0},
		{"WRITE MIDDLE bad R_Key", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetRKey(w.RKey ^ 0x100) }, refusedAccess, 0},
		{"WRITE MIDDLE fits at the region's end", bth.RCWriteMiddleOOO, func(k *bth.Packet) { k.RETH().SetVA(mrEnd - 2048) }, admitted, 1024},
		{"SEND MIDDLE as sent", bth.RCSendMiddleOOO, nil, admitted, 1024},
		{"SEND LAST as sent", bth.RCSendLastOOO, nil, admitted, 2048},
		{"SEND MIDDLE past its receive WQE", bth.RCSendMiddleOOO, func(k *bth.Packet) { k.PETH().SetIndex(3) }, refusedLength, 0},
		{"SEND MIDDLE at index 0", bth.RCSendMiddleOOO, func(k *bth.Packet) { k.PETH().SetIndex(0) }, refusedInvalid, 0},
		{"SEND MIDDLE past 2^31", bth.RCSendMiddleOOO, func(k *bth.Packet) { k.PETH().SetIndex(1<<21 + 1) }, refusedInvalid, 0},
		{"SEND MIDDLE at the largest index", bth.RCSendMiddleOOO, func(k *bth.Packet) { k.PETH().SetIndex(1<<24 - 1) }, refusedInvalid, 0},
		{"SEND MIDDLE at 2^31", bth.RCSendMiddleOOO, func(k *bth.Packet) { k.PETH().SetIndex(1 << 21) }, refusedLength, 0},
	} {
		fr, err := bth.ParseFrame(first(c.op))
		if err != nil {
			t.Fatal(err)
		}
		if c.edit != nil {
			c.edit(&fr.Pkt)
		}
		var pl placement
		e.mu.Lock()
		got := p.qb.tr.(*rcTransport).admit(&fr.Pkt, false, &pl)
		e.mu.Unlock()
		if got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
			continue
		}
		if got != admitted {
			continue
		}
		if pl.off != c.off {
			t.Errorf("%s: offset %d, want %d", c.name, pl.off, c.off)
		}
		if bth.Lookup(c.op).Flags&bth.IsWrite != 0 { // its target bytes
			va := fr.Pkt.RETH().VA() + uint64(c.off)
			want := p.mrB.Bytes()[va-p.mrB.Addr:][:len(fr.Pkt.Payload())]
			if len(pl.dst) != len(want) || &pl.dst[0] != &want[0] {
				t.Errorf("%s: placed at the wrong bytes", c.name)
			}
		}
	}
}

// TestOOOWriteBadOffsetInOrder: in order, a WRITE MIDDLE whose offset is
// not a multiple of the MTU is an invalid request, and one whose range
// leaves the region a remote access error: B NAKs, A's WRITE fails with
// the matching status.
func TestOOOWriteBadOffsetInOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		edit    func(r bth.RETH)
		status  qp.WCStatus
		counter func(*Counters) uint64
	}{
		{"offset 1000", func(r bth.RETH) { r.SetDMALen(2024) }, qp.WCRemInvReqErr, func(c *Counters) uint64 { return c.RespInvalidReq }},
		{"past the region", func(r bth.RETH) { r.SetVA(r.VA() + testMRSize) }, qp.WCRemAccessErr, func(c *Counters) uint64 { return c.RespRemoteAccess }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, first := heldFrames(t)
			w := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 3000))
			w.RemoteAddr, w.RKey = p.mrB.Addr, p.mrB.RKey
			p.postSend(w)
			p.sim.RunFor(100 * time.Microsecond)
			frame := first(bth.RCWriteMiddleOOO)
			fr, _ := bth.ParseFrame(frame)
			fr.Pkt.BTH().SetPSN(0x10) // the expected PSN: in order
			c.edit(fr.Pkt.RETH())
			bth.FinishFrame(frame, &bth.FrameHeader{Src: SimAddrA, Dst: SimAddrB})
			e := p.sim.B
			e.mu.Lock()
			e.receive(frame)
			e.mu.Unlock()
			cnt := e.Counters()
			if c.counter(&cnt) != 1 || cnt.OOOKept != 0 {
				t.Fatalf("counters %+v", cnt)
			}
			if q := p.qb; !q.goError && q.state != qp.Err {
				t.Fatal("B's QP did not fail")
			}
			wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, c.status, qp.WCRDMAWrite)
			if !bytes.Equal(p.mrB.Bytes()[:4096], make([]byte, 4096)) {
				t.Fatal("the refused packet was placed")
			}
		})
	}
}

// TestOOOWriteImmLastFirst: a two-packet SEND with immediate whose LAST is
// lost, then a four-packet WRITE with immediate across the PSN wrap
// (0xFFFFFF to 2) whose two MIDDLEs are lost: the WRITE's LAST arrives
// before its MIDDLEs and while the SEND still holds the head receive WQE.
// Its RWSNETH finds the second receive WQE, the completions come in
// order once the holes fill, the WRITE's byte_len is its LAST packet's
// DMA length (the message's), and both immediates are right.
func TestOOOWriteImmLastFirst(t *testing.T) {
	for _, scheme := range []string{recovery.IRN, recovery.FaSR, recovery.MELO} {
		t.Run(scheme, func(t *testing.T) {
			drop := map[bth.Opcode][]qp.PSN{bth.RCSendLastImmOOO: {0xFFFFFE}, bth.RCWriteMiddleOOO: {0, 1}}
			link := lossyLink(0)
			link.Drop = func(frame []byte) bool {
				fr, err := bth.ParseFrame(frame)
				if err != nil {
					return false
				}
				op, psn := fr.Pkt.Opcode(), qp.PSN(fr.Pkt.BTH().PSN())
				for i, d := range drop[op] {
					if d == psn {
						drop[op][i] = 0xBAD0000 // once
						return true
					}
				}
				return false
			}
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 42, AtoB: link, BtoA: lossyLink(0)},
				ConnParams{MTU: qp.MTU1024, PSNA: 0xFFFFFD})
			const sn, wn = 2000, 4000 // PSNs 0xFFFFFD-0xFFFFFE, then 0xFFFFFF-2
			fillRandom(p.mrA.Bytes()[:sn+wn], 42)
			p.postRecv(recvWR(900, sge(p.mrB, 0, sn)), recvWR(901))
			s := sendWR(1, qp.WRSendWithImm, sge(p.mrA, 0, sn))
			s.ImmData = 0xBEEF
			w := sendWR(2, qp.WRRDMAWriteWithImm, sge(p.mrA, sn, wn))
			w.RemoteAddr, w.RKey, w.ImmData = p.mrB.Addr+0x100000, p.mrB.RKey, 0xC0FFEE
			p.postSend(s, w)
			rc := p.waitWCs(p.sim.B, p.cqB, 2, time.Second)
			wantWC(t, rc[0], 900, qp.WCSuccess, qp.WCRecv)
			wantWC(t, rc[1], 901, qp.WCSuccess, qp.WCRecvRDMAWithImm)
			if rc[0].ByteLen != sn || rc[0].ImmData != 0xBEEF || rc[1].ByteLen != wn || rc[1].ImmData != 0xC0FFEE {
				t.Fatalf("receive completions %+v", rc)
			}
			mustEqual(t, "SEND", p.mrB.Bytes()[:sn], p.mrA.Bytes()[:sn])
			mustEqual(t, "WRITE", p.mrB.Bytes()[0x100000:0x100000+wn], p.mrA.Bytes()[sn:sn+wn])
			for op, psns := range drop {
				for _, d := range psns {
					if d != 0xBAD0000 {
						t.Fatalf("%v %#x was never sent", op, d)
					}
				}
			}
			sc := p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
			wantWC(t, sc[0], 1, qp.WCSuccess, qp.WCSend)
			wantWC(t, sc[1], 2, qp.WCSuccess, qp.WCRDMAWrite)
		})
	}
}

// TestOOOCompactAllocs: the out-of-order path with the compact headers —
// a WRITE with immediate (RETH on every packet, RWSNETH) and a
// multi-packet SEND (PETH index) — allocates nothing once warm.
func TestOOOCompactAllocs(t *testing.T) {
	p := newSchemePair(t, recovery.IRN, recovery.Params{}, SimConfig{Seed: 43, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)},
		ConnParams{MTU: qp.MTU1024})
	write := []qp.SendWR{sendWR(1, qp.WRRDMAWriteWithImm, sge(p.mrA, 0, 5000))}
	write[0].RemoteAddr, write[0].RKey = p.mrB.Addr, p.mrB.RKey
	send := []qp.SendWR{sendWR(2, qp.WRSend, sge(p.mrA, 0, 3000))}
	recv := []qp.RecvWR{recvWR(3), recvWR(4, sge(p.mrB, 8192, 3000))}
	round := writeSendRound(t, p, write, send, recv, 4)
	for range 30 {
		round()
	}
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per round, want 0", allocs)
	}
	if c := p.sim.B.Counters(); c.RDMARecvs < 160 {
		t.Fatalf("%d messages received, want 2 per round", c.RDMARecvs)
	}
}

// TestOOOOpcodeSplit: a connection that places out of order takes SENDs
// and WRITEs only as extension opcodes, and any other connection drops
// every extension opcode; both count rcvd_bad_opcode (docs/wire.md).
func TestOOOOpcodeSplit(t *testing.T) {
	p, first := heldFrames(t)
	w := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 3000))
	w.RemoteAddr, w.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(w)
	p.sim.RunFor(100 * time.Microsecond)
	inject := func(e *Engine, q *QP, frame []byte, op bth.Opcode) {
		t.Helper()
		frame = bytes.Clone(frame)
		fr, _ := bth.ParseFrame(frame)
		fr.Pkt.BTH().SetOpcode(op)
		fr.Pkt.BTH().SetDestQPN(q.qpn)
		bth.FinishFrame(frame, &bth.FrameHeader{Src: SimAddrA, Dst: SimAddrB})
		if _, err := bth.ParseFrame(frame); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		before := e.Counters().RcvdBadOpcode
		e.mu.Lock()
		e.receive(frame)
		e.mu.Unlock()
		if got := e.Counters().RcvdBadOpcode; got != before+1 {
			t.Errorf("%v: rcvd_bad_opcode %d -> %d", op, before, got)
		}
	}
	middle := first(bth.RCWriteMiddleOOO)
	inject(p.sim.B, p.qb, middle, bth.RCWriteMiddle) // the standard opcode, on irn
	inject(p.sim.B, p.qb, middle, bth.RCSendMiddle)
	g := newSchemePair(t, recovery.GBN, recovery.Params{}, SimConfig{Seed: 44}, ConnParams{MTU: qp.MTU1024})
	for _, op := range []bth.Opcode{bth.RCWriteMiddleOOO, bth.RCWriteFirstOOO, bth.RCSendMiddleOOO, bth.RCWriteLastImmOOO} {
		inject(g.sim.B, g.qb, middle, op) // an extension opcode, on gbn
	}
}
