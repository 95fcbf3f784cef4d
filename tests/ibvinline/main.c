/* ibvinline checks IBV_SEND_INLINE through the ibverbs API over the
   drop-in library; tests/ibverbs_inline_test.go builds it with gcc and
   runs "ibvinline server DIR MODE" on one host and "ibvinline client DIR
   MODE" on the other (they exchange their QP numbers, GIDs and the
   server's region in files in DIR; MODE "all" adds the UD part to the RC
   one, "rc" leaves it out, for a lossy link where UD loses datagrams).

   The client's data lives on its stack, never registered, and is
   overwritten as soon as ibv_post_send returns: what arrives must be
   what was there at the post. Over RC it posts NOPS inline SENDs (some
   with immediate data) and RDMA WRITEs (some with immediate data) of 1
   to 128 bytes, in lists of 1 to 3 work requests with two SGEs each,
   one in four signaled, through a send queue of 8: far more than its
   depth, so that the library's inline slots come round many times. The
   server checks every receive (order, length, bytes, immediate data)
   and every WRITE's bytes. Then the refusals: a QP asking for more
   inline data than the device takes, an inline SEND and an inline WRITE
   longer than the QP's max_inline_data (EINVAL, bad_wr naming it, the
   work request before it in the list still posted), and an RDMA READ
   with IBV_SEND_INLINE, for which the flag means nothing (it reads).
   Over UD, inline SENDs to the server's UD QP. Each check prints one
   line; a failed check prints "FAIL ..." and exits 1. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static const char *dir;

#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL " __VA_ARGS__); printf(" (errno %d)\n", errno); exit(1); } } while (0)

#define NOPS 1200      /* RC work requests */
#define SLOT 128       /* the server's bytes per WRITE and per receive */
#define ASK_INLINE 100 /* the QPs' max_inline_data asked for */
#define NUD 64         /* UD datagrams */
#define GRH 40

struct info {
	uint32_t qpn, psn, udqpn, rkey;
	uint64_t addr;
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
	for (int i = 0; i < 120000; i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			size_t got = fread(v, 1, n, f);

			fclose(f);
			CHECK(got == n, "read %s", path);
			return;
		}
		usleep(1000);
	}
	CHECK(0, "no %s after 120 s", path);
}

/* Work request i of the RC sequence: its size, opcode, data. */
static uint32_t op_size(int i) { return 1 + (uint32_t)(i * 37) % SLOT; }
static int op_write(int i) { return i % 3 == 2; }
static int op_imm(int i) { return op_write(i) ? i % 7 == 0 : i % 5 == 0; }
static uint8_t op_byte(int i, uint32_t j) { return (uint8_t)(i * 7 + j * 13 + 1); }
/* A receive completion: every SEND, and every WRITE with immediate. */
static int op_recv(int i) { return !op_write(i) || op_imm(i); }

static void init_rc(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };

	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
}

static void connect_rc(struct ibv_qp *qp, const struct info *me, const struct info *peer)
{
	struct ibv_qp_attr a;

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

static void connect_ud(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };

	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0, "UD INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "UD RTS");
}

/* drain polls cq until it is empty, checking each completion; it
   returns how many it took. */
static int drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int total = 0, k;

	while ((k = ibv_poll_cq(cq, 16, wc)) > 0) {
		for (int i = 0; i < k; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "send completion %#llx: %s", (unsigned long long)wc[i].wr_id,
			      ibv_wc_status_str(wc[i].status));
		total += k;
	}
	CHECK(k == 0, "poll cq");
	return total;
}

static void wait_drain(struct ibv_cq *cq, int *have, int want)
{
	for (long spins = 0; *have < want; spins++) {
		int k = drain(cq);

		*have += k;
		CHECK(spins < 20000000L, "%d of %d send completions", *have, want);
		if (k == 0)
			usleep(20);
	}
}

static void rc_client(struct ibv_qp *qp, struct ibv_cq *cq, const struct info *peer)
{
	int next = 0, signaled = 0, done = 0;

	while (next < NOPS) {
		/* A list of up to 3 work requests; each one's two SGEs point into
		   two stack buffers, overwritten once the post returns. */
		uint8_t lo[3][SLOT], hi[3][SLOT];
		struct ibv_sge sge[3][2];
		struct ibv_send_wr wrs[3], *bad = NULL;
		int n = 1 + next % 3, posted;

		if (n > NOPS - next)
			n = NOPS - next;
		memset(wrs, 0, sizeof(wrs));
		for (int k = 0; k < n; k++) {
			int i = next + k;
			uint32_t size = op_size(i), half = size / 2;

			for (uint32_t j = 0; j < size; j++) {
				if (j < half)
					lo[k][j] = op_byte(i, j);
				else
					hi[k][j] = op_byte(i, j);
			}
			sge[k][0] = (struct ibv_sge){ .addr = (uintptr_t)lo[k], .length = half, .lkey = 0 };
			sge[k][1] = (struct ibv_sge){ .addr = (uintptr_t)&hi[k][half], .length = size - half, .lkey = 0 };
			wrs[k].wr_id = i;
			wrs[k].sg_list = sge[k];
			wrs[k].num_sge = 2;
			wrs[k].send_flags = IBV_SEND_INLINE | (i % 4 == 3 || i == NOPS - 1 ? IBV_SEND_SIGNALED : 0);
			if (op_write(i)) {
				wrs[k].opcode = op_imm(i) ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
				wrs[k].wr.rdma.remote_addr = peer->addr + (uint64_t)i * SLOT;
				wrs[k].wr.rdma.rkey = peer->rkey;
			} else {
				wrs[k].opcode = op_imm(i) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			}
			if (op_imm(i))
				wrs[k].imm_data = htobe32(i);
			if (k > 0)
				wrs[k - 1].next = &wrs[k];
		}
		int rc = ibv_post_send(qp, wrs, &bad);
		memset(lo, 0xee, sizeof(lo));
		memset(hi, 0xee, sizeof(hi));
		if (rc == 0) {
			posted = n;
		} else {
			CHECK(rc == ENOMEM, "ibv_post_send of work request %d: %d", next, rc);
			posted = bad - wrs;
			CHECK(posted >= 0 && posted < n, "bad_wr outside the list");
		}
		for (int k = 0; k < posted; k++)
			signaled += (wrs[k].send_flags & IBV_SEND_SIGNALED) != 0;
		next += posted;
		done += drain(cq);
		if (rc)
			usleep(20); /* the send queue is full: the ACKs free it */
	}
	wait_drain(cq, &done, signaled);
	printf("rc inline posts ok: %d work requests, %d signaled\n", NOPS, signaled);

	/* The refusals, and the most a QP takes. */
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi) == 0, "ibv_query_qp");
	uint32_t max = qa.cap.max_inline_data;
	uint8_t big[300], small[SLOT];
	struct ibv_sge s2 = { .addr = (uintptr_t)big, .length = max + 1 };
	struct ibv_send_wr w2 = { .wr_id = 0xb1, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad = NULL;
	w2.wr.rdma.remote_addr = peer->addr + (uint64_t)NOPS * SLOT;
	w2.wr.rdma.rkey = peer->rkey;
	memset(big, 0x5a, sizeof(big));
	int rc = ibv_post_send(qp, &w2, &bad);
	CHECK(rc == EINVAL && bad == &w2, "inline WRITE of max_inline_data+1 bytes: %d", rc);
	printf("inline write longer than max_inline_data refused ok: EINVAL\n");
	/* Exactly max_inline_data bytes (at most the server's slot) go, into
	   the server's slot NOPS, which it checks after work request NOPS. */
	s2.length = max < SLOT ? max : SLOT;
	for (uint32_t j = 0; j < s2.length; j++)
		big[j] = op_byte(NOPS + 1, j);
	rc = ibv_post_send(qp, &w2, &bad);
	memset(big, 0xee, sizeof(big));
	CHECK(rc == 0, "inline WRITE of %u bytes: %d", s2.length, rc);
	/* A list of a good inline SEND (work request NOPS, the server's last
	   receive) and one a byte longer than max_inline_data: the first
	   goes, the second is bad_wr. */
	for (uint32_t j = 0; j < op_size(NOPS); j++)
		small[j] = op_byte(NOPS, j);
	memset(big, 0x5a, sizeof(big));
	struct ibv_sge s1 = { .addr = (uintptr_t)small, .length = op_size(NOPS) };
	s2.length = max + 1;
	w2.opcode = IBV_WR_SEND;
	w2.wr_id = 0xb2;
	struct ibv_send_wr w1 = { .wr_id = NOPS, .next = &w2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
	bad = NULL;
	rc = ibv_post_send(qp, &w1, &bad);
	memset(small, 0xee, sizeof(small));
	CHECK(rc == EINVAL && bad == &w2, "inline SEND of max_inline_data+1 bytes in a list: %d, bad_wr %s", rc,
	      bad == &w1 ? "the first" : bad == &w2 ? "the second" : "neither");
	printf("inline send longer than max_inline_data refused ok: EINVAL, bad_wr the second of 2\n");
	wait_drain(cq, &done, signaled + 2);
	printf("refusals ok\n");
}

int main(int argc, char **argv)
{
	int server, n = 0, ud;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *udqp = NULL;
	struct info me, peer;
	size_t size = (size_t)(NOPS + 1) * SLOT * 2 + (GRH + SLOT) * NUD;
	uint8_t *buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);

	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (strcmp(argv[3], "all") && strcmp(argv[3], "rc"))) {
		fprintf(stderr, "usage: ibvinline server|client DIR all|rc\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	dir = argv[2];
	ud = !strcmp(argv[3], "all");
	memset(buf, 0, size);
	list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "no device");
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open device");
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	cq = mr ? ibv_create_cq(ctx, 4096, NULL, NULL, 0) : NULL;
	CHECK(cq, "setup");

	/* max_inline_data: above the device's 256 refused, 256 taken, and what
	   a QP asked for rounded up to the size it reports, at create and at
	   query. */
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 2 * NOPS, .max_send_sge = 2,
						.max_recv_sge = 1, .max_inline_data = 257 } };
	errno = 0;
	CHECK(ibv_create_qp(pd, &qa) == NULL && errno == EINVAL, "ibv_create_qp with max_inline_data 257");
	qa.cap.max_inline_data = 256;
	qp = ibv_create_qp(pd, &qa);
	CHECK(qp && qa.cap.max_inline_data == 256, "ibv_create_qp with max_inline_data 256");
	CHECK(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	printf("max_inline_data 257 refused, 256 taken ok\n");
	qa.cap.max_inline_data = ASK_INLINE;
	qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "ibv_create_qp");
	uint32_t maxinl = qa.cap.max_inline_data;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &at, IBV_QP_CAP, &qi) == 0, "ibv_query_qp");
	CHECK(maxinl >= ASK_INLINE && maxinl <= 256 && at.cap.max_inline_data == maxinl && qi.cap.max_inline_data == maxinl,
	      "max_inline_data: asked %d, create says %u, query %u and %u", ASK_INLINE, maxinl, at.cap.max_inline_data,
	      qi.cap.max_inline_data);
	printf("max_inline_data ok: asked %d, reported %u\n", ASK_INLINE, maxinl);
	init_rc(qp);
	if (ud) {
		struct ibv_qp_init_attr ua = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					       .cap = { .max_send_wr = 4, .max_recv_wr = NUD, .max_send_sge = 2,
							.max_recv_sge = 1, .max_inline_data = 64 } };
		udqp = ibv_create_qp(pd, &ua);
		CHECK(udqp && ua.cap.max_inline_data >= 64, "ibv_create_qp UD with max_inline_data 64");
		connect_ud(udqp);
	}

	uint8_t *wregion = buf, *rregion = buf + (size_t)(NOPS + 1) * SLOT, *uregion = buf + (size_t)(NOPS + 1) * SLOT * 2;
	if (server) {
		struct ibv_recv_wr rwr, *bad;
		struct ibv_sge sge;

		for (int k = 0; k <= NOPS; k++) {
			sge = (struct ibv_sge){ .addr = (uintptr_t)(rregion + (size_t)k * SLOT), .length = SLOT, .lkey = mr->lkey };
			rwr = (struct ibv_recv_wr){ .wr_id = k, .sg_list = &sge, .num_sge = 1 };
			CHECK(ibv_post_recv(qp, &rwr, &bad) == 0, "ibv_post_recv %d", k);
		}
		for (int k = 0; ud && k < NUD; k++) {
			sge = (struct ibv_sge){ .addr = (uintptr_t)(uregion + (size_t)k * (GRH + SLOT)), .length = GRH + SLOT,
						.lkey = mr->lkey };
			rwr = (struct ibv_recv_wr){ .wr_id = 0x10000 + k, .sg_list = &sge, .num_sge = 1 };
			CHECK(ibv_post_recv(udqp, &rwr, &bad) == 0, "ibv_post_recv UD %d", k);
		}
	}
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	me.psn = server ? 0x1234 : 0x4321;
	me.udqpn = udqp ? udqp->qp_num : 0;
	me.addr = (uintptr_t)wregion;
	me.rkey = mr->rkey;
	CHECK(ibv_query_gid(ctx, 1, 0, &me.gid) == 0, "ibv_query_gid");
	put(server ? "server.info" : "client.info", &me, sizeof(me));
	get(server ? "client.info" : "server.info", &peer, sizeof(peer));
	connect_rc(qp, &me, &peer);
	put(server ? "server.ready" : "client.ready", &me, sizeof(me));
	get(server ? "client.ready" : "server.ready", &peer, sizeof(peer));

	if (!server) {
		rc_client(qp, cq, &peer);
		/* IBV_SEND_INLINE on a READ means nothing: it reads the server's
		   first WRITE into registered memory. */
		struct ibv_sge s = { .addr = (uintptr_t)rregion, .length = op_size(2), .lkey = mr->lkey };
		struct ibv_send_wr r = { .wr_id = 0xc0, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
					 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad;
		r.wr.rdma.remote_addr = peer.addr + 2 * SLOT;
		r.wr.rdma.rkey = peer.rkey;
		memset(rregion, 0, SLOT);
		CHECK(ibv_post_send(qp, &r, &bad) == 0, "RDMA READ with IBV_SEND_INLINE");
		int done = 0;
		wait_drain(cq, &done, 1);
		for (uint32_t j = 0; j < op_size(2); j++)
			CHECK(rregion[j] == op_byte(2, j), "READ byte %u", j);
		printf("read with IBV_SEND_INLINE ok: the flag ignored\n");
		if (ud) {
			get("server.rcdone", &peer, sizeof(peer));
			struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
			aa.grh.dgid = peer.gid;
			aa.grh.hop_limit = 1;
			struct ibv_ah *ah = ibv_create_ah(pd, &aa);
			CHECK(ah, "ibv_create_ah");
			int signaled = 0, done = 0;
			for (int i = 0; i < NUD;) {
				uint8_t d[2][32];
				uint32_t len = 1 + i % 64, half = len / 2;
				for (uint32_t j = 0; j < len; j++)
					d[j < half ? 0 : 1][j < half ? j : j - half] = op_byte(i + 5000, j);
				struct ibv_sge sg[2] = { { (uintptr_t)d[0], half, 0 }, { (uintptr_t)d[1], len - half, 0 } };
				struct ibv_send_wr w = { .wr_id = 0x20000 + i, .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_SEND,
							 .send_flags = IBV_SEND_INLINE | (i % 8 == 7 ? IBV_SEND_SIGNALED : 0) };
				w.wr.ud.ah = ah;
				w.wr.ud.remote_qpn = peer.udqpn;
				w.wr.ud.remote_qkey = 0x11111111;
				int rc = ibv_post_send(udqp, &w, &bad);
				memset(d, 0xee, sizeof(d));
				if (rc == 0) {
					signaled += i % 8 == 7;
					i++;
				} else {
					CHECK(rc == ENOMEM, "UD ibv_post_send %d: %d", i, rc);
					usleep(20);
				}
				done += drain(cq);
			}
			wait_drain(cq, &done, signaled);
			printf("ud inline posts ok: %d datagrams\n", NUD);
			get("server.uddone", &peer, sizeof(peer));
			CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
		}
	} else {
		struct ibv_wc wc[16];
		int want = 0, k = 0, got = 0;

		for (int i = 0; i <= NOPS; i++)
			want += i == NOPS || op_recv(i);
		for (long spins = 0; got < want; spins++) {
			int m = ibv_poll_cq(cq, 16, wc);

			CHECK(m >= 0, "poll cq");
			CHECK(spins < 20000000L, "%d of %d receives", got, want);
			if (m == 0)
				usleep(20);
			for (int c = 0; c < m; c++, got++) {
				/* The next work request the client sent that consumes a receive. */
				while (k < NOPS && !op_recv(k))
					k++;
				CHECK(wc[c].status == IBV_WC_SUCCESS, "receive %d: %s", got, ibv_wc_status_str(wc[c].status));
				CHECK(wc[c].wr_id == (uint64_t)got, "receive %d took WQE %llu", got, (unsigned long long)wc[c].wr_id);
				if (k < NOPS && op_write(k)) {
					CHECK(wc[c].opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc[c].wc_flags & IBV_WC_WITH_IMM) &&
					      be32toh(wc[c].imm_data) == (uint32_t)k, "receive %d: WRITE %d with immediate: opcode %d imm %u",
					      got, k, wc[c].opcode, be32toh(wc[c].imm_data));
				} else {
					const uint8_t *p = rregion + (size_t)got * SLOT;

					CHECK(wc[c].opcode == IBV_WC_RECV && wc[c].byte_len == op_size(k),
					      "receive %d: SEND %d: opcode %d, %u bytes, want %u", got, k, wc[c].opcode, wc[c].byte_len,
					      op_size(k));
					for (uint32_t j = 0; j < op_size(k); j++)
						CHECK(p[j] == op_byte(k, j), "receive %d: SEND %d: byte %u is %#x, want %#x", got, k, j, p[j],
						      op_byte(k, j));
					int imm = k < NOPS && op_imm(k);
					CHECK(!!(wc[c].wc_flags & IBV_WC_WITH_IMM) == imm &&
					      (!imm || be32toh(wc[c].imm_data) == (uint32_t)k), "receive %d: SEND %d: immediate", got, k);
				}
				k++;
			}
		}
		printf("rc receives ok: %d, byte-exact\n", want);
		/* Work request NOPS, the last SEND, came after every WRITE: RC
		   keeps their order. */
		int writes = 0;
		for (int i = 0; i < NOPS; i++) {
			if (!op_write(i))
				continue;
			writes++;
			for (uint32_t j = 0; j < SLOT; j++) {
				uint8_t w = j < op_size(i) ? op_byte(i, j) : 0;

				CHECK(wregion[(size_t)i * SLOT + j] == w, "WRITE %d: byte %u is %#x, want %#x", i, j,
				      wregion[(size_t)i * SLOT + j], w);
			}
		}
		uint32_t last = maxinl < SLOT ? maxinl : SLOT;
		for (uint32_t j = 0; j < last; j++)
			CHECK(wregion[(size_t)NOPS * SLOT + j] == op_byte(NOPS + 1, j), "the WRITE of max_inline_data: byte %u", j);
		printf("rc writes ok: %d and one of max_inline_data (%u bytes), byte-exact\n", writes, last);
		put("server.rcdone", &me, sizeof(me));
		if (ud) {
			for (long spins = 0, dg = 0; dg < NUD; spins++) {
				int m = ibv_poll_cq(cq, 16, wc);

				CHECK(m >= 0, "poll cq");
				CHECK(spins < 20000000L, "%ld of %d datagrams", dg, NUD);
				if (m == 0)
					usleep(20);
				for (int c = 0; c < m; c++, dg++) {
					uint32_t len = 1 + dg % 64;
					const uint8_t *p = uregion + (size_t)(wc[c].wr_id - 0x10000) * (GRH + SLOT) + GRH;

					CHECK(wc[c].status == IBV_WC_SUCCESS && wc[c].opcode == IBV_WC_RECV && wc[c].byte_len == GRH + len &&
					      wc[c].wr_id == 0x10000 + (uint64_t)dg && wc[c].src_qp == peer.udqpn,
					      "datagram %ld: %s, %u bytes, WQE %#llx", dg, ibv_wc_status_str(wc[c].status), wc[c].byte_len,
					      (unsigned long long)wc[c].wr_id);
					for (uint32_t j = 0; j < len; j++)
						CHECK(p[j] == op_byte(dg + 5000, j), "datagram %ld: byte %u", dg, j);
				}
			}
			printf("ud receives ok: %d, byte-exact\n", NUD);
			put("server.uddone", &me, sizeof(me));
		}
	}
	/* The client's READ needs the server's QP: the server waits. */
	put(server ? "server.done" : "client.done", &me, sizeof(me));
	get(server ? "client.done" : "server.done", &peer, sizeof(peer));
	if (udqp)
		CHECK(ibv_destroy_qp(udqp) == 0, "ibv_destroy_qp UD");
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_dereg_mr(mr) == 0 && ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0,
	      "teardown");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ibvinline %s ok\n", argv[1]);
	return 0;
}
