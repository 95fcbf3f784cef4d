//go:build ibverbs

package main

/*
#include <stdlib.h>
#include "snic.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/softnic/softnic/verbs"
)

// Shared receive queues and asynchronous events: the Go side of
// verbs.c's ibv_create_srq ... ibv_post_srq_recv, ibv_get_async_event.

type srqObj struct {
	ctx *context
	s   *verbs.SRQ
	mu  sync.Mutex
	rwr [C.SNIC_POST_BATCH]verbs.RecvWR
}

// cptrs maps the Go objects an event may name (*verbs.QP, *verbs.SRQ)
// to their C structs (struct ibv_qp, struct ibv_srq); CQs are in
// context.cqs.
var cptrs sync.Map

//export snic_go_create_srq
func snic_go_create_srq(pdh C.uintptr_t, maxWR, maxSGE, limit *C.int, cptr C.uintptr_t, out *C.uintptr_t) C.int {
	pd := value[*pdObj](pdh)
	s, got, err := pd.pd.CreateSRQ(verbs.SRQAttr{MaxWR: int(*maxWR), MaxSGE: int(*maxSGE), Limit: int(*limit)})
	if err != nil {
		return errno("create srq", err)
	}
	*maxWR, *maxSGE, *limit = C.int(got.MaxWR), C.int(got.MaxSGE), C.int(got.Limit)
	cptrs.Store(s, cptr)
	*out = C.uintptr_t(cgo.NewHandle(&srqObj{ctx: pd.ctx, s: s}))
	return 0
}

//export snic_go_modify_srq
func snic_go_modify_srq(h C.uintptr_t, maxWR, limit, mask C.int) C.int {
	s := value[*srqObj](h)
	return errno("modify srq", s.s.Modify(verbs.SRQAttr{MaxWR: int(maxWR), Limit: int(limit)}, verbs.SRQAttrMask(mask)))
}

//export snic_go_query_srq
func snic_go_query_srq(h C.uintptr_t, maxWR, maxSGE, limit *C.int) C.int {
	a, err := value[*srqObj](h).s.Query()
	if err != nil {
		return errno("query srq", err)
	}
	*maxWR, *maxSGE, *limit = C.int(a.MaxWR), C.int(a.MaxSGE), C.int(a.Limit)
	return 0
}

//export snic_go_destroy_srq
func snic_go_destroy_srq(h C.uintptr_t) C.int {
	s := value[*srqObj](h)
	if err := s.s.Destroy(); err != nil {
		return errno("destroy srq", err)
	}
	cptrs.Delete(s.s)
	cgo.Handle(h).Delete()
	return 0
}

//export snic_go_post_srq_recv
func snic_go_post_srq_recv(h C.uintptr_t, wrs *C.struct_snic_recv_wr, n C.int, bad *C.int) C.int {
	s := value[*srqObj](h)
	s.mu.Lock()
	defer s.mu.Unlock()
	src := unsafe.Slice(wrs, n)
	dst := s.rwr[:n]
	for i := range src {
		w, d := &src[i], &dst[i]
		*d = verbs.RecvWR{WRID: uint64(w.wr_id), NumSGE: int(w.num_sge)}
		sgl(&d.SGL, &w.sge, int(w.num_sge))
	}
	if err := s.s.PostRecv(dst...); err != nil {
		*bad = postIndex(err)
		return errno("post srq recv", err)
	}
	return 0
}

// snic_go_create_qp_srq is snic_go_create_qp for a QP on SRQ srqh; cptr
// is the C struct ibv_qp, which its events name.
//
//export snic_go_create_qp_srq
func snic_go_create_qp_srq(pdh, scq, rcq, srqh C.uintptr_t, maxSend, sigAll C.int, cptr C.uintptr_t, out *C.uintptr_t, qpn *C.uint32_t) C.int {
	pd := value[*pdObj](pdh)
	q, err := pd.pd.CreateQP(verbs.QPInitAttr{
		SendCQ: value[*cqObj](scq).cq, RecvCQ: value[*cqObj](rcq).cq, SRQ: value[*srqObj](srqh).s,
		MaxSendWR: int(maxSend), SqSigAll: sigAll != 0,
	})
	if err != nil {
		return errno("create qp", err)
	}
	*qpn = C.uint32_t(q.QPN())
	cptrs.Store(q, cptr)
	*out = C.uintptr_t(cgo.NewHandle(&qpObj{ctx: pd.ctx, q: q}))
	return 0
}

// snic_go_qp_cptr records the C struct of a QP snic_go_create_qp made.
//
//export snic_go_qp_cptr
func snic_go_qp_cptr(h, cptr C.uintptr_t) {
	cptrs.Store(value[*qpObj](h).q, cptr)
}

// snic_go_forget_qp drops a destroyed QP's C struct.
//
//export snic_go_forget_qp
func snic_go_forget_qp(h C.uintptr_t) {
	cptrs.Delete(value[*qpObj](h).q)
}

// snic_go_async_fd is the context's async descriptor (the context owns
// it: closing the device closes it).
//
//export snic_go_async_fd
func snic_go_async_fd(h C.uintptr_t, fd *C.int) C.int {
	f, err := value[*context](h).c.AsyncFD()
	if err != nil {
		return errno("async fd", err)
	}
	*fd = C.int(f)
	return 0
}

// snic_go_get_async_event waits for the next event (reading the async
// descriptor: blocking unless it has O_NONBLOCK) and names its object by
// its C struct: kind 1 QP, 2 CQ, 3 SRQ, 0 the port.
//
//export snic_go_get_async_event
func snic_go_get_async_event(h C.uintptr_t, typ, kind *C.int, cptr *C.uintptr_t, port *C.int) C.int {
	ctx := value[*context](h)
	for {
		ev, err := ctx.c.GetAsyncEvent()
		if err != nil {
			return errno("get async event", err)
		}
		*typ, *port, *kind, *cptr = C.int(ev.Type), C.int(ev.Port), 0, 0
		var p any
		var ok bool
		switch {
		case ev.QP != nil:
			*kind = 1
			p, ok = cptrs.Load(ev.QP)
		case ev.CQ != nil:
			*kind = 2
			ctx.mu.Lock()
			*cptr, ok = ctx.cqs[ev.CQ]
			ctx.mu.Unlock()
		case ev.SRQ != nil:
			*kind = 3
			p, ok = cptrs.Load(ev.SRQ)
		default:
			return 0
		}
		if p != nil {
			*cptr = p.(C.uintptr_t)
		}
		if ok && *cptr != 0 {
			return 0
		}
		// An object the program has destroyed meanwhile: its event went
		// with it.
	}
}
