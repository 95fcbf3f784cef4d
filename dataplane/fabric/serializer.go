package fabric

import "time"

// serializer is a line's exact clock: it is busy until busyUntil +
// busyRem/rate nanoseconds (0 <= busyRem < rate), so that a run of frames
// at rate bit/s takes exactly their bits' time, however the nanoseconds
// round. The fabric's links (link.depart) and the network's wires
// (wire.serialize) keep one each.
type serializer struct {
	busyUntil time.Duration
	busyRem   uint64
}

// charge adds size bytes at rate bit/s (not 0) to the line and returns
// when it is free, rounded up to the nanosecond.
func (s *serializer) charge(size int, rate uint64) time.Duration {
	bitNanos := uint64(size) * 8 * uint64(time.Second)
	s.busyUntil = satAdd(s.busyUntil, time.Duration(bitNanos/rate))
	s.busyRem += bitNanos % rate
	if s.busyRem >= rate {
		s.busyUntil = satAdd(s.busyUntil, 1)
		s.busyRem -= rate
	}
	return s.freeAt()
}

// freeAt is when the line is free, rounded up to the nanosecond.
func (s *serializer) freeAt() time.Duration {
	if s.busyRem > 0 {
		return satAdd(s.busyUntil, 1)
	}
	return s.busyUntil
}
