package dataplane

import (
	"fmt"

	"github.com/softnic/softnic/qp"
)

// ConnParams are what a connection exchange agrees on (perftest's
// defaults where it has them). Connect and package verbs/cm's ConnectQP
// both fill zero fields with WithDefaults.
type ConnParams struct {
	MTU             qp.MTU // default 1024
	PSNA, PSNB      qp.PSN // initial send PSNs of A and B
	Timeout         uint8  // default 14 (67 ms, perftest)
	RetryCnt        uint8  // default 7
	RNRRetry        uint8  // default 7
	MinRNRTimer     uint8  // default 12 (0.64 ms)
	MaxRdAtomic     uint8  // default MaxRdAtomic (16); larger values are clamped to it
	Access          qp.Access
	RetryCntSet     bool // use RetryCnt even when 0
	RNRRetrySet     bool // use RNRRetry even when 0
	TimeoutDisabled bool // Timeout 0: no local ACK timeout
}

// WithDefaults returns p with its zero fields set as perftest's
// ctx_connect sets them: path MTU 1024, local ACK timeout 14 (4.096 µs *
// 2^14 = 67 ms) unless TimeoutDisabled, retry count 7 and RNR retry 7
// (infinite) unless RetryCntSet or RNRRetrySet, minimum RNR NAK timer 12
// (0.64 ms), MaxRdAtomic outstanding RDMA READs and atomics each way, and
// every access right. A MaxRdAtomic above the device's (MaxRdAtomic) is
// clamped to it; other out-of-range values are left for ModifyQP to
// refuse.
func (p ConnParams) WithDefaults() ConnParams {
	if p.MTU == 0 {
		p.MTU = qp.MTU1024
	}
	if p.Timeout == 0 && !p.TimeoutDisabled {
		p.Timeout = 14
	}
	if p.RetryCnt == 0 && !p.RetryCntSet {
		p.RetryCnt = 7
	}
	if p.RNRRetry == 0 && !p.RNRRetrySet {
		p.RNRRetry = 7
	}
	if p.MinRNRTimer == 0 {
		p.MinRNRTimer = 12
	}
	if p.MaxRdAtomic == 0 || p.MaxRdAtomic > MaxRdAtomic {
		p.MaxRdAtomic = MaxRdAtomic
	}
	if p.Access == 0 {
		p.Access = qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic
	}
	return p
}

// Connect moves qa (on engine ea) and qb (on eb) from RESET to RTS
// pointing at each other: what the connection exchange of perftest does.
func Connect(ea *Engine, qa *QP, eb *Engine, qb *QP, p ConnParams) error {
	p = p.WithDefaults()
	if (qa.star == StarServer) != (qb.star == StarClient) || (qb.star == StarServer) != (qa.star == StarClient) {
		return fmt.Errorf("connect: %w (roles %v and %v)", ErrStarPeer, qa.star, qb.star)
	}
	for _, side := range []struct {
		e, peer *Engine
		q, pq   *QP
		sq, rq  qp.PSN
	}{{ea, eb, qa, qb, p.PSNA, p.PSNB}, {eb, ea, qb, qa, p.PSNB, p.PSNA}} {
		steps := []struct {
			a    QPAttr
			mask qp.AttrMask
		}{
			{QPAttr{State: qp.Init, AccessFlags: p.Access, Port: 1}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
			{QPAttr{State: qp.RTR, AV: AddressVector{DGID: side.peer.Addr(), DMAC: side.peer.MAC(), HopLimit: 64},
				PathMTU: p.MTU, DestQPN: side.pq.QPN(), RQPSN: side.rq, MaxDestRdAtomic: p.MaxRdAtomic, MinRNRTimer: p.MinRNRTimer},
				qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		}
		for _, st := range steps {
			if err := side.e.ModifyQP(side.q, &st.a, st.mask); err != nil {
				return fmt.Errorf("connect: %w", err)
			}
		}
	}
	for _, side := range []struct {
		e  *Engine
		q  *QP
		sq qp.PSN
	}{{ea, qa, p.PSNA}, {eb, qb, p.PSNB}} {
		a := QPAttr{State: qp.RTS, SQPSN: side.sq, Timeout: p.Timeout, RetryCnt: p.RetryCnt, RNRRetry: p.RNRRetry, MaxRdAtomic: p.MaxRdAtomic}
		if err := side.e.ModifyQP(side.q, &a, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	return nil
}
