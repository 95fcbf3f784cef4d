package dataplane

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/cc"
	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/recovery"
)

// This file is the engine's configuration: what a caller chooses (Config,
// RTOMode) and the defaults.

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
	// CC names the default congestion control of the NIC's QPs
	// (cc.Names(); "" is cc.None, no control: QPs run at the port's
	// speed, no frame is ECN-capable and no CNP is sent); a QP may ask for
	// another (QPInitAttr.CC). CCParams are its parameters: the line rate
	// it starts QPs at (0: LinkRate, else cc.DefaultLineRate) and every
	// algorithm's knobs (docs/cc.md).
	CC       string
	CCParams cc.Params
	// MaxUnackedPSNs bounds the PSNs a QP has sent and not yet seen
	// acknowledged (QPInitAttr.MaxUnackedPSNs overrides it per QP); 0
	// means no bound beyond the scheme's own window. rxe stops at 128
	// (RXE_MAX_UNACKED_PSNS): with a bound, go-back-N resends at most
	// that many packets per go-back, where without one it resends every
	// PSN of the send queue (docs/transport.md, "Unacknowledged PSNs").
	MaxUnackedPSNs int
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
	// ServiceRate, in bits/s, gives the NIC's receive and transmit
	// pipelines a service time (docs/recovery.md, "Service time"): each
	// frame occupies its pipeline for the frame's wire time at this rate
	// (WireBytes, as the emulated link counts it), and the next frame
	// waits until it is done, with no credit for idle time. A stall (a
	// context miss, a scheme's host-memory access) then idles pipelines
	// that run at the line rate and its time is lost, as on an FPGA, not
	// made up afterwards by an infinitely fast engine or the link's burst.
	// Received frames that arrive meanwhile wait in the port's receive
	// queue (on the fabric: the link's queue, then back-pressure); a
	// transmit round that finds its pipeline busy ends as a paced one
	// (link_paced). 0, the default: frames take no time, and a stall only
	// delays the frames queued behind it.
	ServiceRate uint64
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
	// StarServer makes the NIC serve StaR's stateless data packets (StaR
	// §3, docs/star.md "Server data path"; star.go): an RDP is placed and
	// answered with an RA, a GD with SDPs, with no QP and no per-connection
	// state, checked only against the NIC's memory regions (key, bounds,
	// access; no protection domain: the server trusts its clients'
	// security tables, StaR §3.2). Off, the default: StaR packets are
	// dropped like any opcode an RC QP does not take.
	StarServer bool
	// StarEgressFrames is the depth, in frames, of the port's egress
	// queue for a stateless server's answers (RAs and SDPs): one that
	// finds the link's bucket empty or the transmit ring full waits there,
	// in order, as in a NIC's port buffer; one that finds the queue full
	// is dropped (star_tx_drops). It is the port's, shared by every
	// connection, not per-connection state. 0: DefaultStarEgressFrames;
	// negative: none (every such answer is dropped).
	StarEgressFrames int
	// PFC makes the NIC honour 802.1Qbb priority flow control (pfc.go):
	// a PFC frame received whose priority-enable vector has PFCPriority's
	// bit stops the NIC from starting any frame for that priority's time
	// (quanta of 512 bit times), 0 resumes it, and every frame replaces
	// the pause in force; the frames wait, none is dropped. softnic's
	// frames are untagged, so PFCPriority (0-7) is the priority the switch
	// puts them in (RoCE's is usually 3). Off, the default, every MAC
	// Control frame is counted in rx_pause_ignored and changes nothing;
	// the embedded fabric never delivers one (its switch pauses the host
	// port itself).
	PFC         bool
	PFCPriority int
	// PFCRate is the port speed, bits/s, pause quanta are counted at when
	// LinkRate is 0 (with LinkRate set, the emulated link's rate is the
	// port's). 0: DefaultPFCRate, 10 Gb/s.
	PFCRate uint64
	// RTTOffChip leaves the adaptive RTO's round-trip estimate out of the
	// on-chip context's size (rttOnChipBytes, 16 B per QP): the timeouts
	// still follow the path, but the context cache is charged only the base
	// context and the scheme's state, as for a NIC with fixed timeouts.
	// It models the papers' NICs, none of which keeps such an estimate
	// (FaSR §V-A: SRNIC's context is 256 + 12 B), in the QP sweep that
	// needs adaptive timeouts to survive a thrashing NIC. Off, the default:
	// the estimate is charged.
	RTTOffChip bool
}

// DefaultStarEgressFrames is the default depth of a StaR server's egress
// queue: 256 frames, half a megabyte of 2 KiB SDPs, the order of a NIC
// port's buffer, and about 40 ms of the testbed's 100 Mb/s link.
const DefaultStarEgressFrames = 256

// RTOMode says where retransmission timeouts come from.
type RTOMode uint8

const (
	// RTOFixed: the scheme's fixed values (recovery.Params RTOLow and
	// RTOHigh, go-back-N's negotiated ACK timeout). The default, and what
	// the embedded fabric and its sweeps use.
	RTOFixed RTOMode = iota
	// RTOAdaptive: each QP's smoothed round trip (RFC 6298), the fixed
	// values until its first sample.
	RTOAdaptive
)

func (m RTOMode) String() string {
	switch m {
	case RTOFixed:
		return "fixed"
	case RTOAdaptive:
		return "adaptive"
	}
	return fmt.Sprintf("RTOMode(%d)", uint8(m))
}

// Set parses s (flag.Value).
func (m *RTOMode) Set(s string) error {
	v, err := ParseRTOMode(s)
	if err == nil {
		*m = v
	}
	return err
}

// ParseRTOMode reads "fixed" or "adaptive".
func ParseRTOMode(s string) (RTOMode, error) {
	switch s {
	case "fixed":
		return RTOFixed, nil
	case "adaptive":
		return RTOAdaptive, nil
	}
	return 0, fmt.Errorf("dataplane: RTO mode %q: want fixed or adaptive", s)
}

const (
	defaultRxBatch = 64
	defaultTxBurst = 16
	// defaultPKey is the full-membership default partition.
	defaultPKey = 0xFFFF
)
