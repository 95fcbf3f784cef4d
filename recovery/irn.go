package recovery

import "github.com/softnic/softnic/qp"

// IRN is the loss recovery of "Revisiting Network Support for RDMA"
// (Mittal et al., SIGCOMM 2018): selective repeat plus BDP-FC, so that RoCE
// needs no lossless network. docs/recovery.md records every choice made
// where the paper leaves room.
//
//   - Receiver (IRN §3.1, §5.3): out-of-order packets are kept (placed in
//     application memory by the transport) and tracked in a 2-bitmap,
//     arrived and last-of-message, so that MSN increments and completions
//     still happen in order when the expected PSN moves past them (§5.3.3).
//     Every out-of-order packet is answered with a NACK carrying the
//     cumulative acknowledgement (the expected PSN) and the PSN that
//     triggered it, a selective acknowledgement.
//   - Sender (IRN §3.1): a SACK bitmap over the in-flight window. A NACK or
//     a timeout starts loss recovery with the recovery sequence the highest
//     PSN sent; in recovery the cumulative acknowledgement is retransmitted
//     first, and after it only packets below a selectively acknowledged
//     one. Recovery ends when the cumulative acknowledgement passes the
//     recovery sequence.
//   - BDP-FC (IRN §3.2): at most BDPPackets in flight.
//   - Timeouts (IRN §3.1): RTO_low while at most N packets are in flight,
//     RTO_high otherwise.
//   - READ (a departure from §5.2 and §5.4, see docs/recovery.md): every
//     READ request asks for one response packet, so a READ PSN is a request
//     and its response, tracked like any packet: a response acknowledges
//     its PSN (Answered), and a request the responder holds out of order
//     is not resent (Held) but completes only with its response.
const IRN = "irn"

// MaxBDPPackets bounds Params.BDPPackets for IRN: its bitmaps are sized by
// it, and a window must stay far inside the 2^23 PSNs that the responder
// treats as "ahead".
const MaxBDPPackets = 1 << 16

func init() { Register(IRN, func(p Params) Scheme { return irnScheme{p: p} }) }

// irnTimeoutAll is IRN's knob irn.timeout_all. IRN §3.1 enters recovery
// on a timeout as on a NACK: the cumulative acknowledgement is resent
// first, and a later packet counts as lost only once a higher one is
// acknowledged selectively. When the whole tail of a window is lost
// nothing is ever acknowledged selectively, so each timeout recovers one
// packet: a flow whose last 30 packets died takes 30 RTO_high (issue 23's
// incast). With 1 a timeout presumes every packet sent and not
// acknowledged lost and resends each once, as TCP does after an RTO
// (RFC 6675 §5.1); RTO_high is above the longest round trip (§4.1), so
// what it resends has left the network. 0, the default, is §3.1 as
// written.
var irnTimeoutAll = IntKnob(IRN, "timeout_all", 0, 0, 1,
	"1: a timeout resends every unacknowledged packet once (TCP's RTO); 0: the cumulative acknowledgement, then what SACKs show (IRN §3.1)")

type irnScheme struct {
	NoStats
	p Params
}

func (s irnScheme) Name() string   { return IRN }
func (s irnScheme) Params() Params { return s.p }

func (s irnScheme) window() int { return min(s.p.BDPPackets, MaxBDPPackets) }

func (s irnScheme) NewSender() Sender {
	w := s.window()
	b := &sackBitmaps{sacked: newPSNBitmap(w), held: newPSNBitmap(w), resent: newPSNBitmap(w)}
	return &irnSender{srSender: srSender{rec: b, window: w, rtoLow: s.p.RTOLow, rtoHigh: s.p.RTOHigh,
		lowThreshold: s.p.RTOLowThreshold}, bits: b, timeoutAll: irnTimeoutAll(s.p) == 1}
}

func (s irnScheme) NewReceiver() Receiver {
	w := s.window()
	return &irnReceiver{window: w, arrived: newPSNBitmap(w), last: newPSNBitmap(w)}
}

// SharedOnChipBytes is IRN's shared state (§6.1): the BDP cap, RTO_low and
// N, 10 bytes per NIC.
func (s irnScheme) SharedOnChipBytes() int { return irnSharedOnChipBytes }

func (s irnScheme) ReorderWindow() int { return s.window() }

func (s irnScheme) Caps() Caps { return Caps{} }

// On-chip state as IRN §6.1 counts it, in bits. Per QP: 52 bits of state at
// each end (the PSN to retransmit and the recovery sequence, 24 bits each,
// and 4 bits of flags); at the responder 56 more for the READ timer and the
// READ in progress; and five bitmaps of the BDP cap — two at the requester
// (SACKs and READ responses) and three at the responder (the 2-bitmap and
// the SACKs of READ responses). softnic's requester drives READ recovery
// itself and keeps three (acknowledged, held, resent in this recovery), its
// responder two and no READ state (docs/recovery.md); it charges the
// paper's figure so that its SRAM results compare with the paper's.
const (
	irnStateBits         = 52
	irnResponderReadBits = 56
	irnSenderBitmaps     = 2
	irnReceiverBitmaps   = 3
	irnSharedOnChipBytes = 10
)

// onChipBytes rounds state bits plus bitmaps of window bits up to bytes.
func onChipBytes(stateBits, bitmaps, window int) int {
	return (stateBits + bitmaps*window + 7) / 8
}

// irnSender is IRN's requester half: the shared selective-repeat core
// with per-QP bitmaps as its record (sackBitmaps).
type irnSender struct {
	NoEvict
	srSender
	bits       *sackBitmaps // the core's record
	timeoutAll bool         // irn.timeout_all
}

func (s *irnSender) Reset(start qp.PSN) { s.reset(start) }

// OnAck moves the cumulative acknowledgement to unacked and then over the
// PSNs already acknowledged selectively; recovery ends once it passes the
// recovery sequence (§3.1).
func (s *irnSender) OnAck(_ Time, unacked qp.PSN) qp.PSN { return s.ack(unacked) }

// OnSack records what the responder acknowledged selectively (§3.1).
// Every PSN below an acknowledged one is lost unless it is accounted for
// itself, and an acknowledgement that leaves such a hole is a loss signal:
// IRN enters recovery on every NACK. A READ response or atomic ACK also
// says that the responses of the requests before it, which the responder
// answered in order, were lost if they have not come.
func (s *irnSender) OnSack(_ Time, from, to qp.PSN, kind SackKind, sent qp.PSN) {
	s.sack(from, to, kind, sent)
}

// OnFeedback: a NACK is a NAK and a SACK (onFeedback).
func (s *irnSender) OnFeedback(now Time, fb Feedback) Resume   { return onFeedback(s, now, fb) }
func (s *irnSender) OnReply(now Time, a *Ack) (qp.PSN, Resume) { return ReadReply(s, now, a) }

// onNak: the responder lacks psn, which is lost. It is a loss signal,
// never an error or a reason to go back (Appendix B.4 keeps go-back-N for
// RNR NAKs).
func (s *irnSender) onNak(_ Time, psn, sent qp.PSN) Resume {
	s.enterRecovery(sent)
	s.raiseLossEdge(psn.Next())
	return Resume{}
}

// OnTimeout (re)starts recovery: the cumulative acknowledgement first, then
// every hole below a selective acknowledgement again, including
// retransmissions that were lost themselves and held requests whose
// responses never came.
func (s *irnSender) OnTimeout(_ Time, unacked, sent qp.PSN) Resume {
	s.ack(unacked)
	s.restart(sent)
	if s.timeoutAll {
		s.raiseLossEdge(sent) // irn.timeout_all: every packet out is lost
	}
	return Resume{}
}

func (s *irnSender) RetransmittedAt(_ Time, psn, _ qp.PSN) { s.Retransmitted(psn) }

func (s *irnSender) Retransmitted(psn qp.PSN) {
	if !psn.Before(s.base) && s.bits.inWindow(s.base, psn) {
		s.bits.resent.set(psn)
	}
}

func (s *irnSender) OnChipBytes() int {
	return onChipBytes(irnStateBits, irnSenderBitmaps, s.window)
}

// sackBitmaps is IRN's record (srRecord) of the responder's state beyond
// the cumulative acknowledgement: the SACK bitmap over the in-flight
// window and, besides it, which READ and atomic requests the responder
// holds unanswered and which PSNs were resent in the current round, so
// that each lost packet goes out once per round whatever order the news
// comes in (IRN §6.1 counts two bitmaps at the requester, SACKs and READ
// responses; docs/recovery.md).
type sackBitmaps struct {
	sacked psnBitmap // acknowledged selectively, at or after base
	held   psnBitmap // READ or atomic requests the responder holds, unanswered
	resent psnBitmap // retransmitted in this round
}

func (b *sackBitmaps) reset(qp.PSN) {
	b.sacked.clearAll()
	b.held.clearAll()
	b.resent.clearAll()
}

func (b *sackBitmaps) advance(base, unacked qp.PSN) qp.PSN {
	if unacked.After(base) {
		b.clearRange(base, unacked)
		base = unacked
	}
	for b.sacked.get(base) {
		b.clearRange(base, base.Next())
		base = base.Next()
	}
	return base
}

// inWindow reports whether psn fits the bitmaps: BDP-FC never lets a PSN
// beyond them be in flight.
func (b *sackBitmaps) inWindow(base, psn qp.PSN) bool { return int(psn.Diff(base)) < b.sacked.size() }

func (b *sackBitmaps) fits(base, from, _ qp.PSN) bool { return b.inWindow(base, from) }

// settled: acknowledged, held by the responder, or resent already in this
// round.
func (b *sackBitmaps) settled(psn qp.PSN) bool {
	return b.sacked.get(psn) || b.held.get(psn) || b.resent.get(psn)
}

// answered forgets the held requests before from: the responder answers
// in order, so their responses were lost.
func (b *sackBitmaps) answered(base, from qp.PSN) (qp.PSN, bool) {
	first, ok := qp.PSN(0), false
	for p := base; p.Before(from); p = p.Next() {
		if b.held.get(p) {
			b.held.clear(p)
			if !ok {
				first, ok = p, true
			}
		}
	}
	return first, ok
}

// record sets the bits of from..to, as far as the bitmaps reach. The loss
// edge of a held request is from: the PSNs before it are lost, the held
// ones are not.
func (b *sackBitmaps) record(base, from, to qp.PSN, kind SackKind) qp.PSN {
	bits, edge := &b.sacked, to.Next()
	if kind == Held {
		bits, edge = &b.held, from
	}
	for p := from; b.inWindow(base, p); p = p.Next() {
		bits.set(p)
		if p == to {
			break
		}
	}
	return edge
}

// newRound forgets what was resent, and on a restart the held requests
// too, whose responses may be what was lost.
func (b *sackBitmaps) newRound(restart bool) {
	if restart {
		b.held.clearAll()
	}
	b.resent.clearAll()
}

func (b *sackBitmaps) clearRange(from, to qp.PSN) {
	b.sacked.clearRange(from, to)
	b.held.clearRange(from, to)
	b.resent.clearRange(from, to)
}

// irnReceiver is IRN's responder half: the 2-bitmap of packets kept out of
// order (§5.3.3), relative to the expected PSN.
type irnReceiver struct {
	NoEvict
	window  int
	base    qp.PSN    // the expected PSN
	arrived psnBitmap // kept out of order
	last    psnBitmap // ... and the last packet of its message
}

func (r *irnReceiver) Reset(start qp.PSN) {
	r.arrived.clearAll()
	r.last.clearAll()
	r.base = start
}

// OnOutOfSequence keeps every packet within the window and NACKs it with a
// selective acknowledgement (§3.1); a packet already kept is acknowledged
// again, since the first NACK may have been lost. Beyond the window (a
// sender that ignores BDP-FC) a packet is dropped without a word.
func (r *irnReceiver) OnOutOfSequence(now Time, epsn, psn qp.PSN, last bool) Decision {
	r.OnInSequence(now, epsn)
	if d := psn.Diff(epsn); d <= 0 || int(d) >= r.window {
		return Decision{}
	}
	if r.arrived.get(psn) {
		return Decision{Reply: ReplySack}
	}
	r.arrived.set(psn)
	if last {
		r.last.set(psn)
	}
	return Decision{Keep: true, Reply: ReplySack}
}

func (r *irnReceiver) OnInSequence(_ Time, epsn qp.PSN) {
	if epsn.After(r.base) {
		r.arrived.clearRange(r.base, epsn)
		r.last.clearRange(r.base, epsn)
		r.base = epsn
	}
}

func (r *irnReceiver) Kept(psn qp.PSN) (kept, last bool) {
	if d := psn.Diff(r.base); d < 0 || int(d) >= r.window {
		return false, false
	}
	return r.arrived.get(psn), r.last.get(psn)
}

func (r *irnReceiver) Deadline() (Time, bool)    { return 0, false }
func (r *irnReceiver) OnTimer(Time, qp.PSN) bool { return false }

// NakOutstanding is false: IRN answers each out-of-order packet with a
// NACK of its own and keeps no sequence NAK outstanding.
func (r *irnReceiver) NakOutstanding() bool { return false }

func (r *irnReceiver) OnChipBytes() int {
	return onChipBytes(irnStateBits+irnResponderReadBits, irnReceiverBitmaps, r.window)
}

// psnBitmap is one bit per PSN, indexed by the PSN modulo its size (a
// power of two of at least the window, which divides 2^24), so that a
// window sliding with the cumulative acknowledgement needs no shifting:
// bits behind the window are cleared as it passes them.
type psnBitmap struct {
	words []uint64
	mask  uint32 // size in bits, less one
}

func newPSNBitmap(window int) psnBitmap {
	size := 64
	for size < window {
		size <<= 1
	}
	return psnBitmap{words: make([]uint64, size/64), mask: uint32(size - 1)}
}

func (b psnBitmap) size() int { return int(b.mask) + 1 }

func (b psnBitmap) get(p qp.PSN) bool {
	i := uint32(p) & b.mask
	return b.words[i/64]>>(i%64)&1 != 0
}

func (b psnBitmap) set(p qp.PSN) {
	i := uint32(p) & b.mask
	b.words[i/64] |= 1 << (i % 64)
}

func (b psnBitmap) clear(p qp.PSN) {
	i := uint32(p) & b.mask
	b.words[i/64] &^= 1 << (i % 64)
}

// clearRange clears the PSNs from from up to (not including) to.
func (b psnBitmap) clearRange(from, to qp.PSN) {
	if int(to.Diff(from)) >= b.size() {
		b.clearAll()
		return
	}
	for p := from; p != to; p = p.Next() {
		b.clear(p)
	}
}

func (b psnBitmap) clearAll() { clear(b.words) }
