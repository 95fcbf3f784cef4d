package dataplane

import (
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// This file is StaR's stateless server NIC (StaR §3, docs/star.md
// "Server data path"), on with Config.StarServer: the data packets a
// client sends to a server, served with no QP, no context-cache access
// and no per-connection state at all. An RDP is placed in memory and
// answered with an RA; a GD is answered with the SDPs it asks for. Every
// answer is built from the request's own frame: addresses swapped, the
// destination QP from its own BTH DestQP (the client's QP), the PSN from
// its PSN. CQEP and EA go to the server QP's driver (starDriver.fromClient,
// stardriver.go) through the drivers' own table; WQEP, RA and SDP never
// come here: they go to a client QP (starclient.go) through the QP
// lookup. The EA exchange that both sides speak is at the end of this
// file.
//
// What guards memory is the NIC's region table alone: the RDP's or GD's
// key must name a live region that grants the access (remote write,
// remote read) and covers the whole range. There is no QP, so no
// protection domain to match: StaR's server trusts its clients' security
// tables (StaR §3.2), which let through only the packets, ranges and keys
// the server installed for each connection.

// starServer is the stateless server NIC's data path, and the table by
// which it hands the server drivers what their clients send them.
type starServer struct {
	e *Engine
	// drivers are the server QPs' drivers by QP number: the drivers'
	// own table in host memory, not the NIC's QP contexts.
	drivers map[uint32]driverInbox
}

// newStarServer is the NIC's stateless server if its Config asks for one
// (StarServer), with the egress queue its answers wait in
// (StarEgressFrames); nil otherwise.
func newStarServer(e *Engine) *starServer {
	if !e.cfg.StarServer {
		return nil
	}
	n := e.cfg.StarEgressFrames
	if n == 0 {
		n = DefaultStarEgressFrames
	}
	e.egress = newEgressQueue(n, e.port.MaxFrame())
	return &starServer{e: e, drivers: map[uint32]driverInbox{}}
}

// driverInbox is where a server driver (stardriver.go) takes what its
// client sends it: CQEPs and EAs of WQEPs.
type driverInbox interface {
	fromClient(f *bth.Frame)
}

// receive takes a StaR packet that passed the frame checks (parse,
// ICRC, P_Key) on a server NIC, before any QP lookup.
func (s *starServer) receive(f *bth.Frame) {
	e := s.e
	// The answer goes back from the address the request came to: it must
	// be ours (rxe check_addr, without a QP to name the peer).
	if f.DstAddr() != e.cfg.Addr {
		e.cnt.RcvdBadAddr++
		return
	}
	switch f.Pkt.Opcode() {
	case bth.StarRDP:
		s.rdp(f)
	case bth.StarGD:
		s.gd(f)
	case bth.StarCQEP, bth.StarEA:
		if d := s.drivers[f.Pkt.BTH().DestQPN()]; d != nil {
			d.fromClient(f)
		} else {
			e.cnt.StarDropped++
		}
	default:
		e.cnt.StarDropped++
	}
}

// rdp places an RDP's payload at its VA and answers with an RA to the
// client QP its BTH DestQP names: ACK, or NAK remote access error when
// the key, the range or the access is wrong. A refused RDP leaves memory
// untouched.
func (s *starServer) rdp(f *bth.Frame) {
	e := s.e
	e.cnt.StarRDPRcvd++
	pkt := &f.Pkt
	r := pkt.RDPETH()
	payload := pkt.Payload()
	syn := bth.AckSyndrome(bth.CreditInvalid) // no receive queue to count
	if dst, ok := e.mem.remoteSlice(anyPD, r.RKey(), r.VA(), uint32(len(payload)), rdpAccess(r.Flags())); ok {
		copy(dst, payload)
	} else {
		syn = bth.NakSyndrome(bth.NakRemoteAccessError)
	}
	h := starReplyHeader(f)
	s.ra(&h, pkt.BTH().DestQPN(), qp.PSN(pkt.BTH().PSN()), syn) // DestQP names the client's QP
}

// gd sends the SDPs a GD asks for: Length bytes from VA in packets of
// its MTU, the i-th with PSN GD's PSN + i and Offset i*MTU. A GD for 0
// bytes gets one empty SDP, as a zero-length RDMA READ gets one empty
// READ response (IBA §9.7.4.1.3): the client needs an answer to complete
// it. A GD that names no valid MTU,
// or one whose SDPs the port cannot carry, gets an RA NAK invalid
// request; one whose key, range or access is wrong an RA NAK remote
// access error; both with the GD's PSN. When the transmit ring fills or
// the link's bucket empties, the rest of the SDPs are dropped and
// counted: the server cannot remember them, the client asks again.
func (s *starServer) gd(f *bth.Frame) {
	e := s.e
	e.cnt.StarGDRcvd++
	pkt := &f.Pkt
	g := pkt.GDETH()
	h := starReplyHeader(f)
	replyQP, psn := pkt.BTH().DestQPN(), qp.PSN(pkt.BTH().PSN()) // DestQP names the client's QP
	mtu, n := g.MTU().Bytes(), int(g.Length())
	if largest := min(mtu, n); mtu == 0 ||
		h.Len()+bth.BTHLen+bth.SDPETHLen+largest+bth.PadFor(largest)+bth.ICRCLen > e.port.MaxFrame() {
		s.ra(&h, replyQP, psn, bth.NakSyndrome(bth.NakInvalidRequest))
		return
	}
	need := qp.AccessRemoteRead
	if g.Flags()&bth.GDFromSend != 0 {
		need = 0 // a SEND's buffer: any registered region
	}
	src, ok := e.mem.remoteSlice(anyPD, g.RKey(), g.VA(), uint32(n), need)
	if !ok {
		s.ra(&h, replyQP, psn, bth.NakSyndrome(bth.NakRemoteAccessError))
		return
	}
	for off, i := 0, uint32(0); off < n || i == 0; off, i = off+mtu, i+1 {
		k := min(mtu, n-off)
		var t txPacket
		if !e.beginTxFrame(&t, &h, replyQP, bth.StarSDP, psn.Add(i), k) {
			e.cnt.StarTxDrops += uint64(max(1, (n-off+mtu-1)/mtu))
			return
		}
		bth.SDPETH(t.roce[t.info.SDPETHOff:]).SetOffset(uint32(off))
		copy(t.payload, src[off:off+k])
		e.endTxFrame(&h, &t)
		e.cnt.StarSDPSent++
	}
}

// ra sends a STAR_RA: the BTH to replyQP with psn, an AETH with syn
// and MSN 0 (a stateless server counts no messages).
func (s *starServer) ra(h *bth.FrameHeader, replyQP uint32, psn qp.PSN, syn bth.Syndrome) {
	e := s.e
	var t txPacket
	if !e.beginTxFrame(&t, h, replyQP, bth.StarRA, psn, 0) {
		e.cnt.StarTxDrops++
		return
	}
	bth.AETH(t.roce[t.info.AETHOff:]).Encode(&bth.AETHFields{Syndrome: syn})
	e.endTxFrame(h, &t)
	e.cnt.StarRASent++
	if syn.Kind() == bth.NakKind {
		e.cnt.StarNakSent++
	}
}

// rdpAccess is the access an RDP's region must grant: remote write, or
// local write for a RECV's buffer (RDPToRecv).
func rdpAccess(f bth.RDPFlags) qp.Access {
	if f&bth.RDPToRecv != 0 {
		return qp.AccessLocalWrite
	}
	return qp.AccessRemoteWrite
}

// starReplyHeader is the addressing of an answer to f, taken from f
// alone: MAC and IP addresses swapped; the UDP source port the request's
// (the client's choice of ECMP entropy for the exchange; the destination
// port is 4791, as always); the
// traffic class the request's, except that a CE mark, which the path set
// and not the sender, goes back as ECT(0); the request's IPv6 flow label;
// a fresh hop limit (the request's was spent on its way here).
func starReplyHeader(f *bth.Frame) bth.FrameHeader {
	r := f.Header()
	tos := r.TOS
	if tos&ecnMask == ecnCE {
		tos = tos&^ecnMask | ecnECT0
	}
	return bth.FrameHeader{
		SrcMAC: r.DstMAC, DstMAC: r.SrcMAC,
		Src: r.Dst, Dst: r.Src,
		SrcPort: r.SrcPort,
		TOS:     tos, FlowLabel: r.FlowLabel,
	}
}

// StarServer reports whether the NIC serves StaR's stateless packets
// (Config.StarServer), and so can hold StaR server QPs.
func (e *Engine) StarServer() bool { return e.cfg.StarServer }

// starForServer reports whether a StaR packet is the server's: an RDP or
// GD for its NIC, a CQEP or an EA of a WQEP for its driver. WQEPs, EAs of
// CQEPs, RAs and SDPs are a client QP's.
func starForServer(pkt *bth.Packet) bool {
	switch pkt.Opcode() {
	case bth.StarRDP, bth.StarGD, bth.StarCQEP:
		return true
	case bth.StarEA:
		return pkt.EAETH().Kind() != bth.EACQEP // an unknown kind is the driver's to drop
	}
	return false
}

// maxEarlyWQEPs is how far past a gap in the driver's sequence a client
// keeps WQEPs; one further is dropped, and the driver resends it.
const maxEarlyWQEPs = 64

// sendEA sends one EA of kind k for driver sequence number seq from q.
func (n *onNIC) sendEA(k bth.EAKind, seq uint32) bool {
	e, q := n.e, n.q
	var t txPacket
	if !e.beginTx(&t, q, bth.StarEA, qp.PSN(seq&qp.PSNMask), false, 0) {
		return false
	}
	bth.EAETH(t.roce[t.info.EAETHOff:]).Encode(&bth.EAETHFields{Kind: k, DriverSeq: seq})
	e.endTx(q, &t, 1)
	e.cnt.StarEASent++
	return true
}

// driverTimeout is how long the driver waits for a WQEP's EA: the QP's
// local ACK timeout, or 1 ms without one.
func (n *onNIC) driverTimeout() time.Duration {
	q := n.q
	if d, ok := ackTimeout(q.timeoutCode); ok {
		return d
	}
	return time.Millisecond
}
