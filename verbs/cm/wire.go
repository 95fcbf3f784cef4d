package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// Wire format, versions 1 and 2. Every message is a 12-byte header and a
// body; all integers are big endian:
//
//	offset  size  field
//	0       4     magic "SNCM"
//	4       1     version (1 or 2)
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
// Version 2 (StaR's stateless mode, docs/star.md) appends to every
// endpoint its StaR role and, from a server, its memory table:
//
//	size  field
//	1     role: 0 none, 1 server, 2 client
//	2     number of regions r, 0..MaxStarRegions (0 unless the role is server)
//	...   r times: 4 rkey, 8 address, 8 length, 1 access (bit 0 remote
//	      write, bit 1 remote read, at least one, nothing else)
//
// Marshal writes version 1 when no endpoint has a StaR role, so that a
// peer of version 1 still connects ordinary QPs, and version 2 otherwise;
// a version-1 peer refuses the latter loudly (ErrVersion). A version-2
// message in which no endpoint has a role is not canonical and is
// refused. Sync messages are always version 1.
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
	Version      = 2 // the newest this build reads and writes; it reads 1 too
	HeaderLen    = 12
	MaxBody      = 4 << 20
	MaxQPs       = 16384
	MaxSchemes   = 16
	MaxSchemeLen = 32
	// MaxStarRegions bounds a StaR server's memory table (version 2).
	MaxStarRegions = 1024

	endpointFixedLen = 51
	starRegionLen    = 21
	versionStar      = 2 // the first version with StaR roles
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
	size, vers := 2, byte(1)
	for i := range eps {
		if eps[i].Star != verbs.StarNone {
			vers = versionStar
		}
	}
	for i := range eps {
		if err := eps[i].Validate(); err != nil {
			return nil, fmt.Errorf("cm: endpoint %d: %w", i, err)
		}
		size += endpointFixedLen
		for _, s := range eps[i].Schemes {
			size += 1 + len(s)
		}
		if vers == versionStar {
			size += 3 + starRegionLen*len(eps[i].StarTable)
		}
	}
	if size > MaxBody {
		return nil, fmt.Errorf("%w: %d endpoints with their scheme lists take %d bytes, a message at most %d (offer fewer schemes or use fewer QPs)",
			ErrTooLarge, len(eps), size, MaxBody)
	}
	b := appendHeader(make([]byte, 0, HeaderLen+size), vers, typeEndpoints, size)
	b = binary.BigEndian.AppendUint16(b, uint16(len(eps)))
	for i := range eps {
		b = eps[i].append(b, vers)
	}
	return b, nil
}

// Unmarshal decodes a whole endpoints message, header included.
func Unmarshal(msg []byte) ([]Endpoint, error) {
	vers, typ, n, err := parseHeader(msg)
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
	return decodeEndpoints(msg[HeaderLen:], vers)
}

func appendHeader(b []byte, vers, typ byte, bodyLen int) []byte {
	b = append(b, magic[:]...)
	b = append(b, vers, typ, 0, 0)
	return binary.BigEndian.AppendUint32(b, uint32(bodyLen))
}

// parseHeader checks the 12-byte header at the start of b and returns the
// version, the message type and the announced body length.
func parseHeader(b []byte) (vers, typ byte, bodyLen int, err error) {
	if len(b) < HeaderLen {
		return 0, 0, 0, fmt.Errorf("%w: %d header bytes, need %d", ErrTruncated, len(b), HeaderLen)
	}
	if [4]byte(b[0:4]) != magic {
		return 0, 0, 0, ErrBadMagic
	}
	vers = b[4]
	if vers < 1 || vers > Version {
		return 0, 0, 0, fmt.Errorf("%w: peer speaks version %d, this build speaks 1 to %d", ErrVersion, vers, Version)
	}
	typ = b[5]
	if typ != typeEndpoints && typ != typeSync {
		return 0, 0, 0, fmt.Errorf("%w: unknown message type %d", ErrMalformed, typ)
	}
	if typ == typeSync && vers != 1 {
		return 0, 0, 0, fmt.Errorf("%w: a sync message of version %d (sync messages are version 1)", ErrMalformed, vers)
	}
	if b[6] != 0 || b[7] != 0 {
		return 0, 0, 0, fmt.Errorf("%w: reserved header bytes are not zero", ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[8:12])
	if n > MaxBody {
		return 0, 0, 0, fmt.Errorf("%w: body of %d bytes, at most %d", ErrTooLarge, n, MaxBody)
	}
	return vers, typ, int(n), nil
}

// readMessage reads one message from r.
func readMessage(r io.Reader) (vers, typ byte, body []byte, err error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, nil, fmt.Errorf("%w: connection closed inside the header", ErrTruncated)
		}
		return 0, 0, nil, err
	}
	vers, typ, n, err := parseHeader(h[:])
	if err != nil {
		return 0, 0, nil, err
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, nil, fmt.Errorf("%w: connection closed inside a %d-byte body", ErrTruncated, n)
		}
		return 0, 0, nil, err
	}
	return vers, typ, body, nil
}

func decodeEndpoints(b []byte, vers byte) ([]Endpoint, error) {
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
	star := false
	for i := 0; i < count; i++ {
		ep, rest, err := decodeEndpoint(b, vers)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		star = star || ep.Star != verbs.StarNone
		eps = append(eps, ep)
		b = rest
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last endpoint", ErrMalformed, len(b))
	}
	if vers == versionStar && !star {
		return nil, fmt.Errorf("%w: a version-%d message in which no endpoint has a StaR role (version 1 carries those)", ErrMalformed, vers)
	}
	return eps, nil
}

func (e *Endpoint) append(b []byte, vers byte) []byte {
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
	if vers < versionStar {
		return b
	}
	b = append(b, byte(e.Star))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.StarTable)))
	for _, r := range e.StarTable {
		b = binary.BigEndian.AppendUint32(b, r.RKey)
		b = binary.BigEndian.AppendUint64(b, r.VA)
		b = binary.BigEndian.AppendUint64(b, r.Length)
		var acc byte
		if r.Access&verbs.AccessRemoteWrite != 0 {
			acc |= 1
		}
		if r.Access&verbs.AccessRemoteRead != 0 {
			acc |= 2
		}
		b = append(b, acc)
	}
	return b
}

func decodeEndpoint(b []byte, vers byte) (Endpoint, []byte, error) {
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
	if vers >= versionStar {
		if len(b) < 3 {
			return Endpoint{}, nil, fmt.Errorf("%w: %d bytes left, an endpoint's StaR role and table count need 3", ErrTruncated, len(b))
		}
		role, r := b[0], int(binary.BigEndian.Uint16(b[1:3]))
		b = b[3:]
		if role > byte(verbs.StarClient) {
			return Endpoint{}, nil, fmt.Errorf("%w: StaR role %d", ErrMalformed, role)
		}
		if r > MaxStarRegions {
			return Endpoint{}, nil, fmt.Errorf("%w: a memory table of %d regions, at most %d", ErrMalformed, r, MaxStarRegions)
		}
		if len(b) < r*starRegionLen {
			return Endpoint{}, nil, fmt.Errorf("%w: a memory table of %d regions runs past the message", ErrTruncated, r)
		}
		e.Star = verbs.StarRole(role)
		if r > 0 {
			e.StarTable = make([]verbs.StarRegion, r)
		}
		for j := range e.StarTable {
			acc := b[20]
			if acc == 0 || acc&^3 != 0 {
				return Endpoint{}, nil, fmt.Errorf("%w: memory table region %d: access bits %#x", ErrMalformed, j, acc)
			}
			reg := verbs.StarRegion{RKey: binary.BigEndian.Uint32(b[0:]), VA: binary.BigEndian.Uint64(b[4:]), Length: binary.BigEndian.Uint64(b[12:])}
			if acc&1 != 0 {
				reg.Access |= verbs.AccessRemoteWrite
			}
			if acc&2 != 0 {
				reg.Access |= verbs.AccessRemoteRead
			}
			e.StarTable[j] = reg
			b = b[starRegionLen:]
		}
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
	if e.Star > verbs.StarClient {
		return fmt.Errorf("unknown StaR role %d", uint8(e.Star))
	}
	if len(e.StarTable) > 0 && e.Star != verbs.StarServer {
		return fmt.Errorf("a memory table from a StaR %v endpoint: only a server sends one", e.Star)
	}
	if len(e.StarTable) > MaxStarRegions {
		return fmt.Errorf("a memory table of %d regions, at most %d", len(e.StarTable), MaxStarRegions)
	}
	for j, r := range e.StarTable {
		if r.Access == 0 || r.Access&^(verbs.AccessRemoteWrite|verbs.AccessRemoteRead) != 0 {
			return fmt.Errorf("memory table region %d: access %#x is not remote write or read", j, uint32(r.Access))
		}
		if r.VA+r.Length < r.VA {
			return fmt.Errorf("memory table region %d: %d bytes at %#x wrap around", j, r.Length, r.VA)
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
