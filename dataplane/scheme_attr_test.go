package dataplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestSetQPSchemeLikeCreate: a QP whose scheme is changed in RESET or
// INIT ends up exactly as one created with that scheme: the same
// sender/receiver kind, responder queue, stash and on-chip bytes in the
// context cache; the scheme's shared pools are charged once. Leaving INIT
// freezes the scheme; unknown names are refused with the available ones.
func TestSetQPSchemeLikeCreate(t *testing.T) {
	sim, err := NewSim(SimConfig{Seed: 41})
	if err != nil {
		t.Fatal(err)
	}
	e := sim.A
	pd := e.AllocPD()
	cq, err := e.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	create := func(scheme string) *QP {
		t.Helper()
		q, err := e.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		e.QueryQP(q) // a context access: the QP is resident from now on
		return q
	}
	resident := func() (all, sr int) {
		s := e.CacheStats()
		return s.ResidentBytes, s.ResidentSRBytes
	}
	same := func(what string, got, want *QP) {
		t.Helper()
		if got.Scheme() != want.Scheme() || e.QPScheme(got) != want.Scheme() ||
			got.respQ.Cap() != want.respQ.Cap() || len(got.stash) != len(want.stash) || got.ooo != want.ooo || got.buffers != want.buffers ||
			got.sender.OnChipBytes() != want.sender.OnChipBytes() || got.receiver.OnChipBytes() != want.receiver.OnChipBytes() {
			t.Fatalf("%s: QP %s (respQ %d, stash %d, ooo %v, %d+%d B) differs from one created with it: %s (respQ %d, stash %d, ooo %v, %d+%d B)",
				what, got.Scheme(), got.respQ.Cap(), len(got.stash), got.ooo, got.sender.OnChipBytes(), got.receiver.OnChipBytes(),
				want.Scheme(), want.respQ.Cap(), len(want.stash), want.ooo, want.sender.OnChipBytes(), want.receiver.OnChipBytes())
		}
	}

	// Reference QPs, created with each scheme; the bytes each adds.
	ref := map[string]*QP{}
	size := map[string][2]int{}
	for _, name := range recovery.Names() {
		a0, s0 := resident()
		ref[name] = create(name)
		a1, s1 := resident()
		size[name] = [2]int{a1 - a0, s1 - s0}
	}
	if size[recovery.IRN] == size[recovery.GBN] || !ref[recovery.IRN].ooo {
		t.Fatalf("irn and gbn QPs cost the same on chip (%v): the test cannot tell them apart", size)
	}
	shared := e.CacheStats().SharedBytes

	q := create("") // the engine's default, gbn
	same("created with the default", q, ref[recovery.GBN])
	for _, step := range []struct {
		state  qp.State
		scheme string
	}{{qp.Reset, recovery.IRN}, {qp.Reset, recovery.IGBN}, {qp.Reset, recovery.MELO}, {qp.Init, recovery.FaSR},
		{qp.Init, recovery.IRN}, {qp.Init, ""}, {qp.Init, recovery.MELO}, {qp.Init, recovery.IRN}} {
		if step.state == qp.Init && q.State() == qp.Reset {
			if err := e.ModifyQP(q, &QPAttr{State: qp.Init, Port: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
				t.Fatal(err)
			}
		}
		a0, s0 := resident()
		before := size[q.Scheme()]
		if err := e.SetQPScheme(q, step.scheme); err != nil {
			t.Fatalf("in %v, to %q: %v", step.state, step.scheme, err)
		}
		want := step.scheme
		if want == "" {
			want = recovery.GBN
		}
		same("changed in "+step.state.String(), q, ref[want])
		a1, s1 := resident()
		if a1-a0 != size[want][0]-before[0] || s1-s0 != size[want][1]-before[1] {
			t.Fatalf("to %s: resident bytes moved by %d (SR %d), want %d (SR %d)", want, a1-a0, s1-s0,
				size[want][0]-before[0], size[want][1]-before[1])
		}
	}
	if got := e.CacheStats().SharedBytes; got != shared {
		t.Fatalf("shared pools %d B after the changes, %d before: charged again", got, shared)
	}

	err = e.SetQPScheme(q, "melo-9")
	if !errors.Is(err, ErrUnknownScheme) || !strings.Contains(err.Error(), `"melo-9"`) || !strings.Contains(err.Error(), recovery.IRN) {
		t.Fatalf("unknown scheme: %v", err)
	}
	if q.Scheme() != recovery.IRN {
		t.Fatalf("a refused change left scheme %s", q.Scheme())
	}
	if err := e.ModifyQP(q, &QPAttr{State: qp.RTR, AV: AddressVector{DGID: SimAddrB, HopLimit: 64}, PathMTU: qp.MTU1024, DestQPN: 0x10, MaxDestRdAtomic: 1},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	if err := e.SetQPScheme(q, recovery.GBN); !errors.Is(err, ErrSchemeState) || q.Scheme() != recovery.IRN {
		t.Fatalf("change in RTR: %v, scheme now %s", err, q.Scheme())
	}
	if err := e.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if err := e.SetQPScheme(q, recovery.GBN); !errors.Is(err, ErrBadQP) {
		t.Fatalf("change of a destroyed QP: %v", err)
	}
	if got := e.LookupQP(ref[recovery.IRN].QPN()); got != ref[recovery.IRN] {
		t.Fatalf("LookupQP(%#x) = %p, want %p", ref[recovery.IRN].QPN(), got, ref[recovery.IRN])
	}
	if got := e.LookupQP(q.QPN()); got != nil {
		t.Fatal("LookupQP found a destroyed QP")
	}
}

// TestSetQPSchemeRuns: a connected gbn pair, used, reset and switched to
// irn on both ends runs irn: a lost packet of a 256 KiB WRITE is resent
// selectively (exactly one packet), where the same pair under gbn resent
// the whole tail. Reset and switched again, to each other scheme, the
// pair moves the WRITE intact through the same loss.
func TestSetQPSchemeRuns(t *testing.T) {
	link := lossyLink(0)
	dropped := map[string]bool{}
	var dropping string
	// The 41st packet of each scheme's write (gbn's and irn's opcodes for
	// a middle packet differ) is lost once.
	link.Drop = func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil || dropped[dropping] {
			return false
		}
		if fl := f.Pkt.Info.Flags; f.Pkt.BTH().PSN() == 40 && fl&bth.IsWrite != 0 && fl&bth.IsMiddle != 0 {
			dropped[dropping] = true
			return true
		}
		return false
	}
	p := newTestPair(t, SimConfig{Seed: 42, AtoB: link, BtoA: lossyLink(0)}, ConnParams{MTU: qp.MTU1024})
	resent := map[string]uint64{}
	for i, scheme := range []string{recovery.GBN, recovery.IRN, recovery.MELO, recovery.FaSR, recovery.IGBN} {
		if i > 0 {
			for _, s := range []struct {
				e *Engine
				q *QP
			}{{p.sim.A, p.qa}, {p.sim.B, p.qb}} {
				if err := s.e.ModifyQP(s.q, &QPAttr{State: qp.Reset}, qp.AttrState); err != nil {
					t.Fatal(err)
				}
				if err := s.e.SetQPScheme(s.q, scheme); err != nil {
					t.Fatal(err)
				}
			}
			if err := Connect(p.sim.A, p.qa, p.sim.B, p.qb, ConnParams{MTU: qp.MTU1024}); err != nil {
				t.Fatal(err)
			}
		}
		if p.qa.Scheme() != scheme || p.qb.Scheme() != scheme {
			t.Fatalf("QPs run %s and %s, want %s", p.qa.Scheme(), p.qb.Scheme(), scheme)
		}
		dropping = scheme
		before := p.sim.A.Counters().Retransmits
		p.checkWrite(uint64(i+1), 256<<10, false)
		resent[scheme] = p.sim.A.Counters().Retransmits - before
		if !dropped[scheme] {
			t.Fatalf("%s: the packet to lose was never sent", scheme)
		}
		p.settle()
	}
	if resent[recovery.IRN] != 1 || resent[recovery.GBN] < 10 {
		t.Fatalf("packets resent for one loss: %v; want gbn's tail and exactly 1 for irn", resent)
	}
}
