package dataplane

import (
	"github.com/softnic/softnic/qp"
)

// The off-chip reorder buffer of schemes that keep out-of-order packets
// away from application memory until the hole before them fills (MELO
// §3.2.2, recovery.Caps.BuffersOutOfOrder). MELO gives each connection a BDP
// of host memory indexed by PSN; softnic keeps one engine-wide pool of packet
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

func (b *reorderBuffer) release(s int32) {
	b.free = append(b.free, s)
	b.inUse--
}
