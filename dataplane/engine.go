// Package dataplane is softnic's poll-mode RoCEv2 NIC: one Engine per
// NIC, run by one goroutine. Each Poll reads a batch of frames from the
// Port and checks them in one place, in rxe_recv.c's order (receive in
// this file: parse, ICRC, P_Key, StaR's stateless server, QP number, the
// context cache, addresses; every drop counted under its reason), fires
// due timers from the one timer wheel, and then lets each QP with work
// transmit a burst. Time is always passed in, so the same engine runs on
// a fake clock in tests and on the monotonic clock in the daemon.
//
// The engine is what a NIC has: the poll loop, the receive checks, the
// ready list and the transmit path (nic.go), memory regions (memory.go),
// the context cache, the timer wheel, the counters, and the verbs
// (qpverbs.go, verbs_api.go, scheme_attr.go). Each QP runs a transport,
// chosen when it is made (transport.go): RC (rc.go, and its stages as
// in Linux rxe: requester.go for rxe_req.c, responder.go for rxe_resp.c,
// completer.go for rxe_comp.c, with its wire format in rcwire.go), StaR's
// client (starclient.go) or StaR's server driver (stardriver.go). A
// packet for no QP goes to StaR's stateless server (star.go). All
// protocol decisions about loss are delegated to the QP's
// recovery.Scheme. docs/architecture.md draws the layers and a frame's
// path; `go run ./internal/tools/coupling ./dataplane` measures how the
// files and types depend on each other.
package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/dataplane/timer"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Engine is one software RNIC.
type Engine struct {
	mu      sync.Mutex // verbs calls from other goroutines vs the poll loop
	cfg     Config
	txPath                             // the port, the emulated link, the egress queue, the capture tap
	scheme  recovery.Scheme            // the default
	schemes map[string]recovery.Scheme // others QPs asked for
	cc      map[string]cc.Algorithm    // congestion controls, by name; Config.CC's made at start
	wheel   *timer.Wheel
	// timeoutPeer is the engine at the other end of the embedded fabric,
	// read only to classify ACK timeouts by reason (timeout_reason.go).
	timeoutPeer *Engine
	rob         *reorderBuffer // off-chip reorder buffer, made on first use (reorder.go)
	now         time.Duration
	ipv6        bool

	pds    map[uint32]int // PD handle -> number of MRs and QPs in it
	nextPD uint32
	mem    memTable
	qps    map[uint32]*QP
	nextQP uint32

	readyList // QPs with something to transmit
	rxBatch   [][]byte
	rxNext    int // rxBatch[rxNext:rxN] still wait: a context miss stalled the pipeline
	rxN       int
	rxFrame   bth.Frame   // the frame receive checks
	star      *starServer // StaR's stateless server (Config.StarServer); nil: none

	rx *rxImpair // the receive stage (Config.LinkDelay, Netem); nil: none

	cache     *qp.Cache
	host      *recovery.HostMemory // the schemes' state in host memory (Params.Host)
	busyUntil time.Duration        // the pipeline is stalled on a context fetch or host access until then
	rxPipe    linkBucket           // the receive pipeline's service time (Config.ServiceRate); rate 0: none

	doorbell func() // wakes a sleeping poll loop when work is posted

	cnt Counters

	ahs       ahTable                // address handles (ud.go)
	neighbors map[netip.Addr][6]byte // peers' MACs the embedded fabric knows (AddNeighbor)
	ev        eventQueue             // asynchronous events (events.go)

	gsi *gsi // QP1 and the communication manager on it (gsi.go)
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
	if cfg.CC == "" {
		cfg.CC = cc.None
	}
	if cfg.CCParams.LineRate == 0 {
		cfg.CCParams.LineRate = cfg.LinkRate
	}
	ccDefault, err := cc.New(cfg.CC, cfg.CCParams)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if cfg.MaxUnackedPSNs < 0 || cfg.MaxUnackedPSNs > MaxUnackedLimit {
		return nil, ErrMaxUnacked
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
	case cfg.ServiceRate > maxLinkRate:
		return nil, fmt.Errorf("dataplane: service rate %d bit/s is above %g", cfg.ServiceRate, float64(maxLinkRate))
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
	switch {
	case cfg.PFCPriority < 0 || cfg.PFCPriority > 7:
		return nil, fmt.Errorf("dataplane: PFC priority %d is not in [0, 7]", cfg.PFCPriority)
	case cfg.PFCRate > maxLinkRate:
		return nil, fmt.Errorf("dataplane: PFC rate %d bit/s is above %g", cfg.PFCRate, float64(maxLinkRate))
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
		cache:     qp.NewCache(cfg.SRAMBytes, shared, cfg.FetchPenalty),
		cfg:       cfg,
		txPath:    txPath{port: port, link: newLinkBucket(cfg.LinkRate, cfg.LinkBurst), txPipe: newLinkBucket(cfg.ServiceRate, 0), pause: newPFCPause(&cfg)},
		rxPipe:    newLinkBucket(cfg.ServiceRate, 0),
		scheme:    scheme,
		host:      host,
		schemes:   map[string]recovery.Scheme{},
		cc:        map[string]cc.Algorithm{cfg.CC: ccDefault},
		wheel:     timer.NewWheel(0),
		ipv6:      cfg.Addr.Is6() && !cfg.Addr.Is4In6(),
		pds:       map[uint32]int{},
		qps:       map[uint32]*QP{},
		nextQP:    0x10, // QPN 0 and 1 are the special QPs of IBA §10.2.5
		rxBatch:   make([][]byte, cfg.RxBatch),
		readyList: readyList{ready: make([]*QP, 0, 64)},
	}
	e.clock, e.counters = &e.now, &e.cnt
	e.ev.ring = qp.NewRing[Event](EventQueueLen)
	e.star = newStarServer(e) // nil without Config.StarServer
	if cfg.LinkDelay > 0 || cfg.Netem.Active() {
		e.rx = newRxImpair(port, cfg.LinkDelay, cfg.Netem, cfg.LinkDelaySlots, cfg.RxBatch, &e.now)
		e.port = e.rx
	}
	e.gsi = newGSI(e)
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
	c.RxPrioPauseDurationNs = e.pause.held(e.now)
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
	if e.gsi != nil {
		cm := e.gsi.cm.Counters()
		copy(c.CMTxMsgs[:], cm.TxMsgs[:])
		copy(c.CMTxRetries[:], cm.TxRetries[:])
		copy(c.CMRxMsgs[:], cm.RxMsgs[:])
		copy(c.CMRxDuplicates[:], cm.RxDuplicates[:])
		c.CMRxDropped, c.CMTxErrors = cmDropped(&cm), cm.TxErrors
	}
	return c
}

// schemeStats adds the counters of every scheme the NIC runs.
func (e *Engine) schemeStats(c *Counters) {
	add := func(s recovery.Scheme) {
		c.SchemeCounters = recovery.AddCounters(c.SchemeCounters, s.Counters())
		c.Pools = append(c.Pools, s.Pools()...)
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
	// A stateless server's answers that wait go before new frames make
	// more: the port's egress queue drains whenever it can.
	did := e.egress.n > 0 && e.drainEgress() > 0
	if e.rxNext < e.rxN {
		did = did || e.rxPipe.open(e.now)
	} else {
		e.rxN, e.rxNext = e.port.Receive(e.rxBatch), 0
		did = did || e.rxN > 0
	}
	// Frames after a context miss wait until the fetch is done: the
	// pipeline is serial, as in hardware. With a service time, each
	// frame also waits for the one before it to leave the pipeline.
	for e.rxNext < e.rxN && !e.stalled() && e.rxPipe.open(e.now) {
		f := e.rxBatch[e.rxNext]
		e.receive(f)
		e.rxNext++
		e.rxService(len(f))
	}
	if !e.stalled() && e.wheel.Advance(e.now) > 0 {
		did = true
	}
	if e.gsi != nil && e.gsi.poll(e.now) { // the CM: MADs received, its timers, its events
		did = true
	}
	e.hostStall()
	if !e.stalled() && e.transmit() > 0 {
		did = true
	}
	e.port.Flush()
	return did
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
	if due, waiting := e.rxWait(); waiting && (!ok || due < t) {
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
	if e.gsi != nil {
		if t, armed := e.gsi.cm.NextDeadline(); armed && (!ok || t < d) {
			d, ok = t, true
		}
	}
	if t, paced := e.pacedUntil(); paced && (!ok || t < d) {
		d, ok = t, true
	}
	if t, held := e.delayedUntil(); held && (!ok || t < d) {
		d, ok = t, true
	}
	if t, waiting := e.rxWait(); waiting && (!ok || t < d) {
		d, ok = t, true
	}
	return d, ok
}

// pacedUntil is when the link's bucket opens and a PFC pause ends, if
// packets wait on them.
func (e *Engine) pacedUntil() (time.Duration, bool) {
	if e.readyLen() == 0 && e.egress.n == 0 || e.wireOpen(e.now) {
		return 0, false
	}
	return e.wireOpenAt(), true
}

// receive checks one frame in the fixed order of rxe_recv.c and hands it on.
func (e *Engine) receive(frame []byte) {
	if e.capture != nil {
		e.capture(CaptureRX, e.now, frame)
	}
	if isMACControl(frame) { // PFC or PAUSE from the link partner (pfc.go)
		e.macControl(frame)
		return
	}
	f := &e.rxFrame // not on the stack: the transport is an interface
	var err error
	if *f, err = bth.ParseFrame(frame); err != nil {
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
	op := pkt.Opcode()
	if op == bth.CNP { // to the reaction point of the QP it names (docs/cc.md)
		if q := e.qps[hdr.DestQPN()]; q != nil && f.SrcAddr() == q.av.DGID && q.tr.cnp() {
			e.cnt.RPCNPHandled++
		} else {
			e.cnt.RPCNPIgnored++
		}
		return
	}
	// A stateless server's packets name no QP: they are served before
	// the QP lookup and the context cache (star.go). Without StarServer
	// they go on, and a QP drops them as rcvd_bad_opcode.
	if e.star != nil && starForServer(pkt) {
		e.star.receive(f)
		return
	}
	q := e.qps[hdr.DestQPN()]
	if q == nil {
		if hdr.DestQPN() == GSIQPN && e.gsi != nil { // QP1, the NIC's own (gsi.go)
			e.gsi.receive(f)
			return
		}
		e.cnt.RcvdUnknownQPN++
		return
	}
	e.touch(q, true)
	// rxe check_addr: a connected QP takes frames only from its peer, to
	// us; a datagram QP (ud.go) from anyone, to us.
	if f.DstAddr() != e.cfg.Addr || !q.qpType.IsUD() && f.SrcAddr() != q.av.DGID {
		e.cnt.RcvdBadAddr++
		q.tr.misaddressed(op)
		return
	}
	if f.TrafficClass()&ecnMask == ecnCE { // the path was congested (RFC 3168)
		e.cnt.NPECNMarkedRoCEPackets++
		q.tr.marked()
	}
	q.tr.receive(pkt)
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
	// A stateless server's answers that wait go first: the port's egress
	// queue is in front of every QP.
	total := e.drainEgress()
	if e.egress.n > 0 {
		return total
	}
	if e.readyLen() > 0 && !e.linkOpen() {
		return total // nobody loses their place in the ready list
	}
	for e.readyLen() > 0 && !e.txStall && !e.stalled() {
		// One pass over the QPs that are ready now; QPs that still have
		// work go to the back, after QPs scheduled during the pass.
		n := e.readyLen()
		for i := 0; i < n && !e.txStall && !e.stalled(); i++ {
			q := e.popReady()
			budget := e.turnBudget(q)
			sent, more := q.tr.serve(budget)
			e.hostStall()
			total += sent
			if more {
				e.endTurn(q, budget, sent)
			}
		}
	}
	return total
}

// setState is the one place QP state changes (STYLE: wireguard-go
// changeState). Entering a state does what the state means: the NIC's
// part here (RTR fixes the frame header every packet of the connection
// carries), the rest the QP's transport's (transport.enter).
func (e *Engine) setState(q *QP, to qp.State) {
	from := q.state
	q.state = to
	if to == qp.RTR && from == qp.Init {
		q.hdr = bth.FrameHeader{
			SrcMAC: e.cfg.MAC, DstMAC: q.av.DMAC,
			Src: e.cfg.Addr, Dst: q.av.DGID,
			SrcPort: udpSourcePort(q.qpn, q.destQPN),
			TOS:     q.av.TrafficClass, TTL: q.av.HopLimit, FlowLabel: q.av.FlowLabel,
		}
	}
	q.tr.enter(from, to)
}

// onNIC is what every transport holds: its NIC and its QP.
type onNIC struct {
	e *Engine
	q *QP
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

// rxService ends a received frame of n bytes: with a service time it
// occupies the receive pipeline for its slot, and a stall it charged (a
// scheme's host access) starts when the slot ends; without (the bucket
// takes nothing and its free stays 0), the stall starts now, as
// hostStall's.
func (e *Engine) rxService(n int) {
	e.rxPipe.take(e.now, n)
	if d := e.host.Take(); d > 0 {
		e.busyUntil = max(e.busyUntil, e.now, e.rxPipe.free) + d
	}
}

// rxWait is when the receive pipeline takes its next frame, if frames
// wait for it (Config.ServiceRate).
func (e *Engine) rxWait() (time.Duration, bool) {
	if e.rxNext >= e.rxN || e.rxPipe.open(e.now) {
		return 0, false
	}
	return e.rxPipe.openAt(), true
}

// touch is every access of a QP's on-chip context: a miss fetches it
// from host memory and stalls the pipeline for the fetch penalty.
func (e *Engine) touch(q *QP, write bool) {
	if stall := e.cache.Access(&q.cache, write); stall > 0 {
		e.busyUntil = max(e.busyUntil, e.now) + stall
	}
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
		if !cq.overflow {
			e.cqOverrun(cq) // CQ_ERR (events.go)
		}
		cq.overflow = true
		e.cnt.CQOverflow++
		return
	}
	*slot = wc
	if cq.notify != nil {
		cq.notify(slot)
	}
}
