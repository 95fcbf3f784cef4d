package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/recovery"
)

// metricSpec is how one counter of `softnic stats` appears in /metrics:
// Prometheus's conventions (a counter ends in _total, a value that goes
// down is a gauge, units are base units named at the end, a dimension is
// a label) over the stats' rxe-style names. docs/metrics.md is this
// table for people.
type metricSpec struct {
	metric string               // after softnic_; "" leaves the counter out of /metrics
	typ    prometheus.ValueType // CounterValue or GaugeValue
	scale  float64              // to the base unit (1e-9: nanoseconds to seconds); 0 is 1
	label  string               // a label the metric's series differ by, and this counter's value of it
	value  string
	// perQueue: on a port with receive queues (AF_XDP) the counter is
	// exported per queue, labelled queue, and its sum (the stats
	// value) not at all.
	perQueue bool
	help     string
}

func counterSpec(metric, help string) metricSpec {
	return metricSpec{metric: metric + "_total", typ: prometheus.CounterValue, help: help}
}

func gaugeSpec(metric, help string) metricSpec {
	return metricSpec{metric: metric, typ: prometheus.GaugeValue, help: help}
}

// nsCounterSpec is a count of nanoseconds, exported in seconds.
func nsCounterSpec(metric, help string) metricSpec {
	s := counterSpec(metric+"_seconds", help)
	s.scale = 1e-9
	return s
}

func nsGaugeSpec(metric, help string) metricSpec {
	s := gaugeSpec(metric+"_seconds", help)
	s.scale = 1e-9
	return s
}

// The CM's per-attribute counters, Linux's cm sysfs groups
// (cm_tx_msgs/<attr> ...): one metric per group, labelled attr.
func init() {
	for _, g := range []struct{ name, help string }{
		{"cm_tx_msgs", "CM MADs sent, first transmissions, by attribute (Linux cm_tx_msgs)."},
		{"cm_tx_retries", "CM MADs resent on timeout, by attribute (Linux cm_tx_retries)."},
		{"cm_rx_msgs", "CM MADs received that parsed, by attribute (Linux cm_rx_msgs)."},
		{"cm_rx_duplicates", "Duplicate CM MADs received, answered or ignored, by attribute (Linux cm_rx_duplicates)."},
	} {
		for _, a := range dataplane.CMAttrNames {
			metricSpecs[g.name+"_"+a] = labelled(counterSpec(g.name, g.help), "attr", a)
		}
	}
}

func labelled(s metricSpec, label, value string) metricSpec {
	s.label, s.value = label, value
	return s
}

// queued is a port counter that the AF_XDP port keeps per queue.
func queued(s metricSpec) metricSpec {
	s.perQueue = true
	return s
}

// metricSpecs are keyed by the stats name. The engine's rtt_samples and
// rtt_sample_ns_sum are one summary, softnic_rtt_seconds, and its pools
// (pool_<scheme>_<pool>_*) are labelled series: counterCollector makes
// those itself. The recovery schemes' counters (recovery.Counter) carry
// their own help and are counters: schemeCounterSpec.
var metricSpecs = map[string]metricSpec{
	// The engine: rxe's hw_counters, with rxe's meanings.
	"sent_pkts":              counterSpec("sent_pkts", "RoCEv2 packets sent: requests, responses, ACKs and NAKs, retransmissions included (rxe sent_pkts)."),
	"rcvd_pkts":              counterSpec("rcvd_pkts", "Received frames that parsed as RoCEv2 (rxe rcvd_pkts)."),
	"duplicate_request":      counterSpec("duplicate_request", "Requests received with a PSN already executed (rxe duplicate_request)."),
	"out_of_seq_request":     counterSpec("out_of_seq_request", "Requests received ahead of the expected PSN (rxe out_of_seq_request)."),
	"rcvd_rnr_err":           counterSpec("rcvd_rnr_err", "RNR NAKs received (rxe rcvd_rnr_err)."),
	"send_rnr_err":           counterSpec("send_rnr_err", "RNR NAKs sent: a SEND found no receive work request (rxe send_rnr_err)."),
	"rcvd_seq_err":           counterSpec("rcvd_seq_err", "PSN sequence error NAKs received (rxe rcvd_seq_err)."),
	"retry_exceeded_err":     counterSpec("retry_exceeded_err", "Work requests failed with RETRY_EXC_ERR, the QP's retry_cnt spent (rxe retry_exceeded_err)."),
	"retry_rnr_exceeded_err": counterSpec("retry_rnr_exceeded_err", "Work requests failed with RNR_RETRY_EXC_ERR, the QP's rnr_retry spent (rxe retry_rnr_exceeded_err, mlx5 rnr_nak_retry_err)."),
	"completer_retry_err":    counterSpec("completer_retry_err", "Retries spent: retransmission rounds started after a timeout or a NAK (rxe completer_retry_err)."),
	"rdma_sends":             counterSpec("rdma_sends", "SEND work requests completed, with or without immediate, in error too but not flushed (rxe rdma_sends)."),
	"rdma_recvs":             counterSpec("rdma_recvs", "Receive work requests completed successfully, by a SEND or a WRITE with immediate (rxe rdma_recvs)."),
	// mlx5's names where rxe has none.
	"local_ack_timeout_err":       counterSpec("local_ack_timeout_err", "Retransmission timeouts that fired with requests unacknowledged (mlx5 local_ack_timeout_err)."),
	"implied_nak_seq_err":         counterSpec("implied_nak_seq_err", "Implied NAKs: a READ response or atomic ACK showed that an earlier response was lost (mlx5 implied_nak_seq_err)."),
	"req_remote_access_errors":    counterSpec("req_remote_access_errors", "REM_ACCESS NAKs received (mlx5 req_remote_access_errors)."),
	"resp_remote_access_errors":   counterSpec("resp_remote_access_errors", "REM_ACCESS NAKs sent (mlx5 resp_remote_access_errors)."),
	"req_remote_invalid_request":  counterSpec("req_remote_invalid_request", "INV_REQ NAKs received (mlx5 req_remote_invalid_request)."),
	"resp_remote_invalid_request": counterSpec("resp_remote_invalid_request", "INV_REQ NAKs sent (mlx5 resp_remote_invalid_request)."),
	"resp_local_length_error":     counterSpec("resp_local_length_error", "Incoming messages longer than their receive work request (mlx5 resp_local_length_error)."),
	// softnic's own.
	"local_ack_timeout_last_lost":  counterSpec("local_ack_timeout_last_lost", "ACK timeouts of Improved go-back-N's reason 1: the tail of the message with its last packet was lost (embedded fabric only)."),
	"local_ack_timeout_ack_lost":   counterSpec("local_ack_timeout_ack_lost", "ACK timeouts of Improved go-back-N's reason 2: every request arrived and the ACK was lost (embedded fabric only)."),
	"local_ack_timeout_nak_lost":   counterSpec("local_ack_timeout_nak_lost", "ACK timeouts of Improved go-back-N's reason 3: the responder's NAK was lost (embedded fabric only)."),
	"local_ack_timeout_lost_twice": counterSpec("local_ack_timeout_lost_twice", "ACK timeouts of Improved go-back-N's reason 4: the NAKed packet was resent and lost again (embedded fabric only)."),
	"st_copy_skipped":              counterSpec("st_copy_skipped", "ST second copies not sent because the packet was acknowledged while the copy waited for ring space."),
	"go_back_free":                 counterSpec("go_back_free", "Go-backs on an implied or sequence NAK inside a go-back round still working, which spent no retry."),
	"resp_abandoned":               counterSpec("resp_abandoned", "READ response streams and atomic responses dropped from the response queue for a duplicate before them."),
	"tx_ring_full":                 counterSpec("tx_ring_full", "Packets that waited because the port's transmit ring was full."),
	"link_paced":                   counterSpec("link_paced", "Transmit rounds the emulated link rate ended (--link-rate), not counted in tx_ring_full."),
	"link_paced_ns":                nsCounterSpec("link_paced", "Time packets waited for the emulated link's token bucket."),
	"link_delay_drops":             {help: "The older name of impair_drops, in softnic stats only."},
	"tx_wire_bytes":                counterSpec("tx_wire_bytes", "Wire size of the frames sent: padded to 64 bytes, with FCS, preamble and inter-frame gap."),
	"seq_nak_sent":                 counterSpec("seq_nak_sent", "PSN sequence error NAKs sent."),
	"acks_sent":                    counterSpec("acks_sent", "ACKs sent."),
	"retransmitted_pkts":           counterSpec("retransmitted_pkts", "Request packets sent again."),
	// 802.1Qbb pauses received (--pfc), mlx5's rx_prio<N>_pause names
	// for the one priority the NIC honours.
	"rx_prio_pause":             counterSpec("rx_prio_pause", "PFC frames received for the honoured priority (--pfc-priority) with a pause time above 0: each starts or replaces a pause (mlx5 rx_prio<N>_pause)."),
	"rx_prio_pause_resume":      counterSpec("rx_prio_pause_resume", "PFC frames received for the honoured priority with time 0, which end a pause at once (XON)."),
	"rx_prio_pause_duration_ns": nsCounterSpec("rx_prio_pause_duration", "Time PFC pauses held the port: no frame started (mlx5 rx_prio<N>_pause_duration)."),
	"rx_pause_ignored":          counterSpec("rx_pause_ignored", "MAC Control frames that paused nothing: PFC without the honoured priority's bit, 802.3x PAUSE, other opcodes, truncated."),
	// The receive-side impairment (--netem, --link-delay), named as netem's.
	"impair_frames":     counterSpec("impair_frames", "Received frames the impairment stage decided on (--netem set)."),
	"impair_lost":       counterSpec("impair_lost", "Received frames dropped by netem loss, random or gemodel."),
	"impair_ge_bad":     counterSpec("impair_ge_bad", "Received frames that found the Gilbert-Elliott bad state."),
	"impair_duplicated": counterSpec("impair_duplicated", "Copies the impairment stage decided to make (a copy with no room counts in impair_drops)."),
	"impair_reordered":  counterSpec("impair_reordered", "Received frames passed on without the delay (netem reorder)."),
	"impair_held":       counterSpec("impair_held", "Received frames held back the extra hold time."),
	"impair_corrupted":  counterSpec("impair_corrupted", "Received frames with a bit flipped."),
	"impair_delayed":    counterSpec("impair_delayed", "Received frames and copies held for a time above 0."),
	"impair_drops":      counterSpec("impair_drops", "Received frames and copies the impairment stage had no room for (slots or netem limit)."),
	// Round-trip estimation.
	"rtt_karn_skipped": counterSpec("rtt_karn_skipped", "Timed PSNs dropped by Karn's rule: resent before acknowledged."),
	"rto_min_ns":       nsGaugeSpec("rto_min", "Smallest retransmission timeout armed, before backoff."),
	"rto_max_ns":       nsGaugeSpec("rto_max", "Largest retransmission timeout armed, before backoff."),
	// Out-of-order placement and the reorder buffer.
	"ooo_kept":       counterSpec("ooo_kept", "Requests kept ahead of the expected PSN."),
	"ooo_discarded":  counterSpec("ooo_discarded", "Requests ahead of the expected PSN that failed their checks, dropped without a NAK."),
	"sack_nak_sent":  counterSpec("sack_nak_sent", "NAKs with a selective acknowledgement sent."),
	"rcvd_sack_nak":  counterSpec("rcvd_sack_nak", "NAKs with a selective acknowledgement received."),
	"ooo_responses":  counterSpec("ooo_responses", "READ responses and atomic ACKs placed ahead of an unanswered request."),
	"fnak_sent":      counterSpec("fnak_sent", "FaSR FNACKs sent: a retransmission overtook a lost one."),
	"rcvd_fnak":      counterSpec("rcvd_fnak", "FaSR FNACKs received."),
	"holes_nak_sent": counterSpec("holes_nak_sent", "MELO NACKs (the three most recent holes) sent."),
	"rcvd_holes_nak": counterSpec("rcvd_holes_nak", "MELO NACKs received."),
	"rob_delivered":  counterSpec("rob_delivered", "Packets copied from the off-chip reorder buffer to the application (MELO, FaSR)."),
	"rob_full":       counterSpec("rob_full", "Out-of-order packets dropped because the reorder buffer was full."),
	"rob_in_use":     gaugeSpec("rob_in_use", "Reorder-buffer slots holding a packet now."),
	"rob_peak":       gaugeSpec("rob_peak", "Most reorder-buffer slots holding a packet at once."),
	// What the reorder buffer copied, in payload bytes (MELO Fig. 6a).
	"rob_delivered_bytes": counterSpec("rob_delivered_bytes", "Payload bytes copied from the off-chip reorder buffer to the application (MELO)."),
	// The recovery schemes' own counters, summed over the schemes.
	// Drop reasons: every dropped frame under exactly one.
	"rcvd_malformed":             counterSpec("rcvd_malformed", "Received frames dropped: not a parsable RoCEv2 frame."),
	"rcvd_icrc_err":              counterSpec("rcvd_icrc_err", "Received frames dropped: bad ICRC."),
	"rcvd_unknown_qpn":           counterSpec("rcvd_unknown_qpn", "Received frames dropped: no such QP."),
	"rcvd_bad_addr":              counterSpec("rcvd_bad_addr", "Received frames dropped: IP addresses do not match the QP."),
	"rcvd_pkey_err":              counterSpec("rcvd_pkey_err", "Received frames dropped: bad partition key."),
	"rcvd_bad_state":             counterSpec("rcvd_bad_state", "Received frames dropped: the QP cannot take the packet in its state."),
	"rcvd_bad_opcode":            counterSpec("rcvd_bad_opcode", "Received frames dropped: opcode not valid for an RC QP."),
	"rcvd_bad_response":          counterSpec("rcvd_bad_response", "Received frames dropped: a response that fits no outstanding request."),
	"rcvd_stale_ack":             counterSpec("rcvd_stale_ack", "Received frames dropped: ACK, NAK or response for PSNs already acknowledged."),
	"resp_queue_full":            counterSpec("resp_queue_full", "Requests dropped: the responder's output queue full."),
	"cq_overflow":                counterSpec("cq_overflow", "Completions lost to a full completion queue."),
	"rp_cnp_ignored":             counterSpec("rp_cnp_ignored", "RoCEv2 CNPs received and not acted on: no congestion control that reacts to them on the QP, no such QP, or not from its peer (mlx5's name)."),
	"rp_cnp_handled":             counterSpec("rp_cnp_handled", "RoCEv2 CNPs a QP's congestion control throttled for (mlx5's name; DCQCN's reaction point)."),
	"np_ecn_marked_roce_packets": counterSpec("np_ecn_marked_roce_packets", "RoCE packets received for a QP with ECN congestion experienced (mlx5's name)."),
	"np_cnp_sent":                counterSpec("np_cnp_sent", "CNPs sent for ECN-marked packets, at most one per QP per interval (mlx5's name; DCQCN's notification point)."),
	// StaR's stateless server (--star-server).
	"star_rdp_rcvd":  counterSpec("star_rdp_rcvd", "StaR RDPs received."),
	"star_ra_sent":   counterSpec("star_ra_sent", "StaR RAs sent, ACK or NAK."),
	"star_gd_rcvd":   counterSpec("star_gd_rcvd", "StaR GDs received."),
	"star_sdp_sent":  counterSpec("star_sdp_sent", "StaR SDPs sent."),
	"star_nak_sent":  counterSpec("star_nak_sent", "StaR RAs sent that NAK an RDP or a GD."),
	"star_tx_drops":  counterSpec("star_tx_drops", "StaR RAs and SDPs not sent: the server's egress queue was full."),
	"star_tx_queued": counterSpec("star_tx_queued", "StaR RAs and SDPs that waited in the server's egress queue for the link or the transmit ring."),
	"star_dropped":   counterSpec("star_dropped", "StaR CQEPs and EAs a server NIC dropped: for no server QP, or an EA of an unknown kind."),
	// A StaR client.
	"star_rdp_sent":       counterSpec("star_rdp_sent", "StaR RDPs sent, retransmissions included."),
	"star_gd_sent":        counterSpec("star_gd_sent", "StaR GDs sent, retransmissions included."),
	"star_ra_rcvd":        counterSpec("star_ra_rcvd", "StaR RAs received."),
	"star_sdp_rcvd":       counterSpec("star_sdp_rcvd", "StaR SDPs received."),
	"star_security_drops": counterSpec("star_security_drops", "StaR RDPs and GDs the security table stopped before they left."),
	"star_wqep_sent":      counterSpec("star_wqep_sent", "StaR WQEPs a server's driver sent, repeats included."),
	"star_wqep_resent":    counterSpec("star_wqep_resent", "StaR WQEPs resent after their EA did not come."),
	"star_wqep_rcvd":      counterSpec("star_wqep_rcvd", "StaR WQEPs a client received."),
	"star_wqep_dropped":   counterSpec("star_wqep_dropped", "StaR WQEPs a client dropped: too far past a gap in the driver's sequence, or of a kind not built."),
	"star_cqep_sent":      counterSpec("star_cqep_sent", "StaR CQEPs a client sent, repeats included."),
	"star_cqep_resent":    counterSpec("star_cqep_resent", "StaR CQEPs resent after their EA did not come."),
	"star_cqep_rcvd":      counterSpec("star_cqep_rcvd", "StaR CQEPs a server's driver received."),
	"star_ea_sent":        counterSpec("star_ea_sent", "StaR EAs sent."),
	"star_ea_rcvd":        counterSpec("star_ea_rcvd", "StaR EAs received."),
	// The on-chip QP-context cache and the SRAM it shares.
	"qpc_cache_hits":          counterSpec("qpc_cache_hits", "QP-context cache hits."),
	"qpc_cache_misses":        counterSpec("qpc_cache_misses", "QP-context cache misses: contexts fetched from host memory."),
	"qpc_cache_evictions":     counterSpec("qpc_cache_evictions", "QP contexts evicted from the on-chip cache."),
	"qpc_cache_writebacks":    counterSpec("qpc_cache_writebacks", "Evicted QP contexts written back to host memory."),
	"qpc_stall_ns":            nsCounterSpec("qpc_stall", "Pipeline time spent fetching QP contexts (--fetch-penalty per miss)."),
	"host_accesses":           counterSpec("host_accesses", "A recovery scheme's accesses of its state in host memory (srnic)."),
	"host_stall_ns":           nsCounterSpec("host_stall", "Pipeline time the scheme's host-memory accesses cost."),
	"qpc_resident":            gaugeSpec("qpc_resident", "QP contexts on chip now."),
	"qpc_resident_peak":       gaugeSpec("qpc_resident_peak", "Most QP contexts on chip at once."),
	"qpc_resident_bytes":      gaugeSpec("qpc_resident_bytes", "On-chip bytes the resident QP contexts take."),
	"qpc_resident_bytes_peak": gaugeSpec("qpc_resident_peak_bytes", "Most on-chip bytes the resident QP contexts took at once."),
	"sr_resident_bytes":       gaugeSpec("sr_resident_bytes", "The recovery scheme's per-QP share of the resident contexts' bytes."),
	"sr_resident_bytes_peak":  gaugeSpec("sr_resident_peak_bytes", "Most bytes the scheme's per-QP share took at once."),
	"sram_shared_bytes":       gaugeSpec("sram_shared_bytes", "On-chip bytes of the scheme's shared pools."),
	"sram_budget_bytes":       gaugeSpec("sram_budget_bytes", "On-chip SRAM for QP contexts and shared pools (--sram; 0: unlimited)."),

	// Unreliable Datagram (dataplane/ud.go).
	"rcvd_qkey_violation": counterSpec("rcvd_qkey_violation", "Datagrams dropped: their Q_Key is not the receiving UD QP's (IBA's Q_Key violation)."),
	"rcvd_no_recv_wqe":    counterSpec("rcvd_no_recv_wqe", "Datagrams dropped: the UD QP had no receive WQE (UD has no RNR)."),
	"ud_send_unresolved":  counterSpec("ud_send_unresolved", "UD sends completed in error: the address handle had no destination MAC or was destroyed."),

	// QP1 and the communication manager (dataplane/gsi.go).
	"gsi_rx_mads":        counterSpec("gsi_rx_mads", "Datagrams QP1 received and gave the CM."),
	"gsi_tx_mads":        counterSpec("gsi_tx_mads", "MADs the CM sent through QP1."),
	"gsi_rx_dropped":     counterSpec("gsi_rx_dropped", "Datagrams to QP1 dropped: by QP1's UD checks, longer than a MAD, or by the CM (malformed, unmatched)."),
	"gsi_tx_errors":      counterSpec("gsi_tx_errors", "MADs not sent: no neighbour for the peer, or QP1's send queue full."),
	"cm_events":          counterSpec("cm_events", "CM events handed to the owners of their listeners and connections."),
	"cm_events_orphaned": counterSpec("cm_events_orphaned", "CM events of connections whose owner is gone."),
	"cm_qp_errors":       counterSpec("cm_qp_errors", "QPs the CM moved to ERROR: a disconnect, or a DREQ received."),
	"cm_rx_dropped":      counterSpec("cm_rx_dropped", "MADs the CM dropped: malformed, unknown or unsupported attribute, no connection, wrong state."),
	"cm_tx_errors":       counterSpec("cm_tx_errors", "MADs the CM could not hand to QP1."),

	// The port (port_*): the AF_XDP port's and the UDP port's. The
	// AF_XDP port's frame counts and XDP_STATISTICS are per queue.
	"port_rx_frames":                queued(counterSpec("port_rx_frames", "Frames the port handed to the engine.")),
	"port_tx_frames":                queued(counterSpec("port_tx_frames", "Frames the port gave to the kernel.")),
	"port_rx_empty_polls":           counterSpec("port_rx_empty_polls", "Receive polls that found nothing."),
	"port_tx_ring_full":             counterSpec("port_tx_ring_full", "Transmit buffer requests that found no free chunk or slot."),
	"port_fill_refills":             counterSpec("port_fill_refills", "Batches of chunks returned to the AF_XDP fill rings."),
	"port_wakeups":                  counterSpec("port_wakeups", "sendto and recvfrom calls that kicked the kernel (AF_XDP)."),
	"port_tx_kick_errors":           counterSpec("port_tx_kick_errors", "AF_XDP sendto errors other than EAGAIN."),
	"port_rx_dropped":               queued(counterSpec("port_rx_dropped", "Frames the kernel dropped for other reasons, e.g. too big for a chunk (XDP_STATISTICS rx_dropped).")),
	"port_rx_invalid_descs":         queued(counterSpec("port_rx_invalid_descs", "Bad fill ring entries (XDP_STATISTICS rx_invalid_descs).")),
	"port_tx_invalid_descs":         queued(counterSpec("port_tx_invalid_descs", "Bad transmit descriptors (XDP_STATISTICS tx_invalid_descs).")),
	"port_rx_ring_full":             queued(counterSpec("port_rx_ring_full", "Frames dropped because the AF_XDP receive ring was full (XDP_STATISTICS rx_ring_full).")),
	"port_rx_fill_ring_empty_descs": queued(counterSpec("port_rx_fill_ring_empty_descs", "Frames dropped because the fill ring was empty (XDP_STATISTICS rx_fill_ring_empty_descs).")),
	"port_tx_ring_empty_descs":      queued(counterSpec("port_tx_ring_empty_descs", "Kicks that found the transmit ring empty (XDP_STATISTICS tx_ring_empty_descs).")),
	"port_rx_multi_buffer":          queued(counterSpec("port_rx_multi_buffer", "Frames that arrived in several AF_XDP descriptors (XDP_PKT_CONTD, multi-buffer) and were reassembled.")),
	"port_rx_chains_dropped":        queued(counterSpec("port_rx_chains_dropped", "AF_XDP descriptor chains dropped as malformed: longer than the largest frame or 18 descriptors.")),
	"port_rx_truncated":             counterSpec("port_rx_truncated", "Datagrams longer than the largest frame, dropped (UDP port)."),
	"port_tx_errors":                counterSpec("port_tx_errors", "Datagrams the kernel refused (no route, too big), dropped (UDP port)."),
	"port_tx_bad_frames":            counterSpec("port_tx_bad_frames", "Frames that were not IP/UDP of the port's family, dropped (UDP port)."),
	"port_syscalls":                 counterSpec("port_syscalls", "sendmmsg and recvmmsg calls (UDP port)."),
	"port_rx_socket_drops":          counterSpec("port_rx_socket_drops", "Datagrams the kernel dropped at the socket, its receive buffer full (UDP port, SO_MEMINFO)."),

	// The XDP steering program (xdp_*): frames passed to the kernel, by reason.
	"xdp_steered":         counterSpec("xdp_steered", "Frames the XDP program steered to an AF_XDP socket."),
	"xdp_pause_steered":   counterSpec("xdp_pause_steered", "MAC Control (PFC, PAUSE) frames the XDP program steered to an AF_XDP socket."),
	"xdp_pass_no_socket":  labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "no_socket"),
	"xdp_pass_not_ip":     labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "not_ip"),
	"xdp_pass_not_udp":    labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "not_udp"),
	"xdp_pass_other_port": labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "other_port"),
	"xdp_pass_other_dst":  labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "other_dst"),
	"xdp_pass_fragment":   labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "fragment"),
	"xdp_pass_truncated":  labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "truncated"),
	"xdp_pass_malformed":  labelled(counterSpec("xdp_passed", xdpPassedHelp), "reason", "malformed"),

	// The verbs server's per-client limits (client_*).
	"client_limit_refusals": counterSpec("client_limit_refusals", "Verbs requests refused for a per-connection limit."),
	"client_conn_refusals":  counterSpec("client_conn_refusals", "Verbs connections refused for the per-uid limit."),
}

const xdpPassedHelp = "Frames the XDP program left to the kernel, by reason (stats xdp_pass_<reason>)."

// schemeCounterSpec is the spec of a recovery scheme's counter: a
// counter, its help the scheme's.
func schemeCounterSpec(c recovery.Counter) metricSpec {
	return counterSpec(c.Name, c.Help)
}
