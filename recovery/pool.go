package recovery

import (
	"math/bits"

	"github.com/softnic/softnic/qp"
)

// Shared on-chip pools: the structures MELO (§3.2.3) and FaSR (§III-C) use
// so that the selective-repeat state of every connection costs a constant
// amount of SRAM instead of a bitmap per QP. A pool belongs to one NIC (one
// Scheme instance) and is shared by all its QPs; a connection borrows
// blocks while it has packets out of order and returns them as its
// expected PSN passes them, when its recovery ends, and when its context is
// evicted from the NIC's context cache (MELO §3.2.5).
//
// The pools are single-threaded like the rest of the engine: every call
// happens under the engine's lock.

// PoolStats describes one shared pool.
type PoolStats struct {
	Name      string // "melo_tx_bits", "fasr_units", ...
	Bytes     int    // on-chip size, management structures included
	Slots     int    // blocks or units
	InUse     int    // now
	Peak      int    // most at once
	Allocs    uint64 // successful allocations
	Frees     uint64
	Exhausted uint64 // allocations refused because the pool was empty
}

// BlockPool is a pool of fixed-size bit blocks (MELO's "bits pool" of 1-byte
// blocks, FaSR's level-2 pool of 16-bit bitmap blocks). Each block has a
// next pointer so that a connection's blocks form a singly linked list
// (next_ptr, MELO Fig. 3a). Free blocks are found either on MELO's
// free-slot stack (Fig. 3b: the entries from avail_ptr up are free;
// allocate at avail_ptr, return just below it) or, for FaSR, in an
// availability bitmap (one bit per block, first free bit wins).
type BlockPool struct {
	name      string
	blockBits int      // PSNs per block, at most 16
	words     []uint16 // one block's bits each
	next      []int32  // next_ptr; -1 ends a chain
	// MELO: the free-slot stack.
	stack []int32
	avail int // avail_ptr: stack[avail:] are free
	// FaSR: the availability bitmap, a set bit is a block in use.
	useBitmap bool
	used      []uint64
	stats     PoolStats
}

// NewBlockPool makes a pool of n blocks of blockBits bits (1..16).
// withBitmap selects FaSR's availability bitmap instead of MELO's stack.
func NewBlockPool(name string, n, blockBits int, withBitmap bool) *BlockPool {
	if n < 1 || n > 1<<20 || blockBits < 1 || blockBits > 16 {
		panic("recovery: bad block pool geometry")
	}
	p := &BlockPool{name: name, blockBits: blockBits, words: make([]uint16, n), next: make([]int32, n), useBitmap: withBitmap}
	if withBitmap {
		p.used = make([]uint64, (n+63)/64)
	} else {
		p.stack = make([]int32, n)
		for i := range p.stack {
			p.stack[i] = int32(i)
		}
	}
	p.stats = PoolStats{Name: name, Slots: n, Bytes: p.onChipBytes()}
	return p
}

// onChipBytes: the blocks, a next pointer per block wide enough to name
// any block, and the free-slot stack (an entry per block, MELO: "1Kb for
// the available array" for 128 one-byte blocks) or the availability
// bitmap (a bit per block).
func (p *BlockPool) onChipBytes() int {
	n := len(p.words)
	ptrBits := (max(bits.Len(uint(n-1)), 1) + 7) &^ 7 // whole bytes, as both papers count them
	b := n*p.blockBits + n*ptrBits
	if p.useBitmap {
		b += n
	} else {
		b += n * ptrBits
	}
	return (b + 7) / 8
}

// BlockBits is how many PSNs one block tracks.
func (p *BlockPool) BlockBits() int { return p.blockBits }

// Free is how many blocks are free now.
func (p *BlockPool) Free() int { return p.stats.Slots - p.stats.InUse }

// Stats returns the pool's occupancy and counts.
func (p *BlockPool) Stats() PoolStats { return p.stats }

func (p *BlockPool) alloc() (int32, bool) {
	var b int32
	if p.useBitmap {
		b = -1
		for i, w := range p.used {
			if w != ^uint64(0) {
				j := i*64 + bits.TrailingZeros64(^w)
				if j < len(p.words) {
					b = int32(j)
					p.used[i] |= 1 << (j % 64)
				}
				break
			}
		}
		if b < 0 {
			p.stats.Exhausted++
			return -1, false
		}
	} else {
		if p.avail == len(p.stack) {
			p.stats.Exhausted++
			return -1, false
		}
		b = p.stack[p.avail]
		p.avail++
	}
	p.words[b] = 0
	p.next[b] = -1
	p.stats.InUse++
	p.stats.Allocs++
	p.stats.Peak = max(p.stats.Peak, p.stats.InUse)
	return b, true
}

func (p *BlockPool) free(b int32) {
	if p.useBitmap {
		p.used[b/64] &^= 1 << (b % 64)
	} else {
		p.avail--
		p.stack[p.avail] = b
	}
	p.stats.InUse--
	p.stats.Frees++
}

// chain is one connection's bitmap: a linked list of pool blocks (start_ptr
// and end_ptr, MELO Fig. 3c; FaSR's head and tail pointers) whose bit 0 of
// the head block is PSN first. While the connection's context is evicted
// its bits live in host memory (spilled) and come back on the next access;
// a connection whose blocks cannot be had back then keeps using the host
// copy until its out-of-order episode ends (hostOnly): it never forgets a
// packet it has acknowledged selectively, and it cannot grow.
type chain struct {
	head, tail int32
	n          int32
	first      qp.PSN
	host       []uint16 // the spilled copy, block by block
	spilled    bool     // host holds the bits, to be put back on chip
	hostOnly   bool     // host holds the bits for good (pool was short)
}

func newChain() chain { return chain{head: -1, tail: -1} }

func (c *chain) empty() bool { return c.n == 0 && !c.spilled && !c.hostOnly }

// start makes an empty chain begin at psn.
func (c *chain) start(psn qp.PSN) {
	if c.empty() {
		c.first = psn
	}
}

// fill brings spilled bits back on chip, or strands them in host memory if
// the pool is short; it reports false in that case.
func (c *chain) fill(p *BlockPool) bool {
	if !c.spilled {
		return !c.hostOnly
	}
	c.spilled = false
	if len(c.host) > p.Free() {
		p.stats.Exhausted++
		c.hostOnly = true
		return false
	}
	for _, w := range c.host {
		b, _ := p.alloc()
		p.words[b] = w
		c.link(p, b)
	}
	c.host = c.host[:0]
	return true
}

func (c *chain) link(p *BlockPool, b int32) {
	if c.n == 0 {
		c.head = b
	} else {
		p.next[c.tail] = b
	}
	c.tail = b
	c.n++
}

// position returns the block index k of psn in the chain and its bit, ok
// false if psn is before the chain's first PSN.
func (c *chain) position(p *BlockPool, psn qp.PSN) (k, bit int, ok bool) {
	d := int(psn.Diff(c.first))
	if d < 0 {
		return 0, 0, false
	}
	return d / p.blockBits, d % p.blockBits, true
}

// block walks to the kth block: the head and the tail are at hand, a block
// in the middle costs a walk down the list (which MELO and FaSR avoid).
func (c *chain) block(p *BlockPool, k int) int32 {
	if k == int(c.n)-1 {
		return c.tail
	}
	b := c.head
	for ; k > 0; k-- {
		b = p.next[b]
	}
	return b
}

// word returns a pointer to the block holding psn's bit, or nil.
func (c *chain) word(p *BlockPool, psn qp.PSN) (*uint16, int) {
	c.fill(p)
	k, bit, ok := c.position(p, psn)
	switch {
	case !ok:
		return nil, 0
	case c.hostOnly:
		if k >= len(c.host) {
			return nil, 0
		}
		return &c.host[k], bit
	case k >= int(c.n):
		return nil, 0
	}
	return &p.words[c.block(p, k)], bit
}

// get reports psn's bit; false outside the chain.
func (c *chain) get(p *BlockPool, psn qp.PSN) bool {
	w, bit := c.word(p, psn)
	return w != nil && *w>>bit&1 != 0
}

// clear clears psn's bit if the chain holds it.
func (c *chain) clear(p *BlockPool, psn qp.PSN) {
	if w, bit := c.word(p, psn); w != nil {
		*w &^= 1 << bit
	}
}

// inMiddle reports whether psn falls in a block that is neither the head
// nor the tail of the chain: the access MELO §3.2.3 drops.
func (c *chain) inMiddle(p *BlockPool, psn qp.PSN) bool {
	c.fill(p)
	k, _, ok := c.position(p, psn)
	return ok && !c.hostOnly && k > 0 && k < int(c.n)-1
}

// set sets psn's bit, growing the chain at its tail as far as needed. It
// fails, changing nothing, if psn is before the chain or the pool cannot
// supply the blocks (or the bits are stranded in host memory).
func (c *chain) set(p *BlockPool, psn qp.PSN) bool {
	c.fill(p)
	k, _, ok := c.position(p, psn)
	if !ok {
		return false
	}
	if !c.hostOnly {
		if need := k + 1 - int(c.n); need > 0 {
			if need > p.Free() {
				p.stats.Exhausted++
				return false
			}
			for ; need > 0; need-- {
				b, _ := p.alloc()
				c.link(p, b)
			}
		}
	}
	w, bit := c.word(p, psn)
	if w == nil {
		return false
	}
	*w |= 1 << bit
	return true
}

// prepend grows a non-empty chain at its head, a whole block at a time,
// until psn is in it; it fails, changing nothing, if the pool cannot
// supply the blocks or the bits are in host memory. Only a sender needs it:
// under reordering the acknowledgement of a PSN before the first one it
// recorded in bits comes late (docs/recovery.md, "Reordering is not loss").
func (c *chain) prepend(p *BlockPool, psn qp.PSN) bool {
	if !c.fill(p) || c.n == 0 {
		return false
	}
	d := int(c.first.Diff(psn))
	if d <= 0 {
		return true
	}
	need := (d + p.blockBits - 1) / p.blockBits
	if need > p.Free() {
		p.stats.Exhausted++
		return false
	}
	for ; need > 0; need-- {
		b, _ := p.alloc()
		p.words[b] = 0
		p.next[b] = c.head
		c.head = b
		c.n++
		c.first = c.first.Add(uint32(-p.blockBits) & qp.PSNMask)
	}
	return true
}

// advance returns the head blocks that lie wholly before psn.
func (c *chain) advance(p *BlockPool, psn qp.PSN) {
	c.fill(p)
	for !c.empty() && int(psn.Diff(c.first)) >= p.blockBits {
		if c.hostOnly {
			c.host = c.host[1:]
			if len(c.host) == 0 {
				c.hostOnly = false
			}
		} else {
			b := c.head
			c.head = p.next[b]
			p.free(b)
			if c.n--; c.n == 0 {
				c.head, c.tail = -1, -1
			}
		}
		c.first = c.first.Add(uint32(p.blockBits))
	}
}

// release returns every block and forgets the bits.
func (c *chain) release(p *BlockPool) {
	c.returnBlocks(p)
	c.host, c.spilled, c.hostOnly = c.host[:0], false, false
}

func (c *chain) returnBlocks(p *BlockPool) {
	for b := c.head; c.n > 0; c.n-- {
		nb := p.next[b]
		p.free(b)
		b = nb
	}
	c.head, c.tail = -1, -1
}

// spill copies the chain to host memory and returns its blocks to the pool
// (its context is being evicted, MELO §3.2.5).
func (c *chain) spill(p *BlockPool) {
	if c.n == 0 {
		return
	}
	c.host = c.host[:0]
	for b := c.head; b >= 0; b = p.next[b] {
		c.host = append(c.host, p.words[b])
	}
	c.returnBlocks(p)
	c.spilled = true
}

// UnitPool is FaSR's level-1 pool (§III-C1): fixed-size SR state units
// handed to QPs in loss recovery, found through an availability bitmap.
type UnitPool struct {
	used  []uint64
	stats PoolStats
}

// NewUnitPool makes n units of unitBytes each.
func NewUnitPool(name string, n, unitBytes int) *UnitPool {
	if n < 1 || n > 1<<16 {
		panic("recovery: bad unit pool size")
	}
	return &UnitPool{used: make([]uint64, (n+63)/64), stats: PoolStats{Name: name, Slots: n, Bytes: n*unitBytes + (n+7)/8}}
}

// Alloc takes a free unit; ok false when none is left.
func (u *UnitPool) Alloc() (int, bool) {
	for i, w := range u.used {
		if w != ^uint64(0) {
			j := i*64 + bits.TrailingZeros64(^w)
			if j >= u.stats.Slots {
				break
			}
			u.used[i] |= 1 << (j % 64)
			u.stats.InUse++
			u.stats.Allocs++
			u.stats.Peak = max(u.stats.Peak, u.stats.InUse)
			return j, true
		}
	}
	u.stats.Exhausted++
	return -1, false
}

// Free returns unit i.
func (u *UnitPool) Free(i int) {
	if i < 0 || u.used[i/64]&(1<<(i%64)) == 0 {
		return
	}
	u.used[i/64] &^= 1 << (i % 64)
	u.stats.InUse--
	u.stats.Frees++
}

// Stats returns the pool's occupancy and counts.
func (u *UnitPool) Stats() PoolStats { return u.stats }

// The help of the counters of a scheme whose recoveries take blocks or
// units from shared pools and fall back to go-back-N when they find none
// (MELO §3.2.5, FaSR §III-D): each such scheme reports them under these
// names (Scheme.Counters).
const (
	poolFallbacksHelp = "Recoveries that fell back to go-back-N, the shared pools empty."
	poolDropsHelp     = "Packets dropped for want of pool blocks or units."
)
