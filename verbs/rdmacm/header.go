package rdmacm

import (
	"errors"
	"net/netip"
	"syscall"
)

// The RDMA IP CM service's private data header (IBA Annex A11, Linux's
// struct cma_hdr), which rdma_connect puts before the program's private
// data in the REQ: version 0.0, the IP version in the high nibble of
// byte 1, the source port, the source and destination IP addresses (an
// IPv4 one in the last 4 of its 16 bytes). The passive side learns the
// peer's address and port from it.
const hdrLen = 36

func appendHeader(b []byte, src, dst netip.AddrPort, user []byte) []byte {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	ipv := byte(6 << 4)
	if s.Is4() || (s.IsUnspecified() && d.Is4()) {
		ipv = 4 << 4
	}
	b = append(b, 0, ipv, byte(src.Port()>>8), byte(src.Port()))
	for _, a := range []netip.Addr{s, d} {
		var f [16]byte
		if a.Is4() {
			v := a.As4()
			copy(f[12:], v[:])
		} else if a.IsValid() {
			f = a.As16()
		}
		b = append(b, f[:]...)
	}
	return append(b, user...)
}

var errHeader = errors.New("rdmacm: REQ private data has no RDMA IP CM header")

// parseHeader splits a REQ's private data into the header's addresses
// and the program's part.
func parseHeader(b []byte) (src, dst netip.AddrPort, user []byte, err error) {
	if len(b) < hdrLen || b[0] != 0 {
		return src, dst, nil, errHeader
	}
	port := uint16(b[2])<<8 | uint16(b[3])
	var s, d netip.Addr
	switch b[1] >> 4 {
	case 4:
		s = netip.AddrFrom4([4]byte(b[16:20]))
		d = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		s = netip.AddrFrom16([16]byte(b[4:20])).Unmap()
		d = netip.AddrFrom16([16]byte(b[20:36])).Unmap()
	default:
		return src, dst, nil, errHeader
	}
	return netip.AddrPortFrom(s, port), netip.AddrPortFrom(d, 0), b[hdrLen:], nil
}

func asErrno(err error, en *syscall.Errno) bool { return errors.As(err, en) }
