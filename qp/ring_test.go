//go:build linux

package qp

import (
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// entry is a pointer-free ring element of 32 bytes.
type entry struct {
	a, b uint64
	c    [4]uint32
}

// mappedAt reports whether all n bytes from p are mapped (mincore
// fails with ENOMEM on an unmapped page). /proc/self/maps would not do:
// the kernel merges adjacent anonymous mappings of the same protection.
func mappedAt(t *testing.T, p unsafe.Pointer, n uintptr) bool {
	t.Helper()
	vec := make([]byte, (n+uintptr(os.Getpagesize())-1)/uintptr(os.Getpagesize()))
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(p), n, uintptr(unsafe.Pointer(&vec[0])))
	switch errno {
	case 0:
		return true
	case unix.ENOMEM:
		return false
	default:
		t.Fatal("mincore:", errno)
		return false
	}
}

// exercise pushes and pops 3 capacities' worth through r, across the
// wrap of its uint32 indices, checking every value.
func exercise(t *testing.T, r *Ring[entry]) {
	t.Helper()
	start := ^uint32(0) - 7
	r.head, r.tail = start, start
	n := r.Cap()
	for i := range n {
		*r.Push() = entry{a: uint64(i), c: [4]uint32{3: uint32(i)}}
	}
	if r.Push() != nil || !r.Full() {
		t.Fatal("push into a full ring")
	}
	for i := range 3 * n {
		e := r.Front()
		if e == nil || e.a != uint64(i) || e.c[3] != uint32(i) {
			t.Fatalf("entry %d: front = %+v", i, e)
		}
		if r.At(r.Head()) != e {
			t.Fatal("At(Head) is not Front")
		}
		r.Pop()
		*r.Push() = entry{a: uint64(i + n), c: [4]uint32{3: uint32(i + n)}}
	}
	if r.Head() >= start {
		t.Error("the indices did not wrap") // they started 8 short of 2^32
	}
	for r.Len() > 0 {
		r.Pop()
	}
	if r.Front() != nil {
		t.Error("empty ring has a front")
	}
}

func TestRingOffHeap(t *testing.T) {
	const n = OffHeapBytes / 32
	r := NewRing[entry](n - 1) // rounded up to n: 1 MiB
	if r.Cap() != n || !r.OffHeap() {
		t.Fatalf("Cap %d OffHeap %v, want %d true", r.Cap(), r.OffHeap(), n)
	}
	base := unsafe.Pointer(unsafe.SliceData(r.buf))
	if !mappedAt(t, base, OffHeapBytes) {
		t.Fatal("no mapping of its own behind the ring")
	}
	exercise(t, r)

	*r.Push() = entry{a: 1}
	m := r.mapped
	r.Release()
	// munmap returned the pages. (Whether the address is mapped afterwards
	// says nothing: the runtime, or the race detector, may map it again
	// at once, which made a mincore check here fail under load.)
	if !m.done.Load() || m.err != nil {
		t.Errorf("Release did not unmap the ring: munmap %v", m.err)
	}
	if r.Cap() != 0 || r.Len() != 0 || r.Push() != nil || r.Front() != nil || r.OffHeap() {
		t.Errorf("released ring: Cap %d Len %d OffHeap %v", r.Cap(), r.Len(), r.OffHeap())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("At on a released ring did not panic")
			}
		}()
		r.At(0)
	}()
	r.Release() // a second release does nothing
}

func TestRingSmallOnHeap(t *testing.T) {
	r := NewRing[entry](OffHeapBytes/32/2 + 1) // rounds up to 1 MiB: off the heap
	if !r.OffHeap() {
		t.Error("a 1 MiB ring is on the heap")
	}
	r.Release()
	r = NewRing[entry](OffHeapBytes / 32 / 2) // 512 KiB
	if r.OffHeap() {
		t.Error("a 512 KiB ring is off the heap")
	}
	exercise(t, r)
	r.Release()
	if r.Cap() != 0 || r.Push() != nil {
		t.Error("released heap ring still has room")
	}
}

func TestRingWithPointersOnHeap(t *testing.T) {
	type withPtr struct {
		n uint64
		p *int
	}
	type withString struct {
		s string
		_ [4096]byte
	}
	r := NewRing[withPtr](1 << 20) // 16 MiB
	if r.OffHeap() {
		t.Fatal("a ring of pointers is off the heap")
	}
	v := 7
	*r.Push() = withPtr{n: 1, p: &v}
	runtime.GC()
	if e := r.Front(); e.n != 1 || *e.p != 7 {
		t.Fatal("lost the entry")
	}
	r.Release()
	if s := NewRing[withString](1024); s.OffHeap() {
		t.Error("a ring of strings is off the heap")
	}
}

func TestPointerFree(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{entry{}, true}, {WC{}, true}, {SendWR{}, true}, {RecvWR{}, true},
		{[0]*int{}, true}, {struct{ _ [3]complex128 }{}, true},
		{new(int), false}, {"", false}, {[]byte(nil), false}, {map[int]int(nil), false},
		{struct{ f func() }{}, false}, {struct{ c chan int }{}, false},
		{struct{ e error }{}, false}, {[2]struct{ p unsafe.Pointer }{}, false},
		{struct {
			a int
			b [2]struct{ s string }
		}{}, false},
	} {
		if got := PointerFree(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("PointerFree(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}

// A ring dropped without Release is unmapped when collected.
func TestRingCleanup(t *testing.T) {
	r := NewRing[entry](OffHeapBytes / 32)
	m := r.mapped
	if m == nil {
		t.Fatal("no mapping behind the ring")
	}
	r = nil
	// Whether the address is still mapped says nothing (it may be mapped
	// again at once by the runtime): the mapping says whether it was
	// returned.
	for deadline := time.Now().Add(5 * time.Second); !m.done.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("a dropped ring's mapping was never unmapped")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if m.err != nil {
		t.Fatal("munmap:", m.err)
	}
}
