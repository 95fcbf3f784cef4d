// Package ibcm is the InfiniBand Communication Management protocol (IBA
// vol. 1 chapter 12) as Linux's ib_cm and rdma_cm speak it over RoCEv2:
// the CM MADs (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP) at
// their IBA bit offsets, the rdma_cm private-data header and service IDs,
// and a per-connection state machine for the active and the passive side.
//
// The package is transport-agnostic and clock-free, like the rest of
// softnic: it sends a 256-byte MAD through a Transport (to the peer's
// general services QP, QP1, with the GSI Q_Key 0x80010000, which is the
// caller's business), is handed received MADs with HandleMAD, and is given
// the time as an argument (Tick, NextDeadline). A CM is not safe for
// concurrent use: one goroutine drives it, as one goroutine drives a
// dataplane engine.
//
// docs/rdmacm.md describes what is implemented and what is not.
package ibcm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// MAD layout (IBA 13.4.2, the common MAD header).
const (
	MADSize    = 256 // every CM MAD is exactly this long
	HeaderSize = 24  // common MAD header
	DataSize   = MADSize - HeaderSize

	BaseVersion    = 1    // IB_MGMT_BASE_VERSION
	MgmtClassCM    = 0x07 // IB_MGMT_CLASS_CM
	CMClassVersion = 2    // IB_CM_CLASS_VERSION (IBA 1.2)
	MethodSend     = 0x03 // IB_MGMT_METHOD_SEND: every CM message is a Send

	// GSIQKey is the Q_Key of QP1, the general services QP that carries CM
	// MADs (IB_QP1_QKEY).
	GSIQKey = 0x80010000
	// GSIQPN is the general services QP.
	GSIQPN = 1
)

// Attribute IDs of the CM messages (ib_cm.h CM_*_ATTR_ID).
const (
	AttrREQ     uint16 = 0x0010
	AttrMRA     uint16 = 0x0011
	AttrREJ     uint16 = 0x0012
	AttrREP     uint16 = 0x0013
	AttrRTU     uint16 = 0x0014
	AttrDREQ    uint16 = 0x0015
	AttrDREP    uint16 = 0x0016
	AttrSIDRREQ uint16 = 0x0017
	AttrSIDRREP uint16 = 0x0018
	AttrLAP     uint16 = 0x0019
	AttrAPR     uint16 = 0x001A
)

// Private data sizes (ib_cm.h enum ib_cm_data_size, IBA tables 106-120).
const (
	REQPrivateDataSize     = 92
	MRAPrivateDataSize     = 222
	REJPrivateDataSize     = 148
	REPPrivateDataSize     = 196
	RTUPrivateDataSize     = 224
	DREQPrivateDataSize    = 220
	DREPPrivateDataSize    = 224
	REJARILength           = 72
	SIDRREQPrivateDataSize = 216
	SIDRREPPrivateDataSize = 136
	SIDRREPInfoLength      = 72
)

// Decode errors. Every malformed MAD is one of these (wrapped with detail).
var (
	ErrLength       = errors.New("ibcm: MAD is not 256 bytes")
	ErrBaseVersion  = errors.New("ibcm: MAD base version is not 1")
	ErrMgmtClass    = errors.New("ibcm: MAD management class is not CM (0x07)")
	ErrClassVersion = errors.New("ibcm: CM class version is not 2")
	ErrMethod       = errors.New("ibcm: CM MAD method is not Send (0x03)")
	ErrAttr         = errors.New("ibcm: unknown CM attribute")
	ErrWrongAttr    = errors.New("ibcm: MAD carries another attribute")
	ErrField        = errors.New("ibcm: field value does not fit its IBA width")
	ErrPrivateData  = errors.New("ibcm: private data too long")
	ErrBuffer       = errors.New("ibcm: buffer shorter than 256 bytes")
)

// Header is the common MAD header (IBA 13.4.2).
type Header struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64 // transaction ID
	AttrID        uint16
	AttrMod       uint32
}

// cmHeader is the header every CM message is sent with (cm_format_mad_hdr).
func cmHeader(attr uint16, tid uint64) Header {
	return Header{BaseVersion: BaseVersion, MgmtClass: MgmtClassCM, ClassVersion: CMClassVersion,
		Method: MethodSend, TID: tid, AttrID: attr}
}

func (h *Header) put(b []byte) {
	b[0], b[1], b[2], b[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(b[4:], h.Status)
	binary.BigEndian.PutUint16(b[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(b[8:], h.TID)
	binary.BigEndian.PutUint16(b[16:], h.AttrID)
	b[18], b[19] = 0, 0 // reserved
	binary.BigEndian.PutUint32(b[20:], h.AttrMod)
}

// ParseHeader reads and checks the common header of a CM MAD: exactly 256
// bytes, base version 1, class CM, class version 2, method Send and a CM
// attribute this package knows (LAP and APR parse but are not handled).
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) != MADSize {
		return h, fmt.Errorf("%w: %d bytes", ErrLength, len(b))
	}
	h = Header{BaseVersion: b[0], MgmtClass: b[1], ClassVersion: b[2], Method: b[3],
		Status: binary.BigEndian.Uint16(b[4:]), ClassSpecific: binary.BigEndian.Uint16(b[6:]),
		TID: binary.BigEndian.Uint64(b[8:]), AttrID: binary.BigEndian.Uint16(b[16:]),
		AttrMod: binary.BigEndian.Uint32(b[20:])}
	switch {
	case h.BaseVersion != BaseVersion:
		return h, fmt.Errorf("%w: %d", ErrBaseVersion, h.BaseVersion)
	case h.MgmtClass != MgmtClassCM:
		return h, fmt.Errorf("%w: 0x%02x", ErrMgmtClass, h.MgmtClass)
	case h.ClassVersion != CMClassVersion:
		return h, fmt.Errorf("%w: %d", ErrClassVersion, h.ClassVersion)
	case h.Method != MethodSend:
		return h, fmt.Errorf("%w: 0x%02x", ErrMethod, h.Method)
	case h.AttrID < AttrREQ || h.AttrID > AttrAPR:
		return h, fmt.Errorf("%w: 0x%04x", ErrAttr, h.AttrID)
	}
	return h, nil
}

// AttrName is the IBA name of a CM attribute ID.
func AttrName(attr uint16) string {
	switch attr {
	case AttrREQ:
		return "REQ"
	case AttrMRA:
		return "MRA"
	case AttrREJ:
		return "REJ"
	case AttrREP:
		return "REP"
	case AttrRTU:
		return "RTU"
	case AttrDREQ:
		return "DREQ"
	case AttrDREP:
		return "DREP"
	case AttrSIDRREQ:
		return "SIDR_REQ"
	case AttrSIDRREP:
		return "SIDR_REP"
	case AttrLAP:
		return "LAP"
	case AttrAPR:
		return "APR"
	}
	return fmt.Sprintf("attr 0x%04x", attr)
}

// GID is a 128-bit port GID as carried in a CM path. RoCEv2 GIDs are IP
// addresses: IPv6 as is, IPv4 as the IPv4-mapped IPv6 address
// ::ffff:a.b.c.d.
type GID [16]byte

// GIDFromAddr is the RoCEv2 GID of an IP address (IPv4 mapped into IPv6).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr is the IP address of a RoCEv2 GID, IPv4 for a mapped address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

func (g GID) String() string { return g.Addr().String() }

// LIDPermissive is the LID RoCE CMs put in a path's LID fields (RoCE has no
// LIDs; IB_LID_PERMISSIVE).
const LIDPermissive = 0xFFFF

// Path is a CM path (IBA 12.6.5, REQ bytes 52-95 and 96-139 after the
// header), seen from the sender of the message: Local is the sender's port.
type Path struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        GID
	RemoteGID       GID
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits, IBA rate enum (ib_rate)
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits, 4.096 us * 2^n
}

// REQ is the connection request (IBA table 106).
type REQ struct {
	LocalCommID             uint32
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits
	TransportServiceType    uint8  // 2 bits: TransportRC, TransportUC, TransportRD, TransportExtended
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits, IBA MTU enum (1=256 .. 5=4096)
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransportType   uint8 // 3 bits
	Primary                 Path
	Alternate               Path
	SAPSupported            bool
	PrivateData             [REQPrivateDataSize]byte
}

// Transport service types of REQ.TransportServiceType.
const (
	TransportRC       = 0
	TransportUC       = 1
	TransportRD       = 2
	TransportExtended = 3
)

// MRA is the message receipt acknowledgement (IBA table 107).
type MRA struct {
	LocalCommID    uint32
	RemoteCommID   uint32
	MessageMRAed   uint8 // 2 bits: MsgREQ, MsgREP, MsgOther (LAP)
	ServiceTimeout uint8 // 5 bits
	PrivateData    [MRAPrivateDataSize]byte
}

// Values of MRA.MessageMRAed and REJ.MessageRejected (CM_MSG_RESPONSE_*).
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2
)

// REJ is the reject (IBA table 108).
type REJ struct {
	LocalCommID     uint32
	RemoteCommID    uint32
	MessageRejected uint8 // 2 bits
	ARILength       uint8 // 7 bits
	Reason          uint16
	ARI             [REJARILength]byte
	PrivateData     [REJPrivateDataSize]byte
}

// REP is the reply (IBA table 110).
type REP struct {
	LocalCommID         uint32
	RemoteCommID        uint32
	LocalQKey           uint32
	LocalQPN            uint32 // 24 bits
	LocalEECN           uint32 // 24 bits
	StartingPSN         uint32 // 24 bits
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
	PrivateData         [REPPrivateDataSize]byte
}

// RTU is ready to use (IBA table 111).
type RTU struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [RTUPrivateDataSize]byte
}

// DREQ is the disconnect request (IBA table 112).
type DREQ struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32 // 24 bits: the receiver's QPN (or EECN)
	PrivateData  [DREQPrivateDataSize]byte
}

// DREP is the disconnect reply (IBA table 113).
type DREP struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [DREPPrivateDataSize]byte
}

// SIDRREQ is the service ID resolution request (IBA table 119).
type SIDRREQ struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData [SIDRREQPrivateDataSize]byte
}

// SIDRREP is the service ID resolution reply (IBA table 120).
type SIDRREP struct {
	RequestID   uint32
	Status      uint8
	InfoLength  uint8
	QPN         uint32 // 24 bits
	ServiceID   uint64
	QKey        uint32
	Info        [SIDRREPInfoLength]byte
	PrivateData [SIDRREPPrivateDataSize]byte
}

// SIDR_REP status values (enum ib_cm_sidr_status).
const (
	SIDRSuccess            = 0
	SIDRUnsupported        = 1
	SIDRReject             = 2
	SIDRNoQP               = 3
	SIDRRedirect           = 4
	SIDRUnsupportedVersion = 5
)

// Message is one CM message body. Marshal and Unmarshal add and check the
// common header.
type Message interface {
	AttrID() uint16
	putBody(d []byte) error // d is the 232 bytes after the header, zeroed
	getBody(d []byte)
}

func (*REQ) AttrID() uint16     { return AttrREQ }
func (*MRA) AttrID() uint16     { return AttrMRA }
func (*REJ) AttrID() uint16     { return AttrREJ }
func (*REP) AttrID() uint16     { return AttrREP }
func (*RTU) AttrID() uint16     { return AttrRTU }
func (*DREQ) AttrID() uint16    { return AttrDREQ }
func (*DREP) AttrID() uint16    { return AttrDREP }
func (*SIDRREQ) AttrID() uint16 { return AttrSIDRREQ }
func (*SIDRREP) AttrID() uint16 { return AttrSIDRREP }

// Marshal writes m with a CM header carrying tid into b[:256]. It fails if b
// is shorter or a field does not fit its IBA width; reserved bits are zero.
func Marshal(b []byte, tid uint64, m Message) error {
	if len(b) < MADSize {
		return ErrBuffer
	}
	b = b[:MADSize]
	clear(b)
	h := cmHeader(m.AttrID(), tid)
	h.put(b)
	return m.putBody(b[HeaderSize:])
}

// Unmarshal checks b's header (ParseHeader) and that it carries m's
// attribute, then reads m from it. Decoding never fails on field values:
// every bit pattern of a 256-byte CM MAD is some message.
func Unmarshal(b []byte, m Message) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.AttrID != m.AttrID() {
		return h, fmt.Errorf("%w: %s, not %s", ErrWrongAttr, AttrName(h.AttrID), AttrName(m.AttrID()))
	}
	m.getBody(b[HeaderSize:])
	return h, nil
}

// Field helpers over the body d (offsets are IBA table offsets, counted
// from the end of the MAD header). IBA numbers bits from the most
// significant: "byte 43 bits 0-4" are the top five bits of byte 43.

func fits(v uint32, bits uint) bool { return v>>bits == 0 }

func put24(d []byte, v uint32) { d[0], d[1], d[2] = byte(v>>16), byte(v>>8), byte(v) }
func get24(d []byte) uint32    { return uint32(d[0])<<16 | uint32(d[1])<<8 | uint32(d[2]) }

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

type checker struct{ bad string }

func (c *checker) w(name string, v uint32, bits uint) {
	if c.bad == "" && !fits(v, bits) {
		c.bad = fmt.Sprintf("%s=%d exceeds %d bits", name, v, bits)
	}
}

func (c *checker) err() error {
	if c.bad == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrField, c.bad)
}

func putPath(d []byte, p *Path, c *checker) {
	c.w("flow label", p.FlowLabel, 20)
	c.w("packet rate", uint32(p.PacketRate), 6)
	c.w("SL", uint32(p.SL), 4)
	c.w("local ACK timeout", uint32(p.LocalACKTimeout), 5)
	binary.BigEndian.PutUint16(d[0:], p.LocalLID)
	binary.BigEndian.PutUint16(d[2:], p.RemoteLID)
	copy(d[4:20], p.LocalGID[:])
	copy(d[20:36], p.RemoteGID[:])
	binary.BigEndian.PutUint32(d[36:], p.FlowLabel<<12|uint32(p.PacketRate&0x3f))
	d[40] = p.TrafficClass
	d[41] = p.HopLimit
	d[42] = p.SL<<4 | b2u(p.SubnetLocal)<<3
	d[43] |= p.LocalACKTimeout << 3 // keeps REQ's SAP bit, set by the caller
}

func getPath(d []byte, p *Path) {
	p.LocalLID = binary.BigEndian.Uint16(d[0:])
	p.RemoteLID = binary.BigEndian.Uint16(d[2:])
	copy(p.LocalGID[:], d[4:20])
	copy(p.RemoteGID[:], d[20:36])
	w := binary.BigEndian.Uint32(d[36:])
	p.FlowLabel = w >> 12
	p.PacketRate = uint8(w & 0x3f)
	p.TrafficClass = d[40]
	p.HopLimit = d[41]
	p.SL = d[42] >> 4
	p.SubnetLocal = d[42]&0x08 != 0
	p.LocalACKTimeout = d[43] >> 3
}

func (m *REQ) putBody(d []byte) error {
	var c checker
	c.w("local QPN", m.LocalQPN, 24)
	c.w("local EECN", m.LocalEECN, 24)
	c.w("remote EECN", m.RemoteEECN, 24)
	c.w("remote CM response timeout", uint32(m.RemoteCMResponseTimeout), 5)
	c.w("transport service type", uint32(m.TransportServiceType), 2)
	c.w("starting PSN", m.StartingPSN, 24)
	c.w("local CM response timeout", uint32(m.LocalCMResponseTimeout), 5)
	c.w("retry count", uint32(m.RetryCount), 3)
	c.w("path MTU", uint32(m.PathMTU), 4)
	c.w("RNR retry count", uint32(m.RNRRetryCount), 3)
	c.w("max CM retries", uint32(m.MaxCMRetries), 4)
	c.w("extended transport type", uint32(m.ExtendedTransportType), 3)
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint64(d[8:], m.ServiceID)
	binary.BigEndian.PutUint64(d[16:], m.LocalCAGUID)
	binary.BigEndian.PutUint32(d[28:], m.LocalQKey)
	put24(d[32:], m.LocalQPN)
	d[35] = m.ResponderResources
	put24(d[36:], m.LocalEECN)
	d[39] = m.InitiatorDepth
	put24(d[40:], m.RemoteEECN)
	d[43] = m.RemoteCMResponseTimeout<<3 | (m.TransportServiceType&3)<<1 | b2u(m.EndToEndFlowControl)
	put24(d[44:], m.StartingPSN)
	d[47] = m.LocalCMResponseTimeout<<3 | m.RetryCount&7
	binary.BigEndian.PutUint16(d[48:], m.PKey)
	d[50] = m.PathMTU<<4 | b2u(m.RDCExists)<<3 | m.RNRRetryCount&7
	d[51] = m.MaxCMRetries<<4 | b2u(m.SRQ)<<3 | m.ExtendedTransportType&7
	putPath(d[52:96], &m.Primary, &c)
	d[139] = b2u(m.SAPSupported) << 2
	putPath(d[96:140], &m.Alternate, &c)
	copy(d[140:], m.PrivateData[:])
	return c.err()
}

func (m *REQ) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.ServiceID = binary.BigEndian.Uint64(d[8:])
	m.LocalCAGUID = binary.BigEndian.Uint64(d[16:])
	m.LocalQKey = binary.BigEndian.Uint32(d[28:])
	m.LocalQPN = get24(d[32:])
	m.ResponderResources = d[35]
	m.LocalEECN = get24(d[36:])
	m.InitiatorDepth = d[39]
	m.RemoteEECN = get24(d[40:])
	m.RemoteCMResponseTimeout = d[43] >> 3
	m.TransportServiceType = d[43] >> 1 & 3
	m.EndToEndFlowControl = d[43]&1 != 0
	m.StartingPSN = get24(d[44:])
	m.LocalCMResponseTimeout = d[47] >> 3
	m.RetryCount = d[47] & 7
	m.PKey = binary.BigEndian.Uint16(d[48:])
	m.PathMTU = d[50] >> 4
	m.RDCExists = d[50]&0x08 != 0
	m.RNRRetryCount = d[50] & 7
	m.MaxCMRetries = d[51] >> 4
	m.SRQ = d[51]&0x08 != 0
	m.ExtendedTransportType = d[51] & 7
	getPath(d[52:96], &m.Primary)
	getPath(d[96:140], &m.Alternate)
	m.SAPSupported = d[139]&0x04 != 0
	copy(m.PrivateData[:], d[140:])
}

func (m *MRA) putBody(d []byte) error {
	var c checker
	c.w("message MRAed", uint32(m.MessageMRAed), 2)
	c.w("service timeout", uint32(m.ServiceTimeout), 5)
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	d[8] = m.MessageMRAed << 6
	d[9] = m.ServiceTimeout << 3
	copy(d[10:], m.PrivateData[:])
	return c.err()
}

func (m *MRA) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	m.MessageMRAed = d[8] >> 6
	m.ServiceTimeout = d[9] >> 3
	copy(m.PrivateData[:], d[10:])
}

func (m *REJ) putBody(d []byte) error {
	var c checker
	c.w("message rejected", uint32(m.MessageRejected), 2)
	c.w("ARI length", uint32(m.ARILength), 7)
	if c.bad == "" && m.ARILength > REJARILength {
		c.bad = fmt.Sprintf("ARI length %d exceeds %d", m.ARILength, REJARILength)
	}
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	d[8] = m.MessageRejected << 6
	d[9] = m.ARILength << 1
	binary.BigEndian.PutUint16(d[10:], m.Reason)
	copy(d[12:84], m.ARI[:])
	copy(d[84:], m.PrivateData[:])
	return c.err()
}

func (m *REJ) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	m.MessageRejected = d[8] >> 6
	m.ARILength = d[9] >> 1
	m.Reason = binary.BigEndian.Uint16(d[10:])
	copy(m.ARI[:], d[12:84])
	copy(m.PrivateData[:], d[84:])
}

// ARIBytes is the ARI the REJ carries, bounded by its length field (a
// length above 72 is read as 72).
func (m *REJ) ARIBytes() []byte { return m.ARI[:min(int(m.ARILength), REJARILength)] }

func (m *REP) putBody(d []byte) error {
	var c checker
	c.w("local QPN", m.LocalQPN, 24)
	c.w("local EECN", m.LocalEECN, 24)
	c.w("starting PSN", m.StartingPSN, 24)
	c.w("target ACK delay", uint32(m.TargetACKDelay), 5)
	c.w("failover accepted", uint32(m.FailoverAccepted), 2)
	c.w("RNR retry count", uint32(m.RNRRetryCount), 3)
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	binary.BigEndian.PutUint32(d[8:], m.LocalQKey)
	put24(d[12:], m.LocalQPN)
	put24(d[16:], m.LocalEECN)
	put24(d[20:], m.StartingPSN)
	d[24] = m.ResponderResources
	d[25] = m.InitiatorDepth
	d[26] = m.TargetACKDelay<<3 | (m.FailoverAccepted&3)<<1 | b2u(m.EndToEndFlowControl)
	d[27] = m.RNRRetryCount<<5 | b2u(m.SRQ)<<4
	binary.BigEndian.PutUint64(d[28:], m.LocalCAGUID)
	copy(d[36:], m.PrivateData[:])
	return c.err()
}

func (m *REP) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	m.LocalQKey = binary.BigEndian.Uint32(d[8:])
	m.LocalQPN = get24(d[12:])
	m.LocalEECN = get24(d[16:])
	m.StartingPSN = get24(d[20:])
	m.ResponderResources = d[24]
	m.InitiatorDepth = d[25]
	m.TargetACKDelay = d[26] >> 3
	m.FailoverAccepted = d[26] >> 1 & 3
	m.EndToEndFlowControl = d[26]&1 != 0
	m.RNRRetryCount = d[27] >> 5
	m.SRQ = d[27]&0x10 != 0
	m.LocalCAGUID = binary.BigEndian.Uint64(d[28:])
	copy(m.PrivateData[:], d[36:])
}

func (m *RTU) putBody(d []byte) error {
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	copy(d[8:], m.PrivateData[:])
	return nil
}

func (m *RTU) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	copy(m.PrivateData[:], d[8:])
}

func (m *DREQ) putBody(d []byte) error {
	var c checker
	c.w("remote QPN", m.RemoteQPN, 24)
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	put24(d[8:], m.RemoteQPN)
	copy(d[12:], m.PrivateData[:])
	return c.err()
}

func (m *DREQ) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	m.RemoteQPN = get24(d[8:])
	copy(m.PrivateData[:], d[12:])
}

func (m *DREP) putBody(d []byte) error {
	binary.BigEndian.PutUint32(d[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], m.RemoteCommID)
	copy(d[8:], m.PrivateData[:])
	return nil
}

func (m *DREP) getBody(d []byte) {
	m.LocalCommID = binary.BigEndian.Uint32(d[0:])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	copy(m.PrivateData[:], d[8:])
}

func (m *SIDRREQ) putBody(d []byte) error {
	binary.BigEndian.PutUint32(d[0:], m.RequestID)
	binary.BigEndian.PutUint16(d[4:], m.PKey)
	binary.BigEndian.PutUint64(d[8:], m.ServiceID)
	copy(d[16:], m.PrivateData[:])
	return nil
}

func (m *SIDRREQ) getBody(d []byte) {
	m.RequestID = binary.BigEndian.Uint32(d[0:])
	m.PKey = binary.BigEndian.Uint16(d[4:])
	m.ServiceID = binary.BigEndian.Uint64(d[8:])
	copy(m.PrivateData[:], d[16:])
}

func (m *SIDRREP) putBody(d []byte) error {
	var c checker
	c.w("QPN", m.QPN, 24)
	if m.InfoLength > SIDRREPInfoLength {
		c.bad = fmt.Sprintf("additional information length %d exceeds %d", m.InfoLength, SIDRREPInfoLength)
	}
	binary.BigEndian.PutUint32(d[0:], m.RequestID)
	d[4] = m.Status
	d[5] = m.InfoLength
	put24(d[8:], m.QPN)
	binary.BigEndian.PutUint64(d[12:], m.ServiceID)
	binary.BigEndian.PutUint32(d[20:], m.QKey)
	copy(d[24:96], m.Info[:])
	copy(d[96:], m.PrivateData[:])
	return c.err()
}

func (m *SIDRREP) getBody(d []byte) {
	m.RequestID = binary.BigEndian.Uint32(d[0:])
	m.Status = d[4]
	m.InfoLength = d[5]
	m.QPN = get24(d[8:])
	m.ServiceID = binary.BigEndian.Uint64(d[12:])
	m.QKey = binary.BigEndian.Uint32(d[20:])
	copy(m.Info[:], d[24:96])
	copy(m.PrivateData[:], d[96:])
}
