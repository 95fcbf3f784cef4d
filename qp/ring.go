package qp

// Ring is a fixed-capacity FIFO of T, the shape of a hardware work queue:
// the producer writes at the tail, the consumer retires at the head, and
// entries in between are addressed by a free-running index so that a
// requester can walk them (send cursor, retransmission) without copying.
// Indices are uint32 and wrap; capacity is a power of two.
type Ring[T any] struct {
	buf        []T
	mask       uint32
	head, tail uint32
}

// NewRing returns a ring holding at least n entries (rounded up to a power
// of two).
func NewRing[T any](n int) *Ring[T] {
	size := 1
	for size < n {
		size <<= 1
	}
	return &Ring[T]{buf: make([]T, size), mask: uint32(size - 1)}
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
