package bth

import "errors"

// Errors returned by Parse and ParseFrame. They are sentinels, so a drop
// costs no allocation and the receive path can count each reason apart
// (rxe_recv.c drops on the same conditions).
var (
	ErrTruncated     = errors.New("bth: packet truncated")
	ErrUnknownOpcode = errors.New("bth: unknown or unsupported opcode")
	ErrBadVersion    = errors.New("bth: transport header version not 0")
	ErrBadPad        = errors.New("bth: pad count exceeds payload")
	ErrBadLength     = errors.New("bth: inconsistent length")
	ErrNotRoCE       = errors.New("bth: not a RoCEv2 frame")
	ErrBadIPHeader   = errors.New("bth: malformed IP header")
	ErrFragmented    = errors.New("bth: fragmented IP packet")
)

// Packet is a parsed RoCEv2 packet: the UDP payload from the BTH up to and
// including the ICRC. Its accessors slice Buf in place.
type Packet struct {
	Buf  []byte  // BTH .. ICRC inclusive
	Info *OpInfo // the opcode's table entry
}

// Parse validates b as a RoCEv2 packet (BTH through ICRC) and returns a view
// of it. It checks, in this order and like rxe_rcv and hdr_check in
// rxe_recv.c: that the BTH is present, the opcode is one softnic knows, the
// transport version is 0, the opcode's headers and the ICRC fit, and the pad
// count fits in the payload; an opcode without payload must have neither
// payload nor pad.
// Parse does not verify the ICRC, which needs the IP and UDP headers (see
// Frame.VerifyICRC). It never allocates.
func Parse(b []byte) (Packet, error) {
	if len(b) < BTHLen {
		return Packet{}, ErrTruncated
	}
	h := BTH(b)
	info := Lookup(h.Opcode())
	if info == nil {
		return Packet{}, ErrUnknownOpcode
	}
	if h.TVer() != 0 {
		return Packet{}, ErrBadVersion
	}
	if len(b) < info.Length+ICRCLen {
		return Packet{}, ErrTruncated
	}
	payload := len(b) - info.Length - ICRCLen
	pad := int(h.PadCount())
	if info.Flags&HasPayload == 0 {
		if payload != 0 {
			return Packet{}, ErrBadLength
		}
		if pad != 0 {
			return Packet{}, ErrBadPad
		}
	}
	if payload < pad {
		return Packet{}, ErrBadPad
	}
	return Packet{Buf: b, Info: info}, nil
}

// Opcode returns the packet's opcode.
func (p *Packet) Opcode() Opcode { return Opcode(p.Buf[bthOpcode]) }

// BTH returns the base transport header.
func (p *Packet) BTH() BTH { return BTH(p.Buf[:BTHLen]) }

// RETH returns the RDMA extended transport header, or nil if the opcode has none.
func (p *Packet) RETH() RETH { return RETH(p.ext(p.Info.RETHOff, RETHLen)) }

// AETH returns the ACK extended transport header, or nil if the opcode has none.
func (p *Packet) AETH() AETH { return AETH(p.ext(p.Info.AETHOff, AETHLen)) }

// Imm returns the immediate data header, or nil if the opcode has none.
func (p *Packet) Imm() ImmDt { return ImmDt(p.ext(p.Info.ImmOff, ImmDtLen)) }

// IETH returns the invalidate extended transport header, or nil if the
// opcode has none.
func (p *Packet) IETH() IETH { return IETH(p.ext(p.Info.IETHOff, IETHLen)) }

// DETH returns the datagram extended transport header, or nil if the opcode
// has none.
func (p *Packet) DETH() DETH { return DETH(p.ext(p.Info.DETHOff, DETHLen)) }

// AtomicETH returns the atomic extended transport header, or nil if the
// opcode has none.
func (p *Packet) AtomicETH() AtomicETH {
	return AtomicETH(p.ext(p.Info.AtomicETHOff, AtomicETHLen))
}

// AtomicAck returns the atomic ACK extended transport header, or nil if the
// opcode has none.
func (p *Packet) AtomicAck() AtomicAckETH {
	return AtomicAckETH(p.ext(p.Info.AtomicAckETHOff, AtomicAckETHLen))
}

// PETH returns softnic's placement extended transport header, or nil if
// the opcode has none.
func (p *Packet) PETH() PETH { return PETH(p.ext(p.Info.PETHOff, PETHLen)) }

// RWSNETH returns softnic's receive WQE sequence number header, or nil if
// the opcode has none.
func (p *Packet) RWSNETH() RWSNETH { return RWSNETH(p.ext(p.Info.RWSNETHOff, RWSNETHLen)) }

// SACKETH returns softnic's selective-acknowledgement header, or nil if the
// opcode has none.
func (p *Packet) SACKETH() SACKETH { return SACKETH(p.ext(p.Info.SACKETHOff, SACKETHLen)) }

// HolesETH returns softnic's holes header (MELO's NACK), or nil if the
// opcode has none.
func (p *Packet) HolesETH() HolesETH { return HolesETH(p.ext(p.Info.HolesETHOff, HolesETHLen)) }

// WQEPETH returns StaR's work request push header, or nil if the opcode
// has none.
func (p *Packet) WQEPETH() WQEPETH { return WQEPETH(p.ext(p.Info.WQEPETHOff, WQEPETHLen)) }

// CQEPETH returns StaR's completion push header, or nil if the opcode has
// none.
func (p *Packet) CQEPETH() CQEPETH { return CQEPETH(p.ext(p.Info.CQEPETHOff, CQEPETHLen)) }

// EAETH returns StaR's element ACK header, or nil if the opcode has none.
func (p *Packet) EAETH() EAETH { return EAETH(p.ext(p.Info.EAETHOff, EAETHLen)) }

// RDPETH returns StaR's receiving data packet header, or nil if the
// opcode has none.
func (p *Packet) RDPETH() RDPETH { return RDPETH(p.ext(p.Info.RDPETHOff, RDPETHLen)) }

// GDETH returns StaR's get data header, or nil if the opcode has none.
func (p *Packet) GDETH() GDETH { return GDETH(p.ext(p.Info.GDETHOff, GDETHLen)) }

// SDPETH returns StaR's sending data packet header, or nil if the opcode
// has none.
func (p *Packet) SDPETH() SDPETH { return SDPETH(p.ext(p.Info.SDPETHOff, SDPETHLen)) }

// Payload returns the payload without pad bytes and ICRC; it is empty for
// opcodes without payload.
func (p *Packet) Payload() []byte {
	end := len(p.Buf) - ICRCLen - int(p.BTH().PadCount())
	return p.Buf[p.Info.Length:end]
}

// ext returns the header of length n at off, or nil if off is -1. The
// three-index slice keeps a view from reaching into the next header.
func (p *Packet) ext(off, n int) []byte {
	if off < 0 {
		return nil
	}
	return p.Buf[off : off+n : off+n]
}
