// Package impair is softnic's one implementation of per-frame impairment:
// loss (random or Gilbert-Elliott bursts), delay with jitter, reordering,
// duplication, bit corruption and holding frames back. The in-memory
// fabric uses it on every link (package fabric) and the daemon on what it
// receives (dataplane's receive stage, softnic run --netem), so that "loss
// 1% reorder 2%" means the same frames in an embedded run and between two
// real hosts.
//
// # Words
//
// A Spec is written in netem's grammar (tc-netem(8)) and read by Parse:
//
//	limit N                       at most N frames held (tail drop)
//	delay TIME [JITTER [CORR%]]   uniform in [TIME-JITTER, TIME+JITTER), at least 0
//	loss [random] P% [CORR%]      each frame lost with probability P
//	loss gemodel P [R [1-H [1-K]]]  Gilbert-Elliott bursts
//	reorder P% [CORR%] [gap N]    with a delay: P% of frames skip it
//	duplicate P% [CORR%]          a copy too, with its own jitter
//	corrupt P% [CORR%]            one random bit flipped
//	hold P% TIME                  softnic: P% of frames held an extra TIME
//	seed N                        the random streams' seed
//
// Spec.String prints the canonical form, which Parse reads back unchanged.
//
// # Mechanism
//
// A Spec compiles to a Model: probabilities in [0, 1] and the delay as a
// base plus a uniform span (netem's delay D jitter J is base D-J, span 2J;
// the fabric's legacy Delay and Jitter are base 0, span Jitter on top of its
// propagation delay). A Stage applies a Model frame by frame: Decide returns
// a Verdict (drop; or deliver after Delay, corrupting one bit if CorruptBit
// is not -1; and maybe a copy after DupDelay) and counts what it decided
// in Stats. The Stage never touches frames; its users copy, flip and queue.
//
// Gilbert-Elliott follows the kernel's netem (loss_gilb_ell): a frame in the
// good state moves to the bad one with probability P and is lost with
// probability 1-K; in the bad state it moves back with probability R and is
// lost with probability 1-H, the loss decided by the state the frame found.
// With netem's defaults (1-H = 100%, 1-K = 0) losses come in bursts of mean
// length 1/R at an average rate P/(P+R).
//
// Correlation is netem's (get_crandom): a draw u becomes (1-ρ)u + ρ·last.
// Like netem's, it narrows the draws around 1/2 rather than making a Markov
// chain, so a correlated loss of P% loses fewer than P% of frames; use
// gemodel for bursts.
//
// # Draws
//
// A Stage has two PCG streams (math/rand/v2) derived from a seed and a
// stream number. The first gives every frame the same five draws whatever
// the Model, in this order: loss, duplicate, hold, jitter, copy jitter; they
// are the fabric's historical draws, so its seeded tests lose, duplicate and
// delay the same frames as before this package existed. Everything newer
// draws from the second stream, and only when the Model uses it: two draws
// for Gilbert-Elliott (state change, loss), one for reorder, two for
// corrupt (whether, which bit). Correlation reuses its word's draw. So a
// seed reproduces a run exactly, and turning on corruption does not change
// which frames are lost.
//
// Decide does not allocate.
package impair

import (
	"math/rand/v2"
	"time"
)

// Model is what a Stage applies: probabilities in [0, 1] and times.
type Model struct {
	Loss, LossCorr float64
	// Gilbert-Elliott (GE set): GoodToBad is netem's P, BadToGood R,
	// BadLoss 1-H and GoodLoss 1-K.
	GE                                      bool
	GoodToBad, BadToGood, BadLoss, GoodLoss float64
	// A frame waits max(0, DelayBase + a uniform draw in [0, DelaySpan)).
	DelayBase, DelaySpan time.Duration
	DelayCorr            float64
	// Reorder: frames sent without the delay (netem reorder); at most one
	// in every ReorderGap frames (0 or 1: any frame).
	Reorder, ReorderCorr float64
	ReorderGap           int
	Duplicate, DupCorr   float64
	Corrupt, CorruptCorr float64
	// Hold: frames held back an extra HoldTime.
	Hold     float64
	HoldTime time.Duration
}

// Model compiles s.
func (s *Spec) Model() Model {
	return Model{
		Loss: s.LossPct / 100, LossCorr: s.LossCorr / 100,
		GE: s.GE, GoodToBad: s.GEP / 100, BadToGood: s.GER / 100, BadLoss: s.GE1H / 100, GoodLoss: s.GE1K / 100,
		DelayBase: s.Delay - s.Jitter, DelaySpan: 2 * s.Jitter, DelayCorr: s.DelayCorr / 100,
		Reorder: s.ReorderPct / 100, ReorderCorr: s.ReorderCorr / 100, ReorderGap: s.ReorderGap,
		Duplicate: s.DupPct / 100, DupCorr: s.DupCorr / 100,
		Corrupt: s.CorruptPct / 100, CorruptCorr: s.CorruptCorr / 100,
		Hold: s.HoldPct / 100, HoldTime: s.HoldTime,
	}
}

// Verdict is a Stage's decision about one frame.
type Verdict struct {
	Drop bool
	// Delay is how long after its arrival the frame is delivered.
	Delay time.Duration
	// CorruptBit is the bit to flip (byte CorruptBit/8, mask
	// 1<<(CorruptBit%8)), -1 for none.
	CorruptBit int
	Reordered  bool // sent without the delay (netem reorder)
	Held       bool // held back the extra hold time
	// Dup: a copy, uncorrupted, is delivered DupDelay after the arrival.
	Dup      bool
	DupDelay time.Duration
}

// Stats count a Stage's decisions.
type Stats struct {
	Frames     uint64 // frames decided
	Lost       uint64 // dropped by random or Gilbert-Elliott loss
	GEBad      uint64 // frames that found the Gilbert-Elliott bad state
	Duplicated uint64 // copies decided
	Reordered  uint64 // frames sent without the delay
	Held       uint64 // frames held back the hold time
	Corrupted  uint64 // frames with a bit flipped
	Delayed    uint64 // frames given a delay above 0
}

// Stage decides frame by frame. It is not safe for concurrent use.
type Stage struct {
	m     Model
	rng   *rand.Rand // the five fixed draws per frame
	extra *rand.Rand // Gilbert-Elliott, reorder, corrupt
	bad   bool       // the Gilbert-Elliott state
	since int        // frames since the last reordered one (netem's counter)
	// The correlation's last values (netem's crndstate.last).
	lastLoss, lastDup, lastJitter, lastReorder, lastCorrupt float64
	stats                                                   Stats
}

// The streams' salts: StreamSalt is the fabric's historical one (the 64-bit
// golden ratio), extraSalt another odd constant (splitmix64's multiplier).
const (
	StreamSalt = 0x9e3779b97f4a7c15
	extraSalt  = 0xbf58476d1ce4e5b9
)

// NewStage returns a Stage applying m with the streams of seed and stream:
// the fixed draws come from PCG(seed, StreamSalt+stream), the others from
// PCG(seed, extraSalt+stream). Different stream numbers (a fabric's two
// directions, a daemon's queues) give independent decisions.
func NewStage(m Model, seed, stream uint64) *Stage {
	s := &Stage{
		rng:   rand.New(rand.NewPCG(seed, StreamSalt+stream)),
		extra: rand.New(rand.NewPCG(seed, extraSalt+stream)),
	}
	s.SetModel(m)
	return s
}

// Reseed starts the streams again from seed and stream (as NewStage);
// the Model and the counts stay.
func (s *Stage) Reseed(seed, stream uint64) {
	s.rng = rand.New(rand.NewPCG(seed, StreamSalt+stream))
	s.extra = rand.New(rand.NewPCG(seed, extraSalt+stream))
	s.SetModel(s.m)
}

// SetModel changes the Model; the streams go on where they were. The
// Gilbert-Elliott state restarts good and the correlations at 1/2.
func (s *Stage) SetModel(m Model) {
	s.m = m
	s.bad = false
	s.since = 0
	s.lastLoss, s.lastDup, s.lastJitter, s.lastReorder, s.lastCorrupt = 0.5, 0.5, 0.5, 0.5, 0.5
}

// Model returns the Model in force.
func (s *Stage) Model() Model { return s.m }

// Stats returns the counts so far.
func (s *Stage) Stats() Stats { return s.stats }

// Decide decides the fate of a frame of n bytes.
func (s *Stage) Decide(n int) Verdict {
	m := &s.m
	s.stats.Frames++
	// The five fixed draws, always, in this order (package documentation).
	lossU := s.rng.Float64()
	dupU := s.rng.Float64()
	holdU := s.rng.Float64()
	jitterU := s.rng.Float64()
	copyU := s.rng.Float64()
	// The second stream, only for what the Model uses.
	var geMove, geLoss, reorderU, corruptU, bitU float64
	if m.GE {
		geMove, geLoss = s.extra.Float64(), s.extra.Float64()
	}
	if m.Reorder > 0 {
		reorderU = s.extra.Float64()
	}
	if m.Corrupt > 0 {
		corruptU, bitU = s.extra.Float64(), s.extra.Float64()
	}

	v := Verdict{CorruptBit: -1}
	var lost bool
	if m.GE {
		// loss_gilb_ell: change state, lose by the state the frame found.
		if s.bad {
			s.stats.GEBad++
			lost = geLoss < m.BadLoss
			if geMove < m.BadToGood {
				s.bad = false
			}
		} else {
			lost = geLoss < m.GoodLoss
			if geMove < m.GoodToBad {
				s.bad = true
			}
		}
	} else {
		if m.LossCorr > 0 {
			lossU = correlate(&s.lastLoss, lossU, m.LossCorr)
		}
		lost = lossU < m.Loss
	}
	if lost {
		s.stats.Lost++
		v.Drop = true
		return v
	}
	if m.jitterCorrelated() {
		jitterU = correlate(&s.lastJitter, jitterU, m.DelayCorr)
	}
	delay := max(0, m.DelayBase+uniform(jitterU, m.DelaySpan))
	if m.Reorder > 0 {
		if m.ReorderCorr > 0 {
			reorderU = correlate(&s.lastReorder, reorderU, m.ReorderCorr)
		}
		// netem_enqueue: inside the gap, or the draw says no, the frame
		// waits as the others do.
		if s.since+1 >= m.ReorderGap && reorderU < m.Reorder {
			delay, v.Reordered, s.since = 0, true, 0
			s.stats.Reordered++
		} else {
			s.since++
		}
	}
	if holdU < m.Hold {
		delay = satAdd(delay, m.HoldTime)
		v.Held = true
		s.stats.Held++
	}
	v.Delay = delay
	if delay > 0 {
		s.stats.Delayed++
	}
	if m.DupCorr > 0 {
		dupU = correlate(&s.lastDup, dupU, m.DupCorr)
	}
	if dupU < m.Duplicate {
		v.Dup = true
		v.DupDelay = max(0, m.DelayBase+uniform(copyU, m.DelaySpan))
		s.stats.Duplicated++
	}
	if m.Corrupt > 0 && n > 0 {
		if m.CorruptCorr > 0 {
			corruptU = correlate(&s.lastCorrupt, corruptU, m.CorruptCorr)
		}
		if corruptU < m.Corrupt {
			v.CorruptBit = min(int(bitU*float64(8*n)), 8*n-1)
			s.stats.Corrupted++
		}
	}
	return v
}

// jitterCorrelated reports whether jitter draws are correlated.
func (m *Model) jitterCorrelated() bool { return m.DelayCorr > 0 && m.DelaySpan > 0 }

// correlate is netem's get_crandom on a draw in [0, 1).
func correlate(last *float64, u, rho float64) float64 {
	v := (1-rho)*u + rho**last
	*last = v
	return v
}

// uniform maps a draw u in [0, 1) to a duration in [0, limit) (the fabric's
// historical mapping).
func uniform(u float64, limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	// The product can round up to limit when limit exceeds 2^53 ns.
	return min(time.Duration(u*float64(limit)), limit-1)
}

func satAdd(a, b time.Duration) time.Duration {
	if b > 0 && a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}
