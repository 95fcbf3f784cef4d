// Package inject is deterministic event injection for softnic's switches,
// after Lumina (Yu et al., SIGCOMM 2023): a rule names one packet of one
// flow and what to do to it, and every application is logged with its
// time. Its two users are the embedded fabric's switch (package fabric)
// and the real-wire switch (softnic switch), with the same meaning.
//
// A switch holds a Set and calls Set.Decide for every frame that arrives,
// before routing it. Decide classifies the frame once (Classify: its
// kind, opcode, addresses, QPN, PSN, ...), lets every rule count it, and
// the first rule whose position names it acts: ecn and corrupt are
// applied to the frame in place, drop, delay and duplicate are returned
// for the switch to carry out. Each application is an Event (its time,
// rule and packet), and every RoCEv2 packet the switch saw is a Record of
// the trace, the mirror Lumina's analysis reads, with the action taken.
// Nothing here reads a clock or draws a random number: the same packets
// in the same order get the same actions.
//
// # Rule files
//
// A rule file is JSON, one object with a list of rules:
//
//	{"rules": [
//	  {"name": "drop-mid-write",
//	   "match": {"src": "198.18.0.1", "dst": "198.18.1.1", "dst_qpn": 17, "kind": "data", "opcode": "RC_RDMA_WRITE_MIDDLE"},
//	   "packet": {"nth": 3},
//	   "action": "drop", "count": 1},
//	  {"name": "drop-retx", "match": {"kind": "data"}, "packet": {"psn_offset": 5, "iteration": 2}, "action": "drop"},
//	  {"name": "late", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "delay", "delay": "100us"}
//	]}
//
// A rule's fields:
//
//   - name: optional; two rules may not share one. Events carry it.
//   - match: which packets the rule counts; every field optional, all
//     given must hold. src and dst: the IP source and destination (IPv4
//     or IPv6). dst_qpn: the BTH's destination QP. kind: data (RC
//     requests: SEND, RDMA WRITE, RDMA READ request, atomics, and their
//     out-of-order variants), read_resp, atomic_ack, ack (ACK syndrome,
//     SACK 0xD1 and 0xD2), nak (NAK and RNR NAK syndromes, FNACK 0xD3,
//     MELO's NACK 0xD4), cnp, or any (the default: every RoCEv2 packet of
//     an RC QP, and CNPs). opcode: by the name bth.Opcode.String gives
//     (RC_RDMA_WRITE_MIDDLE, RC_ACKNOWLEDGE_SACK, ...) or by number.
//     Frames that are not RoCEv2, and UD and StaR packets, match no rule.
//   - packet: which of the matching packets the rule names, exactly one
//     of: nth, the N-th (from 1) matching packet in arrival order at the
//     switch, retransmissions included; or psn_offset, the packet whose
//     PSN is ISN+offset mod 2^24, ISN being the PSN of the first packet
//     that matched, with iteration k >= 1 (default 1): the k-th time a
//     packet of that PSN arrives (1 the original, 2 its first
//     retransmission).
//   - action: drop; ecn (the IP ECN field set to CE whatever it was, the
//     IPv4 header checksum fixed: ForceCE); corrupt (the first payload
//     byte flipped or, without payload, BTH byte 8's reserved bits, so
//     that the receiver's ICRC check fails); delay (held for "delay", a
//     Go duration above 0, then forwarded); duplicate (forwarded twice,
//     back to back).
//   - count: default 1, the action applies to that many consecutive hits:
//     matching packets nth..nth+count-1, or arrivals
//     iteration..iteration+count-1 of the PSN.
//
// Parse and LoadFile refuse unknown fields, a packet without a position
// or with both, nth or iteration below 1, a psn_offset of 2^24 or more,
// bad addresses, unknown kinds, opcodes and actions, a delay without
// action delay (and the reverse), with one line naming the file, the rule
// (its index from 0, and its name) and the field:
//
//	rules.json: rule 2 ("late"): action "dealy": want drop, ecn, corrupt, delay or duplicate
//
// Set.String is the canonical form, one rule a line with the defaults
// spelt out (kind, count, iteration), which Parse reads back to the same
// rules (`softnic rules FILE` prints it).
package inject
