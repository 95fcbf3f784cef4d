package recovery

import (
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

// fasrStats are a FaSR scheme's counters, as it reports them (and the
// FNACKs its receivers sent, which it does not report: the engine counts
// fnak_sent), and its pools.
type fasrStats struct {
	Pools                                          []PoolStats
	RxFastPath, RxSlowPath, TxFastPath, TxSlowPath uint64
	Fallbacks, PoolDrops                           uint64
	FNACKsSent, FNACKsTaken, LostCntOverflows      uint64
}

func fasrStatsOf(s *fasrScheme) fasrStats {
	c := s.Counters()
	return fasrStats{Pools: s.Pools(),
		RxFastPath: CounterValue(c, "sr_rx_fast_path"), RxSlowPath: CounterValue(c, "sr_rx_slow_path"),
		TxFastPath: CounterValue(c, "sr_tx_fast_path"), TxSlowPath: CounterValue(c, "sr_tx_slow_path"),
		Fallbacks: CounterValue(c, "sr_pool_fallbacks"), PoolDrops: CounterValue(c, "sr_pool_drops"),
		FNACKsSent: s.counts.fnacksSent, FNACKsTaken: CounterValue(c, "sr_fnacks_taken"),
		LostCntOverflows: CounterValue(c, "sr_lost_cnt_overflows")}
}

func newFasrScheme(t *testing.T, p Params) *fasrScheme {
	t.Helper()
	s, err := New(FaSR, p)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*fasrScheme)
}

func fasrRx(s *fasrScheme) *fasrReceiver { return s.NewReceiver().(*fasrReceiver) }
func fasrTx(s *fasrScheme) *fasrSender   { return s.NewSender().(*fasrSender) }

// fasrInUse checks the SR units and bitmap blocks in use.
func fasrInUse(t *testing.T, s *fasrScheme, units, blocks int) {
	t.Helper()
	st := fasrStatsOf(s)
	if st.Pools[0].InUse != units || st.Pools[1].InUse != blocks {
		t.Fatalf("%d units and %d blocks in use, want %d and %d", st.Pools[0].InUse, st.Pools[1].InUse, units, blocks)
	}
}

// sackOf is the SACK a FaSR receiver answers an early packet with.
func sackOf(keep bool, lost uint8, overflow bool) Decision {
	return Decision{Keep: keep, Reply: ReplySack, LostCnt: lost, Overflow: overflow}
}

func wantKept(t *testing.T, r Receiver, kept map[qp.PSN]bool) {
	t.Helper()
	for psn, want := range kept {
		if got, _ := r.Kept(psn); got != want {
			t.Fatalf("Kept(%#x) = %v, want %v", psn, got, want)
		}
	}
}

// TestFaSRReceiverFastPath: a single loss needs no bitmap (§III-B1): one
// SR unit, lost-cnt 1 in every SACK, and the retransmission of RCV-NXT
// moves it past sack-high and ends the recovery.
func TestFaSRReceiverFastPath(t *testing.T) {
	s := newFasrScheme(t, Params{})
	r := fasrRx(s)
	const e = qp.PSN(0xFFFFFE) // across the wrap
	r.Reset(e)
	for k := uint32(1); k <= 4; k++ {
		wantRx(t, r.OnOutOfSequence(0, e, e.Add(k), false), sackOf(true, 1, false), "early packet")
		fasrInUse(t, s, 1, 0)
	}
	wantRx(t, r.OnOutOfSequence(0, e, e.Add(2), false), sackOf(false, 1, false), "a copy")
	wantKept(t, r, map[qp.PSN]bool{e: false, e.Add(1): true, e.Add(4): true, e.Add(5): false})
	st := fasrStatsOf(s)
	if st.RxFastPath != 4 || st.RxSlowPath != 0 {
		t.Fatalf("%+v", st)
	}
	r.OnInSequence(0, e.Add(5)) // the retransmission of e; the walk took e+1..e+4
	fasrInUse(t, s, 0, 0)
	if st := fasrStatsOf(s); st.RxFastPath != 5 || st.RxSlowPath != 0 || st.Fallbacks != 0 || st.FNACKsSent != 0 {
		t.Fatalf("%+v", st)
	}
	if r.inRec {
		t.Fatal("recovery goes on past sack-high")
	}
	wantKept(t, r, map[qp.PSN]bool{e.Add(4): false, e.Add(6): false})
	// The next loss starts a new recovery from scratch.
	wantRx(t, r.OnOutOfSequence(0, e.Add(5), e.Add(6), false), sackOf(true, 1, false), "next recovery")
	r.Reset(0)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverSlowPath: two losses need the bitmap; lost-cnt counts
// the missing packets, falls as retransmissions of RCV-NXT come, and at 1
// the bitmap goes back and the fast path resumes.
func TestFaSRReceiverSlowPath(t *testing.T) {
	s := newFasrScheme(t, Params{})
	r := fasrRx(s)
	r.Reset(0)
	wantRx(t, r.OnOutOfSequence(0, 0, 2, false), sackOf(true, 2, false), "2 (0 and 1 lost)")
	fasrInUse(t, s, 1, 1)
	wantRx(t, r.OnOutOfSequence(0, 0, 3, false), sackOf(true, 2, false), "3")
	wantRx(t, r.OnOutOfSequence(0, 0, 5, false), sackOf(true, 3, false), "5 (4 lost)")
	if st := fasrStatsOf(s); st.RxSlowPath != 3 || st.RxFastPath != 0 {
		t.Fatalf("%+v", st)
	}
	wantKept(t, r, map[qp.PSN]bool{1: false, 2: true, 3: true, 4: false, 5: true, 6: false})
	r.OnInSequence(0, 1) // 0 came
	fasrInUse(t, s, 1, 1)
	wantRx(t, r.OnOutOfSequence(0, 1, 6, false), sackOf(true, 2, false), "6")
	r.OnInSequence(0, 4) // 1 came, 2 and 3 walked: only 4 is missing
	fasrInUse(t, s, 1, 0)
	if r.slow() {
		t.Fatal("still on the slow path with lost-cnt 1")
	}
	wantKept(t, r, map[qp.PSN]bool{4: false, 5: true, 6: true, 7: false})
	fast := fasrStatsOf(s).RxFastPath
	wantRx(t, r.OnOutOfSequence(0, 4, 7, false), sackOf(true, 1, false), "7 on the fast path again")
	if fasrStatsOf(s).RxFastPath != fast+1 {
		t.Fatalf("%+v", fasrStatsOf(s))
	}
	fasrInUse(t, s, 1, 0)
	r.OnInSequence(0, 8)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverCompression: a run of a block or more received after
// RCV-NXT when the slow path begins stays a count (compression-cnt,
// §III-D): the bitmap starts after it and takes fewer blocks than the
// span; a shorter run goes into the bitmap.
func TestFaSRReceiverCompression(t *testing.T) {
	s := newFasrScheme(t, Params{}) // 16-bit blocks
	r := fasrRx(s)
	r.Reset(0)
	for p := qp.PSN(1); p <= 20; p++ { // 0 lost
		r.OnOutOfSequence(0, 0, p, false)
	}
	fasrInUse(t, s, 1, 0)
	wantRx(t, r.OnOutOfSequence(0, 0, 22, false), sackOf(true, 2, false), "22 (21 lost)")
	// RCV-NXT+1..sack-high spans 22 PSNs, two blocks' worth; compressed it
	// takes one.
	fasrInUse(t, s, 1, 1)
	wantKept(t, r, map[qp.PSN]bool{0: false, 1: true, 16: true, 20: true, 21: false, 22: true, 23: false})
	wantRx(t, r.OnOutOfSequence(0, 0, 23, false), sackOf(true, 2, false), "23")
	fasrInUse(t, s, 1, 1)
	r.OnInSequence(0, 21) // 0 came, 1-20 walked
	fasrInUse(t, s, 1, 0) // only 21 missing: fast path
	wantKept(t, r, map[qp.PSN]bool{21: false, 22: true, 23: true, 24: false})
	r.OnInSequence(0, 24)
	fasrInUse(t, s, 0, 0)

	// A short run is not compressed: it goes into the bitmap.
	r.Reset(100)
	for p := qp.PSN(101); p <= 105; p++ {
		r.OnOutOfSequence(0, 100, p, false)
	}
	r.OnOutOfSequence(0, 100, 107, false)
	wantKept(t, r, map[qp.PSN]bool{101: true, 105: true, 106: false, 107: true})
	fasrInUse(t, s, 1, 1)
	// The run and the packet after it at the edge of a block: 101-116
	// received, 117 lost, 118 arrives: compressed, the bitmap starts at
	// 117 and needs one block where 101-118 would need two.
	r.Reset(200)
	for p := qp.PSN(201); p <= 216; p++ {
		r.OnOutOfSequence(0, 200, p, false)
	}
	r.OnOutOfSequence(0, 200, 218, false)
	fasrInUse(t, s, 1, 1)
	wantKept(t, r, map[qp.PSN]bool{201: true, 216: true, 217: false, 218: true})
	r.Reset(0)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverFNACK: a packet between RCV-NXT and sack-high that
// fills a hole other than RCV-NXT is answered by an FNACK (§III-D) and,
// since reordering may have delayed an original, kept: lost-cnt falls by
// one (docs/recovery.md, "Reordering is not loss"); a copy of a packet
// held is acknowledged again.
func TestFaSRReceiverFNACK(t *testing.T) {
	s := newFasrScheme(t, Params{})
	r := fasrRx(s)
	r.Reset(0)
	r.OnOutOfSequence(0, 0, 2, false)
	r.OnOutOfSequence(0, 0, 4, false)
	wantRx(t, r.OnOutOfSequence(0, 0, 3, false), Decision{Keep: true, Reply: ReplyFNACK}, "3 (fills a hole, 0 still missing)")
	wantKept(t, r, map[qp.PSN]bool{1: false, 2: true, 3: true, 4: true})
	wantRx(t, r.OnOutOfSequence(0, 0, 2, false), sackOf(false, 2, false), "a copy of 2")
	wantRx(t, r.OnOutOfSequence(0, 0, 1, false), Decision{Keep: true, Reply: ReplyFNACK}, "1")
	wantRx(t, r.OnOutOfSequence(0, 0, 3, false), sackOf(false, 1, false), "a copy of 3")
	if st := fasrStatsOf(s); st.FNACKsSent != 2 {
		t.Fatalf("%+v", st)
	}
	// 0 arrives: everything through 4 was held, the recovery is over.
	r.OnInSequence(0, 5)
	fasrInUse(t, s, 0, 0)
	wantRx(t, r.OnOutOfSequence(0, 5, 6, false), sackOf(true, 1, false), "6 with only 5 missing")
	r.OnInSequence(0, 8)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverOverflow: lost-cnt is 3 bits: 7 lost is 7, an 8th
// overflows it; it stays 7, flagged, until the recovery ends.
func TestFaSRReceiverOverflow(t *testing.T) {
	s := newFasrScheme(t, Params{})
	r := fasrRx(s)
	r.Reset(0)
	wantRx(t, r.OnOutOfSequence(0, 0, 7, false), sackOf(true, 7, false), "7 lost")
	wantRx(t, r.OnOutOfSequence(0, 0, 9, false), sackOf(true, 7, true), "8 lost")
	if st := fasrStatsOf(s); st.LostCntOverflows != 1 {
		t.Fatalf("%+v", st)
	}
	wantRx(t, r.OnOutOfSequence(0, 0, 12, false), sackOf(true, 7, true), "10 lost")
	for e := qp.PSN(1); e <= 7; e++ {
		r.OnInSequence(0, e)
		wantRx(t, r.OnOutOfSequence(0, e, 12, false), sackOf(false, 7, true), "a copy during overflow")
	}
	r.OnInSequence(0, 8)
	r.OnInSequence(0, 10)
	r.OnInSequence(0, 13)
	fasrInUse(t, s, 0, 0)
	if st := fasrStatsOf(s); st.LostCntOverflows != 1 {
		t.Fatalf("%+v", st)
	}
	// The next recovery counts afresh; 8 lost at once overflows too.
	wantRx(t, r.OnOutOfSequence(0, 13, 15, false), sackOf(true, 2, false), "next recovery")
	r.OnInSequence(0, 16)
	wantRx(t, r.OnOutOfSequence(0, 16, 24, false), sackOf(true, 7, true), "8 lost at once")
	if st := fasrStatsOf(s); st.LostCntOverflows != 2 {
		t.Fatalf("%+v", st)
	}
	r.Reset(0)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverUnitsExhausted: no SR unit for a QP's recovery: its
// early packets are dropped and NAKed go-back-N style, at most once per NAK
// interval; once a unit is free it is selective again.
func TestFaSRReceiverUnitsExhausted(t *testing.T) {
	const ival = 100 * time.Microsecond
	s := newFasrScheme(t, Params{Knobs: KnobValues{"fasr.units": "1"}, NakInterval: ival})
	r1, r2 := fasrRx(s), fasrRx(s)
	r1.Reset(0)
	r2.Reset(50)
	r1.OnOutOfSequence(0, 0, 1, false)
	wantRx(t, r2.OnOutOfSequence(0, 50, 52, false), Decision{Reply: ReplySeqNak}, "no unit")
	wantRx(t, r2.OnOutOfSequence(ival/2, 50, 53, false), Decision{}, "no unit, within the NAK interval")
	wantRx(t, r2.OnOutOfSequence(ival, 50, 54, false), Decision{Reply: ReplySeqNak}, "no unit, after the NAK interval")
	wantKept(t, r2, map[qp.PSN]bool{52: false, 53: false})
	if st := fasrStatsOf(s); st.Fallbacks != 3 || st.PoolDrops != 3 || st.Pools[0].Exhausted != 3 {
		t.Fatalf("%+v", st)
	}
	r1.OnInSequence(ival, 2)
	fasrInUse(t, s, 0, 0)
	wantRx(t, r2.OnOutOfSequence(ival, 50, 52, false), sackOf(true, 2, false), "a unit is free")
	fasrInUse(t, s, 1, 1)
	r2.OnInSequence(ival, 53)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRReceiverBlocksExhausted: no bitmap block when a QP's recovery
// needs its slow path: it falls back to go-back-N; what it recorded is
// kept (the walk still finds it); it is selective again once the recovery
// is over.
func TestFaSRReceiverBlocksExhausted(t *testing.T) {
	const ival = 100 * time.Microsecond
	s := newFasrScheme(t, Params{Knobs: KnobValues{"fasr.blocks": "1"}, NakInterval: ival})
	r1, r2 := fasrRx(s), fasrRx(s)
	r1.Reset(1000)
	r1.OnOutOfSequence(0, 1000, 1002, false) // slow path: the only block
	fasrInUse(t, s, 1, 1)
	r2.Reset(0)
	for p := qp.PSN(1); p <= 3; p++ {
		wantRx(t, r2.OnOutOfSequence(0, 0, p, false), sackOf(true, 1, false), "fast path")
	}
	fasrInUse(t, s, 2, 1)
	// 4 lost, 5 needs the slow path: no block.
	wantRx(t, r2.OnOutOfSequence(0, 0, 5, false), Decision{Reply: ReplySeqNak}, "5, no block")
	wantRx(t, r2.OnOutOfSequence(1, 0, 6, false), Decision{}, "6 within the NAK interval")
	wantRx(t, r2.OnOutOfSequence(2, 0, 2, false), Decision{}, "a copy of 2 in fallback")
	wantRx(t, r2.OnOutOfSequence(ival, 0, 7, false), Decision{Reply: ReplySeqNak}, "7 after the NAK interval")
	st := fasrStatsOf(s)
	if st.Fallbacks != 1 || st.PoolDrops != 3 || st.Pools[1].Exhausted == 0 {
		t.Fatalf("%+v", st)
	}
	wantKept(t, r2, map[qp.PSN]bool{1: true, 2: true, 3: true, 4: false, 5: false})
	// Go-back-N resends from 0: its walk takes 1-3, the recovery ends.
	r2.OnInSequence(ival, 4)
	fasrInUse(t, s, 1, 1)
	if r2.fallback || r2.inRec {
		t.Fatal("still in fallback after the recovery")
	}
	r2.OnInSequence(ival, 6) // 4 and 5 in order
	wantRx(t, r2.OnOutOfSequence(ival, 6, 7, false), sackOf(true, 1, false), "selective again")
	fasrInUse(t, s, 2, 1)
	// On the slow path the bitmap cannot grow: fallback too.
	r1.OnOutOfSequence(ival, 1000, 1016, false) // still in its block (1001-1016)
	wantRx(t, r1.OnOutOfSequence(ival, 1000, 1017, false), Decision{Reply: ReplySeqNak}, "1017 needs a second block")
	wantRx(t, r1.OnOutOfSequence(ival, 1000, 1018, false), Decision{}, "1018 in fallback")
	wantKept(t, r1, map[qp.PSN]bool{1002: true, 1016: true, 1017: false})
	if r1.sackHigh != 1016 {
		t.Fatalf("sack-high %d moved over dropped packets", r1.sackHigh)
	}
	r1.OnInSequence(ival, 1001)
	r1.OnInSequence(ival, 1003)
	r1.OnInSequence(ival, 1017)
	r2.OnInSequence(ival, 8)
	fasrInUse(t, s, 0, 0)
	// A first early packet that needs a block it cannot have.
	r1.OnOutOfSequence(ival, 1017, 1019, false)
	wantRx(t, r2.OnOutOfSequence(10*ival, 8, 10, false), Decision{Reply: ReplySeqNak}, "first packet, no block")
	fasrInUse(t, s, 1, 1)
	if r2.inRec {
		t.Fatal("a recovery without bits holds a unit")
	}
}

// TestFaSRReceiverEvict: an evicted QP returns its unit and blocks and
// takes them back on the next access, with its record intact.
func TestFaSRReceiverEvict(t *testing.T) {
	s := newFasrScheme(t, Params{Knobs: KnobValues{"fasr.block_bits": "4"}})
	r := fasrRx(s)
	r.Reset(0)
	r.OnOutOfSequence(0, 0, 2, false)
	wantRx(t, r.OnOutOfSequence(0, 0, 6, false), sackOf(true, 5, false), "6")
	fasrInUse(t, s, 1, 2)
	var ev Receiver = r
	ev.OnEvict()
	fasrInUse(t, s, 0, 0)
	wantKept(t, r, map[qp.PSN]bool{1: false, 2: true, 3: false, 5: false, 6: true, 7: false})
	fasrInUse(t, s, 0, 2)
	wantRx(t, r.OnOutOfSequence(0, 0, 7, false), sackOf(true, 5, false), "7 after the eviction")
	fasrInUse(t, s, 1, 2)
	r.OnEvict()
	r.OnInSequence(0, 1) // the next access is in order
	fasrInUse(t, s, 1, 2)
	r.OnInSequence(0, 3)
	r.OnInSequence(0, 4)
	r.OnInSequence(0, 5)
	r.OnInSequence(0, 8)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRSenderLostCount walks §III-B2: the first SACK marks everything
// between UNACK and it lost; later, a gap between a SACK and sack-high is
// resent only if lost-cnt grew; a gap with lost-cnt unchanged is not
// resent in this round, nor acknowledged, and the timeout's round resends
// it.
func TestFaSRSenderLostCount(t *testing.T) {
	s := newFasrScheme(t, Params{})
	f := fasrTx(s)
	const start = qp.PSN(0xFFFFFE)
	f.Reset(start)
	sent := start.Add(12)
	at := func(k uint32) qp.PSN { return start.Add(k) }
	if r := f.onLostCountSack(0, start, at(3), 3, false, Received, sent); r.GoBack {
		t.Fatalf("first SACK: %+v", r)
	}
	if got := drain(f); !samePSNs(got, at(0), at(1), at(2)) {
		t.Fatalf("first SACK resent %x", got)
	}
	fasrInUse(t, s, 1, 0)
	if st := fasrStatsOf(s); st.TxFastPath != 1 || st.TxSlowPath != 0 {
		t.Fatalf("%+v", st)
	}
	// 4 and 5 lost: lost-cnt grew to 5.
	f.onLostCountSack(0, start, at(6), 5, false, Received, sent)
	if got := drain(f); !samePSNs(got, at(4), at(5)) {
		t.Fatalf("a gap with lost-cnt grown resent %x", got)
	}
	if st := fasrStatsOf(s); st.TxSlowPath != 1 || st.Pools[1].InUse == 0 {
		t.Fatalf("%+v", st)
	}
	// 7 and 8 arrived but their SACKs were lost: lost-cnt unchanged.
	f.onLostCountSack(0, start, at(9), 5, false, Received, sent)
	if got := drain(f); len(got) != 0 {
		t.Fatalf("a gap with lost-cnt unchanged resent %x", got)
	}
	// The retransmissions of 0-2 arrive: the cumulative acknowledgement
	// moves over 3; then 4 and 5: over 6, and not over 7 and 8, presumed
	// but never acknowledged.
	if got := f.OnAck(0, at(3)); got != at(4) {
		t.Fatalf("cumulative %#x, want %#x", got, at(4))
	}
	if got := f.OnAck(0, at(6)); got != at(7) {
		t.Fatalf("cumulative %#x, want %#x: presumed PSNs acknowledged", got, at(7))
	}
	if f.pooled.acked(at(7)) || f.pooled.acked(at(8)) {
		t.Fatal("presumed PSNs recorded as acknowledged")
	}
	// They never came: the timeout's round resends them (lost-cnt > 1).
	if r := f.OnTimeout(0, at(7), sent); r.GoBack {
		t.Fatalf("timeout with lost-cnt 5 went back: %+v", r)
	}
	if got := drain(f); !samePSNs(got, at(7), at(8)) {
		t.Fatalf("after the timeout resent %x", got)
	}
	if st := fasrStatsOf(s); st.TxSlowPath != 3 {
		t.Fatalf("%+v", st)
	}
	if got := f.OnAck(0, at(9)); got != at(10) {
		t.Fatalf("cumulative %#x", got)
	}
	fasrInUse(t, s, 0, fasrStatsOf(s).Pools[1].InUse) // unit back: UNACK passed sack-high
	// Nothing is SACKed after 9: a timeout now (lost-cnt 0, no recovery)
	// goes back to UNACK.
	fast := fasrStatsOf(s).TxFastPath
	if r := f.OnTimeout(0, at(10), sent); !r.GoBack || r.GoBackTo != at(10) {
		t.Fatalf("timeout without a SACK: %+v", r)
	}
	if st := fasrStatsOf(s); st.TxFastPath != fast+1 {
		t.Fatalf("%+v", st)
	}
}

// TestFaSRSenderTimeoutLostOne: with lost-cnt 1 a timeout resends UNACK
// only; with no SACK at all (lost-cnt 0) it goes back to UNACK.
func TestFaSRSenderTimeoutLostOne(t *testing.T) {
	s := newFasrScheme(t, Params{})
	f := fasrTx(s)
	f.Reset(100)
	if r := f.OnTimeout(0, 100, 110); !r.GoBack || r.GoBackTo != 100 {
		t.Fatalf("timeout with nothing SACKed: %+v", r)
	}
	if r := f.OnTimeout(0, 104, 110); !r.GoBack || r.GoBackTo != 104 {
		t.Fatalf("timeout with nothing SACKed: %+v", r)
	}
	f.onLostCountSack(0, 104, 105, 1, false, Received, 110)
	f.onLostCountSack(0, 104, 106, 1, false, Received, 110)
	if got := drain(f); !samePSNs(got, 104) {
		t.Fatalf("resent %v", got)
	}
	if r := f.OnTimeout(0, 104, 110); r.GoBack {
		t.Fatalf("timeout with lost-cnt 1 went back: %+v", r)
	}
	if got := drain(f); !samePSNs(got, 104) {
		t.Fatalf("timeout with lost-cnt 1 resent %v", got)
	}
	if st := fasrStatsOf(s); st.TxSlowPath != 0 || st.TxFastPath != 5 {
		t.Fatalf("%+v", st)
	}
	if got := f.OnAck(0, 105); got != 107 {
		t.Fatalf("cumulative %d", got)
	}
	fasrInUse(t, s, 0, 0)
}

// drainAt is drain with the time the retransmissions go out.
func drainAt(s Sender, now Time, sent qp.PSN) []qp.PSN {
	var got []qp.PSN
	for psn, ok := s.NextRetransmit(); ok; psn, ok = s.NextRetransmit() {
		got = append(got, psn)
		s.RetransmittedAt(now, psn, sent)
	}
	return got
}

// TestFaSRSenderFNACK: an FNACK restarts the round from UNACK only for a
// PSN resent in this round, and only once the retransmission of UNACK has
// gone unacknowledged for a hold (RTO_low/8 without an estimate, the
// margin max(G, 4·RTTVAR) with one); the new round resets the hold, and so does
// progress.
func TestFaSRSenderFNACK(t *testing.T) {
	const us = time.Microsecond
	s := newFasrScheme(t, Params{RTOLow: 400 * us})
	f := fasrTx(s)
	f.Reset(0)
	f.Timeout(time.Second, 10, RTT{}) // hold 50 µs
	const sent = 10
	f.onFNACK(0, 0, 2, sent)
	if got := drainAt(f, 0, sent); len(got) != 0 || fasrStatsOf(s).FNACKsTaken != 0 {
		t.Fatalf("an FNACK outside recovery resent %v", got)
	}
	f.onLostCountSack(0, 0, 3, 3, false, Received, sent)
	if got := drainAt(f, 1*us, sent); !samePSNs(got, 0, 1, 2) {
		t.Fatalf("resent %v", got)
	}
	if r := f.onFNACK(40*us, 0, 2, sent); r.GoBack {
		t.Fatalf("FNACK went back: %+v", r)
	}
	if got := drainAt(f, 40*us, sent); len(got) != 0 || fasrStatsOf(s).FNACKsTaken != 0 {
		t.Fatalf("an FNACK before the hold resent %v (%+v)", got, fasrStatsOf(s))
	}
	f.onFNACK(60*us, 0, 2, sent)
	if got := drainAt(f, 60*us, sent); !samePSNs(got, 0, 1, 2) || fasrStatsOf(s).FNACKsTaken != 1 {
		t.Fatalf("an FNACK after the hold resent %v (%+v)", got, fasrStatsOf(s))
	}
	f.onFNACK(70*us, 0, 2, sent)
	f.onFNACK(100*us, 0, 1, sent)
	if got := drainAt(f, 100*us, sent); len(got) != 0 || fasrStatsOf(s).FNACKsTaken != 1 {
		t.Fatalf("a second FNACK within a hold of the new round resent %v (%+v)", got, fasrStatsOf(s))
	}
	f.OnAck(105*us, 1) // progress: PSN 1 became UNACK now
	f.onFNACK(140*us, 1, 2, sent)
	if got := drainAt(f, 140*us, sent); len(got) != 0 {
		t.Fatalf("an FNACK within a hold of progress resent %v", got)
	}
	f.onFNACK(160*us, 1, 2, sent)
	if got := drainAt(f, 160*us, sent); !samePSNs(got, 1, 2) || fasrStatsOf(s).FNACKsTaken != 2 {
		t.Fatalf("an FNACK a hold after progress resent %v (%+v)", got, fasrStatsOf(s))
	}
	// With an estimate the hold is RFC 6298's margin: 4·5 µs.
	f.Timeout(time.Second, 10, RTT{SRTT: 20 * us, RTTVar: 5 * us, MinRTT: 20 * us, Valid: true})
	f.onFNACK(175*us, 1, 2, sent)
	if got := drainAt(f, 175*us, sent); len(got) != 0 {
		t.Fatalf("an FNACK 15 µs after the round resent %v", got)
	}
	f.onFNACK(180*us, 1, 2, sent)
	if got := drainAt(f, 180*us, sent); !samePSNs(got, 1, 2) || fasrStatsOf(s).FNACKsTaken != 3 {
		t.Fatalf("an FNACK 20 µs after the round resent %v (%+v)", got, fasrStatsOf(s))
	}
	f.onFNACK(300*us, 1, 4, sent) // 4 was never resent: reordering, not loss
	if got := drainAt(f, 300*us, sent); len(got) != 0 {
		t.Fatalf("an FNACK of a PSN not resent resent %v", got)
	}
}

// TestFaSRSenderUnitsExhausted: a sender that finds no SR unit goes back
// N; once a unit is free it is selective again.
func TestFaSRSenderUnitsExhausted(t *testing.T) {
	s := newFasrScheme(t, Params{Knobs: KnobValues{"fasr.units": "1"}})
	f1, f2 := fasrTx(s), fasrTx(s)
	f1.Reset(0)
	f2.Reset(500)
	f1.onLostCountSack(0, 0, 2, 2, false, Received, 10)
	if r := f2.onLostCountSack(0, 500, 502, 2, false, Received, 510); !r.GoBack || r.GoBackTo != 500 {
		t.Fatalf("no unit: %+v", r)
	}
	if got := drain(f2); len(got) != 0 {
		t.Fatalf("went back and resent selectively %v", got)
	}
	if st := fasrStatsOf(s); st.Fallbacks != 1 {
		t.Fatalf("%+v", st)
	}
	if got := f1.OnAck(0, 3); got != 3 {
		t.Fatalf("cumulative %d", got)
	}
	fasrInUse(t, s, 0, 0)
	if r := f2.onLostCountSack(0, 500, 502, 2, false, Received, 510); r.GoBack {
		t.Fatalf("a unit is free: %+v", r)
	}
	if got := drain(f2); !samePSNs(got, 500, 501) {
		t.Fatalf("resent %v", got)
	}
}

// TestFaSRSenderEvict: the sender's unit and blocks go back on eviction
// and its record survives.
func TestFaSRSenderEvict(t *testing.T) {
	s := newFasrScheme(t, Params{Knobs: KnobValues{"fasr.block_bits": "4"}})
	f := fasrTx(s)
	f.Reset(0)
	f.onLostCountSack(0, 0, 2, 2, false, Received, 12)
	f.onLostCountSack(0, 0, 9, 8, true, Received, 12)
	fasrInUse(t, s, 1, 2)
	var ev Sender = f
	ev.OnEvict()
	fasrInUse(t, s, 0, 0)
	if got := drain(f); !samePSNs(got, 0, 1, 3, 4, 5, 6, 7, 8) {
		t.Fatalf("after eviction resent %v", got)
	}
	if got := f.OnAck(0, 2); got != 3 {
		t.Fatalf("cumulative %d", got)
	}
	fasrInUse(t, s, 1, 2)
	f.OnAck(0, 12)
	fasrInUse(t, s, 0, 0)
}

// TestFaSRSenderHeldNotResent: READ requests the responder holds out of
// order (Held) need no resending (§III-B2: only the PSNs between UNACK
// and the first SACK, and gaps with lost-cnt grown, are resent). A SACK
// contiguous with sack-high and lost-cnt unchanged resends nothing.
func TestFaSRSenderHeldNotResent(t *testing.T) {
	s := newFasrScheme(t, Params{})
	f := fasrTx(s)
	f.Reset(5)
	f.onLostCountSack(0, 5, 6, 1, false, Held, 20)
	if got := drain(f); !samePSNs(got, 5) {
		t.Fatalf("first SACK resent %v, want [5]", got)
	}
	for p := qp.PSN(7); p <= 10; p++ {
		f.onLostCountSack(0, 5, p, 1, false, Held, 20)
		if got := drain(f); len(got) != 0 {
			t.Fatalf("SACK %d (held, lost-cnt 1, no gap) resent %v", p, got)
		}
	}
}

// TestFaSRSenderBlocksReturned: once everything sent is acknowledged the
// sender's recovery is over and its bitmap blocks are back in the pool;
// in-order acknowledgements after that take no blocks.
func TestFaSRSenderBlocksReturned(t *testing.T) {
	s := newFasrScheme(t, Params{})
	f := fasrTx(s)
	f.Reset(0)
	const sent = 8
	f.onLostCountSack(0, 0, 3, 3, false, Received, sent)
	f.onLostCountSack(0, 0, 6, 5, false, Received, sent)
	drain(f)
	if got := f.OnAck(0, sent); got != sent || f.recovery {
		t.Fatalf("cumulative %d, recovery %v", got, f.recovery)
	}
	fasrInUse(t, s, 0, 0)
	// More is sent and acknowledged in order, without loss.
	f.OnSack(0, sent, sent+19, Received, sent+20)
	f.OnAck(0, sent+20)
	if st := fasrStatsOf(s).Pools[1]; st.InUse != 0 || st.Allocs != 1 {
		t.Fatalf("lossless traffic after the recovery: %+v", st)
	}
}
