package cc

import (
	"math"
	"testing"
	"time"
)

const gbit = 1_000_000_000

func newDCQCN(t testing.TB, knobs ...string) *dcqcnAlgorithm {
	t.Helper()
	var v KnobValues
	for _, k := range knobs {
		if err := v.Set(k); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(DCQCN, Params{LineRate: 40 * gbit, Knobs: v})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*dcqcnAlgorithm)
}

// counts are an algorithm's counters by name.
func counts(a Algorithm) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range a.Counters() {
		m[c.Name] = c.Value
	}
	return m
}

// TestDCQCNCutsOnlyThatQP: a CNP lowers exactly the rate of the QP it is
// for, by alpha/2 (alpha starts at 1: half), and arms only its timer.
func TestDCQCNCutsOnlyThatQP(t *testing.T) {
	a := newDCQCN(t)
	if !a.Caps().ECN {
		t.Error("DCQCN does not ask for ECT")
	}
	s1, s2 := a.NewSender(), a.NewSender()
	if s1.Rate() != 40*gbit || s2.Rate() != 40*gbit {
		t.Fatalf("start: %d, %d; want line rate", s1.Rate(), s2.Rate())
	}
	if _, ok := s1.Deadline(); ok {
		t.Error("a timer before any CNP")
	}
	if !s1.OnCNP(10 * time.Microsecond) {
		t.Error("CNP not handled")
	}
	if s1.Rate() != 20*gbit || s2.Rate() != 40*gbit {
		t.Errorf("after a CNP for QP 1: %d, %d; want 20G, 40G", s1.Rate(), s2.Rate())
	}
	if at, ok := s1.Deadline(); !ok || at != 65*time.Microsecond {
		t.Errorf("QP 1 deadline %v %v, want 65µs", at, ok)
	}
	if _, ok := s2.Deadline(); ok {
		t.Error("QP 2 has a timer")
	}
	if c := counts(a); c["dcqcn_rate_cuts"] != 1 {
		t.Errorf("counters %v", c)
	}
	s1.OnTimer(65 * time.Microsecond)
	s2.OnTimer(65 * time.Microsecond)
	if s2.Rate() != 40*gbit || s1.Rate() != 30*gbit {
		t.Errorf("after a timer: %d, %d; want 30G (fast recovery), 40G", s1.Rate(), s2.Rate())
	}
}

// TestDCQCNRecoveryStages: after a cut the rate comes back in DCQCN's
// stages (DCQCN §3): fast recovery, RC halfway to RT, while neither the timer
// nor the byte counter has expired more than F = 5 times; additive
// increase (RT += 40 Mbit/s) once one has; hyper increase (RT += 200
// Mbit/s) once both have. Each event's stage and numbers, exactly.
func TestDCQCNRecoveryStages(t *testing.T) {
	a := newDCQCN(t)
	s := a.NewSender().(*dcqcnSender)
	s.OnCNP(0)                // RT 40G, RC 20G, alpha stays 1
	s.OnCNP(time.Microsecond) // RT 20G, RC 10G
	if s.rt != 20*gbit || s.rc != 10*gbit {
		t.Fatalf("after two CNPs RT %d RC %d", s.rt, s.rc)
	}
	const us = time.Microsecond
	type event struct {
		at     Time
		bytes  int    // 0: the timer's expiry, at its deadline
		stage  string // the counter that the event adds to
		t, bc  int
		rt, rc uint64
	}
	for i, e := range []event{
		{at: 56 * us, stage: "dcqcn_fast_recovery", t: 1, rt: 20e9, rc: 15e9},
		{at: 111 * us, stage: "dcqcn_fast_recovery", t: 2, rt: 20e9, rc: 17.5e9},
		{at: 166 * us, stage: "dcqcn_fast_recovery", t: 3, rt: 20e9, rc: 18.75e9},
		{at: 221 * us, stage: "dcqcn_fast_recovery", t: 4, rt: 20e9, rc: 19.375e9},
		{at: 276 * us, stage: "dcqcn_fast_recovery", t: 5, rt: 20e9, rc: 19.6875e9},
		{at: 331 * us, stage: "dcqcn_additive_increase", t: 6, rt: 20.04e9, rc: 19_863_750_000},
		// 10 MB sent: the byte counter's expiries, BC 1 to 5 additive
		// (T is past F, BC is not), BC 6 hyper (both are).
		{at: 340 * us, bytes: 10_000_000, stage: "dcqcn_additive_increase", t: 6, bc: 1, rt: 20.08e9, rc: 19_971_875_000},
		{at: 341 * us, bytes: 10_000_000, stage: "dcqcn_additive_increase", t: 6, bc: 2, rt: 20.12e9, rc: 20_045_937_500},
		{at: 342 * us, bytes: 10_000_000, stage: "dcqcn_additive_increase", t: 6, bc: 3, rt: 20.16e9, rc: 20_102_968_750},
		{at: 343 * us, bytes: 10_000_000, stage: "dcqcn_additive_increase", t: 6, bc: 4, rt: 20.20e9, rc: 20_151_484_375},
		{at: 344 * us, bytes: 10_000_000, stage: "dcqcn_additive_increase", t: 6, bc: 5, rt: 20.24e9, rc: 20_195_742_188},
		{at: 345 * us, bytes: 10_000_000, stage: "dcqcn_hyper_increase", t: 6, bc: 6, rt: 20.44e9, rc: 20_317_871_094},
		{at: 386 * us, stage: "dcqcn_hyper_increase", t: 7, bc: 6, rt: 20.64e9, rc: 20_478_935_547},
	} {
		before := counts(a)
		if e.bytes == 0 {
			if at, ok := s.Deadline(); !ok || at != e.at {
				t.Fatalf("event %d: deadline %v %v, want %v", i, at, ok, e.at)
			}
			s.OnTimer(e.at)
		} else {
			s.OnSent(e.at, e.bytes-1) // one byte short: no expiry yet
			if s.bc != e.bc-1 {
				t.Fatalf("event %d: BC %d before the counter's last byte", i, s.bc)
			}
			s.OnSent(e.at, 1)
		}
		after := counts(a)
		if after[e.stage] != before[e.stage]+1 {
			t.Errorf("event %d at %v: not one %s: %v -> %v", i, e.at, e.stage, before, after)
		}
		if s.t != e.t || s.bc != e.bc || s.rt != e.rt || s.rc != e.rc || s.Rate() != e.rc {
			t.Errorf("event %d at %v: T %d BC %d RT %d RC %d; want T %d BC %d RT %d RC %d",
				i, e.at, s.t, s.bc, s.rt, s.rc, e.t, e.bc, e.rt, e.rc)
		}
	}
	c := counts(a)
	if c["dcqcn_fast_recovery"] != 5 || c["dcqcn_additive_increase"] != 6 || c["dcqcn_hyper_increase"] != 2 ||
		c["dcqcn_rate_timer_expiries"] != 7 || c["dcqcn_byte_counter_expiries"] != 6 || c["dcqcn_rate_cuts"] != 2 {
		t.Errorf("counters %v", c)
	}
	// A CNP ends the recovery: RT is the rate reached, the counts restart.
	s.OnCNP(400 * us)
	if s.rt != 20_478_935_547 || s.t != 0 || s.bc != 0 || s.bytes != 0 {
		t.Errorf("after a CNP: RT %d T %d BC %d bytes %d", s.rt, s.t, s.bc, s.bytes)
	}
}

// TestDCQCNRecoversToLineRate: with the timer alone a cut QP comes back to
// exactly line rate, and then wants no timer.
func TestDCQCNRecoversToLineRate(t *testing.T) {
	a := newDCQCN(t)
	s := a.NewSender()
	s.OnCNP(0)
	var events int
	for {
		at, ok := s.Deadline()
		if !ok {
			break
		}
		if events++; events > 1000 {
			t.Fatal("not recovered after 1000 events")
		}
		s.OnTimer(at)
		if r := s.Rate(); r > 40*gbit {
			t.Fatalf("rate %d above the line", r)
		}
	}
	if s.Rate() != 40*gbit {
		t.Errorf("recovered to %d", s.Rate())
	}
	// 20G to 40G: five halvings of the gap in fast recovery, then
	// additive increase with RT at the line halves it each event, up to
	// the last bit/s.
	if events < 30 || events > 40 {
		t.Errorf("%d increase events", events)
	}
}

// TestDCQCNAlphaDecays: alpha decays by (1-g) for every K = 55 µs without
// a CNP, rises by g's share with each CNP, and sets how deep the next cut
// is; after the QP recovered it keeps decaying, with no timer.
func TestDCQCNAlphaDecays(t *testing.T) {
	a := newDCQCN(t)
	s := a.NewSender().(*dcqcnSender)
	const g = 1.0 / 256
	s.OnCNP(0)
	if s.alpha != 1 {
		t.Fatalf("alpha %v after the first CNP, want 1", s.alpha)
	}
	want := 1.0
	for k := 1; ; k++ {
		at, ok := s.Deadline()
		if !ok {
			break
		}
		if at != Time(k)*55*time.Microsecond {
			t.Fatalf("deadline %d at %v", k, at)
		}
		s.OnTimer(at)
		want *= 1 - g
		if s.alpha != want {
			t.Fatalf("after %d periods alpha %v, want %v", k, s.alpha, want)
		}
	}
	// Recovered: no timer, but alpha goes on decaying: 10 ms later it is
	// (1-g)^181 (181 whole periods of 55 µs since the CNP).
	now := 10 * time.Millisecond
	s.OnTimer(now)
	if want := math.Pow(1-g, 181); math.Abs(s.alpha-want) > 1e-12*want {
		t.Errorf("alpha %v after 10 ms, want %v", s.alpha, want)
	}
	if c := counts(a); c["dcqcn_alpha_updates"] != 181 {
		t.Errorf("alpha updates %d, want 181", c["dcqcn_alpha_updates"])
	}
	alpha := s.alpha
	s.OnCNP(now)
	if want := uint64(math.Round(float64(40*gbit) * (1 - alpha/2))); s.rc != want {
		t.Errorf("cut to %d, want %d (alpha %v)", s.rc, want, alpha)
	}
	if want := (1-g)*alpha + g; s.alpha != want {
		t.Errorf("alpha %v after a CNP, want %v", s.alpha, want)
	}
	// A CNP restarts the alpha timer: K after it, not before, alpha
	// decays once.
	alpha = s.alpha
	s.OnTimer(now + 55*time.Microsecond - 1)
	if s.alpha != alpha {
		t.Errorf("alpha decayed before K")
	}
	s.OnTimer(now + 55*time.Microsecond)
	if s.alpha != alpha*(1-g) {
		t.Errorf("alpha %v K after the CNP, want %v", s.alpha, alpha*(1-g))
	}
}

// TestDCQCNLateTimer: a timer call that comes late does what the calls on
// time would have done, each expiry at its own time.
func TestDCQCNLateTimer(t *testing.T) {
	a := newDCQCN(t)
	onTime, late := a.NewSender().(*dcqcnSender), a.NewSender().(*dcqcnSender)
	onTime.OnCNP(0)
	late.OnCNP(0)
	end := 700 * time.Microsecond
	for at, ok := onTime.Deadline(); ok && at <= end; at, ok = onTime.Deadline() {
		onTime.OnTimer(at)
	}
	onTime.OnTimer(end)
	late.OnTimer(end)
	if late.rc != onTime.rc || late.rt != onTime.rt || late.t != onTime.t || late.rateAt != onTime.rateAt ||
		math.Abs(late.alpha-onTime.alpha) > 1e-15 {
		t.Errorf("late: %+v\non time: %+v", *late, *onTime)
	}
	if late.t != 12 {
		t.Errorf("T %d after 700 µs, want 12", late.t)
	}
}

// TestDCQCNMinRate: however many CNPs come, a cut leaves at least the
// minimum rate.
func TestDCQCNMinRate(t *testing.T) {
	a := newDCQCN(t, "dcqcn.min_rate=100Mbit")
	s := a.NewSender()
	for i := range 100 {
		s.OnCNP(Time(i) * time.Microsecond)
	}
	if s.Rate() != 100_000_000 {
		t.Errorf("rate %d after 100 CNPs, want the minimum 100Mbit", s.Rate())
	}
	if c := counts(a); c["dcqcn_rate_cuts"] != 9 { // 40G to 100M: 9 halvings
		t.Errorf("cuts %d", c["dcqcn_rate_cuts"])
	}
}

// TestDCQCNKnobs: the knobs set what they name.
func TestDCQCNKnobs(t *testing.T) {
	a := newDCQCN(t, "dcqcn.rate_timer=300us", "dcqcn.byte_counter=0", "dcqcn.fast_recovery=1", "dcqcn.rai=5Mbit", "dcqcn.initial_alpha=0.5", "dcqcn.g=1/16")
	s := a.NewSender().(*dcqcnSender)
	s.OnCNP(0)
	if s.rc != 30*gbit || s.alpha != 0.5*15/16+1.0/16 {
		t.Errorf("cut to %d, alpha %v", s.rc, s.alpha)
	}
	if at, ok := s.Deadline(); !ok || at != 300*time.Microsecond {
		t.Errorf("deadline %v", at)
	}
	s.OnSent(time.Microsecond, 1<<30)
	if s.bc != 0 {
		t.Errorf("byte counter off, yet BC %d", s.bc)
	}
	s.OnTimer(300 * time.Microsecond) // T 1: fast recovery
	s.OnTimer(600 * time.Microsecond) // T 2: additive, R_AI 5 Mbit/s, RT at the line already
	if c := counts(a); c["dcqcn_fast_recovery"] != 1 || c["dcqcn_additive_increase"] != 1 {
		t.Errorf("counters %v", c)
	}
}

// TestDCQCNNotificationPoint: a QP's NP asks for at most one CNP per 50 µs
// however many CE-marked packets come, each QP on its own.
func TestDCQCNNotificationPoint(t *testing.T) {
	a := newDCQCN(t)
	r1, r2 := a.NewReceiver(), a.NewReceiver()
	var cnps1, cnps2 []Time
	for now := Time(0); now < time.Millisecond; now += 100 * time.Nanosecond {
		if r1.OnCE(now) {
			cnps1 = append(cnps1, now)
		}
		if now >= 30*time.Microsecond && now%(time.Microsecond) == 0 && r2.OnCE(now) {
			cnps2 = append(cnps2, now)
		}
	}
	if len(cnps1) != 20 {
		t.Errorf("QP 1: %d CNPs in 1 ms of marks every 100 ns, want 20", len(cnps1))
	}
	for i, at := range cnps1 {
		if at != Time(i)*50*time.Microsecond {
			t.Errorf("QP 1: CNP %d at %v", i, at)
		}
	}
	if len(cnps2) != 20 || cnps2[0] != 30*time.Microsecond || cnps2[19] != 980*time.Microsecond {
		t.Errorf("QP 2: CNPs at %v", cnps2)
	}
	if c := counts(a); c["dcqcn_cnps_coalesced"] != 10000-20+970-20 {
		t.Errorf("coalesced %d", c["dcqcn_cnps_coalesced"])
	}
	r1.Reset(time.Millisecond)
	if !r1.OnCE(time.Millisecond + time.Microsecond) {
		t.Error("no CNP after a reset")
	}
}

// TestDCQCNAllocs: every call on the data path allocates nothing.
func TestDCQCNAllocs(t *testing.T) {
	a := newDCQCN(t)
	s, r := a.NewSender(), a.NewReceiver()
	var p Pacer
	now := Time(0)
	if n := testing.AllocsPerRun(10_000, func() {
		now += 250 * time.Nanosecond
		if p.Open(now) {
			p.NextSend(now, 1078, s.Rate())
			s.OnSent(now, 1078)
		}
		if now%(20*time.Microsecond) == 0 && r.OnCE(now) {
			s.OnCNP(now)
		}
		if at, ok := s.Deadline(); ok && at <= now {
			s.OnTimer(now)
		}
		s.OnRTT(now, 12*time.Microsecond)
	}); n != 0 {
		t.Errorf("%v allocations per step", n)
	}
}
