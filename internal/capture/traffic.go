package capture

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
)

// LossyTraffic runs, on the embedded fabric with loss in both
// directions, one connection of scheme that sends every kind of SEND and
// RDMA WRITE (one packet and three, with and without immediate data),
// rounds times, after setup has seen both NICs (the requester a, the
// responder b: it installs the capture taps, which are removed at the
// end). The fabric is seeded, so a run repeats exactly. Under irn, melo
// and fasr that is every out-of-order opcode and the scheme's
// acknowledgements. It is what the capture and dissector tests capture.
func LossyTraffic(scheme string, seed uint64, loss float64, rounds int, setup func(a, b *dataplane.Engine)) error {
	link := fabric.LossyHop(loss)
	return traffic(sim.Config{Seed: seed, AtoB: link, BtoA: link, SchemeA: scheme, SchemeB: scheme}, rounds, setup)
}

// MarkedTraffic is LossyTraffic without loss, both NICs running the
// congestion control alg (dataplane.Config.CC), and every markEvery-th
// frame from a to b marked ECN CE on the way, as a congested switch does
// (netsw.MarkCE): b answers with CNPs, which a takes. It is what the
// dissector test captures CNPs from.
func MarkedTraffic(scheme, alg string, seed uint64, markEvery, rounds int, setup func(a, b *dataplane.Engine)) error {
	n := 0
	mark := func(frame []byte) bool {
		if n++; n%markEvery == 0 {
			netsw.MarkCE(frame)
		}
		return false
	}
	return traffic(sim.Config{Seed: seed, AtoB: fabric.LinkConfig{Drop: mark}, SchemeA: scheme, SchemeB: scheme, CC: alg}, rounds, setup)
}

// traffic runs the rounds on a simulator of cfg.
func traffic(cfg sim.Config, rounds int, setup func(a, b *dataplane.Engine)) error {
	s, err := sim.New(cfg)
	if err != nil {
		return err
	}
	setup(s.A, s.B)
	defer s.A.SetCapture(nil)
	defer s.B.SetCapture(nil)
	const mrSize = 1 << 20
	all := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead
	pdA, pdB := s.A.AllocPD(), s.B.AllocPD()
	mrA, err := s.A.RegMR(pdA, make([]byte, mrSize), 0, all)
	if err != nil {
		return err
	}
	mrB, err := s.B.RegMR(pdB, make([]byte, mrSize), 0, all)
	if err != nil {
		return err
	}
	cqA, _ := s.A.CreateCQ(1024, nil)
	cqB, _ := s.B.CreateCQ(1024, nil)
	qa, err := s.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 64, MaxRecvWR: 64})
	if err != nil {
		return err
	}
	qb, err := s.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 64, MaxRecvWR: 64})
	if err != nil {
		return err
	}
	if err := dataplane.Connect(s.A, qa, s.B, qb, dataplane.ConnParams{MTU: qp.MTU1024}); err != nil {
		return err
	}
	ops := []qp.WROpcode{qp.WRSend, qp.WRSendWithImm, qp.WRRDMAWrite, qp.WRRDMAWriteWithImm}
	sizes := []int{1000, 3000 - 3} // one packet; three, the last padded
	wcs := make([]qp.WC, 64)
	for r := 0; r < rounds; r++ {
		var wrs []qp.SendWR
		var recvs []qp.RecvWR
		for _, op := range ops {
			for _, n := range sizes {
				id := uint64(len(wrs) + 1)
				wr := qp.SendWR{WRID: id, Opcode: op, Flags: qp.SendSignaled, NumSGE: 1, ImmData: 0x1234}
				wr.SGL[0] = qp.SGE{Addr: mrA.Addr + uint64(id)*4096, Length: uint32(n), LKey: mrA.LKey}
				wr.RemoteAddr, wr.RKey = mrB.Addr+uint64(id)*4096, mrB.RKey
				wrs = append(wrs, wr)
				if op != qp.WRRDMAWrite {
					rw := qp.RecvWR{WRID: id, NumSGE: 1}
					rw.SGL[0] = qp.SGE{Addr: mrB.Addr + uint64(id)*4096, Length: 4096, LKey: mrB.LKey}
					recvs = append(recvs, rw)
				}
			}
		}
		if _, err := s.B.PostRecv(qb, recvs); err != nil {
			return err
		}
		if _, err := s.A.PostSend(qa, wrs); err != nil {
			return err
		}
		sent, recvd := 0, 0
		done := func() bool {
			n, _ := s.A.PollCQ(cqA, wcs)
			for _, wc := range wcs[:n] {
				if wc.Status != qp.WCSuccess {
					return true
				}
			}
			sent += n
			m, _ := s.B.PollCQ(cqB, wcs)
			recvd += m
			return sent == len(wrs) && recvd == len(recvs)
		}
		if !s.RunUntil(done, 10*time.Second) || sent != len(wrs) {
			return fmt.Errorf("capture: %s round %d: %d of %d sends and %d of %d receives completed", cfg.SchemeA, r, sent, len(wrs), recvd, len(recvs))
		}
	}
	return nil
}
