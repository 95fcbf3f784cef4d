package dataplane

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/softnic/softnic/qp"
)

// MR is a registered memory region: the bytes the NIC may place into or
// read from, the virtual address range peers name them by, and the keys
// and access rights that guard them.
type MR struct {
	PD     uint32
	Addr   uint64 // the region's first virtual address (ibv_mr.addr)
	LKey   uint32
	RKey   uint32
	Access qp.Access
	buf    []byte
}

// Bytes returns the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// Length is the registered size in bytes.
func (m *MR) Length() int { return len(m.buf) }

// slice returns the n bytes at virtual address va, or false when any of
// them lies outside the region. Written so that no overflow can make a
// bad address look valid. A request's whole range (a RETH's DMA length,
// an atomic's 8 bytes) is checked before any of it is touched, as rxe's
// check_rkey checks the DMA length with mr_check_range.
func (m *MR) slice(va uint64, n uint32) ([]byte, bool) {
	if va < m.Addr {
		return nil, false
	}
	off := va - m.Addr
	if off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+uint64(n)], true
}

// addrOf is the virtual address an in-process region gets by default: the
// address of its first byte, as ibv_reg_mr reports.
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// Keys are an index into the engine's MR table in the upper 24 bits and a
// rolling 8-bit tag in the lower 8, so that a stale key of a deregistered
// region does not name its successor (the "key" byte of an IB L_Key).
func keyIndex(key uint32) uint32 { return key >> 8 }

var (
	ErrBadPD   = errors.New("dataplane: no such protection domain")
	ErrBadMR   = errors.New("dataplane: no such memory region")
	ErrEmptyMR = errors.New("dataplane: memory region has no bytes")
	// ErrBadAccess is ibv_reg_mr's EINVAL for access flags: a bit
	// softnic does not define, or remote write or atomic access without
	// local write. CheckAccess's errors wrap it and say which.
	ErrBadAccess = errors.New("dataplane: invalid memory region access flags (ibv_reg_mr: EINVAL)")
	ErrBusy      = errors.New("dataplane: resource still in use")
)

// lookupMR returns the live region with key (as lkey or rkey).
func (e *Engine) lookupMR(key uint32) *MR {
	i := keyIndex(key)
	if int(i) >= len(e.mrs) {
		return nil
	}
	m := e.mrs[i]
	if m == nil || m.LKey != key {
		return nil
	}
	return m
}

// remoteSlice resolves a peer's (rkey, va, n) to memory, checking the
// region exists, belongs to the QP's PD, grants the access and covers the
// whole range. Zero-length accesses need no key (IBA §9.4.3: an R_Key is
// not checked for a zero-length RDMA operation).
func (e *Engine) remoteSlice(q *QP, rkey uint32, va uint64, n uint32, need qp.Access) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	m := e.lookupMR(rkey)
	if m == nil || m.PD != q.pd || m.Access&need != need {
		return nil, false
	}
	return m.slice(va, n)
}

// localSlice resolves one SGE.
func (e *Engine) localSlice(q *QP, s *qp.SGE, off, n uint32, write bool) ([]byte, bool) {
	m := e.lookupMR(s.LKey)
	if m == nil || m.PD != q.pd || (write && m.Access&qp.AccessLocalWrite == 0) {
		return nil, false
	}
	return m.slice(s.Addr+uint64(off), n)
}

// checkSGL validates every SGE of a work request once, when the request
// starts, and returns the total length.
func (e *Engine) checkSGL(q *QP, sgl []qp.SGE, write bool) (uint32, bool) {
	var total uint64
	for i := range sgl {
		if sgl[i].Length > 0 {
			if _, ok := e.localSlice(q, &sgl[i], 0, sgl[i].Length, write); !ok {
				return 0, false
			}
		}
		total += uint64(sgl[i].Length)
	}
	if total > 1<<31 { // IBA: a message is at most 2^31 bytes
		return 0, false
	}
	return uint32(total), true
}

// copySGL copies between a message window [off, off+len(b)) and the SGL:
// gather (toSGL false) reads the SGL into b, scatter writes b into it.
func (e *Engine) copySGL(q *QP, sgl []qp.SGE, off uint32, b []byte, toSGL bool) bool {
	for i := range sgl {
		if len(b) == 0 {
			return true
		}
		s := &sgl[i]
		if off >= s.Length {
			off -= s.Length
			continue
		}
		n := min(s.Length-off, uint32(len(b)))
		mem, ok := e.localSlice(q, s, off, n, toSGL)
		if !ok {
			return false
		}
		if toSGL {
			copy(mem, b[:n])
		} else {
			copy(b[:n], mem)
		}
		b = b[n:]
		off = 0
	}
	return len(b) == 0
}

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
	for i := 1; i < len(e.mrs); i++ { // index 0 stays unused so that key 0 is never valid
		if e.mrs[i] == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(e.mrs) == 0 {
			e.mrs = append(e.mrs, nil)
		}
		idx = len(e.mrs)
		e.mrs = append(e.mrs, nil)
	}
	e.keyTag++
	key := uint32(idx)<<8 | uint32(e.keyTag)
	m := &MR{PD: pd, Addr: addr, LKey: key, RKey: key, Access: access, buf: buf}
	e.mrs[idx] = m
	e.pds[pd]++
	return m, nil
}

// CheckAccess is ibv_reg_mr's check of a region's access flags: only
// flags softnic defines (qp.AccessDefined), and remote write or remote
// atomic only with local write (a peer could otherwise change memory the
// owner registered as read-only for itself). Its errors wrap
// ErrBadAccess.
func CheckAccess(access qp.Access) error {
	if bad := access &^ qp.AccessDefined; bad != 0 {
		return fmt.Errorf("%w: undefined access bits %#x", ErrBadAccess, uint32(bad))
	}
	if access&(qp.AccessRemoteWrite|qp.AccessRemoteAtomic) != 0 && access&qp.AccessLocalWrite == 0 {
		return fmt.Errorf("%w: remote write or remote atomic access needs local write", ErrBadAccess)
	}
	return nil
}

// DeregMR invalidates m's keys; later accesses with them fail.
func (e *Engine) DeregMR(m *MR) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lookupMR(m.LKey) != m {
		return ErrBadMR
	}
	e.mrs[keyIndex(m.LKey)] = nil
	e.pds[m.PD]--
	return nil
}
