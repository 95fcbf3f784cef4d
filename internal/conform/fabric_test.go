package conform

import (
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/recovery"
)

// The exact-latency test's links: the requester's slower than the
// responder's, so that no frame waits at the switch (each request takes
// twice as long to arrive as to leave), and both long enough that the
// whole WRITE is on the wire before its first reply comes back, so that
// no reply or retransmission waits behind another frame at a NIC.
var (
	exactReq  = fabric.LinkParams{RateBps: 4e9, Delay: 10 * time.Microsecond} // 2 ns a byte
	exactResp = fabric.LinkParams{RateBps: 8e9, Delay: 7 * time.Microsecond}  // 1 ns a byte
)

// frameLen is the length of a RoCEv2 frame over IPv4 of opcode op with
// payload bytes: Ethernet, IPv4 and UDP headers (14 + 20 + 8), then the
// opcode's headers, payload, pad and ICRC (bth's opcode table).
func frameLen(op bth.Opcode, payload int) int { return 14 + 20 + 8 + bth.Lookup(op).PacketLen(payload) }

// ser is how long n bytes take on l, which must be whole nanoseconds.
func ser(t *testing.T, l fabric.LinkParams, n int) time.Duration {
	bits := uint64(n) * 8 * uint64(time.Second)
	if bits%l.RateBps != 0 {
		t.Fatalf("%d bytes at %d bit/s is not a whole number of ns", n, l.RateBps)
	}
	return time.Duration(bits / l.RateBps)
}

// TestExactLatency: the report's latencies on the embedded fabric are
// exactly the links' time, worked out here from the link parameters and
// the frames' sizes: the simulated NICs take no time (no context-cache
// stall with an unlimited SRAM, the engines run at the event's time) and
// nothing queues. The middle packet (PSN 4) of an 8-packet WRITE is
// dropped (or marked).
func TestExactLatency(t *testing.T) {
	mid := frameLen(bth.RCWriteMiddle, 1024)       // gbn's WRITE MIDDLE
	midOOO := frameLen(bth.RCWriteMiddleOOO, 1024) // irn's, with a RETH
	nak := frameLen(bth.RCAcknowledge, 0)
	sack := frameLen(bth.RCAcknowledgeSACK, 0)
	cnp := frameLen(bth.CNP, 0)
	// From the switch to the responder and back (a reply to a request),
	// and from the switch to the requester and back (a retransmission
	// for a reply).
	toResp := func(req, reply int) time.Duration {
		return ser(t, exactResp, req) + exactResp.Delay + ser(t, exactResp, reply) + exactResp.Delay
	}
	toReq := func(reply, req int) time.Duration {
		return ser(t, exactReq, reply) + exactReq.Delay + ser(t, exactReq, req) + exactReq.Delay
	}
	for _, tc := range []struct {
		scheme, cc, action string
		signal             time.Duration // the loss signal's latency after the trigger
		retx               time.Duration // the retransmission's after the signal
		resent             string
		penalty            int64
		cnp                time.Duration
	}{
		{scheme: recovery.GBN, action: "drop", signal: toResp(mid, nak), retx: toReq(nak, mid), resent: "[4-7]", penalty: 3},
		{scheme: recovery.IRN, action: "drop", signal: toResp(midOOO, sack), retx: toReq(sack, midOOO), resent: "[4]", penalty: 0},
		{scheme: recovery.GBN, cc: cc.DCQCN, action: "ecn", cnp: toResp(mid, cnp)},
	} {
		t.Run(fmt.Sprintf("%s-%s", tc.scheme, tc.action), func(t *testing.T) {
			rules := ruleFile(psnRule("p4", hostA, "data", 4, tc.action, 1))
			r, err := RunCase(Setup{Scheme: tc.scheme, CC: tc.cc, Seed: 1, Requester: exactReq, Responder: exactResp},
				Workload{Op: OpWrite, Packets: 8}, rules)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Succeeded() || !r.DataOK {
				t.Fatalf("run: completed %v, statuses %v, data %v", r.Completed, r.Statuses, r.DataOK)
			}
			if len(r.Report.Rows) != 1 {
				t.Fatalf("%d rows", len(r.Report.Rows))
			}
			row := r.Report.Rows[0]
			if row.PSN != r.ISN+4 {
				t.Fatalf("row of PSN %d, want %d", row.PSN, r.ISN+4)
			}
			if tc.action == "ecn" {
				if row.CNPLatency == nil || time.Duration(*row.CNPLatency) != tc.cnp {
					t.Errorf("CNP latency %s, want %s", usp(row.CNPLatency), us(tc.cnp))
				}
				if r.Report.Summary.CNPs != 1 {
					t.Errorf("%d CNPs, want 1", r.Report.Summary.CNPs)
				}
				return
			}
			if row.SignalLatency == nil || time.Duration(*row.SignalLatency) != tc.signal {
				t.Errorf("signal latency %s, want %s", usp(row.SignalLatency), us(tc.signal))
			}
			if row.RetxLatency == nil || time.Duration(*row.RetxLatency) != tc.retx || row.Timeout {
				t.Errorf("retransmission latency %s (timeout %v), want %s", usp(row.RetxLatency), row.Timeout, us(tc.retx))
			}
			if got := rangesString(row.Resent); got != tc.resent || row.Penalty == nil || *row.Penalty != tc.penalty {
				t.Errorf("resent %s, penalty %s; want %s, %d", got, pstr(row.Penalty), tc.resent, tc.penalty)
			}
			// The trigger is the next packet, one requester-link
			// serialization after the lost one.
			if row.TriggerAt == nil || time.Duration(*row.TriggerAt-row.At) != ser(t, exactReq, map[string]int{recovery.GBN: mid, recovery.IRN: midOOO}[tc.scheme]) {
				t.Errorf("trigger %s after the loss", usp(row.TriggerAt))
			}
		})
	}
}
