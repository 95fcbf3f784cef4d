package recovery

import (
	"testing"
	"time"
)

func TestHostMemory(t *testing.T) {
	var nilHost *HostMemory
	nilHost.Access(time.Microsecond) // a scheme built outside an engine
	if d := nilHost.Take(); d != 0 {
		t.Fatalf("nil host took %v", d)
	}
	h := &HostMemory{}
	h.Access(DefaultHostLatency)
	h.Access(DefaultHostLatency)
	if d := h.Take(); d != 2*DefaultHostLatency {
		t.Fatalf("took %v, want %v", d, 2*DefaultHostLatency)
	}
	if d := h.Take(); d != 0 {
		t.Fatalf("second take %v, want 0", d)
	}
	h.Access(time.Microsecond)
	if n, d := h.Stats(); n != 3 || d != 2*DefaultHostLatency+time.Microsecond {
		t.Fatalf("stats %d accesses, %v", n, d)
	}
	if d := srnicHostLatency(Params{}); d != DefaultHostLatency {
		t.Fatalf("default host latency %v", d)
	}
	if d := srnicHostLatency(Params{Knobs: KnobValues{"srnic.host_latency": "2us"}}); d != 2*time.Microsecond {
		t.Fatalf("srnic.host_latency=2us: %v", d)
	}
}
