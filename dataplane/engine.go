// Package dataplane is softnic's poll-mode RoCEv2 engine: one per NIC, run
// by one goroutine. Each Poll reads a batch of frames from the Port,
// checks them in a fixed order (parse, ICRC, QPN, addresses, state; every
// drop counted under its reason), hands requests to the responder and
// responses to the completer, fires due timers from the one timer wheel,
// and then lets each QP with work transmit a burst: responder output
// (ACK/NAK, read responses, atomic ACKs, in PSN order) first, then the
// requester's packets. All protocol decisions about loss are delegated to a
// recovery.Scheme. Time is always passed in, so the same engine runs on a
// fake clock in tests and on the monotonic clock in the daemon.
//
// The transport follows IBA Volume 1 chapter 9 for reliable connected
// service and is organised like Linux rxe: rxe_req.c (requester.go),
// rxe_resp.c (responder.go), rxe_comp.c (completer.go).
package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Config describes one engine (one NIC port).
type Config struct {
	MAC  [6]byte
	Addr netip.Addr // the local GID as an IP address (RoCEv2)
	// Scheme names the loss recovery of every QP that asks for none of
	// its own ("" means gbn); SchemeParams are the parameters of every
	// scheme the engine builds (zero fields take recovery's defaults).
	// The engine builds its own instances, and with them their shared
	// pools, on first use.
	Scheme       string
	SchemeParams recovery.Params
	// RxBatch is how many frames one Poll reads (default 64).
	RxBatch int
	// TxBurst is how many packets a QP sends before the next QP's turn
	// (default 16).
	TxBurst int
	// SRAMBytes is the NIC's on-chip memory for QP contexts and the
	// recovery scheme's shared pools (qp.DefaultCacheBudget is 300 base
	// contexts, StaR's RNIC); 0 means unlimited.
	SRAMBytes int
	// ReorderSlots is the size of the off-chip reorder buffer, in packets,
	// of schemes that buffer out-of-order packets (MELO; default
	// DefaultReorderSlots).
	ReorderSlots int
	// QPContextBytes is the base on-chip size of one QP context (default
	// qp.DefaultQPContextBytes, 256 B); the scheme's per-QP state adds to it.
	QPContextBytes int
	// FetchPenalty is the pipeline stall of a context-cache miss (default
	// qp.DefaultFetchPenalty, 1 µs, a PCIe read); negative disables it.
	FetchPenalty time.Duration
	// RTOBackoff doubles a QP's retransmission timeout after every
	// timeout (or go-back) without progress, up to 16 times the scheme's,
	// as TCP does and as ConnectX's adaptive retransmission does: on a
	// host whose cores the NIC shares, a scheduler pause of milliseconds
	// would otherwise fire timeout after timeout and spend the QP's whole
	// retry_cnt (RETRY_EXC_ERR) with nothing lost. Off by default: the
	// papers' schemes, and the embedded fabric, use fixed timeouts.
	RTOBackoff bool
	// RTO chooses the retransmission timeouts: RTOFixed (the default)
	// takes the scheme's fixed values, RTOAdaptive derives them from each
	// QP's measured round trip (rtt.go, docs/recovery.md).
	RTO RTOMode
	// RTOMin is the least adaptive timeout (0: none), like Linux TCP's
	// rto_min: a software NIC shares its host's cores, and a scheduler
	// pause longer than a few round trips (a time slice, a migration)
	// would otherwise fire a timeout with nothing lost. The papers'
	// hardware NICs need none, and the embedded fabric has none.
	RTOMin time.Duration
	// LinkRate, in bits/s, paces everything the engine transmits as an
	// Ethernet link of that rate would (link.go): every frame counts with
	// its padding to 64 bytes, FCS, preamble and inter-frame gap. Below
	// what the hosts sustain it makes the emulated link the bottleneck.
	// 0, the default, is unlimited: the port's own speed.
	LinkRate uint64
	// LinkBurst is the token bucket's depth in bytes of wire time, what
	// the link may send back to back after an idle spell (plus the frame
	// that empties it). 0: the larger of 16 of the port's largest frames
	// and 20 µs at LinkRate (defaultLinkBurst).
	LinkBurst int
	// LinkDelay holds every received frame this long before the engine
	// sees it: the emulated link's one-way propagation delay (rx_impair.go),
	// so that a path between two hosts on one machine has a datacenter's
	// bandwidth-delay product. 0, the default: none. LinkDelaySlots is
	// the receive stage's capacity in frames (DefaultLinkDelaySlots, or
	// Netem's limit if larger).
	LinkDelay      time.Duration
	LinkDelaySlots int
	// Netem impairs every received frame before the engine parses it, in
	// netem's words (package impair; rx_impair.go): loss, delay and
	// jitter on top of LinkDelay, reordering, duplication, corruption.
	// The zero Spec: none. SetNetem changes it while the engine runs.
	Netem impair.Spec
}

const (
	defaultRxBatch = 64
	defaultTxBurst = 16
	// defaultPKey is the full-membership default partition.
	defaultPKey = 0xFFFF
)

// Engine is one software RNIC.
type Engine struct {
	mu      sync.Mutex // verbs calls from other goroutines vs the poll loop
	cfg     Config
	port    Port
	scheme  recovery.Scheme            // the default
	schemes map[string]recovery.Scheme // others QPs asked for
	wheel   *timer.Wheel
	rob     *reorderBuffer // off-chip reorder buffer, made on first use (reorder.go)
	now     time.Duration
	ipv6    bool

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
	txStall   bool // the port's transmit ring was full, or the link's bucket empty, this round

	link      linkBucket    // the emulated link (Config.LinkRate)
	rx        *rxImpair     // the receive stage (Config.LinkDelay, Netem); nil: none
	pacing    bool          // packets wait on the link's bucket since pacedFrom
	pacedFrom time.Duration // (for link_paced_ns)

	cache     *qp.Cache
	host      *recovery.HostMemory // the schemes' state in host memory (Params.Host)
	busyUntil time.Duration        // the pipeline is stalled on a context fetch or host access until then

	doorbell func() // wakes a sleeping poll loop when work is posted

	cnt Counters
}

// NewEngine returns an engine transmitting and receiving through port.
func NewEngine(cfg Config, port Port) (*Engine, error) {
	if !cfg.Addr.IsValid() {
		return nil, errors.New("dataplane: engine needs a local IP address")
	}
	if cfg.Scheme == "" {
		cfg.Scheme = recovery.GBN
	}
	host := &recovery.HostMemory{}
	cfg.SchemeParams.Host = host
	scheme, err := recovery.New(cfg.Scheme, cfg.SchemeParams)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if cfg.RxBatch <= 0 {
		cfg.RxBatch = defaultRxBatch
	}
	if cfg.TxBurst <= 0 {
		cfg.TxBurst = defaultTxBurst
	}
	if cfg.QPContextBytes <= 0 {
		cfg.QPContextBytes = qp.DefaultQPContextBytes
	}
	if cfg.ReorderSlots <= 0 {
		cfg.ReorderSlots = DefaultReorderSlots
	}
	switch {
	case cfg.FetchPenalty == 0:
		cfg.FetchPenalty = qp.DefaultFetchPenalty
	case cfg.FetchPenalty < 0:
		cfg.FetchPenalty = 0
	}
	switch {
	case cfg.LinkRate > maxLinkRate:
		return nil, fmt.Errorf("dataplane: link rate %d bit/s is above %g", cfg.LinkRate, float64(maxLinkRate))
	case cfg.LinkBurst < 0 || cfg.LinkBurst > maxLinkBurst:
		return nil, fmt.Errorf("dataplane: link burst %d bytes is not in [0, %d]", cfg.LinkBurst, maxLinkBurst)
	case cfg.LinkRate > 0 && cfg.LinkBurst == 0:
		cfg.LinkBurst = defaultLinkBurst(cfg.LinkRate, port.MaxFrame())
	}
	switch {
	case cfg.LinkDelay < 0 || cfg.LinkDelay > time.Second:
		return nil, fmt.Errorf("dataplane: link delay %v is not in [0, 1s]", cfg.LinkDelay)
	case cfg.LinkDelaySlots < 0:
		return nil, fmt.Errorf("dataplane: %d link delay slots", cfg.LinkDelaySlots)
	case cfg.LinkDelaySlots == 0:
		cfg.LinkDelaySlots = max(DefaultLinkDelaySlots, cfg.Netem.Limit)
	}
	if err := cfg.Netem.Validate(); err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if cfg.Netem.Limit > cfg.LinkDelaySlots {
		return nil, fmt.Errorf("dataplane: netem limit %d is above the %d link delay slots", cfg.Netem.Limit, cfg.LinkDelaySlots)
	}
	shared := scheme.SharedOnChipBytes()
	if cfg.SRAMBytes != 0 && cfg.SRAMBytes < shared+cfg.QPContextBytes {
		return nil, fmt.Errorf("dataplane: %d bytes of SRAM do not hold the %s scheme's %d-byte shared pools and one %d-byte QP context",
			cfg.SRAMBytes, scheme.Name(), shared, cfg.QPContextBytes)
	}
	e := &Engine{
		cache:   qp.NewCache(cfg.SRAMBytes, shared, cfg.FetchPenalty),
		cfg:     cfg,
		port:    port,
		scheme:  scheme,
		host:    host,
		schemes: map[string]recovery.Scheme{},
		wheel:   timer.NewWheel(0),
		ipv6:    cfg.Addr.Is6() && !cfg.Addr.Is4In6(),
		pds:     map[uint32]int{},
		qps:     map[uint32]*QP{},
		nextQP:  0x10, // QPN 0 and 1 are the special QPs of IBA §10.2.5
		rxBatch: make([][]byte, cfg.RxBatch),
		link:    newLinkBucket(cfg.LinkRate, cfg.LinkBurst),
		ready:   make([]*QP, 0, 64),
	}
	if cfg.LinkDelay > 0 || cfg.Netem.Active() {
		e.rx = newRxImpair(port, cfg.LinkDelay, cfg.Netem, cfg.LinkDelaySlots, cfg.RxBatch, &e.now)
		e.port = e.rx
	}
	return e, nil
}

// SetNetem replaces the receive stage's impairment (Config.Netem) while
// the engine runs; the zero Spec removes it. Frames already held keep
// their due times. It is a verbs-style call from another goroutine: it
// takes the engine's lock, which the poll loop holds for each Poll
// anyway, so the per-frame path gains no lock. The first Spec on an
// engine started without a stage allocates the stage's slots, before
// the lock is taken.
func (e *Engine) SetNetem(spec impair.Spec) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	e.mu.Lock()
	rx, port := e.rx, e.port
	e.mu.Unlock()
	var fresh *rxImpair
	if rx == nil && spec.Active() {
		if spec.Limit > e.cfg.LinkDelaySlots {
			return fmt.Errorf("dataplane: netem limit %d is above the receive stage's %d slots", spec.Limit, e.cfg.LinkDelaySlots)
		}
		fresh = newRxImpair(port, 0, impair.Spec{}, e.cfg.LinkDelaySlots, e.cfg.RxBatch, &e.now)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rx == nil {
		if fresh == nil {
			e.cfg.Netem = spec // nothing to impair, nothing held
			return nil
		}
		e.rx, e.port = fresh, fresh
	}
	if err := e.rx.checkSpec(spec); err != nil {
		return err
	}
	e.rx.setSpec(spec)
	e.cfg.Netem = spec
	return nil
}

// Netem returns the receive stage's impairment in force.
func (e *Engine) Netem() impair.Spec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg.Netem
}

// Addr is the engine's local address.
func (e *Engine) Addr() netip.Addr { return e.cfg.Addr }

// MAC is the engine's local MAC address.
func (e *Engine) MAC() [6]byte { return e.cfg.MAC }

// Scheme is the engine's loss recovery.
func (e *Engine) Scheme() recovery.Scheme { return e.scheme }

// Counters returns a snapshot of the statistics.
func (e *Engine) Counters() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cnt
	s := e.cache.Stats()
	c.QPCHits, c.QPCMisses, c.QPCEvictions, c.QPCWriteBacks = s.Hits, s.Misses, s.Evictions, s.WriteBacks
	c.QPCStallNs = uint64(s.StallTime)
	acc, stall := e.host.Stats()
	c.HostAccesses, c.HostStallNs = acc, uint64(stall)
	c.QPCResident, c.QPCResidentPeak = uint64(s.Resident), uint64(s.PeakResident)
	c.QPCResidentBytes, c.QPCResidentBytesPeak = uint64(s.ResidentBytes), uint64(s.PeakResidentBytes)
	c.SRResidentBytes, c.SRResidentBytesPeak = uint64(s.ResidentSRBytes), uint64(s.PeakSRBytes)
	c.SRAMSharedBytes, c.SRAMBudget = uint64(s.SharedBytes), uint64(s.Budget)
	if e.rob != nil {
		c.ROBInUse, c.ROBPeak = uint64(e.rob.inUse), uint64(e.rob.peak)
	}
	if r := e.rx; r != nil {
		st := r.stage.Stats()
		c.ImpairFrames, c.ImpairLost, c.ImpairGEBad = st.Frames, st.Lost, st.GEBad
		c.ImpairDuplicated, c.ImpairReordered, c.ImpairHeld, c.ImpairCorrupted = st.Duplicated, st.Reordered, st.Held, st.Corrupted
		c.ImpairDelayed, c.ImpairDrops, c.LinkDelayDrops = r.delayed, r.drops, r.drops
	}
	e.schemeStats(&c)
	return c
}

// schemeStats adds the counters of every scheme the NIC runs.
func (e *Engine) schemeStats(c *Counters) {
	add := func(s recovery.Scheme) {
		r, ok := s.(recovery.Reporter)
		if !ok {
			return
		}
		st := r.Stats()
		c.SRRxFastPath += st.RxFastPath
		c.SRRxSlowPath += st.RxSlowPath
		c.SRTxFastPath += st.TxFastPath
		c.SRTxSlowPath += st.TxSlowPath
		c.SRFallbacks += st.Fallbacks
		c.SRPoolDrops += st.PoolDrops
		c.SRMiddleDrops += st.MiddleDrops
		c.SRMiddleFills += st.MiddleFills
		c.SRFNacksTaken += st.FNacksTaken
		c.SRLostRetransmits += st.LostRetransmits
		c.SRLostCntOverflows += st.LostCntOverflows
		c.SRSenderUnrecorded += st.SenderUnrecorded
		c.Pools = append(c.Pools, st.Pools...)
	}
	add(e.scheme)
	names := make([]string, 0, len(e.schemes))
	for n := range e.schemes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(e.schemes[n])
	}
}

// Poll runs one round of the engine at time now: receive a batch, fire due
// timers, transmit. It reports whether it did anything, so that a caller
// can back off when the engine is idle.
func (e *Engine) Poll(now time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now > e.now {
		e.now = now
	}
	if e.stalled() {
		return false
	}
	did := e.rxNext < e.rxN
	if !did {
		e.rxN, e.rxNext = e.port.Receive(e.rxBatch), 0
		did = e.rxN > 0
	}
	// Frames after a context miss wait until the fetch is done: the
	// pipeline is serial, as in hardware.
	for e.rxNext < e.rxN && !e.stalled() {
		e.receive(e.rxBatch[e.rxNext])
		e.rxNext++
		e.hostStall()
	}
	if !e.stalled() && e.wheel.Advance(e.now) > 0 {
		did = true
	}
	e.hostStall()
	if !e.stalled() && e.transmit() > 0 {
		did = true
	}
	e.port.Flush()
	return did
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
	if stall := e.cache.Access(&q.cache, write); stall > 0 {
		e.busyUntil = max(e.busyUntil, e.now) + stall
	}
}

// CacheStats returns the context cache's counters.
func (e *Engine) CacheStats() qp.CacheStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cache.Stats()
}

// linkWait is how long after now the packets waiting on the emulated
// link's bucket may go, if any wait.
func (e *Engine) linkWait(now time.Duration) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.pacedUntil()
	if due, held := e.delayedUntil(); held && (!ok || due < t) {
		t, ok = due, true
	}
	return t - now, ok
}

// delayedUntil is when the next frame held by the receive stage is due,
// if it holds one.
func (e *Engine) delayedUntil() (time.Duration, bool) {
	if e.rx == nil {
		return 0, false
	}
	return e.rx.nextDue()
}

// NextDeadline is when the earliest timer fires, or, if packets wait on
// the emulated link (Config.LinkRate), when its bucket has tokens again,
// whichever comes first.
// While the pipeline is stalled on a context fetch nothing can happen
// before the fetch ends, timers included: that is the next deadline.
func (e *Engine) NextDeadline() (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stalled() {
		return e.busyUntil, true
	}
	d, ok := e.wheel.NextDeadline()
	if t, paced := e.pacedUntil(); paced && (!ok || t < d) {
		d, ok = t, true
	}
	if t, held := e.delayedUntil(); held && (!ok || t < d) {
		d, ok = t, true
	}
	return d, ok
}

// pacedUntil is when the link's bucket opens, if packets wait on it.
func (e *Engine) pacedUntil() (time.Duration, bool) {
	if e.readyLen() == 0 || e.link.open(e.now) {
		return 0, false
	}
	return e.link.openAt(), true
}

// receive checks one frame in the fixed order of rxe_recv.c and hands it on.
func (e *Engine) receive(frame []byte) {
	f, err := bth.ParseFrame(frame)
	if err != nil {
		e.cnt.RcvdMalformed++
		return
	}
	e.cnt.RcvdPkts++
	if !f.VerifyICRC() {
		e.cnt.RcvdICRCErr++
		return
	}
	pkt := &f.Pkt
	hdr := pkt.BTH()
	if pk := hdr.PKey(); pk != defaultPKey && pk != defaultPKey&0x7FFF {
		e.cnt.RcvdPKeyErr++
		return
	}
	q := e.qps[hdr.DestQPN()]
	if q == nil {
		e.cnt.RcvdUnknownQPN++
		return
	}
	e.touch(q, true)
	// rxe check_addr: an RC QP takes frames only from its peer, to us.
	if f.DstAddr() != e.cfg.Addr || f.SrcAddr() != q.av.DGID {
		e.cnt.RcvdBadAddr++
		return
	}
	flags := pkt.Info.Flags
	if flags&(bth.IsRequest|bth.IsResponse) == 0 || flags&bth.HasDETH != 0 {
		e.cnt.RcvdBadOpcode++
		return
	}
	// softnic's extension opcodes belong to connections that place out of
	// order, negotiated with their scheme: there every SEND and WRITE
	// carries a PETH, elsewhere nothing carries a PETH or a SACKETH.
	if q.ooo && flags&(bth.IsSend|bth.IsWrite) != 0 && flags&bth.HasPETH == 0 ||
		!q.ooo && flags&(bth.HasPETH|bth.HasSACKETH|bth.HasHolesETH) != 0 {
		e.cnt.RcvdBadOpcode++
		return
	}
	if flags&bth.IsRequest != 0 {
		if !q.state.CanReceive() {
			e.cnt.RcvdBadState++
			return
		}
		e.respond(q, pkt)
		return
	}
	if q.state != qp.RTS && q.state != qp.SQD && q.state != qp.SQE {
		e.cnt.RcvdBadState++
		return
	}
	e.complete(q, pkt)
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

// scheduleIfReady schedules q if its requester has something to send.
func (e *Engine) scheduleIfReady(q *QP) {
	if e.requestReady(q) {
		e.schedule(q)
	}
}

// transmit gives each ready QP a burst in turn until every QP is done,
// the port's ring is full or the link's bucket is empty, and returns the
// packets sent.
func (e *Engine) transmit() int {
	e.txStall = false
	if e.pacing && e.link.open(e.now) {
		// The wait on the link ended when the bucket opened, whenever
		// this poll came.
		e.cnt.LinkPacedNs += uint64(e.link.openAt() - e.pacedFrom)
		e.pacing = false
	}
	if e.readyLen() > 0 && !e.linkOpen() {
		return 0 // nobody loses their place in the ready list
	}
	total := 0
	for e.readyLen() > 0 && !e.txStall && !e.stalled() {
		// One pass over the QPs that are ready now; QPs that still have
		// work go to the back, after QPs scheduled during the pass.
		n := e.readyLen()
		for i := 0; i < n && !e.txStall && !e.stalled(); i++ {
			q := e.popReady()
			sent, more := e.serve(q, e.cfg.TxBurst)
			e.hostStall()
			total += sent
			if more {
				e.schedule(q)
			}
		}
	}
	return total
}

// serve lets q send up to budget packets: responses first (they free the
// peer's requester), then requests. It reports whether q has more.
func (e *Engine) serve(q *QP, budget int) (sent int, more bool) {
	e.touch(q, true)
	for sent < budget && !e.txStall && q.respQ.Len() > 0 {
		if !e.sendResponse(q) {
			break
		}
		sent++
	}
	for sent < budget && !e.txStall && e.requestReady(q) {
		if !e.sendRequest(q) {
			break
		}
		sent++
	}
	return sent, q.respQ.Len() > 0 || e.requestReady(q)
}

// txPacket is a frame under construction.
type txPacket struct {
	frame   []byte // whole frame
	roce    []byte // BTH .. ICRC
	payload []byte // where the payload goes
	info    *bth.OpInfo
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

// toWire queues the first n bytes of the last TxBuffer on the port and
// the emulated link.
func (e *Engine) toWire(n int) {
	e.port.Transmit(n)
	e.link.take(e.now, n)
	e.cnt.SentPkts++
	e.cnt.TxWireBytes += uint64(WireBytes(n))
}

// beginTx takes a transmit buffer and writes Ethernet/IP/UDP and the BTH.
// It returns false when the port's ring is full or the link's bucket is
// empty.
func (e *Engine) beginTx(q *QP, op bth.Opcode, psn qp.PSN, ackReq bool, payloadLen int) (txPacket, bool) {
	if !e.linkOpen() {
		return txPacket{}, false
	}
	buf := e.port.TxBuffer()
	if buf == nil {
		e.txStall = true
		e.cnt.TxRingFull++
		return txPacket{}, false
	}
	info := bth.Lookup(op)
	pad := bth.PadFor(payloadLen)
	roceLen := info.Length + payloadLen + pad + bth.ICRCLen
	off := q.hdr.Encode(buf, roceLen)
	roce := buf[off : off+roceLen]
	bth.BTH(roce).Encode(&bth.BTHFields{
		Opcode:   op,
		PadCount: uint8(pad),
		PKey:     defaultPKey,
		DestQPN:  q.destQPN,
		AckReq:   ackReq,
		PSN:      uint32(psn),
	})
	payloadEnd := info.Length + payloadLen
	clear(roce[payloadEnd : payloadEnd+pad])
	return txPacket{frame: buf[:off+roceLen], roce: roce, payload: roce[info.Length:payloadEnd], info: info}, true
}

// endTx seals the frame (ICRC, IPv6 UDP checksum) and queues it copies
// times (Improved go-back-N's ST sends a message's last packet twice). It
// returns how many went out: fewer when the ring filled up or the link's
// bucket emptied, and the caller keeps the rest pending.
func (e *Engine) endTx(q *QP, t *txPacket, copies int) int {
	bth.FinishFrame(t.frame, &q.hdr)
	e.toWire(len(t.frame))
	for c := 1; c < copies; c++ {
		if !e.linkOpen() {
			return c
		}
		buf := e.port.TxBuffer()
		if buf == nil {
			e.txStall = true
			return c
		}
		copy(buf, t.frame)
		e.toWire(len(t.frame))
	}
	return copies
}

// errorf wraps an API error with the QP it concerns.
func errorf(q *QP, format string, args ...any) error {
	return fmt.Errorf("dataplane: QP %#x: "+format, append([]any{q.qpn}, args...)...)
}
