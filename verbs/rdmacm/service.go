package rdmacm

import (
	"net/netip"

	"github.com/softnic/softnic/qp"
)

// The seam between librdmacm's state machine (this package) and a
// connection manager that speaks the IBA CM protocol (REQ, REP, RTU,
// REJ, DREQ, DREP MADs on QP1, IBA chapter 12). The rdma_cm layer never
// builds a MAD: it hands the service what a REQ or a REP must carry and
// gets back, as Events, what arrived. A Service may call a Handler from
// any goroutine, including from inside its own methods; the Handler
// never blocks and never calls the Service back.

// Service is a communication manager: it listens on service IDs and
// opens connections to remote ones.
type Service interface {
	// Listen routes the REQs for serviceID that arrive on the port whose
	// GID is local (the unspecified address: any local GID) to h, each
	// as an EventRequest with its Conn. It fails with EADDRINUSE if
	// another listener holds serviceID there.
	Listen(serviceID uint64, local netip.Addr, h Handler) (Listener, error)
	// Connect sends a REQ for serviceID along path carrying p (the
	// active side's QP number, starting PSN, responder resources,
	// initiator depth, retry counts, private data) and reports what the
	// passive side answers to h: EventReply, EventRejected or
	// EventUnreachable (no answer after the CM's retries).
	Connect(serviceID uint64, path Path, p ConnParam, h Handler) (Conn, error)
	// Resolve sends a SIDR_REQ (IBA 12.11; rdma_cm's UDP port space) for
	// serviceID along path carrying privateData, and reports the answer
	// to h: EventReply (Param: the passive side's UD QPN, Q_Key and
	// private data) or EventUnreachable (Status: the SIDR_REP's non-zero
	// status, or -ETIMEDOUT after the CM's retries). A listener gets a
	// SIDR_REQ as an EventRequest with UD set; its Conn's Accept sends
	// the SIDR_REP (Param's QPN and QKey), Reject one with status 2
	// (rejected); RTU, CommEstablished and Disconnect do not apply.
	Resolve(serviceID uint64, path Path, privateData []byte, h Handler) (Conn, error)
}

// Listener is one Listen registration.
type Listener interface {
	// Close stops the REQs; connections already requested live on.
	Close() error
}

// Conn is one connection of the CM, from its REQ to its time wait.
type Conn interface {
	// Accept is the passive side's REP, carrying p; h gets the rest of
	// the connection's events (EventEstablished when the RTU arrives).
	Accept(p ConnParam, h Handler) error
	// Reject sends a REJ with reason (IBA Table 112; 28, consumer
	// defined, for rdma_reject) and private data.
	Reject(reason uint16, privateData []byte) error
	// RTU is the active side's answer to a REP: the connection is
	// established.
	RTU() error
	// CommEstablished tells the passive side's CM that its QP received
	// a packet before the RTU (IBV_EVENT_COMM_EST, rdma_notify): it
	// treats the connection as established and reports
	// EventEstablished.
	CommEstablished() error
	// Disconnect sends a DREQ, or the DREP if the peer's DREQ came
	// first. The peer's DREP (or the DREQ's timeout, Status -ETIMEDOUT)
	// comes back as EventDisconnected, then time wait's end as
	// EventTimewaitExit.
	Disconnect(privateData []byte) error
	// Close forgets the connection (rdma_destroy_id): an established
	// one is disconnected first.
	Close()
}

// Handler receives a Service's events.
type Handler func(Event)

// EventKind is what arrived.
type EventKind int

const (
	// EventRequest (passive, to the listener's Handler): a REQ; Conn
	// is the new connection, Param the REQ's, Path the path it came on
	// seen from this side (SGID = the local GID).
	EventRequest EventKind = iota + 1
	// EventReply (active): the REP; Param is the REP's.
	EventReply
	// EventEstablished (passive): the RTU arrived, or CommEstablished.
	EventEstablished
	// EventRejected: a REJ, with Reason and PrivateData.
	EventRejected
	// EventUnreachable: no REP to the REQ, or no RTU to the REP, after
	// the CM's retries.
	EventUnreachable
	// EventDisconnected: the peer's DREQ (the CM waits for the local
	// Disconnect to send the DREP), the peer's DREP to the local DREQ,
	// or the local DREQ's timeout (Status -ETIMEDOUT).
	EventDisconnected
	// EventTimewaitExit: the connection's time wait is over.
	EventTimewaitExit
)

// Event is one event of a Service.
type Event struct {
	Kind        EventKind
	Conn        Conn      // the connection the event is about (EventRequest: the new one)
	Param       ConnParam // EventRequest (the REQ's), EventReply (the REP's)
	Path        Path      // EventRequest
	Reason      uint16    // EventRejected
	PrivateData []byte    // EventRejected, EventDisconnected
	Status      int       // a negative errno (-ETIMEDOUT), or 0; EventUnreachable of a SIDR_REQ: the SIDR_REP's status
	UD          bool      // EventRequest: a SIDR_REQ (UD service resolution), not a REQ
}

// ConnParam is what a REQ or a REP carries for rdma_cm, in the sender's
// terms: ResponderResources are the RDMA READ/atomic requests the sender
// accepts at once, InitiatorDepth those it issues at once.
type ConnParam struct {
	QPN                uint32
	StartingPSN        qp.PSN
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8 // REQ only: transport retries (3 bits)
	RNRRetryCount      uint8 // 3 bits, 7 = forever
	SRQ                bool
	// LocalAckTimeout is the REQ's local ACK timeout (4.096 µs * 2^n).
	LocalAckTimeout uint8
	PrivateData     []byte // at most 92 bytes in a REQ, 196 in a REP
	// QKey is a SIDR_REP's (UD): the Q_Key of its QPN.
	QKey uint32
}

// Path is the primary path of a connection, as the REQ names it.
type Path struct {
	SGID, DGID     netip.Addr // RoCEv2: IPv4-mapped or IPv6 addresses
	DMAC           [6]byte    // the next hop's Ethernet address
	HopLimit       uint8
	TrafficClass   uint8
	FlowLabel      uint32
	MTU            qp.MTU
	PKey           uint16
	PacketLifeTime uint8
}

// Port spaces (enum rdma_port_space) and the IBA service IDs of their
// ports (IBA Annex A11, RDMA IP CM service: 0x0000000001 PS PORT).
type PortSpace uint16

const (
	PSIPoIB PortSpace = 0x0002
	PSTCP   PortSpace = 0x0106
	PSUDP   PortSpace = 0x0111
	PSIB    PortSpace = 0x013F
)

// ServiceID is the service ID of port in ps (RDMA_IB_IP_PS_TCP | port).
func ServiceID(ps PortSpace, port uint16) uint64 {
	return uint64(ps)<<16 | uint64(port)
}
