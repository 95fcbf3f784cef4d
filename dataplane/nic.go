package dataplane

import (
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// This file is two parts of the NIC that every transport shares: the
// ready list, and the transmit path (the port, the emulated link, the
// egress queue of frames that belong to no QP, the capture tap), which
// builds and sends frames. The Engine (engine.go) embeds both.

// readyList is the QPs with something to transmit, FIFO from readyHead.
type readyList struct {
	ready     []*QP
	readyHead int
}

// txPath is the NIC's transmit path.
type txPath struct {
	port      Port
	link      linkBucket     // the emulated link (Config.LinkRate)
	txPipe    linkBucket     // the transmit pipeline's service time (Config.ServiceRate); rate 0: none
	pause     pfcPause       // a PFC pause received (Config.PFC; pfc.go)
	txStall   bool           // the port's transmit ring was full, or the link's bucket empty, this round
	egress    egressQueue    // a StaR server's answers that wait for the link (Config.StarEgressFrames)
	pacing    bool           // packets wait on the link's bucket since pacedFrom
	pacedFrom time.Duration  // (for link_paced_ns)
	capture   CaptureFunc    // capture tap (capture.go); nil: nobody captures
	clock     *time.Duration // the engine's time (Engine.now)
	counters  *Counters      // the engine's (Engine.cnt)
}

// schedule puts q on the ready list if it is not there.
func (r *readyList) schedule(q *QP) {
	if !q.queued {
		q.queued = true
		r.ready = append(r.ready, q)
	}
}

func (r *readyList) readyLen() int { return len(r.ready) - r.readyHead }

// popReady takes the QP at the head of the ready list in O(1): the slice
// is reset when it empties and compacted when its dead prefix outgrows
// the live part, so it stays within twice the number of QPs.
func (r *readyList) popReady() *QP {
	q := r.ready[r.readyHead]
	r.ready[r.readyHead] = nil
	r.readyHead++
	switch {
	case r.readyHead == len(r.ready):
		r.ready, r.readyHead = r.ready[:0], 0
	case r.readyHead >= 64 && 2*r.readyHead >= len(r.ready):
		n := copy(r.ready, r.ready[r.readyHead:])
		clear(r.ready[n:])
		r.ready, r.readyHead = r.ready[:n], 0
	}
	q.queued = false
	return q
}

// txPacket is a frame under construction.
type txPacket struct {
	frame   []byte // whole frame
	roce    []byte // BTH .. ICRC
	payload []byte // where the payload goes
	info    *bth.OpInfo
	queued  bool // built in the egress queue, not the port's ring (beginTxFrame)
}

// linkOpen reports whether the emulated link takes a frame now; if not,
// the round ends (counted once per round in link_paced). A PFC pause
// (pfc.go) ends it too, counted in the pause's own counters.
func (p *txPath) linkOpen() bool {
	if p.link.open(*p.clock) && p.txPipe.open(*p.clock) {
		if p.pause.holds(*p.clock) {
			p.txStall = true
			return false
		}
		return true
	}
	if !p.txStall {
		p.txStall = true
		p.counters.LinkPaced++
	}
	if !p.pacing {
		p.pacing, p.pacedFrom = true, *p.clock
	}
	return false
}

// toWire queues frame, the sealed first bytes of the last TxBuffer, on
// the port and the emulated link.
func (p *txPath) toWire(frame []byte) {
	n := len(frame)
	if p.capture != nil {
		p.capture(CaptureTX, *p.clock, frame)
	}
	p.port.Transmit(n)
	p.link.take(*p.clock, n)
	p.txPipe.take(*p.clock, n)
	p.counters.SentPkts++
	p.counters.TxWireBytes += uint64(WireBytes(n))
}

// beginTx takes a transmit buffer and writes Ethernet/IP/UDP and the BTH.
// It returns false when the port's ring is full or the link's bucket is
// empty.
func (p *txPath) beginTx(t *txPacket, q *QP, op bth.Opcode, psn qp.PSN, ackReq bool, payloadLen int) bool {
	if !p.linkOpen() {
		return false
	}
	buf := p.port.TxBuffer()
	if buf == nil {
		p.txStall = true
		p.counters.TxRingFull++
		return false
	}
	writeTx(t, buf, &q.hdr, q.destQPN, op, psn, ackReq, payloadLen)
	return true
}

// writeTx writes Ethernet/IP/UDP from h and the BTH into the transmit
// buffer buf, and t says where its parts are (filled in place: the hot
// path copies no txPacket).
func writeTx(t *txPacket, buf []byte, h *bth.FrameHeader, destQPN uint32, op bth.Opcode, psn qp.PSN, ackReq bool, payloadLen int) {
	info := bth.Lookup(op)
	pad := bth.PadFor(payloadLen)
	roceLen := info.Length + payloadLen + pad + bth.ICRCLen
	off := h.Encode(buf, roceLen)
	roce := buf[off : off+roceLen]
	bth.BTH(roce).Encode(&bth.BTHFields{
		Opcode:   op,
		PadCount: uint8(pad),
		PKey:     defaultPKey,
		DestQPN:  destQPN,
		AckReq:   ackReq,
		PSN:      uint32(psn),
	})
	payloadEnd := info.Length + payloadLen
	for i := payloadEnd; i < payloadEnd+pad; i++ { // at most 3 bytes
		roce[i] = 0
	}
	t.frame, t.roce, t.payload, t.info = buf[:off+roceLen], roce, roce[info.Length:payloadEnd], info
}

// beginTxFrame is beginTx for a frame that belongs to no QP, StaR's RA
// and SDP (star.go): its addressing h and destination QP come from the
// frame it answers. It goes to the port when the link's bucket (and no
// PFC pause) and the transmit ring take it and nothing waits before it;
// otherwise into the port's egress queue (Config.StarEgressFrames), which
// transmit drains first, in order. When the queue is full it returns false, and the
// caller drops the frame (a stateless server keeps nothing of its own to
// send later) and counts it in star_tx_drops.
func (p *txPath) beginTxFrame(t *txPacket, h *bth.FrameHeader, destQPN uint32, op bth.Opcode, psn qp.PSN, payloadLen int) bool {
	if p.egress.n == 0 && p.wireOpen(*p.clock) {
		if buf := p.port.TxBuffer(); buf != nil {
			writeTx(t, buf, h, destQPN, op, psn, false, payloadLen)
			t.queued = false
			return true
		}
	}
	buf := p.egress.slot()
	if buf == nil {
		return false
	}
	writeTx(t, buf, h, destQPN, op, psn, false, payloadLen)
	t.queued = true
	return true
}

// endTxFrame seals a frame of beginTxFrame and sends it, or queues it
// in the egress queue.
func (p *txPath) endTxFrame(h *bth.FrameHeader, t *txPacket) {
	bth.FinishFrame(t.frame, h)
	if t.queued {
		p.egress.push(len(t.frame))
		p.counters.StarTxQueued++
		return
	}
	p.toWire(t.frame)
}

// drainEgress sends the egress queue's frames, oldest first, while the
// link and the ring take them, and returns how many went.
func (p *txPath) drainEgress() int {
	n := 0
	for p.egress.n > 0 && p.linkOpen() {
		buf := p.port.TxBuffer()
		if buf == nil {
			p.txStall = true
			p.counters.TxRingFull++
			break
		}
		p.toWire(buf[:copy(buf, p.egress.front())])
		p.egress.pop()
		n++
	}
	return n
}

// egressQueue is a ring of preallocated frame buffers: the port's egress
// buffer for a stateless server's answers.
type egressQueue struct {
	bufs    [][]byte
	lens    []int
	head, n int
}

func newEgressQueue(frames, frameSize int) egressQueue {
	if frames <= 0 {
		return egressQueue{}
	}
	q := egressQueue{bufs: make([][]byte, frames), lens: make([]int, frames)}
	for i := range q.bufs {
		q.bufs[i] = make([]byte, frameSize)
	}
	return q
}

// slot is the buffer the next pushed frame is written into, nil when
// the queue is full.
func (q *egressQueue) slot() []byte {
	if q.n == len(q.bufs) {
		return nil
	}
	return q.bufs[(q.head+q.n)%len(q.bufs)]
}

// push queues the n bytes written into slot.
func (q *egressQueue) push(n int) {
	q.lens[(q.head+q.n)%len(q.bufs)] = n
	q.n++
}

func (q *egressQueue) front() []byte { return q.bufs[q.head][:q.lens[q.head]] }

func (q *egressQueue) pop() {
	q.head = (q.head + 1) % len(q.bufs)
	q.n--
}

// endTx seals the frame (ICRC, IPv6 UDP checksum) and queues it copies
// times (Improved go-back-N's ST sends a message's last packet twice). It
// returns how many went out: fewer when the ring filled up or the link's
// bucket emptied, and the caller keeps the rest pending.
func (p *txPath) endTx(q *QP, t *txPacket, copies int) int {
	p.endTxFrame(&q.hdr, t)
	for c := 1; c < copies; c++ {
		if !p.linkOpen() {
			return c
		}
		buf := p.port.TxBuffer()
		if buf == nil {
			p.txStall = true
			return c
		}
		n := copy(buf, t.frame)
		p.toWire(buf[:n])
	}
	return copies
}

// CaptureDir says which way a captured frame went.
type CaptureDir uint8

const (
	CaptureRX CaptureDir = iota // received, before any check
	CaptureTX                   // transmitted, ICRC written
)

func (d CaptureDir) String() string {
	if d == CaptureTX {
		return "tx"
	}
	return "rx"
}

// CaptureFunc sees every frame the engine receives (as the port hands it
// over, before it is parsed, so malformed frames too) and every frame it
// transmits (sealed: ICRC and checksums written, before the port queues
// it), with the engine's time. It runs on the poll loop with the engine
// lock held: it must copy what it keeps (frame is the port's buffer),
// must not block, and must not call back into the engine.
type CaptureFunc func(dir CaptureDir, now time.Duration, frame []byte)
