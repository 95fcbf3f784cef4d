package qp

import (
	"testing"
	"time"
)

type testEntry struct {
	CacheEntry
	id                    int
	spills, fills, evicts int
}

func newEntries(n, bytes int) []*testEntry {
	es := make([]*testEntry, n)
	for i := range es {
		e := &testEntry{id: i}
		e.bytes = bytes
		e.Spill = func() { e.spills++ }
		e.Fill = func() { e.fills++ }
		e.Evicted = func() { e.evicts++ }
		es[i] = e
	}
	return es
}

func residentIDs(es []*testEntry) []int {
	var ids []int
	for _, e := range es {
		if e.Resident() {
			ids = append(ids, e.id)
		}
	}
	return ids
}

// TestCacheBudgetAndLRU: three 300-byte contexts fit a 1000-byte budget
// with 100 bytes of shared pools; the fourth evicts the least recently
// used one, and the byte count never exceeds the budget.
func TestCacheBudgetAndLRU(t *testing.T) {
	c := NewCache(1000, 100, time.Microsecond)
	es := newEntries(5, 300)
	for _, e := range es[:3] {
		if stall := c.Access(&e.CacheEntry, false); stall != time.Microsecond {
			t.Fatalf("first access stalled %v", stall)
		}
	}
	if got := residentIDs(es); len(got) != 3 {
		t.Fatalf("resident %v", got)
	}
	c.Access(&es[0].CacheEntry, false) // 0 is now most recent; 1 is LRU
	c.Access(&es[3].CacheEntry, false)
	if got := residentIDs(es); len(got) != 3 || es[1].Resident() {
		t.Fatalf("resident %v, want 0 2 3 (1 evicted as least recently used)", got)
	}
	if stall := c.Access(&es[0].CacheEntry, true); stall != 0 {
		t.Fatalf("hit stalled %v", stall)
	}
	s := c.Stats()
	if s.Hits != 2 || s.Misses != 4 || s.Evictions != 1 || s.ResidentBytes != 900 || s.Resident != 3 ||
		s.StallTime != 4*time.Microsecond || s.SharedBytes != 100 || s.PeakResident != 3 {
		t.Fatalf("stats %+v", s)
	}
	// Sweep many entries through: never over budget.
	many := newEntries(50, 250)
	for round := 0; round < 3; round++ {
		for _, e := range many {
			c.Access(&e.CacheEntry, round%2 == 0)
			if st := c.Stats(); st.ResidentBytes > 900 {
				t.Fatalf("%d bytes resident with a 900-byte budget", st.ResidentBytes)
			}
		}
	}
}

// TestCacheWriteBack: only dirty entries are spilled on eviction, every
// eviction is reported, and a miss fills.
func TestCacheWriteBack(t *testing.T) {
	c := NewCache(600, 0, 0)
	es := newEntries(3, 300)
	c.Access(&es[0].CacheEntry, true)  // dirty
	c.Access(&es[1].CacheEntry, false) // clean
	c.Access(&es[2].CacheEntry, false) // evicts 0: written back
	c.Access(&es[0].CacheEntry, false) // evicts 1: clean, no write-back
	if es[0].spills != 1 || es[1].spills != 0 || es[0].evicts != 1 || es[1].evicts != 1 || es[0].fills != 2 {
		t.Fatalf("spills %d/%d, evicts %d/%d, fills %d", es[0].spills, es[1].spills, es[0].evicts, es[1].evicts, es[0].fills)
	}
	if s := c.Stats(); s.WriteBacks != 1 || s.Evictions != 2 {
		t.Fatalf("stats %+v", s)
	}
	c.Remove(&es[0].CacheEntry)
	if s := c.Stats(); s.Resident != 1 || s.ResidentBytes != 300 || es[0].spills != 1 {
		t.Fatalf("after remove %+v", s)
	}
}

// TestCacheResize: a scheme's per-QP state growing pushes others out.
func TestCacheResize(t *testing.T) {
	c := NewCache(1000, 0, 0)
	es := newEntries(3, 300)
	for _, e := range es {
		c.Access(&e.CacheEntry, false)
	}
	c.SetSize(&es[2].CacheEntry, 500, 200)
	if got := residentIDs(es); len(got) != 2 || es[0].Resident() {
		t.Fatalf("resident %v after growth, want 1 2", got)
	}
	if s := c.Stats(); s.ResidentBytes != 800 || s.ResidentSRBytes != 200 || s.PeakSRBytes != 200 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCacheUnlimited(t *testing.T) {
	c := NewCache(0, 0, time.Microsecond)
	for _, e := range newEntries(1000, 256) {
		c.Access(&e.CacheEntry, false)
	}
	if s := c.Stats(); s.Evictions != 0 || s.Resident != 1000 {
		t.Fatalf("unlimited cache evicted: %+v", s)
	}
}
