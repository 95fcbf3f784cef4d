package dataplane

import (
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// delayLink is a lossless link with a fixed one-way delay and no rate
// limit, so that every round trip is exactly twice the delay.
func delayLink(d time.Duration) fabric.LinkConfig {
	return fabric.LinkConfig{Delay: d}
}

// newRTTPair is a pair of the scheme on delay links, RTOs adaptive, no
// context-fetch stalls (they would add to the round trip).
func newRTTPair(t *testing.T, scheme string, mode RTOMode, oneWay time.Duration, timeout uint8) *testPair {
	t.Helper()
	return newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 61, AtoB: delayLink(oneWay), BtoA: delayLink(oneWay), FetchPenalty: -1, RTO: mode},
		ConnParams{MTU: qp.MTU1024, Timeout: timeout})
}

func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

// TestRTTKarn: a lossless single-packet WRITE gives one sample of exactly
// the round trip; one whose first transmission is lost gives none (the
// resend voids the timing, rtt_karn_skipped), so the estimate keeps the
// path's round trip and not the recovery time; neither does a message
// whose timed last packet arrived once but was acknowledged only when the
// resend of an earlier lost packet filled the hole (irn).
func TestRTTKarn(t *testing.T) {
	const oneWay = 10 * time.Microsecond
	rtt := 2 * oneWay
	for _, tc := range []struct {
		scheme string
		only   bth.Opcode // a single-packet WRITE
		middle bth.Opcode
	}{
		{recovery.GBN, bth.RCWriteOnly, bth.RCWriteMiddle},
		{recovery.IRN, bth.RCWriteOnlyOOO, bth.RCWriteMiddleOOO},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			p := newRTTPair(t, tc.scheme, RTOAdaptive, oneWay, 8) // ACK timeout 1 ms
			p.checkWrite(1, 100, false)
			if a := p.sim.A.Counters(); a.RTTSamples != 1 || a.RTTKarnSkipped != 0 {
				t.Fatalf("lossless WRITE: %d samples, %d skipped; want 1, 0", a.RTTSamples, a.RTTKarnSkipped)
			}
			if r := p.sim.A.QPRTT(p.qa); !r.Valid || r.SRTT != rtt || r.RTTVar != rtt/2 {
				t.Fatalf("after one sample: %+v, want SRTT %v RTTVAR %v", r.RTT, rtt, rtt/2)
			}

			// The next WRITE's first transmission is lost: the timeout
			// resends it and its ACK must not become a sample.
			link := delayLink(oneWay)
			link.Drop = dropFirst(tc.only, 1)
			p.sim.Fabric.SetLink(fabric.AtoB, link)
			start := p.sim.Now()
			p.checkWrite(2, 100, false)
			took := p.sim.Now() - start
			a := p.sim.A.Counters()
			if a.LocalAckTimeout != 1 || a.RTTSamples != 1 || a.RTTKarnSkipped != 1 {
				t.Fatalf("lost WRITE (took %v): %d timeouts, %d samples, %d skipped; want 1, 1, 1", took, a.LocalAckTimeout, a.RTTSamples, a.RTTKarnSkipped)
			}
			if r := p.sim.A.QPRTT(p.qa); r.SRTT != rtt || r.Timing {
				t.Fatalf("after a resend: %+v, want SRTT still %v and nothing timed", r, rtt)
			}

			// A 4-packet WRITE whose second packet is lost: the timed
			// PSN is the last (the one asking for an ACK).
			link.Drop = dropFirst(tc.middle, 1)
			p.sim.Fabric.SetLink(fabric.AtoB, link)
			p.checkWrite(3, 4<<10, false)
			a = p.sim.A.Counters()
			if a.RTTSamples != 1 || a.RTTKarnSkipped != 2 {
				t.Fatalf("hole filled by a resend: %d samples, %d skipped; want 1, 2", a.RTTSamples, a.RTTKarnSkipped)
			}
			if r := p.sim.A.QPRTT(p.qa); r.SRTT != rtt {
				t.Fatalf("after a filled hole: SRTT %v, want %v", r.SRTT, rtt)
			}

			// Lossless again: a sample of the same round trip.
			p.sim.Fabric.SetLink(fabric.AtoB, delayLink(oneWay))
			p.checkWrite(4, 100, false)
			if a := p.sim.A.Counters(); a.RTTSamples != 2 || a.RTTSampleNs != uint64(2*rtt) {
				t.Fatalf("%d samples summing to %d ns, want 2 of %v", a.RTTSamples, a.RTTSampleNs, rtt)
			}
			if r := p.sim.A.QPRTT(p.qa); r.SRTT != rtt {
				t.Fatalf("SRTT %v, want %v", r.SRTT, rtt)
			}
		})
	}
}

// TestRTTFollowsDelay: on a 10 µs link a selective scheme's RTO_low and RTO_high settle
// at IRN's rule on a 20 µs round trip; when the link becomes 200 µs one
// way, the timeouts grow with the estimate (the first messages after the
// change time out spuriously and back off, Karn) and, once it has
// converged, no timeout fires at all. Fixed paper timeouts on the same
// slow link fire on every message.
func TestRTTFollowsDelay(t *testing.T) {
	for _, scheme := range []string{recovery.IRN, recovery.MELO, recovery.FaSR} {
		t.Run(scheme, func(t *testing.T) { rttFollowsDelay(t, scheme) })
	}
}

func rttFollowsDelay(t *testing.T, scheme string) {
	const msgs = 40
	run := func(p *testPair, id0 uint64) {
		for i := range uint64(msgs) {
			size := 100
			if i%2 == 1 {
				size = 32 << 10 // 32 packets: RTO_high while they are out
			}
			p.checkWrite(id0+i, size, false)
		}
	}
	p := newRTTPair(t, scheme, RTOAdaptive, 10*time.Microsecond, 14)
	run(p, 1)
	r := p.sim.A.QPRTT(p.qa)
	fast := recovery.RTT{SRTT: 20 * time.Microsecond, MinRTT: 20 * time.Microsecond, Valid: true}
	if !near(r.SRTT, fast.SRTT, 10*time.Nanosecond) || !near(r.RTOFew, fast.RTOLow(), 100*time.Nanosecond) || !near(r.RTOMany, fast.RTOHigh(), 100*time.Nanosecond) {
		t.Fatalf("10 µs link: %+v, want SRTT 20µs, RTO_low %v, RTO_high %v", r, fast.RTOLow(), fast.RTOHigh())
	}
	if a := p.sim.A.Counters(); a.LocalAckTimeout != 0 || a.RTTSamples < msgs {
		t.Fatalf("10 µs link: %d timeouts, %d samples", a.LocalAckTimeout, a.RTTSamples)
	}

	p.sim.Fabric.SetLink(fabric.AtoB, delayLink(200*time.Microsecond))
	p.sim.Fabric.SetLink(fabric.BtoA, delayLink(200*time.Microsecond))
	run(p, 100) // converging
	changed := p.sim.A.Counters()
	t.Logf("after the change: %d timeouts, %d samples, %d skipped by Karn; %+v", changed.LocalAckTimeout, changed.RTTSamples, changed.RTTKarnSkipped, p.sim.A.QPRTT(p.qa))
	run(p, 200) // converged
	a := p.sim.A.Counters()
	r = p.sim.A.QPRTT(p.qa)
	slow := recovery.RTT{SRTT: 400 * time.Microsecond, MinRTT: 20 * time.Microsecond, Valid: true}
	if !near(r.SRTT, slow.SRTT, 20*time.Microsecond) || !near(r.RTOFew, slow.RTOLow(), 100*time.Microsecond) || r.RTOFew != r.RTOLow() || r.RTOMany != r.RTOHigh() {
		t.Fatalf("200 µs link: %+v, want SRTT about 400µs and RTO_low about %v", r, slow.RTOLow())
	}
	if n := a.LocalAckTimeout - changed.LocalAckTimeout; n != 0 {
		t.Fatalf("%d spurious timeouts after convergence", n)
	}
	if a.RTOMinNs > uint64(fast.RTOLow()+time.Microsecond) || a.RTOMaxNs < uint64(slow.RTOHigh()-100*time.Microsecond) {
		t.Fatalf("rto_min_ns %d, rto_max_ns %d: want the fast path's RTO_low and the slow path's RTO_high", a.RTOMinNs, a.RTOMaxNs)
	}

	// Fixed paper values on the slow link: spurious timeouts all along.
	f := newRTTPair(t, scheme, RTOFixed, 200*time.Microsecond, 14)
	run(f, 1)
	if fa := f.sim.A.Counters(); fa.LocalAckTimeout < msgs || fa.RTTSamples != 0 {
		t.Fatalf("fixed RTOs on a 400 µs round trip: %d timeouts, %d samples; want one or more per message and none", fa.LocalAckTimeout, fa.RTTSamples)
	}
}

// TestRTTGBNFloor: go-back-N's adaptive timeout never goes below the
// negotiated ACK timeout: on a 20 µs round trip a lost single-packet
// WRITE still waits the whole 1 ms; on a path slower than the ACK
// timeout the timeout follows the path instead.
func TestRTTGBNFloor(t *testing.T) {
	base, _ := ackTimeout(8) // 1.05 ms
	p := newRTTPair(t, recovery.GBN, RTOAdaptive, 10*time.Microsecond, 8)
	for i := range uint64(10) {
		p.checkWrite(i+1, 100, false)
	}
	if r := p.sim.A.QPRTT(p.qa); r.RTOFew != base || r.RTOMany != base || r.RTO() >= base {
		t.Fatalf("fast path: %+v, want the ACK timeout %v", r, base)
	}
	link := delayLink(10 * time.Microsecond)
	link.Drop = dropFirst(bth.RCWriteOnly, 1)
	p.sim.Fabric.SetLink(fabric.AtoB, link)
	start := p.sim.Now()
	p.checkWrite(20, 100, false)
	if took := p.sim.Now() - start; took < base || p.sim.A.Counters().LocalAckTimeout != 1 {
		t.Fatalf("lost WRITE recovered after %v with %d timeouts: want one, after at least %v", took, p.sim.A.Counters().LocalAckTimeout, base)
	}

	// A 4 ms round trip, four times the ACK timeout: after the first
	// messages (spurious timeouts, backed off) the timeout is RFC 6298's.
	p.sim.Fabric.SetLink(fabric.AtoB, delayLink(2*time.Millisecond))
	p.sim.Fabric.SetLink(fabric.BtoA, delayLink(2*time.Millisecond))
	for i := range uint64(20) {
		p.checkWrite(i+100, 100, false)
	}
	before := p.sim.A.Counters().LocalAckTimeout
	for i := range uint64(10) {
		p.checkWrite(i+200, 100, false)
	}
	r := p.sim.A.QPRTT(p.qa)
	if r.RTOFew != r.RTO() || r.RTO() <= 4*time.Millisecond {
		t.Fatalf("slow path: %+v, want RFC 6298's RTO above the 4 ms round trip", r)
	}
	if n := p.sim.A.Counters().LocalAckTimeout - before; n != 0 {
		t.Fatalf("%d timeouts after convergence", n)
	}
}

// TestRTTFixedUnchanged: the default takes no samples and charges no
// context bytes for them.
func TestRTTFixedUnchanged(t *testing.T) {
	p := newRTTPair(t, recovery.IRN, RTOFixed, 10*time.Microsecond, 14)
	p.checkWrite(1, 32<<10, false)
	// (The timer starts with the message's AckReq'd last packet, 32 in
	// flight: RTO_high; the fixed values are the only ones armed.)
	if a := p.sim.A.Counters(); a.RTTSamples != 0 || a.RTTKarnSkipped != 0 || a.RTOMinNs != uint64(recovery.DefaultRTOHigh) && a.RTOMinNs != uint64(recovery.DefaultRTOLow) || a.RTOMaxNs != uint64(recovery.DefaultRTOHigh) {
		t.Fatalf("fixed: %d samples, %d skipped, RTO %d..%d ns", a.RTTSamples, a.RTTKarnSkipped, a.RTOMinNs, a.RTOMaxNs)
	}
	if r := p.sim.A.QPRTT(p.qa); r.Valid || r.RTOFew != recovery.DefaultRTOLow || r.RTOMany != recovery.DefaultRTOHigh {
		t.Fatalf("fixed: %+v", r)
	}
	ad := newRTTPair(t, recovery.IRN, RTOAdaptive, 10*time.Microsecond, 14)
	if got, want := ad.sim.A.CacheStats().ResidentBytes-p.sim.A.CacheStats().ResidentBytes, rttOnChipBytes; got != want {
		t.Fatalf("adaptive QP context is %d bytes larger, want %d", got, want)
	}
	names := map[string]bool{}
	c := ad.sim.A.Counters()
	c.Each(func(name string, _ uint64) { names[name] = true })
	for _, n := range []string{"rtt_samples", "rtt_karn_skipped", "rtt_sample_ns_sum", "rto_min_ns", "rto_max_ns"} {
		if !names[n] {
			t.Fatalf("counter %s missing", n)
		}
	}
}

// TestRTTLossy: every scheme with adaptive timeouts moves WRITEs and
// READs intact over a lossy, reordering, duplicating link both ways, and
// takes samples while Karn's rule skips some.
func TestRTTLossy(t *testing.T) {
	for _, scheme := range recovery.Names() {
		t.Run(scheme, func(t *testing.T) {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 62, AtoB: lossyLink(0.02), BtoA: lossyLink(0.02), RTO: RTOAdaptive},
				ConnParams{MTU: qp.MTU1024, Timeout: 14})
			for i := range uint64(12) {
				p.checkWrite(2*i+1, 1+int(i)*5000, false)
				p.checkRead(2*i+2, 1+int(i)*3000)
			}
			a := p.sim.A.Counters()
			r := p.sim.A.QPRTT(p.qa)
			t.Logf("%d samples, %d skipped, %d timeouts, RTO %d..%d ns; %+v", a.RTTSamples, a.RTTKarnSkipped, a.LocalAckTimeout, a.RTOMinNs, a.RTOMaxNs, r)
			if a.RTTSamples == 0 || a.RTTKarnSkipped == 0 || !r.Valid {
				t.Fatalf("%d samples, %d skipped: want both", a.RTTSamples, a.RTTKarnSkipped)
			}
		})
	}
}

// TestRetryTimerWaitsForAckReq: the retransmission timer runs only while
// a packet that asks for an acknowledgement is out. A 64 KiB WRITE on an
// emulated 1 Gb/s link takes about 550 µs to send, longer than IRN's
// fixed RTO_low and RTO_high (100/320 µs) and than the adaptive ones on a
// 2 µs path; timed from the first packet, every message timed out with
// nothing lost. Timed from the AckReq'd last packet, none does, and a
// lost last packet is still recovered by the timer.
func TestRetryTimerWaitsForAckReq(t *testing.T) {
	for _, mode := range []RTOMode{RTOFixed, RTOAdaptive} {
		for _, scheme := range []string{recovery.GBN, recovery.IRN, recovery.FaSR} {
			t.Run(scheme+"/"+mode.String(), func(t *testing.T) {
				p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 63, AtoB: delayLink(2 * time.Microsecond), BtoA: delayLink(2 * time.Microsecond),
					FetchPenalty: -1, RTO: mode, LinkRate: 1e9}, ConnParams{MTU: qp.MTU1024, Timeout: 14})
				for i := range uint64(8) {
					p.checkWrite(i+1, 64<<10, false)
				}
				if a := p.sim.A.Counters(); a.LocalAckTimeout != 0 || a.Retransmits != 0 {
					t.Fatalf("lossless: %d timeouts, %d retransmissions", a.LocalAckTimeout, a.Retransmits)
				}
			})
		}
	}
}

// TestRetryTimerWaitsForReadResponses: a go-back-N READ request is
// answered by responses up to its last PSN, so the timer keeps running
// until the last one: a lost last response (nothing follows it to imply
// the loss) is recovered by the timeout, not waited for forever.
func TestRetryTimerWaitsForReadResponses(t *testing.T) {
	for _, mode := range []RTOMode{RTOFixed, RTOAdaptive} {
		t.Run(mode.String(), func(t *testing.T) {
			p := newTestPair(t, SimConfig{Seed: 64, RTO: mode, BtoA: fabric.LinkConfig{Drop: dropFirst(bth.RCReadResponseLast, 1)}}, ConnParams{MTU: qp.MTU1024, Timeout: 8})
			p.checkRead(1, 10<<10)
			if a := p.sim.A.Counters(); a.LocalAckTimeout == 0 {
				t.Fatalf("the lost last READ response was recovered without a timeout: %+v", a)
			}
		})
	}
}

// TestRTTQueueOutlastsBackoff: a path whose delay jumps far above the
// adaptive timeout, data delayed and never lost. An RNIC with the
// negotiated local ACK timeout (14: 67 ms) keeps such a QP, so softnic's
// adaptive timer must too: Karn's backoff goes on doubling up to the ACK
// timeout (karnBackoff), and only timeouts that waited the ACK timeout
// spend retry_cnt (spendsRetry). With the backoff stopped at 16x
// (RTO_high 264 µs: 4.2 ms), eight timeouts in 21 ms spent every retry
// and the QP failed RETRY_EXC_ERR behind a 50 ms round trip; with only
// the backoff raised, behind a 200 ms one (longer than the ACK timeout,
// as a negotiated timer would retry twice and go on).
func TestRTTQueueOutlastsBackoff(t *testing.T) {
	for _, scheme := range []string{recovery.IRN, recovery.MELO, recovery.FaSR} {
		for _, oneWay := range []time.Duration{25 * time.Millisecond, 100 * time.Millisecond} {
			t.Run(scheme+"/"+(2*oneWay).String(), func(t *testing.T) { rttQueueOutlastsBackoff(t, scheme, oneWay) })
		}
	}
}

func rttQueueOutlastsBackoff(t *testing.T, scheme string, oneWay time.Duration) {
	base, _ := ackTimeout(14)
	p := newRTTPair(t, scheme, RTOAdaptive, 10*time.Microsecond, 14)
	for i := range uint64(10) {
		p.checkWrite(i+1, 32<<10, false) // RTO_high while they are out
	}
	p.sim.Fabric.SetLink(fabric.AtoB, delayLink(oneWay))
	p.sim.Fabric.SetLink(fabric.BtoA, delayLink(oneWay))
	before := p.sim.A.Counters()
	for i := range uint64(6) {
		p.checkWrite(100+i, 100+int(i%2)*(32<<10-100), false) // fails the test on RETRY_EXC_ERR
	}
	a := p.sim.A.Counters()
	r := p.sim.A.QPRTT(p.qa)
	t.Logf("%d timeouts, %d samples, %d skipped by Karn; %+v", a.LocalAckTimeout-before.LocalAckTimeout, a.RTTSamples-before.RTTSamples, a.RTTKarnSkipped-before.RTTKarnSkipped, r)
	if a.LocalAckTimeout == before.LocalAckTimeout || a.RetryExceededErr != 0 {
		t.Fatalf("%d timeouts, retry_exceeded_err %d: want some, and none", a.LocalAckTimeout-before.LocalAckTimeout, a.RetryExceededErr)
	}
	if rtt := 2 * oneWay; rtt < base {
		// Below the ACK timeout the backoff outgrew the round trip, so
		// packets sent once were acknowledged and measured: the estimate
		// follows the path and times out no more. (Above it every timeout
		// is the ACK timeout, as an RNIC's, and Karn's rule takes no
		// sample.)
		if a.RTTSamples == before.RTTSamples || r.SRTT < rtt/4 {
			t.Fatalf("SRTT %v after the jump to %v, want it following", r.SRTT, rtt)
		}
		conv := p.sim.A.Counters()
		p.checkWrite(200, 32<<10, false)
		if n := p.sim.A.Counters().LocalAckTimeout - conv.LocalAckTimeout; n != 0 {
			t.Fatalf("%d timeouts after convergence", n)
		}
	}
}

// TestRTTDeadPathStillFails: an adaptive timeout below the ACK timeout
// spends no retry, but Karn's backoff takes it to the ACK timeout, so a
// dead path still fails the QP: after the ramp, retry_cnt+1 timeouts of
// the negotiated ACK timeout, as an RNIC's (IBA §9.7.6.1.3), and no
// sooner. Before, irn gave up after 6.6 ms. (go-back-N's adaptive timeout
// is never below the ACK timeout: every timeout spends a retry, as before.)
func TestRTTDeadPathStillFails(t *testing.T) {
	for _, scheme := range []string{recovery.IRN, recovery.FaSR} {
		t.Run(scheme, func(t *testing.T) {
			base, _ := ackTimeout(14)
			p := newRTTPair(t, scheme, RTOAdaptive, 10*time.Microsecond, 14)
			for i := range uint64(10) {
				p.checkWrite(i+1, 100, false)
			}
			p.sim.Fabric.SetLink(fabric.AtoB, fabric.LinkConfig{Delay: 10 * time.Microsecond, Loss: 1})
			start := p.sim.Now()
			p.postSend(sendWR(50, qp.WRRDMAWrite, sge(p.mrA, 0, 100)))
			wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, 10*time.Second)[0], 50, qp.WCRetryExcErr, qp.WCRDMAWrite)
			// The ramp below the ACK timeout doubles from RTO_high's
			// 264 µs: together about one or two ACK timeouts more.
			if took := p.sim.Now() - start; took < 8*base || took > 10*base {
				t.Fatalf("gave up after %v, want 8 ACK timeouts of %v and the ramp to them", took, base)
			}
		})
	}
}

// TestRTTOffChip: with Config.RTTOffChip an adaptive QP's context is as
// large on chip as a fixed one's (the estimate is not charged), and its
// timeouts still follow the path (it takes samples).
func TestRTTOffChip(t *testing.T) {
	fixed := newRTTPair(t, recovery.SRNIC, RTOFixed, 10*time.Microsecond, 14)
	off := newSchemePair(t, recovery.SRNIC, recovery.Params{}, SimConfig{Seed: 61, AtoB: delayLink(10 * time.Microsecond), BtoA: delayLink(10 * time.Microsecond), FetchPenalty: -1, RTO: RTOAdaptive, RTTOffChip: true},
		ConnParams{MTU: qp.MTU1024, Timeout: 14})
	on := newRTTPair(t, recovery.SRNIC, RTOAdaptive, 10*time.Microsecond, 14)
	f, o, n := fixed.sim.A.CacheStats().ResidentBytes, off.sim.A.CacheStats().ResidentBytes, on.sim.A.CacheStats().ResidentBytes
	if o != f || n != f+rttOnChipBytes {
		t.Fatalf("context bytes: fixed %d, adaptive off chip %d (want %d), adaptive %d (want %d)", f, o, f, n, f+rttOnChipBytes)
	}
	off.checkWrite(1, 4<<10, false)
	if a := off.sim.A.Counters(); a.RTTSamples == 0 {
		t.Fatal("adaptive with the estimate off chip took no sample")
	}
}
