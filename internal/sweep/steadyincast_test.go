package sweep

import (
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
)

// TestSteadyIncast: the embedded incast's two modes do what the testbed's
// must show. With PFC (and DCQCN) the switch drops nothing and the
// senders share the link fairly; with neither, the 3:1 incast overflows
// the receiver's port and the switch drops.
func TestSteadyIncast(t *testing.T) {
	link := fabric.LinkParams{RateBps: 1e9, Delay: 10 * time.Microsecond}
	base := SteadyIncastConfig{Hosts: 4, Scheme: "irn", Link: link, Warmup: 10 * time.Millisecond, Measure: 20 * time.Millisecond, Seed: 1}
	lossless := base
	lossless.CC = "dcqcn"
	lossless.Switch = SteadyIncastSwitch(link.RateBps, link.Delay, true, true)
	r, err := RunSteadyIncast(lossless)
	if err != nil {
		t.Fatal(err)
	}
	if r.Drops != 0 || len(r.Flows) != 3 || r.Jain < 0.95 || r.CNPs == 0 || r.ECNMarks == 0 {
		t.Errorf("dcqcn+pfc: drops %d, %d flows, jain %.3f, cnps %d, marks %d; want 0 drops, 3 flows, jain >= 0.95, CNPs and marks", r.Drops, len(r.Flows), r.Jain, r.CNPs, r.ECNMarks)
	}
	if xoff := lossless.Switch.PFC.XOFFBytes; r.QueueP99Bytes >= xoff {
		t.Errorf("dcqcn+pfc: queue p99 %d B, not below XOFF %d", r.QueueP99Bytes, xoff)
	}
	lossy := base
	lossy.CC = "none"
	lossy.Switch = SteadyIncastSwitch(link.RateBps, link.Delay, false, false)
	r, err = RunSteadyIncast(lossy)
	if err != nil {
		t.Fatal(err)
	}
	if r.Drops == 0 || r.Pauses != 0 || r.CNPs != 0 {
		t.Errorf("none: drops %d, pauses %d, cnps %d; want drops, no pauses, no CNPs", r.Drops, r.Pauses, r.CNPs)
	}
}

func TestJainIndex(t *testing.T) {
	if j := JainIndex([]SteadyIncastFlow{{Gbps: 1}, {Gbps: 1}}); j != 1 {
		t.Errorf("equal: %v", j)
	}
	if j := JainIndex([]SteadyIncastFlow{{Gbps: 1}, {Gbps: 0}}); j != 0.5 {
		t.Errorf("one of two: %v", j)
	}
}
