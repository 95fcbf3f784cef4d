package cc

import "time"

// Pacer paces one QP's packets to its Sender's Rate, the way a NIC's
// per-QP rate limiter spaces a throttled flow (DCQCN's reaction point
// sets a rate, not a window). It is the emulated link's bucket of package
// dataplane (link.go) for one QP: a virtual clock (a GCRA, the token
// bucket's twin), the moment the QP's own "wire" at its current rate will
// have sent everything charged to it. A packet may start while that
// moment is at most Burst ahead of now, and NextSend charges it its bytes
// at the rate of the moment.
//
// The time is kept to a fraction of a nanosecond, so the long-run rate
// is exact; after an idle spell the QP gets no credit beyond Burst; a
// new rate applies from the next packet on (the fraction of a nanosecond
// kept at the old rate is dropped). With rate 0 (no limit) the pacer is
// always open. The engine embeds one per QP; its zero value is ready,
// with no burst: packets strictly spaced.
type Pacer struct {
	// Burst is how far ahead of its rate a QP may run, as time: from an
	// idle QP a burst of Burst·rate bits plus one packet goes back to
	// back. 0 spaces every packet.
	Burst time.Duration
	// The QP's virtual wire is busy until free + rem/rate ns,
	// 0 <= rem < rate.
	free Time
	rem  uint64
	rate uint64
}

// At is when the pacer opens: the earliest time the next packet may
// start (at or before now: it may go now).
func (p *Pacer) At() Time { return p.free - p.Burst }

// Open reports whether a packet may start at now.
func (p *Pacer) Open(now Time) bool { return p.free-p.Burst <= now }

// NextSend charges a packet of bytes (its wire bytes) sent at now at rate
// bit/s (the Sender's Rate; 0 is no limit) and returns when the next
// packet may start (At).
func (p *Pacer) NextSend(now Time, bytes int, rate uint64) Time {
	if rate == 0 {
		p.free, p.rem, p.rate = now, 0, 0
		return p.At()
	}
	if rate != p.rate {
		p.rem, p.rate = 0, rate
	}
	if p.free < now { // idle: no credit beyond the burst
		p.free, p.rem = now, 0
	}
	bitNanos := uint64(max(bytes, 0))*8*uint64(time.Second) + p.rem
	p.free += Time(bitNanos / rate)
	p.rem = bitNanos % rate
	return p.At()
}
