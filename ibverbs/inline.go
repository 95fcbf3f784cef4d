//go:build ibverbs

package main

/*
#include "snic.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"

	"github.com/softnic/softnic/verbs"
)

// A QP's inline area: where verbs.c's snic_post_send copies the data of
// an IBV_SEND_INLINE work request, so that the program may reuse its
// buffer, registered or not, as soon as ibv_post_send returns, and the
// daemon reads the bytes from registered memory for as long as it may
// send them again (docs/ibverbs.md, "Inline data").
type inlineArea struct {
	ctx *context
	buf []byte
	mr  *verbs.MR
}

// snic_go_inline_area makes QP qph's inline area in PD pdh: slots of
// size bytes each in shared memory (verbs.Context.AllocBuf, not the Go
// heap, so that C may keep its address), registered for local access.
// There are SendQueueCap + SNIC_POST_BATCH slots: snic_post_send gives
// the inline work requests slots in turn, copying up to a batch of them
// before it posts them, and a slot comes round again only after
// SendQueueCap other inline work requests went into the send ring after
// it, which the ring admits only once the daemon retired its WQE.
//
//export snic_go_inline_area
func snic_go_inline_area(qph, pdh C.uintptr_t, size C.uint32_t, out, addr *C.uintptr_t, slots, lkey *C.uint32_t) C.int {
	q := value[*qpObj](qph)
	pd := value[*pdObj](pdh)
	n := q.q.SendQueueCap() + C.SNIC_POST_BATCH
	buf, err := pd.ctx.c.AllocBuf(n * int(size))
	if err != nil {
		return errno("create qp: inline area", err)
	}
	mr, err := pd.pd.RegMR(buf, 0)
	if err != nil {
		pd.ctx.c.FreeBuf(buf)
		return errno("create qp: register the inline area", err)
	}
	*addr = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	*slots, *lkey = C.uint32_t(n), C.uint32_t(mr.LKey)
	*out = C.uintptr_t(cgo.NewHandle(&inlineArea{ctx: pd.ctx, buf: buf, mr: mr}))
	return 0
}

// snic_go_inline_free releases an inline area once its QP is destroyed.
//
//export snic_go_inline_free
func snic_go_inline_free(h C.uintptr_t) C.int {
	a := value[*inlineArea](h)
	cgo.Handle(h).Delete()
	if err := a.mr.Dereg(); err != nil {
		return errno("destroy qp: deregister the inline area", err)
	}
	return errno("destroy qp: free the inline area", a.ctx.c.FreeBuf(a.buf))
}
