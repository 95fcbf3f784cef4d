package shm

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/qp"
)

// TestRingWrap pushes and consumes across the 2^32 index wrap with a small
// ring, checking order, Free and Available at every step.
func TestRingWrap(t *testing.T) {
	l, err := NewQPLayout(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	fd, mem, err := Create("test", l.Size, SealAll)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Munmap(mem)
	l.Init(mem)
	if err := l.Check(mem); err != nil {
		t.Fatal(err)
	}
	p, c := NewProducer(l.SQ(mem)), NewConsumer(l.SQ(mem))
	// Start both cursors just below the wrap.
	const start = ^uint32(0) - 5
	p.tail, c.head = start, start
	p.Publish()
	c.Release(start)
	next := uint64(0)
	want := uint64(0)
	for round := range 20 {
		for p.Free() > 0 {
			p.Push(&qp.SendWR{WRID: next})
			next++
		}
		p.Publish()
		if p.Free() != 0 {
			t.Fatalf("round %d: free %d after filling", round, p.Free())
		}
		n, err := c.Available()
		if err != nil || n != 4 {
			t.Fatalf("round %d: available %d, %v", round, n, err)
		}
		take := uint32(round%4 + 1)
		for i := range take {
			if got := c.At(i).WRID; got != want {
				t.Fatalf("round %d: entry %d has WRID %d, want %d", round, i, got, want)
			}
			want++
		}
		c.Advance(take)
		c.Release(c.Head())
		if p.Free() != take {
			t.Fatalf("round %d: free %d after releasing %d", round, p.Free(), take)
		}
		// Drain the rest so the next round starts empty.
		rest, _ := c.Available()
		for i := range rest {
			if c.At(i).WRID != want {
				t.Fatalf("round %d: drain order", round)
			}
			want++
		}
		c.Advance(rest)
		c.Release(c.Head())
	}
	if p.Tail() > start {
		t.Fatal("indices did not wrap")
	}
}

// TestRingCorruptIndex: indices from the other side that no correct peer
// writes are reported, never trusted.
func TestRingCorruptIndex(t *testing.T) {
	l, _ := NewCQLayout(8)
	fd, mem, err := Create("test", l.Size, SealAll)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Munmap(mem)
	l.Init(mem)
	r := l.Ring(mem)
	c := NewConsumer(r)
	r.prod.Store(9) // more than the ring holds
	if _, err := c.Available(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("producer index beyond capacity: %v", err)
	}
	p := NewProducer(r)
	r.cons.Store(1) // consumer claims to be ahead of the producer
	if p.Free() != 0 {
		t.Fatalf("free %d with a consumer index ahead of the producer", p.Free())
	}
}

// TestLayouts pins the layout rules docs/verbs-ipc.md states: indices on
// their own cache lines, entries line-aligned and 8-byte aligned for the
// structs' uint64 fields, files whole pages, capacities powers of two.
func TestLayouts(t *testing.T) {
	for _, off := range []int{OffSQProd, OffSQCons, OffRQProd, OffRQCons, OffCQProd, OffCQCons, OffCQOverflow, OffNeedWakeup} {
		if off%64 != 0 {
			t.Errorf("index at %#x is not on a cache line of its own", off)
		}
	}
	l, err := NewQPLayout(100, 3)
	if err != nil {
		t.Fatal(err)
	}
	if l.SQCap != 128 || l.RQCap != 4 || l.SQOff != 0x140 || l.RQOff%64 != 0 || l.RQOff < l.SQOff+128*SendEntrySize || l.Size%PageSize != 0 {
		t.Fatalf("QP layout %+v", l)
	}
	c, _ := NewCQLayout(5)
	if c.Cap != 8 || c.Off != 0x100 || c.Size%PageSize != 0 {
		t.Fatalf("CQ layout %+v", c)
	}
	for _, n := range []int{0, -1, MaxRingEntries + 1} {
		if _, err := RingCap(n); err == nil {
			t.Errorf("ring of %d entries accepted", n)
		}
	}
	for _, sz := range []uintptr{unsafe.Alignof(qp.SendWR{}), unsafe.Alignof(qp.RecvWR{}), unsafe.Alignof(qp.WC{})} {
		if 0x40%sz != 0 {
			t.Errorf("entry alignment %d", sz)
		}
	}
}

// TestFingerprint: the entry types are plain, and a type that is not
// (a pointer would be meaningless in the other process) is refused.
func TestFingerprint(t *testing.T) {
	a, err := Fingerprint()
	if err != nil || a == 0 {
		t.Fatalf("fingerprint %#x, %v", a, err)
	}
	type bad struct {
		N int
		P *int
	}
	if err := describe(discard{}, reflect.TypeFor[bad](), "bad"); err == nil {
		t.Fatal("a struct with a pointer passed as a ring entry")
	}
	type flag struct{ B bool }
	if err := describe(discard{}, reflect.TypeFor[flag](), "flag"); err == nil {
		t.Fatal("a bool passed: not every byte value is a valid bool")
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestMapSharedChecks: the daemon maps client memory only when it cannot
// fault: a memfd sealed against shrinking, long enough for the range.
func TestMapSharedChecks(t *testing.T) {
	fd, mem, err := Create("test", 8192, 0) // not sealed
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer unix.Munmap(mem)
	if _, err := MapShared(fd, 0, 4096, unix.PROT_READ, unix.F_SEAL_SHRINK); err == nil {
		t.Fatal("unsealed memfd mapped")
	}
	if err := AddSeals(fd, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	if _, err := MapShared(fd, 4096, 8192, unix.PROT_READ, unix.F_SEAL_SHRINK); err == nil {
		t.Fatal("range beyond the end of the file mapped")
	}
	m, err := MapShared(fd, 100, 5000, unix.PROT_READ|unix.PROT_WRITE, unix.F_SEAL_SHRINK)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	mem[100], mem[5099] = 7, 9
	if len(m.Bytes) != 5000 || m.Bytes[0] != 7 || m.Bytes[4999] != 9 {
		t.Fatal("mapping does not show the same bytes at the same offsets")
	}
	// The daemon's device page: after F_SEAL_FUTURE_WRITE nobody else
	// can map it writable.
	dfd, dmem, err := Create("dev", DevicePageLen, SealSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	defer unix.Munmap(dmem)
	if err := AddSeals(dfd, unix.F_SEAL_FUTURE_WRITE); err != nil {
		t.Fatal(err)
	}
	if _, err := MapShared(dfd, 0, DevicePageLen, unix.PROT_READ|unix.PROT_WRITE, 0); err == nil {
		t.Fatal("future-write-sealed page mapped writable")
	}
	if ro, err := MapShared(dfd, 0, DevicePageLen, unix.PROT_READ, 0); err != nil {
		t.Fatal(err)
	} else {
		ro.Unmap()
	}
}
