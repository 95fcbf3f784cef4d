package recovery

import (
	"math/rand/v2"
	"testing"

	"github.com/softnic/softnic/qp"
)

// The shared pools (pool.go) checked against a model: a chain is a list
// of blocks from its first PSN, each on chip, spilled to host memory or
// stranded there (hostOnly), and the pool's in-use count is the sum of
// the blocks the live chains hold on chip.

const (
	mOnChip = iota
	mSpilled
	mHostOnly
)

// chainModel is what a chain should hold.
type chainModel struct {
	c      chain
	first  qp.PSN
	blocks []uint16 // the bits, block by block from first
	state  int
}

// poolModel drives chains on one BlockPool and predicts every outcome.
type poolModel struct {
	t         *testing.T
	p         *BlockPool
	bb        int
	chains    []*chainModel
	inUse     int
	exhausted uint64
}

func (m *poolModel) free() int { return m.p.Stats().Slots - m.inUse }

// access is what every chain operation does first: a spilled chain comes
// back on chip, or is stranded in host memory if the pool is short.
func (m *poolModel) access(cm *chainModel) {
	if cm.state != mSpilled {
		return
	}
	if len(cm.blocks) > m.free() {
		cm.state = mHostOnly
		m.exhausted++
		return
	}
	cm.state = mOnChip
	m.inUse += len(cm.blocks)
}

func (m *poolModel) pos(cm *chainModel, psn qp.PSN) (k, bit int, ok bool) {
	d := int(psn.Diff(cm.first))
	if d < 0 {
		return 0, 0, false
	}
	return d / m.bb, d % m.bb, true
}

func (m *poolModel) get(cm *chainModel, psn qp.PSN) bool {
	m.access(cm)
	k, bit, ok := m.pos(cm, psn)
	return ok && k < len(cm.blocks) && cm.blocks[k]>>bit&1 != 0
}

func (m *poolModel) set(cm *chainModel, psn qp.PSN) bool {
	m.access(cm)
	k, bit, ok := m.pos(cm, psn)
	if !ok {
		return false
	}
	switch cm.state {
	case mOnChip:
		if need := k + 1 - len(cm.blocks); need > 0 {
			if need > m.free() {
				m.exhausted++
				return false
			}
			cm.blocks = append(cm.blocks, make([]uint16, need)...)
			m.inUse += need
		}
	case mHostOnly:
		if k >= len(cm.blocks) {
			return false
		}
	}
	cm.blocks[k] |= 1 << bit
	return true
}

func (m *poolModel) clear(cm *chainModel, psn qp.PSN) {
	m.access(cm)
	if k, bit, ok := m.pos(cm, psn); ok && k < len(cm.blocks) {
		cm.blocks[k] &^= 1 << bit
	}
}

func (m *poolModel) inMiddle(cm *chainModel, psn qp.PSN) bool {
	m.access(cm)
	k, _, ok := m.pos(cm, psn)
	return ok && cm.state != mHostOnly && k > 0 && k < len(cm.blocks)-1
}

func (m *poolModel) advance(cm *chainModel, psn qp.PSN) {
	m.access(cm)
	for len(cm.blocks) > 0 && int(psn.Diff(cm.first)) >= m.bb {
		cm.blocks = cm.blocks[1:]
		cm.first = cm.first.Add(uint32(m.bb))
		if cm.state == mOnChip {
			m.inUse--
		}
	}
	if len(cm.blocks) == 0 {
		cm.state = mOnChip
	}
}

func (m *poolModel) spill(cm *chainModel) {
	if cm.state == mOnChip && len(cm.blocks) > 0 {
		cm.state = mSpilled
		m.inUse -= len(cm.blocks)
	}
}

func (m *poolModel) release(cm *chainModel) {
	if cm.state == mOnChip {
		m.inUse -= len(cm.blocks)
	}
	cm.blocks, cm.state = nil, mOnChip
}

func (m *poolModel) start(cm *chainModel, psn qp.PSN) {
	if len(cm.blocks) == 0 && cm.state == mOnChip {
		cm.first = psn
	}
}

// check compares the pool with the model: occupancy, counts, and (when
// deep) every chain's blocks, which no two chains share.
func (m *poolModel) check(step int, deep bool) {
	t := m.t
	st := m.p.Stats()
	if st.InUse != m.inUse || m.p.Free() != st.Slots-m.inUse || st.Allocs-st.Frees != uint64(st.InUse) ||
		st.Peak > st.Slots || st.Peak < st.InUse || st.Exhausted != m.exhausted {
		t.Fatalf("step %d: pool %+v free %d; model in use %d, exhausted %d", step, st, m.p.Free(), m.inUse, m.exhausted)
	}
	held := 0
	for _, cm := range m.chains {
		held += int(cm.c.n)
	}
	if held != st.InUse {
		t.Fatalf("step %d: the chains hold %d blocks, the pool says %d in use", step, held, st.InUse)
	}
	if !deep {
		return
	}
	seen := make(map[int32]bool, st.Slots)
	for i, cm := range m.chains {
		c := &cm.c
		onChip := 0
		if cm.state == mOnChip {
			onChip = len(cm.blocks)
		}
		if int(c.n) != onChip || c.spilled != (cm.state == mSpilled) || c.hostOnly != (cm.state == mHostOnly) {
			t.Fatalf("step %d chain %d: n %d spilled %v hostOnly %v; model %d blocks in state %d", step, i, c.n, c.spilled, c.hostOnly, len(cm.blocks), cm.state)
		}
		if c.first != cm.first {
			t.Fatalf("step %d chain %d: first %#x, model %#x", step, i, c.first, cm.first)
		}
		k := 0
		for b := c.head; k < int(c.n); b = m.p.next[b] {
			if b < 0 || seen[b] {
				t.Fatalf("step %d chain %d: block %d at %d is nil or shared", step, i, b, k)
			}
			seen[b] = true
			if m.p.words[b] != cm.blocks[k] {
				t.Fatalf("step %d chain %d block %d: %016b, model %016b", step, i, k, m.p.words[b], cm.blocks[k])
			}
			if k == int(c.n)-1 && (b != c.tail || m.p.next[b] != -1) {
				t.Fatalf("step %d chain %d: tail %d, last block %d (next %d)", step, i, c.tail, b, m.p.next[b])
			}
			k++
		}
		if cm.state != mOnChip {
			if len(c.host) != len(cm.blocks) {
				t.Fatalf("step %d chain %d: %d blocks in host memory, model %d", step, i, len(c.host), len(cm.blocks))
			}
			for k := range c.host {
				if c.host[k] != cm.blocks[k] {
					t.Fatalf("step %d chain %d host block %d: %016b, model %016b", step, i, k, c.host[k], cm.blocks[k])
				}
			}
		}
	}
	if len(seen) != st.InUse {
		t.Fatalf("step %d: chains hold %d blocks, pool says %d in use", step, len(seen), st.InUse)
	}
}

// checkAllFree: every block is free and each can be had exactly once.
func checkAllFree(t *testing.T, p *BlockPool) {
	t.Helper()
	st := p.Stats()
	if p.Free() != st.Slots || st.InUse != 0 || st.Allocs != st.Frees || st.Peak > st.Slots {
		t.Fatalf("pool at the end: %+v, free %d", st, p.Free())
	}
	got := map[int32]bool{}
	for range st.Slots {
		b, ok := p.alloc()
		if !ok || b < 0 || int(b) >= st.Slots || got[b] {
			t.Fatalf("alloc after the run: block %d ok %v (dup %v)", b, ok, got[b])
		}
		got[b] = true
	}
	if _, ok := p.alloc(); ok {
		t.Fatal("more blocks than slots")
	}
	for b := range got {
		p.free(b)
	}
}

// TestBlockPoolStress: a million random operations on chains sharing one
// pool, MELO's free-slot stack and FaSR's availability bitmap (with a
// slot count that is not a multiple of 64): chains grow at the tail,
// advance at the head, are spilled, filled (or stranded in host memory
// when the pool is short) and released. At every step the pool's in-use
// count is what the live chains hold; every bit read is the model's; in
// the end every block is free.
func TestBlockPoolStress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slots, bb int
		bitmap    bool
		chains    int
		maxBlocks int
	}{
		{"melo_stack", 48, 8, false, 12, 7},
		{"fasr_bitmap", 100, 16, true, 16, 9},
		{"odd_bitmap", 70, 3, true, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const steps = 1_000_000
			r := rand.New(rand.NewPCG(uint64(tc.slots), uint64(tc.bb)))
			m := &poolModel{t: t, p: NewBlockPool(tc.name, tc.slots, tc.bb, tc.bitmap), bb: tc.bb}
			for i := range tc.chains {
				cm := &chainModel{c: newChain()}
				// Half the chains live across the 2^24 PSN wrap.
				first := qp.PSN(r.Uint32N(1 << 24))
				if i%2 == 0 {
					first = qp.PSN(0xFFFFFF - r.Uint32N(40))
				}
				cm.c.start(first)
				m.start(cm, first)
				m.chains = append(m.chains, cm)
			}
			span := uint32(tc.bb * tc.maxBlocks)
			var sets, setFails, fills, strands, releases int
			for step := range steps {
				cm := m.chains[r.IntN(len(m.chains))]
				c := &cm.c
				wasSpilled := cm.state == mSpilled
				switch op := r.IntN(100); {
				case op < 40: // grow at the tail, or fill a hole, or fail
					psn := cm.first.Add(r.Uint32N(span))
					if r.IntN(20) == 0 {
						psn = cm.first.Add(qp.PSNMask - r.Uint32N(5)) // before the chain
					}
					want := m.set(cm, psn)
					if got := c.set(m.p, psn); got != want {
						t.Fatalf("step %d: set(%#x) = %v, model %v (chain first %#x, %d blocks, state %d, free %d)", step, psn, got, want, cm.first, len(cm.blocks), cm.state, m.free())
					}
					sets++
					if !want {
						setFails++
					}
				case op < 55:
					psn := cm.first.Add(r.Uint32N(span + 5))
					if want, got := m.get(cm, psn), c.get(m.p, psn); got != want {
						t.Fatalf("step %d: get(%#x) = %v, model %v", step, psn, got, want)
					}
				case op < 60:
					psn := cm.first.Add(r.Uint32N(span))
					m.clear(cm, psn)
					c.clear(m.p, psn)
				case op < 65:
					psn := cm.first.Add(r.Uint32N(span))
					if want, got := m.inMiddle(cm, psn), c.inMiddle(m.p, psn); got != want {
						t.Fatalf("step %d: inMiddle(%#x) = %v, model %v", step, psn, got, want)
					}
				case op < 80: // the expected PSN moves
					psn := cm.first.Add(r.Uint32N(uint32(tc.bb*(len(cm.blocks)+1)) + 1))
					m.advance(cm, psn)
					c.advance(m.p, psn)
				case op < 92: // context evicted
					m.spill(cm)
					c.spill(m.p)
				default: // episode over; the next one starts further on
					m.release(cm)
					c.release(m.p)
					next := cm.first.Add(r.Uint32N(3 * span))
					m.start(cm, next)
					c.start(next)
					releases++
				}
				if wasSpilled && cm.state != mSpilled {
					fills++
					if cm.state == mHostOnly {
						strands++
					}
				}
				m.check(step, step%64 == 0)
			}
			for _, cm := range m.chains {
				m.release(cm)
				cm.c.release(m.p)
			}
			m.check(steps, true)
			checkAllFree(t, m.p)
			st := m.p.Stats()
			t.Logf("%+v; %d sets (%d failed), %d fills (%d stranded), %d releases", st, sets, setFails, fills, strands, releases)
			if st.Exhausted == 0 || strands == 0 || fills == strands || st.Peak != st.Slots {
				t.Fatalf("the run did not exercise exhaustion and stranding: %+v, %d fills, %d stranded", st, fills, strands)
			}
		})
	}
}

// TestUnitPoolStress: a million random allocations and frees (double
// frees and frees of -1 included, which must change nothing) on a unit
// pool whose size is not a multiple of 64.
func TestUnitPoolStress(t *testing.T) {
	const n, steps = 70, 1_000_000
	u := NewUnitPool("units", n, 38)
	if st := u.Stats(); st.Slots != n || st.InUse != 0 {
		t.Fatalf("new pool %+v", st)
	}
	r := rand.New(rand.NewPCG(7, 70))
	held := make([]int, 0, n)
	isHeld := make([]bool, n)
	var exhausted uint64
	for step := range steps {
		switch op := r.IntN(100); {
		case op < 50:
			i, ok := u.Alloc()
			if len(held) == n {
				exhausted++
				if ok || i != -1 {
					t.Fatalf("step %d: alloc from a full pool gave %d", step, i)
				}
				break
			}
			if !ok || i < 0 || i >= n || isHeld[i] {
				t.Fatalf("step %d: alloc gave %d %v (held %v)", step, i, ok, ok && isHeld[i])
			}
			held, isHeld[i] = append(held, i), true
		case op < 95:
			if len(held) == 0 {
				break
			}
			k := r.IntN(len(held))
			i := held[k]
			held[k] = held[len(held)-1]
			held = held[:len(held)-1]
			isHeld[i] = false
			u.Free(i)
		case op < 98:
			u.Free(-1)
		default:
			i := r.IntN(n)
			if isHeld[i] {
				break
			}
			u.Free(i) // not held: a double free, ignored
		}
		st := u.Stats()
		if st.InUse != len(held) || st.Allocs-st.Frees != uint64(st.InUse) || st.Peak > n || st.Exhausted != exhausted {
			t.Fatalf("step %d: %+v, %d held, %d refusals", step, st, len(held), exhausted)
		}
	}
	for _, i := range held {
		u.Free(i)
	}
	if st := u.Stats(); st.InUse != 0 || st.Allocs != st.Frees || st.Peak != n || exhausted == 0 {
		t.Fatalf("at the end %+v (%d refusals)", st, exhausted)
	}
}

// TestBlockPoolExhaustion: past its capacity an allocation fails, counts
// Exhausted and changes nothing; a chain that needs more blocks than are
// free takes none of them.
func TestBlockPoolExhaustion(t *testing.T) {
	for _, bitmap := range []bool{false, true} {
		p := NewBlockPool("p", 5, 8, bitmap)
		var got []int32
		for range 5 {
			b, ok := p.alloc()
			if !ok {
				t.Fatalf("bitmap %v: alloc %d failed", bitmap, len(got))
			}
			got = append(got, b)
		}
		before := p.Stats()
		for range 3 {
			if b, ok := p.alloc(); ok || b != -1 {
				t.Fatalf("bitmap %v: alloc beyond capacity gave %d", bitmap, b)
			}
		}
		after := p.Stats()
		if after.Exhausted != before.Exhausted+3 || after.InUse != 5 || after.Allocs != before.Allocs || after.Frees != 0 || after.Peak != 5 || p.Free() != 0 {
			t.Fatalf("bitmap %v: refusals changed %+v into %+v", bitmap, before, after)
		}
		for _, b := range got[:3] {
			p.free(b)
		}
		// Three free; a chain needing four blocks gets none.
		c := newChain()
		c.start(100)
		if c.set(p, 100+4*8-1) {
			t.Fatalf("bitmap %v: a set needing 4 blocks of 3 free succeeded", bitmap)
		}
		if st := p.Stats(); c.n != 0 || st.InUse != 2 || st.Exhausted != after.Exhausted+1 || c.get(p, 100) {
			t.Fatalf("bitmap %v: the failed set took blocks: chain %d blocks, %+v", bitmap, c.n, st)
		}
		if !c.set(p, 100+3*8-1) || c.n != 3 || p.Free() != 0 {
			t.Fatalf("bitmap %v: a set needing exactly the free blocks failed (chain %d, free %d)", bitmap, c.n, p.Free())
		}
		c.release(p)
		for _, b := range got[3:] {
			p.free(b)
		}
		checkAllFree(t, p)
	}
}

// TestChainSemantics walks one chain of 8-bit blocks across the 2^24 PSN
// wrap: bits across block boundaries, the middle blocks, advance, spill
// and fill, and a fill that finds the pool short.
func TestChainSemantics(t *testing.T) {
	p := NewBlockPool("p", 5, 8, false)
	const first = qp.PSN(0xFFFFFC) // block 0: ..FC-03, block 1: 04-0B, block 2: 0C-13
	c := newChain()
	c.start(first)
	c.start(first + 1) // an empty chain: start moves it
	c.start(first)
	in := func(want int) {
		t.Helper()
		if st := p.Stats(); st.InUse != want || int(c.n) != want && !c.spilled && !c.hostOnly {
			t.Fatalf("%d blocks in use, chain %d (spilled %v, host only %v); want %d", st.InUse, c.n, c.spilled, c.hostOnly, want)
		}
	}
	bitsAre := func(want ...qp.PSN) {
		t.Helper()
		set := map[qp.PSN]bool{}
		for _, w := range want {
			set[w] = true
		}
		for d := uint32(0); d < 40; d++ {
			psn := first.Add(d).Add(qp.PSNMask - 7) // from 8 before first
			if got := c.get(p, psn); got != set[psn] {
				t.Fatalf("get(%#x) = %v, want %v", psn, got, set[psn])
			}
		}
	}
	for _, psn := range []qp.PSN{0xFFFFFC, 0xFFFFFF, 0x000003} {
		if !c.set(p, psn) {
			t.Fatalf("set(%#x) failed", psn)
		}
	}
	in(1)
	if c.start(0x100); c.first != first {
		t.Fatalf("start moved a chain in use to %#x", c.first)
	}
	if !c.set(p, 0x000004) || c.n != 2 { // the first bit of block 1
		t.Fatalf("set across the block boundary: %d blocks", c.n)
	}
	in(2)
	if c.set(p, first.Prev()) {
		t.Fatal("set before the chain succeeded")
	}
	if !c.set(p, 0x000012) || c.n != 3 { // block 2
		t.Fatalf("grow to block 2: %d blocks", c.n)
	}
	in(3)
	bitsAre(0xFFFFFC, 0xFFFFFF, 0x000003, 0x000004, 0x000012)
	c.clear(p, 0x000003)
	bitsAre(0xFFFFFC, 0xFFFFFF, 0x000004, 0x000012)
	c.set(p, 0x000003)
	// Only block 1 is in the middle: neither head nor tail.
	for psn, want := range map[qp.PSN]bool{0xFFFFFC: false, 0x000003: false, 0x000004: true, 0x00000B: true, 0x00000C: false, 0x000013: false, first.Prev(): false} {
		if got := c.inMiddle(p, psn); got != want {
			t.Fatalf("inMiddle(%#x) = %v, want %v", psn, got, want)
		}
	}
	// advance frees exactly the blocks wholly before the PSN.
	c.advance(p, 0x000003) // block 0 ends at 03: not wholly before
	in(3)
	c.advance(p, 0x000004)
	in(2)
	if c.first != 0x000004 || c.get(p, 0x000003) || !c.get(p, 0x000004) || !c.get(p, 0x000012) {
		t.Fatalf("after advancing one block: first %#x", c.first)
	}
	if c.inMiddle(p, 0x000004) || c.inMiddle(p, 0x000012) {
		t.Fatal("a two-block chain has a middle")
	}
	// Spill returns every block; fill brings the same bits back.
	c.set(p, 0x000008)
	c.spill(p)
	if !c.spilled || p.Stats().InUse != 0 || p.Free() != 5 {
		t.Fatalf("spill: spilled %v, %+v", c.spilled, p.Stats())
	}
	bitsAre(0x000004, 0x000008, 0x000012)
	in(2)
	if c.spilled || c.hostOnly {
		t.Fatal("fill left the chain off chip with the pool free")
	}
	// Grow to four blocks, spill, and let another chain take two of the
	// five: the fill finds three free for four and the bits stay in host
	// memory, readable, and the chain cannot grow past them.
	c.set(p, 0x00001C) // block 3 (1C-23)
	in(4)
	c.spill(p)
	other := newChain()
	other.start(500)
	if !other.set(p, 500+15) || p.Stats().InUse != 2 {
		t.Fatalf("other chain: %+v", p.Stats())
	}
	ex := p.Stats().Exhausted
	bitsAre(0x000004, 0x000008, 0x000012, 0x00001C)
	if !c.hostOnly || p.Stats().InUse != 2 || p.Stats().Exhausted != ex+1 {
		t.Fatalf("short fill: host only %v, %+v", c.hostOnly, p.Stats())
	}
	if c.inMiddle(p, 0x00000C) {
		t.Fatal("a chain in host memory reports middle blocks")
	}
	if !c.set(p, 0x000010) { // inside the host copy: a hole fills
		t.Fatal("set inside the host copy failed")
	}
	if c.set(p, 0x000024) || c.set(p, 0x000030) { // block 4 and beyond
		t.Fatal("a chain stranded in host memory grew")
	}
	if p.Stats().InUse != 2 {
		t.Fatalf("the stranded chain took blocks: %+v", p.Stats())
	}
	bitsAre(0x000004, 0x000008, 0x000010, 0x000012, 0x00001C)
	// Its episode goes on in host memory as the expected PSN moves.
	c.advance(p, 0x000014)
	if !c.hostOnly || c.first != 0x000014 || len(c.host) != 2 || !c.get(p, 0x00001C) || c.get(p, 0x000012) {
		t.Fatalf("advance in host memory: host only %v first %#x, %d host blocks", c.hostOnly, c.first, len(c.host))
	}
	c.advance(p, 0x000023)
	if !c.hostOnly || len(c.host) != 1 || !c.get(p, 0x00001C) {
		t.Fatalf("advance to the last host block: host only %v, %d host blocks", c.hostOnly, len(c.host))
	}
	c.advance(p, 0x000024)
	if c.hostOnly || !c.empty() || p.Stats().InUse != 2 {
		t.Fatalf("advance past the host copy: host only %v empty %v %+v", c.hostOnly, c.empty(), p.Stats())
	}
	c.start(0x000040)
	if !c.set(p, 0x000041) || p.Stats().InUse != 3 {
		t.Fatalf("a new episode after the host copy: %+v", p.Stats())
	}
	c.release(p)
	other.release(p)
	if !c.empty() || c.get(p, 0x000041) {
		t.Fatal("release left bits")
	}
	checkAllFree(t, p)
}
