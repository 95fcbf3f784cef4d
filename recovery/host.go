package recovery

import "time"

// DefaultHostLatency is one access of state kept in host memory: the
// PCIe round trip FaSR measured for SRNIC's bitmaps (§V-A, 1.2 µs).
const DefaultHostLatency = 1200 * time.Nanosecond

// HostMemory is a NIC's path to the state a scheme keeps in host memory
// instead of on chip. Every access stalls the NIC's receive and transmit
// pipeline for the round trip, as a context-cache miss does: the engine
// makes one per NIC, hands it to every scheme it builds (Params.Host),
// and takes the stall after each frame it receives, each timer round and
// each QP's transmit burst. A scheme with off-chip state charges it from
// inside its decisions, so it needs no change of the engine. A nil
// *HostMemory charges nothing (a scheme built outside an engine).
type HostMemory struct {
	pending  time.Duration
	accesses uint64
	stall    time.Duration
}

// Access charges one access of latency.
func (h *HostMemory) Access(latency time.Duration) {
	if h == nil {
		return
	}
	h.pending += latency
	h.accesses++
	h.stall += latency
}

// Take returns the stall charged since the last Take.
func (h *HostMemory) Take() time.Duration {
	if h == nil {
		return 0
	}
	d := h.pending
	h.pending = 0
	return d
}

// Stats returns the accesses charged and the stall they cost, in all.
func (h *HostMemory) Stats() (accesses uint64, stall time.Duration) {
	if h == nil {
		return 0, 0
	}
	return h.accesses, h.stall
}
