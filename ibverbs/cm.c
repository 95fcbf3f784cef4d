//go:build ibverbs

/* The drop-in libibverbs' C help for its rdma_cm side (rdmacm.go): the
   state machine moves an id's QP with ibv_modify_qp, as librdmacm does,
   so the move takes the same path (and next-hop resolution) as the
   program's own. */

#include <infiniband/verbs.h>
#include <string.h>

#include "snic_cm.h"

int snic_modify_qp_c(uintptr_t qp, struct snic_qp_attr *a, int mask)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = a->state;
	attr.cur_qp_state = a->cur_state;
	attr.qp_access_flags = a->access;
	attr.pkey_index = a->pkey_index;
	attr.port_num = a->port;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = a->port ? a->port : 1;
	memcpy(attr.ah_attr.grh.dgid.raw, a->dgid, 16);
	attr.ah_attr.grh.traffic_class = a->traffic_class;
	attr.ah_attr.grh.hop_limit = a->hop_limit;
	attr.ah_attr.grh.flow_label = a->flow_label;
	attr.path_mtu = a->path_mtu;
	attr.dest_qp_num = a->dest_qpn;
	attr.rq_psn = a->rq_psn;
	attr.sq_psn = a->sq_psn;
	attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	attr.max_rd_atomic = a->max_rd_atomic;
	attr.min_rnr_timer = a->min_rnr_timer;
	attr.timeout = a->timeout;
	attr.retry_cnt = a->retry_cnt;
	attr.rnr_retry = a->rnr_retry;
	attr.qkey = a->qkey;
	return ibv_modify_qp((struct ibv_qp *)qp, &attr, mask);
}

/* Every context of this library is verbs.c's struct snic_context, which
   starts with the struct ibv_context and then the Go handle. */
struct snic_context_head {
	struct ibv_context ibv;
	uintptr_t h;
};

uintptr_t snic_context_handle_c(uintptr_t ctx)
{
	if (!ctx)
		return 0;
	return ((struct snic_context_head *)ctx)->h;
}
