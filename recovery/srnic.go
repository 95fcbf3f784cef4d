package recovery

import (
	"time"

	"github.com/softnic/softnic/qp"
)

// SRNIC is the selective repeat of "SRNIC: A Scalable Architecture for
// RDMA NICs" (Wang et al., NSDI 2023) as FaSR describes its main baseline
// (paper 004, §I, §II, §V-A): IRN's selective repeat, with the bitmaps
// kept in host memory instead of on chip. A QP keeps 12 B of SR state on
// chip; the NIC's pipeline stalls for a host access (1.2 µs, FaSR §V-A,
// knob srnic.host_latency) each time it needs the host bitmap, which is when
//
//   - the receiver moves its expected PSN (RCV-NXT) while packets are kept
//     out of order beyond it: a retransmission filled the hole, and the
//     walk over the packets that arrived early reads the bitmap (§II:
//     "the receiver needs to pause the pipeline to wait for the CPU's
//     bitmap query results after receiving the retransmitted packet");
//   - the sender collects a PSN to resend (§V-C: "collecting retx PSN"),
//     once per retransmitted packet.
//
// Recording an out-of-order packet and taking a SACK are posted writes to
// host memory and cost no stall (§V-C, Fig. 9(a)). Everything else,
// loss detection, BDP-FC, the two timeouts and the wire format (NACKs
// with a selective acknowledgement), is IRN's (irn.go).
const SRNIC = "srnic"

func init() { Register(SRNIC, func(p Params) Scheme { return srnicScheme{irn: irnScheme{p: p}} }) }

// srnicHostLatency is SRNIC's knob srnic.host_latency: one access of its
// bitmaps in host memory, the pipeline stall it costs.
var srnicHostLatency = DurationKnob(SRNIC, "host_latency", DefaultHostLatency, 0, time.Second,
	"pipeline stall of one access of SRNIC's bitmaps in host memory (FaSR §V-A: 1.2us)")

// SR state on chip, per QP (FaSR §V-A: "SRNIC adds 12B of state
// overhead per QP"). The paper gives only the total; softnic charges half
// to each end: the receiver's RCV-NXT shadow and count of packets kept,
// the sender's next PSN to resend and recovery sequence.
const (
	srnicSenderBytes   = 6
	srnicReceiverBytes = 6
)

type srnicScheme struct {
	NoStats
	irn irnScheme
}

func (s srnicScheme) Name() string           { return SRNIC }
func (s srnicScheme) Params() Params         { return s.irn.p }
func (s srnicScheme) SharedOnChipBytes() int { return s.irn.SharedOnChipBytes() }
func (s srnicScheme) ReorderWindow() int     { return s.irn.ReorderWindow() }
func (s srnicScheme) Caps() Caps             { return s.irn.Caps() }
func (s srnicScheme) host() (*HostMemory, time.Duration) {
	return s.irn.p.Host, srnicHostLatency(s.irn.p)
}

func (s srnicScheme) NewSender() Sender {
	h, lat := s.host()
	return &srnicSender{irnSender: s.irn.NewSender().(*irnSender), host: h, latency: lat}
}

func (s srnicScheme) NewReceiver() Receiver {
	h, lat := s.host()
	return &srnicReceiver{irnReceiver: s.irn.NewReceiver().(*irnReceiver), host: h, latency: lat}
}

// srnicSender is IRN's sender whose SACK bitmaps live in host memory.
type srnicSender struct {
	*irnSender
	host    *HostMemory
	latency time.Duration
}

// Retransmitted: finding the PSN to resend read the host bitmap.
func (s *srnicSender) Retransmitted(psn qp.PSN) {
	s.host.Access(s.latency)
	s.irnSender.Retransmitted(psn)
}

// RetransmittedAt is srnicSender's Retransmitted (irnSender's would skip
// the host access).
func (s *srnicSender) RetransmittedAt(_ Time, psn, _ qp.PSN) { s.Retransmitted(psn) }

func (s *srnicSender) OnChipBytes() int { return srnicSenderBytes }

// srnicReceiver is IRN's receiver whose 2-bitmap lives in host memory; on
// chip it counts the packets kept beyond the expected PSN, so that it
// knows when moving the expected PSN needs the bitmap.
type srnicReceiver struct {
	*irnReceiver
	kept    int // packets kept out of order at or after base
	host    *HostMemory
	latency time.Duration
}

func (r *srnicReceiver) Reset(start qp.PSN) {
	r.irnReceiver.Reset(start)
	r.kept = 0
}

func (r *srnicReceiver) OnOutOfSequence(now Time, epsn, psn qp.PSN, last bool) Decision {
	r.OnInSequence(now, epsn)
	act := r.irnReceiver.OnOutOfSequence(now, epsn, psn, last)
	if act.Keep {
		r.kept++
	}
	return act
}

// OnInSequence: the expected PSN moved to epsn. With packets kept beyond
// the old one, the walk that moved it read the host bitmap.
func (r *srnicReceiver) OnInSequence(now Time, epsn qp.PSN) {
	if !epsn.After(r.base) {
		return
	}
	if r.kept > 0 {
		r.host.Access(r.latency)
		if int(epsn.Diff(r.base)) >= r.window {
			r.kept = 0
		} else {
			for p := r.base; p != epsn; p = p.Next() {
				if r.arrived.get(p) {
					r.kept--
				}
			}
		}
	}
	r.irnReceiver.OnInSequence(now, epsn)
}

func (r *srnicReceiver) OnChipBytes() int { return srnicReceiverBytes }
