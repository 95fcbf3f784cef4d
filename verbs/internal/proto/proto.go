// Package proto is the control protocol between a verbs client and the
// softnic daemon (package verbsd): one JSON object per SOCK_SEQPACKET
// message, file descriptors attached with SCM_RIGHTS. A client sends a
// request and waits for its response before sending the next, so the
// protocol needs no multiplexing; the id only catches a confused peer.
//
// Only control operations travel here. Work requests and completions
// move through shared-memory rings (package shm) and never touch the
// socket. docs/verbs-ipc.md lists every message.
//
// The package does not import the engine (package dataplane), so that what
// a client links for the protocol stays small: the conversions between the
// wire forms here and the engine's types, and the wire codes of the
// engine's errors, are in package protoconv.
package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/qp"
)

// Version is the protocol version a client announces at hello. A daemon
// serves clients of MinVersion to Version: version 2 added the per-QP
// loss-recovery scheme (create_qp's scheme, set_qp_scheme, query_device's
// schemes), which a version-1 client never asks for. A version-1 daemon
// refuses a version-2 client at hello, so a client's scheme request can
// never be silently ignored by a daemon that does not know it. Version 3
// added completion channels (create_comp_channel, destroy_comp_channel,
// create_cq's channel) and the CQ file's arm and event words; older
// clients never send them, and a daemon of version 3 serves them as
// before. Version 4 added the receive impairment (netem, set_netem), which
// older clients never ask for. Version 5 added StaR's stateless mode
// (create_qp's star role, star_table, query_device's
// star_server): a version-4 daemon refuses a version-5 client at hello,
// so a StaR role is never silently dropped. Version 6 added Unreliable
// Datagram (create_qp's qp_type, create_ah, destroy_ah, modify_qp's
// qkey): a version-5 daemon refuses a version-6 client at hello, so a UD
// QP is never silently made an RC QP. Version 7 added the communication
// manager on the NIC's QP1 (cm_* operations, cm.go); older clients never
// send them.
const (
	Version    = 7
	MinVersion = 1
)

// Operations.
const (
	OpHello       = "hello"
	OpQueryDevice = "query_device"
	OpStats       = "stats"
	OpAllocPD     = "alloc_pd"
	OpDeallocPD   = "dealloc_pd"
	OpRegMR       = "reg_mr"
	OpDeregMR     = "dereg_mr"
	OpCreateCQ    = "create_cq"
	OpDestroyCQ   = "destroy_cq"
	OpCreateQP    = "create_qp"
	OpModifyQP    = "modify_qp"
	OpQueryQP     = "query_qp"
	OpDestroyQP   = "destroy_qp"
	OpSetQPScheme = "set_qp_scheme" // version 2

	OpCreateCompChannel  = "create_comp_channel"  // version 3
	OpDestroyCompChannel = "destroy_comp_channel" // version 3

	OpNetem    = "netem"     // version 4: the receive impairment in force
	OpSetNetem = "set_netem" // version 4: change it (root or the daemon's uid)

	OpStarTable = "star_table" // version 5: a StaR server QP's memory table

	OpCreateAH  = "create_ah"  // version 6: an address handle (UD)
	OpDestroyAH = "destroy_ah" // version 6: takes the Handle
	// Shared receive queues and asynchronous events (srq.go).
	OpCreateSRQ      = "create_srq"
	OpModifySRQ      = "modify_srq"
	OpQuerySRQ       = "query_srq"
	OpDestroySRQ     = "destroy_srq"
	OpPostSRQRecv    = "post_srq_recv"
	OpAsyncFD        = "async_fd"
	OpGetAsyncEvents = "get_async_events"

	// Version 7: the communication manager on QP1 (cm.go).
	OpCMCreateChannel  = "cm_create_channel"  // a CM event channel: its eventfd, readable while events wait
	OpCMDestroyChannel = "cm_destroy_channel" // closes the channel's listeners and connections
	OpCMGetEvents      = "cm_get_events"      // takes the channel's queued events
	OpCMListen         = "cm_listen"
	OpCMUnlisten       = "cm_unlisten"
	OpCMConnect        = "cm_connect" // sends a REQ
	OpCMAccept         = "cm_accept"  // sends a REP
	OpCMReject         = "cm_reject"
	OpCMRTU            = "cm_rtu"
	OpCMEstablished    = "cm_established"
	OpCMDisconnect     = "cm_disconnect" // sends a DREQ
	OpCMDestroy        = "cm_destroy"    // ib_destroy_cm_id: REJ, DREQ or nothing, by state
	OpCMInfo           = "cm_info"

	// SIDR (UD service resolution, rdma_cm's UDP port space; cm.go).
	OpCMSIDRResolve = "cm_sidr_resolve" // sends a SIDR_REQ
	OpCMSIDRReply   = "cm_sidr_reply"   // answers a SIDR_REQ with a SIDR_REP
)

// Request is what a client sends.
type Request struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response answers the request with the same id: Error or Result.
type Response struct {
	ID     uint64          `json:"id"`
	Error  *Error          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// HelloArgs opens a session; it must be the first request.
type HelloArgs struct {
	Version int    `json:"version"`
	ABI     uint64 `json:"abi"` // shm.Fingerprint of the ring entry layout
}

// HelloResult comes with two descriptors, the device page (map it
// read-only) and this client's doorbell eventfd, and from version 2 on a
// third: the client's doorbell file (shm.Bells), in which it marks the
// QPs it published work for.
type HelloResult struct {
	Device Device `json:"device"`
	Client uint64 `json:"client"` // connection number, for logs
}

// Device is query_device's result (struct ibv_device_attr, the part that
// matters here, plus the port's GID and MAC).
type Device struct {
	Name        string     `json:"name"`
	GID         netip.Addr `json:"gid"` // RoCEv2: the port's IP address
	MAC         [6]byte    `json:"mac"`
	Scheme      string     `json:"scheme"`            // loss recovery of QPs that do not ask for one
	Schemes     []string   `json:"schemes,omitempty"` // the schemes a QP may ask for (version 2)
	MaxQPWR     int        `json:"max_qp_wr"`
	MaxCQE      int        `json:"max_cqe"`
	MaxSGE      int        `json:"max_sge"`
	MaxQPRdAtom int        `json:"max_qp_rd_atom"`
	// StarServer: the NIC serves StaR's stateless packets (softnic run
	// --star-server), so that it can hold StaR server QPs (version 5).
	StarServer bool `json:"star_server,omitempty"`
}

// Counter is one engine statistic.
type Counter struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// StatsResult lists the counters in display order.
type StatsResult struct {
	Counters []Counter `json:"counters"`
}

// NetemArgs is set_netem's request (version 4): a Spec in netem's words
// (package dataplane/impair), "" to remove the impairment. Only a client
// of uid 0 or the daemon's own uid (SO_PEERCRED) may send it; others get
// ErrPermission. netem takes no arguments.
type NetemArgs struct {
	Spec string `json:"spec"`
}

// NetemResult is the impairment in force, in canonical netem words ("" for
// none), with the seed the daemon chose when the request gave none.
type NetemResult struct {
	Spec string `json:"spec"`
}

// Handle names a PD, MR, CQ or QP of this connection.
type Handle struct {
	Handle uint32 `json:"handle"`
}

// RegMRArgs comes with the memfd holding the region.
type RegMRArgs struct {
	PD     uint32    `json:"pd"`
	Addr   uint64    `json:"addr"`   // client virtual address of the first byte: the MR's address
	Offset int64     `json:"offset"` // of the first byte in the memfd
	Length int64     `json:"length"`
	Access qp.Access `json:"access"`
}

// RegMRResult are the region's keys.
type RegMRResult struct {
	Handle uint32 `json:"handle"`
	LKey   uint32 `json:"lkey"`
	RKey   uint32 `json:"rkey"`
}

// CreateCQArgs asks for a CQ of at least CQE entries.
type CreateCQArgs struct {
	CQE int `json:"cqe"`
	// Channel is the handle of the completion channel the CQ's events go
	// to (version 3); 0: none.
	Channel uint32 `json:"channel,omitempty"`
}

// CreateCompChannel's result is a Handle and comes with one descriptor:
// the channel's eventfd, which the daemon's pump writes when a CQ of the
// channel that the client armed (in the CQ file) gets a qualifying
// completion. destroy_comp_channel takes the Handle (version 3).

// CreateCQResult comes with the ring memfd (Size bytes, shm.CQLayout for
// Cap entries).
type CreateCQResult struct {
	Handle uint32 `json:"handle"`
	Cap    uint32 `json:"cap"`
	Size   int    `json:"size"`
}

// CreateQPArgs is ibv_qp_init_attr for RC.
type CreateQPArgs struct {
	PD        uint32 `json:"pd"`
	SendCQ    uint32 `json:"send_cq"`
	RecvCQ    uint32 `json:"recv_cq"`
	MaxSendWR int    `json:"max_send_wr"`
	MaxRecvWR int    `json:"max_recv_wr"`
	SigAll    bool   `json:"sq_sig_all"`
	// Scheme is the QP's loss recovery; "" is the daemon's default
	// (version 2; a softnic extension, like a vendor create_qp_ex
	// attribute).
	Scheme string `json:"scheme,omitempty"`
	// CC is the QP's congestion control (docs/cc.md); "" is the daemon's
	// (softnic run --cc). A softnic extension like Scheme; a daemon that
	// predates it ignores it and runs its own.
	CC string `json:"cc,omitempty"`
	// Star is the QP's StaR role (dataplane.StarRole: 0 none, 1 server, 2
	// client; version 5, a softnic extension like Scheme).
	Star uint8 `json:"star,omitempty"`
	// MaxUnackedPSNs bounds the QP's unacknowledged PSNs (0: the
	// daemon's, softnic run --max-unacked-psns); a softnic extension like
	// Scheme, which a daemon that predates it ignores.
	MaxUnackedPSNs int `json:"max_unacked_psns,omitempty"`
	// Type is the QP's transport service (ibv_qp_type: 0 or 2 RC, 4 UD;
	// version 6).
	Type uint8 `json:"qp_type,omitempty"`
	// SRQ is the handle of the shared receive queue the QP takes its
	// receive WQEs from (0: none; create_srq).
	SRQ uint32 `json:"srq,omitempty"`
}

// CreateAHArgs is ibv_create_ah's attributes (version 6): the
// destination GID (its IP address) and MAC (zero: the daemon resolves it
// from its NIC's neighbours, or refuses), the IP header's traffic class,
// hop limit and flow label, the source GID index.
type CreateAHArgs struct {
	PD           uint32     `json:"pd"`
	DGID         netip.Addr `json:"dgid"`
	DMAC         [6]byte    `json:"dmac"`
	TrafficClass uint8      `json:"traffic_class"`
	HopLimit     uint8      `json:"hop_limit"`
	FlowLabel    uint32     `json:"flow_label"`
	SGIDIndex    uint8      `json:"sgid_index"`
}

// CreateAHResult names the AH: Handle on this connection (destroy_ah),
// AH the engine's number that send work requests carry (qp.SendWR.AH),
// DMAC the destination MAC in use.
type CreateAHResult struct {
	Handle uint32  `json:"handle"`
	AH     uint32  `json:"ah"`
	DMAC   [6]byte `json:"dmac"`
}

// StarRegion is one entry of a StaR server's memory table
// (dataplane.StarRegion).
type StarRegion struct {
	RKey   uint32    `json:"rkey"`
	VA     uint64    `json:"va"`
	Length uint64    `json:"length"`
	Access qp.Access `json:"access"`
}

// MaxStarRegions bounds a memory table on the wire (star_table's result).
const MaxStarRegions = 1024

// StarTableResult is star_table's result (version 5; the request is the
// server QP's Handle).
type StarTableResult struct {
	Regions []StarRegion `json:"regions"`
}

// CreateQPResult comes with the ring memfd (Size bytes, shm.QPLayout for
// the two capacities).
type CreateQPResult struct {
	Handle uint32 `json:"handle"`
	QPN    uint32 `json:"qpn"`
	SQCap  uint32 `json:"sq_cap"`
	RQCap  uint32 `json:"rq_cap"`
	Size   int    `json:"size"`
	Scheme string `json:"scheme"` // the loss recovery the QP runs (version 2)
	Bell   uint32 `json:"bell"`   // the QP's slot in the doorbell file (version 2)
	// UDMTU is a UD QP's largest message, the port's MTU in bytes
	// (version 6), which the client checks sends against.
	UDMTU int `json:"ud_mtu,omitempty"`
}

// SetQPSchemeArgs changes a QP's loss recovery while it is in RESET or
// INIT (version 2); the result is SchemeResult.
type SetQPSchemeArgs struct {
	QP     uint32 `json:"qp"`
	Scheme string `json:"scheme"` // "" is the daemon's default
}

// SchemeResult names the loss recovery a QP runs.
type SchemeResult struct {
	Scheme string `json:"scheme"`
}

// ModifyQPArgs is ibv_modify_qp.
type ModifyQPArgs struct {
	QP   uint32      `json:"qp"`
	Attr QPAttr      `json:"attr"`
	Mask qp.AttrMask `json:"mask"`
}

// QPAttr is the engine's QP attributes (dataplane.QPAttr, with the address
// vector flattened) under stable wire names (ibv_qp_attr's).
type QPAttr struct {
	State           qp.State   `json:"qp_state"`
	CurState        qp.State   `json:"cur_qp_state"`
	AccessFlags     qp.Access  `json:"qp_access_flags"`
	PKeyIndex       uint16     `json:"pkey_index"`
	Port            uint8      `json:"port_num"`
	DGID            netip.Addr `json:"dgid"`
	DMAC            [6]byte    `json:"dmac"`
	TrafficClass    uint8      `json:"traffic_class"`
	HopLimit        uint8      `json:"hop_limit"`
	FlowLabel       uint32     `json:"flow_label"`
	PathMTU         qp.MTU     `json:"path_mtu"`
	DestQPN         uint32     `json:"dest_qp_num"`
	RQPSN           qp.PSN     `json:"rq_psn"`
	SQPSN           qp.PSN     `json:"sq_psn"`
	MaxDestRdAtomic uint8      `json:"max_dest_rd_atomic"`
	MaxRdAtomic     uint8      `json:"max_rd_atomic"`
	MinRNRTimer     uint8      `json:"min_rnr_timer"`
	Timeout         uint8      `json:"timeout"`
	RetryCnt        uint8      `json:"retry_cnt"`
	RNRRetry        uint8      `json:"rnr_retry"`
	QKey            uint32     `json:"qkey,omitempty"` // UD (version 6)
}

// Error is a failed request: a stable code (so that the client can
// rebuild an error that errors.Is the same sentinel the engine returned
// in embedded mode) and the daemon's message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

var (
	// ErrBadHandle: the handle names no object of this connection
	// (objects of other clients are invisible, not forbidden).
	ErrBadHandle = errors.New("verbs: no such object on this connection")
	// ErrClosed: the object or the context was already destroyed.
	ErrClosed = errors.New("verbs: object already destroyed")
	// ErrProtocol: a malformed or out-of-order message.
	ErrProtocol = errors.New("verbs: control protocol error")
	// ErrLimit: the request would exceed one of the daemon's per-client
	// limits (the message names it and the flag that raises it).
	ErrLimit = errors.New("verbs: limit")
	// ErrPermission: the client's uid may not make this request
	// (set_netem: only root or the daemon's uid).
	ErrPermission = errors.New("verbs: permission denied")
)

// A Code names a sentinel error on the wire.
type Code struct {
	Code string
	Err  error
}

// Codes maps sentinels to wire codes, most specific first. Both ends of a
// connection must use the same table: protoconv.Codes, which is Base and
// the engine's sentinels.
type Codes []Code

// Base are the codes of this package's own sentinels.
var Base = Codes{
	{"bad_handle", ErrBadHandle},
	{"closed", ErrClosed},
	{"protocol", ErrProtocol},
	{"limit", ErrLimit},
	{"permission", ErrPermission},
}

// Encode turns err into its wire form: the code of the first sentinel in
// cs that err matches (errors.Is), or "error".
func (cs Codes) Encode(err error) *Error {
	for _, c := range cs {
		if errors.Is(err, c.Err) {
			return &Error{Code: c.Code, Message: err.Error()}
		}
	}
	return &Error{Code: "error", Message: err.Error()}
}

// RemoteError is a daemon's error rebuilt on the client: its message is
// the daemon's, and it unwraps to the sentinel its code names.
type RemoteError struct {
	Code, Message string
	sentinel      error
}

func (e *RemoteError) Error() string { return e.Message }
func (e *RemoteError) Unwrap() error { return e.sentinel }

// Decode rebuilds the error e carries, unwrapping to the sentinel of cs
// its code names (none for a code cs does not have).
func (cs Codes) Decode(e *Error) error {
	r := &RemoteError{Code: e.Code, Message: e.Message}
	for _, c := range cs {
		if c.Code == e.Code {
			r.sentinel = c.Err
		}
	}
	return r
}

// Limits of one message.
const (
	MaxMessage = 64 << 10
	MaxFDs     = 4
)

// Conn is one end of the control socket with its buffers. It is not safe
// for concurrent use; each side serialises its calls.
type Conn struct {
	C   *net.UnixConn
	buf []byte
	oob []byte
}

// NewConn wraps a SOCK_SEQPACKET connection.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{C: c, buf: make([]byte, MaxMessage), oob: make([]byte, unix.CmsgSpace(MaxFDs*4))}
}

// Send writes v as one message with fds attached. The fds stay open; the
// kernel duplicates them into the receiver.
func (c *Conn) Send(v any, fds ...int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("%w: message of %d bytes", ErrProtocol, len(b))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.C.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return err
	}
	if n != len(b) || oobn != len(oob) {
		return fmt.Errorf("%w: short write", ErrProtocol)
	}
	return nil
}

// Recv reads one message into v and returns the descriptors that came
// with it; the caller owns (and must close) them, even when err is not
// nil. A closed peer is io.EOF.
func (c *Conn) Recv(v any) (fds []int, err error) {
	n, oobn, flags, _, err := c.C.ReadMsgUnix(c.buf, c.oob)
	if oobn > 0 {
		fds = ParseRights(c.oob[:oobn])
	}
	if err != nil {
		return fds, err
	}
	if n == 0 && oobn == 0 {
		return fds, io.EOF // SOCK_SEQPACKET: a zero-length read is the peer's close
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return fds, fmt.Errorf("%w: message or descriptors truncated", ErrProtocol)
	}
	if err := json.Unmarshal(c.buf[:n], v); err != nil {
		return fds, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return fds, nil
}

// ParseRights returns the descriptors an SCM_RIGHTS control message carries.
func ParseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if r, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// CloseFDs closes every descriptor in fds that is not -1.
func CloseFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// MaxCQE is the deepest completion queue (dataplane.CreateCQ's limit).
const MaxCQE = 1 << 22
