package dataplane

import "github.com/softnic/softnic/recovery"

// Counters are the engine's statistics. Names follow Linux rxe's
// hw_counters (rxe_hw_counters.c), with rxe's meanings, where rxe has one,
// then mlx5's (local_ack_timeout_err, implied_nak_seq_err,
// req_remote_access_errors, ...), and softnic's own rcvd_* drop reasons,
// so that every dropped frame is counted under exactly one reason.
// docs/metrics.md maps them to the daemon's Prometheus metrics.
type Counters struct {
	SentPkts         uint64 // sent_pkts
	RcvdPkts         uint64 // rcvd_pkts: frames that parsed as RoCEv2
	DuplicateRequest uint64 // duplicate_request
	OutOfSeqRequest  uint64 // out_of_seq_request
	RcvdRNRErr       uint64 // rcvd_rnr_err: RNR NAKs received
	SendRNRErr       uint64 // send_rnr_err: RNR NAKs sent
	RcvdSeqErr       uint64 // rcvd_seq_err: PSN sequence error NAKs received
	RetryExceededErr uint64 // retry_exceeded_err
	RNRNakRetryErr   uint64 // retry_rnr_exceeded_err (mlx5: rnr_nak_retry_err)
	CompleterRetry   uint64 // completer_retry_err: retransmission rounds started
	LocalAckTimeout  uint64 // local_ack_timeout_err
	ImpliedNakSeqErr uint64 // implied_nak_seq_err
	RespAbandoned    uint64 // resp_abandoned: READ response streams and atomic responses dropped from the response queue for a duplicate before them
	// ACK timeouts by the Improved go-back-N paper's four reasons (its
	// Fig. 3; timeoutReason). The classification reads the peer's
	// responder state, which only the embedded fabric can (SetTimeoutPeer);
	// elsewhere no timeout is classified.
	AckTimeoutLastLost  uint64 // local_ack_timeout_last_lost: reason 1, the tail of the message with its last packet lost, nothing after it arrived
	AckTimeoutAckLost   uint64 // local_ack_timeout_ack_lost: reason 2, every request arrived, the ACK was lost
	AckTimeoutNakLost   uint64 // local_ack_timeout_nak_lost: reason 3, the responder NAKed the hole and the NAK was lost
	AckTimeoutLostTwice uint64 // local_ack_timeout_lost_twice: reason 4, the NAKed packet was resent and lost again
	STCopySkipped       uint64 // st_copy_skipped: ST second copies not sent because the packet was acknowledged while the copy waited for ring space
	GoBackFree          uint64 // go_back_free: go-backs on an implied or sequence NAK inside a go-back round still working, which spent no retry (docs/transport.md)
	TxRingFull          uint64 // tx_ring_full: a packet waited because the port's transmit ring was full
	LinkPaced           uint64 // link_paced: transmit rounds the emulated link rate ended (Config.LinkRate), not counted in tx_ring_full
	LinkPacedNs         uint64 // link_paced_ns: time packets waited for the emulated link's bucket
	LinkDelayDrops      uint64 // link_delay_drops: the older name of impair_drops, kept for scripts that read it
	// 802.1Qbb pauses received (Config.PFC; pfc.go), named as mlx5's
	// ethtool counters rx_prio<N>_pause and rx_prio<N>_pause_duration,
	// for the one priority the NIC honours.
	RxPrioPause           uint64 // rx_prio_pause: PFC frames for the honoured priority with a time above 0 (each starts or replaces a pause)
	RxPrioPauseResume     uint64 // rx_prio_pause_resume: PFC frames for the honoured priority with time 0 (XON)
	RxPrioPauseDurationNs uint64 // rx_prio_pause_duration_ns: time the pauses held the port, each to its end or to the frame that replaced it
	RxPauseIgnored        uint64 // rx_pause_ignored: MAC Control frames that paused nothing: PFC without the honoured priority's bit, 802.3x PAUSE, other opcodes, truncated, or PFC off
	TxWireBytes           uint64 // tx_wire_bytes: wire time of the frames sent, bytes: padded to 64, with FCS, preamble and gap (WireBytes)
	RDMASends             uint64 // rdma_sends: SEND work requests completed, with or without immediate, in error too but not flushed (rxe's)
	RDMARecvs             uint64 // rdma_recvs: receive work requests completed successfully, by a SEND or a WRITE with immediate (rxe's)
	ReqRemoteAccess       uint64 // req_remote_access_errors: REM_ACCESS NAKs received
	RespRemoteAccess      uint64 // resp_remote_access_errors: REM_ACCESS NAKs sent
	ReqRemoteInvalid      uint64 // req_remote_invalid_request
	RespInvalidReq        uint64 // resp_remote_invalid_request: INV_REQ NAKs sent
	RespLocalLength       uint64 // resp_local_length_error
	SeqNakSent            uint64 // seq_nak_sent: PSN sequence error NAKs sent
	AcksSent              uint64 // acks_sent
	Retransmits           uint64 // retransmitted_pkts

	// The receive stage (Config.LinkDelay, Config.Netem; rx_impair.go,
	// package impair): netem's impairments, named as netem's.
	ImpairFrames     uint64 // impair_frames: received frames the stage decided on (with Netem set)
	ImpairLost       uint64 // impair_lost: dropped by netem loss (random or gemodel)
	ImpairGEBad      uint64 // impair_ge_bad: frames that found the Gilbert-Elliott bad state
	ImpairDuplicated uint64 // impair_duplicated: copies decided (a copy with no room is in impair_drops)
	ImpairReordered  uint64 // impair_reordered: frames sent without the delay (netem reorder)
	ImpairHeld       uint64 // impair_held: frames held back the extra hold time
	ImpairCorrupted  uint64 // impair_corrupted: frames with a bit flipped
	ImpairDelayed    uint64 // impair_delayed: frames and copies held for a time above 0
	ImpairDrops      uint64 // impair_drops: frames and copies the stage had no room for (slots or netem limit)

	// Round-trip estimation (Config.RTO adaptive; rtt.go).
	RTTSamples     uint64 // rtt_samples: round-trip samples taken
	RTTKarnSkipped uint64 // rtt_karn_skipped: timed PSNs dropped by Karn's rule (resent before acknowledged)
	RTTSampleNs    uint64 // rtt_sample_ns_sum: the samples' sum (with rtt_samples, their mean)
	RTOMinNs       uint64 // rto_min_ns: smallest retransmission timeout armed (before backoff)
	RTOMaxNs       uint64 // rto_max_ns: largest

	// Out-of-order placement (selective.go; IRN).
	OOOKept      uint64 // ooo_kept: requests kept ahead of the expected PSN
	OOODiscarded uint64 // ooo_discarded: requests ahead of the expected PSN that failed their checks, dropped without a NAK
	SackNakSent  uint64 // sack_nak_sent: NAKs with a selective acknowledgement sent
	RcvdSackNak  uint64 // rcvd_sack_nak: NAKs with a selective acknowledgement received
	OOOResponses uint64 // ooo_responses: READ responses and atomic ACKs placed ahead of an unanswered request
	FNACKSent    uint64 // fnak_sent: FaSR FNACKs sent (a retransmission overtook a lost one)
	RcvdFNACK    uint64 // rcvd_fnak
	HolesNakSent uint64 // holes_nak_sent: MELO NACKs (three most recent holes) sent
	RcvdHolesNak uint64 // rcvd_holes_nak
	ROBDelivered uint64 // rob_delivered: packets copied from the off-chip reorder buffer to the application (MELO, FaSR)
	ROBFull      uint64 // rob_full: out-of-order packets dropped because the reorder buffer was full
	ROBInUse     uint64 // rob_in_use: reorder-buffer slots holding a packet now
	ROBPeak      uint64 // rob_peak
	// ROBDeliveredBytes is rob_delivered's payload: the bytes of
	// out-of-order data copied from the reorder buffer to the application
	// (MELO §4.2.1's reorder copies, which its Fig. 6a costs in CPU time).
	ROBDeliveredBytes uint64 // rob_delivered_bytes

	// The recovery schemes' own counters (recovery.Counter: each
	// scheme's Counters), summed by name over the schemes this NIC runs,
	// and their shared pools one by one (Scheme.Pools). SchemeCounter
	// reads one.
	SchemeCounters []recovery.Counter
	Pools          []recovery.PoolStats

	RcvdMalformed   uint64 // rcvd_malformed: not a parsable RoCEv2 frame
	RcvdICRCErr     uint64 // rcvd_icrc_err
	RcvdUnknownQPN  uint64 // rcvd_unknown_qpn
	RcvdBadAddr     uint64 // rcvd_bad_addr: IP addresses do not match the QP
	RcvdPKeyErr     uint64 // rcvd_pkey_err
	RcvdBadState    uint64 // rcvd_bad_state: QP cannot take the packet in its state
	RcvdBadOpcode   uint64 // rcvd_bad_opcode: opcode not valid for an RC QP
	RcvdBadResponse uint64 // rcvd_bad_response: response that fits no outstanding request
	RcvdStaleAck    uint64 // rcvd_stale_ack: ACK/NAK/response for already acknowledged PSNs
	RespQueueFull   uint64 // resp_queue_full: request dropped, responder output queue full
	CQOverflow      uint64 // cq_overflow

	// RoCEv2 congestion notification packets received (bth.CNP), named as
	// mlx5 names them: a NIC that receives a CNP is DCQCN's reaction
	// point, and mlx5 counts a CNP its reaction point did not act on as
	// rp_cnp_ignored, one it throttled for as rp_cnp_handled
	// (np_cnp_sent is the notification point's, the sender of CNPs).
	// A CNP is handled when its QP's congestion control reacts to it
	// (DCQCN), ignored otherwise (no control, Timely, no such QP, not from
	// the QP's peer).
	RPCNPIgnored uint64 // rp_cnp_ignored
	RPCNPHandled uint64 // rp_cnp_handled: CNPs a QP's congestion control throttled for
	// The notification point (docs/cc.md): ECN-marked (CE) RoCE packets
	// received for a QP, and the CNPs sent back for them (at most one per
	// QP per the algorithm's interval).
	NPECNMarkedRoCEPackets uint64 // np_ecn_marked_roce_packets
	NPCNPSent              uint64 // np_cnp_sent

	// StaR's stateless server (Config.StarServer; star.go).
	StarRDPRcvd  uint64 // star_rdp_rcvd: RDPs received
	StarRASent   uint64 // star_ra_sent: RAs sent, ACK or NAK
	StarGDRcvd   uint64 // star_gd_rcvd: GDs received
	StarSDPSent  uint64 // star_sdp_sent: SDPs sent
	StarNakSent  uint64 // star_nak_sent: RAs sent that NAK an RDP or a GD
	StarTxDrops  uint64 // star_tx_drops: RAs and SDPs not sent: the egress queue was full (Config.StarEgressFrames)
	StarTxQueued uint64 // star_tx_queued: RAs and SDPs that waited in the egress queue for the link or the ring
	StarDropped  uint64 // star_dropped: other StaR packets (WQEP, CQEP, EA), not served yet

	// A StaR client (starqp.go).
	StarRDPSent       uint64 // star_rdp_sent: RDPs sent, retransmissions included
	StarGDSent        uint64 // star_gd_sent: GDs sent, retransmissions included
	StarRARcvd        uint64 // star_ra_rcvd: RAs received
	StarSDPRcvd       uint64 // star_sdp_rcvd: SDPs received
	StarSecurityDrops uint64 // star_security_drops: RDPs and GDs the security table stopped before they left

	// StaR's work-queue exchange: a server's driver (starqp.go) and a
	// client's shadow (starqp.go).
	StarWQEPSent    uint64 // star_wqep_sent: WQEPs a server's driver sent, repeats included
	StarWQEPResent  uint64 // star_wqep_resent: WQEPs resent after their EA did not come
	StarWQEPRcvd    uint64 // star_wqep_rcvd: WQEPs a client received
	StarWQEPDropped uint64 // star_wqep_dropped: WQEPs a client dropped: too far past a gap in the driver's sequence, or of a kind not built
	StarCQEPSent    uint64 // star_cqep_sent: CQEPs a client sent, repeats included
	StarCQEPResent  uint64 // star_cqep_resent: CQEPs resent after their EA did not come
	StarCQEPRcvd    uint64 // star_cqep_rcvd: CQEPs a server's driver received
	StarEASent      uint64 // star_ea_sent: EAs sent
	StarEARcvd      uint64 // star_ea_rcvd: EAs received

	// The on-chip QP-context cache (qp.Cache).
	QPCHits              uint64 // qpc_cache_hits
	QPCMisses            uint64 // qpc_cache_misses
	QPCEvictions         uint64 // qpc_cache_evictions
	QPCWriteBacks        uint64 // qpc_cache_writebacks
	QPCStallNs           uint64 // qpc_stall_ns: pipeline time spent fetching contexts
	HostAccesses         uint64 // host_accesses: a scheme's accesses of its state in host memory (recovery.HostMemory)
	HostStallNs          uint64 // host_stall_ns: pipeline time they cost
	QPCResident          uint64 // qpc_resident: contexts on chip now
	QPCResidentPeak      uint64 // qpc_resident_peak
	QPCResidentBytes     uint64 // qpc_resident_bytes
	QPCResidentBytesPeak uint64 // qpc_resident_bytes_peak
	SRResidentBytes      uint64 // sr_resident_bytes: the recovery scheme's per-QP share of them
	SRResidentBytesPeak  uint64 // sr_resident_bytes_peak
	SRAMSharedBytes      uint64 // sram_shared_bytes: the scheme's shared pools
	SRAMBudget           uint64 // sram_budget_bytes: 0 = unlimited

	// Unreliable Datagram (ud.go): what a UD QP drops or fails, as no
	// peer hears of it.
	RcvdQKeyViolation uint64 // rcvd_qkey_violation: datagrams whose DETH Q_Key is not the receiving QP's (IBA's Q_Key violation), dropped
	RcvdNoRecvWQE     uint64 // rcvd_no_recv_wqe: datagrams that found no receive WQE (UD has no RNR), dropped
	UDSendUnresolved  uint64 // ud_send_unresolved: UD sends completed in error: the address handle has no destination MAC or was destroyed

	// QP1 and the communication manager (gsi.go); the CM's own
	// counters (cm_tx_msgs ...) are Engine.CMCounters.
	GSIRecvMADs      uint64 // gsi_rx_mads: datagrams QP1 received and gave the CM
	GSISentMADs      uint64 // gsi_tx_mads: MADs the CM sent through QP1
	GSIRecvDropped   uint64 // gsi_rx_dropped: datagrams to QP1 dropped (by QP1's UD checks, too long for a MAD, or by the CM: malformed, unmatched)
	GSISendErrors    uint64 // gsi_tx_errors: MADs not sent: no neighbour for the peer, QP1's send queue full
	CMEvents         uint64 // cm_events: CM events handed to their owners
	CMEventsOrphaned uint64 // cm_events_orphaned: CM events of connections whose owner is gone (closed, client dead)
	CMQPErrors       uint64 // cm_qp_errors: QPs the CM moved to ERROR (disconnect, DREQ received)
	// The CM's own (a snapshot of Engine.CMCounters): Linux's cm sysfs
	// groups by attribute, cm_<group>_<attr> (CMAttrNames), and the sums
	// of its drop reasons and send failures.
	CMTxMsgs       [9]uint64 // cm_tx_msgs_<attr>: first transmissions
	CMTxRetries    [9]uint64 // cm_tx_retries_<attr>: retransmissions on timeout
	CMRxMsgs       [9]uint64 // cm_rx_msgs_<attr>: MADs received that parsed
	CMRxDuplicates [9]uint64 // cm_rx_duplicates_<attr>: duplicates answered or ignored
	CMRxDropped    uint64    // cm_rx_dropped: MADs the CM dropped: malformed, unknown or unsupported attribute, no connection, wrong state
	CMTxErrors     uint64    // cm_tx_errors: MADs the CM could not hand to QP1 (counted in gsi_tx_errors too)
}

// CMAttrNames are the CM attributes of the cm_<group>_<attr> counters,
// REQ (0x0010) to SIDR_REP (0x0018), as Linux's cm sysfs names them.
var CMAttrNames = [9]string{"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req", "sidr_rep"}

// Each calls fn with every counter's name and value, in a fixed order.
func (c *Counters) Each(fn func(name string, v uint64)) {
	for _, f := range []struct {
		n string
		v uint64
	}{
		{"sent_pkts", c.SentPkts}, {"rcvd_pkts", c.RcvdPkts},
		{"duplicate_request", c.DuplicateRequest}, {"out_of_seq_request", c.OutOfSeqRequest},
		{"rcvd_rnr_err", c.RcvdRNRErr}, {"send_rnr_err", c.SendRNRErr},
		{"rcvd_seq_err", c.RcvdSeqErr}, {"retry_exceeded_err", c.RetryExceededErr},
		{"retry_rnr_exceeded_err", c.RNRNakRetryErr}, {"completer_retry_err", c.CompleterRetry},
		{"local_ack_timeout_err", c.LocalAckTimeout}, {"implied_nak_seq_err", c.ImpliedNakSeqErr},
		{"local_ack_timeout_last_lost", c.AckTimeoutLastLost}, {"local_ack_timeout_ack_lost", c.AckTimeoutAckLost},
		{"local_ack_timeout_nak_lost", c.AckTimeoutNakLost}, {"local_ack_timeout_lost_twice", c.AckTimeoutLostTwice},
		{"st_copy_skipped", c.STCopySkipped},
		{"go_back_free", c.GoBackFree}, {"resp_abandoned", c.RespAbandoned},
		{"tx_ring_full", c.TxRingFull}, {"link_paced", c.LinkPaced}, {"link_paced_ns", c.LinkPacedNs}, {"link_delay_drops", c.LinkDelayDrops},
		{"rx_prio_pause", c.RxPrioPause}, {"rx_prio_pause_resume", c.RxPrioPauseResume},
		{"rx_prio_pause_duration_ns", c.RxPrioPauseDurationNs}, {"rx_pause_ignored", c.RxPauseIgnored},
		{"impair_frames", c.ImpairFrames}, {"impair_lost", c.ImpairLost}, {"impair_ge_bad", c.ImpairGEBad},
		{"impair_duplicated", c.ImpairDuplicated}, {"impair_reordered", c.ImpairReordered}, {"impair_held", c.ImpairHeld},
		{"impair_corrupted", c.ImpairCorrupted}, {"impair_delayed", c.ImpairDelayed}, {"impair_drops", c.ImpairDrops},
		{"tx_wire_bytes", c.TxWireBytes}, {"rdma_sends", c.RDMASends}, {"rdma_recvs", c.RDMARecvs},
		{"req_remote_access_errors", c.ReqRemoteAccess}, {"resp_remote_access_errors", c.RespRemoteAccess},
		{"req_remote_invalid_request", c.ReqRemoteInvalid}, {"resp_remote_invalid_request", c.RespInvalidReq},
		{"resp_local_length_error", c.RespLocalLength}, {"seq_nak_sent", c.SeqNakSent},
		{"acks_sent", c.AcksSent}, {"retransmitted_pkts", c.Retransmits},
		{"rtt_samples", c.RTTSamples}, {"rtt_karn_skipped", c.RTTKarnSkipped}, {"rtt_sample_ns_sum", c.RTTSampleNs},
		{"rto_min_ns", c.RTOMinNs}, {"rto_max_ns", c.RTOMaxNs},
		{"ooo_kept", c.OOOKept}, {"ooo_discarded", c.OOODiscarded}, {"sack_nak_sent", c.SackNakSent},
		{"rcvd_sack_nak", c.RcvdSackNak}, {"ooo_responses", c.OOOResponses},
		{"fnak_sent", c.FNACKSent}, {"rcvd_fnak", c.RcvdFNACK},
		{"holes_nak_sent", c.HolesNakSent}, {"rcvd_holes_nak", c.RcvdHolesNak},
		{"rob_delivered", c.ROBDelivered}, {"rob_delivered_bytes", c.ROBDeliveredBytes}, {"rob_full", c.ROBFull}, {"rob_in_use", c.ROBInUse}, {"rob_peak", c.ROBPeak},
		{"", 0}, // the schemes' counters
		{"rcvd_malformed", c.RcvdMalformed}, {"rcvd_icrc_err", c.RcvdICRCErr},
		{"rcvd_unknown_qpn", c.RcvdUnknownQPN}, {"rcvd_bad_addr", c.RcvdBadAddr},
		{"rcvd_pkey_err", c.RcvdPKeyErr}, {"rcvd_bad_state", c.RcvdBadState},
		{"rcvd_bad_opcode", c.RcvdBadOpcode}, {"rcvd_bad_response", c.RcvdBadResponse},
		{"rcvd_stale_ack", c.RcvdStaleAck}, {"resp_queue_full", c.RespQueueFull},
		{"cq_overflow", c.CQOverflow}, {"rp_cnp_ignored", c.RPCNPIgnored},
		{"rp_cnp_handled", c.RPCNPHandled}, {"np_ecn_marked_roce_packets", c.NPECNMarkedRoCEPackets},
		{"np_cnp_sent", c.NPCNPSent},
		{"star_rdp_rcvd", c.StarRDPRcvd}, {"star_ra_sent", c.StarRASent},
		{"star_gd_rcvd", c.StarGDRcvd}, {"star_sdp_sent", c.StarSDPSent},
		{"star_nak_sent", c.StarNakSent}, {"star_tx_drops", c.StarTxDrops}, {"star_tx_queued", c.StarTxQueued}, {"star_dropped", c.StarDropped},
		{"star_rdp_sent", c.StarRDPSent}, {"star_gd_sent", c.StarGDSent}, {"star_ra_rcvd", c.StarRARcvd},
		{"star_sdp_rcvd", c.StarSDPRcvd}, {"star_security_drops", c.StarSecurityDrops},
		{"star_wqep_sent", c.StarWQEPSent}, {"star_wqep_resent", c.StarWQEPResent}, {"star_wqep_rcvd", c.StarWQEPRcvd},
		{"star_wqep_dropped", c.StarWQEPDropped}, {"star_cqep_sent", c.StarCQEPSent}, {"star_cqep_resent", c.StarCQEPResent},
		{"star_cqep_rcvd", c.StarCQEPRcvd}, {"star_ea_sent", c.StarEASent}, {"star_ea_rcvd", c.StarEARcvd},
		{"qpc_cache_hits", c.QPCHits}, {"qpc_cache_misses", c.QPCMisses},
		{"qpc_cache_evictions", c.QPCEvictions}, {"qpc_cache_writebacks", c.QPCWriteBacks},
		{"qpc_stall_ns", c.QPCStallNs}, {"host_accesses", c.HostAccesses}, {"host_stall_ns", c.HostStallNs},
		{"qpc_resident", c.QPCResident}, {"qpc_resident_peak", c.QPCResidentPeak},
		{"qpc_resident_bytes", c.QPCResidentBytes}, {"qpc_resident_bytes_peak", c.QPCResidentBytesPeak},
		{"sr_resident_bytes", c.SRResidentBytes}, {"sr_resident_bytes_peak", c.SRResidentBytesPeak},
		{"sram_shared_bytes", c.SRAMSharedBytes}, {"sram_budget_bytes", c.SRAMBudget},
		{"rcvd_qkey_violation", c.RcvdQKeyViolation}, {"rcvd_no_recv_wqe", c.RcvdNoRecvWQE},
		{"ud_send_unresolved", c.UDSendUnresolved},
		{"gsi_rx_mads", c.GSIRecvMADs}, {"gsi_tx_mads", c.GSISentMADs},
		{"gsi_rx_dropped", c.GSIRecvDropped}, {"gsi_tx_errors", c.GSISendErrors},
		{"cm_events", c.CMEvents}, {"cm_events_orphaned", c.CMEventsOrphaned}, {"cm_qp_errors", c.CMQPErrors},
	} {
		if f.n == "" {
			for _, s := range c.SchemeCounters {
				fn(s.Name, s.Value)
			}
			continue
		}
		fn(f.n, f.v)
	}
	for i, a := range CMAttrNames {
		fn("cm_tx_msgs_"+a, c.CMTxMsgs[i])
		fn("cm_tx_retries_"+a, c.CMTxRetries[i])
		fn("cm_rx_msgs_"+a, c.CMRxMsgs[i])
		fn("cm_rx_duplicates_"+a, c.CMRxDuplicates[i])
	}
	fn("cm_rx_dropped", c.CMRxDropped)
	fn("cm_tx_errors", c.CMTxErrors)
	for _, p := range c.Pools {
		fn("pool_"+p.Name+"_bytes", uint64(p.Bytes))
		fn("pool_"+p.Name+"_slots", uint64(p.Slots))
		fn("pool_"+p.Name+"_in_use", uint64(p.InUse))
		fn("pool_"+p.Name+"_peak", uint64(p.Peak))
		fn("pool_"+p.Name+"_allocs", p.Allocs)
		fn("pool_"+p.Name+"_exhausted", p.Exhausted)
	}
}

// SchemeCounter is the value of the schemes' counter called name (as
// `softnic stats` prints it), 0 when no scheme of the NIC reports it.
func (c Counters) SchemeCounter(name string) uint64 {
	return recovery.CounterValue(c.SchemeCounters, name)
}
