package recovery

import "github.com/softnic/softnic/qp"

// MELO is the loss recovery of "Memory Efficient Loss Recovery for
// Hardware-based Transport in Datacenter" (Lu et al., APNet 2017):
// selective retransmission whose on-chip cost is a few bytes per
// connection and a constant shared pool. docs/recovery.md records the
// choices made where the paper leaves room.
//
//   - Data and metadata are kept apart (§3.2.1, §3.2.2): an out-of-order
//     packet goes to an off-chip reorder buffer (the transport keeps it in
//     host memory, Caps.BuffersOutOfOrder) and is copied to the application when the
//     hole before it fills; only its bit is kept on chip.
//   - The bits come from one shared pool per side of 1-byte blocks (§3.2.3):
//     a free-slot stack hands them out, next pointers chain a connection's
//     blocks from start_ptr to end_ptr, and RCV.NXT and RCV.HIGH mark the
//     first and last bit in use. Blocks go back as RCV.NXT passes them and
//     when the connection's context is evicted (§3.2.5).
//   - A packet that needs a block in the middle of its chain (it fills a
//     hole other than at the front or the end) is dropped in §3.2.3, taken
//     for a retransmission that overtook a lost one; here it is kept, as
//     reordering delays originals too and the block is in the chain
//     already (docs/recovery.md, "Reordering is not loss").
//   - A packet that gets no bits is dropped and recovered go-back-N
//     (§3.2.5): the receiver NAKs the expected PSN, at most once per NAK
//     interval, and the sender goes back to it.
//   - A new hole (a PSN beyond RCV.HIGH+1) is answered at once by a NACK
//     carrying the three most recent holes (§3.2.4), from which the sender
//     rebuilds the receiver's bitmap in its own chain of pool blocks and
//     retransmits what is missing.
//   - A lost retransmission (the paper has no rule for it): when the
//     retransmission of the cumulative acknowledgement's packet has gone
//     unacknowledged for a hold (max(G, 4·RTTVAR), RTO_low/8 without an
//     estimate) and the responder acknowledges a packet first sent after
//     it, the sender starts a new round at once instead of waiting for the
//     timer (docs/recovery.md, "Lost retransmissions").
const MELO = "melo"

func init() { Register(MELO, func(p Params) Scheme { return newMelo(p) }) }

// DefaultMeloPoolBits is the size of each bits pool in MELO's
// simulations (§4): 1 Kb.
const DefaultMeloPoolBits = 1024

// meloPoolBits is MELO's knob melo.pool_bits (softnic run --scheme-param
// melo.pool_bits=2048).
var meloPoolBits = IntKnob(MELO, "pool_bits", DefaultMeloPoolBits, 8, 8<<20,
	"size of each of MELO's two bits pools, bits (§4: 1 Kb), rounded up to whole 8-bit blocks")

type meloScheme struct {
	p      Params
	rx, tx *BlockPool
	sent   selCounts // the senders'

	// What the receivers did (Counters): packets dropped for want of
	// bits and recovered go-back-N (§3.2.5: poolDrops, fallbacks, one
	// each); packets that needed a block in the middle of their chain
	// (§3.2.3), kept (middleFills: reordering is not loss,
	// docs/recovery.md) or, their bits stranded in host memory, dropped
	// (middleDrops).
	poolDrops, fallbacks     uint64
	middleDrops, middleFills uint64
}

func newMelo(p Params) *meloScheme {
	n := (meloPoolBits(p) + 7) / 8
	return &meloScheme{p: p,
		rx: NewBlockPool("melo_rx_bits", n, 8, false),
		tx: NewBlockPool("melo_tx_bits", n, 8, false)}
}

func (s *meloScheme) Name() string   { return MELO }
func (s *meloScheme) Params() Params { return s.p }

func (s *meloScheme) window() int { return min(s.p.BDPPackets, MaxBDPPackets) }

// ReorderWindow is the BDP's worth of reorder buffer each connection has
// off chip (§3.2.2) — and what the sender keeps in flight (BDP-FC as in
// IRN: MELO ran over DCQCN, softnic has no congestion control).
func (s *meloScheme) ReorderWindow() int { return s.window() }
func (s *meloScheme) Caps() Caps         { return Caps{BuffersOutOfOrder: true} }

// SharedOnChipBytes: both bits pools with their next pointers and
// free-slot stacks (§3.2.3: 3 Kb per 1 Kb pool).
func (s *meloScheme) SharedOnChipBytes() int { return s.rx.Stats().Bytes + s.tx.Stats().Bytes }

// Counters: the receivers' and the senders' (softnic stats, /metrics;
// docs/metrics.md).
func (s *meloScheme) Counters() []Counter {
	return append([]Counter{
		{"sr_pool_fallbacks", poolFallbacksHelp, s.fallbacks},
		{"sr_pool_drops", poolDropsHelp, s.poolDrops},
		{"sr_middle_drops", "MELO retransmissions needing a middle block, dropped.", s.middleDrops},
		{"sr_middle_fills", "MELO packets kept in a middle block (reordering is not loss).", s.middleFills},
	}, s.sent.counters()...)
}

// Pools: the receivers' bits pool and the senders'.
func (s *meloScheme) Pools() []PoolStats { return []PoolStats{s.rx.Stats(), s.tx.Stats()} }

func (s *meloScheme) NewSender() Sender {
	return &meloSender{newSelSender(s.tx, s.window(), s.p, &s.sent)}
}

func (s *meloScheme) NewReceiver() Receiver {
	return &meloReceiver{s: s, window: s.window(), bits: newChain(), gbn: gbnReceiver{nakInterval: s.p.NakInterval}}
}

// On-chip bytes per connection (§3.2.4): the three holes (4 B each: 2 B
// start, 2 B length), RCV.NXT and RCV.HIGH (3 B each) and start_ptr and
// end_ptr (1 B each) at the receiver, the paper's 20 B; and the sender's
// start_ptr and end_ptr, for the chain its bitmap takes from its own pool
// (§3.2.4), which the paper's sum leaves out. With the two pools' 768 B
// shared by 300 connections that is 24.6 B each, where the paper's 23 B
// is 20 + 768/300 (TestMELOOnChipBytes).
const (
	meloReceiverOnChipBytes = 12 + 6 + 2
	meloSenderOnChipBytes   = 2
)

// meloSender keeps what the NACKs said in a chain of the sender's pool.
type meloSender struct{ selSender }

func (m *meloSender) Reset(start qp.PSN) { m.reset(start) }
func (m *meloSender) OnAck(now Time, unacked qp.PSN) qp.PSN {
	m.tick(now, m.lastSent)
	return m.ack(unacked)
}
func (m *meloSender) OnChipBytes() int { return meloSenderOnChipBytes }
func (m *meloSender) OnEvict()         { m.evict() }

// OnSack records what a NACK, an ACK or a READ response says the
// responder holds. If the round resent the cumulative acknowledgement's
// packet a hold ago and it is still missing while the responder goes on
// acknowledging others, that retransmission was lost: a new round resends
// the holes at once, not a timeout later (MELO has no rule for a lost
// retransmission; docs/recovery.md, "Lost retransmissions").
func (m *meloSender) OnSack(now Time, f, t qp.PSN, k SackKind, sent qp.PSN) {
	m.tick(now, sent)
	m.sack(f, t, k, sent)
	if m.lostRetransmission(t, false) {
		m.pooled.stats.lostRetransmits++
		m.restart(sent)
	}
}

// OnFeedback: a holes NACK acknowledges selectively what lies between the
// holes (onFeedback, through OnSack).
func (m *meloSender) OnFeedback(now Time, fb Feedback) Resume   { return onFeedback(m, now, fb) }
func (m *meloSender) OnReply(now Time, a *Ack) (qp.PSN, Resume) { return ReadReply(m, now, a) }

// onNak is the receiver's go-back-N NAK: it dropped a packet for want of
// bits (§3.2.5). Everything from psn goes again; what the receiver holds
// it drops as duplicates.
func (m *meloSender) onNak(now Time, psn, sent qp.PSN) Resume {
	m.tick(now, sent)
	m.recovery = false
	return Resume{GoBack: true, GoBackTo: psn}
}

// OnTimeout: a retransmission was lost, or the tail of the window, or a
// NACK. "All packets starting from the front of the bitmap will be
// retransmitted again" (§3.2.3): the round restarts at the cumulative
// acknowledgement and every packet sent and not acknowledged is lost,
// resent once, not only the holes below a selective acknowledgement (a
// lost NACK or a lost last packet leaves none; IRN's rule would recover
// one packet per timeout, docs/recovery.md).
func (m *meloSender) OnTimeout(now Time, unacked, sent qp.PSN) Resume {
	m.tick(now, sent)
	m.ack(unacked)
	m.restart(sent)
	m.raiseLossEdge(sent)
	return Resume{}
}

// meloReceiver is the on-chip metadata of one connection.
type meloReceiver struct {
	s      *meloScheme
	window int
	nxt    qp.PSN // RCV.NXT, the expected PSN
	high   qp.PSN // RCV.HIGH, the highest PSN kept (valid while ooo)
	ooo    bool
	bits   chain   // from RCV.NXT's block to RCV.HIGH's
	holes  [3]Hole // the three most recent, most recent first
	gbn    gbnReceiver
}

func (r *meloReceiver) Reset(start qp.PSN) {
	r.bits.release(r.s.rx)
	r.bits = newChain()
	r.nxt, r.ooo, r.holes = start, false, [3]Hole{}
	r.gbn.Reset(start)
}

func (r *meloReceiver) OnOutOfSequence(now Time, epsn, psn qp.PSN, _ bool) Decision {
	r.OnInSequence(now, epsn)
	if d := psn.Diff(r.nxt); d <= 0 || int(d) >= r.window {
		return Decision{}
	}
	if !r.ooo {
		r.ooo, r.high = true, r.nxt.Prev()
		r.bits = newChain()
		r.bits.start(r.nxt)
	}
	if psn.After(r.high) {
		if !r.bits.set(r.s.rx, psn) {
			r.s.poolDrops++
			r.s.fallbacks++
			if r.high == r.nxt.Prev() {
				r.ooo = false // nothing kept: no episode began
			}
			return Decision{Reply: r.gbn.OnOutOfSequence(now, r.nxt, psn, false).Reply}
		}
		newHole := psn.After(r.high.Next())
		if newHole {
			r.pushHole(Hole{Start: r.high.Next(), Len: uint32(psn.Diff(r.high) - 1)})
		}
		r.high = psn
		if newHole {
			return Decision{Keep: true, Reply: ReplyHoles, High: r.high, Holes: r.holes}
		}
		return Decision{Keep: true}
	}
	switch {
	case r.bits.get(r.s.rx, psn):
		return Decision{} // a duplicate
	case r.bits.inMiddle(r.s.rx, psn):
		// §3.2.3 drops it, taking it for a retransmission that overtook
		// a lost one; under reordering it is as often an original that
		// was delayed, and dropping it costs a timeout and a round. Its
		// block is in the chain already: walking to it costs cycles, not
		// bits, so it is kept (docs/recovery.md, "Reordering is not loss").
		r.s.middleFills++
	}
	if !r.bits.set(r.s.rx, psn) { // inside the chain: no block needed
		r.s.middleDrops++ // stranded in host memory, say
		return Decision{}
	}
	r.fill(psn)
	return Decision{Keep: true}
}

func (r *meloReceiver) OnInSequence(_ Time, epsn qp.PSN) {
	if !epsn.After(r.nxt) {
		return
	}
	r.gbn.OnInSequence(0, epsn)
	r.nxt = epsn
	if !r.ooo {
		return
	}
	if r.nxt.After(r.high) {
		r.bits.release(r.s.rx)
		r.bits = newChain()
		r.ooo, r.holes = false, [3]Hole{}
		return
	}
	r.bits.advance(r.s.rx, r.nxt)
	r.trim()
}

func (r *meloReceiver) Kept(psn qp.PSN) (bool, bool) {
	if !r.ooo || psn.After(r.high) || !psn.After(r.nxt) {
		return false, false
	}
	return r.bits.get(r.s.rx, psn), false
}

// Holes is RCV.HIGH and the three most recent holes, what a holes NACK
// carries (Decision.High, Decision.Holes).
func (r *meloReceiver) Holes() (qp.PSN, [3]Hole) { return r.high, r.holes }

func (r *meloReceiver) Deadline() (Time, bool)    { return 0, false }
func (r *meloReceiver) OnTimer(Time, qp.PSN) bool { return false }
func (r *meloReceiver) OnChipBytes() int          { return meloReceiverOnChipBytes }
func (r *meloReceiver) OnEvict()                  { r.bits.spill(r.s.rx) }

// NakOutstanding is the go-back-N fallback's (bits ran out, §3.2.5).
func (r *meloReceiver) NakOutstanding() bool { return r.gbn.NakOutstanding() }

// pushHole records a new most recent hole, forgetting the oldest of three.
func (r *meloReceiver) pushHole(h Hole) {
	r.holes[2], r.holes[1], r.holes[0] = r.holes[1], r.holes[0], h
}

// removeHole drops entry i, moving the older ones up.
func (r *meloReceiver) removeHole(i int) {
	copy(r.holes[i:], r.holes[i+1:])
	r.holes[2] = Hole{}
}

// fill updates the holes for psn, which arrived inside one.
func (r *meloReceiver) fill(psn qp.PSN) {
	for i, h := range r.holes {
		if h.Len == 0 || psn.Before(h.Start) || int(psn.Diff(h.Start)) >= int(h.Len) {
			continue
		}
		end := h.Start.Add(h.Len - 1)
		switch {
		case h.Len == 1:
			r.removeHole(i)
		case psn == h.Start:
			r.holes[i] = Hole{Start: psn.Next(), Len: h.Len - 1}
		case psn == end:
			r.holes[i].Len--
		default: // split: the later part is the more recent hole
			later := Hole{Start: psn.Next(), Len: uint32(end.Diff(psn))}
			earlier := Hole{Start: h.Start, Len: uint32(psn.Diff(h.Start))}
			r.holes[i] = later
			if i+1 < len(r.holes) { // else the earlier part is the fourth most recent: forgotten
				copy(r.holes[i+2:], r.holes[i+1:2])
				r.holes[i+1] = earlier
			}
		}
		return
	}
}

// trim drops or shortens the holes RCV.NXT has passed.
func (r *meloReceiver) trim() {
	for i := 0; i < len(r.holes); {
		h := r.holes[i]
		if h.Len == 0 || !h.Start.Before(r.nxt) {
			i++
			continue
		}
		if passed := uint32(r.nxt.Diff(h.Start)); passed >= h.Len {
			r.removeHole(i)
			continue
		} else {
			r.holes[i] = Hole{Start: r.nxt, Len: h.Len - passed}
		}
		i++
	}
}
