package bth_test

import (
	"strings"
	"testing"

	"github.com/softnic/softnic/bth"
)

type hdr int

const (
	hRETH hdr = iota
	hAETH
	hImm
	hIETH
	hDETH
	hAtomic
	hAtomicAck
	hPETH
	hRWSNETH
	hSACKETH
	hHolesETH
	hWQEPETH
	hCQEPETH
	hEAETH
	hRDPETH
	hGDETH
	hSDPETH
	hCNPReserved
)

// wantHeaders lists, independently of the package's table, the extension
// headers that follow the BTH of every opcode in wire order (IBA 9.2,
// rxe_opcode.c), and whether a payload follows.
var wantHeaders = map[bth.Opcode]struct {
	name    string
	hdrs    []hdr
	payload bool
}{
	bth.RCSendFirst:          {"RC_SEND_FIRST", nil, true},
	bth.RCSendMiddle:         {"RC_SEND_MIDDLE", nil, true},
	bth.RCSendLast:           {"RC_SEND_LAST", nil, true},
	bth.RCSendLastImm:        {"RC_SEND_LAST_WITH_IMMEDIATE", []hdr{hImm}, true},
	bth.RCSendOnly:           {"RC_SEND_ONLY", nil, true},
	bth.RCSendOnlyImm:        {"RC_SEND_ONLY_WITH_IMMEDIATE", []hdr{hImm}, true},
	bth.RCWriteFirst:         {"RC_RDMA_WRITE_FIRST", []hdr{hRETH}, true},
	bth.RCWriteMiddle:        {"RC_RDMA_WRITE_MIDDLE", nil, true},
	bth.RCWriteLast:          {"RC_RDMA_WRITE_LAST", nil, true},
	bth.RCWriteLastImm:       {"RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", []hdr{hImm}, true},
	bth.RCWriteOnly:          {"RC_RDMA_WRITE_ONLY", []hdr{hRETH}, true},
	bth.RCWriteOnlyImm:       {"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", []hdr{hRETH, hImm}, true},
	bth.RCReadRequest:        {"RC_RDMA_READ_REQUEST", []hdr{hRETH}, false},
	bth.RCReadResponseFirst:  {"RC_RDMA_READ_RESPONSE_FIRST", []hdr{hAETH}, true},
	bth.RCReadResponseMiddle: {"RC_RDMA_READ_RESPONSE_MIDDLE", nil, true},
	bth.RCReadResponseLast:   {"RC_RDMA_READ_RESPONSE_LAST", []hdr{hAETH}, true},
	bth.RCReadResponseOnly:   {"RC_RDMA_READ_RESPONSE_ONLY", []hdr{hAETH}, true},
	bth.RCAcknowledge:        {"RC_ACKNOWLEDGE", []hdr{hAETH}, false},
	bth.RCAtomicAcknowledge:  {"RC_ATOMIC_ACKNOWLEDGE", []hdr{hAETH, hAtomicAck}, false},
	bth.RCCompareSwap:        {"RC_COMPARE_SWAP", []hdr{hAtomic}, false},
	bth.RCFetchAdd:           {"RC_FETCH_ADD", []hdr{hAtomic}, false},
	bth.RCSendLastInv:        {"RC_SEND_LAST_WITH_INVALIDATE", []hdr{hIETH}, true},
	bth.RCSendOnlyInv:        {"RC_SEND_ONLY_WITH_INVALIDATE", []hdr{hIETH}, true},
	bth.UDSendOnly:           {"UD_SEND_ONLY", []hdr{hDETH}, true},
	bth.UDSendOnlyImm:        {"UD_SEND_ONLY_WITH_IMMEDIATE", []hdr{hDETH, hImm}, true},

	// softnic's extensions (docs/wire.md): the RC opcode plus 0xC0, a PETH
	// last, and the RETH on every RDMA WRITE packet.
	bth.RCSendFirstOOO:            {"RC_SEND_FIRST_OOO", []hdr{hPETH}, true},
	bth.RCSendMiddleOOO:           {"RC_SEND_MIDDLE_OOO", []hdr{hPETH}, true},
	bth.RCSendLastOOO:             {"RC_SEND_LAST_OOO", []hdr{hPETH}, true},
	bth.RCSendLastImmOOO:          {"RC_SEND_LAST_WITH_IMMEDIATE_OOO", []hdr{hImm, hPETH}, true},
	bth.RCSendOnlyOOO:             {"RC_SEND_ONLY_OOO", []hdr{hPETH}, true},
	bth.RCSendOnlyImmOOO:          {"RC_SEND_ONLY_WITH_IMMEDIATE_OOO", []hdr{hImm, hPETH}, true},
	bth.RCWriteFirstOOO:           {"RC_RDMA_WRITE_FIRST_OOO", []hdr{hRETH}, true},
	bth.RCWriteMiddleOOO:          {"RC_RDMA_WRITE_MIDDLE_OOO", []hdr{hRETH}, true},
	bth.RCWriteLastOOO:            {"RC_RDMA_WRITE_LAST_OOO", []hdr{hRETH}, true},
	bth.RCWriteLastImmOOO:         {"RC_RDMA_WRITE_LAST_WITH_IMMEDIATE_OOO", []hdr{hRETH, hImm, hRWSNETH}, true},
	bth.RCWriteOnlyOOO:            {"RC_RDMA_WRITE_ONLY_OOO", []hdr{hRETH}, true},
	bth.RCWriteOnlyImmOOO:         {"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE_OOO", []hdr{hRETH, hImm, hRWSNETH}, true},
	bth.RCAcknowledgeSACK:         {"RC_ACKNOWLEDGE_SACK", []hdr{hAETH, hSACKETH}, false},
	bth.RCAcknowledgeSACKOverflow: {"RC_ACKNOWLEDGE_SACK_OVERFLOW", []hdr{hAETH, hSACKETH}, false},
	bth.RCAcknowledgeFNACK:        {"RC_ACKNOWLEDGE_FNAK", []hdr{hAETH, hSACKETH}, false},
	bth.RCAcknowledgeHoles:        {"RC_ACKNOWLEDGE_HOLES", []hdr{hAETH, hHolesETH}, false},
}

// wantStarHeaders does the same for StaR's stateless-mode opcodes
// (docs/wire.md): one header each, payload only on RDP and SDP.
var wantStarHeaders = map[bth.Opcode]struct {
	name    string
	hdrs    []hdr
	payload bool
}{
	bth.StarWQEP: {"STAR_WQEP", []hdr{hWQEPETH}, false},
	bth.StarCQEP: {"STAR_CQEP", []hdr{hCQEPETH}, false},
	bth.StarEA:   {"STAR_EA", []hdr{hEAETH}, false},
	bth.StarRDP:  {"STAR_RDP", []hdr{hRDPETH}, true},
	bth.StarRA:   {"STAR_RA", []hdr{hAETH}, false},
	bth.StarGD:   {"STAR_GD", []hdr{hGDETH}, false},
	bth.StarSDP:  {"STAR_SDP", []hdr{hSDPETH}, true},
}

// wantCNP is RoCEv2's congestion notification packet (IBA Annex A17): a
// BTH and 16 reserved bytes.
var wantCNP = struct {
	name    string
	hdrs    []hdr
	payload bool
}{"CNP", []hdr{hCNPReserved}, false}

var hdrLen = map[hdr]int{
	hRETH: bth.RETHLen, hAETH: bth.AETHLen, hImm: bth.ImmDtLen, hIETH: bth.IETHLen,
	hDETH: bth.DETHLen, hAtomic: bth.AtomicETHLen, hAtomicAck: bth.AtomicAckETHLen,
	hPETH: bth.PETHLen, hRWSNETH: bth.RWSNETHLen, hSACKETH: bth.SACKETHLen, hHolesETH: bth.HolesETHLen,
	hWQEPETH: bth.WQEPETHLen, hCQEPETH: bth.CQEPETHLen, hEAETH: bth.EAETHLen,
	hRDPETH: bth.RDPETHLen, hGDETH: bth.GDETHLen, hSDPETH: bth.SDPETHLen,
	hCNPReserved: bth.CNPReservedLen,
}

func offsets(info *bth.OpInfo) map[hdr]int {
	return map[hdr]int{
		hRETH: info.RETHOff, hAETH: info.AETHOff, hImm: info.ImmOff, hIETH: info.IETHOff,
		hDETH: info.DETHOff, hAtomic: info.AtomicETHOff, hAtomicAck: info.AtomicAckETHOff,
		hPETH: info.PETHOff, hRWSNETH: info.RWSNETHOff, hSACKETH: info.SACKETHOff, hHolesETH: info.HolesETHOff,
		hWQEPETH: info.WQEPETHOff, hCQEPETH: info.CQEPETHOff, hEAETH: info.EAETHOff,
		hRDPETH: info.RDPETHOff, hGDETH: info.GDETHOff, hSDPETH: info.SDPETHOff,
		hCNPReserved: info.CNPReservedOff,
	}
}

var hdrFlag = map[hdr]bth.OpFlags{
	hRETH: bth.HasRETH, hAETH: bth.HasAETH, hImm: bth.HasImm, hIETH: bth.HasIETH,
	hDETH: bth.HasDETH, hAtomic: bth.HasAtomicETH, hAtomicAck: bth.HasAtomicAckETH,
	hPETH: bth.HasPETH, hRWSNETH: bth.HasRWSNETH, hSACKETH: bth.HasSACKETH, hHolesETH: bth.HasHolesETH,
	hWQEPETH: bth.HasWQEPETH, hCQEPETH: bth.HasCQEPETH, hEAETH: bth.HasEAETH,
	hRDPETH: bth.HasRDPETH, hGDETH: bth.HasGDETH, hSDPETH: bth.HasSDPETH,
	hCNPReserved: bth.HasCNPReserved,
}

func TestOpcodeTableLayout(t *testing.T) {
	for op := range 256 {
		op := bth.Opcode(op)
		info := bth.Lookup(op)
		want, known := wantHeaders[op]
		if star, ok := wantStarHeaders[op]; ok {
			want, known = star, true
		}
		if op == bth.CNP {
			want, known = wantCNP, true
		}
		if !known {
			if info != nil {
				t.Errorf("%#02x: Lookup = %q, want nil", uint8(op), info.Name)
			}
			continue
		}
		if info == nil {
			t.Errorf("%s: Lookup = nil", want.name)
			continue
		}
		if info.Name != want.name || op.String() != want.name {
			t.Errorf("%#02x: Name %q, String %q, want %q", uint8(op), info.Name, op.String(), want.name)
		}
		// Walk the headers in wire order: each starts where the previous
		// ended, and the last one ends at Length.
		off := bth.BTHLen
		got := offsets(info)
		for _, h := range want.hdrs {
			if got[h] != off {
				t.Errorf("%s: header %d at %d, want %d", want.name, h, got[h], off)
			}
			if info.Flags&hdrFlag[h] == 0 {
				t.Errorf("%s: flag for header %d missing", want.name, h)
			}
			off += hdrLen[h]
			delete(got, h)
		}
		for h, o := range got {
			if o != -1 || info.Flags&hdrFlag[h] != 0 {
				t.Errorf("%s: absent header %d has offset %d, flags %#x", want.name, h, o, info.Flags)
			}
		}
		if info.Length != off {
			t.Errorf("%s: Length %d, want %d", want.name, info.Length, off)
		}
		if (info.Flags&bth.HasPayload != 0) != want.payload {
			t.Errorf("%s: HasPayload = %v, want %v", want.name, !want.payload, want.payload)
		}
	}
}

// Spot-check lengths against rxe_opcode.c's .length values.
func TestOpcodeLengthsMatchRxe(t *testing.T) {
	for op, want := range map[bth.Opcode]int{
		bth.RCSendMiddle: 12, bth.RCWriteFirst: 28, bth.RCWriteOnlyImm: 32,
		bth.RCReadRequest: 28, bth.RCAcknowledge: 16, bth.RCAtomicAcknowledge: 24,
		bth.RCCompareSwap: 40, bth.RCSendOnlyInv: 16, bth.UDSendOnly: 20,
		bth.UDSendOnlyImm: 24,
	} {
		if got := bth.Lookup(op).Length; got != want {
			t.Errorf("%s: Length %d, want %d", op, got, want)
		}
	}
}

func TestOpcodeFlags(t *testing.T) {
	for op, want := range wantHeaders {
		f := bth.Lookup(op).Flags
		// An extension has the flags of the RC opcode it extends.
		name := strings.TrimSuffix(want.name, "_OOO")
		has := func(x bth.OpFlags) bool { return f&x != 0 }

		if has(bth.IsRequest) == has(bth.IsResponse) {
			t.Errorf("%s: must be exactly one of request and response", name)
		}
		response := strings.Contains(name, "RESPONSE") || strings.Contains(name, "ACKNOWLEDGE")
		if has(bth.IsResponse) != response {
			t.Errorf("%s: IsResponse = %v", name, has(bth.IsResponse))
		}

		var wantPos bth.OpFlags
		switch {
		case strings.HasSuffix(name, "_FIRST"):
			wantPos = bth.IsFirst
		case strings.HasSuffix(name, "_MIDDLE"):
			wantPos = bth.IsMiddle
		case strings.Contains(name, "_LAST"):
			wantPos = bth.IsLast
		default: // ONLY and single-packet operations
			wantPos = bth.IsFirst | bth.IsLast
		}
		if pos := f & (bth.IsFirst | bth.IsMiddle | bth.IsLast); pos != wantPos {
			t.Errorf("%s: position flags %#x, want %#x", name, pos, wantPos)
		}

		var wantFamily bth.OpFlags
		switch {
		case strings.Contains(name, "SEND"):
			wantFamily = bth.IsSend
		case strings.Contains(name, "WRITE"):
			wantFamily = bth.IsWrite
		case strings.Contains(name, "READ"):
			wantFamily = bth.IsRead
		case strings.Contains(name, "ATOMIC"), strings.Contains(name, "SWAP"), strings.Contains(name, "FETCH"):
			wantFamily = bth.IsAtomic
		}
		if fam := f & (bth.IsSend | bth.IsWrite | bth.IsRead | bth.IsAtomic); fam != wantFamily {
			t.Errorf("%s: family flags %#x, want %#x", name, fam, wantFamily)
		}
	}
}

func TestOpcodeStringUnknown(t *testing.T) {
	for op, want := range map[bth.Opcode]string{0x15: "OPCODE_0x15", 0x20: "OPCODE_0x20", 0xff: "OPCODE_0xff"} {
		if got := op.String(); got != want {
			t.Errorf("String(%#x) = %q, want %q", uint8(op), got, want)
		}
	}
}

func TestPacketLen(t *testing.T) {
	for _, tc := range []struct {
		op      bth.Opcode
		payload int
		want    int
	}{
		{bth.RCAcknowledge, 0, 20},
		{bth.RCSendOnly, 0, 16},
		{bth.RCSendOnly, 1, 20},
		{bth.RCSendOnly, 4, 20},
		{bth.RCWriteOnlyImm, 1023, 32 + 1024 + 4},
	} {
		if got := bth.Lookup(tc.op).PacketLen(tc.payload); got != tc.want {
			t.Errorf("%s.PacketLen(%d) = %d, want %d", tc.op, tc.payload, got, tc.want)
		}
	}
	for n, want := range []int{0, 3, 2, 1, 0, 3} {
		if got := bth.PadFor(n); got != want {
			t.Errorf("PadFor(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestExtensionOpcodes: each of softnic's extension opcodes is 0xC0 plus
// the RC opcode it extends and keeps that opcode's flags; a SEND adds a
// 6-byte PETH, last; an RDMA WRITE carries the RETH on every packet and no
// PETH, and its last packet with immediate a 3-byte RWSNETH after the
// ImmDt (docs/wire.md). The per-packet bytes added are the papers' (IRN
// §6.3, FaSR §IV-D): 6 on a SEND, 16 on a WRITE (plus 3 on the last of a
// WRITE with immediate; 16 on a standard WRITE FIRST or ONLY, 0 more).
func TestExtensionOpcodes(t *testing.T) {
	for op := bth.RCSendFirst; op <= bth.RCWriteOnlyImm; op++ {
		ext := op + 0xC0
		base, info := bth.Lookup(op), bth.Lookup(ext)
		if info == nil || info.Name != base.Name+"_OOO" || !ext.IsExtension() || op.IsExtension() {
			t.Fatalf("%s has no extension at %#02x (%v)", op, uint8(ext), info)
		}
		want, added := base.Flags|bth.HasPETH, bth.PETHLen
		if base.Flags&bth.IsWrite != 0 {
			want, added = base.Flags|bth.HasRETH, bth.RETHLen
			if base.Flags&(bth.HasImm|bth.IsLast) == bth.HasImm|bth.IsLast {
				want |= bth.HasRWSNETH
				added += bth.RWSNETHLen
			}
			if base.Flags&bth.HasRETH != 0 {
				added -= bth.RETHLen // FIRST and ONLY have it already
			}
		}
		if info.Flags != want {
			t.Errorf("%s: flags %#x, want %#x", info.Name, info.Flags, want)
		}
		if info.Length != base.Length+added {
			t.Errorf("%s: Length %d, want %d + %d", info.Name, info.Length, base.Length, added)
		}
		if info.PETHOff >= 0 && info.PETHOff != info.Length-bth.PETHLen {
			t.Errorf("%s: PETH at %d, want last (%d)", info.Name, info.PETHOff, info.Length-bth.PETHLen)
		}
		if info.RWSNETHOff >= 0 && (info.RWSNETHOff != info.Length-bth.RWSNETHLen || info.ImmOff != info.RWSNETHOff-bth.ImmDtLen) {
			t.Errorf("%s: RWSNETH at %d, want last (%d), after the ImmDt (%d)", info.Name, info.RWSNETHOff, info.Length-bth.RWSNETHLen, info.ImmOff)
		}
		// Every IBA header sits where it does in the opcode extended,
		// after the RETH that a WRITE MIDDLE or LAST adds.
		shift := 0
		if base.RETHOff < 0 && info.RETHOff >= 0 {
			shift = bth.RETHLen
		}
		if base.RETHOff >= 0 && info.RETHOff != base.RETHOff || base.ImmOff >= 0 && info.ImmOff != base.ImmOff+shift {
			t.Errorf("%s: RETH at %d, ImmDt at %d", info.Name, info.RETHOff, info.ImmOff)
		}
	}
	ack, sack := bth.Lookup(bth.RCAcknowledge), bth.Lookup(bth.RCAcknowledgeSACK)
	if sack.Flags != ack.Flags|bth.HasSACKETH || sack.AETHOff != ack.AETHOff || sack.SACKETHOff != ack.Length {
		t.Errorf("RC_ACKNOWLEDGE_SACK is not an ACK plus a SACKETH: %+v", sack)
	}
}

// TestStarOpcodes: StaR's opcodes are the block 0xE0-0xE6, extensions
// (manufacturer-specific), with none of the RC state machines' role flags,
// so that an engine that does not handle them drops them (docs/wire.md).
func TestStarOpcodes(t *testing.T) {
	roles := bth.IsRequest | bth.IsResponse | bth.IsFirst | bth.IsMiddle | bth.IsLast |
		bth.IsSend | bth.IsWrite | bth.IsRead | bth.IsAtomic
	for op := range 256 {
		op := bth.Opcode(op)
		_, want := wantStarHeaders[op]
		if op.IsStar() != want || want != (op >= 0xE0 && op <= 0xE6) {
			t.Errorf("%s: IsStar = %v", op, op.IsStar())
		}
		if !want {
			continue
		}
		info := bth.Lookup(op)
		if !op.IsExtension() || info.Flags&roles != 0 || bth.ReplyOf(op) != bth.ReplyNone {
			t.Errorf("%s: IsExtension %v, flags %#x, ReplyOf %v", op, op.IsExtension(), info.Flags, bth.ReplyOf(op))
		}
	}
	ack, ra := bth.Lookup(bth.RCAcknowledge), bth.Lookup(bth.StarRA)
	if ra.AETHOff != ack.AETHOff || ra.Length != ack.Length {
		t.Errorf("STAR_RA is not laid out as an ACK: %+v", ra)
	}
	for op, want := range map[bth.Opcode]int{
		bth.StarWQEP: 60, bth.StarCQEP: 28, bth.StarEA: 20, bth.StarRDP: 25,
		bth.StarRA: 16, bth.StarGD: 28, bth.StarSDP: 16,
	} {
		if got := bth.Lookup(op).Length; got != want {
			t.Errorf("%s: Length %d, want %d", op, got, want)
		}
	}
}
