package recovery

import (
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
)

// meloStats are a MELO scheme's counters, as it reports them, and its
// pools.
type meloStats struct {
	Pools                             []PoolStats
	PoolDrops, Fallbacks              uint64
	MiddleDrops, MiddleFills          uint64
	LostRetransmits, SenderUnrecorded uint64
}

func meloStatsOf(s *meloScheme) meloStats {
	c := s.Counters()
	return meloStats{Pools: s.Pools(),
		PoolDrops: CounterValue(c, "sr_pool_drops"), Fallbacks: CounterValue(c, "sr_pool_fallbacks"),
		MiddleDrops: CounterValue(c, "sr_middle_drops"), MiddleFills: CounterValue(c, "sr_middle_fills"),
		LostRetransmits: CounterValue(c, "sr_lost_retransmits"), SenderUnrecorded: CounterValue(c, "sr_sender_unrecorded")}
}

func newMeloScheme(t *testing.T, p Params) *meloScheme {
	t.Helper()
	s, err := New(MELO, p)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*meloScheme)
}

func meloRx(s *meloScheme) *meloReceiver { return s.NewReceiver().(*meloReceiver) }
func meloTx(s *meloScheme) *meloSender   { return s.NewSender().(*meloSender) }

func wantHoles(t *testing.T, r *meloReceiver, high qp.PSN, want ...Hole) {
	t.Helper()
	var w [3]Hole
	copy(w[:], want)
	gh, got := r.Holes()
	if gh != high || got != w {
		t.Fatalf("holes: high %d %+v, want high %d %+v", gh, got, high, w)
	}
}

var (
	keepNakHoles = Decision{Keep: true, Reply: ReplyHoles}
	keepOnly     = Decision{Keep: true}
	dropQuiet    = Decision{}
)

// wantRx compares a decision with want; a holes NACK's High and Holes only
// when want names them (wantHoles checks them against the receiver).
func wantRx(t *testing.T, got, want Decision, what string) {
	t.Helper()
	if got.Reply == ReplyHoles && want.Reply == ReplyHoles && want.High == 0 && want.Holes == [3]Hole{} {
		got.High, got.Holes = 0, [3]Hole{}
	}
	if got != want {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// TestMELOReceiverHoles: a NACK only when a packet opens a new hole; the
// three most recent holes, most recent first, a fill in the middle of one
// splits it, RCV.NXT's progress trims them.
func TestMELOReceiverHoles(t *testing.T) {
	s := newMeloScheme(t, Params{})
	r := meloRx(s)
	r.Reset(100)
	wantRx(t, r.OnOutOfSequence(0, 100, 102, false), keepNakHoles, "first early packet (hole 100-101)")
	wantHoles(t, r, 102, Hole{100, 2})
	wantRx(t, r.OnOutOfSequence(0, 100, 103, true), keepOnly, "packet contiguous with RCV.HIGH")
	wantHoles(t, r, 103, Hole{100, 2})
	wantRx(t, r.OnOutOfSequence(0, 100, 105, false), keepNakHoles, "hole 104")
	wantRx(t, r.OnOutOfSequence(0, 100, 109, false), keepNakHoles, "hole 106-108")
	wantRx(t, r.OnOutOfSequence(0, 100, 111, false), Decision{Keep: true, Reply: ReplyHoles, High: 111,
		Holes: [3]Hole{{110, 1}, {106, 3}, {104, 1}}}, "hole 110, the NACK's holes in the decision")
	// Four holes: the oldest (100-101) is forgotten.
	wantHoles(t, r, 111, Hole{110, 1}, Hole{106, 3}, Hole{104, 1})
	wantRx(t, r.OnOutOfSequence(0, 100, 103, false), dropQuiet, "a duplicate")
	// 107 fills the middle of 106-108: two holes, the later the more recent.
	wantRx(t, r.OnOutOfSequence(0, 100, 107, false), keepOnly, "a fill in the middle of a hole")
	wantHoles(t, r, 111, Hole{110, 1}, Hole{108, 1}, Hole{106, 1})
	wantRx(t, r.OnOutOfSequence(0, 100, 110, false), keepOnly, "a fill of a one-packet hole")
	wantHoles(t, r, 111, Hole{108, 1}, Hole{106, 1})
	// A fill of the forgotten hole: kept, no NACK, the holes unchanged.
	wantRx(t, r.OnOutOfSequence(0, 100, 101, false), keepOnly, "a fill of a forgotten hole")
	wantHoles(t, r, 111, Hole{108, 1}, Hole{106, 1})
	for psn, want := range map[qp.PSN]bool{100: false, 101: true, 102: true, 103: true, 104: false, 105: true, 106: false, 107: true, 108: false, 109: true, 110: true, 111: true, 112: false} {
		if got, _ := r.Kept(psn); got != want {
			t.Fatalf("Kept(%d) = %v, want %v", psn, got, want)
		}
	}
	// 100 arrives in order; the transport walks 101-103 and stops at 104.
	r.OnInSequence(0, 104)
	wantHoles(t, r, 111, Hole{108, 1}, Hole{106, 1})
	r.OnInSequence(0, 106) // 104 arrived, then 105 from the buffer
	wantHoles(t, r, 111, Hole{108, 1}, Hole{106, 1})
	r.OnInSequence(0, 108) // 106, then 107
	wantHoles(t, r, 111, Hole{108, 1})
	// A hole that RCV.NXT enters is shortened from the front; an early
	// packet beyond RCV.HIGH again opens one.
	wantRx(t, r.OnOutOfSequence(0, 108, 115, false), keepNakHoles, "hole 112-114")
	wantHoles(t, r, 115, Hole{112, 3}, Hole{108, 1})
	r.OnInSequence(0, 113) // 108 in order, 109-111 walked, then 112
	wantHoles(t, r, 115, Hole{113, 2})
	r.OnInSequence(0, 114)
	wantHoles(t, r, 115, Hole{114, 1})
	r.OnInSequence(0, 116)
	wantHoles(t, r, 115)
	if st := meloStatsOf(s); st.Pools[0].InUse != 0 || st.MiddleDrops != 0 || st.PoolDrops != 0 {
		t.Fatalf("after the episode: %+v", st)
	}
}

// TestMELOReceiverWrap: the holes and the chain across the 2^24 wrap.
func TestMELOReceiverWrap(t *testing.T) {
	s := newMeloScheme(t, Params{})
	r := meloRx(s)
	const e = qp.PSN(0xFFFFFD)
	r.Reset(e)
	wantRx(t, r.OnOutOfSequence(0, e, e.Add(4), false), keepNakHoles, "across the wrap")
	wantHoles(t, r, e.Add(4), Hole{e, 4})
	wantRx(t, r.OnOutOfSequence(0, e, e.Add(2), false), keepOnly, "fill")
	wantHoles(t, r, e.Add(4), Hole{e.Add(3), 1}, Hole{e, 2})
	if k, _ := r.Kept(e.Add(2)); !k {
		t.Fatal("Kept across the wrap")
	}
	r.OnInSequence(0, e.Add(1))
	wantHoles(t, r, e.Add(4), Hole{e.Add(3), 1}, Hole{e.Add(1), 1})
	r.OnInSequence(0, e.Add(5))
	if st := meloStatsOf(s); st.Pools[0].InUse != 0 {
		t.Fatalf("blocks left after the episode: %+v", st.Pools[0])
	}
}

// TestMELOReceiverBlocks: blocks go back as RCV.NXT passes them, all of
// them when the episode ends; a packet that needs a middle block is kept
// and counted (reordering is not loss: docs/recovery.md); packets beyond
// the window are dropped quietly.
func TestMELOReceiverBlocks(t *testing.T) {
	s := newMeloScheme(t, Params{BDPPackets: 64})
	r := meloRx(s)
	inUse := func(want int) {
		t.Helper()
		if got := meloStatsOf(s).Pools[0].InUse; got != want {
			t.Fatalf("%d receiver blocks in use, want %d", got, want)
		}
	}
	r.Reset(0)
	wantRx(t, r.OnOutOfSequence(0, 0, 2, false), keepNakHoles, "2")
	inUse(1)
	wantRx(t, r.OnOutOfSequence(0, 0, 17, false), keepNakHoles, "17 (block 2)")
	inUse(3)
	wantRx(t, r.OnOutOfSequence(0, 0, 10, false), keepOnly, "10 (block 1, in the middle)")
	if st := meloStatsOf(s); st.MiddleDrops != 0 || st.MiddleFills != 1 {
		t.Fatalf("middle drops %d, fills %d", st.MiddleDrops, st.MiddleFills)
	}
	if k, _ := r.Kept(10); !k {
		t.Fatal("a packet kept in the middle is not kept")
	}
	wantHoles(t, r, 17, Hole{11, 6}, Hole{3, 7}, Hole{0, 2})
	wantRx(t, r.OnOutOfSequence(0, 0, 5, false), keepOnly, "5 (head block)")
	wantRx(t, r.OnOutOfSequence(0, 0, 16, false), keepOnly, "16 (tail block)")
	wantRx(t, r.OnOutOfSequence(0, 0, 64, false), dropQuiet, "beyond the window")
	inUse(3)
	r.OnInSequence(0, 3) // 0, 1 in order, 2 walked
	inUse(3)
	r.OnInSequence(0, 8) // block 0 (0-7) is behind RCV.NXT
	inUse(2)
	// Now block 1 is the head: 9 is in it.
	wantRx(t, r.OnOutOfSequence(0, 8, 9, false), keepOnly, "9 in the head block")
	wantRx(t, r.OnOutOfSequence(0, 8, 10, false), dropQuiet, "a copy of 10")
	r.OnInSequence(0, 16)
	inUse(1)
	r.OnInSequence(0, 18) // past RCV.HIGH: the episode is over
	inUse(0)
	wantHoles(t, r, 17)
	if k, _ := r.Kept(16); k {
		t.Fatal("kept after the episode")
	}
	// A new episode starts its chain at the new RCV.NXT.
	wantRx(t, r.OnOutOfSequence(0, 18, 20, false), keepNakHoles, "next episode")
	inUse(1)
	wantHoles(t, r, 20, Hole{18, 2})
	r.Reset(500)
	inUse(0)
	if st := meloStatsOf(s); st.MiddleDrops != 0 || st.MiddleFills != 1 || st.PoolDrops != 0 || st.Pools[0].Allocs != st.Pools[0].Frees {
		t.Fatalf("%+v", st)
	}
}

// TestMELOReceiverPoolExhausted: a packet that gets no bits is dropped
// with a go-back-N NAK, at most one per NAK interval (MELO §3.2.5), and
// counted; a packet that needs no new block is still kept; once the pool
// has blocks again the receiver is selective again.
func TestMELOReceiverPoolExhausted(t *testing.T) {
	const ival = 100 * time.Microsecond
	s := newMeloScheme(t, Params{Knobs: KnobValues{"melo.pool_bits": "16"}, NakInterval: ival}) // two blocks
	r1, r2, r3 := meloRx(s), meloRx(s), meloRx(s)
	r1.Reset(0)
	r2.Reset(1000)
	r3.Reset(2000)
	wantRx(t, r1.OnOutOfSequence(0, 0, 2, false), keepNakHoles, "r1 2")
	wantRx(t, r2.OnOutOfSequence(0, 1000, 1003, false), keepNakHoles, "r2 1003")
	wantRx(t, r1.OnOutOfSequence(0, 0, 9, false), Decision{Reply: ReplySeqNak}, "r1 9 (no block)")
	wantRx(t, r1.OnOutOfSequence(10*time.Microsecond, 0, 10, false), dropQuiet, "r1 10 within the NAK interval")
	wantRx(t, r1.OnOutOfSequence(20*time.Microsecond, 0, 3, false), keepOnly, "r1 3 (its block)")
	wantRx(t, r1.OnOutOfSequence(99*time.Microsecond, 0, 11, false), dropQuiet, "r1 11")
	wantRx(t, r1.OnOutOfSequence(ival, 0, 12, false), Decision{Reply: ReplySeqNak}, "r1 12 after the NAK interval")
	// A first early packet that gets no bits: no episode.
	wantRx(t, r3.OnOutOfSequence(ival, 2000, 2005, false), Decision{Reply: ReplySeqNak}, "r3 2005")
	st := meloStatsOf(s)
	if st.PoolDrops != 5 || st.Fallbacks != 5 || st.Pools[0].InUse != 2 || st.Pools[0].Exhausted == 0 {
		t.Fatalf("after the drops: %+v", st)
	}
	wantHoles(t, r1, 3, Hole{0, 2})
	for psn, want := range map[qp.PSN]bool{2: true, 3: true, 9: false, 10: false, 12: false} {
		if got, _ := r1.Kept(psn); got != want {
			t.Fatalf("r1 Kept(%d) = %v, want %v", psn, got, want)
		}
	}
	if k, _ := r3.Kept(2005); k || r3.ooo {
		t.Fatal("r3 kept a packet it had no bits for")
	}
	// The NAK went back to 0; r1's episode ends as it all comes again.
	r1.OnInSequence(2*ival, 4)
	if meloStatsOf(s).Pools[0].InUse != 1 {
		t.Fatalf("r1's block not returned: %+v", meloStatsOf(s).Pools[0])
	}
	wantRx(t, r3.OnOutOfSequence(2*ival, 2000, 2005, false), keepNakHoles, "r3 2005 with a block free")
	// After progress a NAK goes out at once again.
	wantRx(t, r1.OnOutOfSequence(2*ival, 4, 9, false), Decision{Reply: ReplySeqNak}, "r1 9, pool empty again")
}

// TestMELOReceiverEvict: an evicted context returns its blocks; its bits
// come back on the next access, or stay readable in host memory if the
// pool is short, and then it cannot grow.
func TestMELOReceiverEvict(t *testing.T) {
	s := newMeloScheme(t, Params{Knobs: KnobValues{"melo.pool_bits": "24"}}) // three blocks
	r1, r2 := meloRx(s), meloRx(s)
	pool := func() PoolStats { return meloStatsOf(s).Pools[0] }
	r1.Reset(0)
	for _, psn := range []qp.PSN{2, 9, 12} {
		r1.OnOutOfSequence(0, 0, psn, false)
	}
	if pool().InUse != 2 {
		t.Fatalf("%+v", pool())
	}
	var ev Receiver = r1
	ev.OnEvict()
	if pool().InUse != 0 {
		t.Fatalf("eviction kept blocks: %+v", pool())
	}
	for psn, want := range map[qp.PSN]bool{1: false, 2: true, 3: false, 9: true, 12: true, 13: false} {
		if got, _ := r1.Kept(psn); got != want {
			t.Fatalf("after eviction Kept(%d) = %v, want %v", psn, got, want)
		}
	}
	if pool().InUse != 2 {
		t.Fatalf("blocks not taken back on access: %+v", pool())
	}
	wantHoles(t, r1, 12, Hole{10, 2}, Hole{3, 6}, Hole{0, 2})
	// Evicted again; meanwhile r2 takes two of the three blocks.
	r1.OnEvict()
	r2.Reset(100)
	r2.OnOutOfSequence(0, 100, 101, false)
	r2.OnOutOfSequence(0, 100, 110, false)
	if pool().InUse != 2 {
		t.Fatalf("%+v", pool())
	}
	// r1 finds one block for two: its bits stay in host memory.
	for psn, want := range map[qp.PSN]bool{2: true, 9: true, 11: false, 12: true} {
		if got, _ := r1.Kept(psn); got != want {
			t.Fatalf("from host memory Kept(%d) = %v, want %v", psn, got, want)
		}
	}
	drops := meloStatsOf(s).PoolDrops
	wantRx(t, r1.OnOutOfSequence(0, 0, 11, false), keepOnly, "a fill inside the host copy")
	if a := r1.OnOutOfSequence(0, 0, 16, false); a.Keep {
		t.Fatalf("a chain in host memory grew: %+v", a)
	}
	if meloStatsOf(s).PoolDrops != drops+1 || pool().InUse != 2 {
		t.Fatalf("%+v", meloStatsOf(s))
	}
	r1.OnInSequence(0, 13)
	r2.OnInSequence(0, 111)
	if pool().InUse != 0 || r1.bits.hostOnly || r1.ooo {
		t.Fatalf("episodes over: %+v, r1 host only %v", pool(), r1.bits.hostOnly)
	}
}

// TestMELOSender: the NACK's ranges rebuild the receiver's bitmap in the
// sender's pool, only the holes are resent, once per round; a timeout
// restarts the round and resends every packet not acknowledged; a
// go-back-N NAK goes back.
func TestMELOSender(t *testing.T) {
	s := newMeloScheme(t, Params{})
	snd := meloTx(s)
	const start = qp.PSN(0xFFFFF8)
	snd.Reset(start)
	sent := start.Add(20)
	if _, ok := snd.NextRetransmit(); ok {
		t.Fatal("retransmission outside recovery")
	}
	// The receiver holds 2-4, 7-9, 12-15 (holes 0-1, 5-6, 10-11): what
	// onHolesNak reports.
	for _, r := range [][2]uint32{{2, 4}, {7, 9}, {12, 15}} {
		snd.OnSack(0, start.Add(r[0]), start.Add(r[1]), Received, sent)
	}
	if got := drain(snd); !samePSNs(got, start, start.Add(1), start.Add(5), start.Add(6), start.Add(10), start.Add(11)) {
		t.Fatalf("resent %x", got)
	}
	if meloStatsOf(s).Pools[1].InUse == 0 {
		t.Fatal("the sender recorded a bitmap with no blocks")
	}
	// The same NACK again reveals nothing new.
	snd.OnSack(0, start.Add(12), start.Add(15), Received, sent)
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %x again", got)
	}
	// 0, 1 and 5 arrive; 6 was lost again. The cumulative acknowledgement
	// jumps over 2-4 and stops at 6.
	if got := snd.OnAck(0, start.Add(2)); got != start.Add(5) {
		t.Fatalf("cumulative %#x, want %#x", got, start.Add(5))
	}
	if got := snd.OnAck(0, start.Add(6)); got != start.Add(6) {
		t.Fatalf("cumulative %#x", got)
	}
	if r := snd.OnTimeout(0, start.Add(6), sent); r.GoBack {
		t.Fatalf("timeout went back: %+v", r)
	}
	// The timeout resends every packet from the front not acknowledged
	// (§3.2.3): the holes 6, 10 and 11 and 16-19, sent and never
	// acknowledged.
	if got := drain(snd); !samePSNs(got, start.Add(6), start.Add(10), start.Add(11),
		start.Add(16), start.Add(17), start.Add(18), start.Add(19)) {
		t.Fatalf("after the timeout resent %x", got)
	}
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %x twice in a round", got)
	}
	if got := snd.OnAck(0, start.Add(7)); got != start.Add(10) {
		t.Fatalf("cumulative %#x", got)
	}
	if got := snd.OnAck(0, start.Add(12)); got != start.Add(16) {
		t.Fatalf("cumulative %#x", got)
	}
	if !snd.recovery {
		t.Fatal("recovery ended before the cumulative acknowledgement passed the recovery sequence")
	}
	if got := snd.OnAck(0, sent); got != sent || snd.recovery || meloStatsOf(s).Pools[1].InUse != 0 {
		t.Fatalf("all acknowledged: %#x, %+v", got, meloStatsOf(s).Pools[1])
	}
	if r := snd.OnFeedback(0, Feedback{Kind: ReplySeqNak, Cum: sent.Add(3), Sent: sent.Add(9)}); !r.GoBack || r.GoBackTo != sent.Add(3) {
		t.Fatalf("OnNak: %+v", r)
	}
}

// TestMELOSenderTimeoutFromFront: with no selective acknowledgement at
// all (the holes NACK was lost, or the lost packet was the last) a
// timeout resends every packet from the cumulative acknowledgement to the
// highest sent, once (§3.2.3: "all packets starting from the front of the
// bitmap will be retransmitted again"), not the cumulative
// acknowledgement's alone; the next timeout does it again.
func TestMELOSenderTimeoutFromFront(t *testing.T) {
	s := newMeloScheme(t, Params{})
	snd := meloTx(s)
	const start = qp.PSN(0xFFFFFC)
	snd.Reset(start)
	sent := start.Add(8) // 0-7 out, nothing acknowledged
	all := []qp.PSN{start, start.Add(1), start.Add(2), start.Add(3), start.Add(4), start.Add(5), start.Add(6), start.Add(7)}
	if r := snd.OnTimeout(0, start, sent); r.GoBack {
		t.Fatalf("timeout went back: %+v", r)
	}
	if got := drain(snd); !samePSNs(got, all...) {
		t.Fatalf("after the timeout resent %x, want 0-7", got)
	}
	// The duplicate of 0 draws the ACK of 0-3: nothing more goes in this round.
	snd.OnAck(0, start.Add(4))
	if got := drain(snd); len(got) != 0 {
		t.Fatalf("resent %x twice in a round", got)
	}
	snd.OnTimeout(0, start.Add(4), sent)
	if got := drain(snd); !samePSNs(got, all[4:]...) {
		t.Fatalf("after a second timeout resent %x, want 4-7", got)
	}
}

// TestMELOSenderLostRetransmission: a retransmission of the cumulative
// acknowledgement's packet that stays unacknowledged for a hold (RTO_low/8
// here) while the responder acknowledges packets first sent after it was
// lost: the sender starts a new round at once, resending every hole, once
// per hold. Acknowledgements of packets sent before it prove nothing.
func TestMELOSenderLostRetransmission(t *testing.T) {
	const us = time.Microsecond
	s := newMeloScheme(t, Params{RTOLow: 400 * us})
	snd := meloTx(s)
	snd.Reset(0)
	snd.Timeout(time.Second, 30, RTT{}) // hold 50 µs
	// 0-9 sent; holes 0-1 and 5: the receiver holds 2-4 and 6-9.
	snd.OnSack(0, 2, 4, Received, 10)
	snd.OnSack(0, 6, 9, Received, 10)
	if got := drainAt(snd, 1*us, 10); !samePSNs(got, 0, 1, 5) {
		t.Fatalf("resent %v", got)
	}
	// 10-19 go out; 1 and 5 arrive, 0's retransmission is lost.
	snd.OnSack(20*us, 1, 1, Received, 20)
	snd.OnSack(30*us, 5, 5, Received, 20)
	snd.OnSack(40*us, 12, 12, Received, 20) // a new hole 10-11
	if got := drainAt(snd, 40*us, 20); !samePSNs(got, 10, 11) {
		t.Fatalf("resent %v", got)
	}
	snd.OnSack(45*us, 14, 14, Received, 20)
	if got := drainAt(snd, 45*us, 20); !samePSNs(got, 13) || meloStatsOf(s).LostRetransmits != 0 {
		t.Fatalf("within the hold: resent %v (%+v)", got, meloStatsOf(s))
	}
	snd.OnSack(51*us, 15, 15, Received, 20)
	if got := drainAt(snd, 51*us, 20); !samePSNs(got, 0, 10, 11, 13) || meloStatsOf(s).LostRetransmits != 1 {
		t.Fatalf("a hold after 0 was resent: resent %v (%+v)", got, meloStatsOf(s))
	}
	snd.OnSack(90*us, 17, 17, Received, 20)
	if got := drainAt(snd, 90*us, 20); !samePSNs(got, 16) || meloStatsOf(s).LostRetransmits != 1 {
		t.Fatalf("within a hold of the new round: resent %v (%+v)", got, meloStatsOf(s))
	}
	// 0 arrives: the cumulative acknowledgement moves to 10 (resent at
	// 51 µs); the hold counts from now, and only packets sent from now on
	// (20 and later) are evidence.
	if got := snd.OnAck(95*us, 1); got != 10 {
		t.Fatalf("cumulative %d", got)
	}
	snd.OnSack(140*us, 18, 18, Received, 30)
	snd.OnSack(150*us, 19, 19, Received, 30)
	if got := drainAt(snd, 150*us, 30); len(got) != 0 || meloStatsOf(s).LostRetransmits != 1 {
		t.Fatalf("acknowledgements of packets sent before: resent %v (%+v)", got, meloStatsOf(s))
	}
	snd.OnSack(151*us, 22, 22, Received, 30)
	if got := drainAt(snd, 151*us, 30); !samePSNs(got, 10, 11, 13, 16, 20, 21) || meloStatsOf(s).LostRetransmits != 2 {
		t.Fatalf("a hold after progress: resent %v (%+v)", got, meloStatsOf(s))
	}
}

// TestMELOSenderPoolExhausted: selective acknowledgements the sender
// cannot record for want of blocks are resent, never acknowledged.
func TestMELOSenderPoolExhausted(t *testing.T) {
	s := newMeloScheme(t, Params{Knobs: KnobValues{"melo.pool_bits": "8"}}) // one block per side
	snd := meloTx(s)
	snd.Reset(0)
	const sent = 24
	for _, r := range [][2]qp.PSN{{2, 4}, {7, 9}, {12, 15}} {
		snd.OnSack(0, r[0], r[1], Received, sent)
	}
	st := meloStatsOf(s)
	if st.SenderUnrecorded == 0 || st.Pools[1].InUse != 1 || st.Pools[1].Exhausted == 0 {
		t.Fatalf("%+v", st)
	}
	got := drain(snd)
	resent := map[qp.PSN]bool{}
	for _, p := range got {
		resent[p] = true
	}
	for _, p := range []qp.PSN{0, 1, 5, 6, 10, 11} {
		if !resent[p] {
			t.Fatalf("hole %d not resent: %v", p, got)
		}
	}
	// 12-15 needed a second block: not recorded, so resent.
	for p := qp.PSN(12); p <= 15; p++ {
		if snd.pooled.acked(p) || !resent[p] {
			t.Fatalf("unrecorded %d: acknowledged %v, resent %v (%v)", p, snd.pooled.acked(p), resent[p], got)
		}
	}
	// The cumulative acknowledgement never moves over what the sender
	// could not record.
	for p := qp.PSN(12); p <= 15; p++ {
		if c := snd.OnAck(0, p); c != p {
			t.Fatalf("cumulative moved to %d over unrecorded %d", c, p)
		}
	}
	snd.OnAck(0, sent)
	if st := meloStatsOf(s); st.Pools[1].InUse != 0 {
		t.Fatalf("%+v", st.Pools[1])
	}
}

// TestMELOSenderEvict: the sender's chain goes to host memory on
// eviction and comes back with the same record.
func TestMELOSenderEvict(t *testing.T) {
	s := newMeloScheme(t, Params{})
	snd := meloTx(s)
	snd.Reset(0)
	snd.OnSack(0, 3, 3, Received, 20)
	snd.OnSack(0, 6, 6, Received, 20)
	if meloStatsOf(s).Pools[1].InUse != 1 {
		t.Fatalf("%+v", meloStatsOf(s).Pools[1])
	}
	snd.OnEvict()
	if meloStatsOf(s).Pools[1].InUse != 0 {
		t.Fatalf("eviction kept blocks: %+v", meloStatsOf(s).Pools[1])
	}
	if got := drain(snd); !samePSNs(got, 0, 1, 2, 4, 5) {
		t.Fatalf("after eviction resent %v", got)
	}
	if got := snd.OnAck(0, 3); got != 4 || meloStatsOf(s).Pools[1].InUse != 1 {
		t.Fatalf("cumulative %d, %+v", got, meloStatsOf(s).Pools[1])
	}
	snd.OnAck(0, 20)
	if meloStatsOf(s).Pools[1].InUse != 0 {
		t.Fatalf("%+v", meloStatsOf(s).Pools[1])
	}
}

// TestMELOSenderBlocksReturned: once everything sent is acknowledged the
// sender's blocks are back in the pool, where another connection's
// recovery needs them.
func TestMELOSenderBlocksReturned(t *testing.T) {
	s := newMeloScheme(t, Params{Knobs: KnobValues{"melo.pool_bits": "8"}}) // one block per side
	s1, s2 := meloTx(s), meloTx(s)
	s1.Reset(0)
	s1.OnSack(0, 3, 3, Received, 8)
	s1.OnSack(0, 6, 6, Received, 8)
	drain(s1)
	if got := s1.OnAck(0, 8); got != 8 || s1.recovery {
		t.Fatalf("cumulative %d, recovery %v", got, s1.recovery)
	}
	if st := meloStatsOf(s).Pools[1]; st.InUse != 0 {
		t.Fatalf("everything acknowledged, recovery over: %+v", st)
	}
	// Another connection's recovery can record its acknowledgements.
	s2.Reset(100)
	s2.OnSack(0, 103, 103, Received, 110)
	s2.OnSack(0, 106, 106, Received, 110)
	if st := meloStatsOf(s); st.SenderUnrecorded != 0 {
		t.Fatalf("the second connection found the pool empty: %+v", st)
	}
}

// TestMELOSplitOldestHole: a fill in the middle of the oldest of three
// holes keeps its later part and forgets the earlier one (the fourth most
// recent); it used to index past the three entries and crash the NIC.
func TestMELOSplitOldestHole(t *testing.T) {
	s := newMeloScheme(t, Params{})
	r := meloRx(s)
	r.Reset(0)
	for _, p := range []qp.PSN{10, 20, 30} { // holes 0-9, 11-19, 21-29
		r.OnOutOfSequence(0, 0, p, false)
	}
	// Let RCV.NXT pass nothing; fill 5, in the middle of the oldest hole 0-9
	// (a block neither head nor tail would be dropped: 5 is in the head).
	if act := r.OnOutOfSequence(0, 0, 5, false); !act.Keep {
		t.Fatalf("fill of the head block not kept: %+v", act)
	}
	_, holes := r.Holes()
	want := [3]Hole{{21, 9}, {11, 9}, {6, 4}}
	if holes != want {
		t.Fatalf("holes %v, want %v", holes, want)
	}
}

// TestSelSenderLateAck: under reordering a selective acknowledgement can
// name a PSN before the first one the sender's bits record; the chain
// grows at its head to record it rather than resend a packet the receiver
// holds (docs/recovery.md, "Reordering is not loss").
func TestSelSenderLateAck(t *testing.T) {
	s := newMeloScheme(t, Params{})
	snd := meloTx(s)
	const start = qp.PSN(0xFFFFF0) // across the wrap
	snd.Reset(start)
	sent := start.Add(60)
	for _, p := range []uint32{40, 50, 20, 5} {
		snd.OnSack(0, start.Add(p), start.Add(p), Received, sent)
	}
	if st := meloStatsOf(s); st.SenderUnrecorded != 0 {
		t.Fatalf("%d acknowledgements not recorded", st.SenderUnrecorded)
	}
	for _, p := range []uint32{5, 20, 40, 50} {
		if !snd.pooled.acked(start.Add(p)) {
			t.Fatalf("%d not recorded", p)
		}
	}
	got := drain(snd)
	if len(got) != 51-4 {
		t.Fatalf("resent %d packets, want %d: %x", len(got), 51-4, got)
	}
	for _, p := range got {
		if snd.pooled.acked(p) {
			t.Fatalf("resent %#x, acknowledged", p)
		}
	}
	if got := snd.OnAck(0, sent); got != sent || meloStatsOf(s).Pools[1].InUse != 0 {
		t.Fatalf("all acknowledged: %#x, %+v", got, meloStatsOf(s).Pools[1])
	}
}

// TestMELOKnobAndCounters: MELO's own knob and counters are declared in
// melo.go: melo.pool_bits sizes both bits pools, and the scheme reports
// its receivers' and senders' counters by name from the start.
func TestMELOKnobAndCounters(t *testing.T) {
	var v KnobValues
	if err := v.Set("melo.pool_bits=17"); err != nil {
		t.Fatal(err)
	}
	s := newMeloScheme(t, Params{Knobs: v})
	if p := s.Pools(); p[0].Slots != 3 || p[1].Slots != 3 { // rounded up to whole bytes
		t.Errorf("melo.pool_bits=17: pools %+v, want 3 blocks each", p)
	}
	var names []string
	for _, c := range s.Counters() {
		if c.Value != 0 || c.Help == "" {
			t.Errorf("a new scheme's %+v", c)
		}
		names = append(names, c.Name)
	}
	want := []string{"sr_pool_fallbacks", "sr_pool_drops", "sr_middle_drops", "sr_middle_fills", "sr_lost_retransmits", "sr_sender_unrecorded"}
	if !slices.Equal(names, want) {
		t.Errorf("counters %v, want %v", names, want)
	}
	i := slices.IndexFunc(Knobs(), func(k Knob) bool { return k.Key() == "melo.pool_bits" })
	if i < 0 || Knobs()[i].Default != "1024" {
		t.Errorf("melo.pool_bits not declared with its default: %+v", Knobs())
	}
}
