// Package verbs is softnic's verbs API, named and shaped after libibverbs
// so that an RDMA programmer reads it without a manual: a Context (an
// opened device) gives protection domains, memory regions, completion
// queues and reliable-connected queue pairs; work requests are posted to
// QPs and work completions polled from CQs, with ibverbs' opcodes,
// statuses and attribute masks.
//
// This file is the embedded mode: the NIC runs inside the calling process
// on the in-memory fabric (package dataplane's Sim), which is what unit
// tests, the demo and hosts without XDP use. The daemon-backed mode (the
// same API over shared memory) builds on the same types.
package verbs

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
)

// The ibverbs types, shared with the dataplane.
type (
	WC        = qp.WC
	SendWR    = qp.SendWR
	RecvWR    = qp.RecvWR
	SGE       = qp.SGE
	Access    = qp.Access
	AttrMask  = qp.AttrMask
	QPState   = qp.State
	PSN       = qp.PSN
	MTU       = qp.MTU
	WCStatus  = qp.WCStatus
	WROpcode  = qp.WROpcode
	QPAttr    = dataplane.QPAttr
	AHAttr    = dataplane.AddressVector
	ConnParam = dataplane.ConnParams
)

// Access flags (IBV_ACCESS_*).
const (
	AccessLocalWrite   = qp.AccessLocalWrite
	AccessRemoteWrite  = qp.AccessRemoteWrite
	AccessRemoteRead   = qp.AccessRemoteRead
	AccessRemoteAtomic = qp.AccessRemoteAtomic
)

// Send opcodes (IBV_WR_*) and flags (IBV_SEND_*).
const (
	WRRDMAWrite         = qp.WRRDMAWrite
	WRRDMAWriteWithImm  = qp.WRRDMAWriteWithImm
	WRSend              = qp.WRSend
	WRSendWithImm       = qp.WRSendWithImm
	WRRDMARead          = qp.WRRDMARead
	WRAtomicCmpAndSwp   = qp.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = qp.WRAtomicFetchAndAdd
	SendSignaled        = qp.SendSignaled
	SendFence           = qp.SendFence
	SendSolicited       = qp.SendSolicited
)

// Completion statuses (IBV_WC_*).
const (
	WCSuccess        = qp.WCSuccess
	WCLocLenErr      = qp.WCLocLenErr
	WCLocProtErr     = qp.WCLocProtErr
	WCWRFlushErr     = qp.WCWRFlushErr
	WCRemInvReqErr   = qp.WCRemInvReqErr
	WCRemAccessErr   = qp.WCRemAccessErr
	WCRemOpErr       = qp.WCRemOpErr
	WCRetryExcErr    = qp.WCRetryExcErr
	WCRNRRetryExcErr = qp.WCRNRRetryExcErr
)

// QP states (IBV_QPS_*).
const (
	QPSReset = qp.Reset
	QPSInit  = qp.Init
	QPSRTR   = qp.RTR
	QPSRTS   = qp.RTS
	QPSSQD   = qp.SQD
	QPSSQE   = qp.SQE
	QPSErr   = qp.Err
)

// Context is an opened softnic device (struct ibv_context).
type Context struct {
	name string
	e    *dataplane.Engine
}

// Name is the device name.
func (c *Context) Name() string { return c.name }

// Engine exposes the NIC behind the context (counters, scheme).
func (c *Context) Engine() *dataplane.Engine { return c.e }

// ErrClosed is returned for objects already destroyed.
var ErrClosed = errors.New("verbs: object already destroyed")

// PD is a protection domain (struct ibv_pd).
type PD struct {
	ctx  *Context
	h    uint32
	dead bool
}

// AllocPD is ibv_alloc_pd.
func (c *Context) AllocPD() (*PD, error) { return &PD{ctx: c, h: c.e.AllocPD()}, nil }

// Dealloc is ibv_dealloc_pd.
func (pd *PD) Dealloc() error {
	if pd.dead {
		return ErrClosed
	}
	if err := pd.ctx.e.DeallocPD(pd.h); err != nil {
		return err
	}
	pd.dead = true
	return nil
}

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	Addr   uint64
	LKey   uint32
	RKey   uint32
	Length int
	pd     *PD
	mr     *dataplane.MR
	buf    []byte
}

// Buf is the registered memory.
func (m *MR) Buf() []byte { return m.buf }

// SGE names length bytes at offset off of the region.
func (m *MR) SGE(off, length int) SGE {
	return SGE{Addr: m.Addr + uint64(off), Length: uint32(length), LKey: m.LKey}
}

// RegMR is ibv_reg_mr: buf becomes reachable by the NIC with access.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if pd.dead {
		return nil, ErrClosed
	}
	m, err := pd.ctx.e.RegMR(pd.h, buf, 0, access)
	if err != nil {
		return nil, err
	}
	return &MR{Addr: m.Addr, LKey: m.LKey, RKey: m.RKey, Length: len(buf), pd: pd, mr: m, buf: buf}, nil
}

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error { return m.pd.ctx.e.DeregMR(m.mr) }

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	ctx *Context
	cq  *dataplane.CQ
}

// CreateCQ is ibv_create_cq with cqe entries.
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	cq, err := c.e.CreateCQ(cqe, nil)
	if err != nil {
		return nil, err
	}
	return &CQ{ctx: c, cq: cq}, nil
}

// Poll is ibv_poll_cq: it fills wcs with up to len(wcs) completions.
func (cq *CQ) Poll(wcs []WC) (int, error) { return cq.ctx.e.PollCQ(cq.cq, wcs) }

// QPInitAttr is struct ibv_qp_init_attr for an RC QP.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	MaxSendWR      int
	MaxRecvWR      int
	SqSigAll       bool
}

// QP is a reliable-connected queue pair (struct ibv_qp).
type QP struct {
	pd *PD
	q  *dataplane.QP
}

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return q.q.QPN() }

// CreateQP is ibv_create_qp with IBV_QPT_RC.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if pd.dead {
		return nil, ErrClosed
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, errors.New("verbs: create QP needs a send and a receive CQ")
	}
	q, err := pd.ctx.e.CreateQP(pd.h, dataplane.QPInitAttr{
		SendCQ: attr.SendCQ.cq, RecvCQ: attr.RecvCQ.cq,
		MaxSendWR: attr.MaxSendWR, MaxRecvWR: attr.MaxRecvWR, SigAll: attr.SqSigAll,
	})
	if err != nil {
		return nil, err
	}
	return &QP{pd: pd, q: q}, nil
}

// Modify is ibv_modify_qp.
func (q *QP) Modify(attr *QPAttr, mask AttrMask) error { return q.pd.ctx.e.ModifyQP(q.q, attr, mask) }

// Query is ibv_query_qp.
func (q *QP) Query() QPAttr { return q.pd.ctx.e.QueryQP(q.q) }

// Destroy is ibv_destroy_qp.
func (q *QP) Destroy() error { return q.pd.ctx.e.DestroyQP(q.q) }

// PostError says which work request of a post was refused
// (ibv_post_send's bad_wr); the ones before it were posted.
type PostError struct {
	Index int
	Err   error
}

func (e *PostError) Error() string { return fmt.Sprintf("verbs: work request %d: %v", e.Index, e.Err) }
func (e *PostError) Unwrap() error { return e.Err }

// PostSend is ibv_post_send.
func (q *QP) PostSend(wrs ...SendWR) error {
	if n, err := q.pd.ctx.e.PostSend(q.q, wrs); err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}

// PostRecv is ibv_post_recv.
func (q *QP) PostRecv(wrs ...RecvWR) error {
	if n, err := q.pd.ctx.e.PostRecv(q.q, wrs); err != nil {
		return &PostError{Index: n, Err: err}
	}
	return nil
}
