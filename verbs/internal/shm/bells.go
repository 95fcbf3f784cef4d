package shm

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The doorbell file (protocol version 2): one per client connection, a
// bit per QP of the connection. After publishing work in a QP's rings the
// client sets the QP's bit; the daemon's pump takes the set bits (an
// atomic swap to zero) and looks only at those QPs' rings. So a pump
// costs what was posted, not the number of QPs: with thousands of QPs,
// reading every ring's producer index (a cache line each, written by
// another process) on every round was most of the daemon's time. It is
// the shared-memory form of a hardware NIC's per-QP doorbell register.
//
// Two levels, so that an idle connection costs the pump a few loads: bit
// j of summary word k says that word 64k+j of the bitmap may have bits.
//
//	0x000  u32 magic "SNDB" (0x42444e53)
//	0x004  u32 version
//	0x008  u32 slots               BellSlots
//	0x040  BellSlots/4096 x u64    summary (its own cache lines)
//	0x100  BellSlots/64 x u64      bitmap: bit i%64 of word i/64 is slot i
//
// Ordering: the client publishes the ring index, then sets the bitmap
// bit, then the summary bit (sequentially consistent atomics); the daemon
// swaps a summary word to zero, then each word it names, then reads the
// rings. A bit set after the daemon's swap stays set for its next pump,
// so no publication is missed; one the daemon takes early (the bitmap
// bit before the summary bit is set) only costs a later empty look. The
// client then reads need_wakeup and rings the eventfd if the daemon
// sleeps, as before: the bit is set before that read, as the ring index
// used to be.
//
// The bits carry no trust: a client that sets bits of QPs it never posted
// to makes the daemon look at its own QPs' rings, which it would anyway.
const (
	MagicBells = 0x42444e53
	// BellSlots is the number of QPs a connection may have at once.
	BellSlots = 1 << 16

	offBellSlots   = 0x08
	offBellSummary = 0x40
	offBellWords   = 0x100
	bellWords      = BellSlots / 64
	bellSummary    = bellWords / 64
)

// BellFileLen is the doorbell file's size.
var BellFileLen = RoundPage(offBellWords + bellWords*8)

// Bells is a mapped doorbell file.
type Bells struct {
	summary []atomic.Uint64
	words   []atomic.Uint64
}

// InitBells writes the header of a fresh doorbell file (daemon).
func InitBells(mem []byte) {
	le := binary.LittleEndian
	le.PutUint32(mem[offMagic:], MagicBells)
	le.PutUint32(mem[offVersion:], Version)
	le.PutUint32(mem[offBellSlots:], BellSlots)
}

// CheckBells verifies a mapped doorbell file (client).
func CheckBells(mem []byte) error {
	if len(mem) < BellFileLen {
		return fmt.Errorf("shm: doorbell file has %d bytes, need %d", len(mem), BellFileLen)
	}
	return checkHeader(mem, MagicBells, []headerWord{{offBellSlots, BellSlots}})
}

// MapBells is the view of a doorbell file of BellFileLen bytes.
func MapBells(mem []byte) Bells {
	_ = mem[BellFileLen-1]
	return Bells{
		summary: unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[offBellSummary])), bellSummary),
		words:   unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[offBellWords])), bellWords),
	}
}

// Valid reports whether b is mapped.
func (b Bells) Valid() bool { return b.words != nil }

// Ring sets slot's bit (client, after publishing the QP's ring index).
// Slots past BellSlots are ignored.
func (b Bells) Ring(slot uint32) {
	if slot >= BellSlots {
		return
	}
	w := slot / 64
	b.words[w].Or(1 << (slot % 64))
	b.summary[w/64].Or(1 << (w % 64))
}

// Take clears and returns the set bits of summary word k (daemon): bit j
// names bitmap word 64k+j. k < Summaries.
func (b Bells) Take(k int) uint64 {
	if b.summary[k].Load() == 0 {
		return 0 // a load of a shared line is cheaper than a swap
	}
	return b.summary[k].Swap(0)
}

// TakeWord clears and returns bitmap word w (daemon): bit i names slot
// 64w+i.
func (b Bells) TakeWord(w int) uint64 { return b.words[w].Swap(0) }

// Summaries is the number of summary words.
const Summaries = bellSummary

// NextBit returns the lowest set bit's index and x without it; x must
// not be zero.
func NextBit(x uint64) (int, uint64) { return bits.TrailingZeros64(x), x & (x - 1) }
