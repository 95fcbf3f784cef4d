package dataplane

import "github.com/softnic/softnic/qp"

// This file resolves memory: local SGLs and a peer's (rkey, va, length)
// against the registered regions, with the checks IBA asks for; the
// transports use it to place and gather payload.

// memTable is the NIC's table of memory regions (its MTT), indexed by the
// key's upper bits.
type memTable struct {
	mrs    []*MR
	keyTag uint8
}

// anyPD is the protection domain of an access that names no QP, StaR's
// RDP and GD (star.go): no PD handle is 0, and 0 matches every region.
const anyPD uint32 = 0

// lookupMR returns the live region with key (as lkey or rkey).
func (t *memTable) lookup(key uint32) *MR {
	i := keyIndex(key)
	if int(i) >= len(t.mrs) {
		return nil
	}
	m := t.mrs[i]
	if m == nil || m.LKey != key {
		return nil
	}
	return m
}

// remoteSlice resolves a peer's (rkey, va, n) to memory, checking the
// region exists, belongs to the QP's PD, grants the access and covers the
// whole range. Zero-length accesses need no key (IBA §9.4.3: an R_Key is
// not checked for a zero-length RDMA operation). pd is anyPD for a packet
// that names no QP, StaR's RDP and GD (star.go): there is no PD to
// match. StaR's server trusts its clients' security tables (StaR §3.2):
// only the regions a connection's server allowed reach the client's
// table, and only packets the table lets through reach this NIC.
func (t *memTable) remoteSlice(pd uint32, rkey uint32, va uint64, n uint32, need qp.Access) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	m := t.lookup(rkey)
	if m == nil || pd != anyPD && m.PD != pd || m.Access&need != need {
		return nil, false
	}
	return m.slice(va, n)
}

// localSlice resolves one SGE.
func (t *memTable) localSlice(pd uint32, s *qp.SGE, off, n uint32, write bool) ([]byte, bool) {
	m := t.lookup(s.LKey)
	if m == nil || m.PD != pd || (write && m.Access&qp.AccessLocalWrite == 0) {
		return nil, false
	}
	return m.slice(s.Addr+uint64(off), n)
}

// checkSGL validates every SGE of a work request once, when the request
// starts, and returns the total length.
func (t *memTable) checkSGL(pd uint32, sgl []qp.SGE, write bool) (uint32, bool) {
	var total uint64
	for i := range sgl {
		if sgl[i].Length > 0 {
			if _, ok := t.localSlice(pd, &sgl[i], 0, sgl[i].Length, write); !ok {
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
func (t *memTable) copySGL(pd uint32, sgl []qp.SGE, off uint32, b []byte, toSGL bool) bool {
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
		mem, ok := t.localSlice(pd, s, off, n, toSGL)
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
