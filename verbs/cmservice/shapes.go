package cmservice

import "github.com/softnic/softnic/verbs/rdmacm"

// The seam librdmacm's state machine (package verbs/rdmacm) consumes:
// its Service, Listener, Conn, Handler, Event and its kinds, ConnParam
// and Path, as aliases, so that *CM is an rdmacm.Service.

type (
	Service   = rdmacm.Service
	Listener  = rdmacm.Listener
	Conn      = rdmacm.Conn
	Handler   = rdmacm.Handler
	EventKind = rdmacm.EventKind
	Event     = rdmacm.Event
	ConnParam = rdmacm.ConnParam
	Path      = rdmacm.Path
)

const (
	EventRequest      = rdmacm.EventRequest
	EventReply        = rdmacm.EventReply
	EventEstablished  = rdmacm.EventEstablished
	EventRejected     = rdmacm.EventRejected
	EventUnreachable  = rdmacm.EventUnreachable
	EventDisconnected = rdmacm.EventDisconnected
	EventTimewaitExit = rdmacm.EventTimewaitExit
)

// *CM is a Service.
var _ Service = (*CM)(nil)
