package ibcm

import (
	"errors"
	"fmt"
	"net/netip"
)

// rdma_cm port spaces (enum rdma_ucm_port_space) and the IB service IDs
// rdma_cm derives from them: RDMA_IB_IP_PS_* = 0x01000000 | ps<<16, with
// the port in the low 16 bits (cma_get_service_id).
const (
	PortSpaceTCP = 0x0106 // RDMA_PS_TCP: RC connections
	PortSpaceUDP = 0x0111 // RDMA_PS_UDP: UD, resolved with SIDR
	PortSpaceIB  = 0x013F // RDMA_PS_IB: RC or UD

	ServiceIDPrefixTCP uint64 = 0x0000000001060000 // RDMA_IB_IP_PS_TCP
	ServiceIDPrefixUDP uint64 = 0x0000000001110000 // RDMA_IB_IP_PS_UDP
	ServiceIDPrefixIB  uint64 = 0x00000000013F0000 // RDMA_IB_IP_PS_IB
	ServiceIDPSMask    uint64 = 0xFFFFFFFFFFFF0000 // RDMA_IB_IP_PS_MASK
)

// The CM timing rdma_cm uses on RoCE (cma.c): both CM response timeouts
// 4.096 us * 2^20 (4.3 s), 15 CM retries, a packet lifetime of
// 4.096 us * 2^16 (CMA_IBOE_PACKET_LIFETIME in current kernels).
const (
	CMAResponseTimeout    = 20
	CMAMaxCMRetries       = 15
	CMAIBoEPacketLifeTime = 16
)

// RoCEPath is the primary path of a RoCEv2 connection from src to dst as
// Linux's CM fills it: permissive LIDs, the addresses as GIDs, and the
// traffic class, hop limit and local ACK timeout given. A hop limit above
// 1 (routed RoCEv2) leaves subnet local clear, as cm_format_req does.
func RoCEPath(src, dst netip.Addr, trafficClass, hopLimit, localACKTimeout uint8) Path {
	return Path{LocalLID: LIDPermissive, RemoteLID: LIDPermissive, LocalGID: GIDFromAddr(src),
		RemoteGID: GIDFromAddr(dst), TrafficClass: trafficClass, HopLimit: hopLimit,
		SubnetLocal: hopLimit <= 1, LocalACKTimeout: localACKTimeout}
}

// ServiceID is the service ID rdma_cm uses for a port in a port space.
func ServiceID(portSpace, port uint16) uint64 {
	return uint64(portSpace)<<16 | uint64(port)
}

// ServicePort splits a service ID rdma_cm made (ServiceID) into its port
// space and port; ok is false for a service ID outside the rdma_cm range.
func ServicePort(serviceID uint64) (portSpace, port uint16, ok bool) {
	switch serviceID & ServiceIDPSMask {
	case ServiceIDPrefixTCP, ServiceIDPrefixUDP, ServiceIDPrefixIB:
		return uint16(serviceID >> 16), uint16(serviceID), true
	}
	return 0, 0, false
}

// CMAHeaderSize is the size of the header rdma_cm puts at the start of the
// REQ (and SIDR_REQ) private data; the rest, 56 bytes in a REQ, is the
// application's private data.
const CMAHeaderSize = 36

// CMAVersion is the only cma_hdr version (CMA_VERSION).
const CMAVersion = 0x00

// ErrCMAHeader is a REQ private data that does not start with a valid
// rdma_cm header.
var ErrCMAHeader = errors.New("ibcm: bad rdma_cm private data header")

// CMAHeader is rdma_cm's struct cma_hdr: version, IP version (in the top
// nibble of byte 1), the source port of the active side, and the source
// and destination IP addresses (an IPv4 address in the last four bytes of
// its 16, the others zero).
type CMAHeader struct {
	Version uint8
	SrcPort uint16
	Src     netip.Addr // the active side's address
	Dst     netip.Addr // the address the active side connects to
}

// Put writes h into b[:36]. Src and Dst must be of one family.
func (h *CMAHeader) Put(b []byte) error {
	if len(b) < CMAHeaderSize {
		return fmt.Errorf("%w: buffer of %d bytes", ErrCMAHeader, len(b))
	}
	clear(b[:CMAHeaderSize])
	b[0] = h.Version
	b[2], b[3] = byte(h.SrcPort>>8), byte(h.SrcPort)
	switch {
	case h.Src.Is4() && h.Dst.Is4():
		b[1] = 4 << 4
		s, d := h.Src.As4(), h.Dst.As4()
		copy(b[4+12:20], s[:])
		copy(b[20+12:36], d[:])
	case h.Src.Is6() && h.Dst.Is6() && !h.Src.Is4In6() && !h.Dst.Is4In6():
		b[1] = 6 << 4
		s, d := h.Src.As16(), h.Dst.As16()
		copy(b[4:20], s[:])
		copy(b[20:36], d[:])
	default:
		return fmt.Errorf("%w: addresses %v and %v are not both IPv4 or both IPv6", ErrCMAHeader, h.Src, h.Dst)
	}
	return nil
}

// ParseCMAHeader reads the rdma_cm header at the start of REQ private data,
// checking the version and IP version as cma_check_req_qp_type and
// cma_save_ip_info do.
func ParseCMAHeader(b []byte) (CMAHeader, error) {
	var h CMAHeader
	if len(b) < CMAHeaderSize {
		return h, fmt.Errorf("%w: %d bytes", ErrCMAHeader, len(b))
	}
	h.Version = b[0]
	if h.Version != CMAVersion {
		return h, fmt.Errorf("%w: version %d", ErrCMAHeader, h.Version)
	}
	h.SrcPort = uint16(b[2])<<8 | uint16(b[3])
	switch b[1] >> 4 {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(b[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(b[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return h, fmt.Errorf("%w: IP version %d", ErrCMAHeader, b[1]>>4)
	}
	return h, nil
}
