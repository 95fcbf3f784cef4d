/* ibvud checks, through the ibverbs API, what a UD program meets besides
   the datagrams themselves: the QP's type and Q_Key read back by
   ibv_query_qp, an address handle without a GRH refused (EINVAL), one to
   an address no neighbour answers for refused (argv[1]), one to the peer
   made (argv[2]), and a send one byte larger than the port's active MTU
   refused at post (EINVAL), one of the MTU taken. tests/ibverbs_ud_test.go compiles it against rdma-core's
   headers, runs it over the drop-in library and reads one line per
   check: the call, then "failed errno=N" or "ok". */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int gid_of(const char *ip, union ibv_gid *gid)
{
	struct in_addr a;

	memset(gid, 0, sizeof(*gid));
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	gid->raw[10] = gid->raw[11] = 0xff; /* IPv4-mapped, as a RoCEv2 GID */
	memcpy(&gid->raw[12], &a, 4);
	return 0;
}

static struct ibv_ah *ah_to(struct ibv_pd *pd, const char *ip, const char *what)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;

	if (gid_of(ip, &aa.grh.dgid)) {
		printf("bad address %s\n", ip);
		exit(2);
	}
	aa.grh.hop_limit = 1;
	errno = 0;
	ah = ibv_create_ah(pd, &aa);
	if (ah)
		printf("%s ok\n", what);
	else
		printf("%s failed errno=%d\n", what, errno);
	return ah;
}

int main(int argc, char **argv)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;

	if (argc != 3) {
		printf("usage: ibvud unreachable-ip peer-ip\n");
		return 2;
	}
	if (!list || n < 1) {
		printf("no device\n");
		return 2;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	buf = calloc(1, 8192);
	mr = cq ? ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr ud = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 1 } };
	qp = mr ? ibv_create_qp(pd, &ud) : NULL;
	if (!qp) {
		printf("setup failed: %s\n", strerror(errno));
		return 2;
	}
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
		printf("modify to INIT failed: %s\n", strerror(errno));
		return 1;
	}
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
		printf("modify to RTR failed: %s\n", strerror(errno));
		return 1;
	}
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 5;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
		printf("modify to RTS failed: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	if (ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_QKEY, &qi)) {
		printf("query failed: %s\n", strerror(errno));
		return 1;
	}
	printf("query state=%d qkey=%#x type=%d\n", q.qp_state, q.qkey, qi.qp_type);

	struct ibv_ah_attr local = { .is_global = 0, .dlid = 1, .port_num = 1 };
	errno = 0;
	if (ibv_create_ah(pd, &local))
		printf("ibv_create_ah(no GRH) ok\n");
	else
		printf("ibv_create_ah(no GRH) failed errno=%d\n", errno);
	ah_to(pd, argv[1], "ibv_create_ah(unreachable)");
	struct ibv_ah *ah = ah_to(pd, argv[2], "ibv_create_ah(peer)");
	if (!ah)
		return 1;

	/* One byte more than the port's active MTU (softnic run --mtu). */
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa)) {
		printf("query port failed: %s\n", strerror(errno));
		return 1;
	}
	uint32_t mtu = 128u << pa.active_mtu;
	struct ibv_sge sge[2] = { { (uintptr_t)buf, mtu, mr->lkey }, { (uintptr_t)buf + mtu, 1, mr->lkey } };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = 2, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0x99;
	wr.wr.ud.remote_qkey = 0x11111111;
	int rc = ibv_post_send(qp, &wr, &bad);
	printf("ibv_post_send(MTU+1) %s errno=%d\n", rc ? "failed" : "ok", rc);
	sge[0].length = mtu;
	wr.num_sge = 1;
	rc = ibv_post_send(qp, &wr, &bad); /* goes: to no QP, and is lost */
	printf("ibv_post_send(MTU) %s errno=%d\n", rc ? "failed" : "ok", rc);
	if (rc && bad != &wr) {
		printf("bad_wr is not the refused request\n");
		return 1;
	}
	if (ibv_destroy_ah(ah) || ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx)) {
		printf("teardown failed: %s\n", strerror(errno));
		return 1;
	}
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
