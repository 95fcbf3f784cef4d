package conform

import (
	"net/netip"
	"os"
	"testing"
)

// TestSTLateCopyIsNoRetransmission judges a testbed run of gbn-st
// write-drop-middle (kept with -keep-failed) in which the daemon's
// transmit ring filled between ST's two copies of the last packet, so the
// copy reached the switch 320 µs after the first, before the NAK. The
// copy is not a retransmission: the NAK still came before the flow's
// first one, and signal-at-once passes. It failed when any repeat of a
// PSN counted.
func TestSTLateCopyIsNoRetransmission(t *testing.T) {
	f, err := os.Open("testdata/gbn-st-late-copy.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, events, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	o := &Observation{Requester: netip.MustParseAddr("198.18.0.1"), Responder: netip.MustParseAddr("198.18.1.1"),
		Trace: records, Events: events, Completed: true, InOrder: true, DataOK: true}
	o.ISN = isnOf(o.Trace, o.Requester)
	o.Report = Analyze(o.Trace, o.Events, Options{})
	class, err := classify("gbn-st")
	if err != nil {
		t.Fatal(err)
	}
	var c Case
	for _, k := range Cases() {
		if k.Name == "write-drop-middle" {
			c = k
		}
	}
	found := false
	for _, ch := range judge(class, c, o) {
		if ch.Name == "signal-at-once" {
			found = true
			if !ch.Pass {
				t.Errorf("signal-at-once failed: %s", ch.Measured)
			}
		}
	}
	if !found {
		t.Fatal("no signal-at-once check for gbn-st write-drop-middle")
	}
}
