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
