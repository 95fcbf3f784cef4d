/* ibvasync checks shared receive queues and asynchronous events through
   the ibverbs API over the drop-in library; tests/ibverbs_test.go builds
   it with gcc and runs "ibvasync server DIR" on one host and "ibvasync
   client DIR" on the other (they exchange their QP numbers and GIDs in
   files in DIR). The server's QP takes its receives from an SRQ armed
   with a limit; the client's two SENDs consume two WQEs, which must
   raise IBV_EVENT_SRQ_LIMIT_REACHED on the server's async_fd. Each check
   prints one line; a failed check prints "FAIL ..." and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static const char *dir;

#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL " __VA_ARGS__); printf(" (errno %d)\n", errno); exit(1); } } while (0)

struct info {
	uint32_t qpn, psn;
	union ibv_gid gid;
};

static void put(const char *name, const void *v, size_t n)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	CHECK(f && fwrite(v, 1, n, f) == n && fclose(f) == 0 && rename(tmp, path) == 0, "write %s", path);
}

static void get(const char *name, void *v, size_t n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < 60000; i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			size_t got = fread(v, 1, n, f);

			fclose(f);
			CHECK(got == n, "read %s", path);
			return;
		}
		usleep(1000);
	}
	CHECK(0, "no %s after 60 s", path);
}

static void connect_qp(struct ibv_qp *qp, const struct info *me, const struct info *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };

	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			    IBV_QP_MAX_QP_RD_ATOMIC) == 0, "RTS");
}

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n == 1 && (p.revents & POLLIN);
}

static void wait_wcs(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int got = 0;

	for (long spins = 0; got < n; spins++) {
		int k = ibv_poll_cq(cq, n - got, wc + got);

		CHECK(k >= 0, "poll cq");
		got += k;
		CHECK(spins < 200000000L, "only %d of %d completions", got, n);
		if (k == 0)
			usleep(10);
	}
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS, "completion %d: %s", i, ibv_wc_status_str(wc[i].status));
}

struct destroyer {
	struct ibv_srq *srq;
	volatile int done, rc;
};

static void *destroy_srq(void *p)
{
	struct destroyer *d = p;

	d->rc = ibv_destroy_srq(d->srq);
	d->done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	int server, n = 0;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	struct info me, peer;
	char *buf = aligned_alloc(4096, 65536);

	if (argc != 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: ibvasync server|client DIR\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	dir = argv[2];
	list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "no device");
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open device");

	/* The port is up: PORT_ACTIVE waits, and async_fd says so. */
	CHECK(readable(ctx->async_fd, 5000), "async_fd not readable with PORT_ACTIVE waiting");
	CHECK(ibv_get_async_event(ctx, &ev) == 0, "ibv_get_async_event");
	CHECK(ev.event_type == IBV_EVENT_PORT_ACTIVE && ev.element.port_num == 1, "first event %s, want port active",
	      ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	printf("port active event ok\n");
	CHECK(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	CHECK(!readable(ctx->async_fd, 0), "async_fd readable with no event");
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, "ibv_get_async_event with none waiting");
	printf("nonblocking EAGAIN ok\n");

	CHECK(ibv_query_device(ctx, &da) == 0 && da.max_srq > 0 && da.max_srq_wr > 0 && da.max_srq_sge > 0, "max_srq");
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	cq = mr ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	CHECK(cq, "setup");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (server) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 6, .max_sge = 1 } };
		struct ibv_srq_attr at;
		struct ibv_recv_wr rwr, *bad;
		struct ibv_sge sge;

		srq = ibv_create_srq(pd, &sa);
		CHECK(srq && sa.attr.max_wr >= 6, "ibv_create_srq");
		qa.srq = srq;
		qp = ibv_create_qp(pd, &qa);
		CHECK(qp && qp->srq == srq, "ibv_create_qp with srq");
		sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 100, .lkey = mr->lkey };
		rwr = (struct ibv_recv_wr){ .wr_id = 99, .sg_list = &sge, .num_sge = 1 };
		CHECK(ibv_post_recv(qp, &rwr, &bad) != 0, "ibv_post_recv on a QP with an SRQ succeeded");
		for (int i = 0; i < 4; i++) {
			sge = (struct ibv_sge){ .addr = (uintptr_t)buf + 4096 * i, .length = 4096, .lkey = mr->lkey };
			rwr = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &sge, .num_sge = 1 };
			CHECK(ibv_post_srq_recv(srq, &rwr, &bad) == 0, "ibv_post_srq_recv");
		}
		at.srq_limit = 3;
		CHECK(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT) == 0, "ibv_modify_srq(IBV_SRQ_LIMIT)");
		memset(&at, 0, sizeof(at));
		CHECK(ibv_query_srq(srq, &at) == 0 && at.srq_limit == 3 && at.max_wr >= 6 && at.max_sge == 1,
		      "ibv_query_srq: limit %u max_wr %u max_sge %u", at.srq_limit, at.max_wr, at.max_sge);
		CHECK(ibv_destroy_srq(srq) == EBUSY, "ibv_destroy_srq of an SRQ a QP uses");
		printf("srq verbs ok\n");
	} else {
		qp = ibv_create_qp(pd, &qa);
		CHECK(qp, "ibv_create_qp");
	}
	me.qpn = qp->qp_num;
	me.psn = server ? 0x1234 : 0x4321;
	CHECK(ibv_query_gid(ctx, 1, 0, &me.gid) == 0, "ibv_query_gid");
	put(server ? "server.info" : "client.info", &me, sizeof(me));
	get(server ? "client.info" : "server.info", &peer, sizeof(peer));
	connect_qp(qp, &me, &peer);
	put(server ? "server.ready" : "client.ready", &me, sizeof(me));
	get(server ? "client.ready" : "server.ready", &peer, sizeof(peer));

	if (!server) {
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 1000 + i, .lkey = mr->lkey };
			struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			memset(buf, 'a' + i, 1000 + i);
			CHECK(ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send");
			wait_wcs(cq, 1, wc);
		}
		printf("sends ok\n");
		get("server.done", &peer, sizeof(peer));
	} else {
		wait_wcs(cq, 2, wc);
		for (int i = 0; i < 2; i++) {
			CHECK(wc[i].opcode == IBV_WC_RECV && wc[i].byte_len == 1000u + i && wc[i].qp_num == qp->qp_num &&
			      buf[4096 * wc[i].wr_id] == 'a' + i, "receive %d", i);
		}
		printf("receives ok\n");
		/* Two WQEs left, below the limit of 3: the event, once. */
		CHECK(readable(ctx->async_fd, 10000), "async_fd not readable after the SRQ fell below its limit");
		CHECK(ibv_get_async_event(ctx, &ev) == 0, "ibv_get_async_event");
		CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq, "event %s, want SRQ limit reached",
		      ibv_event_type_str(ev.event_type));
		printf("srq limit event ok: %s\n", ibv_event_type_str(ev.event_type));
		struct ibv_srq_attr at;
		CHECK(ibv_query_srq(srq, &at) == 0 && at.srq_limit == 0, "limit not disarmed after the event");
		errno = 0;
		CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN, "a second event");
		/* ibv_destroy_srq waits until the event is acknowledged. */
		CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
		struct destroyer d = { .srq = srq };
		pthread_t th;
		ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		ev.element.srq = srq;
		CHECK(pthread_create(&th, NULL, destroy_srq, &d) == 0, "pthread_create");
		usleep(200000);
		CHECK(!d.done, "ibv_destroy_srq returned with an event unacknowledged");
		ibv_ack_async_event(&ev);
		pthread_join(th, NULL);
		CHECK(d.rc == 0, "ibv_destroy_srq after the ack: %d", d.rc);
		printf("destroy waits for ack ok\n");
		put("server.done", &me, sizeof(me));
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ibvasync %s ok\n", argv[1]);
	return 0;
}
