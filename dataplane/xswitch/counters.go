package xswitch

import (
	"fmt"
	"iter"

	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/dataplane/netsw"
)

// portCounters are what the forwarding core counts on one port itself;
// the queue's own counters (netsw.PortStats) are read beside them.
type portCounters struct {
	rxFrames, rxBytes, txFrames, txBytes uint64
	// Received frames dropped before any queue, by reason (ingress port).
	malformed        uint64 // shorter than its headers, or longer than a pool frame
	notIP            uint64 // neither IPv4, IPv6 nor MAC Control
	macControlOther  uint64 // MAC Control but not PFC (802.3x PAUSE, ...)
	pfcOtherPriority uint64 // PFC for other priorities only
	noRoute          uint64
	noNeighbour      uint64
	ttlExpired       uint64
	tooBig           uint64 // longer than the egress port's largest frame (DF: no fragmenting)
	// Event injection (ingress port).
	inj inject.Counts
	// Egress.
	pfcTxFrames uint64 // PFC frames sent (pauses, refreshes, resumes)
	txRingFull  uint64 // a frame (or PFC frame) found the transmit ring full
}

// PortCounters are one port's counters: the forwarding core's and its
// queue's (netsw), as Snapshot reads them.
type PortCounters struct {
	RxFrames, RxBytes, TxFrames, TxBytes uint64
	Malformed, NotIP, MACControlOther    uint64
	PFCOtherPriority                     uint64
	NoRoute, NoNeighbour, TTLExpired     uint64
	TooBig                               uint64
	InjectDropped, InjectMarked          uint64
	InjectCorrupted, InjectDelayed       uint64
	InjectDuplicated                     uint64
	PFCTxFrames, TxRingFull              uint64
	Queue                                netsw.PortStats
	// The egress queue's occupancy as arriving frames found it, 50th
	// and 99th percentiles (netsw.OccupancyQuantile; since
	// Config.OccupancyAfter if set). Total has the largest port's.
	QueueP50Bytes, QueueP99Bytes int
}

// Counters are the switch's counters: per port, and Total, their sum
// (the queue gauges summed too; MaxQueueBytes is the largest port's).
type Counters struct {
	Ports []PortCounters
	Total PortCounters
}

// Snapshot reads every counter. Safe from any goroutine; it waits for a
// Poll in progress.
func (s *Switch) Snapshot() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counters{Ports: make([]PortCounters, len(s.ports))}
	for i := range s.ports {
		pc := &s.ports[i].c
		c.Ports[i] = PortCounters{
			RxFrames: pc.rxFrames, RxBytes: pc.rxBytes, TxFrames: pc.txFrames, TxBytes: pc.txBytes,
			Malformed: pc.malformed, NotIP: pc.notIP, MACControlOther: pc.macControlOther,
			PFCOtherPriority: pc.pfcOtherPriority,
			NoRoute:          pc.noRoute, NoNeighbour: pc.noNeighbour, TTLExpired: pc.ttlExpired, TooBig: pc.tooBig,
			InjectDropped: pc.inj.Dropped, InjectMarked: pc.inj.Marked, InjectCorrupted: pc.inj.Corrupted,
			InjectDelayed: pc.inj.Delayed, InjectDuplicated: pc.inj.Duplicated,
			PFCTxFrames: pc.pfcTxFrames, TxRingFull: pc.txRingFull,
			Queue:         s.q.Stats(i),
			QueueP50Bytes: s.q.OccupancyQuantile(i, 0.5),
			QueueP99Bytes: s.q.OccupancyQuantile(i, 0.99),
		}
		c.Total.add(&c.Ports[i])
	}
	return c
}

func (t *PortCounters) add(p *PortCounters) {
	for i, v := range p.values() {
		*t.field(i) += v
	}
	t.Queue.Add(&p.Queue)
	t.QueueP50Bytes = max(t.QueueP50Bytes, p.QueueP50Bytes)
	t.QueueP99Bytes = max(t.QueueP99Bytes, p.QueueP99Bytes)
}

// coreNames name the core's own counters, in the order of values.
var coreNames = [...]string{
	"rx_frames", "rx_bytes", "tx_frames", "tx_bytes",
	"malformed", "not_ip", "mac_control_other", "pfc_other_priority",
	"no_route", "no_neighbour", "ttl_expired", "too_big",
	"inject_dropped", "inject_marked", "inject_corrupted", "inject_delayed", "inject_duplicated",
	"pfc_tx_frames", "tx_ring_full",
}

func (p *PortCounters) values() [len(coreNames)]uint64 {
	return [...]uint64{
		p.RxFrames, p.RxBytes, p.TxFrames, p.TxBytes,
		p.Malformed, p.NotIP, p.MACControlOther, p.PFCOtherPriority,
		p.NoRoute, p.NoNeighbour, p.TTLExpired, p.TooBig,
		p.InjectDropped, p.InjectMarked, p.InjectCorrupted, p.InjectDelayed, p.InjectDuplicated,
		p.PFCTxFrames, p.TxRingFull,
	}
}

func (p *PortCounters) field(i int) *uint64 {
	return [...]*uint64{
		&p.RxFrames, &p.RxBytes, &p.TxFrames, &p.TxBytes,
		&p.Malformed, &p.NotIP, &p.MACControlOther, &p.PFCOtherPriority,
		&p.NoRoute, &p.NoNeighbour, &p.TTLExpired, &p.TooBig,
		&p.InjectDropped, &p.InjectMarked, &p.InjectCorrupted, &p.InjectDelayed, &p.InjectDuplicated,
		&p.PFCTxFrames, &p.TxRingFull,
	}[i]
}

// All yields the port's counters as (name, value) in a fixed order: the
// core's, then its queue's with netsw's names (forwarded is what the
// queue took, dropped_<reason> what it refused; queue_bytes,
// max_queue_bytes and queue_p50_bytes, queue_p99_bytes are gauges).
func (p *PortCounters) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for i, v := range p.values() {
			if !yield(coreNames[i], v) {
				return
			}
		}
		q := &p.Queue
		for _, c := range []struct {
			name string
			v    uint64
		}{
			{"forwarded", q.Enqueued}, {"forwarded_bytes", q.EnqueuedBytes},
			{"dequeued", q.Dequeued}, {"dequeued_bytes", q.DequeuedBytes},
			{"dropped", q.Dropped}, {"dropped_bytes", q.DroppedBytes},
			{"dropped_queue_full", q.DroppedBy[netsw.DropQueueFull]},
			{"dropped_threshold", q.DroppedBy[netsw.DropThreshold]},
			{"dropped_buffer_full", q.DroppedBy[netsw.DropBufferFull]},
			{"dropped_headroom", q.DroppedBy[netsw.DropHeadroom]},
			{"ecn_marked", q.ECNMarked}, {"not_ect", q.NotECT},
			{"pauses_sent", q.PausesSent}, {"resumes_sent", q.ResumesSent},
			{"pauses_received", q.PausesReceived}, {"resumes_received", q.ResumesReceived},
			{"queue_bytes", uint64(q.QueueBytes)}, {"max_queue_bytes", uint64(q.MaxQueueBytes)},
			{"queue_p50_bytes", uint64(p.QueueP50Bytes)}, {"queue_p99_bytes", uint64(p.QueueP99Bytes)},
		} {
			if !yield(c.name, c.v) {
				return
			}
		}
	}
}

// All yields every counter as (name, value): the totals under their own
// names (rx_frames, no_route, ...), then each port's prefixed port<i>_
// (port0_rx_frames, ...).
func (c *Counters) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for name, v := range c.Total.All() {
			if !yield(name, v) {
				return
			}
		}
		for i := range c.Ports {
			prefix := fmt.Sprintf("port%d_", i)
			for name, v := range c.Ports[i].All() {
				if !yield(prefix+name, v) {
					return
				}
			}
		}
	}
}
