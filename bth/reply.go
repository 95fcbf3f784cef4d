package bth

// A responder answers a request out of sequence with a reply, a NAK whose
// BTH PSN is its expected PSN (the cumulative acknowledgement) and whose
// AETH is a PSN-sequence-error NAK with the responder's MSN. Beyond the
// plain IBA NAK, each kind has its own opcode and extension header
// (docs/wire.md), and replyTable below is the one place that says which.
// The loss-recovery schemes have their own kinds (recovery.Reply), which
// never see frames; the transport maps them to these.

// ReplyKind is the kind of a reply to requests out of sequence, as the
// wire carries it.
type ReplyKind uint8

const (
	// ReplyNone: not a reply.
	ReplyNone ReplyKind = iota
	// ReplySeqNak: the IBA NAK, RC_ACKNOWLEDGE with a PSN-sequence-error
	// syndrome, no extension header.
	ReplySeqNak
	// ReplySack: RC_ACKNOWLEDGE_SACK (RC_ACKNOWLEDGE_SACK_OVERFLOW once
	// FaSR's lost-cnt overflowed) with a SACKETH naming the request the
	// responder now holds: an IRN NACK, a FaSR SACK.
	ReplySack
	// ReplyFNACK: RC_ACKNOWLEDGE_FNAK with a SACKETH naming the
	// retransmission the responder dropped: FaSR's FNACK.
	ReplyFNACK
	// ReplyHoles: RC_ACKNOWLEDGE_HOLES with a HolesETH: MELO's NACK.
	ReplyHoles
)

// Reply is one reply to requests out of sequence: its kind and what its
// extension header carries.
type Reply struct {
	Kind ReplyKind
	// ReplySack: FaSR's lost-cnt overflowed, which the opcode says
	// (RC_ACKNOWLEDGE_SACK_OVERFLOW) and not the SACKETH.
	Overflow bool
	SACK     SACKETHFields  // ReplySack, ReplyFNACK
	Holes    HolesETHFields // ReplyHoles
}

// replyCodec is one row of replyTable.
type replyCodec struct {
	name       string
	op         Opcode  // the opcode that carries the reply
	overflowOp Opcode  // ReplySack: the opcode once lost-cnt overflowed
	header     OpFlags // its extension header: HasSACKETH, HasHolesETH, or none
	// encode writes r's fields into ext, the extension header of a packet
	// whose BTH PSN is cum; decode reads them into r, ok false when the
	// header breaks its rules. Both are nil without an extension header.
	// They take and return Reply by value: a pointer passed through a
	// function value escapes, and the hot path allocates nothing.
	encode func(ext []byte, cum uint32, r Reply)
	decode func(ext []byte, cum uint32, r Reply) (Reply, bool)
}

// replyTable is indexed by ReplyKind: reply kind, opcode, extension
// header, and the header's codec.
var replyTable = [...]replyCodec{
	ReplyNone:   {name: "NONE"},
	ReplySeqNak: {name: "SEQ_NAK", op: RCAcknowledge},
	ReplySack: {name: "SACK", op: RCAcknowledgeSACK, overflowOp: RCAcknowledgeSACKOverflow, header: HasSACKETH,
		encode: encodeSACK, decode: decodeSACK},
	ReplyFNACK: {name: "FNAK", op: RCAcknowledgeFNACK, header: HasSACKETH,
		encode: encodeSACK, decode: decodeSACK},
	ReplyHoles: {name: "HOLES", op: RCAcknowledgeHoles, header: HasHolesETH,
		encode: encodeHoles, decode: decodeHoles},
}

func encodeSACK(ext []byte, _ uint32, r Reply) { SACKETH(ext).Encode(&r.SACK) }

func decodeSACK(ext []byte, _ uint32, r Reply) (Reply, bool) {
	r.SACK = SACKETH(ext).Fields()
	return r, true
}

func encodeHoles(ext []byte, cum uint32, r Reply) { HolesETH(ext).Encode(cum, &r.Holes) }

func decodeHoles(ext []byte, cum uint32, r Reply) (Reply, bool) {
	var ok bool
	r.Holes, ok = HolesETH(ext).Fields(cum)
	return r, ok
}

// extHeader returns the extension header flag names in a packet of info's
// opcode, or nil.
func extHeader(b []byte, info *OpInfo, flag OpFlags) []byte {
	switch flag {
	case HasSACKETH:
		return b[info.SACKETHOff : info.SACKETHOff+SACKETHLen]
	case HasHolesETH:
		return b[info.HolesETHOff : info.HolesETHOff+HolesETHLen]
	}
	return nil
}

// String returns the kind's name, e.g. "SACK".
func (k ReplyKind) String() string {
	if int(k) < len(replyTable) {
		return replyTable[k].name
	}
	return "REPLY_?"
}

// Header returns the extension header flag of the kind's opcode
// (HasSACKETH, HasHolesETH), or 0 for none.
func (k ReplyKind) Header() OpFlags {
	if int(k) < len(replyTable) {
		return replyTable[k].header
	}
	return 0
}

// ReplyOf returns the kind of reply op carries by itself: ReplySack for
// RC_ACKNOWLEDGE_SACK and RC_ACKNOWLEDGE_SACK_OVERFLOW, ReplyFNACK,
// ReplyHoles. Every other opcode gives ReplyNone, RC_ACKNOWLEDGE
// included: whether one is a sequence NAK its AETH says.
func ReplyOf(op Opcode) ReplyKind { return replyOfOp[op] }

// replyOfOp is ReplyOf's answer per opcode, from replyTable: one load on
// the path of every response the completer handles.
var replyOfOp = func() (m [256]ReplyKind) {
	for k := range replyTable {
		if c := &replyTable[k]; c.header != 0 {
			m[c.op] = ReplyKind(k)
			if c.overflowOp != 0 {
				m[c.overflowOp] = ReplyKind(k)
			}
		}
	}
	return m
}()

// Opcode returns the opcode of r's packet; r.Kind is not ReplyNone.
func (r *Reply) Opcode() Opcode {
	c := &replyTable[r.Kind]
	if r.Overflow && c.overflowOp != 0 {
		return c.overflowOp
	}
	return c.op
}

// Encode writes r after the BTH of roce, a packet of opcode r.Opcode()
// whose BTH is written already: the AETH, a PSN-sequence-error NAK with
// msn, and r's extension header, its holes counted from the BTH PSN
// (HolesETH.Encode). It does not allocate.
func (r *Reply) Encode(roce []byte, msn uint32) {
	info := Lookup(r.Opcode())
	AETH(roce[info.AETHOff:]).Encode(&AETHFields{Syndrome: NakSyndrome(NakPSNSeqError), MSN: msn})
	if c := &replyTable[r.Kind]; c.encode != nil {
		c.encode(extHeader(roce, info, c.header), BTH(roce).PSN(), *r)
	}
}

// Reply decodes the reply p carries if its opcode is one of softnic's
// acknowledgements (ReplyOf not ReplyNone): its kind, whether lost-cnt
// overflowed, and its extension header, holes as PSNs oldest first
// (HolesETH.Fields). ok is false if p is no such reply or its header
// breaks the rules of docs/wire.md; Kind and what was read before the
// fault are set all the same. The AETH is the caller's to check, as for
// RC_ACKNOWLEDGE. It does not allocate.
func (p *Packet) Reply() (r Reply, ok bool) {
	op := p.Opcode()
	r.Kind = ReplyOf(op)
	if r.Kind == ReplyNone {
		return r, false
	}
	c := &replyTable[r.Kind]
	r.Overflow = op == c.overflowOp
	return c.decode(extHeader(p.Buf, p.Info, c.header), p.BTH().PSN(), r)
}
