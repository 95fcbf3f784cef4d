package cmservice

import (
	"net/netip"

	"github.com/softnic/softnic/qp"
)

// The seam librdmacm's state machine (package verbs/rdmacm, on another
// branch) consumes, with the same shapes: Service, Listener, Conn,
// Handler, Event and its kinds, ConnParam, Path. Once that package is
// merged, this file becomes type aliases of it (type Service =
// rdmacm.Service, ...) and *CM satisfies rdmacm.Service unchanged.

// Listener is one Listen registration.
type Listener interface {
	// Close stops the REQs; connections already requested live on.
	Close() error
}

// Conn is one connection of the CM, from its REQ to its time wait.
type Conn interface {
	Accept(p ConnParam, h Handler) error
	Reject(reason uint16, privateData []byte) error
	RTU() error
	CommEstablished() error
	Disconnect(privateData []byte) error
	Close()
}

// Handler receives a Service's events.
type Handler func(Event)

// EventKind is what arrived.
type EventKind int

const (
	EventRequest EventKind = iota + 1
	EventReply
	EventEstablished
	EventRejected
	EventUnreachable
	EventDisconnected
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
	Status      int       // a negative errno (-ETIMEDOUT), or 0
}

// ConnParam is what a REQ or a REP carries for rdma_cm.
type ConnParam struct {
	QPN                uint32
	StartingPSN        qp.PSN
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                bool
	LocalAckTimeout    uint8
	PrivateData        []byte
}

// Path is the primary path of a connection, as the REQ names it.
type Path struct {
	SGID, DGID     netip.Addr
	DMAC           [6]byte
	HopLimit       uint8
	TrafficClass   uint8
	FlowLabel      uint32
	MTU            qp.MTU
	PKey           uint16
	PacketLifeTime uint8
}
