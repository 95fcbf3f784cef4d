package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// quietLink is lossyLink(0) without jitter: nothing is lost or reordered
// unless a test's Drop says so.
func quietLink() fabric.LinkConfig {
	l := lossyLink(0)
	l.Jitter = 0
	return l
}

// srDrop drops the first times[psn] transmissions of each request packet
// with that PSN (to QP qpn, or to any QP when qpn is 0).
func srDrop(qpn uint32, times map[qp.PSN]int) func([]byte) bool {
	left := map[qp.PSN]int{}
	for p, n := range times {
		left[p] = n
	}
	return func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil || f.Pkt.Info.Flags&bth.IsRequest == 0 {
			return false
		}
		if qpn != 0 && f.Pkt.BTH().DestQPN() != qpn {
			return false
		}
		psn := qp.PSN(f.Pkt.BTH().PSN())
		if left[psn] > 0 {
			left[psn]--
			return true
		}
		return false
	}
}

// srDropPerQP is srDrop for many QPs at once, by destination QPN.
func srDropPerQP(times map[uint32]map[qp.PSN]int) func([]byte) bool {
	drops := map[uint32]func([]byte) bool{}
	for qpn, t := range times {
		drops[qpn] = srDrop(qpn, t)
	}
	return func(frame []byte) bool {
		f, err := bth.ParseFrame(frame)
		if err != nil {
			return false
		}
		if d := drops[f.Pkt.BTH().DestQPN()]; d != nil {
			return d(frame)
		}
		return false
	}
}

// poolsIdle fails unless every shared pool of e's schemes is back to
// nothing in use.
func poolsIdle(tb testing.TB, name string, e *Engine) {
	tb.Helper()
	c := e.Counters()
	if len(c.Pools) == 0 {
		tb.Fatalf("%s: no pools reported", name)
	}
	for _, p := range c.Pools {
		if p.Allocs != p.Frees+uint64(p.InUse) || p.Peak > p.Slots {
			tb.Fatalf("%s: pool %s inconsistent: %+v", name, p.Name, p)
		}
		if p.InUse != 0 {
			tb.Fatalf("%s: pool %s not returned: %+v", name, p.Name, p)
		}
	}
}

// poolPeak is the most blocks or units pool name ever had in use on e.
func poolPeak(e *Engine, name string) int {
	for _, p := range e.Counters().Pools {
		if p.Name == name {
			return p.Peak
		}
	}
	return -1
}

// TestFaSRSingleLossFastPath: one data packet lost once. The receiver's
// recovery stays on the fast path (lost-cnt 1, no bitmap), the sender's
// too; that one packet is resent, no FNACK, no timeout, data intact.
func TestFaSRSingleLossFastPath(t *testing.T) {
	const start = 0x100
	link := quietLink()
	link.Drop = srDrop(0, map[qp.PSN]int{start + 10: 1})
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 41, AtoB: link, BtoA: quietLink()},
		ConnParams{MTU: qp.MTU1024, PSNA: start})
	p.checkWrite(1, 64<<10, false)
	p.settle()
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	t.Logf("B rx fast %d slow %d, sack naks %d; A tx fast %d slow %d, resent %d", b.SchemeCounter("sr_rx_fast_path"), b.SchemeCounter("sr_rx_slow_path"), b.SackNakSent, a.SchemeCounter("sr_tx_fast_path"), a.SchemeCounter("sr_tx_slow_path"), a.Retransmits)
	switch {
	case b.SchemeCounter("sr_rx_fast_path") == 0 || b.SchemeCounter("sr_rx_slow_path") != 0:
		t.Fatalf("receiver paths: fast %d, slow %d", b.SchemeCounter("sr_rx_fast_path"), b.SchemeCounter("sr_rx_slow_path"))
	case a.SchemeCounter("sr_tx_fast_path") == 0 || a.SchemeCounter("sr_tx_slow_path") != 0:
		t.Fatalf("sender paths: fast %d, slow %d", a.SchemeCounter("sr_tx_fast_path"), a.SchemeCounter("sr_tx_slow_path"))
	case b.FNACKSent != 0 || a.RcvdFNACK != 0 || a.SchemeCounter("sr_fnacks_taken") != 0:
		t.Fatalf("FNACKs: sent %d, received %d, taken %d", b.FNACKSent, a.RcvdFNACK, a.SchemeCounter("sr_fnacks_taken"))
	case a.Retransmits != 1 || a.LocalAckTimeout != 0 || b.SackNakSent == 0 || a.RcvdSackNak == 0:
		t.Fatalf("resent %d packets, %d timeouts, %d SACKs sent, %d received: want 1, 0", a.Retransmits, a.LocalAckTimeout, b.SackNakSent, a.RcvdSackNak)
	case b.SchemeCounter("sr_pool_fallbacks") != 0 || b.SchemeCounter("sr_pool_drops") != 0:
		t.Fatalf("fallbacks %d, pool drops %d", b.SchemeCounter("sr_pool_fallbacks"), b.SchemeCounter("sr_pool_drops"))
	}
	if n := poolPeak(p.sim.B, "fasr_bitmap_blocks"); n != 0 {
		t.Fatalf("the receiver took %d bitmap blocks for a single loss", n)
	}
	if n := poolPeak(p.sim.B, "fasr_sr_units"); n != 1 {
		t.Fatalf("the receiver had %d SR units at most, want 1", n)
	}
	poolsIdle(t, "A", p.sim.A)
	poolsIdle(t, "B", p.sim.B)
}

// TestFaSRTwoLossesSlowPath: two packets of one window lost: the receiver
// needs its bitmap (slow path); both are resent, once each, data intact.
func TestFaSRTwoLossesSlowPath(t *testing.T) {
	const start = 0xFFFFF0 // across the PSN wrap
	link := quietLink()
	link.Drop = srDrop(0, map[qp.PSN]int{start + 10: 1, (start + 30) & qp.PSNMask: 1})
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 42, AtoB: link, BtoA: quietLink()},
		ConnParams{MTU: qp.MTU1024, PSNA: start})
	p.checkWrite(1, 64<<10, false)
	p.checkSend(2, 20<<10, true)
	p.settle()
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	t.Logf("B rx fast %d slow %d; A tx fast %d slow %d, resent %d", b.SchemeCounter("sr_rx_fast_path"), b.SchemeCounter("sr_rx_slow_path"), a.SchemeCounter("sr_tx_fast_path"), a.SchemeCounter("sr_tx_slow_path"), a.Retransmits)
	if b.SchemeCounter("sr_rx_slow_path") == 0 || poolPeak(p.sim.B, "fasr_bitmap_blocks") == 0 {
		t.Fatalf("two losses and no slow path: slow %d, peak blocks %d", b.SchemeCounter("sr_rx_slow_path"), poolPeak(p.sim.B, "fasr_bitmap_blocks"))
	}
	if a.Retransmits != 2 || a.LocalAckTimeout != 0 || b.FNACKSent != 0 {
		t.Fatalf("resent %d packets, %d timeouts, %d FNACKs: want 2, 0, 0", a.Retransmits, a.LocalAckTimeout, b.FNACKSent)
	}
	poolsIdle(t, "A", p.sim.A)
	poolsIdle(t, "B", p.sim.B)
}

// TestFaSRFNACK: a packet is lost, and so is its first retransmission,
// while a second hole exists: the retransmission of the second hole
// arrives with RCV-NXT still missing, and is answered by an FNACK, on
// which the sender starts over from UNACK (§III-D), without a timeout.
func TestFaSRFNACK(t *testing.T) {
	const start = 0x200
	link := quietLink()
	link.Drop = srDrop(0, map[qp.PSN]int{start + 10: 2, start + 30: 1})
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 43, AtoB: link, BtoA: quietLink()},
		ConnParams{MTU: qp.MTU1024, PSNA: start})
	p.checkWrite(1, 64<<10, true)
	p.settle()
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	t.Logf("FNACKs sent %d received %d taken %d; resent %d, timeouts %d", b.FNACKSent, a.RcvdFNACK, a.SchemeCounter("sr_fnacks_taken"), a.Retransmits, a.LocalAckTimeout)
	if b.FNACKSent == 0 || a.RcvdFNACK == 0 || a.SchemeCounter("sr_fnacks_taken") == 0 {
		t.Fatalf("FNACKs sent %d, received %d, taken %d", b.FNACKSent, a.RcvdFNACK, a.SchemeCounter("sr_fnacks_taken"))
	}
	if a.SchemeCounter("sr_fnacks_taken") > a.RcvdFNACK || a.LocalAckTimeout != 0 {
		t.Fatalf("%d FNACKs taken of %d, %d timeouts", a.SchemeCounter("sr_fnacks_taken"), a.RcvdFNACK, a.LocalAckTimeout)
	}
	poolsIdle(t, "A", p.sim.A)
	poolsIdle(t, "B", p.sim.B)
}

// srMulti is n connected QP pairs on one Sim, each with its own slice of
// one memory region per side.
type srMulti struct {
	tb       testing.TB
	sim      *Sim
	mrA, mrB *MR
	cqA, cqB *CQ
	qas, qbs []*QP
}

const srSlice = 1 << 20 // each QP's share of the regions

func newSRMulti(tb testing.TB, scheme string, params recovery.Params, cfg SimConfig, n int, psn func(i int) qp.PSN) *srMulti {
	tb.Helper()
	cfg.SchemeA, cfg.SchemeB, cfg.SchemeParams = scheme, scheme, params
	sim, err := NewSim(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	m := &srMulti{tb: tb, sim: sim}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	pdA, pdB := sim.A.AllocPD(), sim.B.AllocPD()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	m.mrA, err = sim.A.RegMR(pdA, make([]byte, n*srSlice), 0, all)
	must(err)
	m.mrB, err = sim.B.RegMR(pdB, make([]byte, n*srSlice), 0, all)
	must(err)
	m.cqA, err = sim.A.CreateCQ(4096, nil)
	must(err)
	m.cqB, err = sim.B.CreateCQ(4096, nil)
	must(err)
	for i := range n {
		qa, err := sim.A.CreateQP(pdA, QPInitAttr{SendCQ: m.cqA, RecvCQ: m.cqA, MaxSendWR: 64, MaxRecvWR: 64})
		must(err)
		qb, err := sim.B.CreateQP(pdB, QPInitAttr{SendCQ: m.cqB, RecvCQ: m.cqB, MaxSendWR: 64, MaxRecvWR: 64})
		must(err)
		must(Connect(sim.A, qa, sim.B, qb, ConnParams{MTU: qp.MTU1024, PSNA: psn(i), Timeout: 8}))
		m.qas, m.qbs = append(m.qas, qa), append(m.qbs, qb)
	}
	fillRandom(m.mrA.Bytes(), 51)
	fillRandom(m.mrB.Bytes(), 52)
	return m
}

// run posts, on every QP at once, writes of writeSize bytes in 16 KiB
// WRITEs, a SEND of 3000 bytes and a READ of readSize bytes, and runs
// until all complete. Per QP i its slice of A is written to the same place
// in B, the SEND lands in B's slice at 512 KiB and the READ brings B's
// slice at 768 KiB into A's. It checks that every completion succeeds,
// that each QP's come in posting order, and the data.
func (m *srMulti) run(writeSize, readSize int) {
	tb := m.tb
	tb.Helper()
	const chunk = 16 << 10
	const sendOff, sendLen, readOff = 512 << 10, 3000, 768 << 10
	posted := map[uint32][]uint64{} // per requester QPN, the signaled WR ids in order
	for i, qa := range m.qas {
		base := i * srSlice
		var wrs []qp.SendWR
		id := uint64(i) << 16
		for off := 0; off < writeSize; off += chunk {
			w := sendWR(id, qp.WRRDMAWrite, sge(m.mrA, base+off, min(chunk, writeSize-off)))
			w.RemoteAddr, w.RKey = m.mrB.Addr+uint64(base+off), m.mrB.RKey
			wrs = append(wrs, w)
			id++
		}
		s := sendWR(id, qp.WRSend, sge(m.mrA, base+sendOff, sendLen))
		r := sendWR(id+1, qp.WRRDMARead, sge(m.mrA, base+readOff, readSize))
		r.RemoteAddr, r.RKey = m.mrB.Addr+uint64(base+readOff), m.mrB.RKey
		wrs = append(wrs, s, r)
		for _, w := range wrs {
			posted[qa.QPN()] = append(posted[qa.QPN()], w.WRID)
		}
		if _, err := m.sim.B.PostRecv(m.qbs[i], []qp.RecvWR{recvWR(uint64(i), sge(m.mrB, base+sendOff+4096, 4096))}); err != nil {
			tb.Fatal(err)
		}
		if _, err := m.sim.A.PostSend(qa, wrs); err != nil {
			tb.Fatal(err)
		}
	}
	wantA, wantB := 0, len(m.qbs)
	for _, ids := range posted {
		wantA += len(ids)
	}
	next := map[uint32]int{}
	gotA, gotB := 0, 0
	wcs := make([]qp.WC, 64)
	ok := m.sim.RunUntil(func() bool {
		n, _ := m.sim.A.PollCQ(m.cqA, wcs)
		for _, wc := range wcs[:n] {
			ids := posted[wc.QPNum]
			if wc.Status != qp.WCSuccess || next[wc.QPNum] >= len(ids) || wc.WRID != ids[next[wc.QPNum]] {
				tb.Fatalf("completion %+v, want wr_id %#x next on QP %d (in posting order)", wc, ids[min(next[wc.QPNum], len(ids)-1)], wc.QPNum)
			}
			next[wc.QPNum]++
		}
		k, _ := m.sim.B.PollCQ(m.cqB, wcs)
		for _, wc := range wcs[:k] {
			if wc.Status != qp.WCSuccess || wc.ByteLen != sendLen {
				tb.Fatalf("receive completion %+v", wc)
			}
		}
		gotA, gotB = gotA+n, gotB+k
		return gotA == wantA && gotB == wantB
	}, 20*time.Second)
	if !ok {
		tb.Fatalf("%d/%d and %d/%d completions after %v (A %+v, B %+v)", gotA, wantA, gotB, wantB, m.sim.Now(), m.sim.A.Counters(), m.sim.B.Counters())
	}
	for i := range m.qas {
		base := i * srSlice
		a, b := m.mrA.Bytes(), m.mrB.Bytes()
		mustEqual(tb, fmt.Sprintf("QP %d WRITEs", i), b[base:base+writeSize], a[base:base+writeSize])
		mustEqual(tb, fmt.Sprintf("QP %d SEND", i), b[base+sendOff+4096:base+sendOff+4096+sendLen], a[base+sendOff:base+sendOff+sendLen])
		mustEqual(tb, fmt.Sprintf("QP %d READ", i), a[base+readOff:base+readOff+readSize], b[base+readOff:base+readOff+readSize])
	}
	// Late duplicates and the last ACKs.
	m.sim.RunFor(50 * time.Millisecond)
}

// TestFaSRTinyPool: one SR unit and one bitmap block per NIC for six
// QPs that all lose packets at once: recoveries that find the pools empty
// fall back to go-back-N, and every transfer still completes intact and
// in order; the pools are all returned.
func TestFaSRTinyPool(t *testing.T) {
	const n = 6
	psn := func(i int) qp.PSN { return qp.PSN(0x1000 * (i + 1)) }
	link := quietLink()
	m := newSRMulti(t, recovery.FaSR, recovery.Params{Knobs: recovery.KnobValues{"fasr.units": "1", "fasr.blocks": "1"}}, SimConfig{Seed: 44, AtoB: link, BtoA: quietLink()}, n, psn)
	drops := map[uint32]map[qp.PSN]int{}
	for i, qb := range m.qbs {
		s := psn(i)
		drops[qb.QPN()] = map[qp.PSN]int{s + 5: 1, s + 9: 1, s + 40: 1, s + 41: 1, s + 60: 1}
	}
	link.Drop = srDropPerQP(drops)
	m.sim.Fabric.SetLink(fabric.AtoB, link)
	m.run(96<<10, 32<<10)
	a, b := m.sim.A.Counters(), m.sim.B.Counters()
	t.Logf("B fallbacks %d pool drops %d, fast %d slow %d; A fallbacks %d, resent %d, timeouts %d", b.SchemeCounter("sr_pool_fallbacks"), b.SchemeCounter("sr_pool_drops"), b.SchemeCounter("sr_rx_fast_path"), b.SchemeCounter("sr_rx_slow_path"), a.SchemeCounter("sr_pool_fallbacks"), a.Retransmits, a.LocalAckTimeout)
	if b.SchemeCounter("sr_pool_fallbacks") == 0 || b.SchemeCounter("sr_pool_drops") == 0 {
		t.Fatalf("no fallback with one unit for %d QPs: %d fallbacks, %d drops", n, b.SchemeCounter("sr_pool_fallbacks"), b.SchemeCounter("sr_pool_drops"))
	}
	poolsIdle(t, "A", m.sim.A)
	poolsIdle(t, "B", m.sim.B)
}

// TestCountersEachPools: the pools and the schemes' counters reach the
// names `softnic stats` and /metrics print, with their values.
func TestCountersEachPools(t *testing.T) {
	p := newSchemePair(t, recovery.FaSR, recovery.Params{}, SimConfig{Seed: 3, AtoB: lossyLink(0.05), BtoA: lossyLink(0.05)}, ConnParams{MTU: qp.MTU1024})
	p.checkWrite(1, 64<<10, false)
	c := p.sim.B.Counters()
	got := map[string]uint64{}
	c.Each(func(name string, v uint64) { got[name] = v })
	for _, n := range []string{"pool_fasr_sr_units_bytes", "pool_fasr_sr_units_slots", "pool_fasr_sr_units_in_use", "pool_fasr_sr_units_peak",
		"pool_fasr_bitmap_blocks_bytes", "pool_fasr_bitmap_blocks_exhausted", "sr_rx_fast_path", "sr_rx_slow_path", "sr_pool_fallbacks", "fnak_sent", "rob_in_use"} {
		if _, ok := got[n]; !ok {
			t.Errorf("counter %s missing", n)
		}
	}
	if got["pool_fasr_sr_units_slots"] != recovery.DefaultFasrUnits || got["pool_fasr_sr_units_bytes"] != 32*38+4 {
		t.Errorf("units pool: %d slots, %d bytes", got["pool_fasr_sr_units_slots"], got["pool_fasr_sr_units_bytes"])
	}
	if got["pool_fasr_sr_units_peak"] == 0 || got["sr_rx_fast_path"]+got["sr_rx_slow_path"] != c.SchemeCounter("sr_rx_fast_path")+c.SchemeCounter("sr_rx_slow_path") || c.SchemeCounter("sr_rx_fast_path")+c.SchemeCounter("sr_rx_slow_path") == 0 {
		t.Errorf("no recovery counted at 5%% loss: %v", got)
	}
}
