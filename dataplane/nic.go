package dataplane

import (
	"fmt"
	"sync"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// This file is the engine's state and the primitives every stage of the
// pipeline shares: the context cache and host-memory stalls, the ready
// list, building and sending a frame, completions and the doorbell. It
// uses only the files below it (the QP context, memory regions, queues,
// the link and the port), never a stage.

// Engine is one software RNIC.
type Engine struct {
	mu      sync.Mutex // verbs calls from other goroutines vs the poll loop
	cfg     Config
	port    Port
	scheme  recovery.Scheme            // the default
	schemes map[string]recovery.Scheme // others QPs asked for
	wheel   *timer.Wheel
	// timeoutPeer is the engine at the other end of the embedded fabric,
	// read only to classify ACK timeouts by reason (timeout_reason.go).
	timeoutPeer *Engine
	rob         *reorderBuffer // off-chip reorder buffer, made on first use (reorder.go)
	now         time.Duration
	ipv6        bool

	pds    map[uint32]int // PD handle -> number of MRs and QPs in it
	nextPD uint32
	mrs    []*MR
	keyTag uint8
	qps    map[uint32]*QP
	nextQP uint32

	ready     []*QP // QPs with something to transmit, FIFO from readyHead
	readyHead int
	rxBatch   [][]byte
	rxNext    int // rxBatch[rxNext:rxN] still wait: a context miss stalled the pipeline
	rxN       int
	txStall   bool        // the port's transmit ring was full, or the link's bucket empty, this round
	egress    egressQueue // a StaR server's answers that wait for the link (Config.StarEgressFrames)

	link      linkBucket    // the emulated link (Config.LinkRate)
	rx        *rxImpair     // the receive stage (Config.LinkDelay, Netem); nil: none
	pacing    bool          // packets wait on the link's bucket since pacedFrom
	pacedFrom time.Duration // (for link_paced_ns)

	cache     *qp.Cache
	host      *recovery.HostMemory // the schemes' state in host memory (Params.Host)
	busyUntil time.Duration        // the pipeline is stalled on a context fetch or host access until then

	doorbell func()      // wakes a sleeping poll loop when work is posted
	capture  CaptureFunc // capture tap (capture.go); nil: nobody captures

	cnt Counters
}

// stalled reports whether the pipeline waits on a context fetch or a
// scheme's host-memory access.
func (e *Engine) stalled() bool { return e.now < e.busyUntil }

// hostStall stalls the pipeline for the host-memory accesses the schemes
// charged since the last call (recovery.HostMemory).
func (e *Engine) hostStall() {
	if d := e.host.Take(); d > 0 {
		e.busyUntil = max(e.busyUntil, e.now) + d
	}
}

// touch is every access of a QP's on-chip context: a miss fetches it
// from host memory and stalls the pipeline for the fetch penalty.
func (e *Engine) touch(q *QP, write bool) {
	if q.star == StarServer {
		return // a stateless QP's context is never on chip (starqp.go)
	}
	if stall := e.cache.Access(&q.cache, write); stall > 0 {
		e.busyUntil = max(e.busyUntil, e.now) + stall
	}
}

// schedule puts q on the ready list if it is not there.
func (e *Engine) schedule(q *QP) {
	if !q.queued {
		q.queued = true
		e.ready = append(e.ready, q)
	}
}

func (e *Engine) readyLen() int { return len(e.ready) - e.readyHead }

// popReady takes the QP at the head of the ready list in O(1): the slice
// is reset when it empties and compacted when its dead prefix outgrows
// the live part, so it stays within twice the number of QPs.
func (e *Engine) popReady() *QP {
	q := e.ready[e.readyHead]
	e.ready[e.readyHead] = nil
	e.readyHead++
	switch {
	case e.readyHead == len(e.ready):
		e.ready, e.readyHead = e.ready[:0], 0
	case e.readyHead >= 64 && 2*e.readyHead >= len(e.ready):
		n := copy(e.ready, e.ready[e.readyHead:])
		clear(e.ready[n:])
		e.ready, e.readyHead = e.ready[:n], 0
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
// the round ends (counted once per round in link_paced).
func (e *Engine) linkOpen() bool {
	if e.link.open(e.now) {
		return true
	}
	if !e.txStall {
		e.txStall = true
		e.cnt.LinkPaced++
	}
	if !e.pacing {
		e.pacing, e.pacedFrom = true, e.now
	}
	return false
}

// toWire queues frame, the sealed first bytes of the last TxBuffer, on
// the port and the emulated link.
func (e *Engine) toWire(frame []byte) {
	n := len(frame)
	if e.capture != nil {
		e.capture(CaptureTX, e.now, frame)
	}
	e.port.Transmit(n)
	e.link.take(e.now, n)
	e.cnt.SentPkts++
	e.cnt.TxWireBytes += uint64(WireBytes(n))
}

// beginTx takes a transmit buffer and writes Ethernet/IP/UDP and the BTH.
// It returns false when the port's ring is full or the link's bucket is
// empty.
func (e *Engine) beginTx(t *txPacket, q *QP, op bth.Opcode, psn qp.PSN, ackReq bool, payloadLen int) bool {
	if !e.linkOpen() {
		return false
	}
	buf := e.port.TxBuffer()
	if buf == nil {
		e.txStall = true
		e.cnt.TxRingFull++
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
// frame it answers. It goes to the port when the link's bucket and the
// transmit ring take it and nothing waits before it; otherwise into the
// port's egress queue (Config.StarEgressFrames), which transmit drains
// first, in order. When the queue is full it returns false, and the
// caller drops the frame (a stateless server keeps nothing of its own to
// send later) and counts it in star_tx_drops.
func (e *Engine) beginTxFrame(t *txPacket, h *bth.FrameHeader, destQPN uint32, op bth.Opcode, psn qp.PSN, payloadLen int) bool {
	if e.egress.n == 0 && e.link.open(e.now) {
		if buf := e.port.TxBuffer(); buf != nil {
			writeTx(t, buf, h, destQPN, op, psn, false, payloadLen)
			t.queued = false
			return true
		}
	}
	buf := e.egress.slot()
	if buf == nil {
		return false
	}
	writeTx(t, buf, h, destQPN, op, psn, false, payloadLen)
	t.queued = true
	return true
}

// endTxFrame seals a frame of beginTxFrame and sends it, or queues it
// in the egress queue.
func (e *Engine) endTxFrame(h *bth.FrameHeader, t *txPacket) {
	bth.FinishFrame(t.frame, h)
	if t.queued {
		e.egress.push(len(t.frame))
		e.cnt.StarTxQueued++
		return
	}
	e.toWire(t.frame)
}

// drainEgress sends the egress queue's frames, oldest first, while the
// link and the ring take them, and returns how many went.
func (e *Engine) drainEgress() int {
	n := 0
	for e.egress.n > 0 && e.linkOpen() {
		buf := e.port.TxBuffer()
		if buf == nil {
			e.txStall = true
			e.cnt.TxRingFull++
			break
		}
		e.toWire(buf[:copy(buf, e.egress.front())])
		e.egress.pop()
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
func (e *Engine) endTx(q *QP, t *txPacket, copies int) int {
	e.endTxFrame(&q.hdr, t)
	for c := 1; c < copies; c++ {
		if !e.linkOpen() {
			return c
		}
		buf := e.port.TxBuffer()
		if buf == nil {
			e.txStall = true
			return c
		}
		n := copy(buf, t.frame)
		e.toWire(buf[:n])
	}
	return copies
}

// errorf wraps an API error with the QP it concerns.
func errorf(q *QP, format string, args ...any) error {
	return fmt.Errorf("dataplane: QP %#x: "+format, append([]any{q.qpn}, args...)...)
}

// SetDoorbell installs fn, called (with the engine lock held; it must not
// block or call back into the engine) whenever new work is posted, so
// that a sleeping poll loop wakes up: the eventfd doorbell of a real NIC.
func (e *Engine) SetDoorbell(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.doorbell = fn
}

func (e *Engine) ring() {
	if e.doorbell != nil {
		e.doorbell()
	}
}

func (e *Engine) pushWC(cq *CQ, wc qp.WC) {
	slot := cq.ring.Push()
	if slot == nil {
		cq.overflow = true
		e.cnt.CQOverflow++
		return
	}
	*slot = wc
	if cq.notify != nil {
		cq.notify(slot)
	}
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
