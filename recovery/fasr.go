package recovery

import "github.com/softnic/softnic/qp"

// FaSR is the loss recovery of "FaSR: Fast and Scalable Selective
// Retransmission for RDMA" (Huang et al.): selective retransmission whose
// state lives in a two-level pool shared by all QPs of a NIC, with a fast
// path that needs no bitmap when a QP lost a single packet.
// docs/recovery.md records the choices made where the paper leaves room.
//
//   - lost-cnt (§III-B1): the receiver counts the packets missing between
//     RCV-NXT and sack-high: it grows by the gap an out-of-order packet
//     opens and shrinks as retransmissions fill RCV-NXT. It has 3 bits;
//     once it would pass 7 it stays there, flagged as overflowed, until the
//     recovery ends, and RCV-NXT moves by bitmap lookups only (§III-D).
//   - Receiver fast path: lost-cnt 1 means only RCV-NXT is missing, so
//     only sack-high is kept; the retransmission of RCV-NXT moves it
//     straight to sack-high+1. Slow path (lost-cnt above 1): a bitmap of
//     16-bit blocks from the level-2 pool, linked head to tail; the run of
//     packets already received after RCV-NXT when the slow path begins is
//     kept as a count (compression-cnt) when it spans a block or more.
//     When lost-cnt falls back to 1 the bitmap goes back to the pool.
//   - A QP in recovery holds an SR state unit from the level-1 pool
//     (availability bitmap) and returns it when the recovery ends.
//   - Every out-of-order packet is answered by a SACK with RCV-NXT, its
//     PSN and lost-cnt (overflow in the opcode, §IV-D).
//   - FNACK (§III-D): a packet between RCV-NXT and sack-high that fills a
//     hole other than RCV-NXT is a retransmission that overtook a lost one,
//     or a reordered original: it is kept (lost-cnt falls) and answered by
//     an FNACK, on which the sender restarts its retransmissions from
//     UNACK only if it had resent that PSN and the retransmission of
//     UNACK has gone unacknowledged for a hold (max(G, 4·RTTVAR), RTO_low/8
//     without an estimate): at most once per hold, however many FNACKs
//     reordering brings. A SACK of a packet first sent after that
//     retransmission, a hold on, does the same (docs/recovery.md,
//     "Reordering is not loss", "Lost retransmissions").
//   - Sender (§III-B2): lost-cnt from the SACKs tells a lost packet from a
//     lost SACK: a gap between the new SACK and sack-high is retransmitted
//     only when lost-cnt grew. RTO: lost-cnt above 1 resends UNACK and the
//     holes below sack-high (its bitmap), 1 resends UNACK only, 0 (no
//     SACK: the whole window was lost) goes back to UNACK.
//   - Pool exhausted (§III-D): no unit or no blocks for a QP's recovery
//     and it falls back to go-back-N: packets past what is recorded are
//     dropped and NAKed, the sender goes back; what was recorded is kept,
//     and the QP returns to selective repeat when the recovery is over.
//   - Packet format (§IV-D): MSN and offset on SEND packets and the
//     address on every WRITE packet, so a packet is placed directly in
//     application memory whatever arrived before it (the transport's
//     placement headers, as for IRN).
const FaSR = "fasr"

func init() { Register(FaSR, func(p Params) Scheme { return newFasr(p) }) }

// FaSR's FPGA adds about 1600 B of shared SR state in 16-bit bitmap
// blocks (§V-A); 32 units of 38 B and 128 blocks come to 1,620 B.
const (
	DefaultFasrUnits     = 32
	DefaultFasrBlocks    = 128
	DefaultFasrBlockBits = 16
)

// FaSR's knobs (softnic run --scheme-param fasr.units=64): the sizes of
// its two-level pool (§III-C).
var (
	fasrUnits     = IntKnob(FaSR, "units", DefaultFasrUnits, 1, 1<<20, "FaSR's level-1 pool: SR state units (38 B each)")
	fasrBlocks    = IntKnob(FaSR, "blocks", DefaultFasrBlocks, 1, 1<<20, "FaSR's level-2 pool: bitmap blocks")
	fasrBlockBits = IntKnob(FaSR, "block_bits", DefaultFasrBlockBits, 1, 16, "bits in one of FaSR's bitmap blocks")
)

// fasrUnitBytes is one SR state unit (§III-D): 20 B of SR state, five 1-B
// bitmap head/tail pointer pairs, five 10-bit compression-cnts and five
// 3-bit lost-cnts.
const fasrUnitBytes = 38

type fasrScheme struct {
	p      Params
	units  *UnitPool
	blocks *BlockPool
	counts fasrCounts
}

// fasrCounts are what the NIC's FaSR halves did (Counters).
type fasrCounts struct {
	// FaSR's paths (§III-B): operations on the receiver (out-of-order
	// packet recorded, expected PSN moved) and sender (SACK, timeout,
	// FNACK handled) that needed no bitmap, and those that did.
	rxFast, rxSlow, txFast, txSlow uint64
	// Recoveries that found the pools empty and fell back to go-back-N
	// (§III-D "Exhausting of shared pool"), and packets dropped for want
	// of a unit or blocks.
	fallbacks, poolDrops uint64
	// FNACKs the receivers sent, and those that restarted a sender's
	// round.
	fnacksSent, fnacksTaken uint64
	// Recoveries whose lost-cnt overflowed its 3 bits (§III-D).
	lostCntOverflows uint64
	sel              selCounts // the senders'
}

func newFasr(p Params) *fasrScheme {
	return &fasrScheme{p: p,
		units:  NewUnitPool("fasr_sr_units", fasrUnits(p), fasrUnitBytes),
		blocks: NewBlockPool("fasr_bitmap_blocks", fasrBlocks(p), fasrBlockBits(p), true)}
}

func (s *fasrScheme) Name() string       { return FaSR }
func (s *fasrScheme) Params() Params     { return s.p }
func (s *fasrScheme) window() int        { return min(s.p.BDPPackets, MaxBDPPackets) }
func (s *fasrScheme) ReorderWindow() int { return s.window() }
func (s *fasrScheme) Caps() Caps         { return Caps{} }
func (s *fasrScheme) SharedOnChipBytes() int {
	return s.units.Stats().Bytes + s.blocks.Stats().Bytes
}

// Counters (softnic stats, /metrics; docs/metrics.md).
func (s *fasrScheme) Counters() []Counter {
	c := &s.counts
	return append([]Counter{
		{"sr_rx_fast_path", "FaSR receiver operations without a bitmap.", c.rxFast},
		{"sr_rx_slow_path", "FaSR receiver operations with a bitmap.", c.rxSlow},
		{"sr_tx_fast_path", "FaSR sender operations without a bitmap.", c.txFast},
		{"sr_tx_slow_path", "FaSR sender operations with a bitmap.", c.txSlow},
		{"sr_pool_fallbacks", poolFallbacksHelp, c.fallbacks},
		{"sr_pool_drops", poolDropsHelp, c.poolDrops},
		{"sr_fnacks_taken", "FNACKs that restarted a sender's round.", c.fnacksTaken},
		{"sr_lost_cnt_overflows", "FaSR recoveries whose 3-bit lost-cnt overflowed.", c.lostCntOverflows},
	}, c.sel.counters()...)
}

// Pools: the SR state units and the bitmap blocks.
func (s *fasrScheme) Pools() []PoolStats { return []PoolStats{s.units.Stats(), s.blocks.Stats()} }

func (s *fasrScheme) NewSender() Sender {
	return &fasrSender{srUnit: srUnit{s: s, unit: -1}, selSender: newSelSender(s.blocks, s.window(), s.p, &s.counts.sel)}
}

func (s *fasrScheme) NewReceiver() Receiver {
	return &fasrReceiver{srUnit: srUnit{s: s, unit: -1}, window: s.window(), bits: newChain(), gbn: gbnReceiver{nakInterval: s.p.NakInterval}}
}

// fasrPointerBytes is the SR state pointer FaSR adds to every QPC (§V-A),
// charged once per QP (on its receiver half): the unit it points to holds
// the QP's SR state in either direction.
const fasrPointerBytes = 1

// srUnit is a QP's claim on an SR state unit. While its context is
// evicted the unit goes back to the pool; it is taken again on the next
// access, and a QP that finds none keeps its state in host memory until
// its recovery ends.
type srUnit struct {
	s      *fasrScheme
	unit   int
	inRec  bool
	parked bool // evicted while in recovery (inRec stays set): take a unit again
}

func (u *srUnit) claim() bool {
	i, ok := u.s.units.Alloc()
	u.unit = i
	if ok {
		u.inRec = true
	}
	return ok
}

func (u *srUnit) release() {
	u.s.units.Free(u.unit)
	u.unit, u.inRec, u.parked = -1, false, false
}

func (u *srUnit) park() {
	if u.inRec && u.unit >= 0 {
		u.s.units.Free(u.unit)
		u.unit, u.parked = -1, true
	}
}

// touch takes a unit back after an eviction.
func (u *srUnit) touch() {
	if u.parked {
		u.parked = false
		u.unit, _ = u.s.units.Alloc()
	}
}

// fasrReceiver is FaSR's responder half.
type fasrReceiver struct {
	srUnit   // and its scheme, s
	window   int
	nxt      qp.PSN // RCV-NXT
	sackHigh qp.PSN
	lost     int
	overflow bool
	fallback bool  // go-back-N until the recovery ends
	run      span  // received, no bits needed: (RCV-NXT, sack-high] on the fast path, compression-cnt on the slow one
	bits     chain // the slow path's bitmap
	gbn      gbnReceiver
}

func (r *fasrReceiver) Reset(start qp.PSN) {
	r.endRecovery()
	r.nxt = start
	r.gbn.Reset(start)
}

func (r *fasrReceiver) endRecovery() {
	if r.inRec {
		r.release()
	}
	r.bits.release(r.s.blocks)
	r.bits = newChain()
	r.run = emptySpan(r.nxt)
	r.lost, r.overflow, r.fallback = 0, false, false
}

func (r *fasrReceiver) slow() bool { return !r.bits.empty() }

func (r *fasrReceiver) received(psn qp.PSN) bool {
	return r.run.has(psn) || r.bits.get(r.s.blocks, psn)
}

// addLost grows lost-cnt by n, saturating at its 3 bits.
func (r *fasrReceiver) addLost(n int) {
	if r.overflow {
		return
	}
	if r.lost += n; r.lost > MaxLostCnt {
		r.lost, r.overflow = MaxLostCnt, true
		r.s.counts.lostCntOverflows++
	}
}

func (r *fasrReceiver) sack(keep bool) Decision {
	return Decision{Keep: keep, Reply: ReplySack, LostCnt: uint8(r.lost), Overflow: r.overflow}
}

// drop refuses a packet go-back-N style: a NAK of RCV-NXT at most once per
// NAK interval.
func (r *fasrReceiver) drop(now Time, psn qp.PSN) Decision {
	r.s.counts.poolDrops++
	return Decision{Reply: r.gbn.OnOutOfSequence(now, r.nxt, psn, false).Reply}
}

// blocksFor is how many blocks a chain starting at from needs to reach psn.
func (r *fasrReceiver) blocksFor(from, psn qp.PSN) int {
	b := r.s.blocks.BlockBits()
	return (int(psn.Diff(from)) + b) / b
}

func (r *fasrReceiver) OnOutOfSequence(now Time, epsn, psn qp.PSN, _ bool) Decision {
	r.OnInSequence(now, epsn)
	r.touch()
	d := int(psn.Diff(r.nxt))
	if d <= 0 || d >= r.window {
		return Decision{}
	}
	st := &r.s.counts
	if !r.inRec {
		if !r.claim() {
			st.fallbacks++
			return r.drop(now, psn)
		}
		r.sackHigh, r.lost, r.overflow = psn, 0, false
		r.addLost(d)
		if d == 1 { // fast path: only RCV-NXT is missing
			r.run = span{psn, psn.Next()}
			st.rxFast++
			return r.sack(true)
		}
		r.bits.start(r.nxt.Next())
		if !r.bits.set(r.s.blocks, psn) {
			r.release()
			st.fallbacks++
			return r.drop(now, psn)
		}
		st.rxSlow++
		return r.sack(true)
	}
	if psn.After(r.sackHigh) {
		if r.fallback {
			return r.drop(now, psn)
		}
		gap := int(psn.Diff(r.sackHigh)) - 1
		switch {
		case !r.slow() && gap == 0:
			r.run.add(psn)
			st.rxFast++
		case !r.slow():
			// The slow path begins: the run after RCV-NXT stays a count
			// when it spans a block, else its bits go into the bitmap.
			from := r.run.end
			if r.run.len() < r.s.blocks.BlockBits() {
				from = r.nxt.Next()
			}
			if r.blocksFor(from, psn) > r.s.blocks.Free() {
				r.s.blocks.stats.Exhausted++
				r.fallback = true
				st.fallbacks++
				return r.drop(now, psn)
			}
			r.bits.start(from)
			if from != r.run.end {
				for p := r.run.start; p != r.run.end; p = p.Next() {
					r.bits.set(r.s.blocks, p)
				}
				r.run = emptySpan(r.nxt)
			}
			r.bits.set(r.s.blocks, psn)
			st.rxSlow++
		default:
			if !r.bits.set(r.s.blocks, psn) {
				r.fallback = true
				st.fallbacks++
				return r.drop(now, psn)
			}
			st.rxSlow++
		}
		r.addLost(gap)
		r.sackHigh = psn
		return r.sack(true)
	}
	// Between RCV-NXT and sack-high.
	if r.received(psn) {
		if r.fallback {
			return Decision{} // go-back-N resends what it holds: no word
		}
		return r.sack(false) // a duplicate: acknowledge it again
	}
	if r.fallback {
		return r.drop(now, psn)
	}
	// It fills a hole other than RCV-NXT: a retransmission that overtook
	// a lost one, or an original that reordering delayed. The receiver
	// cannot tell them apart, so it keeps it (its bit lies inside the
	// chain: no block is taken) and still says FNACK; the sender acts on
	// the FNACK only if it had resent that PSN (docs/recovery.md,
	// "Reordering is not loss").
	if !r.slow() || !r.bits.set(r.s.blocks, psn) {
		st.fnacksSent++
		return Decision{Reply: ReplyFNACK}
	}
	if !r.overflow && r.lost > 1 {
		r.lost--
	}
	st.fnacksSent++
	return Decision{Keep: true, Reply: ReplyFNACK}
}

func (r *fasrReceiver) OnInSequence(_ Time, epsn qp.PSN) {
	if !epsn.After(r.nxt) {
		return
	}
	r.gbn.OnInSequence(0, epsn)
	r.touch()
	if !r.inRec {
		r.nxt = epsn
		return
	}
	if !r.overflow && r.lost > 0 {
		r.lost-- // the retransmission of RCV-NXT came
	}
	wasSlow := r.slow()
	r.nxt = epsn
	if r.nxt.After(r.sackHigh) {
		if wasSlow {
			r.s.counts.rxSlow++
		} else {
			r.s.counts.rxFast++
		}
		r.endRecovery()
		return
	}
	r.bits.advance(r.s.blocks, r.nxt)
	if !r.run.empty() && !r.run.start.After(r.nxt) {
		if r.run.end.After(r.nxt.Next()) {
			r.run.start = r.nxt.Next()
		} else {
			r.run = emptySpan(r.nxt)
		}
	}
	r.s.counts.rxSlow++
	if wasSlow && !r.overflow && r.lost == 1 {
		// Only RCV-NXT is missing again: back to the fast path.
		r.bits.release(r.s.blocks)
		r.bits = newChain()
		r.run = span{r.nxt.Next(), r.sackHigh.Next()}
	}
}

func (r *fasrReceiver) Kept(psn qp.PSN) (bool, bool) {
	if !r.inRec || !psn.After(r.nxt) || psn.After(r.sackHigh) {
		return false, false
	}
	return r.received(psn), false
}

func (r *fasrReceiver) Deadline() (Time, bool)    { return 0, false }
func (r *fasrReceiver) OnTimer(Time, qp.PSN) bool { return false }
func (r *fasrReceiver) OnChipBytes() int          { return fasrPointerBytes }

func (r *fasrReceiver) OnEvict() {
	r.bits.spill(r.s.blocks)
	r.park()
}

// NakOutstanding is the go-back-N fallback's (the pools ran out, §III-D).
func (r *fasrReceiver) NakOutstanding() bool { return r.gbn.NakOutstanding() }

// fasrSender is FaSR's requester half: the shared selective sender with
// FaSR's reading of lost-cnt.
type fasrSender struct {
	srUnit // and its scheme, s
	selSender
	sackHigh qp.PSN
	lost     int
	overflow bool
}

func (f *fasrSender) Reset(start qp.PSN) {
	if f.inRec {
		f.release()
	}
	f.reset(start)
	f.lost, f.overflow = 0, false
}

func (f *fasrSender) OnChipBytes() int { return 0 }

func (f *fasrSender) OnEvict() {
	f.selSender.evict()
	f.park()
}

func (f *fasrSender) OnAck(now Time, unacked qp.PSN) qp.PSN {
	f.tick(now, f.lastSent)
	f.touch()
	b := f.ack(unacked)
	if f.inRec && b.After(f.sackHigh) {
		f.release()
		f.lost, f.overflow = 0, false
	}
	return b
}

func (f *fasrSender) OnSack(now Time, from, to qp.PSN, kind SackKind, sent qp.PSN) {
	f.tick(now, sent)
	f.sack(from, to, kind, sent)
}

// OnFeedback reads a SACK with its lost-cnt (onLostCountSack) and an
// FNACK (onFNACK); a sequence NAK is onNak (onFeedback).
func (f *fasrSender) OnReply(now Time, a *Ack) (qp.PSN, Resume) { return ReadReply(f, now, a) }

func (f *fasrSender) OnFeedback(now Time, fb Feedback) Resume {
	switch fb.Kind {
	case ReplySack:
		return f.onLostCountSack(now, fb.Cum, fb.PSN, int(fb.LostCnt), fb.Overflow, fb.SackKind, fb.Sent)
	case ReplyFNACK:
		return f.onFNACK(now, fb.Cum, fb.PSN, fb.Sent)
	}
	return onFeedback(f, now, fb)
}

// onLostCountSack handles a SACK: the packets between UNACK and the first
// SACK are lost; later, a gap between the SACK and sack-high is lost only
// if lost-cnt grew, else it was the SACKs that were lost (§III-B2).
func (f *fasrSender) onLostCountSack(now Time, cum, sack qp.PSN, lostCnt int, overflow bool, kind SackKind, sent qp.PSN) Resume {
	f.tick(now, sent)
	if !sack.After(f.base) || int(sack.Diff(f.base)) >= f.window {
		return Resume{}
	}
	st := &f.s.counts
	if !f.inRec {
		if !f.claim() {
			st.fallbacks++
			f.recovery = false
			return Resume{GoBack: true, GoBackTo: f.base}
		}
		f.sackHigh = f.base
		f.lost = 0
	}
	if sack.After(f.sackHigh) {
		grew := overflow || f.overflow || lostCnt > f.lost
		if gap := f.sackHigh.Next(); !grew && gap != sack && gap.After(f.base) {
			// Their SACKs were lost, not they: not resent in this round.
			// Presumed, not acknowledged: lost-cnt also falls as
			// retransmissions arrive, so this is no proof, and only the
			// next round (timeout, FNACK) resends them if they never came.
			f.pooled.presume(span{gap, sack})
		}
		f.sackHigh = sack
	}
	if kind == Held { // a held READ or atomic completes only with its response
		f.pooled.hold(sack)
	} else {
		f.pooled.mark(f.base, sack)
	}
	f.raiseLossEdge(sack)
	f.lost, f.overflow = lostCnt, overflow
	f.enterRecovery(sent)
	if f.lostRetransmission(sack, false) {
		st.sel.lostRetransmits++
		f.restart(sent)
	}
	if f.pooled.bits.empty() {
		st.txFast++
	} else {
		st.txSlow++
	}
	return Resume{}
}

// onFNACK restarts the retransmissions from UNACK only when psn was
// resent in this round and the retransmission of UNACK's packet has gone
// unacknowledged for a hold (max(G, 4·RTTVAR), or RTO_low/8 without an
// estimate): then the PSNs resent before psn and still missing are taken
// as lost. An FNACK for a PSN not resent is an original that reordering
// delayed, and one that comes sooner may be a retransmission that
// jitter, not loss, let overtake another. The new round resets the hold,
// so FNACKs restart a QP's retransmissions at most once per hold
// (docs/recovery.md, "Lost retransmissions").
func (f *fasrSender) onFNACK(now Time, _, psn qp.PSN, sent qp.PSN) Resume {
	f.tick(now, sent)
	if !f.inRec || !f.recovery || !psn.Before(f.rtxNext) || !f.lostRetransmission(psn, true) {
		return Resume{}
	}
	f.s.counts.fnacksTaken++
	f.restart(sent)
	return Resume{}
}

// onNak is the receiver's go-back-N NAK (its pools were exhausted).
func (f *fasrSender) onNak(now Time, psn, sent qp.PSN) Resume {
	f.tick(now, sent)
	f.recovery = false
	return Resume{GoBack: true, GoBackTo: psn}
}

// OnTimeout: lost-cnt above 1 resends UNACK and the holes below sack-high,
// 1 only UNACK (the fast path), 0 everything from UNACK (§III-B2).
func (f *fasrSender) OnTimeout(now Time, unacked, sent qp.PSN) Resume {
	f.OnAck(now, unacked)
	st := &f.s.counts
	if !f.inRec || f.lost == 0 && !f.overflow {
		st.txFast++
		f.recovery = false
		return Resume{GoBack: true, GoBackTo: f.base}
	}
	if f.pooled.bits.empty() {
		st.txFast++
	} else {
		st.txSlow++
	}
	f.restart(sent)
	return Resume{}
}
