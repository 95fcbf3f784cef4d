//go:build ibverbs

package main

// The rdma_cm side of the drop-in libibverbs.so.1: the functions of the
// private interface snic_cm.h (version node SOFTNIC_PRIVATE_1) that the
// drop-in librdmacm.so.1 (rdmacm/cma.c) calls, on package verbs/rdmacm's
// state machine. It lives here so that one process has one Go runtime:
// librdmacm is a thin C library over this one. docs/rdmacm.md.

/*
#define SNIC_CM_NO_PROTOTYPES
#include <stdlib.h>
#include <sys/socket.h>
#include "snic_cm.h"
*/
import "C"

import (
	"errors"
	"net/netip"
	"os"
	"runtime/cgo"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/verbs/rdmacm"
)

// cmResolver is the rdma_cm's view of the host: the one device is the
// daemon at SOFTNIC_SOCKET (its port's IP address is the device's
// address), and a destination's next hop is the kernel's route and
// neighbour in the calling process's network namespace (cm.ResolveMAC,
// as ibv_modify_qp does).
type cmResolver struct {
	mu  sync.Mutex
	dev *rdmacm.Device
}

func socketPath() string {
	if s := os.Getenv("SOFTNIC_SOCKET"); s != "" {
		return s
	}
	return "/run/softnic/softnic.sock"
}

func (r *cmResolver) device() (rdmacm.Device, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dev != nil {
		return *r.dev, nil
	}
	c, err := verbs.Dial(socketPath())
	if err != nil {
		if debug {
			errno("rdma_cm: no softnic daemon", err)
		}
		return rdmacm.Device{}, syscall.ENODEV
	}
	defer c.Close()
	d, err := c.QueryDevice()
	if err != nil {
		return rdmacm.Device{}, syscall.ENODEV
	}
	// The port's active MTU, as ibv_query_port reports it (verbs.c).
	r.dev = &rdmacm.Device{GID: d.GID.Unmap(), MAC: d.MAC, MaxRdAtom: uint8(min(d.MaxQPRdAtom, 255)), MTU: qp.MTU1024}
	return *r.dev, nil
}

func (r *cmResolver) Device(a netip.Addr) (rdmacm.Device, error) {
	d, err := r.device()
	if err != nil {
		return d, err
	}
	a = a.Unmap()
	if a.IsUnspecified() && a.Is4() == d.GID.Is4() || a == d.GID {
		return d, nil
	}
	return rdmacm.Device{}, syscall.ENODEV
}

func (r *cmResolver) Resolve(d rdmacm.Device, dst netip.Addr, timeout time.Duration) ([6]byte, uint8, error) {
	dst = dst.Unmap()
	if dst == d.GID {
		return d.MAC, 64, nil
	}
	mac, hops, err := cm.ResolveMAC(dst, timeout)
	if err != nil {
		if debug {
			errno("rdma_resolve_addr", err)
		}
		var en syscall.Errno
		if errors.As(err, &en) {
			return mac, 0, en
		}
		return mac, 0, syscall.ETIMEDOUT // no neighbour answer within the timeout
	}
	return mac, hops, nil
}

var (
	cmOnce sync.Once
	cmMgr  *rdmacm.CM
)

// cmService is the IBA CM service the library's ids connect through;
// until one is wired in, rdma_connect and rdma_listen fail with ENOSYS.
var cmService rdmacm.Service

func theCM() *rdmacm.CM {
	cmOnce.Do(func() { cmMgr = rdmacm.New(cmService, &cmResolver{}) })
	return cmMgr
}

// idHandles maps ids to their handles (ids of connection requests are
// made on the Go side).
var (
	idMu      sync.Mutex
	idHandles = map[*rdmacm.ID]cgo.Handle{}
)

func idHandle(id *rdmacm.ID) C.uintptr_t {
	if id == nil {
		return 0
	}
	idMu.Lock()
	defer idMu.Unlock()
	h, ok := idHandles[id]
	if !ok {
		h = cgo.NewHandle(id)
		idHandles[id] = h
	}
	return C.uintptr_t(h)
}

func cmErr(op string, err error) C.int { return errno("rdma_cm: "+op, err) }

//export snic_cm_channel_create
func snic_cm_channel_create(fd *C.int, h *C.uintptr_t) C.int {
	ch, err := rdmacm.NewChannel()
	if err != nil {
		return cmErr("create event channel", err)
	}
	*fd = C.int(ch.FD())
	*h = C.uintptr_t(cgo.NewHandle(ch))
	return 0
}

//export snic_cm_channel_destroy
func snic_cm_channel_destroy(h C.uintptr_t) C.int {
	if err := value[*rdmacm.Channel](h).Destroy(); err != nil {
		return cmErr("destroy event channel", err)
	}
	cgo.Handle(h).Delete()
	return 0
}

func putParam(p rdmacm.UserParam, out *C.struct_snic_cm_param) {
	out.qp_num = C.uint32_t(p.QPN)
	out.responder_resources, out.initiator_depth = C.uint8_t(p.ResponderResources), C.uint8_t(p.InitiatorDepth)
	out.flow_control, out.srq = C.uint8_t(b2i(p.FlowControl)), C.uint8_t(b2i(p.SRQ))
	out.retry_count, out.rnr_retry_count = C.uint8_t(p.RetryCount), C.uint8_t(p.RNRRetryCount)
	n := min(len(p.PrivateData), len(out.private_data))
	for i := range n {
		out.private_data[i] = C.uint8_t(p.PrivateData[i])
	}
	out.private_data_len = C.uint8_t(n)
	out.qkey = C.uint32_t(p.QKey)
}

func getParam(in *C.struct_snic_cm_param) rdmacm.UserParam {
	p := rdmacm.UserParam{QPN: uint32(in.qp_num), ResponderResources: uint8(in.responder_resources),
		InitiatorDepth: uint8(in.initiator_depth), FlowControl: in.flow_control != 0, SRQ: in.srq != 0,
		RetryCount: uint8(in.retry_count), RNRRetryCount: uint8(in.rnr_retry_count), QKey: uint32(in.qkey)}
	n := min(int(in.private_data_len), len(in.private_data))
	for i := range n {
		p.PrivateData = append(p.PrivateData, byte(in.private_data[i]))
	}
	return p
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// snic_cm_get_event blocks for the channel's next event (EAGAIN if the
// program made the channel's fd non-blocking and none is queued).
//
//export snic_cm_get_event
func snic_cm_get_event(h C.uintptr_t, out *C.struct_snic_cm_event) C.int {
	ev, err := value[*rdmacm.Channel](h).Get()
	if err != nil {
		var en syscall.Errno
		if errors.As(err, &en) && en == syscall.EAGAIN {
			return C.int(en)
		}
		return cmErr("get event", err)
	}
	*out = C.struct_snic_cm_event{}
	out.ev = C.uintptr_t(cgo.NewHandle(ev))
	out.id, out.id_user = idHandle(ev.ID), C.uintptr_t(ev.ID.User.Load())
	if ev.Listen != nil {
		out.listen_id, out.listen_user = idHandle(ev.Listen), C.uintptr_t(ev.Listen.User.Load())
	}
	out.event, out.status = C.int32_t(ev.Type), C.int32_t(ev.Status)
	putParam(ev.Param, &out.param)
	out.ud = C.uint8_t(b2i(ev.UD))
	return 0
}

//export snic_cm_ack_event
func snic_cm_ack_event(h C.uintptr_t) {
	value[*rdmacm.CMEvent](h).Ack()
	cgo.Handle(h).Delete()
}

//export snic_cm_create_id
func snic_cm_create_id(chh C.uintptr_t, ps C.int, user C.uintptr_t, out *C.uintptr_t) C.int {
	id, err := theCM().CreateID(value[*rdmacm.Channel](chh), rdmacm.PortSpace(ps))
	if err != nil {
		return cmErr("create id", err)
	}
	id.User.Store(uintptr(user))
	*out = idHandle(id)
	return 0
}

//export snic_cm_set_user
func snic_cm_set_user(h C.uintptr_t, user C.uintptr_t) {
	value[*rdmacm.ID](h).User.Store(uintptr(user))
}

//export snic_cm_destroy_id
func snic_cm_destroy_id(h C.uintptr_t) C.int {
	id := value[*rdmacm.ID](h)
	if err := id.Destroy(); err != nil {
		return cmErr("destroy id", err)
	}
	idMu.Lock()
	delete(idHandles, id)
	idMu.Unlock()
	cgo.Handle(h).Delete()
	return 0
}

func getAddr(a *C.struct_snic_cm_addr) (netip.AddrPort, bool) {
	if a == nil {
		return netip.AddrPort{}, false
	}
	var ip netip.Addr
	switch a.family {
	case C.AF_INET:
		ip = netip.AddrFrom4([4]byte{byte(a.addr[0]), byte(a.addr[1]), byte(a.addr[2]), byte(a.addr[3])})
	case C.AF_INET6:
		var b [16]byte
		for i := range b {
			b[i] = byte(a.addr[i])
		}
		ip = netip.AddrFrom16(b)
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(a.port)), true
}

func putAddr(ap netip.AddrPort, out *C.struct_snic_cm_addr) {
	*out = C.struct_snic_cm_addr{}
	if !ap.Addr().IsValid() {
		return
	}
	out.port = C.uint16_t(ap.Port())
	if ap.Addr().Is4() {
		out.family = C.AF_INET
		b := ap.Addr().As4()
		for i := range b {
			out.addr[i] = C.uint8_t(b[i])
		}
		return
	}
	out.family = C.AF_INET6
	b := ap.Addr().As16()
	for i := range b {
		out.addr[i] = C.uint8_t(b[i])
	}
}

//export snic_cm_migrate
func snic_cm_migrate(h, chh C.uintptr_t) C.int {
	return cmErr("migrate id", value[*rdmacm.ID](h).Migrate(value[*rdmacm.Channel](chh)))
}

//export snic_cm_bind
func snic_cm_bind(h C.uintptr_t, a *C.struct_snic_cm_addr) C.int {
	ap, ok := getAddr(a)
	if !ok {
		return C.int(syscall.EAFNOSUPPORT)
	}
	return cmErr("bind addr", value[*rdmacm.ID](h).Bind(ap))
}

//export snic_cm_resolve_addr
func snic_cm_resolve_addr(h C.uintptr_t, src, dst *C.struct_snic_cm_addr, timeoutMs C.int) C.int {
	s, _ := getAddr(src)
	d, ok := getAddr(dst)
	if !ok {
		return C.int(syscall.EAFNOSUPPORT)
	}
	// The program's timeout bounds the wait for the next hop's MAC, as
	// the kernel's address resolution does.
	to := time.Duration(max(timeoutMs, 0)) * time.Millisecond
	return cmErr("resolve addr", value[*rdmacm.ID](h).ResolveAddr(s, d, to))
}

//export snic_cm_resolve_route
func snic_cm_resolve_route(h C.uintptr_t, timeoutMs C.int) C.int {
	return cmErr("resolve route", value[*rdmacm.ID](h).ResolveRoute(time.Duration(timeoutMs)*time.Millisecond))
}

//export snic_cm_query
func snic_cm_query(h C.uintptr_t, out *C.struct_snic_cm_route) C.int {
	r := value[*rdmacm.ID](h).Route()
	*out = C.struct_snic_cm_route{}
	putAddr(r.Src, &out.src)
	putAddr(r.Dst, &out.dst)
	if r.Device != nil {
		out.has_device = 1
		g := netip.AddrFrom16(r.Device.GID.As16()).As16()
		for i := range g {
			out.sgid[i] = C.uint8_t(g[i])
		}
	}
	if r.Routed || r.Path.DGID.IsValid() {
		out.has_path = C.uint8_t(b2i(r.Routed))
		s, d := r.Path.SGID.As16(), r.Path.DGID.As16()
		for i := range s {
			out.sgid[i], out.dgid[i] = C.uint8_t(s[i]), C.uint8_t(d[i])
		}
		out.hop_limit, out.traffic_class = C.uint8_t(r.Path.HopLimit), C.uint8_t(r.Path.TrafficClass)
		out.mtu, out.packet_life_time = C.uint8_t(r.Path.MTU), C.uint8_t(r.Path.PacketLifeTime)
		out.flow_label, out.pkey = C.uint32_t(r.Path.FlowLabel), C.uint16_t(r.Path.PKey)
		for i := range r.Path.DMAC {
			out.dmac[i] = C.uint8_t(r.Path.DMAC[i])
		}
	}
	return 0
}

// cQP is an id's struct ibv_qp: the state machine's moves go through
// ibv_modify_qp.
type cQP struct {
	ptr C.uintptr_t
	qpn uint32
}

func (q cQP) QPN() uint32 { return q.qpn }

func (q cQP) Modify(a *verbs.QPAttr, m verbs.AttrMask) error {
	var ca C.struct_snic_qp_attr
	putQPAttr(a, &ca)
	if rc := C.snic_modify_qp_c(q.ptr, &ca, C.int(m)); rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

func putQPAttr(a *verbs.QPAttr, ca *C.struct_snic_qp_attr) {
	ca.state, ca.cur_state, ca.access = C.uint32_t(a.State), C.uint32_t(a.CurState), C.uint32_t(a.AccessFlags)
	ca.pkey_index, ca.port = C.uint32_t(a.PKeyIndex), C.uint32_t(a.Port)
	if a.AV.DGID.IsValid() {
		g := a.AV.DGID.As16()
		for i := range g {
			ca.dgid[i] = C.uint8_t(g[i])
		}
	}
	ca.traffic_class, ca.hop_limit, ca.flow_label = C.uint32_t(a.AV.TrafficClass), C.uint32_t(a.AV.HopLimit), C.uint32_t(a.AV.FlowLabel)
	ca.path_mtu, ca.dest_qpn = C.uint32_t(a.PathMTU), C.uint32_t(a.DestQPN)
	ca.rq_psn, ca.sq_psn = C.uint32_t(a.RQPSN), C.uint32_t(a.SQPSN)
	ca.max_dest_rd_atomic, ca.max_rd_atomic = C.uint32_t(a.MaxDestRdAtomic), C.uint32_t(a.MaxRdAtomic)
	ca.min_rnr_timer, ca.timeout = C.uint32_t(a.MinRNRTimer), C.uint32_t(a.Timeout)
	ca.retry_cnt, ca.rnr_retry = C.uint32_t(a.RetryCnt), C.uint32_t(a.RNRRetry)
	ca.qkey = C.uint32_t(a.QKey)
}

// snic_cm_attach_qp is rdma_create_qp's part after ibv_create_qp: the QP
// becomes the id's, moved to INIT.
//
//export snic_cm_attach_qp
func snic_cm_attach_qp(h C.uintptr_t, qpPtr C.uintptr_t, qpn C.uint32_t) C.int {
	return cmErr("create qp", value[*rdmacm.ID](h).AttachQP(cQP{ptr: qpPtr, qpn: uint32(qpn)}))
}

//export snic_cm_detach_qp
func snic_cm_detach_qp(h C.uintptr_t) {
	value[*rdmacm.ID](h).DetachQP()
}

//export snic_cm_init_qp_attr
func snic_cm_init_qp_attr(h C.uintptr_t, ca *C.struct_snic_qp_attr, mask *C.int) C.int {
	a, m, err := value[*rdmacm.ID](h).InitQPAttr(qp.State(ca.state))
	if err != nil {
		return cmErr("init qp attr", err)
	}
	*ca = C.struct_snic_qp_attr{}
	putQPAttr(&a, ca)
	*mask = C.int(m)
	return 0
}

//export snic_cm_connect
func snic_cm_connect(h C.uintptr_t, p *C.struct_snic_cm_param) C.int {
	return cmErr("connect", value[*rdmacm.ID](h).Connect(getParam(p)))
}

//export snic_cm_listen
func snic_cm_listen(h C.uintptr_t, backlog C.int) C.int {
	return cmErr("listen", value[*rdmacm.ID](h).Listen(int(backlog)))
}

//export snic_cm_accept
func snic_cm_accept(h C.uintptr_t, p *C.struct_snic_cm_param) C.int {
	return cmErr("accept", value[*rdmacm.ID](h).Accept(getParam(p)))
}

//export snic_cm_reject
func snic_cm_reject(h C.uintptr_t, pdata unsafe.Pointer, n C.int, reason C.int) C.int {
	var b []byte
	if pdata != nil && n > 0 {
		b = C.GoBytes(pdata, n)
	}
	return cmErr("reject", value[*rdmacm.ID](h).Reject(uint16(reason), b))
}

//export snic_cm_establish
func snic_cm_establish(h C.uintptr_t) C.int {
	return cmErr("establish", value[*rdmacm.ID](h).Establish())
}

//export snic_cm_notify
func snic_cm_notify(h C.uintptr_t, event C.int) C.int {
	return cmErr("notify", value[*rdmacm.ID](h).Notify(int(event)))
}

//export snic_cm_disconnect
func snic_cm_disconnect(h C.uintptr_t) C.int {
	return cmErr("disconnect", value[*rdmacm.ID](h).Disconnect())
}

// rdma_set_option's levels and names (rdma_cma.h).
const (
	optLevelID    = 0
	optLevelIB    = 1
	optTOS        = 0
	optReuseAddr  = 1
	optAFOnly     = 2
	optAckTimeout = 3
	optIBPath     = 1
)

// snic_cm_set_option: RDMA_OPTION_ID_TOS (the path's traffic class),
// _REUSEADDR, _AFONLY and _ACK_TIMEOUT as librdmacm documents them;
// RDMA_OPTION_IB_PATH (an InfiniBand path record from the SA) is
// accepted and ignored: a RoCE path is the IP route's.
//
//export snic_cm_set_option
func snic_cm_set_option(h C.uintptr_t, level, name C.int, val unsafe.Pointer, n C.size_t) C.int {
	id := value[*rdmacm.ID](h)
	if val == nil {
		return C.int(syscall.EINVAL)
	}
	switch {
	case level == optLevelID && name == optTOS && n >= 1:
		id.SetTOS(*(*uint8)(val))
	case level == optLevelID && name == optAckTimeout && n >= 1:
		id.SetAckTimeout(*(*uint8)(val))
	case level == optLevelID && name == optReuseAddr && n >= C.size_t(unsafe.Sizeof(C.int(0))):
		return cmErr("set option", id.SetReuseAddr(*(*C.int)(val) != 0))
	case level == optLevelID && name == optAFOnly && n >= C.size_t(unsafe.Sizeof(C.int(0))):
		return cmErr("set option", id.SetAFOnly(*(*C.int)(val) != 0))
	case level == optLevelIB && name == optIBPath:
	default:
		return C.int(syscall.EINVAL)
	}
	return 0
}
