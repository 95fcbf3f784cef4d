package qp

import "time"

// The on-chip context cache. A real RNIC keeps QP contexts in a few MB of
// SRAM and the rest in host memory; a packet for a QP whose context is not
// on chip stalls the pipeline while the NIC fetches it over PCIe (StaR §2,
// Fig. 1: past ~300 QPs the message rate collapses). Cache models exactly
// that: a byte budget, per-entry sizes (a base context plus whatever the
// loss-recovery scheme keeps per QP), shared pools charged once, LRU
// replacement, write-back of dirty entries on eviction, and the stall each
// miss costs.
//
// Replacement is LRU. It is what the papers' measurements look like: a
// working set that cycles through more QPs than fit (the StaR stress test)
// misses on every access, so the curve has a sharp knee at capacity rather
// than a gentle slope. A hardware cache would use a cheaper approximation
// (CLOCK, pseudo-LRU) with the same behaviour on that access pattern.

// DefaultQPContextBytes is the base on-chip size of one QP context: 256 B,
// a ConnectX-3 QPC.
const DefaultQPContextBytes = 256

// DefaultCacheBudget is 300 base contexts, the capacity at which StaR's
// testbed RNIC (Fig. 1) and its simulation (§4) collapse.
const DefaultCacheBudget = 300 * DefaultQPContextBytes

// DefaultFetchPenalty is one PCIe read of a context from host memory
// (StaR §4: 1 µs).
const DefaultFetchPenalty = time.Microsecond

// CacheEntry is what a QP embeds to take part in the cache.
type CacheEntry struct {
	prev, next *CacheEntry
	resident   bool
	dirty      bool
	bytes      int // on-chip size when resident
	srBytes    int // of which loss-recovery state
	// Spill and Fill move the context between chip and host memory: Spill
	// is called on eviction of a dirty entry (write-back), Fill on a miss.
	Spill, Fill func()
	// Evicted is called after every eviction (dirty or not): a scheme
	// returns its shared-pool resources here (MELO §3.2.5).
	Evicted func()
	// HostOnly marks a context that never comes on chip (StaR's server
	// QPs keep their state in host software): Access costs nothing and
	// counts nothing.
	HostOnly bool
}

// Resident reports whether the entry is on chip.
func (e *CacheEntry) Resident() bool { return e.resident }

// CacheStats are the cache's counters.
type CacheStats struct {
	Hits, Misses, Evictions, WriteBacks uint64
	StallTime                           time.Duration
	Resident, PeakResident              int // QPs on chip
	ResidentBytes, PeakResidentBytes    int // bytes of contexts on chip (shared pools excluded)
	ResidentSRBytes, PeakSRBytes        int // of which loss-recovery per-QP state
	SharedBytes                         int // shared pools, charged once
	Budget                              int // 0: unlimited
}

// Cache is a byte-budgeted LRU of CacheEntries.
type Cache struct {
	budget  int // bytes for contexts: the SRAM budget less the shared pools; <0 unlimited
	penalty time.Duration
	lru     CacheEntry // sentinel: lru.next is the most recently used
	stats   CacheStats
}

// NewCache returns a cache of budget bytes of which shared are taken by
// shared pools. budget 0 means unlimited (every context fits).
func NewCache(budget, shared int, penalty time.Duration) *Cache {
	c := &Cache{budget: budget - shared, penalty: penalty}
	if budget == 0 {
		c.budget = -1
	}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.stats.SharedBytes, c.stats.Budget = shared, budget
	return c
}

// AddShared charges another shared pool (a second scheme in use) to the
// budget, evicting contexts if they no longer fit.
func (c *Cache) AddShared(bytes int) {
	if bytes == 0 {
		return
	}
	c.stats.SharedBytes += bytes
	if c.budget >= 0 {
		c.budget -= bytes
		c.makeRoom(nil)
	}
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats { return c.stats }

// Penalty is the stall of one miss.
func (c *Cache) Penalty() time.Duration { return c.penalty }

// SetSize changes an entry's size (its scheme's per-QP state grew or
// shrank); a resident entry may push others out.
func (c *Cache) SetSize(e *CacheEntry, bytes, srBytes int) {
	if e.resident {
		c.stats.ResidentBytes += bytes - e.bytes
		c.stats.ResidentSRBytes += srBytes - e.srBytes
	}
	e.bytes, e.srBytes = bytes, srBytes
	if e.resident {
		c.makeRoom(e)
		c.peaks()
	}
}

// Access makes e resident and most recently used; write marks it dirty.
// It returns the stall this access costs: 0 on a hit, the fetch penalty
// on a miss.
func (c *Cache) Access(e *CacheEntry, write bool) time.Duration {
	if e.HostOnly {
		return 0
	}
	if e.resident {
		c.stats.Hits++
		c.unlink(e)
		c.pushFront(e)
		e.dirty = e.dirty || write
		return 0
	}
	c.stats.Misses++
	c.stats.StallTime += c.penalty
	if e.Fill != nil {
		e.Fill()
	}
	e.resident, e.dirty = true, write
	c.pushFront(e)
	c.stats.Resident++
	c.stats.ResidentBytes += e.bytes
	c.stats.ResidentSRBytes += e.srBytes
	c.makeRoom(e)
	c.peaks()
	return c.penalty
}

// Remove drops e (a destroyed QP) without write-back.
func (c *Cache) Remove(e *CacheEntry) {
	if e.resident {
		c.unlink(e)
		c.leave(e)
	}
}

// makeRoom evicts least recently used entries other than keep until the
// contexts fit the budget. An entry larger than the whole budget stays
// only until the next access of another entry.
func (c *Cache) makeRoom(keep *CacheEntry) {
	for c.budget >= 0 && c.stats.ResidentBytes > c.budget {
		victim := c.lru.prev
		if victim == keep {
			victim = keep.prev
		}
		if victim == &c.lru {
			return
		}
		c.evict(victim)
	}
}

func (c *Cache) evict(e *CacheEntry) {
	c.unlink(e)
	if e.dirty {
		c.stats.WriteBacks++
		if e.Spill != nil {
			e.Spill()
		}
	}
	c.stats.Evictions++
	c.leave(e)
	if e.Evicted != nil {
		e.Evicted()
	}
}

func (c *Cache) leave(e *CacheEntry) {
	e.resident, e.dirty = false, false
	c.stats.Resident--
	c.stats.ResidentBytes -= e.bytes
	c.stats.ResidentSRBytes -= e.srBytes
}

func (c *Cache) peaks() {
	c.stats.PeakResident = max(c.stats.PeakResident, c.stats.Resident)
	c.stats.PeakResidentBytes = max(c.stats.PeakResidentBytes, c.stats.ResidentBytes)
	c.stats.PeakSRBytes = max(c.stats.PeakSRBytes, c.stats.ResidentSRBytes)
}

func (c *Cache) pushFront(e *CacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *Cache) unlink(e *CacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}
