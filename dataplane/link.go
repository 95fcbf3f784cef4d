package dataplane

import "time"

// The emulated link: Config.LinkRate paces everything the engine
// transmits (requests, responses and ACKs, ST's second copies,
// retransmissions) as if its port were an Ethernet link of that rate, so
// that on a host that could send faster the emulated link, not the CPU,
// is the bottleneck (docs/architecture.md, "The emulated link").
//
// Every frame costs the time it occupies on the wire: the frame padded to
// Ethernet's 64-byte minimum (FCS included), plus the FCS, the preamble
// and start delimiter and the inter-frame gap (WireBytes). The bucket is
// kept as a virtual clock, the moment the emulated wire will have sent
// everything handed to it (a GCRA, the token bucket's twin): LinkBurst
// bytes of tokens are LinkBurst*8/LinkRate of backlog, a frame may start
// while the backlog is at most that (the bucket is not empty), and it adds
// its own wire time. The long-run rate is exact (the time is kept to a
// fraction of a nanosecond, as in the fabric's serializer), the largest
// back-to-back burst from an idle link is LinkBurst bytes plus one frame,
// and the moment the bucket opens again is known exactly: NextDeadline
// reports it, so a poll loop or the Sim waits precisely that long.

// Ethernet's per-frame cost beyond the bytes a port is handed (802.3).
const (
	EthPreambleSFD = 8  // preamble and start frame delimiter
	EthFCS         = 4  // frame check sequence, added by the MAC
	EthIFG         = 12 // the minimum inter-frame gap
	EthMinFrame    = 64 // the shortest frame, FCS included; shorter ones are padded
	// EthOverhead is what every frame adds to its own bytes on the wire.
	EthOverhead = EthPreambleSFD + EthFCS + EthIFG
)

// WireBytes is how many bytes of wire time a frame of n bytes (from the
// destination MAC to the end of the payload, no FCS, as a Port carries it)
// occupies: padded to the minimum frame, with FCS, preamble, SFD and gap.
func WireBytes(n int) int {
	return max(n+EthFCS, EthMinFrame) + EthPreambleSFD + EthIFG
}

const (
	// defaultLinkBurstFrames and defaultLinkBurstTime set the default
	// bucket depth: the larger of 16 of the port's largest frames and 20 µs
	// at the link rate. 16 frames are one QP's TxBurst, so that a QP's
	// turn is not cut into single packets when the link has been idle, and
	// few enough for a peer's receive ring (an AF_XDP ring holds
	// thousands) to absorb at once; 20 µs is a few poll rounds, so that a
	// round the poll loop comes late (the host's other work) does not
	// cost link time at rates where 16 frames drain in less.
	defaultLinkBurstFrames = 16
	defaultLinkBurstTime   = 20 * time.Microsecond
	// maxLinkRate (1 Pbit/s) keeps WireBytes*8e9 plus a remainder below
	// 2^64, and a burst's time within a Duration.
	maxLinkRate = 1e15
	// maxLinkBurst (1 GiB) keeps the burst's time, burst*8e9, below 2^64.
	maxLinkBurst = 1 << 30
)

// defaultLinkBurst is the bucket depth for a link rate of rate bits/s on a
// port whose largest frame is maxFrame bytes.
func defaultLinkBurst(rate uint64, maxFrame int) int {
	frames := defaultLinkBurstFrames * WireBytes(maxFrame)
	window := int(rate / 8 * uint64(defaultLinkBurstTime) / uint64(time.Second))
	return max(frames, window)
}

// linkBucket is the emulated link's token bucket, as a virtual clock.
type linkBucket struct {
	rate  uint64        // bits/s; 0: unlimited
	depth time.Duration // the burst, LinkBurst bytes, as time at rate
	// The wire is busy until free + freeRem/rate ns, 0 <= freeRem < rate.
	free    time.Duration
	freeRem uint64
}

func newLinkBucket(rate uint64, burst int) linkBucket {
	if rate == 0 {
		return linkBucket{}
	}
	return linkBucket{rate: rate, depth: time.Duration(uint64(burst) * 8 * uint64(time.Second) / rate)}
}

// openAt is when the bucket has tokens again: the backlog has drained to
// the burst.
func (b *linkBucket) openAt() time.Duration { return b.free - b.depth }

// open reports whether a frame may start at now.
func (b *linkBucket) open(now time.Duration) bool { return b.rate == 0 || b.openAt() <= now }

// take puts a frame of n bytes on the emulated wire at now.
func (b *linkBucket) take(now time.Duration, n int) {
	if b.rate == 0 {
		return
	}
	if b.free < now { // the wire went idle: no credit for idle time beyond the burst
		b.free, b.freeRem = now, 0
	}
	bitNanos := uint64(WireBytes(n))*8*uint64(time.Second) + b.freeRem
	b.free += time.Duration(bitNanos / b.rate)
	b.freeRem = bitNanos % b.rate
}
