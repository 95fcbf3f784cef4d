package bth_test

import (
	"math"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
)

func TestSyndromeEncoding(t *testing.T) {
	for _, tc := range []struct {
		s      bth.Syndrome
		byte   uint8
		kind   bth.SyndromeKind
		value  uint8
		String string
	}{
		{bth.AckSyndrome(0), 0x00, bth.AckKind, 0, "ACK(credit=0)"},
		{bth.AckSyndrome(12), 0x0c, bth.AckKind, 12, "ACK(credit=12)"},
		{bth.AckSyndrome(bth.CreditInvalid), 0x1f, bth.AckKind, 31, "ACK(credit=invalid)"},
		{bth.AckSyndrome(0xff), 0x1f, bth.AckKind, 31, "ACK(credit=invalid)"}, // masked
		{bth.RNRNakSyndrome(0), 0x20, bth.RNRNakKind, 0, "RNR_NAK(timer=0)"},
		{bth.RNRNakSyndrome(14), 0x2e, bth.RNRNakKind, 14, "RNR_NAK(timer=14)"},
		{bth.RNRNakSyndrome(0xff), 0x3f, bth.RNRNakKind, 31, "RNR_NAK(timer=31)"},
		{bth.NakSyndrome(bth.NakPSNSeqError), 0x60, bth.NakKind, 0, "NAK(PSN_SEQUENCE_ERROR)"},
		{bth.NakSyndrome(bth.NakInvalidRequest), 0x61, bth.NakKind, 1, "NAK(INVALID_REQUEST)"},
		{bth.NakSyndrome(bth.NakRemoteAccessError), 0x62, bth.NakKind, 2, "NAK(REMOTE_ACCESS_ERROR)"},
		{bth.NakSyndrome(bth.NakRemoteOperationalError), 0x63, bth.NakKind, 3, "NAK(REMOTE_OPERATIONAL_ERROR)"},
		{bth.NakSyndrome(bth.NakInvalidRDRequest), 0x64, bth.NakKind, 4, "NAK(INVALID_RD_REQUEST)"},
		{bth.Syndrome(0x65), 0x65, bth.NakKind, 5, "NAK(NAK_CODE_5)"},
		{bth.Syndrome(0x41), 0x41, bth.ReservedKind, 1, "RESERVED(0x41)"},
		{bth.Syndrome(0x8c), 0x8c, bth.AckKind, 12, "ACK(credit=12)"}, // reserved bit 7 ignored
	} {
		if uint8(tc.s) != tc.byte {
			t.Errorf("%s: byte %#02x, want %#02x", tc.String, uint8(tc.s), tc.byte)
		}
		if tc.s.Kind() != tc.kind {
			t.Errorf("%#02x: Kind %s, want %s", tc.byte, tc.s.Kind(), tc.kind)
		}
		var value uint8
		switch tc.kind {
		case bth.AckKind:
			value = tc.s.Credit()
		case bth.RNRNakKind:
			value = tc.s.RNRTimer()
		default:
			value = uint8(tc.s.NakCode())
		}
		if value != tc.value {
			t.Errorf("%#02x: value %d, want %d", tc.byte, value, tc.value)
		}
		if got := tc.s.String(); got != tc.String {
			t.Errorf("%#02x: String %q, want %q", tc.byte, got, tc.String)
		}
	}
	for k, want := range []string{"ACK", "RNR_NAK", "RESERVED", "NAK"} {
		if got := bth.SyndromeKind(k).String(); got != want {
			t.Errorf("SyndromeKind(%d) = %q, want %q", k, got, want)
		}
	}
}

func TestCreditCode(t *testing.T) {
	counts := []int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384,
		512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768}
	for code, n := range counts {
		if got := bth.CreditCode(n); int(got) != code {
			t.Errorf("CreditCode(%d) = %d, want %d", n, got, code)
		}
		if n > 0 {
			// One WQE short of the count must not round up to it.
			if got := bth.CreditCode(n - 1); int(got) != code-1 {
				t.Errorf("CreditCode(%d) = %d, want %d", n-1, got, code-1)
			}
		}
		if got, ok := bth.CreditCount(uint8(code)); !ok || got != n {
			t.Errorf("CreditCount(%d) = %d, %v; want %d", code, got, ok, n)
		}
	}
	for _, tc := range []struct{ wqes, code int }{
		{-5, 0}, {5, 4}, {7, 5}, {100, 13}, {40000, 30}, {1 << 30, 30},
	} {
		if got := bth.CreditCode(tc.wqes); int(got) != tc.code {
			t.Errorf("CreditCode(%d) = %d, want %d", tc.wqes, got, tc.code)
		}
	}
	if _, ok := bth.CreditCount(bth.CreditInvalid); ok {
		t.Error("CreditCount(CreditInvalid) is ok")
	}
	if bth.CreditCode(1<<20) == bth.CreditInvalid {
		t.Error("CreditCode must never produce the invalid code")
	}
}

func TestRNRTimerDuration(t *testing.T) {
	// IBA 9.7.5.2.8, in milliseconds as the spec lists them.
	ms := []float64{655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32,
		0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48,
		30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52}
	for code, m := range ms {
		want := time.Duration(math.Round(m*1000)) * time.Microsecond
		if got := bth.RNRTimerDuration(uint8(code)); got != want {
			t.Errorf("RNRTimerDuration(%d) = %v, want %v", code, got, want)
		}
		if got := bth.RNRTimerDuration(uint8(code) | 0xe0); got != want {
			t.Errorf("RNRTimerDuration(%d|0xe0) = %v, want %v (only 5 bits count)", code, got, want)
		}
	}
}
