package recovery

import (
	"testing"

	"github.com/softnic/softnic/qp"
)

// sackLog records what onFeedback reports.
type sackLog struct{ naks, sacks []string }

func (l *sackLog) onNak(_ Time, psn, _ qp.PSN) Resume {
	l.naks = append(l.naks, psnRange(psn, psn, Received))
	return Resume{GoBack: true, GoBackTo: psn}
}

func (l *sackLog) OnSack(_ Time, from, to qp.PSN, kind SackKind, _ qp.PSN) {
	l.sacks = append(l.sacks, psnRange(from, to, kind))
}

func psnRange(from, to qp.PSN, kind SackKind) string {
	return string(rune('0'+int(from)%10)) + "-" + string(rune('0'+int(to)%10)) + "/" + string(rune('0'+int(kind)))
}

// twoPSNRequests: requests of two PSNs from 0, the one at 4-5 a READ.
type twoPSNRequests struct{ end qp.PSN }

func (m twoPSNRequests) Message(psn qp.PSN) (qp.PSN, SackKind, bool) {
	if !psn.Before(m.end) {
		return 0, 0, false
	}
	last := psn | 1
	if psn/2 == 2 {
		return last, Held, true
	}
	return last, Received, true
}

// TestFeedbackHolesNack: a holes NACK acknowledges what lies between the
// holes and after the last one up to High, request by request, and stops
// where no request is; a SACK is a NAK whose go-back is not taken plus an
// OnSack; a sequence NAK and an FNACK are the NAK.
func TestFeedbackHolesNack(t *testing.T) {
	var l sackLog
	fb := Feedback{Kind: ReplyHoles, Cum: 0, High: 11, Holes: [3]Hole{{0, 1}, {6, 1}}, Messages: twoPSNRequests{end: 9}}
	if r := onFeedback(&l, 0, fb); r.GoBack || len(l.naks) != 0 {
		t.Fatalf("holes NACK: %+v, NAKs %v", r, l.naks)
	}
	want := []string{"1-1/0", "2-3/0", "4-5/1", "7-7/0", "8-9/0"} // 10 and 11 are no request's
	if len(l.sacks) != len(want) {
		t.Fatalf("holes NACK: OnSack %v, want %v", l.sacks, want)
	}
	for i := range want {
		if l.sacks[i] != want[i] {
			t.Fatalf("holes NACK: OnSack %v, want %v", l.sacks, want)
		}
	}
	l = sackLog{}
	if r := onFeedback(&l, 0, Feedback{Kind: ReplySack, Cum: 3, PSN: 5, SackKind: Held}); r.GoBack ||
		len(l.naks) != 1 || l.naks[0] != "3-3/0" || len(l.sacks) != 1 || l.sacks[0] != "5-5/1" {
		t.Fatalf("SACK: %+v, NAKs %v, SACKs %v", r, l.naks, l.sacks)
	}
	for _, k := range []Reply{ReplySeqNak, ReplyFNACK} {
		l = sackLog{}
		if r := onFeedback(&l, 0, Feedback{Kind: k, Cum: 4, PSN: 6}); !r.GoBack || r.GoBackTo != 4 || len(l.sacks) != 0 {
			t.Fatalf("reply %d: %+v, SACKs %v", k, r, l.sacks)
		}
	}
}

// callLog is a Sender that records the calls ReadReply makes, in order;
// its OnAck moves the cumulative acknowledgement to ackTo.
type callLog struct {
	gbnSender
	ackTo qp.PSN
	calls []string
}

func (l *callLog) OnAck(_ Time, unacked qp.PSN) qp.PSN {
	l.calls = append(l.calls, "ack"+string(rune('0'+int(unacked)%10)))
	return max(unacked, l.ackTo)
}

func (l *callLog) OnSack(_ Time, from, to qp.PSN, kind SackKind, _ qp.PSN) {
	l.calls = append(l.calls, "sack"+psnRange(from, to, kind))
}

func (l *callLog) OnFeedback(_ Time, fb Feedback) Resume {
	l.calls = append(l.calls, "feedback"+string(rune('0'+int(fb.Kind))))
	return Resume{GoBack: true, GoBackTo: fb.Cum}
}

// TestReadReply: one reply reaches a sender's pieces in the order the
// transport used to call them: the SENDs and WRITEs before the reply's
// cumulative acknowledgement (a READ only held is skipped), OnAck, then
// the reply's own news and OnAck again from where the first left it; a
// plain ACK stops after the first OnAck, and a reply that stands alone
// (StaR's RA and SDP) reports nothing before its own PSN.
func TestReadReply(t *testing.T) {
	msgs := twoPSNRequests{end: 8} // 0-1, 2-3, READ 4-5, 6-7
	for _, c := range []struct {
		name    string
		a       Ack
		want    string
		wantCum qp.PSN
		goBack  bool
	}{
		{"ack", Ack{Feedback: Feedback{Cum: 7}, Unacked: 1}, "sack1-1/0 sack2-3/0 sack6-6/0 ack1", 3, false},
		{"sack", Ack{Feedback: Feedback{Kind: ReplySack, Cum: 3, PSN: 6}, Unacked: 0}, "sack0-1/0 sack2-2/0 ack0 feedback2 ack3", 3, true},
		{"response", Ack{Feedback: Feedback{Cum: 4, PSN: 4, SackKind: Answered}, Own: true, Unacked: 2}, "sack2-3/0 ack2 sack4-4/2 ack3", 3, false},
		{"alone", Ack{Feedback: Feedback{Cum: 7, PSN: 5, SackKind: Received}, Own: true, Alone: true, Unacked: 2}, "sack5-5/0 ack2", 3, false},
	} {
		l := &callLog{ackTo: 3}
		c.a.Messages, c.a.Sent = msgs, 8
		cum, r := ReadReply(l, 0, &c.a)
		got := ""
		for i, s := range l.calls {
			if i > 0 {
				got += " "
			}
			got += s
		}
		if got != c.want || cum != c.wantCum || r.GoBack != c.goBack {
			t.Errorf("%s: calls %q cum %d goBack %v, want %q cum %d goBack %v", c.name, got, cum, r.GoBack, c.want, c.wantCum, c.goBack)
		}
	}
}
