/* ibvunsupported calls, through the ibverbs API, verbs softnic does not
   implement, a Q_Key on an RC QP (a UD attribute), and one that it does
   after them; tests/ibverbs_test.go
   compiles it against rdma-core's headers, runs it over the drop-in
   library and reads one line per call: the call, then errno=N. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

static void report(const char *call, int failed, int err)
{
	printf("%s %s errno=%d\n", call, failed ? "failed" : "succeeded", err);
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int rc;

	if (!list || n < 1) {
		printf("no device\n");
		return 2;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq) {
		printf("setup failed: %s\n", strerror(errno));
		return 2;
	}

	struct ibv_qp_init_attr uc = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	errno = 0;
	{
		int failed = ibv_create_qp(pd, &uc) == NULL;
		report("ibv_create_qp(UC)", failed, errno);
	}

	errno = 0;
	{
		int failed = ibv_alloc_mw(pd, IBV_MW_TYPE_1) == NULL;
		report("ibv_alloc_mw", failed, errno);
	}

	struct ibv_qp_init_attr_ex qx = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
					  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
					  .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	errno = 0;
	{
		int failed = ibv_create_qp_ex(ctx, &qx) == NULL;
		report("ibv_create_qp_ex", failed, errno);
	}

	errno = 0;
	{
		int failed = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) == NULL;
		report("ibv_reg_dmabuf_mr", failed, errno);
	}

	struct ibv_qp_init_attr rc_attr = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					    .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	qp = ibv_create_qp(pd, &rc_attr);
	if (!qp) {
		printf("create RC QP failed: %s\n", strerror(errno));
		return 2;
	}
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .qkey = 0x11111111 };
	errno = 0;
	rc = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_QKEY);
	report("ibv_modify_qp(RC,QKEY)", rc != 0, rc); /* a UD attribute: EINVAL on RC, as ib_modify_qp_is_ok */

	/* What softnic supports still works on the same context. */
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };
	rc = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc || ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx)) {
		printf("supported verbs failed: %s\n", strerror(rc ? rc : errno));
		return 1;
	}
	/* What ibv_reg_mr costs on ordinary memory: the first registration
	   copies the pages into shared memory, a second one of the same
	   buffer does not (docs/ibverbs.md). Reported, not checked. */
	pd = ibv_alloc_pd(ctx = ibv_open_device(list[0]));
	for (size_t size = 64 << 10; pd && size <= (64 << 20); size <<= 10) {
		char *buf = aligned_alloc(4096, size);
		struct timespec t0, t1, t2;
		struct ibv_mr *m1, *m2;

		memset(buf, 1, size);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		m1 = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		m2 = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		if (!m1 || !m2 || buf[size - 1] != 1) {
			printf("reg_mr of %zu bytes failed: %s\n", size, strerror(errno));
			return 1;
		}
		printf("cost: ibv_reg_mr of %zu KiB: first %.3f ms, again %.3f ms\n", size >> 10,
		       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
		       (t2.tv_sec - t1.tv_sec) * 1e3 + (t2.tv_nsec - t1.tv_nsec) / 1e6);
		ibv_dereg_mr(m2);
		ibv_dereg_mr(m1);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("supported verbs ok\n");
	return 0;
}
