// Package wireshark holds what the tests of the Wireshark dissector
// softnic.lua (in this directory) expect it to decode: the fields of each
// extension header and the headers of each extension opcode. Its own test
// runs tshark on frames of every extension opcode; tests/capture_test.go
// on a capture from two running daemons.
package wireshark

import "github.com/softnic/softnic/bth"

// Fields lists, per extension header, the dissector fields every packet
// carrying it must decode.
var Fields = map[string][]string{
	"bth":   {"softnic.bth.opcode", "softnic.bth.se", "softnic.bth.migreq", "softnic.bth.pad", "softnic.bth.tver", "softnic.bth.pkey", "softnic.bth.fecn", "softnic.bth.becn", "softnic.bth.reserved", "softnic.bth.dqpn", "softnic.bth.ackreq", "softnic.bth.reserved7", "softnic.bth.psn", "softnic.icrc", "softnic.icrc.calculated", "softnic.icrc.status"},
	"reth":  {"softnic.reth.va", "softnic.reth.rkey", "softnic.reth.dmalen"},
	"imm":   {"softnic.immdt"},
	"aeth":  {"softnic.aeth.syndrome", "softnic.aeth.msn"},
	"peth":  {"softnic.peth.wqesn", "softnic.peth.index"},
	"rwsn":  {"softnic.rwsn.wqesn"},
	"sack":  {"softnic.sack.lostcnt", "softnic.sack.reserved", "softnic.sack.psn"},
	"holes": {"softnic.holes.reserved", "softnic.holes.rcvhigh", "softnic.holes.offset", "softnic.holes.length"},
	"wqep": {"softnic.wqep.driverseq", "softnic.wqep.kind", "softnic.wqep.flags", "softnic.wqep.flags.signaled", "softnic.wqep.flags.solicited",
		"softnic.wqep.flags.remote_write", "softnic.wqep.flags.remote_read", "softnic.wqep.flags.remote_atomic", "softnic.wqep.flags.table_done",
		"softnic.wqep.reserved", "softnic.wqep.wrid", "softnic.wqep.localva", "softnic.wqep.localkey", "softnic.wqep.length",
		"softnic.wqep.remoteva", "softnic.wqep.remotekey", "softnic.wqep.imm"},
	"cqep": {"softnic.cqep.driverseq", "softnic.cqep.status", "softnic.cqep.opcode", "softnic.cqep.flags", "softnic.cqep.flags.with_imm",
		"softnic.cqep.reserved", "softnic.cqep.bytelen", "softnic.cqep.imm"},
	"ea":      {"softnic.ea.kind", "softnic.ea.reserved", "softnic.ea.driverseq"},
	"rdp":     {"softnic.rdp.va", "softnic.rdp.rkey", "softnic.rdp.flags", "softnic.rdp.flags.last", "softnic.rdp.flags.to_recv"},
	"gd":      {"softnic.gd.va", "softnic.gd.rkey", "softnic.gd.length", "softnic.gd.mtu", "softnic.gd.flags", "softnic.gd.flags.from_send"},
	"sdp":     {"softnic.sdp.offset"},
	"payload": {"softnic.payload"},
}

// Headers is what each extension opcode carries (docs/wire.md).
func Headers(op bth.Opcode) []string {
	h := []string{"bth"}
	switch {
	case op >= 0xC0 && op <= 0xCB:
		base := op - 0xC0
		if base >= 6 {
			h = append(h, "reth")
		}
		if base == 3 || base == 5 || base == 9 || base == 11 {
			h = append(h, "imm")
		}
		switch {
		case base < 6: // SEND
			h = append(h, "peth")
		case base == 9 || base == 11: // the last packet of a WRITE with immediate
			h = append(h, "rwsn")
		}
		return append(h, "payload")
	case op >= 0xD1 && op <= 0xD3:
		return append(h, "aeth", "sack")
	case op == 0xD4:
		return append(h, "aeth", "holes")
	}
	switch op {
	case bth.StarWQEP:
		return append(h, "wqep")
	case bth.StarCQEP:
		return append(h, "cqep")
	case bth.StarEA:
		return append(h, "ea")
	case bth.StarRDP:
		return append(h, "rdp", "payload")
	case bth.StarRA:
		return append(h, "aeth")
	case bth.StarGD:
		return append(h, "gd")
	case bth.StarSDP:
		return append(h, "sdp", "payload")
	}
	return nil
}

// Extension reports whether op is one of softnic's extension opcodes,
// which softnic.lua decodes itself.
func Extension(op bth.Opcode) bool { return Headers(op) != nil }
