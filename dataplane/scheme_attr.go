package dataplane

import (
	"errors"
	"fmt"
	"slices"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is the per-QP loss-recovery scheme as a QP attribute: a
// softnic extension with no ibverbs counterpart (like a vendor's
// ibv_create_qp_ex attribute). A QP gets its scheme at creation
// (QPInitAttr.Scheme) and may change it while it has not left INIT, so
// that a connection exchange can agree on the scheme after the QPs exist
// (their numbers are what the exchange carries) and before they are
// connected.

var (
	// ErrUnknownScheme is a scheme name no registered scheme has.
	ErrUnknownScheme = errors.New("dataplane: unknown loss-recovery scheme")
	// ErrSchemeState is a scheme change of a QP that has left INIT: from
	// RTR on its sender and receiver hold connection state.
	ErrSchemeState = errors.New("dataplane: the loss-recovery scheme can only change in RESET or INIT")
)

// CheckScheme reports whether name selects a scheme: "" (the engine's
// default) or a registered name. The error names the scheme and the
// available ones.
func CheckScheme(name string) error {
	if name == "" {
		return nil
	}
	names := recovery.Names()
	if !slices.Contains(names, name) {
		return fmt.Errorf("%w %q (have %v)", ErrUnknownScheme, name, names)
	}
	return nil
}

// LookupQP returns the QP numbered qpn, or nil.
func (e *Engine) LookupQP(qpn uint32) *QP {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.qps[qpn&qp.PSNMask]
}

// QPScheme is the name of q's loss recovery, read under the engine's
// lock (QP.Scheme reads it without, which is safe only while nobody calls
// SetQPScheme concurrently).
func (e *Engine) QPScheme(q *QP) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return q.scheme.Name()
}

// QPCC is the name of q's congestion control ("none" for a StaR server
// QP's driver, which runs none).
func (e *Engine) QPCC(q *QP) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return q.tr.congestionControl()
}

// SetQPScheme gives q the named loss recovery ("" is the engine's
// default), as if it had been created with it (applyScheme, as CreateQP
// does): a fresh sender and receiver of the scheme, the responder queue,
// out-of-order stash and reorder buffer its reorder window needs, and the
// QP's on-chip context resized to the base context plus the scheme's
// per-QP bytes (the scheme's shared pools are charged once per engine, on
// first use). It is valid only while q is in RESET or INIT, where the
// scheme's halves hold no connection state yet (receiver.Reset runs on
// INIT -> RTR, sender.Reset on RTR -> RTS) and the responder has
// produced nothing.
func (e *Engine) SetQPScheme(q *QP, name string) error {
	if err := CheckScheme(name); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qps[q.qpn] != q {
		return ErrBadQP
	}
	if q.state != qp.Reset && q.state != qp.Init {
		return errorf(q, "%w: it is in %v", ErrSchemeState, q.state)
	}
	scheme, err := e.schemeFor(name)
	if err != nil {
		return errorf(q, "%w", err)
	}
	if scheme == q.scheme {
		return nil
	}
	if q.srq != nil && scheme.ReorderWindow() > 0 {
		return errorf(q, "%w", ErrSRQTransport)
	}
	// What CreateQP derives from the scheme, in the same way: the old
	// halves give back their pools and reorder-buffer slots.
	if err := q.tr.setScheme(scheme); err != nil {
		return errorf(q, "%w", err)
	}
	return nil
}
