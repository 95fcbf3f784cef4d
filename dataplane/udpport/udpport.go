//go:build linux

// Package udpport is a dataplane.Port over a kernel UDP socket, for hosts
// where XDP is not available (no privileges, or a driver without it). The
// wire format is RoCEv2 all the same: UDP datagrams to port 4791 carrying
// BTH .. ICRC, which a RoCEv2 receiver, softnic's AF_XDP port included,
// takes as they are.
//
// # Mechanism
//
// The engine builds full Ethernet/IP/UDP frames whatever its port. On the
// way out this port reads the destination address from the frame's IP
// header and hands the RoCE packet (BTH through ICRC) to the kernel, one
// sendmmsg(2) per Flush for the whole batch. On the way in one
// recvmmsg(2) per Receive reads up to a batch of datagrams, each into a
// buffer with room in front, where the port writes an Ethernet/IP/UDP
// header rebuilt from the datagram (source address and port from the
// sender, destination from the socket's bound address, lengths from the
// datagram's), so the engine parses and checks the frame like any other.
//
// # ICRC
//
// The ICRC covers the IP and UDP headers except the fields routers
// rewrite (TTL, TOS/traffic class, flow label, checksums), so the rebuilt
// header must repeat every other field the sender's ICRC saw. Lengths and
// addresses come from the datagram. The IPv4 identification and flags are
// not visible to a socket; the port writes what bth.FrameHeader.Encode
// writes (ID 0, DF), which is what softnic senders put in the ICRC. The
// UDP source port is the one field that cannot survive: the engine picks
// it per QP for ECMP entropy (Annex A17), but a socket bound to 4791 sends
// from 4791. So Transmit rewrites the frame's UDP source port to 4791 and
// reseals the ICRC before the packet leaves, and the receiver rebuilds the
// header with the port the datagram came from. The cost is one more CRC
// per packet, and flows lose their entropy (every datagram has the same
// 5-tuple); the reward is frames that verify on every receiver. A
// hardware RoCE sender's ICRC covers its own entropy port and IP ID, so
// its frames fail the ICRC check here (counted by the engine as
// rcvd_icrc_err): this port talks to softnic peers.
//
// The rebuilt frame's UDP checksum is zero (IPv4: none; IPv6: left out,
// since the kernel already verified it and the engine does not read it);
// its source MAC is zero and its destination MAC is Config.MAC. TTL and
// TOS are not reported by the socket and read as 64 and 0.
package udpport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
)

// Config describes a port.
type Config struct {
	// Addr is the local address (the GID): the socket binds Addr:4791 in
	// the network namespace of the thread that calls Open. IPv4 (or
	// IPv4-mapped) addresses give an IPv4 port, others an IPv6 one.
	Addr netip.Addr
	// MAC is written as the destination MAC of received frames (the
	// engine's own, so the frames look like they arrived on its wire).
	MAC [6]byte
	// MaxFrame is the largest frame, headers included (default 4096).
	MaxFrame int
	// Batch is how many datagrams one sendmmsg or recvmmsg moves at most
	// (default 64): the TX queue holds one batch.
	Batch int
	// SocketBuffer is the kernel socket's send and receive buffer in
	// bytes (default 4 MiB; more than net.core.[rw]mem_max needs root).
	SocketBuffer int
}

const (
	ethHeaderLen  = 14
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8
	// headroom is the room kept in front of a received datagram for the
	// largest rebuilt header (Ethernet + IPv6 + UDP).
	headroom = ethHeaderLen + ipv6HeaderLen + udpHeaderLen

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
)

// Port is a kernel UDP socket port. Its dataplane.Port methods belong to
// one goroutine, the engine's poll loop; Wake and Stats are safe from any
// goroutine.
type Port struct {
	cfg   Config
	fd    int
	ipv6  bool
	local netip.Addr
	hdr   int // rebuilt header length: 42 (IPv4) or 62 (IPv6)
	bell  *doorbell.Doorbell

	// Receive side: one buffer, iovec, msghdr and source address per
	// datagram of a batch, set up once.
	rxBufs  [][]byte
	rxIov   []unix.Iovec
	rxHdrs  []unix.Mmsghdr
	rxNames []unix.RawSockaddrInet6 // big enough for either family

	// Transmit side: frames [txHead, txTail) are queued.
	txBufs         [][]byte
	txIov          []unix.Iovec
	txHdrs         []unix.Mmsghdr
	txNames4       []unix.RawSockaddrInet4
	txNames6       []unix.RawSockaddrInet6
	txHead, txTail int

	st     counters
	closed bool
}

type counters struct {
	rxFrames, txFrames, rxEmptyPolls, txRingFull atomic.Uint64
	rxTruncated, txErrors, txBadFrames, syscalls atomic.Uint64
}

// Stats are the port's counters since Open.
type Stats struct {
	RxFrames     uint64 // datagrams handed to the engine
	TxFrames     uint64 // datagrams the kernel accepted
	RxEmptyPolls uint64 // Receive calls that found no datagram
	TxRingFull   uint64 // TxBuffer calls that found the queue full
	RxTruncated  uint64 // datagrams longer than MaxFrame allows, dropped
	TxErrors     uint64 // datagrams the kernel refused (no route, too big), dropped
	TxBadFrames  uint64 // frames that were not IP/UDP of the port's family, dropped
	Syscalls     uint64 // sendmmsg and recvmmsg calls
	// RxSocketDrops are the datagrams the kernel dropped at the socket,
	// its receive buffer full (sk_drops, from getsockopt SO_MEMINFO): the
	// UDP port's RX ring full.
	RxSocketDrops uint64
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
			{"rx_truncated", s.RxTruncated}, {"tx_errors", s.TxErrors},
			{"tx_bad_frames", s.TxBadFrames}, {"syscalls", s.Syscalls},
			{"rx_socket_drops", s.RxSocketDrops},
		} {
			if !yield(c.name, c.v) {
				return
			}
		}
	}
}

// Open creates the socket, bound to cfg.Addr port 4791, in the calling
// thread's network namespace.
func Open(cfg Config) (p *Port, err error) {
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = 4096
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.SocketBuffer == 0 {
		cfg.SocketBuffer = 4 << 20
	}
	if !cfg.Addr.IsValid() || cfg.Addr.IsUnspecified() {
		return nil, fmt.Errorf("udpport: local address %v: want a unicast address", cfg.Addr)
	}
	if cfg.MaxFrame < headroom+bth.BTHLen+bth.ICRCLen || cfg.Batch < 1 {
		return nil, fmt.Errorf("udpport: MaxFrame %d, Batch %d out of range", cfg.MaxFrame, cfg.Batch)
	}
	local := cfg.Addr.Unmap()
	p = &Port{cfg: cfg, fd: -1, local: local, ipv6: local.Is6(), hdr: ethHeaderLen + ipv4HeaderLen + udpHeaderLen}
	if p.ipv6 {
		p.hdr = headroom
	}
	defer func() {
		if err != nil {
			p.Close()
			p = nil
		}
	}()
	if err := p.openSocket(); err != nil {
		return p, fmt.Errorf("udpport: %w", err)
	}
	if p.bell, err = doorbell.New(p.fd); err != nil {
		return p, fmt.Errorf("udpport: %w", err)
	}
	p.setupBuffers()
	return p, nil
}

func (p *Port) openSocket() (err error) {
	family := unix.AF_INET
	if p.ipv6 {
		family = unix.AF_INET6
	}
	if p.fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP); err != nil {
		return os.NewSyscallError("socket", err)
	}
	// RoCE packets are never fragmented: a datagram bigger than the path
	// MTU is refused (EMSGSIZE, counted) rather than split.
	if p.ipv6 {
		if err := unix.SetsockoptInt(p.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return os.NewSyscallError("setsockopt(IPV6_V6ONLY)", err)
		}
		if err := unix.SetsockoptInt(p.fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO); err != nil {
			return os.NewSyscallError("setsockopt(IPV6_MTU_DISCOVER)", err)
		}
	} else if err := unix.SetsockoptInt(p.fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
		return os.NewSyscallError("setsockopt(IP_MTU_DISCOVER)", err)
	}
	// Bursts of a batch per poll overflow the default buffers (about
	// 200 KB). The FORCE variants pass net.core.*mem_max with
	// CAP_NET_ADMIN; without it the capped plain option still helps.
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, o[0], p.cfg.SocketBuffer) != nil {
			_ = unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, o[1], p.cfg.SocketBuffer)
		}
	}
	var sa unix.Sockaddr
	if p.ipv6 {
		sa = &unix.SockaddrInet6{Port: bth.UDPPort, Addr: p.local.As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: bth.UDPPort, Addr: p.local.As4()}
	}
	if err := unix.Bind(p.fd, sa); err != nil {
		return os.NewSyscallError(fmt.Sprintf("bind %v", netip.AddrPortFrom(p.local, bth.UDPPort)), err)
	}
	return nil
}

// setupBuffers allocates every buffer and system call structure once; the
// msghdrs point into them for the life of the port.
func (p *Port) setupBuffers() {
	n, size := p.cfg.Batch, p.cfg.MaxFrame
	rxMem := make([]byte, n*(headroom+size))
	txMem := make([]byte, n*size)
	p.rxBufs, p.txBufs = make([][]byte, n), make([][]byte, n)
	p.rxIov, p.txIov = make([]unix.Iovec, n), make([]unix.Iovec, n)
	p.rxHdrs, p.txHdrs = make([]unix.Mmsghdr, n), make([]unix.Mmsghdr, n)
	p.rxNames = make([]unix.RawSockaddrInet6, n)
	p.txNames4, p.txNames6 = make([]unix.RawSockaddrInet4, n), make([]unix.RawSockaddrInet6, n)
	for i := range n {
		rb := rxMem[i*(headroom+size) : (i+1)*(headroom+size)]
		p.rxBufs[i] = rb
		// The payload lands after the room for the rebuilt header and
		// may fill the frame up to MaxFrame; the kernel flags a longer
		// datagram MSG_TRUNC, and Receive drops it.
		p.rxIov[i].Base = &rb[headroom]
		p.rxIov[i].SetLen(size - p.hdr)
		h := &p.rxHdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&p.rxNames[i]))
		h.Iov = &p.rxIov[i]
		h.SetIovlen(1)

		p.txBufs[i] = txMem[i*size : (i+1)*size : (i+1)*size]
		t := &p.txHdrs[i].Hdr
		t.Iov = &p.txIov[i]
		t.SetIovlen(1)
		if p.ipv6 {
			p.txNames6[i] = unix.RawSockaddrInet6{Family: unix.AF_INET6}
			t.Name = (*byte)(unsafe.Pointer(&p.txNames6[i]))
			t.Namelen = unix.SizeofSockaddrInet6
		} else {
			p.txNames4[i] = unix.RawSockaddrInet4{Family: unix.AF_INET}
			t.Name = (*byte)(unsafe.Pointer(&p.txNames4[i]))
			t.Namelen = unix.SizeofSockaddrInet4
		}
	}
}

// MaxFrame is the largest frame the port carries, headers included.
func (p *Port) MaxFrame() int { return p.cfg.MaxFrame }

// LocalAddr is the address the socket is bound to (port 4791).
func (p *Port) LocalAddr() netip.Addr { return p.local }

// Receive reads up to len(frames) datagrams with one recvmmsg and returns
// them as frames with a rebuilt Ethernet/IP/UDP header. They stay valid
// until the next Receive.
func (p *Port) Receive(frames [][]byte) int {
	want := min(len(frames), len(p.rxHdrs))
	if want == 0 {
		return 0
	}
	for i := range want {
		p.rxHdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		p.rxHdrs[i].Hdr.Flags = 0
	}
	r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.rxHdrs[0])), uintptr(want),
		unix.MSG_DONTWAIT, 0, 0)
	p.st.syscalls.Add(1)
	if errno != 0 || r == 0 {
		// EAGAIN: nothing queued. Other errors (ICMP errors queued
		// on the socket) carry no frame either.
		p.st.rxEmptyPolls.Add(1)
		return 0
	}
	n := 0
	for i := range int(r) {
		m := &p.rxHdrs[i]
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
			p.st.rxTruncated.Add(1)
			continue
		}
		src, srcPort, ok := p.sourceOf(i)
		if !ok {
			continue
		}
		frames[n] = p.rebuild(p.rxBufs[i], int(m.Len), src, srcPort)
		n++
	}
	p.st.rxFrames.Add(uint64(n))
	return n
}

// sourceOf decodes the sender's address of datagram i.
func (p *Port) sourceOf(i int) (netip.Addr, uint16, bool) {
	raw := &p.rxNames[i]
	port := func(b [2]byte) uint16 { return binary.BigEndian.Uint16(b[:]) }
	switch raw.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(raw))
		return netip.AddrFrom4(sa.Addr), port(*(*[2]byte)(unsafe.Pointer(&sa.Port))), true
	case unix.AF_INET6:
		return netip.AddrFrom16(raw.Addr), port(*(*[2]byte)(unsafe.Pointer(&raw.Port))), true
	}
	return netip.Addr{}, 0, false
}

// rebuild writes the header of a datagram of n bytes at the end of buf's
// headroom and returns the whole frame.
func (p *Port) rebuild(buf []byte, n int, src netip.Addr, srcPort uint16) []byte {
	h := bth.FrameHeader{DstMAC: p.cfg.MAC, Src: src, Dst: p.local, SrcPort: srcPort}
	start := headroom - p.hdr
	h.Encode(buf[start:], n)
	return buf[start : headroom+n : headroom+n]
}

// TxBuffer returns the next queue slot, or nil while the queue is full
// (the kernel pushed back during the last Flush). Until Transmit it keeps
// returning the same slot.
func (p *Port) TxBuffer() []byte {
	if p.txTail == len(p.txBufs) {
		p.st.txRingFull.Add(1)
		return nil
	}
	return p.txBufs[p.txTail]
}

// Transmit queues the first n bytes of the TxBuffer slot: it checks the
// frame's headers, addresses the datagram to the frame's destination,
// and reseals the ICRC for the port's own UDP source port (see the package
// comment). A frame that is not RoCEv2 over the port's IP family is
// dropped and counted.
func (p *Port) Transmit(n int) {
	if p.txTail == len(p.txBufs) {
		return
	}
	i := p.txTail
	frame := p.txBufs[i][:min(n, len(p.txBufs[i]))]
	f, err := bth.ParseFrame(frame)
	if err != nil || f.IPv6 != p.ipv6 || f.L3Off != ethHeaderLen {
		p.st.txBadFrames.Add(1)
		return
	}
	binary.BigEndian.PutUint16(f.Buf[f.L4Off:], bth.UDPPort)
	bth.WriteICRC(f.Buf, f.L3Off, f.IPv6)
	if p.ipv6 {
		p.txNames6[i].Addr = [16]byte(f.Buf[f.L3Off+24:])
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.txNames6[i].Port))[:], bth.UDPPort)
	} else {
		p.txNames4[i].Addr = [4]byte(f.Buf[f.L3Off+16:])
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.txNames4[i].Port))[:], bth.UDPPort)
	}
	payload := f.Buf[f.BTHOff:]
	p.txIov[i].Base = &payload[0]
	p.txIov[i].SetLen(len(payload))
	p.txTail++
}

// Flush sends the queued datagrams with one sendmmsg. The kernel may take
// fewer than all: when its buffer is full (EAGAIN, ENOBUFS) the rest stay
// queued for the next Flush; a datagram it refuses (EMSGSIZE, no route) is
// dropped and counted, and the rest are sent.
func (p *Port) Flush() {
	for p.txHead < p.txTail {
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&p.txHdrs[p.txHead])),
			uintptr(p.txTail-p.txHead), unix.MSG_DONTWAIT, 0, 0)
		p.st.syscalls.Add(1)
		if errno == 0 {
			p.st.txFrames.Add(uint64(r))
			p.txHead += int(r)
			continue
		}
		if errno == unix.EAGAIN || errno == unix.ENOBUFS || errno == unix.EINTR {
			break
		}
		// sendmmsg reports an error only for its first datagram.
		p.st.txErrors.Add(1)
		p.txHead++
	}
	if p.txHead == p.txTail {
		p.txHead, p.txTail = 0, 0
	}
}

// Wait blocks until a datagram arrives, Wake is called, or timeout
// passes; while datagrams wait to be sent, also until the socket has
// room for them.
func (p *Port) Wait(timeout time.Duration) {
	p.bell.WaitOut(timeout, p.txHead < p.txTail)
}

// Wake makes a current or the next Wait return at once; safe from any
// goroutine.
func (p *Port) Wake() { p.bell.Wake() }

// Stats returns the port's counters; safe from any goroutine while the
// port is open.
func (p *Port) Stats() Stats {
	return Stats{
		RxSocketDrops: p.socketDrops(),
		RxFrames:      p.st.rxFrames.Load(),
		TxFrames:      p.st.txFrames.Load(),
		RxEmptyPolls:  p.st.rxEmptyPolls.Load(),
		TxRingFull:    p.st.txRingFull.Load(),
		RxTruncated:   p.st.rxTruncated.Load(),
		TxErrors:      p.st.txErrors.Load(),
		TxBadFrames:   p.st.txBadFrames.Load(),
		Syscalls:      p.st.syscalls.Load(),
	}
}

// socketDrops reads the kernel's count of datagrams the socket dropped
// (SK_MEMINFO_DROPS; 0 if the kernel does not say).
func (p *Port) socketDrops() uint64 {
	if p.fd < 0 {
		return 0
	}
	var mi [unix.SK_MEMINFO_VARS]uint32
	n := uint32(unsafe.Sizeof(mi))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(p.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 || n <= unix.SK_MEMINFO_DROPS*4 {
		return 0
	}
	return uint64(mi[unix.SK_MEMINFO_DROPS])
}

// Close closes the socket. The poll loop must have stopped.
func (p *Port) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.bell != nil {
		errs = append(errs, p.bell.Close())
	}
	if p.fd >= 0 {
		errs = append(errs, unix.Close(p.fd))
		p.fd = -1
	}
	return errors.Join(errs...)
}

// Watch makes Wait also wake when fd (another process's eventfd doorbell)
// is written; safe from any goroutine.
func (p *Port) Watch(fd int) error { return p.bell.Watch(fd) }

// Unwatch undoes Watch.
func (p *Port) Unwatch(fd int) error { return p.bell.Unwatch(fd) }
