package bth

import (
	"fmt"
	"time"
)

// AETH is a view of the 4-byte ACK Extended Transport Header (IBA 9.3):
// syndrome (1) and the responder's 24-bit message sequence number (3). It
// follows the BTH of every ACK, NAK and atomic ACK and of the first and last
// packet of an RDMA READ response.
type AETH []byte

// AETHFields holds every AETH field.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32
}

// Encode writes the whole header from f; MSN is masked to 24 bits.
func (a AETH) Encode(f *AETHFields) {
	_ = a[AETHLen-1]
	a[0] = byte(f.Syndrome)
	put24(a[1:], f.MSN)
}

// Fields returns every field of the header.
func (a AETH) Fields() AETHFields { return AETHFields{Syndrome: a.Syndrome(), MSN: a.MSN()} }

// Syndrome returns the syndrome byte.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// SetSyndrome sets the syndrome byte.
func (a AETH) SetSyndrome(s Syndrome) { a[0] = byte(s) }

// MSN returns the 24-bit message sequence number.
func (a AETH) MSN() uint32 { return get24(a[1:]) }

// SetMSN sets the MSN, masked to 24 bits.
func (a AETH) SetMSN(msn uint32) { put24(a[1:], msn) }

// Syndrome is the AETH syndrome byte (IBA 9.3): bit 7 reserved, bits 6-5 the
// kind of acknowledgement, bits 4-0 a value whose meaning depends on the
// kind (credit count, RNR timer or NAK code).
type Syndrome uint8

// SyndromeKind is bits 6-5 of a Syndrome.
type SyndromeKind uint8

const (
	AckKind      SyndromeKind = 0b00 // positive acknowledgement with credit count
	RNRNakKind   SyndromeKind = 0b01 // receiver not ready, retry after the timer
	ReservedKind SyndromeKind = 0b10 // reserved; receivers treat it as invalid
	NakKind      SyndromeKind = 0b11 // negative acknowledgement with a NakCode
)

const (
	syndromeKindShift = 5
	syndromeValueMask = 0x1f
)

// String returns "ACK", "RNR_NAK", "RESERVED" or "NAK".
func (k SyndromeKind) String() string {
	return [...]string{"ACK", "RNR_NAK", "RESERVED", "NAK"}[k&3]
}

// NakCode is the value of a NAK syndrome.
type NakCode uint8

const (
	NakPSNSeqError            NakCode = 0 // PSN sequence error: the requester rewinds to the MSN/PSN
	NakInvalidRequest         NakCode = 1
	NakRemoteAccessError      NakCode = 2
	NakRemoteOperationalError NakCode = 3
	NakInvalidRDRequest       NakCode = 4 // reliable datagram only
)

var nakCodeNames = [...]string{
	NakPSNSeqError:            "PSN_SEQUENCE_ERROR",
	NakInvalidRequest:         "INVALID_REQUEST",
	NakRemoteAccessError:      "REMOTE_ACCESS_ERROR",
	NakRemoteOperationalError: "REMOTE_OPERATIONAL_ERROR",
	NakInvalidRDRequest:       "INVALID_RD_REQUEST",
}

// String returns the IBA name of the code, e.g. "PSN_SEQUENCE_ERROR", or
// "NAK_CODE_n" for a reserved code.
func (c NakCode) String() string {
	if int(c) < len(nakCodeNames) {
		return nakCodeNames[c]
	}
	return fmt.Sprintf("NAK_CODE_%d", uint8(c))
}

// AckSyndrome returns an ACK syndrome carrying the given credit code (see
// CreditCode); the code is masked to 5 bits.
func AckSyndrome(creditCode uint8) Syndrome {
	return Syndrome(uint8(AckKind)<<syndromeKindShift | creditCode&syndromeValueMask)
}

// RNRNakSyndrome returns an RNR NAK syndrome carrying the given RNR timer
// code (see RNRTimerDuration); the code is masked to 5 bits.
func RNRNakSyndrome(timer uint8) Syndrome {
	return Syndrome(uint8(RNRNakKind)<<syndromeKindShift | timer&syndromeValueMask)
}

// NakSyndrome returns a NAK syndrome with the given code.
func NakSyndrome(c NakCode) Syndrome {
	return Syndrome(uint8(NakKind)<<syndromeKindShift | uint8(c)&syndromeValueMask)
}

// Kind returns the kind of acknowledgement. The reserved bit 7 is ignored.
func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s >> syndromeKindShift & 3) }

// Credit returns the credit code of an ACK syndrome.
func (s Syndrome) Credit() uint8 { return uint8(s) & syndromeValueMask }

// RNRTimer returns the RNR timer code of an RNR NAK syndrome.
func (s Syndrome) RNRTimer() uint8 { return uint8(s) & syndromeValueMask }

// NakCode returns the code of a NAK syndrome.
func (s Syndrome) NakCode() NakCode { return NakCode(s & syndromeValueMask) }

// String describes the syndrome, e.g. "ACK(credit=5)", "RNR_NAK(timer=14)",
// "NAK(PSN_SEQUENCE_ERROR)".
func (s Syndrome) String() string {
	switch s.Kind() {
	case AckKind:
		if s.Credit() == CreditInvalid {
			return "ACK(credit=invalid)"
		}
		return fmt.Sprintf("ACK(credit=%d)", s.Credit())
	case RNRNakKind:
		return fmt.Sprintf("RNR_NAK(timer=%d)", s.RNRTimer())
	case NakKind:
		return "NAK(" + s.NakCode().String() + ")"
	default:
		return fmt.Sprintf("RESERVED(0x%02x)", uint8(s))
	}
}

// CreditInvalid is the ACK credit code meaning "no credit information": the
// responder has no receive queue limit to advertise (e.g. an SRQ) and the
// requester must not limit itself by credits (IBA 9.7.7, end-to-end flow
// control).
const CreditInvalid = 31

// creditCounts maps credit codes 0-30 to receive WQE counts (the
// logarithmic encoding of IBA 9.7.7; also rdmavt's credit_table).
var creditCounts = [CreditInvalid]int{
	0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
	16384, 24576, 32768,
}

// CreditCode encodes the number of free receive WQEs as the largest credit
// code whose count does not exceed wqes, so a requester never believes it
// has more credits than the responder has WQEs.
func CreditCode(wqes int) uint8 {
	code := uint8(0)
	for c, n := range creditCounts {
		if n > wqes {
			break
		}
		code = uint8(c)
	}
	return code
}

// CreditCount decodes a credit code into a number of receive WQEs. ok is
// false for CreditInvalid (and anything wider than 5 bits), which means the
// requester is not limited by credits.
func CreditCount(code uint8) (wqes int, ok bool) {
	if int(code) >= len(creditCounts) {
		return 0, false
	}
	return creditCounts[code], true
}

// rnrTimerMicros maps RNR NAK timer codes to the minimum delay before the
// requester retries (IBA 9.7.5.2.8). Code 0 is the longest, 655.36 ms.
// rxe's rnrnak_usec has 61410 for code 25; the IBA value is 61.44 ms.
var rnrTimerMicros = [32]int64{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRTimerDuration returns the delay an RNR NAK timer code asks for; only the
// low 5 bits of timer are used.
func RNRTimerDuration(timer uint8) time.Duration {
	return time.Duration(rnrTimerMicros[timer&syndromeValueMask]) * time.Microsecond
}
