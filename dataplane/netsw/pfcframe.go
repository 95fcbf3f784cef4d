package netsw

import (
	"encoding/binary"
	"errors"
)

// The 802.1Qbb priority-based flow control frame (IEEE 802.1Q-2011 clause
// 36, carried as an 802.3 MAC Control frame, Annex 31D), untagged:
//
//	offset  size  field
//	0       6     destination: 01-80-C2-00-00-01 (MAC Control)
//	6       6     source: the sending port's MAC
//	12      2     EtherType 0x8808 (MAC Control)
//	14      2     opcode 0x0101 (PFC; 0x0001 is 802.3x PAUSE)
//	16      2     priority-enable vector: octet 16 reserved (0), octet 17
//	              bit i set = time[i] applies to priority i
//	18      16    time[0..7], big-endian, in quanta of 512 bit times;
//	              0 resumes the priority (XON)
//	34      26    reserved, zero: the minimum frame (60 bytes before FCS)
const (
	PFCFrameLen         = 60
	EtherTypeMACControl = 0x8808
	OpcodePFC           = 0x0101
	OpcodePause         = 0x0001 // 802.3x PAUSE, not parsed here
)

// PFCDestMAC is the MAC Control destination address (802.3 Annex 31B).
var PFCDestMAC = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

// PFCFrame is an 802.1Qbb frame's content.
type PFCFrame struct {
	Src    [6]byte
	Enable uint8     // bit i: Quanta[i] applies to priority i
	Quanta [8]uint16 // per priority, in 512 bit times; 0 = resume
}

// Errors of ParsePFC.
var (
	ErrNotPFC   = errors.New("netsw: not an 802.1Qbb PFC frame")
	ErrShortPFC = errors.New("netsw: PFC frame truncated")
)

// PausePriority is the frame that pauses one priority for quanta (0: resumes
// it), sent from src.
func PausePriority(src [6]byte, priority int, quanta uint16) PFCFrame {
	f := PFCFrame{Src: src, Enable: 1 << (priority & 7)}
	f.Quanta[priority&7] = quanta
	return f
}

// Encode writes the frame's PFCFrameLen bytes (no FCS) into buf, which
// must hold them, and returns PFCFrameLen.
func (f *PFCFrame) Encode(buf []byte) int {
	b := buf[:PFCFrameLen]
	copy(b[0:6], PFCDestMAC[:])
	copy(b[6:12], f.Src[:])
	binary.BigEndian.PutUint16(b[12:], EtherTypeMACControl)
	binary.BigEndian.PutUint16(b[14:], OpcodePFC)
	b[16] = 0
	b[17] = f.Enable
	for i, q := range f.Quanta {
		binary.BigEndian.PutUint16(b[18+2*i:], q)
	}
	clear(b[34:])
	return PFCFrameLen
}

// ParsePFC reads a PFC frame: ErrNotPFC unless its EtherType is MAC
// Control and its opcode 0x0101, ErrShortPFC if it ends before the last
// time field. The destination address and the padding are not checked
// (802.3 Annex 31B lets a receiver accept its own unicast address too).
func ParsePFC(buf []byte) (PFCFrame, error) {
	if len(buf) < 16 {
		return PFCFrame{}, ErrShortPFC
	}
	if binary.BigEndian.Uint16(buf[12:]) != EtherTypeMACControl || binary.BigEndian.Uint16(buf[14:]) != OpcodePFC {
		return PFCFrame{}, ErrNotPFC
	}
	if len(buf) < 34 {
		return PFCFrame{}, ErrShortPFC
	}
	f := PFCFrame{Src: [6]byte(buf[6:12]), Enable: buf[17]}
	for i := range f.Quanta {
		f.Quanta[i] = binary.BigEndian.Uint16(buf[18+2*i:])
	}
	return f, nil
}
