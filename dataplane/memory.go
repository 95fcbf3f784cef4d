package dataplane

import "github.com/softnic/softnic/qp"

// This file resolves memory: local SGLs and a peer's (rkey, va, length)
// against the registered regions, with the checks IBA asks for; the
// stages use it to place and gather payload.

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
// not checked for a zero-length RDMA operation). q is nil for a packet
// that names no QP, StaR's RDP and GD (star.go): there is no PD to
// match. StaR's server trusts its clients' security tables (StaR §3.2):
// only the regions a connection's server allowed reach the client's
// table, and only packets the table lets through reach this NIC.
func (e *Engine) remoteSlice(q *QP, rkey uint32, va uint64, n uint32, need qp.Access) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	m := e.lookupMR(rkey)
	if m == nil || q != nil && m.PD != q.pd || m.Access&need != need {
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
