// Package bth encodes and decodes RoCEv2 packets: the InfiniBand Base
// Transport Header (BTH), its extension headers, and the Ethernet/IP/UDP
// frame that carries them on UDP port 4791 (IBA Vol. 1 chapter 9, Annex A17).
//
// Every header is a zero-copy view: BTH, RETH, AETH, ImmDt, IETH, DETH,
// AtomicETH, AtomicAckETH, softnic's extensions PETH, RWSNETH, SACKETH and
// HolesETH, and the headers of StaR's stateless mode, WQEPETH, CQEPETH,
// EAETH, RDPETH, GDETH and SDPETH (all carried only by the
// manufacturer-specific opcodes 0xC0-0xFF, docs/wire.md) are []byte types whose getters and setters read and write
// big-endian wire fields in place, masking the 24-bit QPN, PSN, MSN and
// receive WQE sequence number fields so a setter never spills into the
// neighbouring bits. Each multi-field view also has a *Fields struct whose
// Encode writes the whole header, reserved bits zero, and whose Fields
// reads it back (a HolesETH, whose holes count from the BTH PSN, takes
// that PSN in both and checks its holes). Views do no bounds checking of
// their own beyond Go's: validation happens once, at the edge, in Parse
// and ParseFrame, which reject anything a view could not safely read and
// never allocate or panic, whatever the input.
//
// One static opcode table, modelled on Linux rxe's rxe_opcode.c, drives both
// parsing and segmentation: Lookup returns, per opcode, the flags (request or
// response, first/middle/last, which extension headers follow, whether the
// packet uses a receive WQE) and the byte offset of every extension header and
// of the payload. The offsets are derived from the flags in the IBA header
// order, so the two cannot disagree. A second table (reply.go) does the
// same for the replies to requests out of sequence: per ReplyKind, its
// opcode, extension header and their codec (Reply.Encode, Packet.Reply).
//
// The Invariant CRC (ICRC, IBA 7.8.1 and Annex A17.4) protects the fields of
// the IP, UDP and transport headers that no router may change, plus the
// payload. ICRC computes it incrementally with the hardware-accelerated IEEE
// CRC-32: the variant IP/UDP/BTH fields are masked to ones in a small stack
// copy of the headers, and the rest of the packet is fed to the CRC in place.
// FinishFrame writes the ICRC first and then, for IPv6, the UDP checksum,
// which covers the ICRC while the ICRC treats the UDP checksum as masked.
package bth
