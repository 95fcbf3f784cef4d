//go:build linux

package afxdp

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeRX is an xsk whose RX ring and UMEM live in Go memory, with the test
// as the kernel: it writes descriptors and publishes them, so receive's
// chain handling runs without a socket.
type fakeRX struct {
	x    *xsk
	prod *uint32
}

const fakeChunk = 4096

func newFakeRX(t *testing.T, chunks int) *fakeRX {
	t.Helper()
	const size = 64
	// Producer, consumer, flags, then the entries, in one block of
	// 8-byte words so that the entries are aligned.
	ring := func(esize int) ([]byte, unix.XDPRingOffset) {
		words := make([]uint64, 8+size*esize/8)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
		return mem, unix.XDPRingOffset{Producer: 0, Consumer: 8, Flags: 16, Desc: 64}
	}
	x := &xsk{fd: -1, umem: make([]byte, chunks*fakeChunk), chunkMask: ^uint64(fakeChunk - 1)}
	mem, off := ring(int(unsafe.Sizeof(unix.XDPDesc{})))
	x.rx = newDescRing(mem, off, size)
	mem, off = ring(8)
	x.fill = newAddrRing(mem, off, size)
	x.held = make([]uint64, 0, chunks)
	x.rxSpare = make([]uint64, 0, chunks)
	return &fakeRX{x: x, prod: x.rx.producer}
}

// put writes one descriptor for chunk c holding data, with XDP_PKT_CONTD
// if contd, and publishes it.
func (f *fakeRX) put(c int, data []byte, contd bool) {
	addr := uint64(c*fakeChunk + rxHeadroom)
	copy(f.x.umem[addr:], data)
	d := &f.x.rx.descs[*f.prod&f.x.rx.mask]
	d.Addr, d.Len, d.Options = addr, uint32(len(data)), 0
	if contd {
		d.Options = unix.XDP_PKT_CONTD
	}
	*f.prod++
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// TestReceiveChains feeds receive the descriptor sequences the kernel
// produces for multi-buffer frames, and malformed ones: a whole chain is
// one contiguous frame, a chain whose end is not yet in the ring waits for
// it, and a chain longer than the largest frame or than 18 descriptors is
// dropped whole and counted, with the frames around it delivered intact.
func TestReceiveChains(t *testing.T) {
	const rxCap = fakeChunk - rxHeadroom
	const maxFrame = 4400
	f := newFakeRX(t, 64)
	x := f.x
	frames := make([][]byte, 8)

	// A 4400-byte frame in two descriptors, between two single ones.
	big := pattern(maxFrame, 1)
	small1, small2 := pattern(100, 2), pattern(60, 3)
	f.put(0, small1, false)
	f.put(1, big[:rxCap], true)
	f.put(2, big[rxCap:], false)
	f.put(3, small2, false)
	n := x.receive(frames, rxCap, maxFrame)
	if n != 3 || !bytes.Equal(frames[0], small1) || !bytes.Equal(frames[1], big) || !bytes.Equal(frames[2], small2) {
		t.Fatalf("got %d frames (lengths %d %d %d), want 100, 4400, 60 intact", n, len(frames[0]), len(frames[1]), len(frames[2]))
	}
	if got := x.mbFrames.Load(); got != 1 {
		t.Errorf("multi-buffer frames %d, want 1", got)
	}
	if len(x.held) != 4 {
		t.Errorf("%d chunks held for the fill ring, want 4", len(x.held))
	}
	x.recycle()

	// The first half of a chain alone stays in the ring; the next
	// receive, with the second half there, gets the frame whole.
	f.put(4, big[:rxCap], true)
	if n := x.receive(frames, rxCap, maxFrame); n != 0 {
		t.Fatalf("half a chain: %d frames, want 0", n)
	}
	f.put(5, big[rxCap:], false)
	if n := x.receive(frames, rxCap, maxFrame); n != 1 || !bytes.Equal(frames[0], big) {
		t.Fatalf("completed chain: %d frames (first %d bytes), want the 4400-byte frame", n, len(frames[0]))
	}
	x.recycle()

	// A chain longer than maxFrame (its last descriptor lost, so the
	// next packet's join it: 3840 + 3840 bytes) is dropped, and the
	// next frame arrives intact.
	f.put(6, big[:rxCap], true)
	f.put(7, pattern(rxCap, 9), false)
	f.put(8, small1, false)
	if n := x.receive(frames, rxCap, maxFrame); n != 1 || !bytes.Equal(frames[0], small1) {
		t.Fatalf("after an overlong chain: %d frames, want only the 100-byte one", n)
	}
	if got := x.chainDrops.Load(); got != 1 {
		t.Errorf("chains dropped %d, want 1", got)
	}
	if len(x.held) != 3 {
		t.Errorf("%d chunks held for the fill ring, want 3 (dropped ones too)", len(x.held))
	}
	x.recycle()

	// A chain of more than 18 descriptors (small ones, so not too many
	// bytes) is dropped as it arrives, its rest consumed in a later
	// receive, and the frame after it delivered.
	for i := range 20 {
		f.put(9+i, small2[:10], true)
	}
	if n := x.receive(frames, rxCap, 1<<20); n != 0 {
		t.Fatalf("20 descriptors of a chain: %d frames, want 0", n)
	}
	f.put(29, small2[:10], false)
	f.put(30, small2, false)
	if n := x.receive(frames, rxCap, 1<<20); n != 1 || !bytes.Equal(frames[0], small2) {
		t.Fatalf("after a chain of 21 descriptors: %d frames, want only the 60-byte one", n)
	}
	if got := x.chainDrops.Load(); got != 2 {
		t.Errorf("chains dropped %d, want 2", got)
	}
	if x.rx.cachedCons != *f.prod {
		t.Errorf("consumer %d, producer %d: descriptors left unconsumed", x.rx.cachedCons, *f.prod)
	}
	x.recycle()

	// Reassembly buffers are reused: a steady stream of chains does
	// not allocate.
	allocs := testing.AllocsPerRun(50, func() {
		f.put(40, big[:rxCap], true)
		f.put(41, big[rxCap:], false)
		if n := x.receive(frames, rxCap, maxFrame); n != 1 {
			t.Fatalf("%d frames", n)
		}
		*x.fill.consumer = *x.fill.producer // the kernel takes the fill ring's chunks
		x.recycle()
	})
	if allocs != 0 {
		t.Errorf("receive of a chain: %v allocations, want 0", allocs)
	}
}

func TestMultiBufferError(t *testing.T) {
	err := multiBufferError("b-sw", 0, 4110, lineJoin{unix.EOPNOTSUPP, unix.EOPNOTSUPP})
	want := "b-sw queue 0: frames of 4110 bytes need AF_XDP multi-buffer (XDP_USE_SG, Linux 6.6+), which b-sw refused in every bind mode"
	if !bytes.HasPrefix([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	if other := multiBufferError("b-sw", 0, 4110, unix.EBUSY); other != unix.EBUSY {
		t.Errorf("EBUSY became %v", other)
	}
}
