//go:build linux

package afxdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// # Multi-buffer frames
//
// A frame larger than one UMEM chunk (Config.MaxFrame above a chunk less
// the receive headroom: path MTU 4096 needs about 4.2 KB) crosses AF_XDP
// as several descriptors, one chunk each, every one but the last with
// XDP_PKT_CONTD in its options (Linux 6.6+, "multi-buffer"). The sockets
// are then bound with XDP_USE_SG, and the XDP program must be loaded for
// frags (bpf.Steer.Frags), or the kernel drops such frames.
//
// Receive: a chain is copied into a reassembly buffer of MaxFrame bytes
// and handed to the engine as one contiguous frame; single-descriptor
// frames stay slices of the UMEM as before. The buffers are kept per
// socket and reused from one Receive to the next, so once the batch size
// has been seen no Receive allocates. The kernel puts only whole packets
// in the RX ring (af_xdp.rst, "Multi-Buffer Support"), but a batch may
// still end inside one: a chain whose last descriptor is not there yet
// stays in the ring for the next Receive. A chain that grows beyond
// MaxFrame bytes or maxSegs descriptors cannot be a frame the port
// carries (a lost last descriptor merges two packets into one chain, for
// one): it is dropped whole, counted in rx_chains_dropped, and its chunks
// go back to the fill ring.
//
// Transmit: the TX chunks are handed out in groups of adjacent chunks,
// enough for MaxFrame bytes, so that the engine still builds each frame
// in place in one contiguous buffer; Transmit then writes one descriptor
// per chunk the frame covers. The kernel completes every descriptor of a
// frame; only a group's first chunk goes back to the free list.

// maxSegs bounds the descriptors of one frame. In copy mode the kernel
// takes at most CONFIG_MAX_SKB_FRAGS + 1 per packet, and the smallest
// value of that option makes it 18 (af_xdp.rst).
const maxSegs = 18

// errMultiBuffer marks the bind failure of a port that needs
// multi-buffer on a device or kernel without it.
var errMultiBuffer = errors.New("need AF_XDP multi-buffer (XDP_USE_SG, Linux 6.6+)")

// multiBufferError explains a bind that failed in every mode while
// multi-buffer was asked for: EOPNOTSUPP (the driver has no multi-buffer
// for the mode) or EINVAL (a kernel that knows no XDP_USE_SG) in any mode
// says multi-buffer is what is missing. Any other failure is returned as
// it is.
func multiBufferError(iface string, queue, maxFrame int, err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s queue %d: frames of %d bytes %w, which %s refused in every bind mode (%v); lower the interface MTU or the path MTU to 2048",
			iface, queue, maxFrame, errMultiBuffer, iface, err)
	}
	return err
}

// asmBuf hands out the next reassembly buffer, growing the pool only when
// a batch holds more chains than any before.
func (x *xsk) asmBuf(maxFrame int) []byte {
	if x.asmUsed == len(x.asm) {
		x.asm = append(x.asm, make([]byte, maxFrame))
	}
	b := x.asm[x.asmUsed]
	x.asmUsed++
	return b
}

// receiveChain handles the chain whose first descriptor is at ring
// offset i (of avail readable ones). It returns how many descriptors it
// consumed (0: the chain's end is not in the ring yet, leave it) and the
// frame, nil if it dropped the chain.
func (x *xsk) receiveChain(i, avail uint32, rxCap, maxFrame int) (uint32, []byte) {
	// Find the last descriptor, or give up where the chain is already
	// too long.
	j := i
	for {
		if j-i >= maxSegs {
			// Too many descriptors: drop them, and the rest of the
			// chain as it arrives.
			x.dropChain(i, j)
			x.rxSkip = true
			return j - i, nil
		}
		if j == avail {
			return 0, nil
		}
		if x.rx.descs[(x.rx.cachedCons+j)&x.rx.mask].Options&unix.XDP_PKT_CONTD == 0 {
			break
		}
		j++
	}
	end := j + 1
	total := 0
	for k := i; k < end; k++ {
		total += min(int(x.rx.descs[(x.rx.cachedCons+k)&x.rx.mask].Len), rxCap)
	}
	if total > maxFrame {
		x.dropChain(i, end)
		return end - i, nil
	}
	buf := x.asmBuf(maxFrame)
	off := 0
	for k := i; k < end; k++ {
		d := &x.rx.descs[(x.rx.cachedCons+k)&x.rx.mask]
		ln := uint64(min(int(d.Len), rxCap))
		off += copy(buf[off:], x.umem[d.Addr:d.Addr+ln])
		x.held = append(x.held, d.Addr&x.chunkMask)
	}
	x.rxMBFrames++
	return end - i, buf[:total:total]
}

// skipChain consumes the rest of a chain being dropped (x.rxSkip), from
// ring offset i, up to and including its last descriptor. It returns how
// many descriptors it consumed.
func (x *xsk) skipChain(i, avail uint32) uint32 {
	j := i
	for j < avail {
		last := x.rx.descs[(x.rx.cachedCons+j)&x.rx.mask].Options&unix.XDP_PKT_CONTD == 0
		j++
		if last {
			x.rxSkip = false
			break
		}
	}
	x.giveBack(i, j)
	return j - i
}

// dropChain gives the chunks of descriptors [i, j) back and counts one
// dropped chain.
func (x *xsk) dropChain(i, j uint32) {
	x.giveBack(i, j)
	x.rxChainDrops++
}

// giveBack returns the chunks of descriptors [i, j) to the fill ring at
// the next recycle.
func (x *xsk) giveBack(i, j uint32) {
	for k := i; k < j; k++ {
		x.held = append(x.held, x.rx.descs[(x.rx.cachedCons+k)&x.rx.mask].Addr&x.chunkMask)
	}
}

// txGroupStart reports whether addr, a completed TX address, is the first
// chunk of its group (and so the handle the free list keeps).
func (x *xsk) txGroupStart(addr uint64) bool {
	return (addr-x.txBase)%x.txGroup == 0
}
