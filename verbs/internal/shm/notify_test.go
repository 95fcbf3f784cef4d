package shm

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/softnic/softnic/qp"
)

// TestNotify: an arm fires once; solicited-only waits for a solicited
// completion; arming for any widens a solicited-only arm, not the other
// way round; every arm is a new value (the sequence), so a producer's
// CAS from an older one fails.
func TestNotify(t *testing.T) {
	var w [2]atomic.Uint32
	n := Notify{Arm: &w[0], Events: &w[1]}
	if n.Trigger(true) {
		t.Fatal("unarmed CQ fired")
	}
	n.Request(false)
	if !n.Trigger(false) || n.Trigger(true) || n.Events.Load() != 1 {
		t.Fatalf("arm for any: events %d", n.Events.Load())
	}
	n.Request(true)
	if a, s := n.Armed(); !a || !s {
		t.Fatalf("solicited arm reads %v %v", a, s)
	}
	if n.Trigger(false) {
		t.Fatal("solicited-only arm fired for an unsolicited completion")
	}
	n.Request(false) // widens
	if _, s := n.Armed(); s {
		t.Fatal("arm for any did not widen a solicited-only arm")
	}
	n.Request(true) // does not narrow
	if _, s := n.Armed(); s {
		t.Fatal("solicited-only request narrowed an arm for any")
	}
	before := n.Arm.Load()
	n.Request(false)
	if after := n.Arm.Load(); after == before {
		t.Fatal("a new arm has the old value")
	}
	if !n.Trigger(false) || n.Events.Load() != 2 {
		t.Fatalf("events %d", n.Events.Load())
	}
	n.Request(true)
	n.Disarm()
	if a, _ := n.Armed(); a || n.Trigger(true) {
		t.Fatal("disarmed CQ fired")
	}

	for _, c := range []struct {
		wc   qp.WC
		want bool
	}{
		{qp.WC{Status: qp.WCSuccess, Opcode: qp.WCRecv}, false},
		{qp.WC{Status: qp.WCSuccess, Opcode: qp.WCRecv, Flags: qp.WCSolicited}, true},
		{qp.WC{Status: qp.WCSuccess, Opcode: qp.WCSend}, false},
		{qp.WC{Status: qp.WCRetryExcErr, Opcode: qp.WCSend}, true},
		{qp.WC{Status: qp.WCWRFlushErr, Opcode: qp.WCRecv}, true},
	} {
		if got := Solicited(&c.wc); got != c.want {
			t.Errorf("Solicited(%+v) = %v", c.wc, got)
		}
	}
}

// TestCQNotifyWords: the arm and event words are in the CQ file's header
// line, outside every other field, and start at zero.
func TestCQNotifyWords(t *testing.T) {
	l, err := NewCQLayout(8)
	if err != nil {
		t.Fatal(err)
	}
	words := make([]uint64, l.Size/8) // 8-aligned, as a mapping is
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), l.Size)
	l.Init(mem)
	n := l.Notify(mem)
	if n.Arm.Load() != 0 || n.Events.Load() != 0 {
		t.Fatal("fresh CQ file has arm or events set")
	}
	n.Request(true)
	if err := l.Check(mem); err != nil {
		t.Fatalf("arming changed the header: %v", err)
	}
	if OffCQArm < offCQEntries+4 || OffCQEvents+4 > OffCQProd {
		t.Fatal("notify words overlap the header fields or the index line")
	}
}
