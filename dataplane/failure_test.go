package dataplane

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestRemoteAccessErrors: a bad rkey, an out-of-bounds address and a
// missing access flag each complete the request with REM_ACCESS_ERR, move
// both QPs to ERR, flush what was queued behind, and leave the
// responder's memory untouched.
func TestRemoteAccessErrors(t *testing.T) {
	type target struct {
		name string
		fix  func(p *testPair, wr *qp.SendWR)
	}
	targets := []target{
		{"bad rkey", func(p *testPair, wr *qp.SendWR) { wr.RKey ^= 0x100 }},
		{"stale rkey tag", func(p *testPair, wr *qp.SendWR) { wr.RKey ^= 0x1 }},
		{"past the end", func(p *testPair, wr *qp.SendWR) { wr.RemoteAddr = p.mrB.Addr + testMRSize }},
		{"before the start", func(p *testPair, wr *qp.SendWR) { wr.RemoteAddr = p.mrB.Addr - 16 }},
		{"address wraps", func(p *testPair, wr *qp.SendWR) { wr.RemoteAddr = ^uint64(0) &^ 7 }},
		{"no access flag", func(p *testPair, wr *qp.SendWR) {
			m, err := p.sim.B.RegMR(p.pdB, make([]byte, 4096), 0, qp.AccessLocalWrite)
			if err != nil {
				p.tb.Fatal(err)
			}
			wr.RemoteAddr, wr.RKey = m.Addr, m.RKey
		}},
		{"other PD", func(p *testPair, wr *qp.SendWR) {
			m, err := p.sim.B.RegMR(p.sim.B.AllocPD(), make([]byte, 4096), 0, qp.AccessLocalWrite|qp.AccessRemoteWrite|qp.AccessRemoteRead|qp.AccessRemoteAtomic)
			if err != nil {
				p.tb.Fatal(err)
			}
			wr.RemoteAddr, wr.RKey = m.Addr, m.RKey
		}},
	}
	for _, op := range []qp.WROpcode{qp.WRRDMAWrite, qp.WRRDMARead, qp.WRAtomicFetchAndAdd, qp.WRAtomicCmpAndSwp} {
		for _, tg := range targets {
			t.Run(op.String()+"/"+tg.name, func(t *testing.T) {
				p := newTestPair(t, SimConfig{Seed: 1}, ConnParams{})
				fillRandom(p.mrB.Bytes(), 9)
				before := bytes.Clone(p.mrB.Bytes())
				n := 3000
				if op.IsAtomic() {
					n = 8
				}
				wr := sendWR(1, op, sge(p.mrA, 0, n))
				wr.RemoteAddr, wr.RKey = p.mrB.Addr+64, p.mrB.RKey
				tg.fix(p, &wr)
				next := sendWR(2, qp.WRRDMAWrite, sge(p.mrA, 0, 16))
				next.RemoteAddr, next.RKey = p.mrB.Addr, p.mrB.RKey
				p.postSend(wr, next)
				wcs := p.waitWCs(p.sim.A, p.cqA, 2, time.Second)
				wantWC(t, wcs[0], 1, qp.WCRemAccessErr, qp.WCOpcodeFor(op))
				wantWC(t, wcs[1], 2, qp.WCWRFlushErr, qp.WCRDMAWrite)
				p.settle()
				if !bytes.Equal(p.mrB.Bytes(), before) {
					t.Fatal("responder memory changed")
				}
				if p.qa.State() != qp.Err || p.qb.State() != qp.Err {
					t.Fatalf("states %v/%v, want ERR/ERR", p.qa.State(), p.qb.State())
				}
				if a, b := p.sim.A.Counters(), p.sim.B.Counters(); a.ReqRemoteAccess != 1 || b.RespRemoteAccess != 1 {
					t.Fatalf("req_remote_access_errors %d, resp_remote_access_errors %d", a.ReqRemoteAccess, b.RespRemoteAccess)
				}
			})
		}
	}
}

// TestSendTooLong: a SEND bigger than the receive WQE is a local length
// error at the responder and REM_INV_REQ_ERR at the requester.
func TestSendTooLong(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 2}, ConnParams{MTU: qp.MTU1024})
	p.postRecv(recvWR(10, sge(p.mrB, 0, 2000)))
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, 5000)))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCRemInvReqErr, qp.WCSend)
	wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, time.Second)[0], 10, qp.WCLocLenErr, qp.WCRecv)
	if c := p.sim.B.Counters(); c.RespLocalLength != 1 {
		t.Fatalf("resp_local_length_error = %d", c.RespLocalLength)
	}
}

// TestMisalignedAtomic is an invalid request (IBA: atomics are 8-byte
// aligned).
func TestMisalignedAtomic(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 3}, ConnParams{})
	wr := sendWR(1, qp.WRAtomicFetchAndAdd, sge(p.mrA, 0, 8))
	wr.RemoteAddr, wr.RKey, wr.CompareAdd = p.mrB.Addr+4, p.mrB.RKey, 1
	p.postSend(wr)
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCRemInvReqErr, qp.WCFetchAdd)
}

// TestRetryExceeded: with the path dead, the requester times out
// retry_cnt+1 times, then completes RETRY_EXC_ERR and flushes the rest.
func TestRetryExceeded(t *testing.T) {
	dead := fabric.LinkConfig{Loss: 1}
	p := newTestPair(t, SimConfig{Seed: 4, AtoB: dead}, ConnParams{Timeout: 10, RetryCnt: 3}) // 4.2 ms
	start := p.sim.Now()
	p.postSend(sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 100)), sendWR(2, qp.WRSend, sge(p.mrA, 0, 10)))
	wcs := p.waitWCs(p.sim.A, p.cqA, 2, 10*time.Second)
	wantWC(t, wcs[0], 1, qp.WCRetryExcErr, qp.WCRDMAWrite)
	wantWC(t, wcs[1], 2, qp.WCWRFlushErr, qp.WCSend)
	c := p.sim.A.Counters()
	if c.LocalAckTimeout != 4 || c.RetryExceededErr != 1 {
		t.Fatalf("local_ack_timeout_err %d (want 4), retry_exceeded_err %d (want 1)", c.LocalAckTimeout, c.RetryExceededErr)
	}
	timeout, _ := ackTimeout(10)
	if took := p.sim.Now() - start; took < 4*timeout || took > 4*timeout+time.Millisecond {
		t.Fatalf("gave up after %v, want 4 timeouts of %v", took, timeout)
	}
	if p.qa.State() != qp.Err {
		t.Fatalf("state %v, want ERR", p.qa.State())
	}
	// Posting to a QP in ERR completes at once with WR_FLUSH_ERR.
	p.postSend(sendWR(3, qp.WRSend))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 3, qp.WCWRFlushErr, qp.WCSend)
}

// TestRTOBackoff: with Config.RTOBackoff each timeout without progress
// doubles the next one: a dead path gives up after T+2T+4T+8T.
func TestRTOBackoff(t *testing.T) {
	dead := fabric.LinkConfig{Loss: 1}
	p := newTestPair(t, SimConfig{Seed: 4, AtoB: dead, RTOBackoff: true}, ConnParams{Timeout: 10, RetryCnt: 3})
	start := p.sim.Now()
	p.postSend(sendWR(1, qp.WRRDMAWrite, sge(p.mrA, 0, 100)))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, 10*time.Second)[0], 1, qp.WCRetryExcErr, qp.WCRDMAWrite)
	timeout, _ := ackTimeout(10)
	if c := p.sim.A.Counters(); c.LocalAckTimeout != 4 {
		t.Fatalf("local_ack_timeout_err %d, want 4", c.LocalAckTimeout)
	}
	if took := p.sim.Now() - start; took < 15*timeout || took > 15*timeout+time.Millisecond {
		t.Fatalf("gave up after %v, want T+2T+4T+8T = %v", took, 15*timeout)
	}

}

// TestRNR: with no receive posted the responder sends RNR NAKs; once
// rnr_retry runs out the SEND completes RNR_RETRY_EXC_ERR.
func TestRNR(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 5}, ConnParams{RNRRetry: 2, RNRRetrySet: true, MinRNRTimer: 1})
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, 100)))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCRNRRetryExcErr, qp.WCSend)
	a, b := p.sim.A.Counters(), p.sim.B.Counters()
	if b.SendRNRErr != 3 || a.RcvdRNRErr != 3 || a.RNRNakRetryErr != 1 {
		t.Fatalf("send_rnr_err %d, rcvd_rnr_err %d (want 3 each), retry_rnr_exceeded_err %d", b.SendRNRErr, a.RcvdRNRErr, a.RNRNakRetryErr)
	}
}

// TestRNRRecovers: a receive posted during the RNR wait lets the retried
// SEND through, with its data intact.
func TestRNRRecovers(t *testing.T) {
	p := newTestPair(t, SimConfig{Seed: 6, AtoB: lossyLink(0), BtoA: lossyLink(0)}, ConnParams{MinRNRTimer: 14}) // 1.28 ms
	fillRandom(p.mrA.Bytes()[:5000], 6)
	p.postSend(sendWR(1, qp.WRSend, sge(p.mrA, 0, 5000)))
	p.sim.RunFor(500 * time.Microsecond)
	if p.sim.B.Counters().SendRNRErr == 0 {
		t.Fatal("no RNR NAK was sent")
	}
	p.postRecv(recvWR(7, sge(p.mrB, 0, 8000)))
	wantWC(t, p.waitWCs(p.sim.A, p.cqA, 1, time.Second)[0], 1, qp.WCSuccess, qp.WCSend)
	wantWC(t, p.waitWCs(p.sim.B, p.cqB, 1, time.Second)[0], 7, qp.WCSuccess, qp.WCRecv)
	mustEqual(t, "SEND after RNR", p.mrB.Bytes()[:5000], p.mrA.Bytes()[:5000])
}

// TestPSNWrap sends messages across the 2^24 PSN boundary, mid-message,
// lossless and lossy, under every scheme.
func TestPSNWrap(t *testing.T) {
	for _, scheme := range recovery.Names() {
		for _, loss := range []float64{0, 0.05} {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 7, AtoB: lossyLink(loss), BtoA: lossyLink(loss)},
				ConnParams{MTU: qp.MTU1024, PSNA: 0xFFFFF0, PSNB: 0xFFFFFA, Timeout: 8})
			for id := uint64(1); id <= 4; id++ {
				p.checkWrite(id, 64<<10, false)
				p.checkRead(id, 40<<10)
				p.checkSend(id, 20<<10, true)
			}
			if q := p.qa; q.nextPSN > 0x10000 { // raw compare on purpose: it must have wrapped to a small number
				t.Fatalf("%s: PSN did not wrap: next PSN %#x", scheme, q.nextPSN)
			}
		}
	}
}

// TestIPv6 runs the transport over IPv6 frames (UDP checksum filled, the
// ICRC masking traffic class, flow label and hop limit), lossy, under every
// scheme.
func TestIPv6(t *testing.T) {
	for _, scheme := range recovery.Names() {
		t.Run(scheme, func(t *testing.T) {
			p := newSchemePair(t, scheme, recovery.Params{}, SimConfig{Seed: 16, IPv6: true, AtoB: lossyLink(0.01), BtoA: lossyLink(0.01)}, ConnParams{MTU: qp.MTU2048, Timeout: 8})
			var frames int
			p.sim.Fabric.Tap(func(_ fabric.Direction, _ time.Duration, frame []byte, _ bool) {
				if f, err := bth.ParseFrame(frame); err == nil && f.IPv6 && f.VerifyICRC() {
					frames++
				}
			})
			for id := uint64(1); id <= 3; id++ {
				p.checkWrite(id, 100<<10, true)
				p.checkRead(id, 50<<10)
				p.checkSend(id, 10<<10, false)
			}
			p.checkAtomics()
			if frames == 0 {
				t.Fatal("no valid IPv6 RoCEv2 frames on the wire")
			}
		})
	}
}
