// Package qp holds what a queue pair is, independent of the wire and the
// network: the 24-bit PSN and MSN arithmetic, the IB QP state machine with
// its legal transitions (IBA §10.3.1, ibv_modify_qp(3)), the attributes a
// modify carries, and fixed-capacity rings for send and receive queues.
//
// PSNs live in a 24-bit circular space. They are never compared with `<`:
// PSN.Diff gives the signed distance in (-2^23, 2^23], which is what the
// requester and responder windows use (IBA §9.7.1; rxe psn_compare).
package qp

// PSN is a 24-bit packet sequence number.
type PSN uint32

// PSNMask keeps the 24 bits a PSN has on the wire.
const PSNMask = 0xFFFFFF

// psnHalf is half the PSN space: the largest forward distance that still
// counts as "after" (IBA §9.7.1: the valid window is half the space).
const psnHalf = 1 << 23

// Add returns p advanced by n, wrapped at 2^24.
func (p PSN) Add(n uint32) PSN { return PSN((uint32(p) + n) & PSNMask) }

// Next returns p+1, wrapped.
func (p PSN) Next() PSN { return p.Add(1) }

// Prev returns p-1, wrapped.
func (p PSN) Prev() PSN { return PSN((uint32(p) - 1) & PSNMask) }

// Diff returns the signed distance p-q in the circular space, in
// (-2^23, 2^23]. Diff > 0 means p is after q.
func (p PSN) Diff(q PSN) int32 {
	d := int32((uint32(p) - uint32(q)) & PSNMask)
	if d > psnHalf {
		d -= 1 << 24
	}
	return d
}

// Before reports whether p comes strictly before q.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p comes strictly after q.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return uint32(p)&^PSNMask == 0 }

// MSN is the 24-bit message sequence number the responder returns in AETH.
type MSN uint32

// Next returns m+1, wrapped at 2^24.
func (m MSN) Next() MSN { return MSN((uint32(m) + 1) & PSNMask) }
