//go:build linux

// Package afxdp is softnic's AF_XDP port: a dataplane.Port and
// dataplane.Waiter over one AF_XDP socket per receive queue of an
// interface, fed by the XDP steering program of package bpf.
//
// # Mechanism
//
// Each socket has its own UMEM (one mmap of NumFrames chunks of FrameSize
// bytes, registered with XDP_UMEM_REG) and its four rings mapped from the
// socket. Half the chunks serve reception and circulate fill ring → kernel
// → RX ring → engine → fill ring; the other half serve transmission and
// circulate free list → engine → TX ring → kernel → completion ring → free
// list. Nothing is copied in user space (but for frames larger than a
// chunk, which are reassembled: multibuf.go) and nothing is allocated
// after Open:
//
//   - Receive returns up to len(frames) frames as slices of the UMEM,
//     valid until the next Receive, which first gives their chunks back to
//     the fill ring, the whole batch with one index store.
//   - TxBuffer hands out a TX chunk for the engine to build a frame in;
//     Transmit writes its descriptor into the TX ring (not yet visible);
//     Flush publishes the batch with one index store, kicks the kernel
//     with one sendto(2) when it asks for one (XDP_USE_NEED_WAKEUP; in
//     copy mode it always does) and reaps the completion ring.
//   - Wait is one ppoll(2) over the sockets and an eventfd that Wake
//     writes (package doorbell), so an idle port costs no CPU.
//
// Sockets bind in zero-copy mode where the driver supports it and fall
// back to copy mode (veth). The steering program inserts nothing itself:
// Open puts each socket's fd into the XSKMAP slot of its queue, and Close
// removes it, after which the program passes RoCEv2 frames to the kernel
// again.
//
// # One UMEM per socket
//
// Sockets on several queues could share one UMEM (XDP_SHARED_UMEM), but
// each would still need its own fill and completion ring, and the chunk
// pools would have to be shared between the goroutine-free per-queue
// paths; separate UMEMs keep every socket's pools private and the code
// lock-free, at the price of memory (NumFrames chunks per queue). veth has
// one queue, so the common case has one UMEM either way. All queues
// receive; transmission uses the first queue's socket only, which keeps
// one TX batch = one sendto (a frame's queue does not matter to the wire).
//
// # Why not github.com/asavie/xdp
//
// asavie/xdp v0.3.3 was the suggested library; this package replaces it
// because it blocks requirements of the engine: its Receive returns the
// frames' chunks to the free list at once, so they must be copied out
// before the next Fill (the engine parses frames in place); it has no
// XDP_USE_NEED_WAKEUP, so every batch costs system calls even when the
// kernel needs none; its Close does not unmap the rings, so a process
// cannot bind the same interface and queue again (tests and daemon
// restarts do); and its Transmit panics on unexpected errors, which the
// daemon must survive. What softnic needs of AF_XDP is small (four rings
// and a handful of socket options, all in golang.org/x/sys/unix).
package afxdp

import (
	"errors"
	"fmt"
	"iter"
	"net"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
)

// Config describes a port.
type Config struct {
	// Interface is the network interface, looked up in the network
	// namespace of the thread that calls Open.
	Interface string
	// Queues are the receive queues to bind, one socket each (default:
	// all the interface has; veth usually 1).
	Queues []int
	// FrameSize is the UMEM chunk size: 2048 or 4096 (default 4096). A
	// received frame starts XDP_PACKET_HEADROOM (256) bytes into its
	// chunk, so 2048 carries frames up to 1792 bytes (RoCE path MTU
	// 1024) and 4096 up to 3840 (path MTU 2048) in one chunk; larger
	// frames (path MTU 4096) take several, see MaxFrame.
	FrameSize int
	// NumFrames is the number of UMEM chunks per socket, half for
	// receiving and half for transmitting (default 4096).
	NumFrames int
	// RingSize is the size of each of the fill, completion, RX and TX
	// rings, a power of two (default 2048).
	RingSize int
	// MaxFrame is the largest frame the port is to carry (0: what one
	// chunk holds, FrameSize less the 256-byte receive headroom). Larger
	// frames need AF_XDP multi-buffer (multibuf.go): the sockets bind
	// with XDP_USE_SG and frames cross in several chunks; Open fails, in
	// one line naming the interface, where the driver or kernel lacks it.
	// The interface's MTU bounds it further (Port.MaxFrame). Path MTU
	// 4096 needs about 4.2 KB (4096 + headers).
	MaxFrame int
	// XSKMap, if set, is the steering program's XSKMAP (bpf.Steer.XSKMap):
	// Open inserts each socket at its queue index, Close removes it.
	XSKMap *ebpf.Map
}

const (
	defaultFrameSize = 4096
	defaultNumFrames = 4096
	defaultRingSize  = 2048
	// rxHeadroom is where a received frame starts in its chunk: the
	// kernel reserves XDP_PACKET_HEADROOM in front of it (copy mode on
	// veth, and zero-copy drivers alike).
	rxHeadroom = unix.XDP_PACKET_HEADROOM
	// ethHeaderLen is what an MTU does not count.
	ethHeaderLen = 14
	// txRetry bounds a Wait while the kernel holds back frames of the
	// TX ring (the peer's queue was full): each wait's ppoll makes the
	// kernel try again (copy mode drives transmission from poll).
	txRetry = 50 * time.Microsecond
	// noChunk marks "no TX chunk handed out".
	noChunk = ^uint64(0)
)

// Port is an AF_XDP port. Its dataplane.Port methods belong to one
// goroutine, the engine's poll loop; Wake and Stats are safe from any
// goroutine.
type Port struct {
	cfg      Config
	ifindex  int
	socks    []*xsk
	tx       *xsk   // the socket that transmits
	txChunk  uint64 // chunk handed out by TxBuffer and not yet transmitted
	maxFrame int    // largest frame to transmit: chunk and MTU permitting
	rxCap    int    // largest frame a chunk can hold after the headroom
	rxNext   int    // first socket Receive reads, round robin
	txDescs  uint32 // TX descriptors a frame of maxFrame bytes takes
	bell     *doorbell.Doorbell
	st       counters
	closed   bool
}

// counters are updated once per batch by the poll loop and read by Stats
// from other goroutines, hence atomics. The frame counts are the
// sockets' (xsk.rxFrames, xsk.txFrames).
type counters struct {
	rxEmptyPolls, txRingFull           atomic.Uint64
	fillRefills, wakeups, txKickErrors atomic.Uint64
}

// Stats are the port's counters since Open.
type Stats struct {
	RxFrames     uint64 // frames handed to the engine
	TxFrames     uint64 // frames given to the kernel
	RxEmptyPolls uint64 // Receive calls that found every RX ring empty
	TxRingFull   uint64 // TxBuffer calls that found no free chunk or TX slot
	FillRefills  uint64 // batches of chunks returned to the fill rings
	Wakeups      uint64 // sendto/recvfrom calls that kicked the kernel
	TxKickErrors uint64 // sendto errors other than EAGAIN
	// The kernel's XDP_STATISTICS, summed over the sockets.
	RxDropped       uint64 // frames dropped for other reasons (e.g. too big for a chunk)
	RxInvalidDescs  uint64 // bad fill ring entries
	TxInvalidDescs  uint64 // bad TX descriptors
	RxRingFull      uint64 // frames dropped because the RX ring was full
	RxFillRingEmpty uint64 // frames dropped because the fill ring was empty
	TxRingEmpty     uint64 // kicks that found the TX ring empty
	// Multi-buffer (XDP_USE_SG) receive, summed over the sockets.
	RxMultiBuffer   uint64 // frames that arrived in several descriptors, reassembled
	RxChainsDropped uint64 // descriptor chains dropped as malformed (longer than MaxFrame or 18 descriptors)
}

// All yields every counter as (metric name, value) in a fixed order.
func (s Stats) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for _, c := range []struct {
			name string
			v    uint64
		}{
			{"rx_frames", s.RxFrames}, {"tx_frames", s.TxFrames},
			{"rx_empty_polls", s.RxEmptyPolls}, {"tx_ring_full", s.TxRingFull},
			{"fill_refills", s.FillRefills}, {"wakeups", s.Wakeups}, {"tx_kick_errors", s.TxKickErrors},
			{"rx_dropped", s.RxDropped}, {"rx_invalid_descs", s.RxInvalidDescs},
			{"tx_invalid_descs", s.TxInvalidDescs}, {"rx_ring_full", s.RxRingFull},
			{"rx_fill_ring_empty_descs", s.RxFillRingEmpty}, {"tx_ring_empty_descs", s.TxRingEmpty},
			{"rx_multi_buffer", s.RxMultiBuffer}, {"rx_chains_dropped", s.RxChainsDropped},
		} {
			if !yield(c.name, c.v) {
				return
			}
		}
	}
}

// QueueStats are one socket's counters: the frames through it and the
// kernel's XDP_STATISTICS for it. Stats sums them over the sockets.
type QueueStats struct {
	Queue           int    // the receive queue the socket is bound to
	RxFrames        uint64 // frames handed to the engine
	TxFrames        uint64 // frames given to the kernel (the first socket transmits for the port)
	RxDropped       uint64 // frames dropped for other reasons (e.g. too big for a chunk)
	RxInvalidDescs  uint64 // bad fill ring entries
	TxInvalidDescs  uint64 // bad TX descriptors
	RxRingFull      uint64 // frames dropped because the RX ring was full
	RxFillRingEmpty uint64 // frames dropped because the fill ring was empty
	TxRingEmpty     uint64 // kicks that found the TX ring empty
	RxMultiBuffer   uint64 // frames that arrived in several descriptors, reassembled
	RxChainsDropped uint64 // descriptor chains dropped as malformed
}

// All yields every counter but Queue as (metric name, value) in a fixed
// order, under the names Stats.All gives their sums.
func (q QueueStats) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for _, c := range []struct {
			name string
			v    uint64
		}{
			{"rx_frames", q.RxFrames}, {"tx_frames", q.TxFrames},
			{"rx_dropped", q.RxDropped}, {"rx_invalid_descs", q.RxInvalidDescs},
			{"tx_invalid_descs", q.TxInvalidDescs}, {"rx_ring_full", q.RxRingFull},
			{"rx_fill_ring_empty_descs", q.RxFillRingEmpty}, {"tx_ring_empty_descs", q.TxRingEmpty},
			{"rx_multi_buffer", q.RxMultiBuffer}, {"rx_chains_dropped", q.RxChainsDropped},
		} {
			if !yield(c.name, c.v) {
				return
			}
		}
	}
}

// Open binds the sockets in the calling thread's network namespace and
// registers them in cfg.XSKMap. The sockets stay in that namespace; the
// Port may then be used from any goroutine.
func Open(cfg Config) (p *Port, err error) {
	if cfg.FrameSize == 0 {
		cfg.FrameSize = defaultFrameSize
	}
	if cfg.NumFrames == 0 {
		cfg.NumFrames = defaultNumFrames
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = defaultRingSize
	}
	if cfg.FrameSize != 2048 && cfg.FrameSize != 4096 {
		return nil, fmt.Errorf("afxdp: FrameSize %d: want 2048 or 4096", cfg.FrameSize)
	}
	if cfg.RingSize < 64 || cfg.RingSize&(cfg.RingSize-1) != 0 {
		return nil, fmt.Errorf("afxdp: RingSize %d: want a power of two >= 64", cfg.RingSize)
	}
	if cfg.NumFrames < 64 {
		return nil, fmt.Errorf("afxdp: NumFrames %d: want at least 64", cfg.NumFrames)
	}
	rxCap := cfg.FrameSize - rxHeadroom
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = rxCap
	}
	if cfg.MaxFrame < 64 || cfg.MaxFrame > maxSegs*rxCap {
		return nil, fmt.Errorf("afxdp: MaxFrame %d: want 64 to %d (%d chunks of %d bytes)", cfg.MaxFrame, maxSegs*rxCap, maxSegs, rxCap)
	}
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	if len(cfg.Queues) == 0 {
		for q := range RXQueues(cfg.Interface) {
			cfg.Queues = append(cfg.Queues, q)
		}
	} else if err := CheckQueues(cfg.Interface, cfg.Queues); err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	p = &Port{
		cfg:      cfg,
		ifindex:  ifi.Index,
		txChunk:  noChunk,
		rxCap:    rxCap,
		maxFrame: min(cfg.MaxFrame, ifi.MTU+ethHeaderLen),
	}
	// Multi-buffer only where a frame the port carries can outgrow a
	// chunk: otherwise the sockets bind exactly as before.
	sg := p.maxFrame > rxCap
	defer func() {
		if err != nil {
			p.Close()
			p = nil
		}
	}()
	fds := make([]int, 0, len(cfg.Queues))
	for _, q := range cfg.Queues {
		x, err := openXSK(ifi.Index, q, &cfg, p.maxFrame, sg)
		if err != nil {
			if sg {
				if mb := multiBufferError(cfg.Interface, q, p.maxFrame, err); mb != err {
					return p, fmt.Errorf("afxdp: %w", mb)
				}
			}
			return p, fmt.Errorf("afxdp: %s queue %d: %w", cfg.Interface, q, err)
		}
		p.socks = append(p.socks, x)
		fds = append(fds, x.fd)
		if cfg.XSKMap != nil {
			if err := cfg.XSKMap.Put(uint32(q), uint32(x.fd)); err != nil {
				return p, fmt.Errorf("afxdp: insert %s queue %d into the XSKMAP: %w", cfg.Interface, q, err)
			}
		}
	}
	p.tx = p.socks[0]
	p.txDescs = uint32((p.maxFrame + cfg.FrameSize - 1) / cfg.FrameSize)
	if p.bell, err = doorbell.New(fds...); err != nil {
		return p, fmt.Errorf("afxdp: %w", err)
	}
	return p, nil
}

// ZeroCopy reports whether the sockets are bound in zero-copy mode (false:
// copy mode, as on veth).
func (p *Port) ZeroCopy() bool { return p.tx.zeroCopy }

// NeedWakeup reports whether the kernel has XDP_USE_NEED_WAKEUP, so that
// kicks happen only when it asks for them.
func (p *Port) NeedWakeup() bool { return p.tx.needWakeup }

// Queues are the receive queues the port's sockets are bound to.
func (p *Port) Queues() []int { return p.cfg.Queues }

// MaxFrame is the largest frame the port carries: Config.MaxFrame (by
// default a UMEM chunk less the receive headroom), and no more than the
// interface's MTU allows.
func (p *Port) MaxFrame() int { return p.maxFrame }

// MultiBuffer reports whether the sockets are bound with XDP_USE_SG:
// frames larger than a chunk cross in several descriptors.
func (p *Port) MultiBuffer() bool { return p.tx.sg }

// Receive returns the chunks of the previous batch to the fill rings, then
// fills frames with up to len(frames) received frames, taking the sockets
// in turn so that one busy queue cannot starve the others.
func (p *Port) Receive(frames [][]byte) int {
	for _, x := range p.socks {
		if x.recycle() > 0 {
			p.st.fillRefills.Add(1)
		}
	}
	n := 0
	for i := range p.socks {
		x := p.socks[(p.rxNext+i)%len(p.socks)]
		if k := x.receive(frames[n:], p.rxCap, p.maxFrame); k > 0 {
			x.rxFrames.Add(uint64(k))
			n += k
		}
		if n == len(frames) {
			break
		}
	}
	p.rxNext++
	if n > 0 {
		return n
	}
	p.st.rxEmptyPolls.Add(1)
	for _, x := range p.socks {
		// A zero-copy driver that ran out of fill entries waits for a
		// kick once refilled (never set in copy mode).
		if x.needWakeup && x.fill.needWakeup() {
			x.kickRx()
			p.st.wakeups.Add(1)
		}
	}
	return 0
}

// TxBuffer returns a chunk of MaxFrame bytes to build the next frame in,
// or nil while every TX chunk is in flight or the TX ring is full. Until
// Transmit, it keeps returning the same chunk.
func (p *Port) TxBuffer() []byte {
	x := p.tx
	if p.txChunk == noChunk {
		if len(x.txFree) == 0 {
			x.reap()
		}
		if len(x.txFree) == 0 || x.tx.free(p.txDescs) < p.txDescs {
			p.st.txRingFull.Add(1)
			return nil
		}
		p.txChunk = x.txFree[len(x.txFree)-1]
		x.txFree = x.txFree[:len(x.txFree)-1]
	}
	end := p.txChunk + uint64(p.maxFrame)
	return x.umem[p.txChunk:end:end]
}

// Transmit queues the first n bytes of the TxBuffer chunk; Flush sends
// them. Without a chunk, or with n out of range (an engine bug), the
// frame is dropped.
func (p *Port) Transmit(n int) {
	if p.txChunk == noChunk {
		return
	}
	x := p.tx
	if n <= 0 || n > p.maxFrame {
		x.txFree = append(x.txFree, p.txChunk)
		p.txChunk = noChunk
		return
	}
	// TxBuffer checked that the ring has a free slot for each chunk
	// of the group. A frame beyond one chunk goes out as a chain: every
	// descriptor but the last says XDP_PKT_CONTD.
	addr, chunk := p.txChunk, uint32(p.cfg.FrameSize)
	for left := uint32(n); ; {
		d := &x.tx.descs[x.tx.cachedProd&x.tx.mask]
		x.tx.cachedProd++
		x.txBatch++
		if left <= chunk {
			d.Addr, d.Len, d.Options = addr, left, 0
			break
		}
		d.Addr, d.Len, d.Options = addr, chunk, unix.XDP_PKT_CONTD
		addr += uint64(chunk)
		left -= chunk
	}
	x.txFrameBatch++
	p.txChunk = noChunk
}

// Flush publishes the frames queued since the last Flush, kicks the kernel
// once for the batch, and reaps finished transmissions.
func (p *Port) Flush() {
	x := p.tx
	if x.txBatch > 0 {
		x.tx.publish()
		x.txFrames.Add(uint64(x.txFrameBatch))
		x.txBatch, x.txFrameBatch = 0, 0
		p.kick(x)
	}
	x.reap()
}

// kick makes the kernel transmit what the TX ring holds. With need-wakeup
// the kernel says whether it needs the call (in copy mode it always does:
// copy-mode transmission happens inside sendto). One sendto transmits the
// batch when the kernel's per-call budget was raised (openXSK); where it
// could not be, sendto answers EAGAIN after 32 frames, and kick calls
// again as long as the kernel makes progress. EAGAIN without progress is
// back-pressure from the device: the frames stay in the ring, and Wait
// retries soon.
func (p *Port) kick(x *xsk) {
	for {
		if x.needWakeup && !x.tx.needWakeup() {
			return
		}
		before := atomic.LoadUint32(x.tx.consumer)
		errno := x.kickTx()
		p.st.wakeups.Add(1)
		switch errno {
		case 0:
			return
		case unix.EAGAIN:
			if atomic.LoadUint32(x.tx.consumer) == before || !x.txPending() {
				return
			}
		default:
			// ENOBUFS (no memory for an skb), ENETDOWN, ENXIO: the
			// frames stay in the ring, and the protocol's
			// retransmission covers a device that stays down.
			p.st.txKickErrors.Add(1)
			return
		}
	}
}

// Wait blocks until a frame may have arrived, Wake is called, or timeout
// passes. While the kernel holds back frames of the TX ring, it waits at
// most txRetry: in copy mode each poll makes the kernel try again.
func (p *Port) Wait(timeout time.Duration) {
	for _, x := range p.socks {
		if x.txPending() {
			timeout = min(timeout, txRetry)
			break
		}
	}
	p.bell.Wait(timeout)
}

// Wake makes a current or the next Wait return at once; safe from any
// goroutine.
func (p *Port) Wake() { p.bell.Wake() }

// Stats returns the port's counters and the kernel's, summed over the
// sockets. Safe from any goroutine while the port is open.
func (p *Port) Stats() Stats {
	s := Stats{
		RxEmptyPolls: p.st.rxEmptyPolls.Load(),
		TxRingFull:   p.st.txRingFull.Load(),
		FillRefills:  p.st.fillRefills.Load(),
		Wakeups:      p.st.wakeups.Load(),
		TxKickErrors: p.st.txKickErrors.Load(),
	}
	for _, x := range p.socks {
		s.RxFrames += x.rxFrames.Load()
		s.TxFrames += x.txFrames.Load()
	}
	for _, q := range p.QueueStats() {
		s.RxDropped += q.RxDropped
		s.RxInvalidDescs += q.RxInvalidDescs
		s.TxInvalidDescs += q.TxInvalidDescs
		s.RxRingFull += q.RxRingFull
		s.RxFillRingEmpty += q.RxFillRingEmpty
		s.TxRingEmpty += q.TxRingEmpty
		s.RxMultiBuffer += q.RxMultiBuffer
		s.RxChainsDropped += q.RxChainsDropped
	}
	return s
}

// QueueStats returns each socket's counters, in the order of Queues. A
// socket whose XDP_STATISTICS cannot be read (it is closing) is left out,
// rather than reported with its kernel counters gone back to 0. Safe from
// any goroutine while the port is open.
func (p *Port) QueueStats() []QueueStats {
	out := make([]QueueStats, 0, len(p.socks))
	for _, x := range p.socks {
		k, err := x.statistics()
		if err != nil {
			continue
		}
		out = append(out, QueueStats{
			Queue:           x.queue,
			RxFrames:        x.rxFrames.Load(),
			TxFrames:        x.txFrames.Load(),
			RxDropped:       k.Rx_dropped,
			RxInvalidDescs:  k.Rx_invalid_descs,
			TxInvalidDescs:  k.Tx_invalid_descs,
			RxRingFull:      k.Rx_ring_full,
			RxFillRingEmpty: k.Rx_fill_ring_empty_descs,
			TxRingEmpty:     k.Tx_ring_empty_descs,
			RxMultiBuffer:   x.mbFrames.Load(),
			RxChainsDropped: x.chainDrops.Load(),
		})
	}
	return out
}

// Close removes the sockets from the XSKMAP (the steering program then
// passes their queues' frames to the kernel again), closes them and
// unmaps their memory. Frames from the last Receive become invalid. The
// poll loop must have stopped.
func (p *Port) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, x := range p.socks {
		if p.cfg.XSKMap != nil {
			if err := p.cfg.XSKMap.Delete(uint32(x.queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("afxdp: remove queue %d from the XSKMAP: %w", x.queue, err))
			}
		}
		errs = append(errs, x.close())
	}
	if p.bell != nil {
		errs = append(errs, p.bell.Close())
	}
	return errors.Join(errs...)
}

// Watch makes Wait also wake when fd (another process's eventfd doorbell)
// is written; safe from any goroutine.
func (p *Port) Watch(fd int) error { return p.bell.Watch(fd) }

// Unwatch undoes Watch.
func (p *Port) Unwatch(fd int) error { return p.bell.Unwatch(fd) }
