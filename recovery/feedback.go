package recovery

import "github.com/softnic/softnic/qp"

// nakSacker is what onFeedback needs of a sender: its reading of a
// sequence NAK, and OnSack.
type nakSacker interface {
	onNak(now Time, psn, sent qp.PSN) Resume
	OnSack(now Time, from, to qp.PSN, kind SackKind, sent qp.PSN)
}

// onFeedback is the reading of a reply that every sender shares, and
// that the schemes without a reading of their own use whole (a FaSR
// sender reads its SACK and FNACK itself):
//
//   - a sequence NAK is onNak;
//   - a SACK (IRN's NACK, §3.1) is a NAK, a loss signal whose Resume is
//     not acted on, and a selective acknowledgement of the PSN held;
//   - an FNACK is a NAK;
//   - a holes NACK (MELO §3.2.4) acknowledges selectively what lies
//     between the holes, and between the last one and High, request by
//     request; it says nothing of what lies before the oldest hole.
func onFeedback(s nakSacker, now Time, fb Feedback) Resume {
	switch fb.Kind {
	case ReplySeqNak, ReplyFNACK:
		return s.onNak(now, fb.Cum, fb.Sent)
	case ReplySack:
		s.onNak(now, fb.Cum, fb.Sent)
		s.OnSack(now, fb.PSN, fb.PSN, fb.SackKind, fb.Sent)
	case ReplyHoles:
		for i, hole := range fb.Holes {
			if hole.Len == 0 {
				break
			}
			from, to := hole.Start.Add(hole.Len), fb.High
			if i+1 < len(fb.Holes) && fb.Holes[i+1].Len > 0 {
				to = fb.Holes[i+1].Start.Prev()
			}
			sackMessages(s, now, from, to, fb.Messages, fb.Sent)
		}
	}
	return Resume{}
}

// sackMessages reports from..to (inclusive) as held by the responder,
// request by request: SENDs and WRITEs are received, READs and atomics
// held. It stops at a PSN of no outstanding request.
func sackMessages(s nakSacker, now Time, from, to qp.PSN, m Messages, sent qp.PSN) {
	for p := from; !p.After(to); {
		last, kind, ok := m.Message(p)
		if !ok {
			return
		}
		end := last
		if end.After(to) {
			end = to
		}
		s.OnSack(now, p, end, kind, sent)
		p = end.Next()
	}
}

// ReadReply is the reading of a reply (Sender.OnReply) that every
// scheme here shares, in the order the transport used to call the
// pieces:
//
//   - unless the reply stands alone, the requests before its cumulative
//     acknowledgement are received (their SENDs and WRITEs: OnSack; a READ
//     or atomic before it only completes with its response) and the
//     cumulative acknowledgement moves (OnAck);
//   - then the reply's own news: the PSN it answers (OnSack) or its
//     feedback (OnFeedback), after which the cumulative acknowledgement is
//     read again (OnAck). A plain ACK has none.
func ReadReply(s Sender, now Time, a *Ack) (cum qp.PSN, r Resume) {
	cum = a.Unacked
	if !a.Alone {
		receivedBefore(s, now, a)
		cum = s.OnAck(now, a.Unacked)
	}
	switch {
	case a.Own:
		s.OnSack(now, a.PSN, a.PSN, a.SackKind, a.Sent)
	case a.Kind != ReplyNone:
		r = s.OnFeedback(now, a.Feedback)
	default:
		return cum, r
	}
	return s.OnAck(now, cum), r
}

// receivedBefore reports the SENDs and WRITEs from a.Unacked up to
// a.Cum as received, request by request (a.Messages).
func receivedBefore(s Sender, now Time, a *Ack) {
	for p := a.Unacked; p.Before(a.Cum); {
		last, kind, ok := a.Messages.Message(p)
		if !ok {
			return
		}
		end := last
		if !end.Before(a.Cum) {
			end = a.Cum.Prev()
		}
		if kind == Received {
			s.OnSack(now, p, end, Received, a.Sent)
		}
		p = end.Next()
	}
}
