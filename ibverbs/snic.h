/* The flat structures the C side of the drop-in libibverbs (verbs.c)
   and its Go side (lib.go) exchange: ibverbs' unions and linked lists
   stay in C, softnic's types stay in Go. */
#ifndef SNIC_H
#define SNIC_H

#include <stdint.h>

#define SNIC_MAX_SGE 8   /* qp.MaxSGE */
#define SNIC_POST_BATCH 32
/* The most IBV_SEND_INLINE data a QP takes (cap.max_inline_data), in
   bytes; a QP's inline slots are its max_inline_data rounded up to
   SNIC_INLINE_ALIGN (docs/ibverbs.md, "Inline data"). */
#define SNIC_MAX_INLINE 256
#define SNIC_INLINE_ALIGN 64

struct snic_devinfo {
	char name[64];
	uint8_t gid[16];   /* the port's IP address, IPv4-mapped for IPv4 */
	uint8_t mac[6];
	int max_qp_wr, max_cqe, max_sge, max_qp_rd_atom;
};

struct snic_sge {
	uint64_t addr;
	uint32_t length, lkey;
};

struct snic_send_wr {
	uint64_t wr_id;
	uint32_t opcode, flags, num_sge, imm; /* imm: host order */
	uint64_t remote_addr, compare_add, swap;
	uint32_t rkey;
	struct snic_sge sge[SNIC_MAX_SGE];
	uint32_t ah, remote_qpn, remote_qkey; /* UD: the AH's engine number, wr.ud's QPN and Q_Key */
};

struct snic_recv_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	struct snic_sge sge[SNIC_MAX_SGE];
};

struct snic_wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, imm, qp_num, src_qp, flags; /* imm: host order */
};

struct snic_qp_attr {
	uint32_t state, cur_state, access, pkey_index, port;
	uint8_t dgid[16];
	uint32_t traffic_class, hop_limit, flow_label;
	uint32_t path_mtu, dest_qpn, rq_psn, sq_psn;
	uint32_t max_dest_rd_atomic, max_rd_atomic, min_rnr_timer, timeout, retry_cnt, rnr_retry;
	uint32_t qkey; /* UD */
};

/* An address handle's attributes (ibv_ah_attr, RoCE: the GRH's). */
struct snic_ah_attr {
	uint8_t dgid[16];
	uint32_t traffic_class, hop_limit, flow_label, sgid_index;
};

#endif
