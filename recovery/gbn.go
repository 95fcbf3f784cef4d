package recovery

import (
	"time"

	"github.com/softnic/softnic/qp"
)

// GBN is go-back-N as commodity RoCE NICs do it (Improved go-back-N §II;
// IBA §9.7.5): the responder NAKs (PSN sequence error) the first
// out-of-sequence packet and then at most once per NAK interval, dropping
// every out-of-order packet; the requester goes back to the NAKed PSN, and
// an ACK timeout restarts it from the oldest unacknowledged PSN.
const GBN = "gbn"

func init() { Register(GBN, func(p Params) Scheme { return gbnScheme{p: p} }) }

// gbnWindow is go-back-N's knob gbn.window: at most this many packets in
// flight, IRN's BDP-FC (§3.2) on a go-back-N sender, as IRN's Fig. 7
// runs "IRN with go-back-N" (its loss recovery replaced, BDP-FC kept).
// 0, the default, is RoCE's go-back-N, which has no cap.
var gbnWindow = IntKnob(GBN, "window", 0, 0, MaxBDPPackets,
	"packets in flight at most, IRN's BDP-FC on go-back-N (IRN Fig. 7: 110); 0: no cap, as RoCE")

type gbnScheme struct {
	NoStats
	p Params
}

func (s gbnScheme) Name() string           { return GBN }
func (s gbnScheme) Params() Params         { return s.p }
func (s gbnScheme) NewSender() Sender      { return &gbnSender{window: gbnWindow(s.p)} }
func (s gbnScheme) NewReceiver() Receiver  { return &gbnReceiver{nakInterval: s.p.NakInterval} }
func (s gbnScheme) SharedOnChipBytes() int { return 0 }
func (s gbnScheme) ReorderWindow() int     { return 0 }
func (s gbnScheme) Caps() Caps             { return Caps{} }

// gbnSender keeps no state but its cap: the transport's cumulative-ack
// PSN and send cursor are all go-back-N needs.
type gbnSender struct {
	NoEvict
	window int // gbn.window, 0: none
}

func (*gbnSender) Reset(qp.PSN)                                  {}
func (s *gbnSender) Window() int                                 { return s.window }
func (*gbnSender) Copies(bool) int                               { return 1 }
func (*gbnSender) OnAck(_ Time, unacked qp.PSN) qp.PSN           { return unacked }
func (*gbnSender) OnSack(Time, qp.PSN, qp.PSN, SackKind, qp.PSN) {}
func (*gbnSender) NextRetransmit() (qp.PSN, bool)                { return 0, false }
func (*gbnSender) Retransmitted(qp.PSN)                          {}
func (*gbnSender) OnChipBytes() int                              { return 0 }
func (s *gbnSender) RetransmittedAt(_ Time, psn, _ qp.PSN)       { s.Retransmitted(psn) }
func (*gbnSender) onNak(_ Time, psn, _ qp.PSN) Resume            { return Resume{GoBack: true, GoBackTo: psn} }
func (s *gbnSender) OnFeedback(now Time, fb Feedback) Resume     { return onFeedback(s, now, fb) }
func (s *gbnSender) OnReply(now Time, a *Ack) (qp.PSN, Resume)   { return ReadReply(s, now, a) }
func (*gbnSender) OnTimeout(_ Time, unacked, _ qp.PSN) Resume {
	return Resume{GoBack: true, GoBackTo: unacked}
}

// Timeout is the negotiated local ACK timeout; once the path is measured,
// RFC 6298's RTO when that is longer. IBA's timeout is the least a
// requester waits, so it stays the floor: adapting makes go-back-N wait
// longer on a slow path (no spurious go-backs of a whole window), never
// shorter than the QP asked for.
func (*gbnSender) Timeout(base time.Duration, _ int, rtt RTT) time.Duration {
	if !rtt.Valid {
		return base
	}
	return max(base, rtt.RTO())
}

// gbnReceiver remembers only whether a NAK is outstanding for the current
// expected PSN and when it went out: 4 bytes of timestamp and a flag in a
// NIC, which we charge as 5 bytes.
type gbnReceiver struct {
	NoEvict
	nakInterval time.Duration
	naked       bool // a NAK was sent and the expected PSN has not arrived since
	lastNak     Time
}

const gbnReceiverOnChipBytes = 5

func (r *gbnReceiver) Reset(qp.PSN) { r.naked = false }

func (r *gbnReceiver) OnOutOfSequence(now Time, _, _ qp.PSN, _ bool) Decision {
	if r.naked && now-r.lastNak < r.nakInterval {
		return Decision{}
	}
	r.naked, r.lastNak = true, now
	return Decision{Reply: ReplySeqNak}
}

func (r *gbnReceiver) OnInSequence(Time, qp.PSN) { r.naked = false }
func (r *gbnReceiver) Kept(qp.PSN) (bool, bool)  { return false, false }
func (r *gbnReceiver) Deadline() (Time, bool)    { return 0, false }
func (r *gbnReceiver) OnTimer(Time, qp.PSN) bool { return false }
func (r *gbnReceiver) OnChipBytes() int          { return gbnReceiverOnChipBytes }

// NakOutstanding reports whether a sequence NAK for the expected PSN went
// out and the expected PSN has not arrived since (the dataplane's ACK
// timeout classification, Improved go-back-N Fig. 3).
func (r *gbnReceiver) NakOutstanding() bool { return r.naked }
