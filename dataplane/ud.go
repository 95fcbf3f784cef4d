package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is the Unreliable Datagram transport (IBA Volume 1 §9.8.4,
// RoCEv2 Annex A17) and its address handles, as Linux rxe runs them
// (rxe_req.c, rxe_resp.c, rxe_av.c): every message is one packet,
// UD_SEND_ONLY (0x64) or UD_SEND_ONLY_WITH_IMMEDIATE (0x65), with a
// DETH carrying the Q_Key and the source QP; nothing is acknowledged,
// nothing retransmitted, and a QP's PSN only counts its packets. A send
// work request names its destination by an address handle (AH), the
// destination QP and its Q_Key; a receiver takes a datagram whose Q_Key
// is its QP's into the next receive WQE, after the 40-byte GRH area
// (qp.GRHLen), and drops anything else under a counter. No loss recovery
// scheme and no congestion control run on a UD QP.

var (
	// ErrBadAH is a send work request or a destroy naming no address
	// handle of the QP's protection domain.
	ErrBadAH = errors.New("dataplane: no such address handle")
	// ErrAHAttr is an address handle's attributes the port cannot use.
	ErrAHAttr = errors.New("dataplane: address handle attribute invalid")
	// ErrUDQP is a QP type or a combination with it softnic does not
	// make (a StaR role on a UD QP, a type other than RC and UD).
	ErrUDQP = errors.New("dataplane: unsupported QP type")
	// ErrNoNeighbor: the destination's MAC is unknown (no neighbour
	// entry), so an address handle to it cannot be made.
	ErrNoNeighbor = errors.New("dataplane: destination unreachable: no neighbour entry for its address")
)

// AH is an address handle (struct ibv_ah): where a UD send goes. It
// belongs to a protection domain; a send work request names it by its
// Handle, which the engine checks against the sending QP's PD, as it
// checks an lkey.
type AH struct {
	pd     uint32
	handle uint32
	av     AddressVector
	hdr    bth.FrameHeader // every datagram's Ethernet, IP and UDP header but the UDP source port
}

// Handle is the number a send work request names the AH by
// (qp.SendWR.AH).
func (a *AH) Handle() uint32 { return a.handle }

// Attr is the address vector the AH was made with.
func (a *AH) Attr() AddressVector { return a.av }

// ahTable is the NIC's address handles, indexed by the handle's upper
// bits; the low byte is a tag, so that a stale handle names nothing.
type ahTable struct {
	ahs []*AH
	tag uint8
}

func (t *ahTable) lookup(h uint32) *AH {
	i := int(h >> 8)
	if i >= len(t.ahs) {
		return nil
	}
	if a := t.ahs[i]; a != nil && a.handle == h {
		return a
	}
	return nil
}

// udHeaderRoom is what a UD packet adds to its payload on the wire, at
// most: Ethernet, IPv6, UDP, BTH, DETH, immediate, ICRC.
const udHeaderRoom = 14 + 40 + 8 + bth.BTHLen + bth.DETHLen + bth.ImmDtLen + bth.ICRCLen

// PortMTU is the port's MTU for datagrams: the largest IB MTU whose
// packets fit the port's largest frame (as rxe derives its port MTU from
// the netdev's: an Ethernet MTU of 1500 gives 1024). A UD message is at
// most one packet of it.
func (e *Engine) PortMTU() qp.MTU { return portMTU(e.port.MaxFrame()) }

func portMTU(maxFrame int) qp.MTU {
	m := qp.MTU4096
	for m > qp.MTU256 && m.Bytes()+udHeaderRoom > maxFrame {
		m--
	}
	return m
}

// AddNeighbor records that addr is reached at mac: the embedded fabric's
// neighbour table (package sim registers the two hosts with each other),
// where the daemon asks the kernel's (package cm, ResolveMAC).
func (e *Engine) AddNeighbor(addr netip.Addr, mac [6]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.neighbors == nil {
		e.neighbors = map[netip.Addr][6]byte{}
	}
	e.neighbors[addr.Unmap()] = mac
}

// Neighbor returns the MAC AddNeighbor recorded for addr.
func (e *Engine) Neighbor(addr netip.Addr) ([6]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	mac, ok := e.neighbors[addr.Unmap()]
	return mac, ok
}

// CreateAH makes an address handle in protection domain pd
// (ibv_create_ah): the destination GID (RoCEv2: its IP address, of the
// port's family), its MAC, the traffic class and hop limit of the IP
// header, the flow label (IPv6) and the source GID index (0: the port
// has one GID). A zero MAC is taken: a send through such an AH completes
// with an error (ud_send_unresolved), as a NIC's would without a
// resolved destination; the verbs layer resolves the MAC first and
// refuses the AH when it cannot (ErrNoNeighbor).
func (e *Engine) CreateAH(pd uint32, av AddressVector) (*AH, error) {
	av.DGID = av.DGID.Unmap()
	switch {
	case !av.DGID.IsValid():
		return nil, fmt.Errorf("%w: no destination GID", ErrAHAttr)
	case av.SGIDIndex != 0:
		return nil, fmt.Errorf("%w: source GID index %d (the port has one GID, index 0)", ErrAHAttr, av.SGIDIndex)
	case av.FlowLabel > 0xFFFFF:
		return nil, fmt.Errorf("%w: flow label %#x wider than 20 bits", ErrAHAttr, av.FlowLabel)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.pds[pd]; !ok {
		return nil, ErrBadPD
	}
	if av.DGID.Is6() != e.ipv6 {
		return nil, fmt.Errorf("%w: destination %v is not of the port's address family (%v)", ErrAHAttr, av.DGID, e.cfg.Addr)
	}
	t := &e.ahs
	idx := -1
	for i := 1; i < len(t.ahs); i++ { // index 0 stays unused: handle 0 is never valid
		if t.ahs[i] == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(t.ahs) == 0 {
			t.ahs = append(t.ahs, nil)
		}
		if len(t.ahs) >= 1<<24 {
			return nil, fmt.Errorf("%w: %d address handles", ErrQueueFull, len(t.ahs)-1)
		}
		idx = len(t.ahs)
		t.ahs = append(t.ahs, nil)
	}
	t.tag++
	a := &AH{pd: pd, handle: uint32(idx)<<8 | uint32(t.tag), av: av,
		hdr: bth.FrameHeader{SrcMAC: e.cfg.MAC, DstMAC: av.DMAC, Src: e.cfg.Addr, Dst: av.DGID,
			TOS: av.TrafficClass, TTL: av.HopLimit, FlowLabel: av.FlowLabel}}
	t.ahs[idx] = a
	e.pds[pd]++
	return a, nil
}

// DestroyAH removes a (ibv_destroy_ah). Sends already posted through it
// complete with an error when their turn comes.
func (e *Engine) DestroyAH(a *AH) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ahs.lookup(a.handle) != a {
		return ErrBadAH
	}
	e.ahs.ahs[a.handle>>8] = nil
	e.pds[a.pd]--
	return nil
}

// udTransport is one UD QP's transport.
type udTransport struct {
	onNIC
	// mem and ahs are where the QP's SGEs and address handles are looked
	// up: the NIC's tables, or QP1's own (gsi.go), which no client sees.
	mem *memTable
	ahs *ahTable
	mtu uint32          // the port's MTU (PortMTU) in bytes: the largest message
	hdr bth.FrameHeader // the datagram being built: its AH's header with the UDP source port
	tx  txPacket
	grh [qp.GRHLen]byte // the GRH area written before a datagram's payload
}

func newUD(at onNIC) *udTransport {
	u := &udTransport{onNIC: at, mem: &at.e.mem, ahs: &at.e.ahs, mtu: uint32(at.e.PortMTU().Bytes())}
	at.q.mtu = u.mtu // what QueryQP reports as the path MTU
	return u
}

// receive takes a datagram for the QP (rxe_resp.c for UD): the opcode,
// the state, the Q_Key, a receive WQE, then the GRH and the payload.
func (u *udTransport) receive(pkt *bth.Packet) {
	e, q := u.e, u.q
	op := pkt.Opcode()
	if op != bth.UDSendOnly && op != bth.UDSendOnlyImm {
		e.cnt.RcvdBadOpcode++
		return
	}
	if !q.state.CanReceive() {
		e.cnt.RcvdBadState++
		return
	}
	deth := pkt.DETH()
	if deth.QKey() != q.qkey { // IBA C9-49 (Q_Key violation): silently dropped
		e.cnt.RcvdQKeyViolation++
		return
	}
	w := q.rq.Front()
	if w == nil { // no RNR on UD: the datagram is lost
		e.cnt.RcvdNoRecvWQE++
		return
	}
	payload := pkt.Payload()
	total := uint64(len(payload)) + qp.GRHLen
	wc := qp.WC{WRID: w.wr.WRID, Status: qp.WCSuccess, Opcode: qp.WCRecv, QPNum: q.qpn, SrcQP: deth.SrcQPN(), Flags: qp.WCGRH}
	switch {
	case total > uint64(w.length):
		wc.Status, wc.Flags = qp.WCLocLenErr, 0
		e.cnt.RespLocalLength++
	case !u.placeGRH(w) || !u.mem.copySGL(q.pd, w.wr.SGEs(), qp.GRHLen, payload, true):
		wc.Status, wc.Flags = qp.WCLocProtErr, 0 // a region deregistered after the post
	default:
		wc.ByteLen = uint32(total)
		if pkt.Info.Flags&bth.HasImm != 0 {
			wc.ImmData = pkt.Imm().Imm()
			wc.Flags |= qp.WCWithImm
		}
		if pkt.BTH().SolicitedEvent() {
			wc.Flags |= qp.WCSolicited
		}
		e.cnt.RDMARecvs++
	}
	q.rq.Pop()
	e.pushWC(q.recvCQ, wc)
}

// placeGRH writes the GRH area of w's buffer from the frame being
// received: an IPv6 header whole, an IPv4 header in the area's last 20
// bytes after 20 zeros (rdma-core's ibv_wc_read... and rxe's layout for
// RoCEv2 over IPv4).
func (u *udTransport) placeGRH(w *recvWQE) bool {
	f := &u.e.rxFrame
	g := u.grh[:]
	if f.IPv6 {
		copy(g, f.Buf[f.L3Off:f.L3Off+qp.GRHLen])
	} else {
		clear(g[:qp.GRHLen-20])
		copy(g[qp.GRHLen-20:], f.Buf[f.L3Off:f.L3Off+20])
	}
	return u.mem.copySGL(u.q.pd, w.wr.SGEs(), 0, g, true)
}

// serve sends the queued datagrams, one packet each, in order.
func (u *udTransport) serve(budget int) (sent int, more bool) {
	e, q := u.e, u.q
	e.touch(q, true)
	for sent < budget && !e.txStall && q.state == qp.RTS && q.sq.Len() > 0 {
		w := q.sq.Front()
		ah := u.ahs.lookup(w.wr.AH)
		if ah == nil || ah.pd != q.pd || ah.av.DMAC == ([6]byte{}) {
			e.cnt.UDSendUnresolved++ // destroyed since the post, or never resolved
			u.complete(w, qp.WCLocQPOpErr)
			continue
		}
		if !e.linkOpen() {
			break
		}
		buf := e.port.TxBuffer()
		if buf == nil {
			e.txStall = true
			e.cnt.TxRingFull++
			break
		}
		op := bth.UDSendOnly
		if w.wr.Opcode == qp.WRSendWithImm {
			op = bth.UDSendOnlyImm
		}
		u.hdr = ah.hdr
		u.hdr.SrcPort = udpSourcePort(q.qpn, w.wr.RemoteQPN)
		t := &u.tx
		writeTx(t, buf, &u.hdr, w.wr.RemoteQPN&qp.PSNMask, op, q.nextPSN, false, int(w.length))
		qkey := w.wr.RemoteQKey
		if qkey&qp.QKeyUseQP != 0 {
			qkey = q.qkey
		}
		bth.DETH(t.roce[t.info.DETHOff:]).Encode(&bth.DETHFields{QKey: qkey, SrcQPN: q.qpn})
		if t.info.ImmOff >= 0 {
			bth.ImmDt(t.roce[t.info.ImmOff:]).SetImm(w.wr.ImmData)
		}
		if w.wr.Flags&qp.SendSolicited != 0 {
			bth.BTH(t.roce).SetSolicitedEvent(true)
		}
		if !u.mem.copySGL(q.pd, w.wr.SGEs(), 0, t.payload, false) {
			u.complete(w, qp.WCLocProtErr) // a region deregistered after the post; the buffer is not sent
			continue
		}
		bth.FinishFrame(t.frame, &u.hdr)
		e.toWire(t.frame)
		q.nextPSN = q.nextPSN.Next()
		sent++
		u.complete(w, qp.WCSuccess)
	}
	return sent, q.state == qp.RTS && q.sq.Len() > 0
}

// complete retires the head send WQE w with status: a completion when it
// failed or was signaled.
func (u *udTransport) complete(w *sendWQE, status qp.WCStatus) {
	e, q := u.e, u.q
	if status != qp.WCSuccess || q.sigAll || w.wr.Flags&qp.SendSignaled != 0 {
		wc := qp.WC{WRID: w.wr.WRID, Status: status, Opcode: qp.WCSend, QPNum: q.qpn}
		if status == qp.WCSuccess {
			wc.ByteLen = w.length
		}
		e.pushWC(q.sendCQ, wc)
	}
	if status != qp.WCWRFlushErr {
		e.cnt.RDMASends++
	}
	q.sq.Pop()
}

// postSend queues datagrams: SEND or SEND with immediate, at most the
// port's MTU, through an AH of the QP's protection domain.
func (u *udTransport) postSend(wrs []qp.SendWR) (int, error) {
	e, q := u.e, u.q
	e.touch(q, false)
	for i := range wrs {
		wr := &wrs[i]
		if err := checkSendWR(wr); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		if q.state == qp.Err { // IBA §10.3.1: posted to ERR, completes flushed
			e.pushWC(q.sendCQ, qp.WC{WRID: wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCSend, QPNum: q.qpn})
			continue
		}
		if err := CheckUDSendWR(wr, int(u.mtu)); err != nil {
			return i, errorf(q, "WR %d: %w", i, err)
		}
		if ah := u.ahs.lookup(wr.AH); ah == nil || ah.pd != q.pd {
			return i, errorf(q, "WR %d: %w: %#x in the QP's protection domain", i, ErrBadAH, wr.AH)
		}
		w := q.sq.Push()
		if w == nil {
			return i, errorf(q, "%w: %d send WRs outstanding", ErrQueueFull, q.sq.Cap())
		}
		w.wr, w.length = *wr, 0
		for _, s := range wr.SGEs() {
			w.length += s.Length
		}
	}
	if q.state == qp.RTS && q.sq.Len() > 0 {
		e.schedule(q)
		e.ring()
	}
	return len(wrs), nil
}

// CheckUDSendWR is what a UD QP's PostSend checks of a send work request
// beyond CheckSendWR, with mtu the port's MTU in bytes: SEND or SEND with
// immediate, of at most one MTU (a datagram is one packet). The verbs
// client applies it before a work request enters a shared ring.
func CheckUDSendWR(wr *qp.SendWR, mtu int) error {
	if wr.Opcode != qp.WRSend && wr.Opcode != qp.WRSendWithImm {
		return fmt.Errorf("%w: %v on a UD QP (SEND and SEND_WITH_IMM only)", ErrBadWR, wr.Opcode)
	}
	var n uint64
	for _, s := range wr.SGEs() {
		n += uint64(s.Length)
	}
	if n > uint64(mtu) {
		return fmt.Errorf("%w: UD message of %d bytes exceeds the port MTU of %d", ErrBadWR, n, mtu)
	}
	return nil
}

func (u *udTransport) postRecv(wrs []qp.RecvWR) (int, error) {
	return postRecvWRs(u.e, u.q, u.mem, wrs)
}

// enter: RESET empties the queues, RTS starts sending what waits, ERR
// flushes both queues (IBA §10.3.1).
func (u *udTransport) enter(from, to qp.State) {
	e, q := u.e, u.q
	switch to {
	case qp.Reset:
		for q.sq.Len() > 0 {
			q.sq.Pop()
		}
		for q.rq.Len() > 0 {
			q.rq.Pop()
		}
		q.nextPSN = 0
	case qp.RTS:
		if q.sq.Len() > 0 {
			e.schedule(q)
		}
	case qp.Err:
		for w := q.sq.Front(); w != nil; w = q.sq.Front() {
			e.pushWC(q.sendCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCSend, QPNum: q.qpn})
			q.sq.Pop()
		}
		for w := q.rq.Front(); w != nil; w = q.rq.Front() {
			e.pushWC(q.recvCQ, qp.WC{WRID: w.wr.WRID, Status: qp.WCWRFlushErr, Opcode: qp.WCRecv, QPNum: q.qpn})
			q.rq.Pop()
		}
	}
}

// setScheme: a UD QP recovers nothing; it keeps the scheme's name only
// (Engine.QPScheme), and its on-chip context is the base context.
func (u *udTransport) setScheme(s recovery.Scheme) error {
	u.q.scheme = s
	u.e.cache.SetSize(&u.q.cache, u.e.cfg.QPContextBytes, 0)
	return nil
}

// setCC: a UD QP runs no congestion control.
func (u *udTransport) setCC(cc.Algorithm)        {}
func (u *udTransport) congestionControl() string { return cc.None }
func (u *udTransport) misaddressed(bth.Opcode)   {}
func (u *udTransport) marked()                   {}
func (u *udTransport) cnp() bool                 { return false }
func (u *udTransport) memoryChanged(*MR, bool)   {}
func (u *udTransport) destroy()                  {}
func (u *udTransport) depths() (send, recv int)  { return u.q.sq.Len(), u.q.rq.Len() }
