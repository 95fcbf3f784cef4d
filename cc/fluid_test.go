package cc

import (
	"math/rand/v2"
	"testing"
	"time"
)

// fluidLink is a fluid model of one bottleneck: a link of capacity C
// bit/s fed by the QPs' rates, its queue integrated in steps, and ECN
// marking on the queue with RED's probability (DCQCN §3's congestion
// point: none below Kmin, rising linearly to Pmax at Kmax, all above).
// It is a model in this test, not softnic's switch (issue 23 item 2 builds
// that): packets are counted, not carried, and a CNP reaches its sender a
// fixed delay after the mark.
type fluidLink struct {
	capacity        uint64  // C, bit/s
	kmin, kmax      float64 // bytes
	pmax            float64
	queue           float64 // bytes
	packet          int     // wire bytes of every packet
	cnpDelay        time.Duration
	rng             *rand.Rand
	flows           []*fluidFlow
	sumQueue, ticks float64
}

type fluidFlow struct {
	s       Sender
	r       Receiver
	start   Time
	carry   float64 // a packet's fraction not sent yet
	cnpsDue []Time  // CNPs on their way back
	sent    float64 // bytes sent in the measurement window
	cnps    int
}

func (l *fluidLink) markProbability() float64 {
	switch {
	case l.queue <= l.kmin:
		return 0
	case l.queue > l.kmax:
		return 1
	}
	return l.pmax * (l.queue - l.kmin) / (l.kmax - l.kmin)
}

// step moves the model on by dt at now: each QP's timer and CNPs, the
// packets it sends at its rate, their marks, the queue.
func (l *fluidLink) step(now Time, dt time.Duration, measure bool) {
	p := l.markProbability()
	in := 0.0
	for _, f := range l.flows {
		if now < f.start {
			continue
		}
		for len(f.cnpsDue) > 0 && f.cnpsDue[0] <= now {
			f.cnpsDue = f.cnpsDue[1:]
			f.s.OnCNP(now)
			f.cnps++
		}
		if at, ok := f.s.Deadline(); ok && at <= now {
			f.s.OnTimer(now)
		}
		bytes := float64(f.s.Rate()) * dt.Seconds() / 8
		in += bytes
		if measure {
			f.sent += bytes
		}
		f.carry += bytes / float64(l.packet)
		for ; f.carry >= 1; f.carry-- {
			f.s.OnSent(now, l.packet)
			if p > 0 && l.rng.Float64() < p && f.r.OnCE(now) {
				f.cnpsDue = append(f.cnpsDue, now+l.cnpDelay)
			}
		}
	}
	l.queue = max(l.queue+in-float64(l.capacity)*dt.Seconds()/8, 0)
	if measure {
		l.sumQueue += l.queue
		l.ticks++
	}
}

// TestDCQCNFairShareFluid: two DCQCN QPs on one bottleneck of C = 40
// Gbit/s, the second starting 10 ms after the first has taken the whole
// link, converge to within 10% of C/2 each, with DCQCN's own switch
// parameters (Kmin 5 KB, Kmax 200 KB, Pmax 1%) and its RP and NP defaults.
// The rates are averaged from 40 ms to 200 ms: they come near C/2 within
// about 10 ms of the second QP's start, but then wander by up to ±12%
// over 20 ms spans (DCQCN's increase is driven by a timer that does not
// care about the rate, and marks are random), so a short window would
// test the dice. Over this window seeds 1 to 20 all land within 7% of
// C/2; the test keeps one.
func TestDCQCNFairShareFluid(t *testing.T) {
	const c = 40 * gbit
	a, err := New(DCQCN, Params{LineRate: c})
	if err != nil {
		t.Fatal(err)
	}
	l := &fluidLink{capacity: c, kmin: 5e3, kmax: 200e3, pmax: 0.01, packet: 1078,
		cnpDelay: 4 * time.Microsecond, rng: rand.New(rand.NewPCG(23, 1))}
	for _, start := range []Time{0, 10 * time.Millisecond} {
		f := &fluidFlow{s: a.NewSender(), r: a.NewReceiver(), start: start}
		f.s.Reset(start)
		f.r.Reset(start)
		l.flows = append(l.flows, f)
	}
	const dt = time.Microsecond
	from, end := 40*time.Millisecond, 200*time.Millisecond
	for now := Time(0); now < end; now += dt {
		l.step(now, dt, now >= from)
		if testing.Verbose() && now%(5*time.Millisecond) == 0 {
			t.Logf("%3v: rates %5.2f %5.2f Gbit/s, queue %6.0f B", now, float64(l.flows[0].s.Rate())/1e9, float64(l.flows[1].s.Rate())/1e9, l.queue)
		}
	}
	window := (end - from).Seconds()
	for i, f := range l.flows {
		rate := f.sent * 8 / window
		t.Logf("QP %d: %.2f Gbit/s over the last %v, %d CNPs", i, rate/1e9, end-from, f.cnps)
		if rate < 0.9*c/2 || rate > 1.1*c/2 {
			t.Errorf("QP %d: %.2f Gbit/s, not within 10%% of %.0f", i, rate/1e9, float64(c/2)/1e9)
		}
	}
	var total float64
	for _, f := range l.flows {
		total += f.sent * 8 / window
	}
	if total < 0.95*c || total > 1.02*c {
		t.Errorf("the two QPs send %.2f Gbit/s together on a %d Gbit/s link", total/1e9, c/gbit)
	}
	t.Logf("mean queue %.0f B", l.sumQueue/l.ticks)
}
