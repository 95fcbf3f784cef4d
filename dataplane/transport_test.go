package dataplane

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

const waitLimit = 60 * time.Second // simulated

// Where the tests put things in the 9 MiB regions: sources at 0,
// destinations at an odd offset with guard bytes on both sides, so that
// an overrun or a misplaced packet shows.
const (
	dstOff   = 4<<20 + 1024 + 3
	guardLen = 64
	guard    = 0xEE
)

func setGuards(m *MR, off, n int) {
	b := m.Bytes()
	for i := off - guardLen; i < off+n+guardLen; i++ {
		b[i] = guard
	}
}

func checkGuards(tb testing.TB, m *MR, off, n int) {
	tb.Helper()
	b := m.Bytes()
	for i := off - guardLen; i < off; i++ {
		if b[i] != guard {
			tb.Fatalf("byte %d before the destination was overwritten", off-i)
		}
	}
	for i := off + n; i < off+n+guardLen; i++ {
		if b[i] != guard {
			tb.Fatalf("byte %d after the destination was overwritten", i-off-n)
		}
	}
}

// splitSGL cuts [off, off+n) of m into up to k SGEs of uneven sizes.
func splitSGL(m *MR, off, n, k int) []qp.SGE {
	var sgl []qp.SGE
	for i := 0; i < k-1 && n > 1; i++ {
		part := n / (k - i + 1)
		if part == 0 {
			break
		}
		sgl = append(sgl, sge(m, off, part))
		off += part
		n -= part
	}
	return append(sgl, sge(m, off, n))
}

var matrixSizes = []int{0, 1, 255, 256, 257, 4095, 4096, 4097, 65536, 1<<20 + 13, 4 << 20}

// TestOpcodeMatrix moves every opcode, at message sizes from 0 B to
// 4 MiB, over every path MTU, at 0%, 1% and 5% loss with reordering and
// duplication in both directions, and checks every byte, every completion
// and every atomic result.
func TestOpcodeMatrix(t *testing.T) {
	for _, name := range recovery.Names() {
		for mtu := qp.MTU256; mtu <= qp.MTU4096; mtu++ {
			for _, loss := range []float64{0, 0.01, 0.05} {
				t.Run(fmt.Sprintf("%s/mtu%v/loss%v", name, mtu, loss), func(t *testing.T) {
					t.Parallel()
					opcodeMatrix(t, name, mtu, loss)
				})
			}
		}
	}
}

func opcodeMatrix(t *testing.T, scheme string, mtu qp.MTU, loss float64) {
	p := newTestPair(t, SimConfig{Seed: uint64(mtu)*100 + uint64(loss*1000), AtoB: lossyLink(loss), BtoA: lossyLink(loss), SchemeA: scheme, SchemeB: scheme},
		ConnParams{MTU: mtu, PSNA: 0xFFFF00, PSNB: 0x123456, Timeout: 8}) // 1 ms ACK timeout; PSNs wrap early
	id := uint64(0)
	for _, size := range matrixSizes {
		if size > 1<<20 && mtu == qp.MTU256 && loss > 0.02 && testing.Short() {
			continue
		}
		id++
		p.checkSend(id, size, false)
		p.checkWrite(id, size, false)
		p.checkRead(id, size)
		if size <= 65536 {
			p.checkSend(id, size, true)
			p.checkWrite(id, size, true)
		}
	}
	p.checkAtomics()
	p.checkMixedBatch()
	p.settle()
	if a := p.sim.A.Counters(); loss > 0 && a.Retransmits == 0 {
		t.Errorf("lossy run retransmitted nothing: %+v", a)
	}
}

func (p *testPair) checkSend(id uint64, size int, imm bool) {
	src := p.mrA.Bytes()[:size]
	fillRandom(src, id)
	setGuards(p.mrB, dstOff, size)
	p.postRecv(recvWR(id, splitSGL(p.mrB, dstOff, size, 2)...))
	op, rop := qp.WRSend, qp.WCRecv
	if imm {
		op = qp.WRSendWithImm
	}
	wr := sendWR(id, op, splitSGL(p.mrA, 0, size, 3)...)
	wr.ImmData = uint32(id) * 7
	p.postSend(wr)
	wantWC(p.tb, p.waitWCs(p.sim.A, p.cqA, 1, waitLimit)[0], id, qp.WCSuccess, qp.WCSend)
	rc := p.waitWCs(p.sim.B, p.cqB, 1, waitLimit)[0]
	wantWC(p.tb, rc, id, qp.WCSuccess, rop)
	if rc.ByteLen != uint32(size) || (imm && (rc.Flags&qp.WCWithImm == 0 || rc.ImmData != uint32(id)*7)) || rc.SrcQP != p.qa.QPN() {
		p.tb.Fatalf("receive completion %+v for a %d-byte send (imm %v)", rc, size, imm)
	}
	mustEqual(p.tb, fmt.Sprintf("SEND %d B", size), p.mrB.Bytes()[dstOff:dstOff+size], src)
	checkGuards(p.tb, p.mrB, dstOff, size)
}

func (p *testPair) checkWrite(id uint64, size int, imm bool) {
	src := p.mrA.Bytes()[:size]
	fillRandom(src, id+1000)
	setGuards(p.mrB, dstOff, size)
	op := qp.WRRDMAWrite
	if imm {
		op = qp.WRRDMAWriteWithImm
		p.postRecv(recvWR(id))
	}
	wr := sendWR(id, op, splitSGL(p.mrA, 0, size, 2)...)
	wr.RemoteAddr, wr.RKey, wr.ImmData = p.mrB.Addr+dstOff, p.mrB.RKey, 0xC0FFEE
	p.postSend(wr)
	wantWC(p.tb, p.waitWCs(p.sim.A, p.cqA, 1, waitLimit)[0], id, qp.WCSuccess, qp.WCRDMAWrite)
	if imm {
		rc := p.waitWCs(p.sim.B, p.cqB, 1, waitLimit)[0]
		wantWC(p.tb, rc, id, qp.WCSuccess, qp.WCRecvRDMAWithImm)
		if rc.ImmData != 0xC0FFEE || rc.ByteLen != uint32(size) {
			p.tb.Fatalf("write-with-immediate completion %+v", rc)
		}
	}
	mustEqual(p.tb, fmt.Sprintf("WRITE %d B", size), p.mrB.Bytes()[dstOff:dstOff+size], src)
	checkGuards(p.tb, p.mrB, dstOff, size)
}

func (p *testPair) checkRead(id uint64, size int) {
	src := p.mrB.Bytes()[:size]
	fillRandom(src, id+2000)
	setGuards(p.mrA, dstOff, size)
	wr := sendWR(id, qp.WRRDMARead, splitSGL(p.mrA, dstOff, size, 3)...)
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	wc := p.waitWCs(p.sim.A, p.cqA, 1, waitLimit)[0]
	wantWC(p.tb, wc, id, qp.WCSuccess, qp.WCRDMARead)
	if wc.ByteLen != uint32(size) {
		p.tb.Fatalf("READ byte_len %d, want %d", wc.ByteLen, size)
	}
	mustEqual(p.tb, fmt.Sprintf("READ %d B", size), p.mrA.Bytes()[dstOff:dstOff+size], src)
	checkGuards(p.tb, p.mrA, dstOff, size)
}

// checkAtomics runs a chain of fetch-and-adds and compare-and-swaps whose
// results are only right if each one executed exactly once.
func (p *testPair) checkAtomics() {
	const target = 8 << 20 // 8-byte aligned offset in B's region
	mem := p.mrB.Bytes()[target : target+8]
	binary.LittleEndian.PutUint64(mem, 1000)
	want := uint64(1000)
	for i := uint64(1); i <= 50; i++ {
		result := p.mrA.Bytes()[dstOff : dstOff+8]
		wr := sendWR(i, qp.WRAtomicFetchAndAdd, sge(p.mrA, dstOff, 8))
		wr.RemoteAddr, wr.RKey, wr.CompareAdd = p.mrB.Addr+target, p.mrB.RKey, i
		if i%5 == 0 { // swap only when the compare value is right
			wr.Opcode, wr.CompareAdd, wr.Swap = qp.WRAtomicCmpAndSwp, want, want*3
			if i%10 == 0 {
				wr.CompareAdd = want + 1 // wrong: must not swap
			}
		}
		p.postSend(wr)
		wc := p.waitWCs(p.sim.A, p.cqA, 1, waitLimit)[0]
		if wc.Status != qp.WCSuccess {
			p.tb.Fatalf("atomic %d: %+v", i, wc)
		}
		if got := binary.LittleEndian.Uint64(result); got != want {
			p.tb.Fatalf("atomic %d returned %d, want %d", i, got, want)
		}
		switch {
		case wr.Opcode == qp.WRAtomicFetchAndAdd:
			want += i
		case wr.CompareAdd == want:
			want *= 3
		}
		if got := binary.LittleEndian.Uint64(mem); got != want {
			p.tb.Fatalf("after atomic %d memory holds %d, want %d (executed twice?)", i, got, want)
		}
	}
}

// checkMixedBatch posts one of each operation at once and checks that the
// completions come back in posting order.
func (p *testPair) checkMixedBatch() {
	const n = 3000
	fillRandom(p.mrA.Bytes()[:4*n], 77)
	fillRandom(p.mrB.Bytes()[8*n:9*n], 78)
	p.postRecv(recvWR(900, sge(p.mrB, dstOff, n)), recvWR(901), recvWR(902, sge(p.mrB, dstOff+n, n)))
	w := func(id uint64, op qp.WROpcode, s qp.SGE, raddr uint64) qp.SendWR {
		wr := sendWR(id, op, s)
		wr.RemoteAddr, wr.RKey = raddr, p.mrB.RKey
		return wr
	}
	wrs := []qp.SendWR{
		w(1, qp.WRSend, sge(p.mrA, 0, n), 0),
		w(2, qp.WRRDMAWrite, sge(p.mrA, n, n), p.mrB.Addr+dstOff+2*n),
		w(3, qp.WRRDMARead, sge(p.mrA, dstOff, n), p.mrB.Addr+8*n),
		w(4, qp.WRAtomicFetchAndAdd, sge(p.mrA, dstOff+n, 8), p.mrB.Addr+8<<20+64),
		w(5, qp.WRRDMAWriteWithImm, sge(p.mrA, 2*n, n), p.mrB.Addr+dstOff+3*n),
		w(6, qp.WRRDMARead, sge(p.mrA, dstOff+2*n, n), p.mrB.Addr+8*n),
		w(7, qp.WRSendWithImm, sge(p.mrA, 3*n, n), 0),
	}
	wrs[4].Flags = 0 // unsignaled: no completion unless it fails
	p.postSend(wrs...)
	got := p.waitWCs(p.sim.A, p.cqA, 6, waitLimit)
	wantIDs := []uint64{1, 2, 3, 4, 6, 7}
	for i, wc := range got {
		if wc.WRID != wantIDs[i] || wc.Status != qp.WCSuccess {
			p.tb.Fatalf("completion %d is %+v, want wr_id %d SUCCESS (in posting order)", i, wc, wantIDs[i])
		}
	}
	rc := p.waitWCs(p.sim.B, p.cqB, 3, waitLimit)
	if rc[0].WRID != 900 || rc[1].Opcode != qp.WCRecvRDMAWithImm || rc[1].WRID != 901 || rc[2].WRID != 902 || rc[2].Flags&qp.WCWithImm == 0 {
		p.tb.Fatalf("receive completions %+v", rc)
	}
	b := p.mrB.Bytes()
	mustEqual(p.tb, "batch SEND", b[dstOff:dstOff+n], p.mrA.Bytes()[:n])
	mustEqual(p.tb, "batch WRITE", b[dstOff+2*n:dstOff+3*n], p.mrA.Bytes()[n:2*n])
	mustEqual(p.tb, "batch WRITE_WITH_IMM", b[dstOff+3*n:dstOff+4*n], p.mrA.Bytes()[2*n:3*n])
	mustEqual(p.tb, "batch SEND_WITH_IMM", b[dstOff+n:dstOff+2*n], p.mrA.Bytes()[3*n:4*n])
	mustEqual(p.tb, "batch READ", p.mrA.Bytes()[dstOff:dstOff+n], b[8*n:9*n])
	mustEqual(p.tb, "batch READ 2", p.mrA.Bytes()[dstOff+2*n:dstOff+3*n], b[8*n:9*n])
}
