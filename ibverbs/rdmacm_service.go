//go:build ibverbs

package main

/*
#define SNIC_CM_NO_PROTOTYPES
#include "snic_cm.h"
*/
import "C"

import (
	"net/netip"
	"sync"
	"syscall"

	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cmservice"
	"github.com/softnic/softnic/verbs/rdmacm"
)

// The rdma_cm's CM service: a cmservice.CM (the IBA CM on the NIC's QP1)
// over a CM channel of the device context the ids use (rdmacm/cma.c's
// one ibv_context on the daemon of SOFTNIC_SOCKET), so that the
// connections name QPs of that daemon client, as the daemon requires.
// The channel is opened at the first rdma_listen or rdma_connect; its
// events are read by cmservice's goroutine and reach the ids' event
// channels through the state machine's handlers.

func init() { cmService = &deviceService{} }

// deviceService opens the cmservice.CM on the registered context at
// first use.
type deviceService struct {
	mu  sync.Mutex
	ctx *verbs.Context
	cm  *cmservice.CM
}

var _ rdmacm.Service = (*deviceService)(nil)

// snic_cm_set_device registers the device context of the ids (the first
// one wins: cma.c opens one and keeps it).
//
//export snic_cm_set_device
func snic_cm_set_device(ctx C.uintptr_t) C.int {
	h := C.snic_context_handle_c(ctx)
	if h == 0 {
		return C.int(syscall.EINVAL)
	}
	s := cmService.(*deviceService)
	s.mu.Lock()
	if s.ctx == nil {
		s.ctx = value[*context](h).c
	}
	s.mu.Unlock()
	return 0
}

func (s *deviceService) service() (*cmservice.CM, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cm != nil {
		return s.cm, nil
	}
	if s.ctx == nil {
		return nil, syscall.ENODEV
	}
	m, err := cmservice.New(s.ctx, cmservice.Options{})
	if err != nil {
		if debug {
			errno("rdma_cm: CM channel", err)
		}
		return nil, err
	}
	s.cm = m
	return m, nil
}

func (s *deviceService) Listen(serviceID uint64, local netip.Addr, h rdmacm.Handler) (rdmacm.Listener, error) {
	m, err := s.service()
	if err != nil {
		return nil, err
	}
	return m.Listen(serviceID, local, h)
}

func (s *deviceService) Connect(serviceID uint64, path rdmacm.Path, p rdmacm.ConnParam, h rdmacm.Handler) (rdmacm.Conn, error) {
	m, err := s.service()
	if err != nil {
		return nil, err
	}
	return m.Connect(serviceID, path, p, h)
}

func (s *deviceService) Resolve(serviceID uint64, path rdmacm.Path, privateData []byte, h rdmacm.Handler) (rdmacm.Conn, error) {
	m, err := s.service()
	if err != nil {
		return nil, err
	}
	return m.Resolve(serviceID, path, privateData, h)
}
