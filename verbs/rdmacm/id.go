// Package rdmacm is librdmacm's connection state machine for softnic's
// drop-in librdmacm.so.1 (docs/rdmacm.md): event channels, rdma_cm ids
// and their states, address and route resolution, and the connection
// calls (rdma_connect, rdma_listen, rdma_accept, rdma_reject,
// rdma_disconnect, rdma_establish, rdma_notify) on top of a Service that
// speaks the IBA CM protocol. It moves an id's QP through INIT, RTR and
// RTS with the attributes rdma_init_qp_attr gives, as librdmacm does.
package rdmacm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// EventType is enum rdma_cm_event_type.
type EventType int

const (
	EventAddrResolved EventType = iota
	EventAddrError
	EventRouteResolved
	EventRouteError
	EventConnectRequest
	EventConnectResponse
	EventConnectError
	EventUnreachableCM // RDMA_CM_EVENT_UNREACHABLE
	EventRejectedCM    // RDMA_CM_EVENT_REJECTED
	EventEstablishedCM // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnectedCM
	EventDeviceRemoval
	EventMulticastJoin
	EventMulticastError
	EventAddrChange
	EventTimewaitExitCM
)

var eventNames = [...]string{"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
	"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST",
	"RDMA_CM_EVENT_CONNECT_RESPONSE", "RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
	"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED",
	"RDMA_CM_EVENT_DEVICE_REMOVAL", "RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
	"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT"}

// String is rdma_event_str's word for t.
func (t EventType) String() string {
	if t >= 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "UNKNOWN EVENT"
}

// State is an id's state (the kernel's enum rdma_cm_state).
type State int

const (
	StateIdle State = iota
	StateAddrQuery
	StateAddrResolved
	StateRouteQuery
	StateRouteResolved
	StateConnect
	StateDisconnect
	StateAddrBound
	StateListen
	StateDestroying
)

var stateNames = [...]string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DESTROYING"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// QP is what the state machine needs of an id's queue pair: a
// *verbs.QP, or the drop-in library's ibv_qp (ibv_modify_qp).
type QP interface {
	QPN() uint32
	Modify(attr *verbs.QPAttr, mask verbs.AttrMask) error
}

// Device is the local RDMA device an id is bound to: softnic's daemon.
type Device struct {
	GID       netip.Addr // the port's IP address
	MAC       [6]byte
	MaxRdAtom uint8  // max_qp_rd_atom: the most responder resources and initiator depth
	MTU       qp.MTU // the port's active MTU, the path MTU of its routes
}

// Resolver finds devices and paths, as the kernel's rdma_cm does with
// its address translation: the device of a local address, and the next
// hop towards a destination from the routing and neighbour tables.
type Resolver interface {
	// Device is the local device whose port has addr; an unspecified
	// addr of a family asks for the default device of that family. It
	// fails with ENODEV if there is none.
	Device(addr netip.Addr) (Device, error)
	// Resolve finds the path from dev to dst within timeout: the MAC
	// frames to dst carry and the hop limit the kernel gives the path.
	Resolve(dev Device, dst netip.Addr, timeout time.Duration) (mac [6]byte, hopLimit uint8, err error)
}

// Defaults of the connection parameters, as Linux's rdma_cm sets them
// for RoCE: the packet life time of a RoCE path (CMA_IBOE_PACKET_LIFETIME)
// and the local ACK timeout the CM derives from it (packet life time + 1).
const (
	PacketLifeTime    = 16
	DefaultAckTimeout = PacketLifeTime + 1
	// RejConsumer is the REJ reason of rdma_reject (IBA Table 112:
	// consumer defined); RejInvalidServiceID a REQ for a port nobody
	// listens on.
	RejConsumer         = 28
	RejInvalidServiceID = 8
	RejVendorOption     = 35
	// RejInvalidMTU (IBA: invalid path MTU) answers a REQ whose path MTU
	// is beyond the port's active MTU: the peer would send packets the
	// port cannot take.
	RejInvalidMTU = 26
	// MaxReqPrivate and MaxRepPrivate are the private data a program
	// may put in rdma_connect's REQ (92 bytes less the 36-byte RDMA IP
	// CM header) and rdma_accept's REP.
	MaxReqPrivate = 92 - hdrLen
	MaxRepPrivate = 196
	MaxRejPrivate = 148
	// MaxResources is RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH: "as
	// many as the device allows".
	MaxResources = 0xff
	// UDPQKey is RDMA_UDP_QKEY, the Q_Key of every UD QP of rdma_cm's
	// UDP port space (the kernel's cma_set_qkey).
	UDPQKey = 0x01234567
	// MaxUDReqPrivate and MaxUDRepPrivate are the private data a program
	// may put in a UD id's rdma_connect (a SIDR_REQ's 216 bytes less the
	// header) and rdma_accept or rdma_reject (a SIDR_REP's 136).
	MaxUDReqPrivate = 216 - hdrLen
	MaxUDRepPrivate = 136
)

// CM is one process's rdma_cm: its ids' port numbers and the service
// and resolver they use.
type CM struct {
	svc Service
	res Resolver
	// PSN gives each connection's starting PSN (RandomPSN if nil).
	PSN func() qp.PSN

	mu    sync.Mutex
	ports map[portKey]*ID
	next  uint16
}

type portKey struct {
	ps   PortSpace
	port uint16
}

// New is an rdma_cm on svc (nil: connections fail with ENOSYS) and res.
func New(svc Service, res Resolver) *CM {
	var b [2]byte
	rand.Read(b[:])
	return &CM{svc: svc, res: res, ports: map[portKey]*ID{}, next: 32768 + binary.LittleEndian.Uint16(b[:])%28000}
}

// SetService wires the CM service in (before the first rdma_connect or
// rdma_listen).
func (m *CM) SetService(svc Service) {
	m.mu.Lock()
	m.svc = svc
	m.mu.Unlock()
}

func (m *CM) service() Service {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.svc
}

func (m *CM) psn() qp.PSN {
	if m.PSN != nil {
		return m.PSN() & qp.PSNMask
	}
	var b [4]byte
	rand.Read(b[:])
	return qp.PSN(binary.BigEndian.Uint32(b[:])) & qp.PSNMask
}

// bindPort reserves port in ps for id; 0 picks a free one.
func (m *CM) bindPort(id *ID, ps PortSpace, port uint16, reuse bool) (uint16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if port != 0 {
		if o := m.ports[portKey{ps, port}]; o != nil && o != id && !(reuse && o.reuse) {
			return 0, syscall.EADDRINUSE
		}
		m.ports[portKey{ps, port}] = id
		return port, nil
	}
	for range 28232 {
		p := m.next
		m.next++
		if m.next >= 61000 || m.next < 32768 {
			m.next = 32768
		}
		if m.ports[portKey{ps, p}] == nil {
			m.ports[portKey{ps, p}] = id
			return p, nil
		}
	}
	return 0, syscall.EADDRNOTAVAIL
}

func (m *CM) releasePort(id *ID, ps PortSpace, port uint16) {
	m.mu.Lock()
	if m.ports[portKey{ps, port}] == id {
		delete(m.ports, portKey{ps, port})
	}
	m.mu.Unlock()
}

// ID is an rdma_cm_id.
type ID struct {
	cm *CM
	ch *Channel
	ps PortSpace
	// UD: the id's QPs are unreliable datagram ones (RDMA_PS_UDP).
	UD bool
	// User is the caller's (Load, Store): the drop-in library keeps its
	// struct rdma_cm_id here.
	User atomic.Uintptr

	mu        sync.Mutex
	cond      sync.Cond
	state     State
	src, dst  netip.AddrPort
	ownPort   bool // src's port is reserved in cm.ports
	dev       *Device
	path      Path
	routed    bool
	qp        QP
	conn      Conn
	listener  Listener
	parent    *ID
	backlog   int
	pending   int // connection requests not yet accepted or rejected
	psn       qp.PSN
	remote    ConnParam
	respRes   uint8
	initDepth uint8
	retry     uint8
	rnrRetry  uint8
	tos       uint8
	ackTO     uint8
	ackTOSet  bool
	reuse     bool
	afOnly    bool
	answered  bool // the passive side accepted or rejected
	connErr   bool // a REP's processing failed: later events are dropped (librdmacm's connect_error)
	destroyed bool
	delivered int // events handed to the program and not acked
	gen       int // bumped by each resolve: a stale resolution's event is dropped
}

// CreateID is rdma_create_id on ch.
func (m *CM) CreateID(ch *Channel, ps PortSpace) (*ID, error) {
	if ch == nil {
		return nil, syscall.EINVAL
	}
	switch ps {
	case PSTCP, PSUDP, PSIB, PSIPoIB:
	default:
		return nil, syscall.EINVAL
	}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil, syscall.EINVAL
	}
	ch.ids++
	ch.mu.Unlock()
	id := &ID{cm: m, ch: ch, ps: ps, UD: ps == PSUDP || ps == PSIPoIB}
	id.cond.L = &id.mu
	return id, nil
}

// State is the id's state.
func (id *ID) State() State {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.state
}

// PortSpace is the id's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

func (id *ID) gone() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.destroyed
}

// Route is what rdma_cm_id's route shows.
type Route struct {
	Src, Dst netip.AddrPort
	Device   *Device // nil until the id is bound to a device
	Path     Path
	Routed   bool // Path is valid (ROUTE_RESOLVED, or a connection's)
}

// Route returns the id's addresses, device and path.
func (id *ID) Route() Route {
	id.mu.Lock()
	defer id.mu.Unlock()
	r := Route{Src: id.src, Dst: id.dst, Path: id.path, Routed: id.routed}
	if id.dev != nil {
		d := *id.dev
		r.Device = &d
	}
	return r
}

// gid is the GID of an IP address: the address itself, IPv4-mapped.
func gid(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// Bind is rdma_bind_addr: a local address (unspecified: any device) and
// port (0: an ephemeral one).
func (id *ID) Bind(addr netip.AddrPort) error {
	if !addr.Addr().IsValid() {
		return syscall.EAFNOSUPPORT
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.state != StateIdle {
		return syscall.EINVAL
	}
	return id.bindLocked(addr)
}

func (id *ID) bindLocked(addr netip.AddrPort) error {
	var dev *Device
	if !addr.Addr().IsUnspecified() {
		d, err := id.cm.res.Device(addr.Addr().Unmap())
		if err != nil {
			return err
		}
		dev = &d
	}
	port, err := id.cm.bindPort(id, id.ps, addr.Port(), id.reuse)
	if err != nil {
		return err
	}
	id.src = netip.AddrPortFrom(addr.Addr(), port)
	id.ownPort = true
	id.dev = dev
	id.state = StateAddrBound
	return nil
}

// ResolveAddr is rdma_resolve_addr: it binds the id (to src, or to the
// default device of dst's family) if it is not bound, then finds dst's
// next hop within timeout; ADDR_RESOLVED or ADDR_ERROR follows.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	if !dst.Addr().IsValid() || dst.Addr().IsUnspecified() {
		return syscall.EINVAL
	}
	d := dst.Addr().Unmap()
	id.mu.Lock()
	if id.state == StateIdle {
		if !src.Addr().IsValid() {
			if d.Is4() {
				src = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
			} else {
				src = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
			}
		}
		if err := id.bindLocked(src); err != nil {
			id.mu.Unlock()
			return err
		}
	}
	if id.state != StateAddrBound && id.state != StateAddrResolved {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	s := id.src.Addr().Unmap()
	if s.Is4() != d.Is4() && !s.IsUnspecified() {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	id.dst = netip.AddrPortFrom(dst.Addr(), dst.Port())
	id.state = StateAddrQuery
	id.routed = false
	id.gen++
	gen := id.gen
	dev := id.dev
	id.mu.Unlock()
	go func() {
		ev := &CMEvent{ID: id, Type: EventAddrResolved}
		if dev == nil {
			var fam netip.Addr
			if d.Is4() {
				fam = netip.IPv4Unspecified()
			} else {
				fam = netip.IPv6Unspecified()
			}
			dv, err := id.cm.res.Device(fam)
			if err != nil {
				ev.Type, ev.Status = EventAddrError, -errnoOf(err)
			} else {
				dev = &dv
			}
		}
		var mac [6]byte
		var hops uint8
		if ev.Type == EventAddrResolved {
			var err error
			if mac, hops, err = id.cm.res.Resolve(*dev, d, timeout); err != nil {
				ev.Type, ev.Status = EventAddrError, -errnoOf(err)
			}
		}
		id.mu.Lock()
		if id.destroyed || id.gen != gen || id.state != StateAddrQuery {
			id.mu.Unlock()
			return
		}
		if ev.Type == EventAddrResolved {
			id.dev = dev
			if id.src.Addr().IsUnspecified() {
				id.src = netip.AddrPortFrom(dev.GID, id.src.Port())
			}
			id.path = Path{SGID: gid(dev.GID), DGID: gid(d), DMAC: mac, HopLimit: hops, TrafficClass: id.tos,
				MTU: dev.MTU, PKey: 0xffff, PacketLifeTime: PacketLifeTime}
			id.state = StateAddrResolved
		} else {
			id.state = StateAddrBound
		}
		id.mu.Unlock()
		id.queue(ev)
	}()
	return nil
}

// ResolveRoute is rdma_resolve_route: on RoCE the path follows from the
// resolved address (GIDs, the route's hop limit, the port's MTU), so
// ROUTE_RESOLVED follows at once.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	id.mu.Lock()
	if id.state != StateAddrResolved {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	id.path.TrafficClass = id.tos
	id.routed = true
	id.state = StateRouteResolved
	id.mu.Unlock()
	id.queue(&CMEvent{ID: id, Type: EventRouteResolved})
	return nil
}

// SetTOS, SetReuseAddr, SetAFOnly and SetAckTimeout are rdma_set_option's
// RDMA_OPTION_ID options.
func (id *ID) SetTOS(tos uint8) {
	id.mu.Lock()
	id.tos = tos
	id.path.TrafficClass = tos
	id.mu.Unlock()
}

func (id *ID) SetReuseAddr(on bool) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.state != StateIdle {
		return syscall.EINVAL
	}
	id.reuse = on
	return nil
}

func (id *ID) SetAFOnly(on bool) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.state != StateIdle {
		return syscall.EINVAL
	}
	id.afOnly = on
	return nil
}

func (id *ID) SetAckTimeout(t uint8) {
	id.mu.Lock()
	id.ackTO, id.ackTOSet = min(t, 31), true
	id.mu.Unlock()
}

// AttachQP is rdma_create_qp's part after ibv_create_qp: the id's QP,
// moved to INIT with the id's port and P_Key index (rdma_init_qp_attr).
func (id *ID) AttachQP(q QP) error {
	id.mu.Lock()
	if id.qp != nil || id.dev == nil {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if id.ps == PSIPoIB {
		id.mu.Unlock()
		return syscall.EOPNOTSUPP // its Q_Key is the IPoIB broadcast group's, from an SA
	}
	attr, mask, err := id.qpAttrLocked(qp.Init)
	id.mu.Unlock()
	if err != nil {
		return err
	}
	if err := q.Modify(&attr, mask); err != nil {
		return err
	}
	if id.UD {
		// librdmacm's ucma_init_ud_qp: a UD QP needs no peer, so it goes
		// on to RTR and to RTS (SQ PSN 0) at once.
		if err := q.Modify(&verbs.QPAttr{State: qp.RTR}, verbs.AttrState); err != nil {
			return err
		}
		if err := q.Modify(&verbs.QPAttr{State: qp.RTS}, verbs.AttrState|verbs.AttrSQPSN); err != nil {
			return err
		}
	}
	id.mu.Lock()
	id.qp = q
	id.mu.Unlock()
	return nil
}

// DetachQP is rdma_destroy_qp's part before ibv_destroy_qp.
func (id *ID) DetachQP() {
	id.mu.Lock()
	id.qp = nil
	id.mu.Unlock()
}

// InitQPAttr is rdma_init_qp_attr: the attributes and mask that move the
// id's QP to state (INIT, RTR or RTS) for its connection.
func (id *ID) InitQPAttr(state qp.State) (verbs.QPAttr, verbs.AttrMask, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qpAttrLocked(state)
}

func (id *ID) qpAttrLocked(state qp.State) (verbs.QPAttr, verbs.AttrMask, error) {
	a := verbs.QPAttr{State: state}
	if id.dev == nil {
		return a, 0, syscall.EINVAL
	}
	if id.UD {
		return id.udQPAttr(state)
	}
	connected := id.conn != nil && (id.state == StateConnect || id.state == StateDisconnect)
	switch state {
	case qp.Init:
		a.PKeyIndex, a.Port = 0, 1
		if connected {
			a.AccessFlags = verbs.AccessRemoteWrite
			if id.respRes > 0 {
				a.AccessFlags |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
			}
		}
		return a, verbs.AttrState | verbs.AttrAccessFlags | verbs.AttrPKeyIndex | verbs.AttrPort, nil
	case qp.RTR:
		if !connected || !id.routed {
			return a, 0, syscall.EINVAL
		}
		a.AV = verbs.AHAttr{DGID: id.path.DGID, DMAC: id.path.DMAC, TrafficClass: id.path.TrafficClass,
			HopLimit: id.path.HopLimit, FlowLabel: id.path.FlowLabel}
		a.PathMTU = id.path.MTU
		a.DestQPN = id.remote.QPN
		// A REQ's or REP's starting PSN is the one its sender receives
		// from (Linux's ib_cm: the active side's rq_psn is the REQ's,
		// the passive side's the REP's), so the QP expects its own.
		a.RQPSN = id.psn
		a.MaxDestRdAtomic = id.respRes
		a.MinRNRTimer = 0
		return a, verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN |
			verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer, nil
	case qp.RTS:
		if !connected {
			return a, 0, syscall.EINVAL
		}
		// And sends from the peer's: cm_req_handler sets the passive
		// side's sq_psn from the REQ, cm_rep_handler the active side's
		// from the REP.
		a.SQPSN = id.remote.StartingPSN
		a.Timeout = DefaultAckTimeout
		if id.ackTOSet {
			a.Timeout = id.ackTO
		}
		a.RetryCnt, a.RNRRetry = id.retry, id.rnrRetry
		a.MaxRdAtomic = id.initDepth
		return a, verbs.AttrState | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt |
			verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic, nil
	}
	return a, 0, syscall.EINVAL
}

// modify moves the id's QP (if it has one) to state with
// rdma_init_qp_attr's attributes.
func (id *ID) modify(state qp.State) error {
	id.mu.Lock()
	q := id.qp
	if q == nil {
		id.mu.Unlock()
		return nil
	}
	var attr verbs.QPAttr
	var mask verbs.AttrMask
	var err error
	if state == qp.Err {
		attr, mask = verbs.QPAttr{State: qp.Err}, verbs.AttrState
	} else {
		attr, mask, err = id.qpAttrLocked(state)
	}
	id.mu.Unlock()
	if err != nil {
		return err
	}
	return q.Modify(&attr, mask)
}

// modifyRTR is librdmacm's ucma_modify_qp_rtr: the QP made at
// rdma_create_qp is in INIT without remote access, so it first moves
// INIT -> INIT with the connection's access flags (remote write, and
// remote read and atomics when the connection has responder
// resources), then to RTR.
func (id *ID) modifyRTR() error {
	if err := id.modify(qp.Init); err != nil {
		return err
	}
	return id.modify(qp.RTR)
}

// UserParam is rdma_conn_param as a program gives it to rdma_connect
// or rdma_accept (nil there: Defaults).
type UserParam struct {
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                bool
	QPN                uint32 // without a QP on the id
	QKey               uint32 // UD: rdma_ud_param's Q_Key
}

// Defaults is librdmacm's rdma_conn_param for a NULL one: as many
// resources as the device has, 7 retries.
var Defaults = UserParam{ResponderResources: MaxResources, InitiatorDepth: MaxResources, RetryCount: 7, RNRRetryCount: 7}

// Connect is rdma_connect: a REQ for the destination's port, on a
// resolved route. CONNECT_RESPONSE (without a QP on the id) or
// ESTABLISHED (with one, after the QP's move to RTS and the RTU),
// REJECTED, UNREACHABLE or CONNECT_ERROR follows.
func (id *ID) Connect(p UserParam) error {
	if id.UD {
		return id.resolveUD(p)
	}
	if len(p.PrivateData) > MaxReqPrivate {
		return syscall.EINVAL
	}
	svc := id.cm.service()
	id.mu.Lock()
	if id.state != StateRouteResolved {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if svc == nil {
		id.mu.Unlock()
		return syscall.ENOSYS
	}
	max := id.dev.MaxRdAtom
	if id.qp == nil && p.QPN == 0 {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if p.InitiatorDepth != MaxResources && p.InitiatorDepth > max || p.ResponderResources != MaxResources && p.ResponderResources > max {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	id.initDepth, id.respRes = pick(p.InitiatorDepth, max), pick(p.ResponderResources, max)
	qpn := p.QPN
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	id.psn = id.cm.psn()
	id.retry, id.rnrRetry = p.RetryCount&7, p.RNRRetryCount&7
	ato := uint8(DefaultAckTimeout)
	if id.ackTOSet {
		ato = id.ackTO
	}
	cp := ConnParam{QPN: qpn, StartingPSN: id.psn, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		FlowControl: p.FlowControl, RetryCount: id.retry, RNRRetryCount: id.rnrRetry, SRQ: p.SRQ,
		LocalAckTimeout: ato, PrivateData: appendHeader(nil, id.src, id.dst, p.PrivateData)}
	id.connErr = false
	return id.sendRequest(func(sid uint64, path Path) (Conn, error) { return svc.Connect(sid, path, cp, id.handle) })
}

// sendRequest sends the CM request call makes (a REQ or a SIDR_REQ) for id's
// service ID and path, with id in StateConnect and its lock released
// meanwhile (the service may call back into id). On failure id returns to
// StateRouteResolved unless an event moved it on; on success it keeps the
// connection. id.mu is held on entry and released on return.
func (id *ID) sendRequest(call func(sid uint64, path Path) (Conn, error)) error {
	sid := ServiceID(id.ps, id.dst.Port())
	path := id.path
	id.state = StateConnect
	id.mu.Unlock()
	conn, err := call(sid, path)
	id.mu.Lock()
	defer id.mu.Unlock()
	if err != nil {
		if id.state == StateConnect {
			id.state = StateRouteResolved
		}
		return err
	}
	if id.conn == nil {
		id.conn = conn
	}
	return nil
}

func pick(asked, max uint8) uint8 {
	if asked == MaxResources {
		return max
	}
	return asked
}

// Listen is rdma_listen: REQs for the id's port come as CONNECT_REQUEST
// events, each with a new id; more than backlog of them not yet
// accepted or rejected are rejected.
func (id *ID) Listen(backlog int) error {
	svc := id.cm.service()
	id.mu.Lock()
	if id.state == StateIdle {
		if err := id.bindLocked(netip.AddrPortFrom(netip.IPv6Unspecified(), 0)); err != nil {
			id.mu.Unlock()
			return err
		}
	}
	if id.state != StateAddrBound {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if svc == nil {
		id.mu.Unlock()
		return syscall.ENOSYS
	}
	if backlog <= 0 {
		backlog = 1024
	}
	id.backlog = backlog
	id.state = StateListen
	local := id.src.Addr()
	if !local.IsUnspecified() {
		local = gid(local)
	} else {
		local = netip.Addr{}
	}
	sid := ServiceID(id.ps, id.src.Port())
	id.mu.Unlock()
	l, err := svc.Listen(sid, local, id.request)
	id.mu.Lock()
	defer id.mu.Unlock()
	if err != nil {
		if id.state == StateListen {
			id.state = StateAddrBound
		}
		return err
	}
	if id.destroyed {
		l.Close()
		return syscall.EINVAL
	}
	id.listener = l
	return nil
}

// request is a listener's Handler: a REQ becomes a new id on the
// listener's channel and a CONNECT_REQUEST.
func (id *ID) request(ev Event) {
	if ev.Kind != EventRequest || ev.Conn == nil {
		return
	}
	src, dst, user, err := parseHeader(ev.Param.PrivateData)
	id.mu.Lock()
	if err != nil || id.state != StateListen || id.destroyed || id.pending >= id.backlog || id.dev != nil && !id.src.Addr().IsUnspecified() && gid(dst.Addr()) != gid(id.src.Addr()) {
		id.mu.Unlock()
		ev.Conn.Reject(RejConsumer, nil)
		return
	}
	if id.afOnly && src.Addr().Is4() != id.src.Addr().Unmap().Is4() {
		id.mu.Unlock()
		ev.Conn.Reject(RejConsumer, nil)
		return
	}
	id.pending++
	ch := id.ch
	id.mu.Unlock()
	dev, derr := id.cm.res.Device(dst.Addr())
	if derr != nil {
		id.mu.Lock()
		id.pending--
		id.mu.Unlock()
		ev.Conn.Reject(RejConsumer, nil)
		return
	}
	// Linux's rdma_cm on RoCE puts its netdev's MTU in the REQ
	// (iboe_get_mtu: a 3000-byte netdev asks for 2048) and the passive
	// side cannot answer with a smaller one (a REP has no MTU): a QP
	// that took it would receive packets its port drops. Refuse it.
	if !ev.UD && ev.Path.MTU > dev.MTU {
		id.mu.Lock()
		id.pending--
		id.mu.Unlock()
		ev.Conn.Reject(RejInvalidMTU, nil)
		return
	}
	child, cerr := id.cm.CreateID(ch, id.ps)
	if cerr != nil {
		id.mu.Lock()
		id.pending--
		id.mu.Unlock()
		ev.Conn.Reject(RejConsumer, nil)
		return
	}
	child.mu.Lock()
	child.parent = id
	child.dev = &dev
	child.src = netip.AddrPortFrom(dst.Addr(), id.src.Port())
	child.dst = src
	child.path = ev.Path
	child.path.PacketLifeTime = PacketLifeTime
	if child.path.MTU == 0 {
		child.path.MTU = dev.MTU
	}
	child.routed = true
	child.conn = ev.Conn
	child.remote = ev.Param
	child.remote.PrivateData = user
	// The peer's offer in this side's terms (librdmacm's
	// CONNECT_REQUEST): its initiator depth is what this side must
	// answer as responder, and the other way round.
	child.respRes, child.initDepth = ev.Param.InitiatorDepth, ev.Param.ResponderResources
	child.retry, child.rnrRetry = ev.Param.RetryCount&7, ev.Param.RNRRetryCount&7
	child.state = StateConnect
	child.mu.Unlock()
	cev := &CMEvent{ID: child, Listen: id, Type: EventConnectRequest, Param: child.userParam(ev.Param, user), UD: child.UD}
	if child.UD {
		cev.Param = UserParam{PrivateData: user}
	}
	child.queue(cev)
}

// userParam is a REQ's or REP's rdma_conn_param as the event shows it.
func (id *ID) userParam(p ConnParam, pdata []byte) UserParam {
	return UserParam{PrivateData: pdata, ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources,
		FlowControl: p.FlowControl, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ, QPN: p.QPN}
}

// Accept is rdma_accept on a CONNECT_REQUEST's id: its QP to RTR and
// RTS, then the REP; ESTABLISHED follows when the RTU arrives.
func (id *ID) Accept(p UserParam) error {
	if id.UD {
		return id.acceptUD(p)
	}
	if len(p.PrivateData) > MaxRepPrivate {
		return syscall.EINVAL
	}
	id.mu.Lock()
	if id.state != StateConnect || id.conn == nil || id.parent == nil || id.answered || id.connErr {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	max := id.dev.MaxRdAtom
	if p.InitiatorDepth != MaxResources && p.InitiatorDepth > max || p.ResponderResources != MaxResources && p.ResponderResources > max {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if p.InitiatorDepth == MaxResources {
		id.initDepth = min(id.initDepth, max)
	} else {
		id.initDepth = p.InitiatorDepth
	}
	if p.ResponderResources == MaxResources {
		id.respRes = min(id.respRes, max)
	} else {
		id.respRes = p.ResponderResources
	}
	if id.qp == nil && p.QPN == 0 {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	qpn := p.QPN
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	id.psn = id.cm.psn()
	id.answered = true
	// The REP's RNR retry count is the one the active side uses.
	rep := ConnParam{QPN: qpn, StartingPSN: id.psn, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		FlowControl: p.FlowControl, RNRRetryCount: p.RNRRetryCount & 7, SRQ: p.SRQ, PrivateData: p.PrivateData}
	conn := id.conn
	id.mu.Unlock()
	if err := id.modifyRTR(); err != nil {
		id.modify(qp.Err)
		return err
	}
	if err := id.modify(qp.RTS); err != nil {
		id.modify(qp.Err)
		return err
	}
	if err := conn.Accept(rep, id.handle); err != nil {
		id.modify(qp.Err)
		return err
	}
	id.donePending()
	return nil
}

// donePending frees the id's place in its listener's backlog.
func (id *ID) donePending() {
	id.mu.Lock()
	parent := id.parent
	id.parent = nil
	id.mu.Unlock()
	if parent != nil {
		parent.mu.Lock()
		parent.pending--
		parent.mu.Unlock()
	}
}

// Reject is rdma_reject (reason RejConsumer) and rdma_reject_ece
// (RejVendorOption) on a CONNECT_REQUEST's id.
func (id *ID) Reject(reason uint16, pdata []byte) error {
	if len(pdata) > MaxRejPrivate || id.UD && len(pdata) > MaxUDRepPrivate {
		return syscall.EINVAL
	}
	id.mu.Lock()
	if id.state != StateConnect || id.conn == nil || id.parent == nil || id.answered {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	conn := id.conn
	id.answered = true
	id.state = StateDisconnect
	id.mu.Unlock()
	err := conn.Reject(reason, pdata)
	id.donePending()
	return err
}

// Establish is rdma_establish: after CONNECT_RESPONSE on an id without
// a QP (the program moved its own QP to RTS), the RTU.
func (id *ID) Establish() error {
	id.mu.Lock()
	if id.qp != nil || id.state != StateConnect || id.conn == nil || id.parent != nil || id.remote.QPN == 0 {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	conn := id.conn
	id.mu.Unlock()
	return conn.RTU()
}

// Notify is rdma_notify: IBV_EVENT_COMM_EST on the passive side's QP
// before the RTU makes the connection established.
func (id *ID) Notify(event int) error {
	const ibvEventCommEst = 4
	id.mu.Lock()
	conn := id.conn
	ok := id.state == StateConnect && conn != nil
	id.mu.Unlock()
	if !ok {
		return syscall.EINVAL
	}
	if event != ibvEventCommEst {
		return nil
	}
	return conn.CommEstablished()
}

// Disconnect is rdma_disconnect: the QP to the error state (flushing its
// work requests), then the DREQ (or the DREP to the peer's DREQ).
// DISCONNECTED follows once per connection.
func (id *ID) Disconnect() error {
	id.mu.Lock()
	conn := id.conn
	ok := (id.state == StateConnect || id.state == StateDisconnect) && conn != nil
	id.mu.Unlock()
	if !ok {
		return syscall.EINVAL
	}
	if err := id.modify(qp.Err); err != nil {
		return err
	}
	// As the kernel's rdma_disconnect: a DREQ, or the DREP to the peer's
	// DREQ, and success either way. The CM may have taken (and answered)
	// the peer's DREQ before its event reached this id, or the
	// connection may be in time wait already: nothing is left to send.
	conn.Disconnect(nil)
	return nil
}

// Destroy is rdma_destroy_id: it waits until the program has acked the
// id's events, as librdmacm does; queued ones are dropped.
func (id *ID) Destroy() error {
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	id.destroyed = true
	id.state = StateDestroying
	for id.delivered > 0 {
		id.cond.Wait()
	}
	conn, l := id.conn, id.listener
	id.conn, id.listener = nil, nil
	src, own := id.src, id.ownPort
	id.mu.Unlock()
	if l != nil {
		l.Close()
	}
	if conn != nil {
		conn.Close()
	}
	id.donePending()
	if own {
		id.cm.releasePort(id, id.ps, src.Port())
	}
	id.mu.Lock()
	ch := id.ch
	id.mu.Unlock()
	ch.mu.Lock()
	ch.ids--
	ch.mu.Unlock()
	return nil
}

// handle is the Handler of an id's connection.
func (id *ID) handle(ev Event) {
	var t EventType
	status := ev.Status
	switch ev.Kind {
	case EventReply:
		t = EventConnectResponse
		if id.UD {
			t = EventEstablishedCM // the SIDR_REP: the peer's UD QP and Q_Key
		}
	case EventEstablished:
		t = EventEstablishedCM
	case EventRejected:
		t, status = EventRejectedCM, int(ev.Reason)
	case EventUnreachable:
		t = EventUnreachableCM
		if status == 0 {
			status = -int(syscall.ETIMEDOUT)
		}
	case EventDisconnected:
		t = EventDisconnectedCM
	case EventTimewaitExit:
		t = EventTimewaitExitCM
	default:
		return
	}
	id.mu.Lock()
	if id.destroyed {
		id.mu.Unlock()
		return
	}
	if id.conn == nil && ev.Conn != nil {
		id.conn = ev.Conn // the event came before Connect returned
	}
	switch t {
	case EventConnectResponse:
		if id.state != StateConnect || id.parent != nil {
			id.mu.Unlock()
			return
		}
		id.remote = ev.Param
		// The REP's offer in this side's terms, and its RNR retry count.
		id.respRes, id.initDepth = min(id.respRes, ev.Param.InitiatorDepth), min(id.initDepth, ev.Param.ResponderResources)
		id.rnrRetry = ev.Param.RNRRetryCount & 7
	case EventDisconnectedCM:
		if id.state != StateConnect {
			id.mu.Unlock()
			return
		}
		id.state = StateDisconnect
	case EventRejectedCM, EventUnreachableCM:
		if id.state == StateConnect {
			id.state = StateDisconnect
		}
	}
	param := ev.Param
	pdata := ev.PrivateData
	if t == EventConnectResponse {
		pdata = ev.Param.PrivateData
	}
	ud := id.UD
	id.mu.Unlock()
	if ud {
		if ev.Kind == EventReply {
			pdata = param.PrivateData
		}
		id.queue(&CMEvent{ID: id, Type: t, Status: status, UD: true,
			Param: UserParam{QPN: param.QPN, QKey: param.QKey, PrivateData: pdata}})
		return
	}
	id.queue(&CMEvent{ID: id, Type: t, Status: status, Param: id.userParam(param, pdata)})
}

func (id *ID) queue(ev *CMEvent) {
	id.mu.Lock()
	ch := id.ch
	id.mu.Unlock()
	ch.push(ev)
}

// Migrate is rdma_migrate_id: the id's later events go to ch (events
// already queued stay on the old channel).
func (id *ID) Migrate(ch *Channel) error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return syscall.EINVAL
	}
	ch.ids++
	ch.mu.Unlock()
	id.mu.Lock()
	old := id.ch
	id.ch = ch
	id.mu.Unlock()
	old.mu.Lock()
	old.ids--
	old.mu.Unlock()
	return nil
}

// process finishes an event in the caller's thread as librdmacm's
// rdma_get_cm_event does; false drops it.
func (id *ID) process(ev *CMEvent) bool {
	id.mu.Lock()
	connErr := id.connErr
	q, conn := id.qp, id.conn
	id.mu.Unlock()
	switch ev.Type {
	case EventConnectResponse:
		if q != nil {
			err := id.modifyRTR()
			if err == nil {
				err = id.modify(qp.RTS)
			}
			if err == nil {
				err = conn.RTU()
			}
			if err != nil {
				id.modify(qp.Err)
				id.mu.Lock()
				id.connErr = true
				id.mu.Unlock()
				ev.Type, ev.Status = EventConnectError, -errnoOf(err)
			} else {
				ev.Type = EventEstablishedCM
			}
		}
	case EventRejectedCM, EventUnreachableCM:
		if connErr {
			return false
		}
		if !ev.UD { // librdmacm leaves a UD QP alone
			id.modify(qp.Err)
		}
	case EventDisconnectedCM:
		if connErr {
			return false
		}
	}
	o := ev.owner()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.destroyed {
		return false
	}
	o.delivered++
	return true
}

// owner is the id whose rdma_destroy_id waits for the event's ack: a
// CONNECT_REQUEST's is the listener's, as in librdmacm (the new id may be
// destroyed before the request's event is acked).
func (e *CMEvent) owner() *ID {
	if e.Type == EventConnectRequest && e.Listen != nil {
		return e.Listen
	}
	return e.ID
}

// CMEvent is an rdma_cm_event.
type CMEvent struct {
	ID     *ID
	Listen *ID // CONNECT_REQUEST: the listening id
	Type   EventType
	Status int // a negative errno, or a REJ's reason
	// Param is the event's rdma_conn_param (CONNECT_REQUEST,
	// CONNECT_RESPONSE, ESTABLISHED, REJECTED, DISCONNECTED): the
	// peer's private data and its resources in this side's terms.
	Param UserParam
	// UD: the event is a UD id's (rdma_ud_param): CONNECT_REQUEST's
	// private data, ESTABLISHED's peer QPN, Q_Key and private data.
	UD bool
}

// Ack is rdma_ack_cm_event.
func (e *CMEvent) Ack() {
	id := e.owner()
	id.mu.Lock()
	if id.delivered > 0 {
		id.delivered--
	}
	id.cond.Broadcast()
	id.mu.Unlock()
}

// errnoOf is err's errno (EINVAL if it has none).
func errnoOf(err error) int {
	var en syscall.Errno
	if ok := asErrno(err, &en); ok {
		return int(en)
	}
	return int(syscall.EINVAL)
}
