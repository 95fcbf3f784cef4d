package dataplane

// Counters are the engine's statistics. Names follow Linux rxe's
// hw_counters (rxe_hw_counters.c) where rxe has one, then mlx5's
// (rnr_nak_retry_err, local_ack_timeout_err, implied_nak_seq_err,
// req_remote_access_errors, ...), and softnic's own rcvd_* drop reasons,
// so that every dropped frame is counted under exactly one reason.
type Counters struct {
	SentPkts         uint64 // sent_pkts
	RcvdPkts         uint64 // rcvd_pkts: frames that parsed as RoCEv2
	DuplicateRequest uint64 // duplicate_request
	OutOfSeqRequest  uint64 // out_of_seq_request
	RcvdRNRErr       uint64 // rcvd_rnr_err: RNR NAKs received
	SendRNRErr       uint64 // send_rnr_err: RNR NAKs sent
	RcvdSeqErr       uint64 // rcvd_seq_err: PSN sequence error NAKs received
	RetryExceededErr uint64 // retry_exceeded_err
	RNRNakRetryErr   uint64 // rnr_nak_retry_err (rxe: retry_rnr_exceeded_err)
	CompleterRetry   uint64 // completer_retry_err: retransmission rounds started
	LocalAckTimeout  uint64 // local_ack_timeout_err
	ImpliedNakSeqErr uint64 // implied_nak_seq_err
	TxRingFull       uint64 // tx_ring_full: a packet waited because the port's transmit ring was full
	RDMASends        uint64 // rdma_sends: messages sent
	RDMARecvs        uint64 // rdma_recvs: messages received
	ReqRemoteAccess  uint64 // req_remote_access_errors: REM_ACCESS NAKs received
	RespRemoteAccess uint64 // resp_remote_access_errors: REM_ACCESS NAKs sent
	ReqRemoteInvalid uint64 // req_remote_invalid_request
	RespInvalidReq   uint64 // resp_remote_invalid_request: INV_REQ NAKs sent
	RespLocalLength  uint64 // resp_local_length_error
	SeqNakSent       uint64 // seq_nak_sent: PSN sequence error NAKs sent
	AcksSent         uint64 // acks_sent
	Retransmits      uint64 // retransmitted_pkts

	// Out-of-order placement (selective.go; IRN).
	OOOKept      uint64 // ooo_kept: requests kept ahead of the expected PSN
	OOODiscarded uint64 // ooo_discarded: requests ahead of the expected PSN that failed their checks, dropped without a NAK
	SackNakSent  uint64 // sack_nak_sent: NAKs with a selective acknowledgement sent
	RcvdSackNak  uint64 // rcvd_sack_nak: NAKs with a selective acknowledgement received
	OOOResponses uint64 // ooo_responses: READ responses and atomic ACKs placed ahead of an unanswered request

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

	// The on-chip QP-context cache (qp.Cache).
	QPCHits              uint64 // qpc_cache_hits
	QPCMisses            uint64 // qpc_cache_misses
	QPCEvictions         uint64 // qpc_cache_evictions
	QPCWriteBacks        uint64 // qpc_cache_writebacks
	QPCStallNs           uint64 // qpc_stall_ns: pipeline time spent fetching contexts
	QPCResident          uint64 // qpc_resident: contexts on chip now
	QPCResidentPeak      uint64 // qpc_resident_peak
	QPCResidentBytes     uint64 // qpc_resident_bytes
	QPCResidentBytesPeak uint64 // qpc_resident_bytes_peak
	SRResidentBytes      uint64 // sr_resident_bytes: the recovery scheme's per-QP share of them
	SRResidentBytesPeak  uint64 // sr_resident_bytes_peak
	SRAMSharedBytes      uint64 // sram_shared_bytes: the scheme's shared pools
	SRAMBudget           uint64 // sram_budget_bytes: 0 = unlimited
}

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
		{"rnr_nak_retry_err", c.RNRNakRetryErr}, {"completer_retry_err", c.CompleterRetry},
		{"local_ack_timeout_err", c.LocalAckTimeout}, {"implied_nak_seq_err", c.ImpliedNakSeqErr},
		{"tx_ring_full", c.TxRingFull}, {"rdma_sends", c.RDMASends}, {"rdma_recvs", c.RDMARecvs},
		{"req_remote_access_errors", c.ReqRemoteAccess}, {"resp_remote_access_errors", c.RespRemoteAccess},
		{"req_remote_invalid_request", c.ReqRemoteInvalid}, {"resp_remote_invalid_request", c.RespInvalidReq},
		{"resp_local_length_error", c.RespLocalLength}, {"seq_nak_sent", c.SeqNakSent},
		{"acks_sent", c.AcksSent}, {"retransmitted_pkts", c.Retransmits},
		{"ooo_kept", c.OOOKept}, {"ooo_discarded", c.OOODiscarded}, {"sack_nak_sent", c.SackNakSent},
		{"rcvd_sack_nak", c.RcvdSackNak}, {"ooo_responses", c.OOOResponses},
		{"rcvd_malformed", c.RcvdMalformed}, {"rcvd_icrc_err", c.RcvdICRCErr},
		{"rcvd_unknown_qpn", c.RcvdUnknownQPN}, {"rcvd_bad_addr", c.RcvdBadAddr},
		{"rcvd_pkey_err", c.RcvdPKeyErr}, {"rcvd_bad_state", c.RcvdBadState},
		{"rcvd_bad_opcode", c.RcvdBadOpcode}, {"rcvd_bad_response", c.RcvdBadResponse},
		{"rcvd_stale_ack", c.RcvdStaleAck}, {"resp_queue_full", c.RespQueueFull},
		{"cq_overflow", c.CQOverflow},
		{"qpc_cache_hits", c.QPCHits}, {"qpc_cache_misses", c.QPCMisses},
		{"qpc_cache_evictions", c.QPCEvictions}, {"qpc_cache_writebacks", c.QPCWriteBacks},
		{"qpc_stall_ns", c.QPCStallNs}, {"qpc_resident", c.QPCResident}, {"qpc_resident_peak", c.QPCResidentPeak},
		{"qpc_resident_bytes", c.QPCResidentBytes}, {"qpc_resident_bytes_peak", c.QPCResidentBytesPeak},
		{"sr_resident_bytes", c.SRResidentBytes}, {"sr_resident_bytes_peak", c.SRResidentBytesPeak},
		{"sram_shared_bytes", c.SRAMSharedBytes}, {"sram_budget_bytes", c.SRAMBudget},
	} {
		fn(f.n, f.v)
	}
}
