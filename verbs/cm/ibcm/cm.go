package ibcm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/softnic/softnic/dataplane/timer"
)

// Peer is where a CM MAD comes from or goes to: the peer port's address
// (its RoCEv2 GID as an IP address) and its CM QP, QP1 unless redirected.
type Peer struct {
	Addr netip.Addr
	QPN  uint32
}

// Transport sends one CM MAD. mad is exactly 256 bytes and only valid
// during the call. An error counts as a lost MAD (tx_errors): the
// retransmission timers recover as from loss on the wire.
type Transport interface {
	SendMAD(to Peer, mad []byte) error
}

// State is a connection's CM state (enum ib_cm_state).
type State uint8

const (
	StateIdle State = iota
	StateListen
	StateREQSent
	StateREQRcvd
	StateMRAREQSent
	StateMRAREQRcvd
	StateREPSent
	StateREPRcvd
	StateMRAREPSent
	StateMRAREPRcvd
	StateEstablished
	StateDREQSent
	StateDREQRcvd
	StateTimewait
	StateSIDRREQSent
	StateSIDRREQRcvd
)

var stateNames = [...]string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD",
	"REP_SENT", "REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD",
	"TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// EventType is a CM event (enum ib_cm_event_type).
type EventType uint8

const (
	EventREQError        EventType = iota // IB_CM_REQ_ERROR: REQ retries exhausted (rdma_cm: UNREACHABLE, -ETIMEDOUT)
	EventREQReceived                      // IB_CM_REQ_RECEIVED: a new passive connection (rdma_cm: CONNECT_REQUEST)
	EventREPError                         // IB_CM_REP_ERROR: REP retries exhausted without RTU (rdma_cm: UNREACHABLE)
	EventREPReceived                      // IB_CM_REP_RECEIVED: the active side may move its QP to RTR/RTS, then SendRTU (rdma_cm: CONNECT_RESPONSE / ESTABLISHED)
	EventRTUReceived                      // IB_CM_RTU_RECEIVED: passive side established (rdma_cm: ESTABLISHED)
	EventUserEstablished                  // IB_CM_USER_ESTABLISHED: passive side established by Established (data before RTU)
	EventDREQError                        // IB_CM_DREQ_ERROR: DREQ retries exhausted (rdma_cm: DISCONNECTED)
	EventDREQReceived                     // IB_CM_DREQ_RECEIVED: the peer disconnects; the QP was moved to ERROR and DREP sent (rdma_cm: DISCONNECTED)
	EventDREPReceived                     // IB_CM_DREP_RECEIVED: our disconnect completed (rdma_cm: DISCONNECTED)
	EventTimewaitExit                     // IB_CM_TIMEWAIT_EXIT: the connection's comm ID is free (rdma_cm: TIMEWAIT_EXIT)
	EventMRAReceived                      // IB_CM_MRA_RECEIVED: the peer needs more time
	EventREJReceived                      // IB_CM_REJ_RECEIVED (rdma_cm: REJECTED, or UNREACHABLE for a timeout)
	EventSIDRREQError                     // IB_CM_SIDR_REQ_ERROR: SIDR_REQ retries exhausted
	EventSIDRREQReceived                  // IB_CM_SIDR_REQ_RECEIVED: answer with SIDRReply
	EventSIDRREPReceived                  // IB_CM_SIDR_REP_RECEIVED
)

var eventNames = [...]string{"REQ_ERROR", "REQ_RECEIVED", "REP_ERROR", "REP_RECEIVED", "RTU_RECEIVED",
	"USER_ESTABLISHED", "DREQ_ERROR", "DREQ_RECEIVED", "DREP_RECEIVED", "TIMEWAIT_EXIT", "MRA_RECEIVED",
	"REJ_RECEIVED", "SIDR_REQ_ERROR", "SIDR_REQ_RECEIVED", "SIDR_REP_RECEIVED"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one CM event for the user, read with PollEvent. ID is the local
// comm ID of the connection (for SIDR events, the SIDR request ID).
type Event struct {
	Type      EventType
	ID        uint32
	Peer      Peer
	ServiceID uint64
	// Exactly one of these is set, by Type: the received REQ (with the
	// listen's service ID in ServiceID), REP, REJ, MRA, SIDR_REQ, SIDR_REP.
	REQ     *REQ
	REP     *REP
	REJ     *REJ
	MRA     *MRA
	SIDRREQ *SIDRREQ
	SIDRREP *SIDRREP
	// PrivateData of an RTU, DREQ or DREP (the whole field).
	PrivateData []byte
}

// Counters are the CM's statistics. The per-attribute arrays are Linux's
// cm sysfs groups (cm_tx_msgs, cm_tx_retries, cm_rx_msgs, cm_rx_duplicates),
// indexed by attribute ID - AttrREQ; the rest are the drop reasons, each
// received MAD that is not acted on counted under exactly one.
type Counters struct {
	TxMsgs       [11]uint64 // cm_tx_msgs/<attr>: first transmissions
	TxRetries    [11]uint64 // cm_tx_retries/<attr>: retransmissions on timeout
	RxMsgs       [11]uint64 // cm_rx_msgs/<attr>: parsed MADs by attribute
	RxDuplicates [11]uint64 // cm_rx_duplicates/<attr>: duplicates answered or ignored

	RxBadLength       uint64 // rx_bad_length: MAD not exactly 256 bytes
	RxBadBaseVersion  uint64 // rx_bad_base_version
	RxBadClass        uint64 // rx_bad_mgmt_class: not the CM class
	RxBadClassVersion uint64 // rx_bad_class_version
	RxBadMethod       uint64 // rx_bad_method: not Send
	RxUnknownAttr     uint64 // rx_unknown_attr: not a CM attribute
	RxUnsupported     uint64 // rx_unsupported: LAP/APR (not implemented)
	RxUnmatched       uint64 // rx_unmatched: no connection for the comm IDs
	RxBadState        uint64 // rx_bad_state: the connection's state does not take it
	TxErrors          uint64 // tx_errors: Transport.SendMAD failed
	RejInvalidService uint64 // rej_invalid_service_id: REQs for a service nobody listens on
	StaleDREQ         uint64 // stale_dreq: DREQs for no connection, answered with DREP
	RejStaleConn      uint64 // rej_stale_conn: new REQs from the QP of a live connection
}

// AttrIndex is the index of a CM attribute in the Counters arrays.
func AttrIndex(attr uint16) int { return int(attr - AttrREQ) }

// Config configures a CM.
type Config struct {
	// CAGUID is the local CA GUID sent in REQ and REP and as the ARI of a
	// timeout REJ.
	CAGUID uint64
	// PacketLifeTime is the path's packet lifetime as an IBA time exponent
	// (4.096 us * 2^n). The transit time added to every response timeout
	// is twice that. 0 means 16, rdma_cm's CMA_IBOE_PACKET_LIFETIME.
	PacketLifeTime uint8
	// Seed makes comm IDs and transaction IDs reproducible.
	Seed uint64
	// QPError is called when a connection's QP must go to the ERROR state
	// so that its work requests flush (IBV_WC_WR_FLUSH_ERR): by Disconnect
	// before the DREQ goes out and when a DREQ arrives, as rdma_cm does. It
	// runs synchronously and must not call back into the CM.
	QPError func(id uint32, qpn uint32)
}

// IBATime is an IBA time exponent as a duration: 4.096 us * 2^exp.
func IBATime(exp uint8) time.Duration {
	if exp > 31 {
		exp = 31
	}
	return time.Duration(4096) << exp
}

// conn is one connection, keyed by its local comm ID and, once the peer's
// comm ID is known on the passive side, by (remote comm ID, remote CA
// GUID, peer address).
type conn struct {
	cm         *CM
	id         uint32
	state      State
	active     bool
	peer       Peer
	remoteID   uint32
	remoteGUID uint64
	keyed      bool // in cm.remote
	serviceID  uint64
	localQPN   uint32
	remoteQPN  uint32
	tid        uint64 // transaction ID of the REQ/REP/RTU exchange
	dreqTID    uint64
	// Response timeout: how long the peer may take to answer our
	// outstanding message (REQ, REP or DREQ), transit included; MRA
	// extends it.
	timeout     time.Duration
	peerTimeout time.Duration // the peer's CM response time, transit included
	maxRetries  int
	retriesLeft int
	timewait    time.Duration
	outAttr     uint16 // attribute of out, the message being retried
	out         [MADSize]byte
	resp        [MADSize]byte // the last MRA, RTU or DREP, resent on duplicates
	respValid   bool
	timer       timer.Timer
}

type remoteKey struct {
	commID uint32
	guid   uint64
	addr   netip.Addr
}

// qpnKey names the peer's QP of a passive connection, to find a stale
// connection when a new REQ comes from the same QP (cm_insert_remote_qpn).
type qpnKey struct {
	qpn  uint32
	guid uint64
	addr netip.Addr
}

type listener struct {
	serviceID, mask uint64
}

// CM is one port's communication manager.
type CM struct {
	cfg       Config
	tr        Transport
	wheel     *timer.Wheel
	conns     map[uint32]*conn
	remote    map[remoteKey]*conn
	remoteQPN map[qpnKey]*conn
	listeners []listener
	sidr      map[uint32]*sidrReq
	sidrIn    map[uint32]*sidrIn
	sidrInKey map[sidrKey]uint32
	sidrDone  sidrAnswered
	nextID    uint32
	tidHi     uint64
	tidLo     uint32
	events    []Event
	evHead    int
	buf       [MADSize]byte
	ctr       Counters
}

// Errors of the CM's methods.
var (
	ErrUnknownConn = errors.New("ibcm: no such connection")
	ErrState       = errors.New("ibcm: connection is not in a state for this")
	ErrListening   = errors.New("ibcm: service ID already listened on")
	ErrNotListen   = errors.New("ibcm: service ID not listened on")
	ErrNoIDs       = errors.New("ibcm: no free comm ID")
)

// New returns a CM that sends through tr.
func New(cfg Config, tr Transport) *CM {
	if cfg.PacketLifeTime == 0 {
		cfg.PacketLifeTime = CMAIBoEPacketLifeTime
	}
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	return &CM{cfg: cfg, tr: tr, wheel: timer.NewWheel(0),
		conns: map[uint32]*conn{}, remote: map[remoteKey]*conn{}, remoteQPN: map[qpnKey]*conn{},
		sidr:   map[uint32]*sidrReq{},
		nextID: r.Uint32(), tidHi: uint64(r.Uint32()) << 32}
}

// Counters returns a copy of the statistics.
func (c *CM) Counters() Counters { return c.ctr }

// transit is the round trip added to every response timeout.
func (c *CM) transit() time.Duration { return 2 * IBATime(c.cfg.PacketLifeTime) }

// Tick fires the retransmission and timewait timers due by now.
func (c *CM) Tick(now time.Duration) { c.wheel.Advance(now) }

// NextDeadline is the earliest armed timer, for a caller that sleeps or a
// simulator that jumps time.
func (c *CM) NextDeadline() (time.Duration, bool) { return c.wheel.NextDeadline() }

// PollEvent returns the oldest undelivered event.
func (c *CM) PollEvent() (Event, bool) {
	if c.evHead == len(c.events) {
		c.events, c.evHead = c.events[:0], 0
		return Event{}, false
	}
	e := c.events[c.evHead]
	c.events[c.evHead] = Event{}
	c.evHead++
	return e, true
}

func (c *CM) emit(e Event) { c.events = append(c.events, e) }

// State is a connection's state, StateIdle for an unknown ID.
func (c *CM) State(id uint32) State {
	if cn := c.conns[id]; cn != nil {
		return cn.state
	}
	if c.sidr[id] != nil {
		return StateSIDRREQSent
	}
	if c.sidrIn[id] != nil {
		return StateSIDRREQRcvd
	}
	return StateIdle
}

// ConnInfo describes one connection (Info).
type ConnInfo struct {
	ID           uint32 // local comm ID
	State        State
	Active       bool // this side sent the REQ
	Peer         Peer
	ServiceID    uint64
	LocalQPN     uint32
	RemoteQPN    uint32 // 0 until the REQ (passive) or REP (active) gave it
	RemoteCommID uint32 // 0 until known
	RemoteCAGUID uint64
}

// Info describes the connection id, for a daemon that maps its QPs to CM
// connections (Established when data arrives, QPError's ID).
func (c *CM) Info(id uint32) (ConnInfo, bool) {
	cn := c.conns[id]
	if cn == nil {
		return ConnInfo{}, false
	}
	return ConnInfo{ID: cn.id, State: cn.state, Active: cn.active, Peer: cn.peer, ServiceID: cn.serviceID,
		LocalQPN: cn.localQPN, RemoteQPN: cn.remoteQPN, RemoteCommID: cn.remoteID, RemoteCAGUID: cn.remoteGUID}, true
}

// Conns is the number of connections the CM holds, timewait included.
func (c *CM) Conns() int { return len(c.conns) }

// Listen makes REQs (and SIDR_REQs) for serviceID, under mask (0 means
// all 64 bits), arrive as EventREQReceived instead of being rejected.
func (c *CM) Listen(serviceID, mask uint64) error {
	if mask == 0 {
		mask = ^uint64(0)
	}
	for _, l := range c.listeners {
		if l.serviceID&l.mask&mask == serviceID&l.mask&mask {
			return fmt.Errorf("%w: 0x%016x", ErrListening, serviceID)
		}
	}
	c.listeners = append(c.listeners, listener{serviceID & mask, mask})
	return nil
}

// Unlisten stops listening on serviceID.
func (c *CM) Unlisten(serviceID uint64) error {
	for i, l := range c.listeners {
		if l.serviceID == serviceID&l.mask {
			c.listeners = append(c.listeners[:i], c.listeners[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: 0x%016x", ErrNotListen, serviceID)
}

func (c *CM) listening(serviceID uint64) (uint64, bool) {
	for _, l := range c.listeners {
		if serviceID&l.mask == l.serviceID {
			return l.serviceID, true
		}
	}
	return 0, false
}

func (c *CM) allocID() (uint32, error) {
	for range 1 << 20 {
		c.nextID++
		if c.nextID == 0 {
			continue
		}
		if c.conns[c.nextID] == nil && c.sidr[c.nextID] == nil && c.sidrIn[c.nextID] == nil {
			return c.nextID, nil
		}
	}
	return 0, ErrNoIDs
}

func (c *CM) newTID() uint64 {
	c.tidLo++
	return c.tidHi | uint64(c.tidLo)
}

func (c *CM) newConn(id uint32, peer Peer) *conn {
	cn := &conn{cm: c, id: id, peer: peer}
	cn.timer.Init(cn.fire)
	c.conns[id] = cn
	return cn
}

// send marshals m into the scratch buffer and sends it; keep, when
// non-nil, receives a copy to resend later.
func (c *CM) send(to Peer, tid uint64, m Message, keep *[MADSize]byte) error {
	if err := Marshal(c.buf[:], tid, m); err != nil {
		return err
	}
	if keep != nil {
		*keep = c.buf
	}
	c.ctr.TxMsgs[AttrIndex(m.AttrID())]++
	c.transmit(to, c.buf[:])
	return nil
}

func (c *CM) transmit(to Peer, mad []byte) {
	if err := c.tr.SendMAD(to, mad); err != nil {
		c.ctr.TxErrors++
	}
}

// arm (re)starts the conn's retransmission of its out message.
func (cn *conn) arm(now time.Duration, attr uint16, retries int) {
	cn.outAttr = attr
	cn.retriesLeft = retries
	cn.cm.wheel.Schedule(&cn.timer, now+cn.timeout)
}

func (cn *conn) stop() { cn.cm.wheel.Stop(&cn.timer) }

// resend retransmits the out message and re-arms the timer.
func (cn *conn) resend(now time.Duration) {
	c := cn.cm
	cn.retriesLeft--
	c.ctr.TxRetries[AttrIndex(cn.outAttr)]++
	c.transmit(cn.peer, cn.out[:])
	c.wheel.Schedule(&cn.timer, now+cn.timeout)
}

func (cn *conn) resendResp() {
	if cn.respValid {
		cn.cm.transmit(cn.peer, cn.resp[:])
	}
}

func (c *CM) remove(cn *conn) {
	cn.stop()
	delete(c.conns, cn.id)
	if cn.keyed {
		// A newer connection may hold the QP key (the old one was in
		// timewait when the new REQ came): remove only our own entries.
		if k := (remoteKey{cn.remoteID, cn.remoteGUID, cn.peer.Addr}); c.remote[k] == cn {
			delete(c.remote, k)
		}
		if k := (qpnKey{cn.remoteQPN, cn.remoteGUID, cn.peer.Addr}); c.remoteQPN[k] == cn {
			delete(c.remoteQPN, k)
		}
	}
	cn.state = StateIdle
}

func (cn *conn) enterTimewait(now time.Duration) {
	cn.state = StateTimewait
	cn.cm.wheel.Schedule(&cn.timer, now+cn.timewait)
}

// fire is the conn's timer: a retransmission timeout or the end of
// timewait.
func (cn *conn) fire(now time.Duration) {
	c := cn.cm
	switch cn.state {
	case StateREQSent, StateMRAREQRcvd:
		if cn.retriesLeft > 0 {
			cn.resend(now)
			return
		}
		// As ib_destroy_cm_id does for a REQ that timed out: tell the
		// passive side, which may hold state for us, with a timeout REJ
		// carrying our CA GUID.
		c.sendREJ(cn, MsgOther, RejTimeout, guidARI(c.cfg.CAGUID), nil)
		c.remove(cn)
		c.emit(Event{Type: EventREQError, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID})
	case StateREPSent, StateMRAREPRcvd:
		if cn.retriesLeft > 0 {
			cn.resend(now)
			return
		}
		c.sendREJ(cn, MsgOther, RejTimeout, guidARI(c.cfg.CAGUID), nil)
		cn.enterTimewait(now)
		c.emit(Event{Type: EventREPError, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID})
	case StateDREQSent:
		if cn.retriesLeft > 0 {
			cn.resend(now)
			return
		}
		cn.enterTimewait(now)
		c.emit(Event{Type: EventDREQError, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID})
	case StateTimewait:
		c.remove(cn)
		c.emit(Event{Type: EventTimewaitExit, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID})
	}
}

// REJ reasons (enum ib_cm_rej_reason).
const (
	RejNoQP                    = 1
	RejNoEEC                   = 2
	RejNoResources             = 3
	RejTimeout                 = 4
	RejUnsupported             = 5
	RejInvalidCommID           = 6
	RejInvalidCommInstance     = 7
	RejInvalidServiceID        = 8
	RejInvalidTransportType    = 9
	RejStaleConn               = 10
	RejRDCNotExist             = 11
	RejInvalidGID              = 12
	RejInvalidLID              = 13
	RejInvalidSL               = 14
	RejInvalidTrafficClass     = 15
	RejInvalidHopLimit         = 16
	RejInvalidPacketRate       = 17
	RejPortCMRedirect          = 24
	RejPortRedirect            = 25
	RejInvalidMTU              = 26
	RejInsufficientRespRes     = 27
	RejConsumerDefined         = 28
	RejInvalidRNRRetry         = 29
	RejDuplicateLocalCommID    = 30
	RejInvalidClassVersion     = 31
	RejInvalidFlowLabel        = 32
	RejVendorOptionUnsupported = 35
)

func guidARI(guid uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], guid)
	return b[:]
}

func (c *CM) sendREJ(cn *conn, msg uint8, reason uint16, ari, priv []byte) {
	rej := REJ{LocalCommID: cn.id, RemoteCommID: cn.remoteID, MessageRejected: msg, Reason: reason,
		ARILength: uint8(min(len(ari), REJARILength))}
	copy(rej.ARI[:], ari)
	copy(rej.PrivateData[:], priv)
	_ = c.send(cn.peer, cn.tid, &rej, nil)
}

// ConnectParams is what the active side puts in its REQ (ib_cm_req_param
// plus the path). Timeouts are IBA exponents (4.096 us * 2^n); rdma_cm
// uses 20 for both CM response timeouts and 15 CM retries.
type ConnectParams struct {
	Peer                    Peer // the passive side's CM: its address and QP1
	ServiceID               uint64
	QPN                     uint32
	StartingPSN             uint32
	QKey                    uint32
	TransportServiceType    uint8 // TransportRC or TransportUC
	ResponderResources      uint8
	InitiatorDepth          uint8
	RemoteCMResponseTimeout uint8
	LocalCMResponseTimeout  uint8
	MaxCMRetries            uint8 // 4 bits
	RetryCount              uint8
	RNRRetryCount           uint8
	FlowControl             bool
	SRQ                     bool
	PKey                    uint16 // 0 means 0xFFFF, the default P_Key
	PathMTU                 uint8  // IBA MTU enum: 1=256 ... 5=4096
	Primary                 Path
	PrivateData             []byte // at most 92 bytes (rdma_cm: its 36-byte header first)
}

// Connect sends a REQ and returns the new connection's local comm ID. The
// REQ is retried every 4.096 us * 2^RemoteCMResponseTimeout plus transit,
// MaxCMRetries times; then EventREQError.
func (c *CM) Connect(now time.Duration, p ConnectParams) (uint32, error) {
	if len(p.PrivateData) > REQPrivateDataSize {
		return 0, fmt.Errorf("%w: %d bytes, REQ carries %d", ErrPrivateData, len(p.PrivateData), REQPrivateDataSize)
	}
	if p.TransportServiceType > TransportUC {
		return 0, fmt.Errorf("ibcm: transport service type %d not supported (RC and UC are)", p.TransportServiceType)
	}
	id, err := c.allocID()
	if err != nil {
		return 0, err
	}
	pkey := p.PKey
	if pkey == 0 {
		pkey = 0xFFFF
	}
	req := REQ{LocalCommID: id, ServiceID: p.ServiceID, LocalCAGUID: c.cfg.CAGUID, LocalQKey: p.QKey,
		LocalQPN: p.QPN, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: p.RemoteCMResponseTimeout, TransportServiceType: p.TransportServiceType,
		EndToEndFlowControl: p.FlowControl, StartingPSN: p.StartingPSN,
		LocalCMResponseTimeout: p.LocalCMResponseTimeout, RetryCount: p.RetryCount, PKey: pkey,
		PathMTU: p.PathMTU, RNRRetryCount: p.RNRRetryCount, MaxCMRetries: p.MaxCMRetries, SRQ: p.SRQ,
		Primary: p.Primary}
	copy(req.PrivateData[:], p.PrivateData)
	tid := c.newTID()
	cn := &conn{cm: c, id: id, peer: p.Peer, active: true, serviceID: p.ServiceID, localQPN: p.QPN, tid: tid}
	if err := Marshal(cn.out[:], tid, &req); err != nil {
		return 0, err
	}
	cn.timer.Init(cn.fire)
	c.conns[id] = cn
	cn.state = StateREQSent
	cn.timeout = IBATime(p.RemoteCMResponseTimeout) + c.transit()
	cn.peerTimeout = cn.timeout
	cn.maxRetries = int(p.MaxCMRetries)
	cn.timewait = IBATime(p.Primary.LocalACKTimeout) + c.transit()
	c.ctr.TxMsgs[AttrIndex(AttrREQ)]++
	c.transmit(cn.peer, cn.out[:])
	cn.arm(now, AttrREQ, cn.maxRetries)
	return id, nil
}

// AcceptParams is what the passive side puts in its REP (ib_cm_rep_param).
type AcceptParams struct {
	QPN                uint32
	StartingPSN        uint32
	QKey               uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	TargetACKDelay     uint8
	FailoverAccepted   uint8
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
	PrivateData        []byte // at most 196 bytes
}

// Accept answers a received REQ (EventREQReceived) with a REP. The REP is
// retried until an RTU arrives (or Established is called) every 4.096 us *
// 2^(the REQ's local CM response timeout) plus transit, as many times as
// the REQ's max CM retries; then EventREPError.
func (c *CM) Accept(now time.Duration, id uint32, p AcceptParams) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if cn.state != StateREQRcvd && cn.state != StateMRAREQSent {
		return fmt.Errorf("%w: Accept in %v", ErrState, cn.state)
	}
	if len(p.PrivateData) > REPPrivateDataSize {
		return fmt.Errorf("%w: %d bytes, REP carries %d", ErrPrivateData, len(p.PrivateData), REPPrivateDataSize)
	}
	rep := REP{LocalCommID: cn.id, RemoteCommID: cn.remoteID, LocalQKey: p.QKey, LocalQPN: p.QPN,
		StartingPSN: p.StartingPSN, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		TargetACKDelay: p.TargetACKDelay, FailoverAccepted: p.FailoverAccepted,
		EndToEndFlowControl: p.FlowControl, RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ,
		LocalCAGUID: c.cfg.CAGUID}
	copy(rep.PrivateData[:], p.PrivateData)
	if err := Marshal(cn.out[:], cn.tid, &rep); err != nil {
		return err
	}
	cn.localQPN = p.QPN
	cn.state = StateREPSent
	cn.timeout = cn.peerTimeout
	c.ctr.TxMsgs[AttrIndex(AttrREP)]++
	c.transmit(cn.peer, cn.out[:])
	cn.arm(now, AttrREP, cn.maxRetries)
	return nil
}

// Reject answers a received REQ (passive side) or REP (active side) with a
// REJ and forgets the connection.
func (c *CM) Reject(now time.Duration, id uint32, reason uint16, ari, priv []byte) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if len(ari) > REJARILength || len(priv) > REJPrivateDataSize {
		return fmt.Errorf("%w: REJ ARI %d bytes (max %d), private data %d (max %d)", ErrPrivateData,
			len(ari), REJARILength, len(priv), REJPrivateDataSize)
	}
	var msg uint8
	switch cn.state {
	case StateREQRcvd, StateMRAREQSent:
		msg = MsgREQ
	case StateREPRcvd, StateMRAREPSent:
		msg = MsgREP
	default:
		return fmt.Errorf("%w: Reject in %v", ErrState, cn.state)
	}
	c.sendREJ(cn, msg, reason, ari, priv)
	c.remove(cn)
	return nil
}

// MRAFlagDelay in SendMRA's serviceTimeout sends the MRA only when a
// duplicate of the message arrives (IB_CM_MRA_FLAG_DELAY; what rdma_cm
// does while a listener has not yet accepted).
const MRAFlagDelay = 0x80

// SendMRA tells the peer that the received REQ (passive side) or REP
// (active side) needs up to 4.096 us * 2^serviceTimeout to answer; the MRA
// is resent on each duplicate of that message. With MRAFlagDelay set in
// serviceTimeout it is sent only then.
func (c *CM) SendMRA(now time.Duration, id uint32, serviceTimeout uint8, priv []byte) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if len(priv) > MRAPrivateDataSize {
		return fmt.Errorf("%w: %d bytes, MRA carries %d", ErrPrivateData, len(priv), MRAPrivateDataSize)
	}
	delay := serviceTimeout&MRAFlagDelay != 0
	mra := MRA{LocalCommID: cn.id, RemoteCommID: cn.remoteID, ServiceTimeout: serviceTimeout &^ MRAFlagDelay}
	switch cn.state {
	case StateREQRcvd:
		mra.MessageMRAed, cn.state = MsgREQ, StateMRAREQSent
	case StateREPRcvd:
		mra.MessageMRAed, cn.state = MsgREP, StateMRAREPSent
	default:
		return fmt.Errorf("%w: MRA in %v", ErrState, cn.state)
	}
	copy(mra.PrivateData[:], priv)
	if delay {
		if err := Marshal(cn.resp[:], cn.tid, &mra); err != nil {
			return err
		}
	} else if err := c.send(cn.peer, cn.tid, &mra, &cn.resp); err != nil {
		return err
	}
	cn.respValid = true
	return nil
}

// SendRTU completes the active side after EventREPReceived, once the QP is
// in RTS: the RTU goes out (and again on each duplicate REP) and the
// connection is established.
func (c *CM) SendRTU(now time.Duration, id uint32, priv []byte) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if cn.state != StateREPRcvd && cn.state != StateMRAREPSent {
		return fmt.Errorf("%w: RTU in %v", ErrState, cn.state)
	}
	if len(priv) > RTUPrivateDataSize {
		return fmt.Errorf("%w: %d bytes, RTU carries %d", ErrPrivateData, len(priv), RTUPrivateDataSize)
	}
	rtu := RTU{LocalCommID: cn.id, RemoteCommID: cn.remoteID}
	copy(rtu.PrivateData[:], priv)
	if err := c.send(cn.peer, cn.tid, &rtu, &cn.resp); err != nil {
		return err
	}
	cn.respValid = true
	cn.state = StateEstablished
	return nil
}

// Established is ib_cm_notify(IB_EVENT_COMM_EST): a packet arrived on the
// passive side's QP before the RTU, so the connection is established
// (EventUserEstablished) and the REP is no longer retried.
func (c *CM) Established(now time.Duration, id uint32) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	switch cn.state {
	case StateREPSent, StateMRAREPRcvd:
	case StateEstablished:
		return nil
	default:
		return fmt.Errorf("%w: established in %v", ErrState, cn.state)
	}
	cn.stop()
	cn.state = StateEstablished
	c.emit(Event{Type: EventUserEstablished, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID})
	return nil
}

// Disconnect moves the connection's QP to ERROR (Config.QPError) and sends
// a DREQ, retried until the DREP (EventDREPReceived) or until the retries
// run out (EventDREQError); either way the connection then waits in
// timewait (EventTimewaitExit).
func (c *CM) Disconnect(now time.Duration, id uint32, priv []byte) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	if len(priv) > DREQPrivateDataSize {
		return fmt.Errorf("%w: %d bytes, DREQ carries %d", ErrPrivateData, len(priv), DREQPrivateDataSize)
	}
	switch cn.state {
	case StateEstablished:
	case StateREPSent, StateMRAREPRcvd: // RTU not seen yet: as cm_send_dreq, the REP stops
	default:
		return fmt.Errorf("%w: DREQ in %v", ErrState, cn.state)
	}
	if c.cfg.QPError != nil {
		c.cfg.QPError(cn.id, cn.localQPN)
	}
	cn.dreqTID = c.newTID()
	dreq := DREQ{LocalCommID: cn.id, RemoteCommID: cn.remoteID, RemoteQPN: cn.remoteQPN}
	copy(dreq.PrivateData[:], priv)
	if err := Marshal(cn.out[:], cn.dreqTID, &dreq); err != nil {
		return err
	}
	cn.state = StateDREQSent
	cn.timeout = cn.peerTimeout
	c.ctr.TxMsgs[AttrIndex(AttrDREQ)]++
	c.transmit(cn.peer, cn.out[:])
	cn.arm(now, AttrDREQ, cn.maxRetries)
	return nil
}

// Destroy forgets a connection at once, sending nothing. Use Reject or
// Disconnect first to tell the peer.
func (c *CM) Destroy(id uint32) error {
	cn := c.conns[id]
	if cn == nil {
		return fmt.Errorf("%w: %d", ErrUnknownConn, id)
	}
	c.remove(cn)
	return nil
}

// HandleMAD processes one received MAD from peer. A MAD that does not parse
// or that no connection takes is counted and dropped; it never panics.
func (c *CM) HandleMAD(now time.Duration, from Peer, mad []byte) {
	h, err := ParseHeader(mad)
	if err != nil {
		switch {
		case errors.Is(err, ErrLength):
			c.ctr.RxBadLength++
		case errors.Is(err, ErrBaseVersion):
			c.ctr.RxBadBaseVersion++
		case errors.Is(err, ErrMgmtClass):
			c.ctr.RxBadClass++
		case errors.Is(err, ErrClassVersion):
			c.ctr.RxBadClassVersion++
		case errors.Is(err, ErrMethod):
			c.ctr.RxBadMethod++
		default:
			c.ctr.RxUnknownAttr++
		}
		return
	}
	c.ctr.RxMsgs[AttrIndex(h.AttrID)]++
	body := mad[HeaderSize:]
	switch h.AttrID {
	case AttrREQ:
		var m REQ
		m.getBody(body)
		c.onREQ(now, from, h.TID, &m)
	case AttrMRA:
		var m MRA
		m.getBody(body)
		c.onMRA(now, &m)
	case AttrREJ:
		var m REJ
		m.getBody(body)
		c.onREJ(now, from, &m)
	case AttrREP:
		var m REP
		m.getBody(body)
		c.onREP(now, from, &m)
	case AttrRTU:
		var m RTU
		m.getBody(body)
		c.onRTU(now, &m)
	case AttrDREQ:
		var m DREQ
		m.getBody(body)
		c.onDREQ(now, from, h.TID, &m)
	case AttrDREP:
		var m DREP
		m.getBody(body)
		c.onDREP(now, &m)
	case AttrSIDRREQ:
		var m SIDRREQ
		m.getBody(body)
		c.onSIDRREQ(now, from, h.TID, &m, mad)
	case AttrSIDRREP:
		var m SIDRREP
		m.getBody(body)
		c.onSIDRREP(now, from, &m)
	default: // LAP, APR
		c.ctr.RxUnsupported++
	}
}

func (c *CM) dup(attr uint16) { c.ctr.RxDuplicates[AttrIndex(attr)]++ }

// issueREJ rejects a REQ that made no connection (cm_issue_rej).
func (c *CM) issueREJ(to Peer, tid uint64, remoteID uint32, reason uint16) {
	rej := REJ{RemoteCommID: remoteID, MessageRejected: MsgREQ, Reason: reason}
	_ = c.send(to, tid, &rej, nil)
}

func (c *CM) onREQ(now time.Duration, from Peer, tid uint64, m *REQ) {
	key := remoteKey{m.LocalCommID, m.LocalCAGUID, from.Addr}
	if cn := c.remote[key]; cn != nil {
		c.dup(AttrREQ)
		switch cn.state {
		case StateMRAREQSent:
			cn.resendResp()
		case StateREPSent, StateMRAREPRcvd:
			// The REP was lost: resend it now rather than wait for its
			// timer (IBA 12.9.5; the timer keeps running).
			c.transmit(cn.peer, cn.out[:])
		case StateTimewait:
			rej := REJ{LocalCommID: cn.id, RemoteCommID: m.LocalCommID, MessageRejected: MsgREQ, Reason: RejStaleConn}
			_ = c.send(from, tid, &rej, nil)
		}
		return
	}
	if m.TransportServiceType > TransportUC {
		c.issueREJ(from, tid, m.LocalCommID, RejInvalidTransportType)
		return
	}
	qkey := qpnKey{m.LocalQPN, m.LocalCAGUID, from.Addr}
	if old := c.remoteQPN[qkey]; old != nil && old.state != StateTimewait {
		// A new connection from a QP we are still connected to: the peer
		// lost the old one. As cm_match_req: reject the REQ as stale and
		// disconnect the old connection.
		c.ctr.RejStaleConn++
		c.issueREJ(from, tid, m.LocalCommID, RejStaleConn)
		if old.state == StateEstablished {
			_ = c.Disconnect(now, old.id, nil)
		}
		return
	}
	sid, ok := c.listening(m.ServiceID)
	if !ok {
		c.ctr.RejInvalidService++
		c.issueREJ(from, tid, m.LocalCommID, RejInvalidServiceID)
		return
	}
	id, err := c.allocID()
	if err != nil {
		c.issueREJ(from, tid, m.LocalCommID, RejNoResources)
		return
	}
	cn := c.newConn(id, from)
	cn.state = StateREQRcvd
	cn.remoteID, cn.remoteGUID, cn.keyed = m.LocalCommID, m.LocalCAGUID, true
	c.remote[key] = cn
	c.remoteQPN[qkey] = cn
	cn.serviceID = m.ServiceID
	cn.remoteQPN = m.LocalQPN
	cn.tid = tid
	cn.peerTimeout = IBATime(m.LocalCMResponseTimeout) + c.transit()
	cn.maxRetries = int(m.MaxCMRetries)
	cn.timewait = IBATime(m.Primary.LocalACKTimeout) + c.transit()
	req := *m
	c.emit(Event{Type: EventREQReceived, ID: id, Peer: from, ServiceID: sid, REQ: &req})
}

func (c *CM) onMRA(now time.Duration, m *MRA) {
	cn := c.conns[m.RemoteCommID]
	if cn == nil {
		c.ctr.RxUnmatched++
		return
	}
	switch {
	case m.MessageMRAed == MsgREQ && cn.state == StateREQSent:
		cn.state = StateMRAREQRcvd
	case m.MessageMRAed == MsgREP && cn.state == StateREPSent && m.LocalCommID == cn.remoteID:
		cn.state = StateMRAREPRcvd
	case m.MessageMRAed == MsgREQ && cn.state == StateMRAREQRcvd,
		m.MessageMRAed == MsgREP && cn.state == StateMRAREPRcvd:
		c.dup(AttrMRA)
		return
	default:
		c.ctr.RxBadState++
		return
	}
	// The peer answers within its service timeout: wait that long (plus
	// transit) for this and any further try (ib_modify_mad).
	cn.timeout = IBATime(m.ServiceTimeout) + c.transit()
	c.wheel.Schedule(&cn.timer, now+cn.timeout)
	mra := *m
	c.emit(Event{Type: EventMRAReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID, MRA: &mra})
}

func (c *CM) onREJ(now time.Duration, from Peer, m *REJ) {
	var cn *conn
	if m.Reason == RejTimeout && m.ARILength >= 8 {
		cn = c.remote[remoteKey{m.LocalCommID, binary.BigEndian.Uint64(m.ARI[:8]), from.Addr}]
	}
	if cn == nil {
		cn = c.conns[m.RemoteCommID]
		if cn != nil && m.MessageRejected != MsgREQ && cn.remoteID != m.LocalCommID {
			cn = nil
		}
	}
	if cn == nil {
		c.ctr.RxUnmatched++
		return
	}
	// As cm_rej_handler: before the REP was accepted the connection is
	// forgotten (timewait for a stale connection); once the active side
	// has the REP, or later, it waits in timewait.
	rej := *m
	ev := Event{Type: EventREJReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID, REJ: &rej}
	switch cn.state {
	case StateREQSent, StateMRAREQRcvd, StateREQRcvd, StateMRAREQSent, StateREPSent, StateMRAREPRcvd:
		if m.Reason == RejStaleConn {
			cn.stop()
			cn.enterTimewait(now)
		} else {
			c.remove(cn)
		}
	case StateREPRcvd, StateMRAREPSent, StateEstablished, StateDREQSent:
		cn.stop()
		cn.enterTimewait(now)
	default:
		c.ctr.RxBadState++
		return
	}
	c.emit(ev)
}

func (c *CM) onREP(now time.Duration, from Peer, m *REP) {
	cn := c.conns[m.RemoteCommID]
	if cn == nil || !cn.active {
		c.ctr.RxUnmatched++
		return
	}
	switch cn.state {
	case StateREQSent, StateMRAREQRcvd:
	case StateEstablished, StateMRAREPSent:
		if cn.remoteID != m.LocalCommID {
			c.ctr.RxUnmatched++
			return
		}
		c.dup(AttrREP)
		cn.resendResp() // the RTU (or MRA) was lost
		return
	case StateREPRcvd:
		c.dup(AttrREP)
		return
	default:
		c.ctr.RxBadState++
		return
	}
	cn.stop()
	cn.state = StateREPRcvd
	cn.remoteID, cn.remoteGUID = m.LocalCommID, m.LocalCAGUID
	cn.remoteQPN = m.LocalQPN
	rep := *m
	c.emit(Event{Type: EventREPReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID, REP: &rep})
}

func (c *CM) onRTU(now time.Duration, m *RTU) {
	cn := c.conns[m.RemoteCommID]
	if cn == nil || cn.active || cn.remoteID != m.LocalCommID {
		c.ctr.RxUnmatched++
		return
	}
	switch cn.state {
	case StateREPSent, StateMRAREPRcvd:
	case StateEstablished:
		c.dup(AttrRTU)
		return
	default:
		c.ctr.RxBadState++
		return
	}
	cn.stop()
	cn.state = StateEstablished
	c.emit(Event{Type: EventRTUReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID,
		PrivateData: append([]byte(nil), m.PrivateData[:]...)})
}

func (c *CM) onDREQ(now time.Duration, from Peer, tid uint64, m *DREQ) {
	cn := c.conns[m.RemoteCommID]
	if cn == nil || cn.remoteID != m.LocalCommID || (cn.localQPN != m.RemoteQPN && cn.state != StateTimewait) {
		// A DREQ for a connection we no longer have: answer it so that the
		// peer stops retrying (cm_issue_drep).
		c.ctr.StaleDREQ++
		drep := DREP{LocalCommID: m.RemoteCommID, RemoteCommID: m.LocalCommID}
		_ = c.send(from, tid, &drep, nil)
		return
	}
	switch cn.state {
	case StateEstablished, StateREPSent, StateMRAREPRcvd, StateDREQSent:
	case StateTimewait:
		c.dup(AttrDREQ)
		cn.resendResp()
		return
	default:
		c.ctr.RxBadState++
		return
	}
	cn.stop()
	if cn.state != StateDREQSent && c.cfg.QPError != nil {
		c.cfg.QPError(cn.id, cn.localQPN)
	}
	cn.state = StateDREQRcvd
	drep := DREP{LocalCommID: cn.id, RemoteCommID: cn.remoteID}
	if err := c.send(cn.peer, tid, &drep, &cn.resp); err == nil {
		cn.respValid = true
	}
	cn.enterTimewait(now)
	c.emit(Event{Type: EventDREQReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID,
		PrivateData: append([]byte(nil), m.PrivateData[:]...)})
}

func (c *CM) onDREP(now time.Duration, m *DREP) {
	cn := c.conns[m.RemoteCommID]
	if cn == nil || cn.remoteID != m.LocalCommID {
		c.ctr.RxUnmatched++
		return
	}
	switch cn.state {
	case StateDREQSent:
	case StateTimewait:
		c.dup(AttrDREP)
		return
	default:
		c.ctr.RxBadState++
		return
	}
	cn.stop()
	cn.enterTimewait(now)
	c.emit(Event{Type: EventDREPReceived, ID: cn.id, Peer: cn.peer, ServiceID: cn.serviceID,
		PrivateData: append([]byte(nil), m.PrivateData[:]...)})
}
