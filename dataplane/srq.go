package dataplane

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/qp"
)

// Shared receive queues (ibv_create_srq, IBA §10.2.9.1 and §10.8.2.2): one
// queue of receive WQEs that any number of RC QPs of its protection domain
// take from, in the order posted. An RC QP created with an SRQ has no
// receive queue of its own to post to (PostRecv is refused): when a SEND
// (or a WRITE with immediate's last packet) needs a receive WQE and the QP
// holds none, the responder takes the SRQ's head WQE into the QP (into
// its own receive ring, which then holds the WQE of the message in
// progress), and from there the WQE completes, fails or is flushed
// exactly as a QP's own. An empty SRQ is answered with an RNR NAK, as an
// empty receive queue is.
//
// The SRQ limit (srq_limit, armed by CreateSRQ or ModifySRQ with
// SRQAttrLimit): when a WQE is taken and fewer than limit remain,
// SRQ_LIMIT_REACHED is raised once and the limit is disarmed (0), as IBA
// §11.6.3.3 and rxe's get_srq_wqe have it; the consumer arms it again.
//
// Only QPs whose transport is RC in order take from an SRQ: a scheme that
// places out of order finds a message's receive WQE by its sequence
// number in the QP's own queue (IRN §5.3.2), which a shared queue has no
// place for, and StaR's roles keep the receive queue's shadow at the
// peer.

// SRQ is a shared receive queue.
type SRQ struct {
	pd     uint32
	rq     *qp.Ring[recvWQE]
	maxWR  int // what the consumer asked for (CreateSRQ, a resize)
	maxSGE int
	limit  int // armed when > 0
	users  int // QPs attached (engine lock)
	dead   bool
}

// SRQAttr is struct ibv_srq_attr.
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	Limit  int
}

// SRQAttrMask is enum ibv_srq_attr_mask.
type SRQAttrMask int

const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // IBV_SRQ_MAX_WR: resize
	SRQAttrLimit SRQAttrMask = 1 << 1 // IBV_SRQ_LIMIT: arm
)

var (
	ErrSRQDestroyed = errors.New("dataplane: shared receive queue destroyed")
	ErrSRQAttr      = errors.New("dataplane: bad shared receive queue attribute")
	// ErrHasSRQ is PostRecv on a QP that takes its receive WQEs from an
	// SRQ: they are posted to the SRQ (IBA §10.8.2.2).
	ErrHasSRQ = errors.New("dataplane: QP takes its receive WQEs from a shared receive queue: post them to the SRQ")
	// ErrSRQTransport is an SRQ given to a QP that cannot take from one.
	ErrSRQTransport = errors.New("dataplane: a shared receive queue needs an RC QP placing in order (no StaR role, a scheme without a reorder window)")
)

// SRQBytes is the memory CreateSRQ allocates for an SRQ of maxWR WQEs.
func SRQBytes(maxWR int) int64 { return qp.RingBytes[recvWQE](maxWR) }

// CreateSRQ makes a shared receive queue of at least attr.MaxWR WQEs of
// at most attr.MaxSGE SGEs each in protection domain pd; attr.Limit, if
// not 0, arms it (as rxe does at create). It returns the SRQ and its
// actual attributes (MaxWR rounded up to the ring's capacity).
func (e *Engine) CreateSRQ(pd uint32, attr SRQAttr) (*SRQ, SRQAttr, error) {
	if attr.MaxWR < 1 || attr.MaxWR > MaxWR {
		return nil, SRQAttr{}, fmt.Errorf("%w: max_wr %d (1 to %d)", ErrSRQAttr, attr.MaxWR, MaxWR)
	}
	if attr.MaxSGE < 0 || attr.MaxSGE > qp.MaxSGE {
		return nil, SRQAttr{}, fmt.Errorf("%w: max_sge %d (0 to %d)", ErrSRQAttr, attr.MaxSGE, qp.MaxSGE)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.pds[pd]; !ok {
		return nil, SRQAttr{}, ErrBadPD
	}
	s := &SRQ{pd: pd, rq: qp.NewRing[recvWQE](attr.MaxWR), maxWR: attr.MaxWR, maxSGE: max(attr.MaxSGE, 1)}
	if attr.Limit < 0 || attr.Limit > s.rq.Cap() {
		s.rq.Release()
		return nil, SRQAttr{}, fmt.Errorf("%w: srq_limit %d (0 to max_wr %d)", ErrSRQAttr, attr.Limit, s.rq.Cap())
	}
	s.limit = attr.Limit
	e.pds[pd]++
	return s, s.attr(), nil
}

func (s *SRQ) attr() SRQAttr { return SRQAttr{MaxWR: s.rq.Cap(), MaxSGE: s.maxSGE, Limit: s.limit} }

// ModifySRQ is ibv_modify_srq: SRQAttrMaxWR resizes the queue (to at
// least attr.MaxWR, never below the WQEs it holds), SRQAttrLimit arms it
// with attr.Limit (0 disarms).
func (e *Engine) ModifySRQ(s *SRQ, attr SRQAttr, mask SRQAttrMask) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.dead {
		return ErrSRQDestroyed
	}
	if mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return fmt.Errorf("%w: attribute mask %#x", ErrSRQAttr, int(mask))
	}
	size := s.rq.Cap()
	if mask&SRQAttrMaxWR != 0 {
		if attr.MaxWR < 1 || attr.MaxWR > MaxWR || attr.MaxWR < s.rq.Len() {
			return fmt.Errorf("%w: max_wr %d (%d to %d: the SRQ holds %d WQEs)", ErrSRQAttr, attr.MaxWR, max(1, s.rq.Len()), MaxWR, s.rq.Len())
		}
		size = qpRingCap(attr.MaxWR)
	}
	if mask&SRQAttrLimit != 0 && (attr.Limit < 0 || attr.Limit > size) {
		return fmt.Errorf("%w: srq_limit %d (0 to max_wr %d)", ErrSRQAttr, attr.Limit, size)
	}
	if mask&SRQAttrMaxWR != 0 && size != s.rq.Cap() {
		r := qp.NewRing[recvWQE](attr.MaxWR)
		for w := s.rq.Front(); w != nil; w = s.rq.Front() {
			*r.Push() = *w
			s.rq.Pop()
		}
		s.rq.Release()
		s.rq = r
		s.maxWR = attr.MaxWR
	}
	if mask&SRQAttrLimit != 0 {
		s.limit = attr.Limit
	}
	return nil
}

// qpRingCap is the capacity qp.NewRing gives n entries.
func qpRingCap(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}

// QuerySRQ is ibv_query_srq: the capacity, SGEs per WQE and the limit
// (0 when disarmed).
func (e *Engine) QuerySRQ(s *SRQ) (SRQAttr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.dead {
		return SRQAttr{}, ErrSRQDestroyed
	}
	return s.attr(), nil
}

// SRQDepth is how many receive WQEs s holds.
func (e *Engine) SRQDepth(s *SRQ) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.dead {
		return 0
	}
	return s.rq.Len()
}

// DestroySRQ is ibv_destroy_srq: refused (ErrBusy) while a QP is attached
// to it. Its WQEs are dropped without completions.
func (e *Engine) DestroySRQ(s *SRQ) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.dead {
		return ErrSRQDestroyed
	}
	if s.users > 0 {
		return fmt.Errorf("%w: shared receive queue is used by %d QPs", ErrBusy, s.users)
	}
	s.dead = true
	s.rq.Release()
	e.pds[s.pd]--
	return nil
}

// PostSRQRecv is ibv_post_srq_recv: it queues receive work requests on
// s, checked as PostRecv checks them (SGE count within the SRQ's
// max_sge, every SGE in a locally writable region of the SRQ's PD). It
// returns how many were queued.
func (e *Engine) PostSRQRecv(s *SRQ, wrs []qp.RecvWR) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.dead {
		return 0, ErrSRQDestroyed
	}
	for i := range wrs {
		wr := &wrs[i]
		if wr.NumSGE < 0 || wr.NumSGE > s.maxSGE {
			return i, fmt.Errorf("dataplane: SRQ: WR %d: %w: %d SGEs (max_sge %d)", i, ErrBadWR, wr.NumSGE, s.maxSGE)
		}
		total, ok := e.mem.checkSGL(s.pd, wr.SGEs(), true)
		if !ok {
			return i, fmt.Errorf("dataplane: SRQ: WR %d: %w: SGE not in a locally writable region", i, ErrBadWR)
		}
		w := s.rq.Push()
		if w == nil {
			return i, fmt.Errorf("dataplane: SRQ: %w: %d receive WRs outstanding", ErrQueueFull, s.rq.Cap())
		}
		*w = recvWQE{wr: *wr, length: total}
	}
	e.ring()
	return len(wrs), nil
}

// takeSRQ moves the SRQ's head WQE into q's own receive ring, where the
// responder uses it as a WQE of q's (admit); false when the SRQ is empty
// (the request is answered with an RNR NAK). Taking it may raise
// SRQ_LIMIT_REACHED.
func (e *Engine) takeSRQ(q *QP) bool {
	s := q.srq
	w := s.rq.Front()
	if w == nil {
		return false
	}
	slot := q.rq.Push()
	if slot == nil {
		return false // cannot happen: q holds at most the one WQE of its message in progress
	}
	*slot = *w
	s.rq.Pop()
	if s.limit > 0 && s.rq.Len() < s.limit {
		s.limit = 0
		e.raise(Event{Type: EventSRQLimitReached, SRQ: s})
	}
	return true
}

// attachSRQ checks that q may take from s at create (engine lock held).
func attachSRQ(q *QP, s *SRQ, scheme interface{ ReorderWindow() int }) error {
	if s.dead {
		return ErrSRQDestroyed
	}
	if s.pd != q.pd {
		return fmt.Errorf("%w: the SRQ is in protection domain %d, the QP in %d", ErrSRQAttr, s.pd, q.pd)
	}
	if q.star != StarNone || scheme.ReorderWindow() > 0 {
		return ErrSRQTransport
	}
	return nil
}
