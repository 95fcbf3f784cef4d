package dataplane

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/qp"
)

// This file is the verbs of protection domains, memory regions and
// completion queues (ibv_alloc_pd, ibv_reg_mr, ibv_create_cq, ibv_poll_cq
// ...; the QP verbs are in qpverbs.go, posting in requester.go and
// responder.go), and what the verbs layer needs of the engine beyond the
// ibverbs-shaped calls: the daemon's verbs server (verbs/verbsd) moves
// work requests from shared-memory rings into the engine and must know
// when the engine retires them, and the client library checks work
// requests before they enter a ring, exactly as PostSend would.

// CheckSendWR is the check PostSend applies to each send work request
// (SGE count, message length, opcode, atomic operand), so that a verbs
// client posting through a shared ring refuses the same requests with
// the same errors.
func CheckSendWR(wr *qp.SendWR) error { return checkSendWR(wr) }

// QueueDepths reports how many send and receive work requests q holds:
// posted and not yet retired by a completion (or by a flush). The verbs
// server releases shared ring slots by it, so that a client's ring bounds
// outstanding work exactly as the engine's own queues do.
func (e *Engine) QueueDepths(q *QP) (send, recv int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return q.tr.depths()
}

// Resources counts the engine's live protection domains, memory regions
// and queue pairs: what a test checks to prove that a client's objects
// were torn down.
type Resources struct {
	PDs, MRs, QPs int
}

// Resources returns the live object counts.
func (e *Engine) Resources() Resources {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Resources{PDs: len(e.pds), QPs: len(e.qps)}
	for _, m := range e.mem.mrs {
		if m != nil {
			r.MRs++
		}
	}
	return r
}

// QueueBytes is the memory CreateQP allocates for the send and receive
// queues of a QP of these depths, and CQBytes what CreateCQ allocates for
// a CQ's completion ring: the verbs server counts them against a client's
// ring limit. Queues of qp.OffHeapBytes or more are mappings of their
// own, released by DestroyQP and DestroyCQ.
func QueueBytes(maxSendWR, maxRecvWR int) int64 {
	return qp.RingBytes[sendWQE](maxSendWR) + qp.RingBytes[recvWQE](maxRecvWR)
}

// CQBytes: see QueueBytes.
func CQBytes(depth int) int64 { return qp.RingBytes[qp.WC](depth) }

// AllocPD returns a new protection domain handle.
func (e *Engine) AllocPD() uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextPD++
	e.pds[e.nextPD] = 0
	return e.nextPD
}

// DeallocPD frees a protection domain that has no MRs or QPs left.
func (e *Engine) DeallocPD(pd uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	users, ok := e.pds[pd]
	if !ok {
		return ErrBadPD
	}
	if users > 0 {
		return fmt.Errorf("%w: protection domain %d has %d MRs or QPs", ErrBusy, pd, users)
	}
	delete(e.pds, pd)
	return nil
}

// RegMR registers buf. addr is the virtual address peers use for its first
// byte; 0 means the address of buf itself.
func (e *Engine) RegMR(pd uint32, buf []byte, addr uint64, access qp.Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, ErrEmptyMR
	}
	if err := CheckAccess(access); err != nil {
		return nil, err
	}
	if addr == 0 {
		addr = addrOf(buf)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.pds[pd]; !ok {
		return nil, ErrBadPD
	}
	idx := -1
	for i := 1; i < len(e.mem.mrs); i++ { // index 0 stays unused so that key 0 is never valid
		if e.mem.mrs[i] == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(e.mem.mrs) == 0 {
			e.mem.mrs = append(e.mem.mrs, nil)
		}
		idx = len(e.mem.mrs)
		e.mem.mrs = append(e.mem.mrs, nil)
	}
	e.mem.keyTag++
	key := uint32(idx)<<8 | uint32(e.mem.keyTag)
	m := &MR{PD: pd, Addr: addr, LKey: key, RKey: key, Access: access, buf: buf}
	e.mem.mrs[idx] = m
	e.pds[pd]++
	e.memoryChanged(m, true)
	return m, nil
}

// DeregMR invalidates m's keys; later accesses with them fail.
func (e *Engine) DeregMR(m *MR) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mem.lookup(m.LKey) != m {
		return ErrBadMR
	}
	e.mem.mrs[keyIndex(m.LKey)] = nil
	e.pds[m.PD]--
	e.memoryChanged(m, false)
	return nil
}

// CreateCQ returns a completion queue holding at least depth entries.
// notify, if not nil, is called with each completion added (with the
// engine lock held: it must not call back into the engine, nor keep wc);
// a completion channel (package verbs) hangs its event on it.
func (e *Engine) CreateCQ(depth int, notify func(wc *qp.WC)) (*CQ, error) {
	if depth < 1 || depth > 1<<22 {
		return nil, errors.New("dataplane: CQ depth must be 1 to 4194304")
	}
	return &CQ{ring: qp.NewRing[qp.WC](depth), notify: notify}, nil
}

// DestroyCQ releases cq's ring (ibv_destroy_cq): a deep one, which lives
// in a mapping of its own (qp.OffHeapBytes), is returned to the system at
// once. A CQ that a QP still uses (as its send or receive CQ) is busy.
func (e *Engine) DestroyCQ(cq *CQ) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cq.dead {
		return ErrCQDestroyed
	}
	if cq.users > 0 {
		return fmt.Errorf("%w: completion queue is used by %d QP queues", ErrBusy, cq.users)
	}
	cq.dead = true
	cq.ring.Release()
	return nil
}

// PollCQ moves up to len(wcs) completions into wcs, oldest first.
func (e *Engine) PollCQ(cq *CQ, wcs []qp.WC) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cq.dead {
		return 0, ErrCQDestroyed
	}
	n := 0
	for n < len(wcs) {
		wc := cq.ring.Front()
		if wc == nil {
			break
		}
		wcs[n] = *wc
		cq.ring.Pop()
		n++
	}
	if n == 0 && cq.overflow {
		return 0, ErrCQOverflow
	}
	return n, nil
}

// memoryChanged tells the transports of m's protection domain that m was
// registered or deregistered (a StaR server's driver tells its client).
func (e *Engine) memoryChanged(m *MR, registered bool) {
	for _, q := range e.qps {
		if q.pd == m.PD {
			q.tr.memoryChanged(m, registered)
		}
	}
}
