//go:build ibverbs

// Command ibverbs is softnic's drop-in libibverbs.so.1 (make ibverbs
// builds it with -buildmode=c-shared into build/lib): unmodified ibverbs
// programs, such as Debian's perftest and ibv_rc_pingpong, run over a
// softnic daemon when the dynamic linker finds this library first
// (LD_LIBRARY_PATH). verbs.c implements the ibverbs calls and the
// context's ops table on top of the functions here, which drive
// softnic's Go verbs client (package verbs: control RPCs on the daemon's
// socket, data path on shared-memory rings). docs/ibverbs.md has the
// design.
package main

/*
#include <stdlib.h>
#include "snic.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

func main() {}

// The library's Go runtime runs on two Ps (a GOMAXPROCS in the
// environment wins). Every verb is a call from the program's C thread
// into Go, which needs a P; between calls the thread holds its P in a
// system-call state. With one P, once the program stays in C for more
// than 20 µs (ib_write_lat spins on its buffer for a whole round trip)
// the runtime's sysmon sees no idle P and hands that one to a new
// thread, and the next verb waits until that thread gets a core and
// gives the P back: milliseconds on a host whose cores the program, its
// peer and the daemons all want. With a second P idle, sysmon leaves the
// first with its thread. ib_write_lat over the library on the testbed,
// 2026-11-29: t_typical 26-31 µs with two Ps, 58 µs with one, in the
// same run (docs/ibverbs.md, "ib_write_lat's tail"); ib_write_bw 189-229
// MB/s against 175-187. No goroutine of the library runs on the data
// path, so the second P leaves no runtime thread spinning for work there.
func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
}

// debug prints the reason of a failed call (SOFTNIC_DEBUG=1): ibverbs
// has only an errno for it.
var debug = os.Getenv("SOFTNIC_DEBUG") != ""

// errno maps an error of package verbs to the errno ibverbs would give.
func errno(op string, err error) C.int {
	if err == nil {
		return 0
	}
	if debug {
		fmt.Fprintf(os.Stderr, "softnic libibverbs: %s: %v\n", op, err)
	}
	var en syscall.Errno
	switch {
	case errors.As(err, &en):
		return C.int(en)
	case errors.Is(err, verbs.ErrLimit), errors.Is(err, dataplane.ErrQueueFull):
		return C.int(syscall.ENOMEM)
	case errors.Is(err, dataplane.ErrBusy):
		return C.int(syscall.EBUSY)
	case errors.Is(err, verbs.ErrPermission):
		return C.int(syscall.EPERM)
	case errors.Is(err, verbs.ErrClosed), errors.Is(err, verbs.ErrDisconnected):
		return C.int(syscall.EIO)
	}
	return C.int(syscall.EINVAL)
}

type context struct {
	c   *verbs.Context
	dev verbs.DeviceAttr
	mu  sync.Mutex
	cqs map[*verbs.CQ]C.uintptr_t // the C struct ibv_cq of each CQ on a channel
	// closeFn is ibv_close_device: the daemon connection's Close, or
	// dropping a reference to the direct-mode device (direct.go).
	closeFn func() error
}

type pdObj struct {
	ctx *context
	pd  *verbs.PD
}

type cqObj struct {
	ctx *context
	cq  *verbs.CQ
	mu  sync.Mutex
	wcs [32]verbs.WC
}

type qpObj struct {
	ctx *context
	q   *verbs.QP
	smu sync.Mutex
	swr [C.SNIC_POST_BATCH]verbs.SendWR
	rmu sync.Mutex
	rwr [C.SNIC_POST_BATCH]verbs.RecvWR
}

type chObj struct {
	ctx *context
	ch  *verbs.CompChannel
}

func value[T any](h C.uintptr_t) T { return cgo.Handle(h).Value().(T) }

func devInfo(d verbs.DeviceAttr, out *C.struct_snic_devinfo) {
	name := d.Name
	if len(name) > 63 {
		name = name[:63]
	}
	for i := range out.name {
		out.name[i] = 0
	}
	for i := 0; i < len(name); i++ {
		out.name[i] = C.char(name[i])
	}
	gid := d.GID.As16()
	for i := range gid {
		out.gid[i] = C.uint8_t(gid[i])
	}
	for i := range d.MAC {
		out.mac[i] = C.uint8_t(d.MAC[i])
	}
	out.max_qp_wr, out.max_cqe = C.int(d.MaxQPWR), C.int(d.MaxCQE)
	out.max_sge, out.max_qp_rd_atom = C.int(d.MaxSGE), C.int(d.MaxQPRdAtom)
}

// snic_go_probe dials the daemon at path and describes its device, for
// ibv_get_device_list.
//
//export snic_go_probe
func snic_go_probe(path *C.char, out *C.struct_snic_devinfo) C.int {
	c, closeFn, err := openDevice(C.GoString(path), false) // direct.go
	if err != nil {
		return errno("probe", err)
	}
	defer closeFn()
	d, err := c.QueryDevice()
	if err != nil {
		return errno("query device", err)
	}
	devInfo(d, out)
	return 0
}

//export snic_go_open
func snic_go_open(path *C.char, out *C.struct_snic_devinfo, h *C.uintptr_t) C.int {
	c, closeFn, err := openDevice(C.GoString(path), true) // direct.go
	if err != nil {
		return errno("open device", err)
	}
	d, err := c.QueryDevice()
	if err != nil {
		closeFn()
		return errno("query device", err)
	}
	devInfo(d, out)
	*h = C.uintptr_t(cgo.NewHandle(&context{c: c, dev: d, cqs: map[*verbs.CQ]C.uintptr_t{}, closeFn: closeFn}))
	return 0
}

//export snic_go_close
func snic_go_close(h C.uintptr_t) C.int {
	ctx := value[*context](h)
	cgo.Handle(h).Delete()
	return errno("close device", ctx.closeFn())
}

//export snic_go_alloc_pd
func snic_go_alloc_pd(h C.uintptr_t, out *C.uintptr_t) C.int {
	ctx := value[*context](h)
	pd, err := ctx.c.AllocPD()
	if err != nil {
		return errno("alloc pd", err)
	}
	*out = C.uintptr_t(cgo.NewHandle(&pdObj{ctx: ctx, pd: pd}))
	return 0
}

//export snic_go_dealloc_pd
func snic_go_dealloc_pd(h C.uintptr_t) C.int {
	if err := value[*pdObj](h).pd.Dealloc(); err != nil {
		return errno("dealloc pd", err)
	}
	cgo.Handle(h).Delete()
	return 0
}

// snic_go_reg_mr registers n bytes at addr, first making their pages
// shared memory the daemon can map (verbs.Context.ShareMemory).
//
//export snic_go_reg_mr
func snic_go_reg_mr(pdh C.uintptr_t, addr unsafe.Pointer, n C.size_t, access C.uint32_t, out *C.uintptr_t, lkey, rkey *C.uint32_t) C.int {
	pd := value[*pdObj](pdh)
	buf, err := pd.ctx.c.ShareMemory(addr, int(n))
	if err != nil {
		return errno("reg mr", err)
	}
	mr, err := pd.pd.RegMR(buf, verbs.Access(access))
	if err != nil {
		return errno("reg mr", err)
	}
	*lkey, *rkey = C.uint32_t(mr.LKey), C.uint32_t(mr.RKey)
	*out = C.uintptr_t(cgo.NewHandle(mr))
	return 0
}

//export snic_go_dereg_mr
func snic_go_dereg_mr(h C.uintptr_t) C.int {
	if err := value[*verbs.MR](h).Dereg(); err != nil {
		return errno("dereg mr", err)
	}
	cgo.Handle(h).Delete()
	return 0
}

//export snic_go_create_channel
func snic_go_create_channel(h C.uintptr_t, out *C.uintptr_t, fd *C.int) C.int {
	ctx := value[*context](h)
	ch, err := ctx.c.CreateCompChannel()
	if err != nil {
		return errno("create comp channel", err)
	}
	*fd = C.int(ch.FD())
	*out = C.uintptr_t(cgo.NewHandle(&chObj{ctx: ctx, ch: ch}))
	return 0
}

//export snic_go_destroy_channel
func snic_go_destroy_channel(h C.uintptr_t) C.int {
	if err := value[*chObj](h).ch.Destroy(); err != nil {
		return errno("destroy comp channel", err)
	}
	cgo.Handle(h).Delete()
	return 0
}

// snic_go_create_cq makes a CQ on channel chh (0: none); cptr is the C
// struct ibv_cq, which ibv_get_cq_event returns.
//
//export snic_go_create_cq
func snic_go_create_cq(h C.uintptr_t, cqe C.int, chh C.uintptr_t, cptr C.uintptr_t, out *C.uintptr_t) C.int {
	ctx := value[*context](h)
	var ch *verbs.CompChannel
	if chh != 0 {
		ch = value[*chObj](chh).ch
	}
	cq, err := ctx.c.CreateCQWithChannel(int(cqe), ch)
	if err != nil {
		return errno("create cq", err)
	}
	ctx.mu.Lock()
	ctx.cqs[cq] = cptr
	ctx.mu.Unlock()
	*out = C.uintptr_t(cgo.NewHandle(&cqObj{ctx: ctx, cq: cq}))
	return 0
}

//export snic_go_destroy_cq
func snic_go_destroy_cq(h C.uintptr_t) C.int {
	c := value[*cqObj](h)
	if err := c.cq.Destroy(); err != nil {
		return errno("destroy cq", err)
	}
	c.ctx.mu.Lock()
	delete(c.ctx.cqs, c.cq)
	c.ctx.mu.Unlock()
	cgo.Handle(h).Delete()
	return 0
}

//export snic_go_req_notify
func snic_go_req_notify(h C.uintptr_t, solicited C.int) C.int {
	return errno("req notify cq", value[*cqObj](h).cq.ReqNotify(solicited != 0))
}

//export snic_go_get_cq_event
func snic_go_get_cq_event(h C.uintptr_t, cptr *C.uintptr_t) C.int {
	ch := value[*chObj](h)
	cq, err := ch.ch.GetEvent()
	if err != nil {
		return errno("get cq event", err)
	}
	ch.ctx.mu.Lock()
	*cptr = ch.ctx.cqs[cq]
	ch.ctx.mu.Unlock()
	return 0
}

//export snic_go_ack_cq_events
func snic_go_ack_cq_events(h C.uintptr_t, n C.uint) {
	value[*cqObj](h).cq.AckEvents(int(n))
}

// snic_go_poll is ibv_poll_cq: up to n (at most 32) completions into out;
// the number, or a negative errno.
//
//export snic_go_poll
func snic_go_poll(h C.uintptr_t, n C.int, out *C.struct_snic_wc) C.int {
	c := value[*cqObj](h)
	c.mu.Lock()
	defer c.mu.Unlock()
	m := min(int(n), len(c.wcs))
	got, err := c.cq.Poll(c.wcs[:m])
	if err != nil && got == 0 {
		return -errno("poll cq", err)
	}
	dst := unsafe.Slice(out, got)
	for i := range got {
		w, d := &c.wcs[i], &dst[i]
		d.wr_id = C.uint64_t(w.WRID)
		d.status, d.opcode = C.uint32_t(w.Status), C.uint32_t(w.Opcode)
		d.vendor_err, d.byte_len = C.uint32_t(w.VendorErr), C.uint32_t(w.ByteLen)
		d.imm, d.qp_num, d.src_qp = C.uint32_t(w.ImmData), C.uint32_t(w.QPNum), C.uint32_t(w.SrcQP)
		d.flags = C.uint32_t(w.Flags & (verbs.WCWithImm | verbs.WCGRH))
	}
	return C.int(got)
}

//export snic_go_create_qp
func snic_go_create_qp(pdh, scq, rcq C.uintptr_t, maxSend, maxRecv, sigAll, qpType C.int, out *C.uintptr_t, qpn *C.uint32_t) C.int {
	pd := value[*pdObj](pdh)
	q, err := pd.pd.CreateQP(verbs.QPInitAttr{
		SendCQ: value[*cqObj](scq).cq, RecvCQ: value[*cqObj](rcq).cq,
		MaxSendWR: int(maxSend), MaxRecvWR: int(maxRecv), SqSigAll: sigAll != 0, Type: verbs.QPType(qpType),
	})
	if err != nil {
		return errno("create qp", err)
	}
	*qpn = C.uint32_t(q.QPN())
	*out = C.uintptr_t(cgo.NewHandle(&qpObj{ctx: pd.ctx, q: q}))
	return 0
}

//export snic_go_destroy_qp
func snic_go_destroy_qp(h C.uintptr_t) C.int {
	if err := value[*qpObj](h).q.Destroy(); err != nil {
		return errno("destroy qp", err)
	}
	cgo.Handle(h).Delete()
	return 0
}

// macTimeout bounds the wait for the kernel to resolve the next hop's
// MAC at modify-to-RTR.
const macTimeout = 3 * time.Second

//export snic_go_modify_qp
func snic_go_modify_qp(h C.uintptr_t, a *C.struct_snic_qp_attr, mask C.uint32_t) C.int {
	q := value[*qpObj](h)
	attr := verbs.QPAttr{
		State: qp.State(a.state), CurState: qp.State(a.cur_state), AccessFlags: qp.Access(a.access),
		PKeyIndex: uint16(a.pkey_index), Port: uint8(a.port), PathMTU: qp.MTU(a.path_mtu),
		DestQPN: uint32(a.dest_qpn), RQPSN: qp.PSN(a.rq_psn), SQPSN: qp.PSN(a.sq_psn),
		MaxDestRdAtomic: uint8(a.max_dest_rd_atomic), MaxRdAtomic: uint8(a.max_rd_atomic),
		MinRNRTimer: uint8(a.min_rnr_timer), Timeout: uint8(a.timeout),
		RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry), QKey: uint32(a.qkey),
	}
	m := verbs.AttrMask(mask)
	if m&verbs.AttrAV != 0 {
		var gid [16]byte
		for i := range gid {
			gid[i] = byte(a.dgid[i])
		}
		dgid := netip.AddrFrom16(gid).Unmap()
		mac, hops := q.ctx.dev.MAC, uint8(a.hop_limit)
		if dgid != q.ctx.dev.GID.Unmap() {
			m, hl, err := cm.ResolveMAC(dgid, macTimeout)
			if err != nil {
				return errno("modify qp: resolve the destination's MAC", err)
			}
			// As the kernel does for a RoCE NIC: the path's hop limit,
			// whatever the program asked for, on-link or routed.
			mac, hops = m, hl
		}
		attr.AV = verbs.AHAttr{DGID: dgid, DMAC: mac, TrafficClass: uint8(a.traffic_class),
			HopLimit: hops, FlowLabel: uint32(a.flow_label)}
	}
	return errno("modify qp", q.q.Modify(&attr, m))
}

//export snic_go_query_qp
func snic_go_query_qp(h C.uintptr_t, a *C.struct_snic_qp_attr) C.int {
	q := value[*qpObj](h)
	attr, err := q.q.QueryAttr()
	if err != nil {
		return errno("query qp", err)
	}
	a.state, a.cur_state, a.access = C.uint32_t(attr.State), C.uint32_t(attr.CurState), C.uint32_t(attr.AccessFlags)
	a.pkey_index, a.port = C.uint32_t(attr.PKeyIndex), C.uint32_t(attr.Port)
	if attr.AV.DGID.IsValid() {
		gid := attr.AV.DGID.As16()
		for i := range gid {
			a.dgid[i] = C.uint8_t(gid[i])
		}
	}
	a.traffic_class, a.hop_limit, a.flow_label = C.uint32_t(attr.AV.TrafficClass), C.uint32_t(attr.AV.HopLimit), C.uint32_t(attr.AV.FlowLabel)
	a.path_mtu, a.dest_qpn = C.uint32_t(attr.PathMTU), C.uint32_t(attr.DestQPN)
	a.rq_psn, a.sq_psn = C.uint32_t(attr.RQPSN), C.uint32_t(attr.SQPSN)
	a.max_dest_rd_atomic, a.max_rd_atomic = C.uint32_t(attr.MaxDestRdAtomic), C.uint32_t(attr.MaxRdAtomic)
	a.min_rnr_timer, a.timeout = C.uint32_t(attr.MinRNRTimer), C.uint32_t(attr.Timeout)
	a.retry_cnt, a.rnr_retry = C.uint32_t(attr.RetryCnt), C.uint32_t(attr.RNRRetry)
	a.qkey = C.uint32_t(attr.QKey)
	return 0
}

func sgl(dst *[qp.MaxSGE]verbs.SGE, src *[C.SNIC_MAX_SGE]C.struct_snic_sge, n int) {
	for j := range n {
		dst[j] = verbs.SGE{Addr: uint64(src[j].addr), Length: uint32(src[j].length), LKey: uint32(src[j].lkey)}
	}
}

// postIndex is the index of the refused work request of a failed post.
func postIndex(err error) C.int {
	var pe *verbs.PostError
	if errors.As(err, &pe) {
		return C.int(pe.Index)
	}
	return 0
}

// snic_go_post_send posts n work requests; on failure *bad is the index
// of the first one not posted.
//
//export snic_go_post_send
func snic_go_post_send(h C.uintptr_t, wrs *C.struct_snic_send_wr, n C.int, bad *C.int) C.int {
	q := value[*qpObj](h)
	q.smu.Lock()
	defer q.smu.Unlock()
	src := unsafe.Slice(wrs, n)
	dst := q.swr[:n]
	for i := range src {
		s, d := &src[i], &dst[i]
		*d = verbs.SendWR{WRID: uint64(s.wr_id), Opcode: verbs.WROpcode(s.opcode), Flags: verbs.SendFlags(s.flags),
			NumSGE: int(s.num_sge), ImmData: uint32(s.imm), RemoteAddr: uint64(s.remote_addr), RKey: uint32(s.rkey),
			CompareAdd: uint64(s.compare_add), Swap: uint64(s.swap),
			AH: uint32(s.ah), RemoteQPN: uint32(s.remote_qpn), RemoteQKey: uint32(s.remote_qkey)}
		sgl(&d.SGL, &s.sge, int(s.num_sge))
	}
	if err := q.q.PostSend(dst...); err != nil {
		*bad = postIndex(err)
		return errno("post send", err)
	}
	return 0
}

//export snic_go_post_recv
func snic_go_post_recv(h C.uintptr_t, wrs *C.struct_snic_recv_wr, n C.int, bad *C.int) C.int {
	q := value[*qpObj](h)
	q.rmu.Lock()
	defer q.rmu.Unlock()
	src := unsafe.Slice(wrs, n)
	dst := q.rwr[:n]
	for i := range src {
		s, d := &src[i], &dst[i]
		*d = verbs.RecvWR{WRID: uint64(s.wr_id), NumSGE: int(s.num_sge)}
		sgl(&d.SGL, &s.sge, int(s.num_sge))
	}
	if err := q.q.PostRecv(dst...); err != nil {
		*bad = postIndex(err)
		return errno("post recv", err)
	}
	return 0
}

//go:generate go run gen.go
