package fabric

// The fabric's and the network's event queues are min-heaps of entries
// ordered by time, then by the order they were pushed in (before).

// timed is an entry of such a heap.
type timed[T any] interface {
	*T
	before(*T) bool
}

// siftUp restores the heap q after an entry was appended to it.
func siftUp[T any, P timed[T]](q []T) {
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !P(&q[i]).before(&q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// popMin removes the earliest entry of the heap q and returns the
// shortened heap and the entry; the vacated slot is cleared, so that it
// keeps no frame alive.
func popMin[T any, P timed[T]](q []T) ([]T, T) {
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	var zero T
	q[last] = zero
	q = q[:last]
	for i := 0; ; {
		child := 2*i + 1
		if child >= len(q) {
			break
		}
		if child+1 < len(q) && P(&q[child+1]).before(&q[child]) {
			child++
		}
		if !P(&q[child]).before(&q[i]) {
			break
		}
		q[i], q[child] = q[child], q[i]
		i = child
	}
	return q, top
}
