package fabric_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
)

// injectWriteSize is one RDMA WRITE of 16 packets at the default MTU of
// 1024.
const injectWriteSize = 16 << 10

// injectRun is what injectWrite saw.
type injectRun struct {
	set      *inject.Set // nil without rules
	net      *sim.Net
	sw       *fabric.Switch
	isn      uint32 // the WRITE's first PSN
	took     time.Duration
	toB      []tapped // data frames the switch started towards host 1
	toA      []tapped // ACKs the switch started towards host 0
	drops    int      // TapDrop events
	sender   dataplane.Counters
	receiver dataplane.Counters
}

type tapped struct {
	at  time.Duration
	psn uint32
}

// injectWrite runs one RDMA WRITE of injectWriteSize bytes from host 0 to
// host 1 of a two-host star (8 Gb/s, a byte a nanosecond, so that no
// frame waits a rounding for its port; 2 µs links), the switch with the
// rules of file if it is not empty, checks that it completed with the
// bytes intact, and returns what happened.
func injectWrite(t *testing.T, file string) injectRun {
	t.Helper()
	s, err := sim.NewNet(sim.NetConfig{Network: func(c fabric.Clock) (*fabric.Network, error) {
		return fabric.Star(c, 2, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 8e9, Delay: 2 * time.Microsecond},
			Switch: fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()}, Seed: 1})
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := injectRun{net: s, sw: s.Network.Switches()[0]}
	if file != "" {
		r.set, err = inject.Parse([]byte(file))
		if err != nil {
			t.Fatal(err)
		}
		r.set.TraceCap = 1 << 12
		r.sw.Inject(r.set)
	}
	s.Network.Tap(func(e fabric.TapEvent) {
		if e.Kind == fabric.TapDrop {
			r.drops++
		}
		if sw, _ := e.From.Switch(); sw == nil || e.Kind != fabric.TapStart {
			return
		}
		switch p := inject.Classify(e.Frame); {
		case p.Kind == inject.KindData && e.To.Host() == s.Network.Hosts()[1]:
			r.toB = append(r.toB, tapped{e.At, p.PSN})
		case p.Kind == inject.KindAck && e.To.Host() == s.Network.Hosts()[0]:
			r.toA = append(r.toA, tapped{e.At, p.PSN})
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := s.Engines[0], s.Engines[1]
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite
	pdA, pdB := a.AllocPD(), b.AllocPD()
	src, err := a.RegMR(pdA, make([]byte, injectWriteSize), 0, all)
	must(err)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i*7 + i>>8)
	}
	dst, err := b.RegMR(pdB, make([]byte, injectWriteSize), 0, all)
	must(err)
	cqA, err := a.CreateCQ(4, nil)
	must(err)
	cqB, err := b.CreateCQ(4, nil)
	must(err)
	qa, err := a.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 4})
	must(err)
	qb, err := b.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 4, MaxRecvWR: 4})
	must(err)
	must(dataplane.Connect(a, qa, b, qb, dataplane.ConnParams{}))
	wr := qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1, RemoteAddr: dst.Addr, RKey: dst.RKey}
	wr.SGL[0] = qp.SGE{Addr: src.Addr, Length: injectWriteSize, LKey: src.LKey}
	_, err = a.PostSend(qa, []qp.SendWR{wr})
	must(err)
	wcs := make([]qp.WC, 1)
	done := func() bool {
		n, err := a.PollCQ(cqA, wcs)
		must(err)
		if n == 1 && wcs[0].Status != qp.WCSuccess {
			t.Fatalf("WRITE completed with %+v", wcs[0])
		}
		return n == 1
	}
	if !s.RunUntilReact(done, 5*time.Second) {
		t.Fatalf("the WRITE did not complete by %v", s.Now())
	}
	if !bytes.Equal(src.Bytes(), dst.Bytes()) {
		t.Fatal("the WRITE's bytes arrived wrong")
	}
	r.took = s.Now()
	if len(r.toB) == 0 {
		t.Fatal("no data frame seen")
	}
	r.isn = r.toB[0].psn
	r.sender, r.receiver = a.Counters(), b.Counters()
	return r
}

// psnAt is the PSN off packets after isn.
func psnAt(isn, off uint32) uint32 { return (isn + off) & (1<<24 - 1) }

// checkEvents checks that the rules acted exactly on the packets of the
// PSNs given (one event each, in order, of action a), and that every
// other record of the trace says ActNone.
func checkEvents(t *testing.T, r injectRun, a inject.Action, psns ...uint32) {
	t.Helper()
	ev := r.set.Events()
	if len(ev) != len(psns) {
		t.Fatalf("%d events, want %d: %+v", len(ev), len(psns), ev)
	}
	acted := map[uint64]bool{}
	for i, e := range ev {
		if e.Action != a || e.Pkt.PSN != psns[i] || e.Pkt.Kind != inject.KindData || e.Rule != 0 {
			t.Errorf("event %d: %+v, want %v of PSN %#x", i, e, a, psns[i])
		}
		acted[e.Seq] = true
	}
	tr := r.set.Trace()
	for _, rec := range tr {
		if want := inject.ActNone; !acted[rec.Seq] && rec.Action != want {
			t.Errorf("record %+v: acted on, with no event", rec)
		}
		if acted[rec.Seq] && (rec.Action != a || rec.Rule != 0) {
			t.Errorf("record %+v: its event says %v", rec, a)
		}
	}
	if r.set.TraceDropped() != 0 || len(tr) == 0 || tr[len(tr)-1].Seq != uint64(len(tr)-1) {
		t.Errorf("trace of %d records, %d dropped", len(tr), r.set.TraceDropped())
	}
}

// TestInjectDropOnce: the rule drops PSN ISN+5 the first time it passes;
// exactly that packet is lost (the event log, the trace, the Tap and the
// switch's counters agree), go-back-N resends it and the WRITE completes
// byte-exact.
func TestInjectDropOnce(t *testing.T) {
	r := injectWrite(t, `{"rules": [{"name": "drop5", "match": {"kind": "data", "src": "198.18.0.1"},
		"packet": {"psn_offset": 5, "iteration": 1}, "action": "drop"}]}`)
	checkEvents(t, r, inject.ActDrop, psnAt(r.isn, 5))
	if got := r.sw.Injected(); got != (fabric.InjectCounts{Dropped: 1}) || r.sw.NoRoute() != 0 || r.drops != 1 {
		t.Fatalf("injected %+v, no route %d, tapped drops %d", got, r.sw.NoRoute(), r.drops)
	}
	if r.net.Network.Totals().Dropped != 0 {
		t.Fatal("the queues dropped frames too")
	}
	if r.sender.Retransmits == 0 {
		t.Fatal("nothing retransmitted")
	}
	// The dropped PSN reached host 1 once: its retransmission.
	n := 0
	for _, p := range r.toB {
		if p.psn == psnAt(r.isn, 5) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("PSN ISN+5 sent to host 1 %d times, want 1 (the retransmission)", n)
	}
	if again := injectWrite(t, `{"rules": [{"name": "drop5", "match": {"kind": "data", "src": "198.18.0.1"},
		"packet": {"psn_offset": 5, "iteration": 1}, "action": "drop"}]}`); again.took != r.took {
		t.Fatalf("the same run took %v, then %v", r.took, again.took)
	}
}

// TestInjectDropRetransmission: iterations 1 and 2 of ISN+5 are both
// dropped: two events of the same PSN, the second a retransmission.
func TestInjectDropRetransmission(t *testing.T) {
	r := injectWrite(t, `{"rules": [{"name": "drop5twice", "match": {"kind": "data"},
		"packet": {"psn_offset": 5}, "action": "drop", "count": 2}]}`)
	checkEvents(t, r, inject.ActDrop, psnAt(r.isn, 5), psnAt(r.isn, 5))
	ev := r.set.Events()
	if ev[1].Seq <= ev[0].Seq || ev[1].At <= ev[0].At {
		t.Fatalf("events out of order: %+v", ev)
	}
	if got := r.sw.Injected(); got.Dropped != 2 || r.drops != 2 {
		t.Fatalf("injected %+v, tapped drops %d", got, r.drops)
	}
	// The same with one rule per iteration: rule 1 (iteration 2) hits
	// the retransmission rule 0 caused, and only it.
	r2 := injectWrite(t, `{"rules": [
		{"name": "orig", "match": {"kind": "data"}, "packet": {"psn_offset": 5, "iteration": 1}, "action": "drop"},
		{"name": "retx", "match": {"kind": "data"}, "packet": {"psn_offset": 5, "iteration": 2}, "action": "drop"}]}`)
	ev2 := r2.set.Events()
	if len(ev2) != 2 || ev2[0].Rule != 0 || ev2[1].Rule != 1 || ev2[1].Name != "retx" ||
		ev2[0].Pkt.PSN != psnAt(r2.isn, 5) || ev2[1].Pkt.PSN != ev2[0].Pkt.PSN ||
		ev2[0].Seq != ev[0].Seq || ev2[1].Seq != ev[1].Seq {
		t.Fatalf("one rule per iteration: events %+v, want those of one rule of count 2: %+v", ev2, ev)
	}
}

// TestInjectActions: ecn, corrupt and duplicate each hit exactly their
// packet, and the receiver's counter for it moves by exactly one; a
// delayed packet reaches the receiver exactly Delay later than without
// the rule.
func TestInjectActions(t *testing.T) {
	base := injectWrite(t, "")
	if c := base.receiver; c.NPECNMarkedRoCEPackets != 0 || c.RcvdICRCErr != 0 || c.DuplicateRequest != 0 {
		t.Fatalf("without rules the receiver counted %d CE, %d ICRC errors, %d duplicates", c.NPECNMarkedRoCEPackets, c.RcvdICRCErr, c.DuplicateRequest)
	}
	rule := func(action string) string {
		return `{"rules": [{"name": "it", "match": {"kind": "data"}, "packet": {"psn_offset": 3}, "action": ` + action + `}]}`
	}

	r := injectWrite(t, rule(`"ecn"`))
	checkEvents(t, r, inject.ActMark, psnAt(r.isn, 3))
	if c := r.receiver.NPECNMarkedRoCEPackets; c != 1 || r.sw.Injected() != (fabric.InjectCounts{Marked: 1}) {
		t.Errorf("ecn: the receiver counted %d CE packets, want 1; injected %+v", c, r.sw.Injected())
	}

	r = injectWrite(t, rule(`"corrupt"`))
	checkEvents(t, r, inject.ActCorrupt, psnAt(r.isn, 3))
	if c := r.receiver.RcvdICRCErr; c != 1 || r.sw.Injected() != (fabric.InjectCounts{Corrupted: 1}) {
		t.Errorf("corrupt: the receiver counted %d ICRC errors, want 1; injected %+v", c, r.sw.Injected())
	}

	r = injectWrite(t, rule(`"duplicate"`))
	checkEvents(t, r, inject.ActDuplicate, psnAt(r.isn, 3))
	if c := r.receiver.DuplicateRequest; c != 1 || r.sw.Injected() != (fabric.InjectCounts{Duplicated: 1}) {
		t.Errorf("duplicate: the receiver counted %d duplicates, want 1; injected %+v", c, r.sw.Injected())
	}
	if r.sender.Retransmits != 0 || len(r.toB) != len(base.toB)+1 {
		t.Errorf("duplicate: %d retransmitted, %d data frames to host 1 (%d without)", r.sender.Retransmits, len(r.toB), len(base.toB))
	}

	// Delay the last data packet. It arrives at the switch when it did
	// without the rule (the trace's time; a set that hits nothing
	// changes nothing, TestInjectNoHitChangesNothing), and leaves for
	// host 1 exactly Delay later: the port is idle by then. Without the
	// rule it waited 16 ns for the port (every packet after the first
	// does: the first is 16 bytes longer, its RETH, and the switch
	// stores and forwards), so it reaches host 1 Delay-16ns later.
	const delay = 100 * time.Microsecond
	last := uint32(injectWriteSize/1024 - 1)
	none := injectWrite(t, `{"rules": [{"match": {"kind": "cnp"}, "packet": {"nth": 1}, "action": "drop"}]}`)
	r = injectWrite(t, `{"rules": [{"name": "late", "match": {"kind": "data"}, "packet": {"psn_offset": 15}, "action": "delay", "delay": "100us"}]}`)
	checkEvents(t, r, inject.ActDelay, psnAt(r.isn, last))
	if len(r.toB) != len(base.toB) || r.sender.Retransmits != 0 || r.sw.Injected() != (fabric.InjectCounts{Delayed: 1}) {
		t.Fatalf("delay: %d data frames (%d without), %d retransmitted, injected %+v", len(r.toB), len(base.toB), r.sender.Retransmits, r.sw.Injected())
	}
	ingress := func(r injectRun) time.Duration {
		for _, rec := range r.set.Trace() {
			if rec.Pkt.Kind == inject.KindData && rec.Pkt.PSN == psnAt(r.isn, last) {
				return rec.At
			}
		}
		t.Fatal("the last packet is not in the trace")
		return 0
	}
	in, inBase := ingress(r), ingress(none)
	out, outBase := r.toB[len(r.toB)-1], base.toB[len(base.toB)-1]
	if in != inBase || out.psn != psnAt(r.isn, last) || out.at != in+delay || outBase.at != inBase+16*time.Nanosecond {
		t.Errorf("delay: the last packet arrived at the switch at %v (%v without the rule), left at %v (%v without)", in, inBase, out.at, outBase.at)
	}
	for i, p := range r.toB[:len(r.toB)-1] {
		if p != base.toB[i] {
			t.Errorf("delay: data frame %d: %+v, without the rule %+v", i, p, base.toB[i])
		}
	}
	// Decided once: one data record per data frame forwarded.
	data := 0
	for _, rec := range r.set.Trace() {
		if rec.Pkt.Kind == inject.KindData {
			data++
		}
	}
	if data != len(r.toB) {
		t.Errorf("delay: %d data packets traced, %d forwarded", data, len(r.toB))
	}

	// The first ACK crosses an idle port either way: it reaches host 0
	// exactly Delay later than without the rule.
	r = injectWrite(t, `{"rules": [{"name": "late-ack", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "delay", "delay": "100us"}]}`)
	if len(r.set.Events()) != 1 || len(base.toA) == 0 {
		t.Fatalf("delayed ACK: events %+v, %d ACKs without the rule", r.set.Events(), len(base.toA))
	}
	first := base.toA[0]
	found := false
	for _, p := range r.toA {
		if p.psn == first.psn && p.at == first.at+delay {
			found = true
		}
	}
	if !found {
		t.Errorf("delayed ACK: no ACK of PSN %#x left at %v: %+v", first.psn, first.at+delay, r.toA)
	}
}

// TestInjectNoHitChangesNothing: a switch with a set whose rules never
// hit forwards exactly as one without (the same frames at the same
// times), and Inject(nil) takes the set away.
func TestInjectNoHitChangesNothing(t *testing.T) {
	base := injectWrite(t, "")
	r := injectWrite(t, `{"rules": [{"match": {"kind": "cnp"}, "packet": {"nth": 1}, "action": "drop"}]}`)
	if len(r.set.Events()) != 0 || r.took != base.took || len(r.toB) != len(base.toB) {
		t.Fatalf("events %d, took %v (%v without)", len(r.set.Events()), r.took, base.took)
	}
	for i := range r.toB {
		if r.toB[i] != base.toB[i] {
			t.Fatalf("frame %d: %+v, without the set %+v", i, r.toB[i], base.toB[i])
		}
	}
	if len(r.set.Trace()) == 0 {
		t.Fatal("nothing traced")
	}
	r.sw.Inject(nil)
}

// TestInjectDoesNotAllocate: frames through a switch whose rules delay,
// then duplicate, then pass them, once the trace, the event log and the
// frame pool are allocated, allocate nothing.
func TestInjectDoesNotAllocate(t *testing.T) {
	var clock fabric.FakeClock
	n, err := fabric.Star(&clock, 2, fabric.TopologyConfig{Link: fabric.LinkParams{RateBps: 10e9, Delay: time.Microsecond},
		Switch: fabric.SwitchConfig{Buffer: netsw.DefaultBuffer()}})
	if err != nil {
		t.Fatal(err)
	}
	set, err := inject.Parse([]byte(`{"rules": [
		{"name": "hold", "match": {"kind": "data"}, "packet": {"nth": 1}, "action": "delay", "delay": "3us", "count": 2000},
		{"name": "twice", "match": {"kind": "data"}, "packet": {"nth": 2001}, "action": "duplicate", "count": 2000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	set.TraceCap = 1 << 14
	n.Switches()[0].Inject(set)
	frame := make([]byte, 1024)
	frames := make([][]byte, 64)
	seq := 0
	cycle := func() {
		sent, got := 0, 0
		for sent < 64 || got < 64 {
			h := n.Hosts()[0]
			for sent < 64 {
				buf := h.TxBuffer()
				if buf == nil {
					break
				}
				copy(buf, frameTo(t, frame, 0, 1, 7, uint32(seq), 1024))
				h.Transmit(1024)
				sent++
				seq++
			}
			got += n.Hosts()[1].Receive(frames)
			if next, ok := n.NextEvent(); ok && next > clock.Now() {
				clock.Set(next)
			}
		}
	}
	for range 50 {
		cycle()
	}
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Fatalf("%v allocations per 64-frame cycle", allocs)
	}
	if got := n.Switches()[0].Injected(); got != (fabric.InjectCounts{Delayed: 2000, Duplicated: 2000}) {
		t.Fatalf("injected %+v", got)
	}
}
