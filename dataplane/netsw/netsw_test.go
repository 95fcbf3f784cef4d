package netsw_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/netsw"
)

// roceFrame builds a valid RoCEv2 SEND ONLY frame with payload bytes of
// payload, TOS (or traffic class) tos and UDP source port sport, over
// IPv4 or IPv6, with its ICRC written.
func roceFrame(t testing.TB, v6 bool, tos uint8, sport uint16, payload int) []byte {
	t.Helper()
	h := bth.FrameHeader{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
		SrcPort: sport, TOS: tos,
	}
	if v6 {
		h.Src, h.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		h.FlowLabel = 0x12345
	}
	info := bth.Lookup(bth.RCSendOnly)
	pad := bth.PadFor(payload)
	roceLen := info.Length + payload + pad + bth.ICRCLen
	buf := make([]byte, h.Len()+roceLen)
	off := h.Encode(buf, roceLen)
	bth.BTH(buf[off:]).Encode(&bth.BTHFields{Opcode: bth.RCSendOnly, PadCount: uint8(pad), PKey: 0xffff, DestQPN: 0x11, PSN: 7})
	for i := range payload {
		buf[off+info.Length+i] = byte(i)
	}
	bth.FinishFrame(buf, &h)
	if _, err := bth.ParseFrame(buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// rawFrame is n bytes that are not IP: queued and counted, never marked.
func rawFrame(n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b[12:], 0x88b5) // local experimental EtherType
	return b
}

func mustNew(t testing.TB, cfg netsw.Config) *netsw.Switch {
	t.Helper()
	s, err := netsw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ports(n int, rate uint64) []netsw.PortConfig {
	p := make([]netsw.PortConfig, n)
	for i := range p {
		p[i].RateBps = rate
	}
	return p
}

// TestFullQueueDropsOnlyWithoutPFC: 12 frames of 1000 bytes from two
// ingress ports into one 10 000-byte queue. Without PFC the 11th and 12th
// are tail-dropped; with PFC (the same buffer) none is, and the ingress
// port that passes XOFF is told to pause its partner.
func TestFullQueueDropsOnlyWithoutPFC(t *testing.T) {
	for _, pfc := range []bool{false, true} {
		cfg := netsw.Config{Ports: ports(3, 40e9), Buffer: netsw.Buffer{PortBytes: 10_000}}
		if pfc {
			cfg.PFC = netsw.PFC{Enabled: true, XOFFBytes: 4_000, XONBytes: 2_000, HeadroomBytes: 6_000}
		}
		s := mustNew(t, cfg)
		var pauses []netsw.PFCAction
		queued := 0
		for i := range 12 {
			r := s.Enqueue(0, rawFrame(1000), netsw.Handle(i), i%2, 2)
			if r.Queued() {
				queued++
			} else if r.Drop != netsw.DropQueueFull {
				t.Fatalf("pfc %v: frame %d dropped for %v", pfc, i, r.Drop)
			}
			if r.PFC.Kind != netsw.PFCNone {
				pauses = append(pauses, r.PFC)
			}
		}
		st := s.Stats(2)
		if !pfc {
			if queued != 10 || st.Dropped != 2 || st.DroppedBy[netsw.DropQueueFull] != 2 || len(pauses) != 0 {
				t.Fatalf("PFC off: queued %d, dropped %d, pauses %v; want 10, 2, none", queued, st.Dropped, pauses)
			}
			continue
		}
		// Each ingress port holds 6 frames: it passes XOFF (4000) with
		// its 5th, at 5000 bytes.
		want := []netsw.PFCAction{{Kind: netsw.PFCPause, Port: 0, Quanta: netsw.DefaultQuanta}, {Kind: netsw.PFCPause, Port: 1, Quanta: netsw.DefaultQuanta}}
		if queued != 12 || st.Dropped != 0 || len(pauses) != 2 || pauses[0] != want[0] || pauses[1] != want[1] {
			t.Fatalf("PFC on: queued %d, dropped %d, pauses %v; want 12, 0, %v", queued, st.Dropped, pauses, want)
		}
		if s.Stats(0).PausesSent != 1 || s.Stats(1).PausesSent != 1 || !s.Paused(0) || !s.Paused(1) {
			t.Fatalf("pauses sent %d and %d", s.Stats(0).PausesSent, s.Stats(1).PausesSent)
		}
		// Draining: ingress 0 and 1 alternate; each resumes when its own
		// bytes fall to XON (2000), i.e. after 4 of its 6 frames left.
		var resumes []int
		for i := range 12 {
			e, a, ok := s.Dequeue(0, 2)
			if !ok || e.Handle != netsw.Handle(i) || e.Len != 1000 || e.Ingress != i%2 {
				t.Fatalf("dequeue %d: %+v %v", i, e, ok)
			}
			if a.Kind == netsw.PFCResume {
				resumes = append(resumes, i)
				if a.Port != i%2 {
					t.Fatalf("resume %+v at frame %d", a, i)
				}
			} else if a.Kind != netsw.PFCNone {
				t.Fatalf("dequeue %d asked for %+v", i, a)
			}
		}
		if len(resumes) != 2 || resumes[0] != 6 || resumes[1] != 7 {
			t.Fatalf("resumes after frames %v, want [6 7]", resumes)
		}
		if s.UsedBytes() != 0 || s.Paused(0) || s.Paused(1) {
			t.Fatalf("after draining: used %d", s.UsedBytes())
		}
	}
}

// TestPFCHeadroomOverrun: with PFC on, a frame that would take its
// ingress port past XOFF plus headroom is dropped, and counted as such.
func TestPFCHeadroomOverrun(t *testing.T) {
	s := mustNew(t, netsw.Config{Ports: ports(2, 40e9), Buffer: netsw.Buffer{PortBytes: 100_000},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 3_000, XONBytes: 1_000, HeadroomBytes: 2_000}})
	for i := range 5 {
		if r := s.Enqueue(0, rawFrame(1000), 0, 0, 1); !r.Queued() {
			t.Fatalf("frame %d dropped: %v", i, r.Drop)
		}
	}
	if r := s.Enqueue(0, rawFrame(1000), 0, 0, 1); r.Drop != netsw.DropHeadroom {
		t.Fatalf("6th frame: %v, want headroom", r.Drop)
	}
	if got := s.Stats(1).DroppedBy[netsw.DropHeadroom]; got != 1 {
		t.Fatalf("headroom drops %d", got)
	}
}

// TestIngressCharging: Buffer.Ingress charges frames to their ingress
// port: two ingress ports fill one egress queue with twice PortBytes.
func TestIngressCharging(t *testing.T) {
	s := mustNew(t, netsw.Config{Ports: ports(3, 0), Buffer: netsw.Buffer{PortBytes: 5_000, Ingress: true}})
	queued := [2]int{}
	for i := range 14 {
		if s.Enqueue(0, rawFrame(1000), 0, i%2, 2).Queued() {
			queued[i%2]++
		}
	}
	if queued != [2]int{5, 5} || s.QueueBytes(2) != 10_000 {
		t.Fatalf("queued %v, queue %d bytes; want [5 5], 10000", queued, s.QueueBytes(2))
	}
}

// TestPauseRefreshAndReceive: a port in XOFF asks for its pause again
// when half the pause time has gone; a pause received on a port stops
// its queue for quanta × 512 bit times, and a resume restarts it.
func TestPauseRefreshAndReceive(t *testing.T) {
	const rate = 40e9
	s := mustNew(t, netsw.Config{Ports: ports(2, rate), Buffer: netsw.Buffer{PortBytes: 100_000},
		PFC: netsw.PFC{Enabled: true, XOFFBytes: 1_500, XONBytes: 0, HeadroomBytes: 10_000}})
	// 65535 × 512 bits at 40 Gb/s.
	if got, want := netsw.QuantaTime(0xffff, rate), 838_848*time.Nanosecond; got != want {
		t.Fatalf("QuantaTime %v, want %v", got, want)
	}
	at := 10 * time.Microsecond
	s.Enqueue(at, rawFrame(1000), 1, 0, 1)
	if r := s.Enqueue(at, rawFrame(1000), 2, 0, 1); r.PFC.Kind != netsw.PFCPause {
		t.Fatalf("no pause: %+v", r)
	}
	due, ok := s.NextRefresh()
	if want := at + 838_848*time.Nanosecond/2; !ok || due != want {
		t.Fatalf("refresh at %v %v, want %v", due, ok, want)
	}
	if _, ok := s.Refresh(due - 1); ok {
		t.Fatal("refreshed early")
	}
	if a, ok := s.Refresh(due); !ok || a.Kind != netsw.PFCPause || a.Port != 0 {
		t.Fatalf("refresh: %+v %v", a, ok)
	}
	if next, _ := s.NextRefresh(); next != due+838_848*time.Nanosecond/2 {
		t.Fatalf("next refresh %v", next)
	}
	if s.Stats(0).PausesSent != 2 {
		t.Fatalf("pauses sent %d, want 2", s.Stats(0).PausesSent)
	}

	// A pause received on port 1 for 100 quanta (1280 ns at 40 Gb/s).
	s.PauseReceived(at, 1, 100)
	if _, _, ok := s.Dequeue(at+1279, 1); ok {
		t.Fatal("dequeued while paused")
	}
	if s.PausedUntil(1) != at+1280 {
		t.Fatalf("paused until %v", s.PausedUntil(1))
	}
	if _, _, ok := s.Dequeue(at+1280, 1); !ok {
		t.Fatal("no dequeue once the pause expired")
	}
	s.PauseReceived(at+2000, 1, 0xffff)
	if _, _, ok := s.Dequeue(at+3000, 1); ok {
		t.Fatal("dequeued while paused")
	}
	s.PauseReceived(at+4000, 1, 0)
	if _, a, ok := s.Dequeue(at+4000, 1); !ok || a.Kind != netsw.PFCResume {
		t.Fatalf("after resume: %v %+v", ok, a)
	}
	if st := s.Stats(1); st.PausesReceived != 2 || st.ResumesReceived != 1 {
		t.Fatalf("received %d pauses %d resumes", st.PausesReceived, st.ResumesReceived)
	}
	if _, ok := s.NextRefresh(); ok {
		t.Fatal("refresh pending after the resume")
	}
}

// TestREDProbability draws 100 000 frames at each queue length of
// interest with a fixed seed: none at Kmin, Pmax at Kmax, half of it
// halfway, all above Kmax. The counts are exact for the seed, and each
// lies within 4.5 standard deviations of its expectation (a check that
// the pinned numbers are the curve's and not an accident).
func TestREDProbability(t *testing.T) {
	ecn := netsw.DefaultECN()
	m := netsw.NewMarker(ecn, rand.NewPCG(1, 2))
	const n = 100_000
	for _, c := range []struct {
		q    int
		p    float64
		want int
	}{
		{0, 0, 0},
		{ecn.KminBytes, 0, 0},
		{(ecn.KminBytes + ecn.KmaxBytes) / 2, ecn.Pmax / 2, 450},
		{ecn.KmaxBytes, ecn.Pmax, 985},
		{ecn.KmaxBytes + 1, 1, n},
	} {
		marked := 0
		for range n {
			if m.Decide(c.q) {
				marked++
			}
		}
		mean, sd := n*c.p, math.Sqrt(n*c.p*(1-c.p))
		if math.Abs(float64(marked)-mean) > 4.5*sd+1e-9 {
			t.Errorf("q %d: %d marked, expected %.0f ± %.0f", c.q, marked, mean, sd)
		}
		if marked != c.want {
			t.Errorf("q %d: %d marked, pinned %d for seed (1, 2)", c.q, marked, c.want)
		}
	}
	if p := m.Probability(ecn.KmaxBytes); p != uint64(math.Round(0.01*(1<<32))) {
		t.Errorf("P(Kmax) = %d/2^32", p)
	}
}

// TestEnqueueMarks: a switch marks ECN-capable frames above Kmax, never
// at or below Kmin, and counts the frames it could not mark.
func TestEnqueueMarks(t *testing.T) {
	ecn := netsw.ECN{Enabled: true, KminBytes: 2_000, KmaxBytes: 4_000, Pmax: 0.5}
	s := mustNew(t, netsw.Config{Ports: ports(2, 0), Buffer: netsw.Buffer{PortBytes: 1 << 20}, ECN: ecn, Seed: 3})
	ect := roceFrame(t, false, netsw.ECNECT0, 1000, 1000-58)
	var marks []bool
	for range 8 {
		f := append([]byte(nil), ect...)
		r := s.Enqueue(0, f, 0, 0, 1)
		marks = append(marks, r.Marked)
		if got, _ := netsw.ECNField(f); r.Marked != (got == netsw.ECNCE) {
			t.Fatalf("Marked %v but ECN %02b", r.Marked, got)
		}
	}
	// Frames 0-2 find 0, 1000, 2000 bytes (<= Kmin); 3 finds 3000 (p = 1/4);
	// 4 finds 4000 (p = 1/2); 5-7 find more than Kmax.
	for i, m := range marks {
		if (i <= 2 && m) || (i >= 5 && !m) {
			t.Fatalf("marks %v", marks)
		}
	}
	s.Enqueue(0, roceFrame(t, false, netsw.ECNNotECT, 1000, 100), 0, 0, 1)
	if st := s.Stats(1); st.NotECT != 1 || st.ECNMarked < 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestMarkedFrameValid: marking sets CE only on ECT frames, leaves a
// correct IPv4 header checksum, and the ICRC still verifies: RoCEv2's
// ICRC masks the IP ECN bits (bth.ICRC).
func TestMarkedFrameValid(t *testing.T) {
	for _, c := range []struct {
		name string
		v6   bool
		tos  uint8
		mark bool
	}{
		{"v4 ECT(0)", false, 0xb8 | netsw.ECNECT0, true},
		{"v4 ECT(1)", false, netsw.ECNECT1, true},
		{"v4 CE", false, netsw.ECNCE, false},
		{"v4 not-ECT", false, 0x20, false},
		{"v6 ECT(0)", true, 0x68 | netsw.ECNECT0, true},
		{"v6 ECT(1)", true, netsw.ECNECT1, true},
		{"v6 not-ECT", true, 0, false},
	} {
		f := roceFrame(t, c.v6, c.tos, 49152, 256)
		before := append([]byte(nil), f...)
		if got := netsw.MarkCE(f); got != c.mark {
			t.Errorf("%s: MarkCE %v, want %v", c.name, got, c.mark)
			continue
		}
		pf, err := bth.ParseFrame(f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !pf.VerifyICRC() {
			t.Errorf("%s: ICRC fails after marking", c.name)
		}
		if got := pf.Header().TOS; c.mark && got != c.tos|netsw.ECNCE || !c.mark && got != c.tos {
			t.Errorf("%s: TOS %#x", c.name, got)
		}
		if !c.v6 && !ipv4ChecksumOK(f[14:34]) {
			t.Errorf("%s: IPv4 checksum wrong", c.name)
		}
		// Only the TOS byte (and the IPv4 checksum) changed.
		for i := range f {
			if f[i] != before[i] && !(c.v6 && i == 15) && !(!c.v6 && (i == 15 || i == 24 || i == 25)) {
				t.Errorf("%s: byte %d changed", c.name, i)
			}
		}
	}
}

func ipv4ChecksumOK(h []byte) bool {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return sum == 0xffff
}

// TestMarkChecksumIncremental: the incremental update equals a full
// recomputation over 100 000 random IPv4 headers, including those whose
// checksum is 0x0000 or 0xffff before or after.
func TestMarkChecksumIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	f := make([]byte, 14+20)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	for i := range 100_000 {
		h := f[14:]
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = 0x45
		h[1] = h[1]&^3 | byte(1+i%2) // ECT(1) or ECT(0)
		binary.BigEndian.PutUint16(h[10:], 0)
		var sum uint32
		for j := 0; j < 20; j += 2 {
			sum += uint32(binary.BigEndian.Uint16(h[j:]))
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
		if !netsw.MarkCE(f) || !ipv4ChecksumOK(h) {
			t.Fatalf("header %x: checksum wrong after marking", h)
		}
	}
}

// TestECMP: distinct UDP source ports spread over four ports within 10%
// of even, the same source port always maps to the same port, and two
// switches with different seeds choose independently (no polarization).
func TestECMP(t *testing.T) {
	choices := []int{10, 11, 12, 13}
	const flows = 8192
	count := map[int]int{}
	agree := 0
	for sport := range flows {
		f := roceFrame(t, sport%2 == 1, netsw.ECNECT0, uint16(49152+sport), 64)
		p := netsw.PickECMP(f, 1, choices)
		count[p]++
		for range 3 {
			if netsw.PickECMP(f, 1, choices) != p {
				t.Fatal("the same flow took two ports")
			}
		}
		g := append([]byte(nil), f...)
		binary.BigEndian.PutUint16(g[len(g)-4:], 0xdead) // not in the 5-tuple
		if netsw.PickECMP(g, 1, choices) != p {
			t.Fatal("a payload change moved the flow")
		}
		if netsw.PickECMP(f, 2, choices) == p {
			agree++
		}
	}
	for _, c := range choices {
		if n := count[c]; n < flows/4*9/10 || n > flows/4*11/10 {
			t.Errorf("port %d got %d of %d flows", c, n, flows)
		}
	}
	if agree < flows/4*9/10 || agree > flows/4*11/10 {
		t.Errorf("seeds 1 and 2 agree on %d of %d flows, want about a quarter", agree, flows)
	}
}

// TestDynamicThreshold: in a shared buffer, one queue alone stops at
// alpha/(1+alpha) of the buffer, and a second queue then gets alpha times
// what is left free.
func TestDynamicThreshold(t *testing.T) {
	for _, c := range []struct {
		alpha       float64
		first, next int // frames each queue holds
	}{
		{1, 50, 25},    // q1 <= 100000-q1 ; q2 <= 50000-q2
		{2, 66, 22},    // q1+1000 <= 2(100000-q1-1000): 66 frames; then 2(34000-q2) >= q2
		{0.125, 11, 9}, // q1 <= (100000-q1)/8: 11 frames
		{0.5, 33, 22},
	} {
		s := mustNew(t, netsw.Config{Ports: ports(3, 0), Buffer: netsw.Buffer{Shared: true, SharedBytes: 100_000, Alpha: c.alpha}})
		fill := func(out int) int {
			n := 0
			for s.Enqueue(0, rawFrame(1000), 0, 0, out).Queued() {
				n++
			}
			return n
		}
		// Each queue stops where one more frame would take it past alpha
		// times the buffer then free.
		capped := func(out int) {
			q, free := s.QueueBytes(out), 100_000-s.UsedBytes()
			if float64(q) > c.alpha*float64(free) || float64(q+1000) <= c.alpha*float64(free-1000) {
				t.Errorf("alpha %v: queue %d stopped at %d with %d free", c.alpha, out, q, free)
			}
		}
		if got := fill(1); got != c.first {
			t.Errorf("alpha %v: first queue took %d frames, want %d", c.alpha, got, c.first)
		}
		capped(1)
		if got := fill(2); got != c.next {
			t.Errorf("alpha %v: second queue took %d frames, want %d", c.alpha, got, c.next)
		}
		capped(2)
		if st := s.Stats(1); st.DroppedBy[netsw.DropThreshold] == 0 {
			t.Errorf("alpha %v: no threshold drop counted", c.alpha)
		}
	}
}

// TestOccupancyQuantile: the histogram's quantiles are within 1/16 above
// the exact ones.
func TestOccupancyQuantile(t *testing.T) {
	s := mustNew(t, netsw.Config{Ports: ports(2, 0), Buffer: netsw.Buffer{PortBytes: 1 << 24}})
	if s.OccupancyQuantile(1, 0.99) != 0 {
		t.Fatal("quantile of nothing")
	}
	// The arrivals find 0, 1000, ..., 99 000 bytes.
	for range 100 {
		s.Enqueue(0, rawFrame(1000), 0, 0, 1)
	}
	for _, c := range []struct {
		q     float64
		exact int
	}{{0.5, 49_000}, {0.99, 98_000}, {1, 99_000}, {0.01, 0}} {
		got := s.OccupancyQuantile(1, c.q)
		if got < c.exact || float64(got) > float64(c.exact)*(1+1.0/16) {
			t.Errorf("q %v: %d, exact %d", c.q, got, c.exact)
		}
	}
	if st := s.Stats(1); st.MaxQueueBytes != 100_000 || st.EnqueuedBytes != 100_000 {
		t.Fatalf("stats %+v", st)
	}
	// After ResetOccupancy only later arrivals count: one that finds
	// 100 000 bytes.
	s.ResetOccupancy()
	if got := s.OccupancyQuantile(1, 0.99); got != 0 {
		t.Fatalf("after reset: %d", got)
	}
	s.Enqueue(0, rawFrame(1000), 0, 0, 1)
	if got := s.OccupancyQuantile(1, 0.5); got < 100_000 || got > 100_000*17/16 {
		t.Fatalf("after reset, one arrival at 100000: %d", got)
	}
	if st := s.Stats(1); st.EnqueuedBytes != 101_000 {
		t.Fatalf("reset touched the counters: %+v", st)
	}
}

// TestSteadyStateDoesNotAllocate: enqueue (with marking and PFC) and
// dequeue allocate nothing once the rings have grown.
func TestSteadyStateDoesNotAllocate(t *testing.T) {
	s := mustNew(t, netsw.Config{Ports: ports(4, 40e9), Buffer: netsw.DefaultBuffer(), ECN: netsw.DefaultECN(), PFC: netsw.DefaultPFC(), Seed: 1})
	frames := make([][]byte, 8)
	for i := range frames {
		frames[i] = roceFrame(t, i%2 == 0, netsw.ECNECT0, uint16(i), 1024)
	}
	now := time.Duration(0)
	cycle := func() {
		for i, f := range frames {
			s.Enqueue(now, f, netsw.Handle(i), i%3, 3)
		}
		for range 300 { // build a standing queue so that marking and pauses happen
			for i, f := range frames {
				s.Enqueue(now, f, netsw.Handle(i), i%3, 3)
				s.Dequeue(now, 3)
			}
		}
		for {
			if _, _, ok := s.Dequeue(now, 3); !ok {
				break
			}
		}
		if a, ok := s.Refresh(now); ok {
			_ = a
		}
		now += time.Microsecond
	}
	cycle()
	if allocs := testing.AllocsPerRun(20, cycle); allocs != 0 {
		t.Fatalf("%v allocations per cycle", allocs)
	}
	if s.Stats(3).ECNMarked == 0 {
		t.Fatal("no frame was marked: the cycle did not reach the marking region")
	}
}

// TestConfigErrors: each invalid configuration is refused.
func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]netsw.Config{
		"no ports":      {},
		"no buffer":     {Ports: ports(2, 0)},
		"bad alpha":     {Ports: ports(2, 0), Buffer: netsw.Buffer{Shared: true, SharedBytes: 1000}},
		"kmin > kmax":   {Ports: ports(2, 0), Buffer: netsw.DefaultBuffer(), ECN: netsw.ECN{Enabled: true, KminBytes: 10, KmaxBytes: 5}},
		"pmax":          {Ports: ports(2, 0), Buffer: netsw.DefaultBuffer(), ECN: netsw.ECN{Enabled: true, KmaxBytes: 5, Pmax: 2}},
		"xon > xoff":    {Ports: ports(2, 1e9), Buffer: netsw.DefaultBuffer(), PFC: netsw.PFC{Enabled: true, XOFFBytes: 1, XONBytes: 2}},
		"PFC, no rate":  {Ports: ports(2, 0), Buffer: netsw.DefaultBuffer(), PFC: netsw.DefaultPFC()},
		"shared, no B":  {Ports: ports(2, 0), Buffer: netsw.Buffer{Shared: true, Alpha: 1}},
		"huge per-port": {Ports: ports(4, 0), Buffer: netsw.Buffer{PortBytes: 1 << 30}},
	} {
		if _, err := netsw.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
