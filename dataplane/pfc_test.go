package dataplane

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/qp"
)

// The PFC tests run two engines on the fabric, A's emulated link at
// pfcTestRate and PFC on for priority 3; the fabric never delivers a
// pause, so the test hands A its pause frames through injectPort.
const (
	pfcTestRate     = 1e9
	pfcTestPriority = 3
	pfcTestMsg      = 1 << 20 // 8.6 ms on the emulated link
)

// injectPort is a fabric port that also delivers the frames a test
// queues, before the fabric's.
type injectPort struct {
	Port
	queued [][]byte
}

func (p *injectPort) Receive(frames [][]byte) int {
	n := copy(frames, p.queued)
	p.queued = p.queued[:0]
	return n + p.Port.Receive(frames[n:])
}

// pfcPair is a testPair whose engine A honours PFC pauses for
// pfcTestPriority, with the frames A transmits and when.
type pfcPair struct {
	*testPair
	inject *injectPort
	txAt   []time.Duration
}

func newPFCPair(t *testing.T, cfgA func(*Config)) *pfcPair {
	t.Helper()
	clock := &fabric.FakeClock{}
	f := fabric.New(clock, 1, lossyLink(0), lossyLink(0), 4096+128)
	inj := &injectPort{Port: f.A()}
	ca := Config{MAC: SimMACA, Addr: SimAddrA, FetchPenalty: -1, LinkRate: pfcTestRate, PFC: true, PFCPriority: pfcTestPriority}
	if cfgA != nil {
		cfgA(&ca)
	}
	a, err := NewEngine(ca, inj)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewEngine(Config{MAC: SimMACB, Addr: SimAddrB, FetchPenalty: -1, LinkRate: pfcTestRate}, f.B())
	if err != nil {
		t.Fatal(err)
	}
	sim := &Sim{Clock: clock, Fabric: f, A: a, B: b,
		group: Group{Engines: []*Engine{a, b}, Events: []func() (time.Duration, bool){f.A().NextDelivery, f.B().NextDelivery}}}
	p := &pfcPair{testPair: &testPair{tb: t, sim: sim, wcs: make([]qp.WC, 64)}, inject: inj}
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	p.pdA, p.pdB = a.AllocPD(), b.AllocPD()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p.mrA, err = a.RegMR(p.pdA, make([]byte, testMRSize), 0, all)
	must(err)
	p.mrB, err = b.RegMR(p.pdB, make([]byte, testMRSize), 0, all)
	must(err)
	p.cqA, err = a.CreateCQ(4096, nil)
	must(err)
	p.cqB, err = b.CreateCQ(4096, nil)
	must(err)
	p.qa, err = a.CreateQP(p.pdA, QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, MaxSendWR: 256, MaxRecvWR: 256})
	must(err)
	p.qb, err = b.CreateQP(p.pdB, QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, MaxSendWR: 256, MaxRecvWR: 256})
	must(err)
	must(Connect(a, p.qa, b, p.qb, ConnParams{MTU: qp.MTU1024}))
	a.SetCapture(func(dir CaptureDir, now time.Duration, _ []byte) {
		if dir == CaptureTX {
			p.txAt = append(p.txAt, now)
		}
	})
	return p
}

// startWrite posts one long WRITE from A and runs until at, in the
// middle of it.
func (p *pfcPair) startWrite(at time.Duration) {
	p.tb.Helper()
	fillRandom(p.mrA.buf[:pfcTestMsg], 7)
	wr := sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, pfcTestMsg))
	wr.RemoteAddr, wr.RKey = p.mrB.Addr, p.mrB.RKey
	p.postSend(wr)
	p.sim.RunTo(at)
	if n := len(p.txAt); n == 0 || n >= pfcTestMsg/1024 {
		p.tb.Fatalf("at %v A sent %d frames of the WRITE's %d: not in the middle of it", at, n, pfcTestMsg/1024)
	}
}

// receive hands A frame at the Sim's time, as its link partner would.
func (p *pfcPair) receive(frame []byte) {
	p.inject.queued = append(p.inject.queued, frame)
	p.sim.A.Poll(p.sim.Now())
}

// sentIn is how many frames A transmitted in [from, to).
func (p *pfcPair) sentIn(from, to time.Duration) int {
	n := 0
	for _, at := range p.txAt {
		if at >= from && at < to {
			n++
		}
	}
	return n
}

// firstFrom is when A first transmitted at or after t.
func (p *pfcPair) firstFrom(t time.Duration) time.Duration {
	for _, at := range p.txAt {
		if at >= t {
			return at
		}
	}
	return -1
}

// finish runs the WRITE to its completion and checks its data and that
// nothing was lost or resent: the pause held frames, it dropped none.
func (p *pfcPair) finish() {
	p.tb.Helper()
	if wc := p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0]; wc.Status != qp.WCSuccess {
		p.tb.Fatalf("completion %+v", wc)
	}
	mustEqual(p.tb, "WRITE data", p.mrB.buf[:pfcTestMsg], p.mrA.buf[:pfcTestMsg])
	if c := p.sim.A.Counters(); c.Retransmits != 0 || c.LocalAckTimeout != 0 {
		p.tb.Errorf("retransmitted_pkts %d, local_ack_timeout_err %d: want 0 (a pause loses nothing)", c.Retransmits, c.LocalAckTimeout)
	}
}

func pfcFrame(priority int, quanta uint16) []byte {
	f := netsw.PausePriority(SimMACB, priority, quanta)
	b := make([]byte, netsw.PFCFrameLen)
	f.Encode(b)
	return b
}

// TestPFCPauseHoldsTransmit: a PFC frame for the honoured priority with
// q quanta, received while A streams a WRITE, stops A's transmit for
// exactly q×512 bit times at the emulated link's rate: no frame in that
// window, the next at its end (the engine's next deadline). The WRITE
// completes with nothing lost, and the counters moved by one pause and
// its time.
func TestPFCPauseHoldsTransmit(t *testing.T) {
	const (
		t0     = time.Millisecond
		quanta = 2000
	)
	p := newPFCPair(t, nil)
	p.startWrite(t0)
	hold := netsw.QuantaTime(quanta, pfcTestRate)
	if hold != 1024*time.Microsecond {
		t.Fatalf("QuantaTime(%d, 1 Gb/s) = %v, want 1.024ms", quanta, hold)
	}
	before := len(p.txAt)
	p.receive(pfcFrame(pfcTestPriority, quanta))
	if d, ok := p.sim.A.NextDeadline(); !ok || d != t0+hold {
		t.Fatalf("NextDeadline = %v, %v; want %v, the pause's end", d, ok, t0+hold)
	}
	if len(p.txAt) != before {
		t.Fatal("A transmitted in the poll that took the pause")
	}
	p.sim.RunTo(t0 + hold - 1)
	if n := p.sentIn(t0, t0+hold); n != 0 {
		t.Fatalf("%d frames left during the pause [%v, %v)", n, t0, t0+hold)
	}
	p.sim.RunTo(t0 + hold)
	if at := p.firstFrom(t0); at != t0+hold {
		t.Fatalf("first frame after the pause at %v, want %v", at, t0+hold)
	}
	p.finish()
	c := p.sim.A.Counters()
	if c.RxPrioPause != 1 || c.RxPrioPauseResume != 0 || c.RxPauseIgnored != 0 {
		t.Errorf("rx_prio_pause %d, rx_prio_pause_resume %d, rx_pause_ignored %d; want 1, 0, 0", c.RxPrioPause, c.RxPrioPauseResume, c.RxPauseIgnored)
	}
	if c.RxPrioPauseDurationNs != uint64(hold) {
		t.Errorf("rx_prio_pause_duration_ns %d, want %d", c.RxPrioPauseDurationNs, hold)
	}
	if c.RcvdMalformed != 0 || c.RcvdPkts == 0 {
		t.Errorf("rcvd_malformed %d, rcvd_pkts %d: the pause frame is no RoCE frame, malformed or not", c.RcvdMalformed, c.RcvdPkts)
	}
}

// TestPFCResumeAndReplace: a pause of the longest time is replaced by a
// shorter one (the timer is reloaded from the new frame), and that one is
// ended early by a frame of time 0 (XON): transmit resumes at once, and
// the duration counter has the time the port was actually held.
func TestPFCResumeAndReplace(t *testing.T) {
	const (
		t0     = time.Millisecond
		step   = 300 * time.Microsecond
		second = 5000 // 2.56 ms at 1 Gb/s
	)
	p := newPFCPair(t, nil)
	p.startWrite(t0)
	p.receive(pfcFrame(pfcTestPriority, 0xffff)) // 33.5 ms
	p.sim.RunTo(t0 + step)
	p.receive(pfcFrame(pfcTestPriority, second))
	want := t0 + step + netsw.QuantaTime(second, pfcTestRate)
	if d, ok := p.sim.A.NextDeadline(); !ok || d != want {
		t.Fatalf("after the second pause NextDeadline = %v, %v; want %v", d, ok, want)
	}
	resume := t0 + 2*step
	p.sim.RunTo(resume)
	if n := p.sentIn(t0, resume); n != 0 {
		t.Fatalf("%d frames left during the pauses", n)
	}
	p.receive(pfcFrame(pfcTestPriority, 0))
	if at := p.firstFrom(t0); at != resume {
		t.Fatalf("first frame after the resume at %v, want %v (at once)", at, resume)
	}
	p.finish()
	c := p.sim.A.Counters()
	if c.RxPrioPause != 2 || c.RxPrioPauseResume != 1 || c.RxPauseIgnored != 0 {
		t.Errorf("rx_prio_pause %d, rx_prio_pause_resume %d, rx_pause_ignored %d; want 2, 1, 0", c.RxPrioPause, c.RxPrioPauseResume, c.RxPauseIgnored)
	}
	if c.RxPrioPauseDurationNs != uint64(2*step) {
		t.Errorf("rx_prio_pause_duration_ns %d, want %d", c.RxPrioPauseDurationNs, 2*step)
	}
}

// TestPFCIgnored: a PFC frame for another priority, an 802.3x PAUSE, a
// truncated PFC frame and any pause on an engine without Config.PFC
// change nothing (the WRITE's frames keep leaving on the link's
// schedule) and are counted in rx_pause_ignored.
func TestPFCIgnored(t *testing.T) {
	pause8023x := pfcFrame(pfcTestPriority, 0xffff)
	binary.BigEndian.PutUint16(pause8023x[14:], netsw.OpcodePause)
	other := pfcFrame(pfcTestPriority+1, 0xffff)
	for _, c := range []struct {
		name  string
		cfg   func(*Config)
		frame []byte
	}{
		{"another priority", nil, other},
		{"802.3x PAUSE", nil, pause8023x},
		{"truncated", nil, pfcFrame(pfcTestPriority, 0xffff)[:30]},
		{"PFC off", func(c *Config) { c.PFC = false }, pfcFrame(pfcTestPriority, 0xffff)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const t0 = time.Millisecond
			p := newPFCPair(t, c.cfg)
			p.startWrite(t0)
			p.receive(c.frame)
			p.sim.RunTo(t0 + 100*time.Microsecond) // about 11 frames' time
			if n := p.sentIn(t0, t0+100*time.Microsecond); n < 10 {
				t.Fatalf("%d frames in the 100µs after the frame: it held the port", n)
			}
			p.finish()
			cnt := p.sim.A.Counters()
			if cnt.RxPauseIgnored != 1 || cnt.RxPrioPause != 0 || cnt.RxPrioPauseResume != 0 || cnt.RxPrioPauseDurationNs != 0 {
				t.Errorf("rx_pause_ignored %d, rx_prio_pause %d, rx_prio_pause_resume %d, rx_prio_pause_duration_ns %d; want 1, 0, 0, 0",
					cnt.RxPauseIgnored, cnt.RxPrioPause, cnt.RxPrioPauseResume, cnt.RxPrioPauseDurationNs)
			}
			if cnt.RcvdMalformed != 0 {
				t.Errorf("rcvd_malformed %d: a MAC Control frame is not a malformed RoCE frame", cnt.RcvdMalformed)
			}
		})
	}
}

// TestPFCRate: the quanta count at the emulated link's rate when there
// is one, else at Config.PFCRate, else at DefaultPFCRate.
func TestPFCRate(t *testing.T) {
	for _, c := range []struct {
		link, pfc, want uint64
	}{
		{1e9, 25e9, 1e9},
		{0, 25e9, 25e9},
		{0, 0, DefaultPFCRate},
	} {
		p := newPFCPause(&Config{LinkRate: c.link, PFCRate: c.pfc})
		if p.rate != c.want {
			t.Errorf("LinkRate %d, PFCRate %d: pauses count at %d bit/s, want %d", c.link, c.pfc, p.rate, c.want)
		}
	}
	if _, err := NewEngine(Config{Addr: SimAddrA, PFCPriority: 8}, &injectPort{}); err == nil {
		t.Error("NewEngine took PFC priority 8")
	}
}

// TestPFCAllocs: taking a pause frame allocates nothing.
func TestPFCAllocs(t *testing.T) {
	p := newPFCPair(t, nil)
	frames := [][]byte{pfcFrame(pfcTestPriority, 100), pfcFrame(pfcTestPriority, 0), pfcFrame(1, 100), pfcFrame(3, 1)[:20]}
	a := p.sim.A
	if n := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			a.receive(f)
		}
	}); n != 0 {
		t.Errorf("%v allocations per round of pause frames, want 0", n)
	}
}
