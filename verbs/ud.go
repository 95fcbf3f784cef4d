package verbs

import (
	"fmt"
	"maps"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// This file is Unreliable Datagram in the verbs API (ibv_create_qp with
// IBV_QPT_UD, ibv_create_ah, ibv_destroy_ah, wr.ud of ibv_send_wr): a UD
// QP is made with QPInitAttr.Type QPTUD, moved RESET -> INIT (P_Key
// index, port, Q_Key) -> RTR -> RTS (SQ PSN), and sends each message as
// one datagram through an address handle to a QP number and Q_Key named
// in the work request. docs/ud.md has the semantics.

// QPType is enum ibv_qp_type.
type QPType = qp.QPType

// QP types (IBV_QPT_*).
const (
	QPTRC = qp.QPTypeRC
	QPTUD = qp.QPTypeUD
)

// AttrQKey is IBV_QP_QKEY: a UD QP's Q_Key (QPAttr.QKey).
const AttrQKey = qp.AttrQKey

// WCGRH is IBV_WC_GRH: the receive buffer's first GRHLen bytes hold the
// GRH (every UD receive completion has it).
const WCGRH = qp.WCGRH

// GRHLen is the GRH area at the start of every UD receive buffer: a
// datagram of n bytes needs a receive WQE of n+GRHLen bytes, and
// completes with byte_len n+GRHLen. On RoCEv2 it holds the IP header
// (IPv6: all 40 bytes; IPv4: the last 20).
const GRHLen = qp.GRHLen

// QKeyUseQP set in SendWR.RemoteQKey sends with the QP's own Q_Key
// (IBA: a Q_Key with the high-order bit set).
const QKeyUseQP = qp.QKeyUseQP

// AH is an address handle (struct ibv_ah): where a UD send goes.
type AH struct {
	pd   *PD
	attr AHAttr
	num  uint32        // the engine's number, what SendWR.AH carries
	ah   *dataplane.AH // embedded
	h    uint32        // daemon handle
	dead bool
}

// Handle is what a send work request names the AH by (SendWR.AH).
func (a *AH) Handle() uint32 { return a.num }

// Attr is the AH's address vector, its destination MAC resolved.
func (a *AH) Attr() AHAttr { return a.attr }

// CreateAH is ibv_create_ah: attr.DGID is the destination's GID (its IP
// address), attr.SGIDIndex the source GID's index (0, the port's one
// GID). A zero attr.DMAC is resolved from the NIC's neighbours: on an
// embedded context the fabric's hosts, on a daemon context the daemon
// engine's table (empty on a real host: a program there resolves the
// MAC from the kernel's neighbours first, as the drop-in libibverbs does
// with cm.ResolveMAC). An address no neighbour names fails with an error
// that errors.Is dataplane.ErrNoNeighbor, as the kernel's
// ibv_create_ah fails for a destination it cannot resolve.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	if pd.dead {
		return nil, ErrClosed
	}
	a := &AH{pd: pd, attr: attr}
	if err := pd.ctx.b.createAH(a); err != nil {
		return nil, err
	}
	return a, nil
}

// Destroy is ibv_destroy_ah. Sends already posted through the AH
// complete with an error (LOC_QP_OP_ERR) when their turn comes.
func (a *AH) Destroy() error {
	if a.dead {
		return ErrClosed
	}
	if err := a.pd.ctx.b.destroyAH(a); err != nil {
		return err
	}
	a.dead = true
	return nil
}

// resolveAH fills a zero DMAC of attr from e's neighbours.
func resolveAH(e *dataplane.Engine, attr *AHAttr) error {
	if attr.DMAC != ([6]byte{}) {
		return nil
	}
	mac, ok := e.Neighbor(attr.DGID)
	if !ok {
		return fmt.Errorf("%w: %v", dataplane.ErrNoNeighbor, attr.DGID)
	}
	attr.DMAC = mac
	return nil
}

func (b *embedded) createAH(a *AH) error {
	if err := resolveAH(b.e, &a.attr); err != nil {
		return err
	}
	ah, err := b.e.CreateAH(a.pd.h, a.attr)
	if err != nil {
		return err
	}
	a.ah, a.num, a.attr = ah, ah.Handle(), ah.Attr()
	return nil
}

func (b *embedded) destroyAH(a *AH) error { return b.e.DestroyAH(a.ah) }

func (r *remote) createAH(a *AH) error {
	var res proto.CreateAHResult
	if _, err := r.call(proto.OpCreateAH, proto.CreateAHArgs{PD: a.pd.h, DGID: a.attr.DGID, DMAC: a.attr.DMAC,
		TrafficClass: a.attr.TrafficClass, HopLimit: a.attr.HopLimit, FlowLabel: a.attr.FlowLabel, SGIDIndex: a.attr.SGIDIndex}, nil, &res); err != nil {
		return err
	}
	a.h, a.num, a.attr.DMAC, a.attr.DGID = res.Handle, res.AH, res.DMAC, a.attr.DGID.Unmap()
	r.editAHs(func(m map[uint32]uint32) { m[a.num] = a.pd.h })
	return nil
}

func (r *remote) destroyAH(a *AH) error {
	if _, err := r.call(proto.OpDestroyAH, proto.Handle{Handle: a.h}, nil, nil); err != nil {
		return err
	}
	r.editAHs(func(m map[uint32]uint32) { delete(m, a.num) })
	return nil
}

// editAHs replaces the table of live AHs by an edited copy; r.mu
// serialises the edits.
func (r *remote) editAHs(edit func(map[uint32]uint32)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[uint32]uint32{}
	if old := r.ahs.Load(); old != nil {
		m = maps.Clone(*old)
	}
	edit(m)
	r.ahs.Store(&m)
}

// udCheck is the engine's check of a UD send work request (PostSend of a
// UD QP), made before it enters the shared ring: a QP in ERR takes
// anything (and flushes it); otherwise SEND or SEND with immediate of at
// most the port's MTU, through a live AH of the QP's PD.
func (q *qpRing) udCheck(wr *SendWR) error {
	if qp.State(q.state.Load()) == qp.Err {
		return nil
	}
	if err := dataplane.CheckUDSendWR(wr, q.udMTU); err != nil {
		return err
	}
	var pd uint32
	ok := false
	if m := q.r.ahs.Load(); m != nil {
		pd, ok = (*m)[wr.AH]
	}
	if !ok || pd != q.pd {
		return fmt.Errorf("%w: %#x in the QP's protection domain", dataplane.ErrBadAH, wr.AH)
	}
	return nil
}
