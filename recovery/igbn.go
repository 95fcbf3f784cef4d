package recovery

import (
	"github.com/softnic/softnic/qp"
)

// IGBN is Improved go-back-N (Improved go-back-N paper, §III): go-back-N
// plus two end-host changes that remove most ACK timeouts.
//
//   - ST (send twice): the requester sends the last packet of every message
//     twice, so losing it (reason 1 of Fig. 4) or its ACK (reason 2) no
//     longer leaves both ends waiting for the ACK timeout.
//   - CE (check EPSN): when the last packet of a message arrives while the
//     expected PSN (EPSN) is still short of it, the responder starts a timer
//     for what is left of the NAK interval; when it fires and EPSN is still
//     short of that last PSN (LPSN), it NAKs EPSN again and restarts the
//     timer with the full interval. Receiving EPSN restarts the timer. This
//     covers a lost NAK (reason 3) and a retransmission lost again
//     (reason 4), which ordinary go-back-N can only recover by timeout
//     because a NAK is sent only on an unexpected packet.
const IGBN = "igbn"

// GBNST and GBNCE are the paper's two halves of IGBN on their own
// (Improved go-back-N §IV, Figs. 6 and 7 compare all four: GBN, GBN+ST,
// GBN+CE, IGBN): go-back-N with ST only, and go-back-N with CE only.
const (
	GBNST = "gbn-st"
	GBNCE = "gbn-ce"
)

func init() {
	Register(IGBN, func(p Params) Scheme { return igbnScheme{p: p, name: IGBN, st: true, ce: true} })
	Register(GBNST, func(p Params) Scheme { return igbnScheme{p: p, name: GBNST, st: true} })
	Register(GBNCE, func(p Params) Scheme { return igbnScheme{p: p, name: GBNCE, ce: true} })
}

// igbnScheme is go-back-N with ST, CE or both.
type igbnScheme struct {
	NoStats
	p      Params
	name   string
	st, ce bool
}

func (s igbnScheme) Name() string   { return s.name }
func (s igbnScheme) Params() Params { return s.p }
func (s igbnScheme) NewSender() Sender {
	if !s.st {
		return &gbnSender{}
	}
	return &igbnSender{}
}
func (s igbnScheme) NewReceiver() Receiver {
	if !s.ce {
		return &gbnReceiver{nakInterval: s.p.NakInterval}
	}
	return &igbnReceiver{gbn: gbnReceiver{nakInterval: s.p.NakInterval}}
}
func (s igbnScheme) SharedOnChipBytes() int { return 0 }
func (s igbnScheme) ReorderWindow() int     { return 0 }
func (s igbnScheme) Caps() Caps             { return Caps{} }

// igbnSender is go-back-N that sends a message's last packet twice.
type igbnSender struct{ gbnSender }

func (*igbnSender) Copies(last bool) int {
	if last {
		return 2
	}
	return 1
}

// igbnReceiver is the go-back-N receiver plus the CE timer: LPSN, an armed
// flag and the deadline (a NIC keeps LPSN in 3 bytes and the timer in 4).
type igbnReceiver struct {
	NoEvict
	gbn      gbnReceiver
	armed    bool
	lpsn     qp.PSN
	deadline Time
}

const igbnReceiverOnChipBytes = gbnReceiverOnChipBytes + 3 + 4

func (r *igbnReceiver) Reset(start qp.PSN) { r.gbn.Reset(start); r.armed = false }

func (r *igbnReceiver) OnOutOfSequence(now Time, epsn, psn qp.PSN, last bool) Decision {
	a := r.gbn.OnOutOfSequence(now, epsn, psn, last)
	if last && (!r.armed || psn.After(r.lpsn)) {
		// CE: start from what is left of the NAK interval (a NAK just sent
		// counts as the start of one).
		r.lpsn = psn
		if !r.armed {
			r.deadline = max(now, r.gbn.lastNak+r.gbn.nakInterval)
			if a.Reply == ReplySeqNak {
				r.deadline = now + r.gbn.nakInterval
			}
		}
		r.armed = true
	}
	return a
}

func (r *igbnReceiver) OnInSequence(now Time, epsn qp.PSN) {
	r.gbn.OnInSequence(now, epsn)
	if !r.armed {
		return
	}
	if epsn.After(r.lpsn) {
		r.armed = false // the message is complete
		return
	}
	r.deadline = now + r.gbn.nakInterval // EPSN arrived: restart the timer
}

func (r *igbnReceiver) Kept(qp.PSN) (bool, bool) { return false, false }

func (r *igbnReceiver) Deadline() (Time, bool) { return r.deadline, r.armed }

func (r *igbnReceiver) OnTimer(now Time, epsn qp.PSN) bool {
	if !r.armed || now < r.deadline {
		return false
	}
	if epsn.After(r.lpsn) {
		r.armed = false
		return false
	}
	r.deadline = now + r.gbn.nakInterval
	r.gbn.naked, r.gbn.lastNak = true, now
	return true
}

func (r *igbnReceiver) OnChipBytes() int { return igbnReceiverOnChipBytes }

// NakOutstanding is the go-back-N receiver's.
func (r *igbnReceiver) NakOutstanding() bool { return r.gbn.naked }
