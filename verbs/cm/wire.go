package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/softnic/softnic/qp"
)

// Wire format, version 1. Every message is a 12-byte header and a body;
// all integers are big endian:
//
//	offset  size  field
//	0       4     magic "SNCM"
//	4       1     version (1)
//	5       1     type: 1 endpoints, 2 sync
//	6       2     reserved, zero
//	8       4     body length n, at most MaxBody
//	12      n     body
//
// An endpoints body is a 2-byte count (1..MaxQPs) followed by that many
// endpoints, one per QP, in QP order:
//
//	offset  size  field
//	0       4     QPN (24 bits: the top byte is zero)
//	4       4     initial PSN (24 bits: the top byte is zero)
//	8       16    GID: an IPv6 address, or an IPv4 address in its
//	              IPv4-mapped form ::ffff:a.b.c.d (the RoCEv2 GID of an
//	              IPv4 address, IBA Annex A17)
//	24      6     MAC address
//	30      4     rkey of the buffer
//	34      8     buffer address (virtual address the peer names it by)
//	42      8     buffer size in bytes
//	50      1     number of recovery schemes k, 0..MaxSchemes
//	51      ...   k times: 1-byte length (1..MaxSchemeLen) and the name,
//	              of the characters a-z 0-9 '-' '_', in preference order
//
// A sync body is an opaque payload (a benchmark's report, or nothing).
//
// A message carries at most MaxQPs endpoints in at most MaxBody bytes:
// 16384 QPs with a few short scheme names each (about 70 bytes an
// endpoint) fit; Marshal refuses a message that does not, rather than
// send one the peer would reject.
//
// Decoding is strict: a message either decodes to exactly the bytes
// Marshal would write for it or is rejected, so that a peer of another
// version or a stray client fails loudly at setup instead of producing a
// half-connected QP. The length prefix is checked against MaxBody before
// anything is allocated, so a hostile length cannot make the reader
// allocate more than that.
const (
	Version      = 1
	HeaderLen    = 12
	MaxBody      = 4 << 20
	MaxQPs       = 16384
	MaxSchemes   = 16
	MaxSchemeLen = 32

	endpointFixedLen = 51
)

var magic = [4]byte{'S', 'N', 'C', 'M'}

// Message types.
const (
	typeEndpoints = 1
	typeSync      = 2
)

// Errors a malformed message is reported with (wrapped with detail).
var (
	ErrBadMagic  = errors.New("cm: not a softnic connection-manager message (bad magic; is the peer softnic-bench?)")
	ErrVersion   = errors.New("cm: unsupported message version")
	ErrTooLarge  = errors.New("cm: message too large")
	ErrTruncated = errors.New("cm: message truncated")
	ErrMalformed = errors.New("cm: malformed message")
)

// Marshal encodes eps as an endpoints message.
func Marshal(eps []Endpoint) ([]byte, error) {
	if len(eps) == 0 || len(eps) > MaxQPs {
		return nil, fmt.Errorf("cm: %d endpoints; a message carries 1 to %d", len(eps), MaxQPs)
	}
	size := 2
	for i := range eps {
		if err := eps[i].Validate(); err != nil {
			return nil, fmt.Errorf("cm: endpoint %d: %w", i, err)
		}
		size += endpointFixedLen
		for _, s := range eps[i].Schemes {
			size += 1 + len(s)
		}
	}
	if size > MaxBody {
		return nil, fmt.Errorf("%w: %d endpoints with their scheme lists take %d bytes, a message at most %d (offer fewer schemes or use fewer QPs)",
			ErrTooLarge, len(eps), size, MaxBody)
	}
	b := appendHeader(make([]byte, 0, HeaderLen+size), typeEndpoints, size)
	b = binary.BigEndian.AppendUint16(b, uint16(len(eps)))
	for i := range eps {
		b = eps[i].append(b)
	}
	return b, nil
}

// Unmarshal decodes a whole endpoints message, header included.
func Unmarshal(msg []byte) ([]Endpoint, error) {
	typ, n, err := parseHeader(msg)
	if err != nil {
		return nil, err
	}
	if len(msg)-HeaderLen != n {
		if len(msg)-HeaderLen < n {
			return nil, fmt.Errorf("%w: header announces %d body bytes, %d present", ErrTruncated, n, len(msg)-HeaderLen)
		}
		return nil, fmt.Errorf("%w: %d bytes after the announced body", ErrMalformed, len(msg)-HeaderLen-n)
	}
	if typ != typeEndpoints {
		return nil, fmt.Errorf("%w: message type %d, want endpoints (%d)", ErrMalformed, typ, typeEndpoints)
	}
	return decodeEndpoints(msg[HeaderLen:])
}

func appendHeader(b []byte, typ byte, bodyLen int) []byte {
	b = append(b, magic[:]...)
	b = append(b, Version, typ, 0, 0)
	return binary.BigEndian.AppendUint32(b, uint32(bodyLen))
}

// parseHeader checks the 12-byte header at the start of b and returns the
// message type and the announced body length.
func parseHeader(b []byte) (typ byte, bodyLen int, err error) {
	if len(b) < HeaderLen {
		return 0, 0, fmt.Errorf("%w: %d header bytes, need %d", ErrTruncated, len(b), HeaderLen)
	}
	if [4]byte(b[0:4]) != magic {
		return 0, 0, ErrBadMagic
	}
	if b[4] != Version {
		return 0, 0, fmt.Errorf("%w: peer speaks version %d, this build speaks %d", ErrVersion, b[4], Version)
	}
	typ = b[5]
	if typ != typeEndpoints && typ != typeSync {
		return 0, 0, fmt.Errorf("%w: unknown message type %d", ErrMalformed, typ)
	}
	if b[6] != 0 || b[7] != 0 {
		return 0, 0, fmt.Errorf("%w: reserved header bytes are not zero", ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[8:12])
	if n > MaxBody {
		return 0, 0, fmt.Errorf("%w: body of %d bytes, at most %d", ErrTooLarge, n, MaxBody)
	}
	return typ, int(n), nil
}

// readMessage reads one message from r.
func readMessage(r io.Reader) (typ byte, body []byte, err error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: connection closed inside the header", ErrTruncated)
		}
		return 0, nil, err
	}
	typ, n, err := parseHeader(h[:])
	if err != nil {
		return 0, nil, err
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: connection closed inside a %d-byte body", ErrTruncated, n)
		}
		return 0, nil, err
	}
	return typ, body, nil
}

func decodeEndpoints(b []byte) ([]Endpoint, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: endpoints body of %d bytes has no count", ErrTruncated, len(b))
	}
	count := int(binary.BigEndian.Uint16(b))
	if count == 0 || count > MaxQPs {
		return nil, fmt.Errorf("%w: %d endpoints; a message carries 1 to %d", ErrMalformed, count, MaxQPs)
	}
	b = b[2:]
	// Bound the allocation by what the body can hold, not by the count.
	eps := make([]Endpoint, 0, min(count, len(b)/endpointFixedLen))
	for i := 0; i < count; i++ {
		ep, rest, err := decodeEndpoint(b)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		eps = append(eps, ep)
		b = rest
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last endpoint", ErrMalformed, len(b))
	}
	return eps, nil
}

func (e *Endpoint) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, e.QPN)
	b = binary.BigEndian.AppendUint32(b, uint32(e.PSN))
	gid := e.GID.As16() // an IPv4 address becomes ::ffff:a.b.c.d
	b = append(b, gid[:]...)
	b = append(b, e.MAC[:]...)
	b = binary.BigEndian.AppendUint32(b, e.RKey)
	b = binary.BigEndian.AppendUint64(b, e.Addr)
	b = binary.BigEndian.AppendUint64(b, e.Size)
	b = append(b, byte(len(e.Schemes)))
	for _, s := range e.Schemes {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeEndpoint(b []byte) (Endpoint, []byte, error) {
	if len(b) < endpointFixedLen {
		return Endpoint{}, nil, fmt.Errorf("%w: %d bytes left, an endpoint needs %d", ErrTruncated, len(b), endpointFixedLen)
	}
	e := Endpoint{
		QPN:  binary.BigEndian.Uint32(b[0:]),
		PSN:  qp.PSN(binary.BigEndian.Uint32(b[4:])),
		GID:  netip.AddrFrom16([16]byte(b[8:24])).Unmap(),
		MAC:  [6]byte(b[24:30]),
		RKey: binary.BigEndian.Uint32(b[30:]),
		Addr: binary.BigEndian.Uint64(b[34:]),
		Size: binary.BigEndian.Uint64(b[42:]),
	}
	k := int(b[50])
	b = b[endpointFixedLen:]
	if k > MaxSchemes {
		return Endpoint{}, nil, fmt.Errorf("%w: %d schemes, at most %d", ErrMalformed, k, MaxSchemes)
	}
	if k > 0 {
		e.Schemes = make([]string, 0, k)
	}
	for j := 0; j < k; j++ {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return Endpoint{}, nil, fmt.Errorf("%w: scheme name %d runs past the message", ErrTruncated, j)
		}
		n := int(b[0])
		e.Schemes = append(e.Schemes, string(b[1:1+n]))
		b = b[1+n:]
	}
	if err := e.Validate(); err != nil {
		return Endpoint{}, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return e, b, nil
}

// Validate checks that e can be sent and used: 24-bit QPN and PSN, a
// unicast GID, sane scheme names.
func (e *Endpoint) Validate() error {
	if e.QPN&^qp.PSNMask != 0 {
		return fmt.Errorf("QPN %#x does not fit 24 bits", e.QPN)
	}
	if !e.PSN.Valid() {
		return fmt.Errorf("PSN %#x does not fit 24 bits", uint32(e.PSN))
	}
	if !e.GID.IsValid() || e.GID.IsUnspecified() || e.GID.IsMulticast() || e.GID.Zone() != "" {
		return fmt.Errorf("GID %v is not a unicast IP address", e.GID)
	}
	if len(e.Schemes) > MaxSchemes {
		return fmt.Errorf("%d schemes, at most %d", len(e.Schemes), MaxSchemes)
	}
	for _, s := range e.Schemes {
		if err := validSchemeName(s); err != nil {
			return err
		}
	}
	return nil
}

func validSchemeName(s string) error {
	if len(s) == 0 || len(s) > MaxSchemeLen {
		return fmt.Errorf("scheme name %q: length must be 1 to %d", s, MaxSchemeLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("scheme name %q: only a-z, 0-9, '-' and '_' are allowed", s)
		}
	}
	return nil
}
