package bth

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// rxe_icrc.c seeds its CRC with 0xdebb20e3, "the result of computing a CRC
// with a seed of 0xffffffff and 8 bytes of 0xff representing a masked LRH",
// kept uninverted; Go's crc32.Update returns the inverted state.
func TestLRHSeedMatchesRxe(t *testing.T) {
	if lrhSeed != ^uint32(0xdebb20e3) {
		t.Fatalf("lrhSeed = %#08x, want %#08x", lrhSeed, ^uint32(0xdebb20e3))
	}
}

func TestOnesSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 80 {
		for range 20 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if n > 0 && rng.IntN(4) == 0 {
				for i := range b {
					b[i] = 0xff // worst case for carries
				}
			}
			want := referenceSum(b)
			got := fold(onesSum(0, b))
			// 0x0000 and 0xffff are both zero in one's complement.
			if got != want && !(got == 0 && want == 0xffff || got == 0xffff && want == 0) {
				t.Fatalf("len %d: fold(onesSum) = %#04x, want %#04x (% x)", n, got, want, b)
			}
		}
	}
}

func referenceSum(b []byte) uint16 {
	var sum uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		sum += w
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

func TestFoldCarries(t *testing.T) {
	for _, tc := range []struct {
		sum  uint64
		want uint16
	}{
		{0, 0},
		{0xffff, 0xffff},
		{0x10000, 1},
		{0xffffffffffffffff, 0xffff},
		{0xfffffffeffffffff, 0xfffe}, // exercises the second 32-bit fold
		{0x0001000100010001, 4},
	} {
		if got := fold(tc.sum); got != tc.want {
			t.Errorf("fold(%#x) = %#04x, want %#04x", tc.sum, got, tc.want)
		}
	}
}

func BenchmarkOnesSum(b *testing.B) {
	buf := make([]byte, 1070)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		sinkSum = onesSum(0, buf)
	}
}

var sinkSum uint64

func TestUpdateHeadersMatchesCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 100 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		seed := rng.Uint32()
		if got, want := updateHeaders(seed, b), crc32.Update(seed, crc32.IEEETable, b); got != want {
			t.Fatalf("len %d: updateHeaders = %#08x, crc32.Update = %#08x", n, got, want)
		}
	}
}
