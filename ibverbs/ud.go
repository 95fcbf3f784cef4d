//go:build ibverbs

package main

/*
#include "snic.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime/cgo"
	"syscall"

	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// snic_go_create_ah is ibv_create_ah: the destination's MAC comes from
// the kernel's neighbours (cm.ResolveMAC, as modify-QP's for RC), and
// its hop limit is the path's, as the kernel writes a RoCE address
// vector's. A destination the kernel cannot resolve fails the call: the
// errno of the route lookup (ENETUNREACH), or ETIMEDOUT when no
// neighbour answered, as the kernel's address resolution ends.
//
//export snic_go_create_ah
func snic_go_create_ah(pdh C.uintptr_t, a *C.struct_snic_ah_attr, out *C.uintptr_t, num *C.uint32_t) C.int {
	pd := value[*pdObj](pdh)
	var gid [16]byte
	for i := range gid {
		gid[i] = byte(a.dgid[i])
	}
	dgid := netip.AddrFrom16(gid).Unmap()
	attr := verbs.AHAttr{DGID: dgid, TrafficClass: uint8(a.traffic_class), HopLimit: uint8(a.hop_limit),
		FlowLabel: uint32(a.flow_label), SGIDIndex: uint8(a.sgid_index)}
	if dgid == pd.ctx.dev.GID.Unmap() {
		attr.DMAC = pd.ctx.dev.MAC
	} else {
		mac, hops, err := cm.ResolveMAC(dgid, macTimeout)
		if err != nil {
			var en syscall.Errno
			if !errors.As(err, &en) {
				err = fmt.Errorf("%v: %w", err, syscall.ETIMEDOUT)
			}
			return errno("create ah: resolve the destination's MAC", err)
		}
		attr.DMAC, attr.HopLimit = mac, hops
	}
	ah, err := pd.pd.CreateAH(attr)
	if err != nil {
		return errno("create ah", err)
	}
	*num = C.uint32_t(ah.Handle())
	*out = C.uintptr_t(cgo.NewHandle(ah))
	return 0
}

//export snic_go_destroy_ah
func snic_go_destroy_ah(h C.uintptr_t) C.int {
	if err := value[*verbs.AH](h).Destroy(); err != nil {
		return errno("destroy ah", err)
	}
	cgo.Handle(h).Delete()
	return 0
}
