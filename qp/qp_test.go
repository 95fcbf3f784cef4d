package qp

import "testing"

func TestPSNDiffWrap(t *testing.T) {
	for _, tc := range []struct {
		p, q PSN
		want int32
	}{
		{5, 3, 2},
		{3, 5, -2},
		{0, 0xFFFFFF, 1},           // wrap forward
		{0xFFFFFF, 0, -1},          // wrap backward
		{0x000010, 0xFFFFF0, 0x20}, // across 2^24
		{0x800000, 0, 0x800000},    // exactly half: counts as after
		{0, 0x800000, 0x800000},    // and symmetric at the boundary
		{0x7FFFFF, 0, 0x7FFFFF},
		{0, 0x7FFFFF, -0x7FFFFF},
	} {
		if got := tc.p.Diff(tc.q); got != tc.want {
			t.Errorf("PSN(%#x).Diff(%#x) = %d, want %d", tc.p, tc.q, got, tc.want)
		}
	}
	if !PSN(2).After(PSN(0xFFFFFE)) || !PSN(0xFFFFFE).Before(PSN(2)) {
		t.Error("Before/After do not wrap")
	}
	if got := PSN(0xFFFFFF).Next(); got != 0 {
		t.Errorf("Next wrap = %#x", got)
	}
	if got := PSN(0).Prev(); got != 0xFFFFFF {
		t.Errorf("Prev wrap = %#x", got)
	}
	if got := PSN(0xFFFFF0).Add(0x20); got != 0x10 {
		t.Errorf("Add wrap = %#x", got)
	}
	if PSN(1 << 24).Valid() {
		t.Error("25-bit PSN reported valid")
	}
	if MSN(0xFFFFFF).Next() != 0 {
		t.Error("MSN does not wrap")
	}
}

func TestStateTransitions(t *testing.T) {
	legal := map[[2]State]bool{
		{Reset, Init}: true, {Init, Init}: true, {Init, RTR}: true, {RTR, RTS}: true,
		{RTS, RTS}: true, {RTS, SQD}: true, {SQD, SQD}: true, {SQD, RTS}: true, {SQE, RTS}: true,
	}
	for from := Reset; from <= Err; from++ {
		for to := Reset; to <= Err; to++ {
			want := legal[[2]State{from, to}] || to == Reset || to == Err
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanTransition(State(42), Init) || CanTransition(State(42), Reset) {
		t.Error("unknown state may move")
	}
	if RequiredAttrs(Init, RTR)&AttrDestQPN == 0 || RequiredAttrs(RTR, RTS)&AttrSQPSN == 0 {
		t.Error("required attribute table is missing entries")
	}
	if req, opt := RequiredAttrs(Init, RTR), AllowedAttrs(Init, RTR); req&^opt != 0 {
		t.Errorf("required attributes %#x not allowed %#x", req, opt)
	}
}

func TestMTU(t *testing.T) {
	for n, want := range map[int]MTU{256: MTU256, 512: MTU512, 1024: MTU1024, 2048: MTU2048, 4096: MTU4096} {
		m, err := MTUFromBytes(n)
		if err != nil || m != want || m.Bytes() != n {
			t.Errorf("MTUFromBytes(%d) = %v, %v", n, m, err)
		}
	}
	if _, err := MTUFromBytes(1500); err == nil {
		t.Error("1500 accepted as an IB MTU")
	}
	if MTU(0).Bytes() != 0 || MTU(6).Bytes() != 0 {
		t.Error("invalid enum has a size")
	}
}

func TestRing(t *testing.T) {
	r := NewRing[int](3)
	if r.Cap() != 4 {
		t.Fatalf("Cap = %d, want 4", r.Cap())
	}
	for i := 0; i < 4; i++ {
		*r.Push() = i
	}
	if r.Push() != nil || !r.Full() {
		t.Fatal("push into a full ring")
	}
	for i := 0; i < 100; i++ { // wrap the indices many times
		if got := *r.Front(); got != i {
			t.Fatalf("front = %d, want %d", got, i)
		}
		r.Pop()
		*r.Push() = i + 4
	}
	if !r.Contains(r.Head()) || r.Contains(r.Tail()) || r.Contains(r.Head()-1) {
		t.Error("Contains is wrong at the edges")
	}
	for r.Len() > 0 {
		r.Pop()
	}
	if r.Front() != nil {
		t.Error("empty ring has a front")
	}
}
