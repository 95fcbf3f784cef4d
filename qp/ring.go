package qp

import (
	"reflect"
	"runtime"
	"unsafe"
)

// Ring is a fixed-capacity FIFO of T, the shape of a hardware work queue:
// the producer writes at the tail, the consumer retires at the head, and
// entries in between are addressed by a free-running index so that a
// requester can walk them (send cursor, retransmission) without copying.
// Indices are uint32 and wrap; capacity is a power of two.
//
// A ring whose entries take OffHeapBytes or more, of a type without Go
// pointers, lives outside the Go heap, in an anonymous mapping of its own
// that Release unmaps: the Go heap never gives back the runtime metadata
// of a growth (a daemon client that made and left gigabytes of rings
// would keep the daemon megabytes larger for good), and a mapping is
// returned to the system the moment its queue is destroyed, without a
// garbage collection. Smaller rings, and rings of types with pointers
// (the collector must see those), are Go slices.
type Ring[T any] struct {
	buf        []T
	mask       uint32
	head, tail uint32
	// mapped is the mapping behind buf when the ring is off the heap
	// (nil otherwise); cleanup unmaps it should the ring be dropped
	// without Release.
	mapped  *mapping
	cleanup runtime.Cleanup
}

// OffHeapBytes is the size from which a ring's entries live in a mapping
// of their own rather than on the Go heap. 1 MiB is 4096 completions or
// about 5000 work requests: far deeper than a perftest-sized queue (whose
// rings stay heap slices, allocated as before), and large enough that a
// mapping's page-rounding and system calls are noise.
const OffHeapBytes = 1 << 20

// ringCap is n rounded up to a power of two.
func ringCap(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}

// RingBytes is the memory NewRing[T](n) allocates for its entries.
func RingBytes[T any](n int) int64 {
	return int64(ringCap(n)) * int64(unsafe.Sizeof(*new(T)))
}

// NewRing returns a ring holding at least n entries (rounded up to a power
// of two).
func NewRing[T any](n int) *Ring[T] {
	size := ringCap(n)
	r := &Ring[T]{mask: uint32(size - 1)}
	if bytes := uintptr(size) * unsafe.Sizeof(*new(T)); bytes >= OffHeapBytes && PointerFree(reflect.TypeFor[T]()) {
		if m := mapAnon(bytes); m != nil {
			r.mapped = m
			r.buf = unsafe.Slice((*T)(m.base()), size)
			r.cleanup = runtime.AddCleanup(r, (*mapping).unmap, m)
			return r
		}
	}
	r.buf = make([]T, size)
	return r
}

// Release gives the ring's memory back: a mapping is unmapped at once, a
// heap slice is left to the collector. The ring is then empty with no
// capacity: Push fails, Front returns nil, and At panics with an index
// error (the slice is nil), so a stray use after release can never touch
// unmapped memory. The owner calls it once, when the queue is destroyed
// and nothing holds an entry (an At or Push pointer) any more; further
// calls do nothing.
func (r *Ring[T]) Release() {
	r.buf, r.mask, r.head, r.tail = nil, 0, 0, 0
	if m := r.mapped; m != nil {
		r.mapped = nil
		r.cleanup.Stop()
		m.unmap()
	}
}

// OffHeap reports whether the ring's entries live in a mapping of their
// own (see OffHeapBytes).
func (r *Ring[T]) OffHeap() bool { return r.mapped != nil }

// PointerFree reports whether values of t hold no Go pointers (no
// pointer, slice, string, map, channel, function or interface anywhere
// in them), so that they may live in memory the collector does not scan.
func PointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || PointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !PointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// Cap is the number of entries the ring holds.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// Len is the number of entries between head and tail.
func (r *Ring[T]) Len() int { return int(r.tail - r.head) }

// Full reports whether Push would fail.
func (r *Ring[T]) Full() bool { return r.Len() == len(r.buf) }

// Head and Tail are the free-running indices of the oldest entry and of the
// next free slot.
func (r *Ring[T]) Head() uint32 { return r.head }
func (r *Ring[T]) Tail() uint32 { return r.tail }

// Push reserves the tail slot and returns it zeroed, or nil when full.
func (r *Ring[T]) Push() *T {
	if r.Full() {
		return nil
	}
	e := &r.buf[r.tail&r.mask]
	var zero T
	*e = zero
	r.tail++
	return e
}

// At returns the entry at free-running index i (head <= i < tail).
func (r *Ring[T]) At(i uint32) *T { return &r.buf[i&r.mask] }

// Front returns the head entry, or nil when empty.
func (r *Ring[T]) Front() *T {
	if r.head == r.tail {
		return nil
	}
	return &r.buf[r.head&r.mask]
}

// Pop retires the head entry.
func (r *Ring[T]) Pop() {
	if r.head != r.tail {
		r.head++
	}
}

// Contains reports whether free-running index i is between head and tail.
func (r *Ring[T]) Contains(i uint32) bool { return i-r.head < r.tail-r.head }
