package conform

import (
	"net/netip"

	"os"
	"testing"

	"github.com/softnic/softnic/dataplane"
)

// TestSTLateCopyIsNoRetransmission judges a testbed run of gbn-st
// write-drop-middle (kept with -keep-failed) in which the daemon's
// transmit ring filled between ST's two copies of the last packet, so the
// copy reached the switch 320 µs after the first, before the NAK. The
// copy is not a retransmission: the NAK still came before the flow's
// first one, and signal-at-once passes. It failed when any repeat of a
// PSN counted.
func TestSTLateCopyIsNoRetransmission(t *testing.T) {
	judgeKept(t, "testdata/gbn-st-late-copy.trace", "gbn-st", "write-drop-middle", "signal-at-once", dataplane.Counters{})
}

// TestBatchedSignalIsNoAnswer judges a testbed run of fasr
// write-drop-retx (kept with -keep-failed): the responder's third SACK,
// for a packet before the retransmission, reached the switch in the same
// receive batch as the retransmission the rule dropped, so the two have
// one timestamp. That SACK is no answer to the loss: the timer found it
// (local_ack_timeout 1, resent alone after RTO_high), and timer-finds-it
// passes. It failed when the SACK counted as the loss's signal.
func TestBatchedSignalIsNoAnswer(t *testing.T) {
	judgeKept(t, "testdata/fasr-batched-sack.trace", "fasr", "write-drop-retx", "timer-finds-it", dataplane.Counters{LocalAckTimeout: 1})
}

// judgeKept judges a kept testbed trace as the runner does and wants
// check to pass.
func judgeKept(t *testing.T, path, scheme, caseName, check string, req dataplane.Counters) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, events, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	o := &Observation{Requester: netip.MustParseAddr("198.18.0.1"), Responder: netip.MustParseAddr("198.18.1.1"),
		Trace: records, Events: events, Completed: true, InOrder: true, DataOK: true, ReqCounters: req}
	o.ISN = isnOf(o.Trace, o.Requester)
	o.Report = Analyze(o.Trace, o.Events, Options{})
	class, err := classify(scheme)
	if err != nil {
		t.Fatal(err)
	}
	var c Case
	for _, k := range Cases() {
		if k.Name == caseName {
			c = k
		}
	}
	found := false
	for _, ch := range judge(class, c, o) {
		if ch.Name == check {
			found = true
			if !ch.Pass {
				t.Errorf("%s failed: %s", check, ch.Measured)
			}
		}
	}
	if !found {
		t.Fatalf("no %s check for %s %s", check, scheme, caseName)
	}
}
