package dataplane

import (
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// The off-chip reorder buffer of schemes that keep out-of-order packets
// away from application memory until the hole before them fills (MELO
// §3.2.2, recovery.Buffering). MELO gives each connection a BDP of host
// memory indexed by PSN; softnic keeps one engine-wide pool of packet
// slots in host memory and, per QP, a PSN-indexed table of slot numbers
// (allocated on the QP's first kept packet), so that thousands of QPs do
// not each reserve a BDP they rarely use. A slot holds the RoCE packet as
// it arrived (BTH to the end of the payload): when its turn comes the
// responder runs it exactly as if it had just arrived in order, with every
// check, so a memory region that went away meanwhile fails cleanly.

// DefaultReorderSlots is the engine's reorder buffer: 8192 packets, 34 MB
// at a 4 KiB MTU, allocated as it is used.
const DefaultReorderSlots = 8192

const reorderSlotBytes = 4096 + 64 // the largest RoCE packet softnic sends, without its ICRC

type reorderBuffer struct {
	slots [][]byte // nil until first used
	psn   []qp.PSN // the PSN each slot holds
	free  []int32  // free-slot stack
	inUse int
	peak  int
}

func newReorderBuffer(n int) *reorderBuffer {
	b := &reorderBuffer{slots: make([][]byte, n), psn: make([]qp.PSN, n), free: make([]int32, n)}
	for i := range b.free {
		b.free[i] = int32(n - 1 - i)
	}
	return b
}

func (b *reorderBuffer) full() bool { return len(b.free) == 0 }

// put stores pkt for q's PSN psn; false if the buffer is full.
func (e *Engine) robPut(q *QP, pkt *bth.Packet, psn qp.PSN) bool {
	if e.rob == nil {
		e.rob = newReorderBuffer(e.cfg.ReorderSlots)
	}
	b := e.rob
	if q.rob == nil {
		q.rob = make([]int32, len(q.stash))
	}
	i := uint32(psn) & uint32(len(q.rob)-1)
	if old := q.rob[i]; old != 0 { // a stale slot for an older PSN
		b.release(old - 1)
	}
	if b.full() {
		q.rob[i] = 0
		return false
	}
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	n := len(pkt.Buf) - bth.ICRCLen
	if b.slots[s] == nil {
		b.slots[s] = make([]byte, reorderSlotBytes)
	}
	b.slots[s] = b.slots[s][:n]
	copy(b.slots[s], pkt.Buf[:n])
	b.psn[s] = psn
	b.inUse++
	b.peak = max(b.peak, b.inUse)
	q.rob[i] = s + 1
	return true
}

// robTake returns the packet q keeps for psn, parsed, and frees its slot
// for reuse after the caller is done with it (the engine is single
// threaded: the slot is not reused before the next robPut).
func (e *Engine) robTake(q *QP, psn qp.PSN) (bth.Packet, bool) {
	if q.rob == nil || e.rob == nil {
		return bth.Packet{}, false
	}
	i := uint32(psn) & uint32(len(q.rob)-1)
	s := q.rob[i] - 1
	if s < 0 || e.rob.psn[s] != psn {
		return bth.Packet{}, false
	}
	q.rob[i] = 0
	e.rob.release(s)
	buf := e.rob.slots[s]
	// The stored packet has no ICRC; Parse wants room for one. The slot's
	// capacity has it (its contents are not checked: the ICRC was checked
	// on arrival).
	pkt, err := bth.Parse(buf[:len(buf)+bth.ICRCLen])
	if err != nil {
		return bth.Packet{}, false
	}
	return pkt, true
}

func (b *reorderBuffer) release(s int32) {
	b.free = append(b.free, s)
	b.inUse--
}

// robClear frees every slot q holds (reset, destroy).
func (e *Engine) robClear(q *QP) {
	if e.rob == nil {
		return
	}
	for i, s := range q.rob {
		if s != 0 {
			e.rob.release(s - 1)
			q.rob[i] = 0
		}
	}
}
