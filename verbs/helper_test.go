package verbs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"time"
)

// The client processes of the daemon-mode tests. Each is this test
// binary, started by startHelper; it talks to its daemon only through
// verbs.Dial and to the other client only through files.

// Where each operation's data lives in the two 2 MiB buffers.
const (
	peerBuf   = 2 << 20
	offSend1  = 0         // SEND, 5000 bytes
	offSend2  = 64 << 10  // SEND_WITH_IMM, 7000 bytes
	offWrite  = 256 << 10 // RDMA_WRITE 100000 bytes, then RDMA_WRITE_WITH_IMM 30000
	offRead   = 768 << 10 // RDMA_READ source (B) and target (A), 120000 bytes
	offAtomic = 1 << 20   // B: the atomic target; A: the four results, 8 bytes each
	lenSend1  = 5000
	lenSend2  = 7000
	lenWrite  = 100000
	lenWImm   = 30000
	lenRead   = 120000
	seedA     = 1
	seedB     = 2
	immSend   = 0xabcd
	immWrite  = 0x77
	opTimeout = 30 * time.Second
)

func runHelper(role string) error {
	sock, dir := os.Getenv("SOFTNIC_SOCK"), os.Getenv("SOFTNIC_DIR")
	switch role {
	case "peer-a":
		return peerA(sock, dir)
	case "peer-b":
		return peerB(sock, dir)
	case "flood":
		return flood(sock, dir)
	case "chan-wait":
		return chanWait(sock, dir)
	case "cm-peer":
		return cmPeer(sock, dir)
	}
	return fmt.Errorf("unknown role %q", role)
}

// peerA is the requester: it runs every opcode against peer B.
func peerA(sock, dir string) error {
	ctx, err := Dial(sock)
	if err != nil {
		return err
	}
	defer ctx.Close()
	s, err := newSide(ctx, peerBuf, 16, 0x123456)
	if err != nil {
		return err
	}
	patA, patB := pattern(seedA, peerBuf), pattern(seedB, peerBuf)
	copy(s.buf, patA)
	clear(s.buf[offRead : offRead+lenRead])
	clear(s.buf[offAtomic : offAtomic+32])
	ep, err := s.endpoint()
	if err != nil {
		return err
	}
	if err := publish(dir, "a.json", ep); err != nil {
		return err
	}
	var peer endpoint
	if err := await(dir, "b.json", &peer, opTimeout); err != nil {
		return err
	}
	if err := s.connect(peer); err != nil {
		return err
	}
	atomicWR := func(id uint64, op WROpcode, res int, cmpAdd, swap uint64) SendWR {
		return SendWR{WRID: id, Opcode: op, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offAtomic+res, 8)},
			RemoteAddr: peer.Addr + offAtomic, RKey: peer.RKey, CompareAdd: cmpAdd, Swap: swap}
	}
	wrs := []SendWR{
		{WRID: 1, Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offSend1, lenSend1)}},
		{WRID: 2, Opcode: WRSendWithImm, Flags: SendSignaled, ImmData: immSend, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offSend2, lenSend2)}},
		{WRID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offWrite, lenWrite)},
			RemoteAddr: peer.Addr + offWrite, RKey: peer.RKey},
		{WRID: 4, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, ImmData: immWrite, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offWrite+lenWrite, lenWImm)},
			RemoteAddr: peer.Addr + offWrite + lenWrite, RKey: peer.RKey},
		{WRID: 5, Opcode: WRRDMARead, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offRead, lenRead)},
			RemoteAddr: peer.Addr + offRead, RKey: peer.RKey},
		atomicWR(6, WRAtomicCmpAndSwp, 0, 100, 200), // 100 -> 200
		atomicWR(7, WRAtomicFetchAndAdd, 8, 5, 0),   // 200 -> 205
		atomicWR(8, WRAtomicCmpAndSwp, 16, 999, 1),  // no match: stays 205
		{WRID: 9, Opcode: WRRDMARead, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offAtomic+24, 8)},
			RemoteAddr: peer.Addr + offAtomic, RKey: peer.RKey},
	}
	if err := s.qp.PostSend(wrs...); err != nil {
		return err
	}
	for i := range wrs {
		wc, err := waitWC(s.cq, opTimeout)
		if err != nil {
			return fmt.Errorf("completion %d of %d: %w (stats %v)", i+1, len(wrs), err, stats(ctx))
		}
		if wc.WRID != wrs[i].WRID || wc.Status != WCSuccess {
			return fmt.Errorf("completion %d: %+v (%v), want WRID %d SUCCESS", i+1, wc, wc.Status, wrs[i].WRID)
		}
	}
	if !bytes.Equal(s.buf[offRead:offRead+lenRead], patB[offRead:offRead+lenRead]) {
		return fmt.Errorf("RDMA_READ data differs")
	}
	le := binary.LittleEndian
	for i, want := range []uint64{100, 200, 205, 205} {
		if got := le.Uint64(s.buf[offAtomic+8*i:]); got != want {
			return fmt.Errorf("atomic result %d is %d, want %d", i, got, want)
		}
	}
	return publish(dir, "a.done", true)
}

// peerB is the responder: it posts the receives, checks what arrived, and
// stays until A is done with its memory.
func peerB(sock, dir string) error {
	ctx, err := Dial(sock)
	if err != nil {
		return err
	}
	defer ctx.Close()
	s, err := newSide(ctx, peerBuf, 16, 0xfedcb)
	if err != nil {
		return err
	}
	patA, patB := pattern(seedA, peerBuf), pattern(seedB, peerBuf)
	copy(s.buf, patB)
	binary.LittleEndian.PutUint64(s.buf[offAtomic:], 100)
	recvs := []RecvWR{
		{WRID: 101, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offSend1, 8192)}},
		{WRID: 102, NumSGE: 1, SGL: [8]SGE{s.mr.SGE(offSend2, 8192)}},
		{WRID: 103}, // consumed by RDMA_WRITE_WITH_IMM, which carries no data into it
	}
	if err := s.qp.Modify(&QPAttr{State: QPSInit, AccessFlags: allAccess, Port: 1}, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags); err != nil {
		return err
	}
	if err := s.qp.PostRecv(recvs...); err != nil {
		return err
	}
	ep, err := s.endpoint()
	if err != nil {
		return err
	}
	// B reaches RTR before it tells A its QPN, so that A's first packets
	// find a QP ready to receive them.
	var peer endpoint
	if err := await(dir, "a.json", &peer, opTimeout); err != nil {
		return err
	}
	if err := s.connectFromInit(peer); err != nil {
		return err
	}
	if err := publish(dir, "b.json", ep); err != nil {
		return err
	}
	want := []struct {
		id     uint64
		op     WCOpcode
		length uint32
		imm    uint32
	}{{101, WCRecv, lenSend1, 0}, {102, WCRecv, lenSend2, immSend}, {103, WCRecvRDMAWithImm, lenWImm, immWrite}}
	for i, w := range want {
		wc, err := waitWC(s.cq, opTimeout)
		if err != nil {
			return fmt.Errorf("receive %d: %w (stats %v)", i+1, err, stats(ctx))
		}
		if wc.Status != WCSuccess || wc.WRID != w.id || wc.Opcode != w.op || wc.ByteLen != w.length || wc.ImmData != w.imm {
			return fmt.Errorf("receive %d: %+v (%v), want WRID %d opcode %d length %d imm %#x", i+1, wc, wc.Status, w.id, w.op, w.length, w.imm)
		}
		if w.imm != 0 && wc.Flags&WCWithImm == 0 {
			return fmt.Errorf("receive %d: no IBV_WC_WITH_IMM flag", i+1)
		}
	}
	if !bytes.Equal(s.buf[offSend1:offSend1+lenSend1], patA[offSend1:offSend1+lenSend1]) {
		return fmt.Errorf("SEND data differs")
	}
	if !bytes.Equal(s.buf[offSend2:offSend2+lenSend2], patA[offSend2:offSend2+lenSend2]) {
		return fmt.Errorf("SEND_WITH_IMM data differs")
	}
	// RDMA_WRITE_WITH_IMM completed after the WRITE before it (RC order),
	// so both writes are in place.
	if !bytes.Equal(s.buf[offWrite:offWrite+lenWrite+lenWImm], patA[offWrite:offWrite+lenWrite+lenWImm]) {
		return fmt.Errorf("RDMA_WRITE data differs")
	}
	if err := await(dir, "a.done", nil, 2*opTimeout); err != nil {
		return err
	}
	// The atomics' target, seen from B's side of the shared memory.
	if got := binary.LittleEndian.Uint64(s.buf[offAtomic:]); got != 205 {
		return fmt.Errorf("atomic target is %d, want 205", got)
	}
	return nil
}

// connectFromInit is connect for a QP that is already in INIT.
func (s *side) connectFromInit(peer endpoint) error {
	rtr := QPAttr{State: QPSRTR, AV: AHAttr{DGID: peer.GID, DMAC: peer.MAC, HopLimit: 64}, PathMTU: MTU1024,
		DestQPN: peer.QPN, RQPSN: peer.PSN, MaxDestRdAtomic: 16, MinRNRTimer: 1}
	if err := s.qp.Modify(&rtr, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer); err != nil {
		return err
	}
	rts := QPAttr{State: QPSRTS, SQPSN: s.psn, Timeout: 12, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16}
	return s.qp.Modify(&rts, AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic)
}

// flood keeps 64 KiB RDMA WRITEs in flight to its peer until it is
// killed; it says "started" once data flows.
func flood(sock, dir string) error {
	ctx, err := Dial(sock)
	if err != nil {
		return err
	}
	const depth, size = 16, 64 << 10
	s, err := newSide(ctx, depth*size, depth, 0x777)
	if err != nil {
		return err
	}
	ep, err := s.endpoint()
	if err != nil {
		return err
	}
	if err := publish(dir, "flood.json", ep); err != nil {
		return err
	}
	var peer endpoint
	if err := await(dir, "target.json", &peer, opTimeout); err != nil {
		return err
	}
	if err := s.connect(peer); err != nil {
		return err
	}
	wr := SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, RKey: peer.RKey}
	for i := range depth {
		wr.WRID, wr.SGL[0], wr.RemoteAddr = uint64(i), s.mr.SGE(i*size, size), peer.Addr+uint64(i*size)
		if err := s.qp.PostSend(wr); err != nil {
			return err
		}
	}
	for done := 0; ; done++ {
		wc, err := waitWC(s.cq, opTimeout)
		if err != nil {
			return err
		}
		if wc.Status != WCSuccess {
			return fmt.Errorf("write %d: %v", wc.WRID, wc.Status)
		}
		if done == 32 {
			if err := publish(dir, "started", true); err != nil {
				return err
			}
		}
		i := int(wc.WRID % depth)
		wr.WRID, wr.SGL[0], wr.RemoteAddr = wc.WRID+depth, s.mr.SGE(i*size, size), peer.Addr+uint64(i*size)
		if err := s.qp.PostSend(wr); err != nil {
			return err
		}
	}
}

func stats(ctx *Context) map[string]uint64 {
	m := map[string]uint64{}
	cs, _ := ctx.Stats()
	for _, c := range cs {
		if c.Value != 0 {
			m[c.Name] = c.Value
		}
	}
	return m
}

// chanWait arms a CQ on a completion channel and blocks in GetEvent for
// ever (the test kills it there).
func chanWait(sock, dir string) error {
	ctx, err := Dial(sock)
	if err != nil {
		return err
	}
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		return err
	}
	cq, err := ctx.CreateCQWithChannel(16, ch)
	if err != nil {
		return err
	}
	if err := cq.ReqNotify(false); err != nil {
		return err
	}
	if err := publish(dir, "chan-ready"+os.Getenv("SOFTNIC_ROUND"), nil); err != nil {
		return err
	}
	_, err = ch.GetEvent()
	return fmt.Errorf("GetEvent returned: %v", err)
}
