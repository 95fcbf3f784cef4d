//go:build ibverbs

/* The ibverbs side of softnic's drop-in libibverbs.so.1: the exported
   ibv_* calls and the context's ops table (what verbs.h's inline
   ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq call),
   on top of the Go functions of lib.go. The structures are rdma-core's
   own (<infiniband/verbs.h>); each object is rdma-core's struct followed
   by the handle of its Go object. The context is a legacy one
   (abi_compat is not __VERBS_ABI_IS_EXTENDED), so verbs.h's extended
   inline calls (ibv_query_device_ex, ibv_create_qp_ex, ...) fall back to
   the plain calls or fail with EOPNOTSUPP, as on an old provider. */

#define _GNU_SOURCE
#include <infiniband/verbs.h>
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "snic.h"
#include "_cgo_export.h"
#include "versions_gen.h"

#define SNIC_DEFAULT_SOCKET "/run/softnic/softnic.sock"

struct snic_device {
	struct ibv_device dev;
	char socket[108];
	struct snic_devinfo info;
};

struct snic_context {
	struct ibv_context ibv;
	uintptr_t h;
	struct snic_devinfo info;
	int own_async_fd; /* async_fd is ours to close: the daemon has no events */
};

struct snic_pd { struct ibv_pd ibv; uintptr_t h; };
/* An address handle: num is the engine's number for it, which UD send
   work requests carry (snic_send_wr.ah). */
struct snic_ah { struct ibv_ah ibv; uintptr_t h; uint32_t num; };
struct snic_mr { struct ibv_mr ibv; uintptr_t h; };
struct snic_channel { struct ibv_comp_channel ibv; uintptr_t h; };
struct snic_cq {
	struct ibv_cq ibv;
	uintptr_t h;
	unsigned empty; /* consecutive empty polls */
	uint32_t async_reported; /* asynchronous events (CQ_ERR) returned (ibv.mutex) */
};

/* A program that spins on ibv_poll_cq (perftest, ibv_rc_pingpong without
   -e) yields the CPU after this many empty polls in a row, so that the
   daemon's poll loop, which moves its packets, gets to run on a host
   with few cores (docs/ibverbs.md; 32 is softnic-bench's throughput
   pace: 8 held ib_write_bw to 0.87 of write_bw). SOFTNIC_POLL_YIELD=N changes it
   (0: never yield). */
#define SNIC_EMPTY_POLLS_YIELD 32
static unsigned snic_poll_yield = SNIC_EMPTY_POLLS_YIELD;
struct snic_qp {
	struct ibv_qp ibv;
	uintptr_t h;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	uint32_t events_reported; /* asynchronous events ibv_get_async_event returned (ibv.mutex) */
	/* IBV_SEND_INLINE (docs/ibverbs.md, "Inline data"): inl_slots slots
	   of cap.max_inline_data bytes at inl_buf, registered with lkey
	   inl_lkey (Go handle inl_h; none if max_inline_data is 0).
	   inl_next is the slot of the next inline work request; inl_lock
	   holds it from the copy of the data until the post. */
	uint8_t *inl_buf;
	uintptr_t inl_h;
	uint32_t inl_slots, inl_lkey, inl_next;
	pthread_mutex_t inl_lock;
};
struct snic_srq {
	struct ibv_srq ibv;
	uintptr_t h;
	uint32_t events_reported;
};

/* SOFTNIC_DEBUG: besides the reasons of failed calls (lib.go), every
   completion with an error status is printed to stderr, for programs
   that do not look at the status themselves. */
static int snic_debug;

static pthread_mutex_t snic_lock = PTHREAD_MUTEX_INITIALIZER;
static struct snic_device snic_dev; /* the one device: the daemon of SOFTNIC_SOCKET */
static int snic_dev_ok;

static const char *snic_socket(void)
{
	const char *s = getenv("SOFTNIC_SOCKET");
	return s && *s ? s : SNIC_DEFAULT_SOCKET;
}

static int snic_err(int e)
{
	errno = e;
	return e;
}

/* Devices */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	struct snic_devinfo info;
	const char *path = snic_socket();
	int rc;

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&info, 0, sizeof(info));
	rc = snic_go_probe((char *)path, &info);
	pthread_mutex_lock(&snic_lock);
	if (rc == 0) {
		/* The device stays valid after ibv_free_device_list, as
		   rdma-core's do while a context is open. */
		if (!snic_dev_ok || strcmp(snic_dev.socket, path) != 0) {
			memset(&snic_dev, 0, sizeof(snic_dev));
			snic_dev.dev.node_type = IBV_NODE_CA;
			snic_dev.dev.transport_type = IBV_TRANSPORT_IB;
			snprintf(snic_dev.socket, sizeof(snic_dev.socket), "%s", path);
		}
		snic_dev.info = info;
		snprintf(snic_dev.dev.name, sizeof(snic_dev.dev.name), "%s", info.name);
		snprintf(snic_dev.dev.dev_name, sizeof(snic_dev.dev.dev_name), "softnic");
		snprintf(snic_dev.dev.dev_path, sizeof(snic_dev.dev.dev_path), "%s", path);
		snprintf(snic_dev.dev.ibdev_path, sizeof(snic_dev.dev.ibdev_path), "%s", path);
		snic_dev_ok = 1;
		list[0] = &snic_dev.dev;
	} else if (getenv("SOFTNIC_DEBUG")) {
		fprintf(stderr, "softnic libibverbs: no softnic daemon at %s (SOFTNIC_SOCKET): %s\n", path, strerror(rc));
	}
	pthread_mutex_unlock(&snic_lock);
	if (num_devices)
		*num_devices = list[0] ? 1 : 0;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

int ibv_get_device_index(struct ibv_device *device)
{
	return device == &snic_dev.dev ? 0 : -1;
}

static uint64_t snic_guid(const uint8_t *mac)
{
	/* EUI-64 from the port's MAC, as RoCE NICs derive it. */
	uint8_t g[8] = { mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };
	uint64_t v;

	memcpy(&v, g, 8);
	return v; /* already in network order */
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct snic_device *d = (struct snic_device *)device;

	return device == &snic_dev.dev ? snic_guid(d->info.mac) : 0;
}

/* The context's ops: the data path. */

static int snic_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct snic_cq *cq = (struct snic_cq *)ibcq;
	struct snic_wc tmp[32];
	int total = 0;

	while (total < num) {
		int want = num - total < 32 ? num - total : 32;
		int got = snic_go_poll(cq->h, want, tmp);

		if (got < 0)
			return total ? total : -1;
		for (int i = 0; i < got; i++) {
			struct ibv_wc *w = &wc[total + i];

			memset(w, 0, sizeof(*w));
			w->wr_id = tmp[i].wr_id;
			w->status = tmp[i].status;
			w->opcode = tmp[i].opcode;
			w->vendor_err = tmp[i].vendor_err;
			w->byte_len = tmp[i].byte_len;
			w->qp_num = tmp[i].qp_num;
			w->src_qp = tmp[i].src_qp;
			w->wc_flags = tmp[i].flags & (IBV_WC_WITH_IMM | IBV_WC_GRH);
			if (w->wc_flags & IBV_WC_WITH_IMM)
				w->imm_data = htobe32(tmp[i].imm);
			if (snic_debug && w->status != IBV_WC_SUCCESS)
				fprintf(stderr, "softnic libibverbs: QP %#x: work request %#llx completed with status %d (%s)\n",
					w->qp_num, (unsigned long long)w->wr_id, w->status, ibv_wc_status_str(w->status));
		}
		total += got;
		if (got < want)
			break;
	}
	if (total == 0) {
		if (snic_poll_yield && ++cq->empty >= snic_poll_yield) {
			cq->empty = 0;
			sched_yield();
		}
	} else {
		cq->empty = 0;
	}
	return total;
}

static int snic_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	return snic_go_req_notify(((struct snic_cq *)ibcq)->h, solicited_only);
}

/* snic_copy_sgl copies a work request's n scatter/gather entries. */
static void snic_copy_sgl(struct snic_sge *dst, const struct ibv_sge *src, int n)
{
	for (int j = 0; j < n; j++) {
		dst[j].addr = src[j].addr;
		dst[j].length = src[j].length;
		dst[j].lkey = src[j].lkey;
	}
}

/* snic_inline_op: the opcodes IBV_SEND_INLINE applies to, those that
   send local data. A READ's SGEs are where the response goes and an
   atomic's where the old value goes: the flag is ignored for them. */
static int snic_inline_op(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* snic_gather_inline copies an IBV_SEND_INLINE work request's data into
   the QP's inline slot k after inl_next and points s at it (inl_lock
   held); EINVAL if the data is longer than the QP's max_inline_data.
   docs/ibverbs.md, "Inline data", has why a slot is free again when its
   turn comes. */
static int snic_gather_inline(struct snic_qp *qp, struct snic_send_wr *s, const struct ibv_send_wr *wr, int k)
{
	uint64_t total = 0;
	uint8_t *dst;

	for (int j = 0; j < wr->num_sge; j++)
		total += wr->sg_list[j].length;
	if (total > qp->cap.max_inline_data)
		return EINVAL;
	s->num_sge = 0;
	if (total == 0)
		return 0;
	dst = qp->inl_buf + (size_t)((qp->inl_next + k) % qp->inl_slots) * qp->cap.max_inline_data;
	s->num_sge = 1;
	s->sge[0].addr = (uintptr_t)dst;
	s->sge[0].length = (uint32_t)total;
	s->sge[0].lkey = qp->inl_lkey;
	for (int j = 0; j < wr->num_sge; j++) {
		if (!wr->sg_list[j].length)
			continue; /* its address may be anything */
		memcpy(dst, (const void *)(uintptr_t)wr->sg_list[j].addr, wr->sg_list[j].length);
		dst += wr->sg_list[j].length;
	}
	return 0;
}

static int snic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct snic_qp *qp = (struct snic_qp *)ibqp;
	struct snic_send_wr batch[SNIC_POST_BATCH];
	uint8_t inl[SNIC_POST_BATCH]; /* batch[i] has an inline slot */
	int locked = 0, rc = 0;

	while (wr) {
		struct ibv_send_wr *start = wr, *invalid = NULL;
		int n = 0, bad = 0, ninl = 0;

		for (; wr && n < SNIC_POST_BATCH; wr = wr->next, n++) {
			struct snic_send_wr *s = &batch[n];

			if (wr->num_sge < 0 || wr->num_sge > SNIC_MAX_SGE ||
			    wr->opcode > IBV_WR_ATOMIC_FETCH_AND_ADD) {
				invalid = wr;
				break;
			}
			s->wr_id = wr->wr_id;
			s->opcode = wr->opcode;
			/* IBV_SEND_INLINE: the data is copied below. */
			s->flags = wr->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
			s->num_sge = wr->num_sge;
			s->imm = (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ?
				be32toh(wr->imm_data) : 0;
			s->remote_addr = s->compare_add = s->swap = 0;
			s->rkey = 0;
			s->ah = s->remote_qpn = s->remote_qkey = 0;
			if (ibqp->qp_type == IBV_QPT_UD) {
				if (!wr->wr.ud.ah) {
					invalid = wr;
					break;
				}
				s->ah = ((struct snic_ah *)wr->wr.ud.ah)->num;
				s->remote_qpn = wr->wr.ud.remote_qpn;
				s->remote_qkey = wr->wr.ud.remote_qkey;
			}
			switch (wr->opcode) {
			case IBV_WR_RDMA_WRITE:
			case IBV_WR_RDMA_WRITE_WITH_IMM:
			case IBV_WR_RDMA_READ:
				s->remote_addr = wr->wr.rdma.remote_addr;
				s->rkey = wr->wr.rdma.rkey;
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
			case IBV_WR_ATOMIC_FETCH_AND_ADD:
				s->remote_addr = wr->wr.atomic.remote_addr;
				s->rkey = wr->wr.atomic.rkey;
				s->compare_add = wr->wr.atomic.compare_add;
				s->swap = wr->wr.atomic.swap;
				break;
			default:
				break;
			}
			inl[n] = 0;
			if ((wr->send_flags & IBV_SEND_INLINE) && snic_inline_op(wr->opcode)) {
				if (!locked && qp->inl_buf) {
					pthread_mutex_lock(&qp->inl_lock);
					locked = 1;
				}
				if (snic_gather_inline(qp, s, wr, ninl)) {
					invalid = wr;
					break;
				}
				inl[n] = s->num_sge != 0;
				ninl += inl[n];
			} else {
				snic_copy_sgl(s->sge, wr->sg_list, wr->num_sge);
			}
		}
		if (n > 0) {
			rc = snic_go_post_send(qp->h, batch, n, &bad);
			if (rc) {
				/* Work requests before bad went in: their slots are taken. */
				ninl = 0;
				for (int i = 0; i < bad; i++)
					ninl += inl[i];
			}
			if (ninl)
				qp->inl_next = (qp->inl_next + ninl) % qp->inl_slots;
			if (rc) {
				for (; bad > 0; bad--)
					start = start->next;
				*bad_wr = start;
				break;
			}
		}
		if (invalid) {
			*bad_wr = invalid;
			rc = EINVAL;
			break;
		}
	}
	if (locked)
		pthread_mutex_unlock(&qp->inl_lock);
	return rc;
}

/* snic_post_recv_list posts a list of receive work requests to handle h
   (a QP's receive queue or an SRQ) through post, in batches, as
   ibv_post_recv and ibv_post_srq_recv do. */
static int snic_post_recv_list(uintptr_t h, int (*post)(uintptr_t, struct snic_recv_wr *, int, int *),
			       struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct snic_recv_wr batch[SNIC_POST_BATCH];

	while (wr) {
		struct ibv_recv_wr *start = wr, *invalid = NULL;
		int n = 0, bad = 0, rc;

		for (; wr && n < SNIC_POST_BATCH; wr = wr->next, n++) {
			struct snic_recv_wr *s = &batch[n];

			if (wr->num_sge < 0 || wr->num_sge > SNIC_MAX_SGE) {
				invalid = wr;
				break;
			}
			s->wr_id = wr->wr_id;
			s->num_sge = wr->num_sge;
			snic_copy_sgl(s->sge, wr->sg_list, wr->num_sge);
		}
		if (n > 0) {
			rc = post(h, batch, n, &bad);
			if (rc) {
				for (; bad > 0; bad--)
					start = start->next;
				*bad_wr = start;
				return rc;
			}
		}
		if (invalid) {
			*bad_wr = invalid;
			return EINVAL;
		}
	}
	return 0;
}

static int snic_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return snic_post_recv_list(((struct snic_qp *)ibqp)->h, snic_go_post_recv, wr, bad_wr);
}

static int snic_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	return snic_post_recv_list(((struct snic_srq *)ibsrq)->h, snic_go_post_srq_recv, wr, bad_wr);
}

static struct ibv_mw *snic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int snic_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	return snic_err(EOPNOTSUPP);
}

static int snic_dealloc_mw(struct ibv_mw *mw)
{
	return snic_err(EOPNOTSUPP);
}

/* Context */

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct snic_device *d = (struct snic_device *)device;
	struct snic_context *c;
	int rc;

	if (device != &snic_dev.dev) {
		errno = ENODEV;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_open(d->socket, &c->info, &c->h);
	if (rc) {
		free(c);
		errno = rc;
		return NULL;
	}
	c->ibv.device = device;
	c->ibv.cmd_fd = -1;
	/* Asynchronous events: the Go context's eventfd (semaphore mode),
	   readable while an event waits; the context owns it. */
	c->ibv.async_fd = -1;
	if (snic_go_async_fd(c->h, &c->ibv.async_fd)) {
		/* A daemon without asynchronous events: a descriptor that
		   never becomes readable. */
		c->ibv.async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		c->own_async_fd = 1;
	}
	c->ibv.num_comp_vectors = 1;
	pthread_mutex_init(&c->ibv.mutex, NULL);
	c->ibv.abi_compat = NULL; /* a legacy context: no verbs_context */
	snic_debug = getenv("SOFTNIC_DEBUG") && *getenv("SOFTNIC_DEBUG");
	if (getenv("SOFTNIC_POLL_YIELD"))
		snic_poll_yield = (unsigned)atoi(getenv("SOFTNIC_POLL_YIELD"));
	c->ibv.ops.poll_cq = snic_poll_cq;
	c->ibv.ops.req_notify_cq = snic_req_notify_cq;
	c->ibv.ops.post_send = snic_post_send;
	c->ibv.ops.post_recv = snic_post_recv;
	c->ibv.ops.post_srq_recv = snic_post_srq_recv;
	c->ibv.ops.alloc_mw = snic_alloc_mw;
	c->ibv.ops.bind_mw = snic_bind_mw;
	c->ibv.ops.dealloc_mw = snic_dealloc_mw;
	return &c->ibv;
}

int ibv_close_device(struct ibv_context *context)
{
	struct snic_context *c = (struct snic_context *)context;

	snic_go_close(c->h); /* closes async_fd too, unless it is ours */
	if (c->own_async_fd && c->ibv.async_fd >= 0)
		close(c->ibv.async_fd);
	free(c);
	return 0;
}

/* ibv_get_async_event reads the async descriptor (blocking unless the
   program set O_NONBLOCK on it: then EAGAIN) and counts the event
   against its object, whose ibv_destroy_* waits until the program has
   acknowledged as many (events_completed), as rdma-core's does. */
int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct snic_context *c = (struct snic_context *)context;
	int type = 0, kind = 0, port = 0;
	uintptr_t p = 0;
	int rc = snic_go_get_async_event(c->h, &type, &kind, &p, &port);

	if (rc) {
		errno = rc;
		return -1;
	}
	memset(event, 0, sizeof(*event));
	event->event_type = type;
	switch (kind) {
	case 1: {
		struct snic_qp *qp = (struct snic_qp *)p;

		event->element.qp = &qp->ibv;
		pthread_mutex_lock(&qp->ibv.mutex);
		qp->events_reported++;
		pthread_mutex_unlock(&qp->ibv.mutex);
		break;
	}
	case 2: {
		struct snic_cq *cq = (struct snic_cq *)p;

		event->element.cq = &cq->ibv;
		pthread_mutex_lock(&cq->ibv.mutex);
		cq->async_reported++;
		pthread_mutex_unlock(&cq->ibv.mutex);
		break;
	}
	case 3: {
		struct snic_srq *srq = (struct snic_srq *)p;

		event->element.srq = &srq->ibv;
		pthread_mutex_lock(&srq->ibv.mutex);
		srq->events_reported++;
		pthread_mutex_unlock(&srq->ibv.mutex);
		break;
	}
	default:
		event->element.port_num = port;
		break;
	}
	return 0;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		pthread_mutex_lock(&cq->mutex);
		++cq->async_events_completed;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		return;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		pthread_mutex_lock(&qp->mutex);
		++qp->events_completed;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		return;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		pthread_mutex_lock(&srq->mutex);
		++srq->events_completed;
		pthread_cond_signal(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		return;
	}
	default:
		return;
	}
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
	struct snic_context *c = (struct snic_context *)context;

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softnic");
	a->node_guid = snic_guid(c->info.mac);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ULL << 40;
	a->page_size_cap = 4096;
	a->max_qp = 1 << 16;
	a->max_qp_wr = c->info.max_qp_wr;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = c->info.max_sge;
	a->max_sge_rd = c->info.max_sge;
	a->max_cq = 1 << 16;
	a->max_cqe = c->info.max_cqe;
	a->max_mr = 1 << 16;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = c->info.max_qp_rd_atom;
	a->max_res_rd_atom = c->info.max_qp_rd_atom * 1024;
	a->max_qp_init_rd_atom = c->info.max_qp_rd_atom;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->max_srq = 1 << 16;
	a->max_srq_wr = c->info.max_qp_wr;
	a->max_srq_sge = c->info.max_sge;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	return 0;
}

int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	struct ibv_port_attr a;

	if (port_num != 1)
		return snic_err(EINVAL);
	memset(&a, 0, sizeof(a));
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = IBV_MTU_1024;
	a.gid_tbl_len = 1;
	a.max_msg_sz = 1U << 31;
	a.pkey_tbl_len = 1;
	a.max_vl_num = 1;
	a.active_width = 1;  /* 1x */
	a.active_speed = 32; /* EDR, 25 Gb/s a lane */
	a.phys_state = 5;    /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	/* The caller's structure may be the pre-port_cap_flags2 one. */
	memcpy(port_attr, &a, offsetof(struct ibv_port_attr, port_cap_flags2));
	return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct snic_context *c = (struct snic_context *)context;

	if (port_num != 1 || index != 0)
		return snic_err(EINVAL);
	memcpy(gid->raw, c->info.gid, 16);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct snic_context *c = (struct snic_context *)context;

	if (flags || entry_size < sizeof(*entry))
		return snic_err(EINVAL);
	if (port_num != 1 || gid_index != 0)
		return snic_err(ENODATA);
	memset(entry, 0, sizeof(*entry));
	memcpy(entry->gid.raw, c->info.gid, 16);
	entry->gid_index = 0;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size)
{
	if (max_entries < 1)
		return -EINVAL;
	int rc = _ibv_query_gid_ex(context, 1, 0, entries, flags, entry_size);
	return rc ? -rc : 1;
}

/* enum ibv_gid_type_sysfs (rdma-core's driver.h): 1 is RoCE v2. */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type)
{
	if (port_num != 1 || index != 0)
		return snic_err(EINVAL);
	*type = 1;
	return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	if (port_num != 1 || index != 0)
		return snic_err(EINVAL);
	*pkey = htobe16(0xffff);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	return port_num == 1 && pkey == htobe16(0xffff) ? 0 : snic_err(EINVAL) * 0 - 1;
}

/* PD and MR */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct snic_context *c = (struct snic_context *)context;
	struct snic_pd *pd = calloc(1, sizeof(*pd));
	int rc;

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_alloc_pd(c->h, &pd->h);
	if (rc) {
		free(pd);
		errno = rc;
		return NULL;
	}
	pd->ibv.context = context;
	return &pd->ibv;
}

int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct snic_pd *pd = (struct snic_pd *)ibpd;
	int rc = snic_go_dealloc_pd(pd->h);

	if (rc)
		return snic_err(rc);
	free(pd);
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct snic_pd *pd = (struct snic_pd *)ibpd;
	struct snic_mr *mr;
	uint32_t lkey, rkey;
	int rc;

	/* Optional access bits are hints a device may ignore; HUGETLB too. */
	access &= ~(IBV_ACCESS_OPTIONAL_RANGE | IBV_ACCESS_HUGETLB);
	if (iova != (uintptr_t)addr || (access & (IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND))) {
		/* softnic regions are named by their address in this process. */
		errno = EOPNOTSUPP;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_reg_mr(pd->h, addr, length, access, &mr->h, &lkey, &rkey);
	if (rc) {
		free(mr);
		errno = rc;
		return NULL;
	}
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	mr->ibv.lkey = lkey;
	mr->ibv.rkey = rkey;
	return &mr->ibv;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct snic_mr *mr = (struct snic_mr *)ibmr;
	int rc = snic_go_dereg_mr(mr->h);

	if (rc)
		return snic_err(rc);
	free(mr);
	return 0;
}

/* fork: registered pages are shared memory (MAP_SHARED): a child shares
   them rather than copying them on write, so there is nothing to set up. */
int ibv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	return 0;
}

/* Completion channels and CQs */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct snic_context *c = (struct snic_context *)context;
	struct snic_channel *ch = calloc(1, sizeof(*ch));
	int rc, fd = -1;

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_create_channel(c->h, &ch->h, &fd);
	if (rc) {
		free(ch);
		errno = rc;
		return NULL;
	}
	ch->ibv.context = context;
	ch->ibv.fd = fd;
	return &ch->ibv;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct snic_channel *ch = (struct snic_channel *)channel;
	int rc = snic_go_destroy_channel(ch->h);

	if (rc)
		return snic_err(rc);
	free(ch);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct snic_context *c = (struct snic_context *)context;
	struct snic_cq *cq;
	int rc;

	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_create_cq(c->h, cqe, channel ? ((struct snic_channel *)channel)->h : 0,
			       (uintptr_t)cq, &cq->h);
	if (rc) {
		free(cq);
		errno = rc;
		return NULL;
	}
	cq->ibv.context = context;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	return &cq->ibv;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct snic_cq *cq = (struct snic_cq *)ibcq;
	int rc;

	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->async_events_completed != cq->async_reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	rc = snic_go_destroy_cq(cq->h);

	if (rc)
		return snic_err(rc);
	free(cq);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct snic_channel *ch = (struct snic_channel *)channel;
	uintptr_t p = 0;
	int rc = snic_go_get_cq_event(ch->h, &p);

	if (rc || !p) {
		errno = rc ? rc : EIO;
		return -1;
	}
	*cq = (struct ibv_cq *)p;
	*cq_context = (*cq)->cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	struct snic_cq *cq = (struct snic_cq *)ibcq;

	snic_go_ack_cq_events(cq->h, nevents);
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += nevents;
	pthread_mutex_unlock(&ibcq->mutex);
}

/* QPs */

struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *init)
{
	struct snic_pd *pd = (struct snic_pd *)ibpd;
	struct snic_qp *qp;
	uint32_t qpn = 0;
	int rc;

	if (init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UD) {
		/* softnic has RC and UD queue pairs only. */
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (init->srq && init->qp_type != IBV_QPT_RC) {
		/* An SRQ serves RC queue pairs only (docs/ibverbs.md). */
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!init->send_cq || !init->recv_cq || init->cap.max_send_sge > SNIC_MAX_SGE ||
	    init->cap.max_recv_sge > SNIC_MAX_SGE || init->cap.max_inline_data > SNIC_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	if (init->srq)
		rc = snic_go_create_qp_srq(pd->h, ((struct snic_cq *)init->send_cq)->h,
					   ((struct snic_cq *)init->recv_cq)->h, ((struct snic_srq *)init->srq)->h,
					   init->cap.max_send_wr ? init->cap.max_send_wr : 1, init->sq_sig_all,
					   (uintptr_t)qp, &qp->h, &qpn);
	else
		rc = snic_go_create_qp(pd->h, ((struct snic_cq *)init->send_cq)->h, ((struct snic_cq *)init->recv_cq)->h,
				       init->cap.max_send_wr ? init->cap.max_send_wr : 1,
				       init->cap.max_recv_wr ? init->cap.max_recv_wr : 1, init->sq_sig_all, init->qp_type,
				       &qp->h, &qpn);
	if (rc) {
		free(qp);
		errno = rc;
		return NULL;
	}
	qp->cap = init->cap;
	if (init->cap.max_inline_data) {
		/* The inline slots (docs/ibverbs.md, "Inline data"); the QP
		   reports their size, as providers report what they made. */
		uintptr_t addr = 0;

		qp->cap.max_inline_data = (init->cap.max_inline_data + SNIC_INLINE_ALIGN - 1) & ~(SNIC_INLINE_ALIGN - 1);
		rc = snic_go_inline_area(qp->h, pd->h, qp->cap.max_inline_data, &qp->inl_h, &addr, &qp->inl_slots,
					 &qp->inl_lkey);
		if (rc) {
			snic_go_forget_qp(qp->h);
			snic_go_destroy_qp(qp->h);
			free(qp);
			errno = rc;
			return NULL;
		}
		qp->inl_buf = (uint8_t *)addr;
		init->cap.max_inline_data = qp->cap.max_inline_data;
	}
	pthread_mutex_init(&qp->inl_lock, NULL);
	snic_go_qp_cptr(qp->h, (uintptr_t)qp);
	qp->sq_sig_all = init->sq_sig_all;
	qp->ibv.context = ibpd->context;
	qp->ibv.qp_context = init->qp_context;
	qp->ibv.pd = ibpd;
	qp->ibv.send_cq = init->send_cq;
	qp->ibv.recv_cq = init->recv_cq;
	qp->ibv.srq = init->srq;
	qp->ibv.qp_num = qpn;
	qp->ibv.state = IBV_QPS_RESET;
	qp->ibv.qp_type = init->qp_type;
	pthread_mutex_init(&qp->ibv.mutex, NULL);
	pthread_cond_init(&qp->ibv.cond, NULL);
	return &qp->ibv;
}

#define SNIC_QP_MASK (IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | \
		      IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
		      IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | \
		      IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN | IBV_QP_QKEY)

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct snic_qp *qp = (struct snic_qp *)ibqp;
	struct snic_qp_attr a;
	int rc;

	if (mask & ~SNIC_QP_MASK)
		return snic_err(EOPNOTSUPP); /* alternate paths, rate limits, ... */
	if ((mask & IBV_QP_AV) && !attr->ah_attr.is_global)
		return snic_err(EINVAL); /* RoCE needs the GRH: the destination is its GID */
	memset(&a, 0, sizeof(a));
	a.state = attr->qp_state;
	a.cur_state = attr->cur_qp_state;
	a.access = attr->qp_access_flags;
	a.pkey_index = attr->pkey_index;
	a.port = attr->port_num;
	memcpy(a.dgid, attr->ah_attr.grh.dgid.raw, 16);
	a.traffic_class = attr->ah_attr.grh.traffic_class;
	a.hop_limit = attr->ah_attr.grh.hop_limit;
	a.flow_label = attr->ah_attr.grh.flow_label;
	a.path_mtu = attr->path_mtu;
	a.dest_qpn = attr->dest_qp_num;
	a.rq_psn = attr->rq_psn;
	a.sq_psn = attr->sq_psn;
	a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	a.max_rd_atomic = attr->max_rd_atomic;
	a.min_rnr_timer = attr->min_rnr_timer;
	a.timeout = attr->timeout;
	a.retry_cnt = attr->retry_cnt;
	a.rnr_retry = attr->rnr_retry;
	a.qkey = attr->qkey;
	rc = snic_go_modify_qp(qp->h, &a, mask);
	if (rc)
		return snic_err(rc);
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state;
	return 0;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct snic_qp *qp = (struct snic_qp *)ibqp;
	struct snic_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = snic_go_query_qp(qp->h, &a);
	if (rc)
		return snic_err(rc);
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = a.state;
	attr->cur_qp_state = a.cur_state;
	attr->path_mtu = a.path_mtu;
	attr->qp_access_flags = a.access;
	attr->rq_psn = a.rq_psn;
	attr->sq_psn = a.sq_psn;
	attr->dest_qp_num = a.dest_qpn;
	attr->cap = qp->cap;
	attr->qkey = a.qkey;
	if (ibqp->qp_type == IBV_QPT_RC) { /* a UD QP has no path */
		attr->ah_attr.is_global = 1;
		memcpy(attr->ah_attr.grh.dgid.raw, a.dgid, 16);
		attr->ah_attr.grh.traffic_class = a.traffic_class;
		attr->ah_attr.grh.hop_limit = a.hop_limit;
		attr->ah_attr.grh.flow_label = a.flow_label;
		attr->ah_attr.port_num = 1;
	}
	attr->pkey_index = a.pkey_index;
	attr->port_num = 1;
	attr->max_rd_atomic = a.max_rd_atomic;
	attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	attr->min_rnr_timer = a.min_rnr_timer;
	attr->timeout = a.timeout;
	attr->retry_cnt = a.retry_cnt;
	attr->rnr_retry = a.rnr_retry;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct snic_qp *qp = (struct snic_qp *)ibqp;
	uintptr_t h = qp->h;
	int rc;

	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->events_reported)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	snic_go_forget_qp(h);
	rc = snic_go_destroy_qp(h);
	if (rc) {
		snic_go_qp_cptr(h, (uintptr_t)qp);
		return snic_err(rc);
	}
	if (qp->inl_h)
		snic_go_inline_free(qp->inl_h); /* the QP is gone: a failure here is only SOFTNIC_DEBUG's */
	pthread_mutex_destroy(&qp->inl_lock);
	free(qp);
	return 0;
}

/* Shared receive queues. ibv_create_srq_ex (an inline of verbs.h) comes
   here for the basic SRQ type; the other types fail with EOPNOTSUPP. */

struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *init)
{
	struct snic_pd *pd = (struct snic_pd *)ibpd;
	struct snic_srq *srq;
	int max_wr = init->attr.max_wr, max_sge = init->attr.max_sge, limit = init->attr.srq_limit;
	int rc;

	if (init->attr.max_wr < 1 || init->attr.max_sge > SNIC_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_go_create_srq(pd->h, &max_wr, &max_sge, &limit, (uintptr_t)srq, &srq->h);
	if (rc) {
		free(srq);
		errno = rc;
		return NULL;
	}
	init->attr.max_wr = max_wr;
	init->attr.max_sge = max_sge;
	srq->ibv.context = ibpd->context;
	srq->ibv.srq_context = init->srq_context;
	srq->ibv.pd = ibpd;
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	return &srq->ibv;
}

int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct snic_srq *srq = (struct snic_srq *)ibsrq;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return snic_err(EINVAL);
	int rc = snic_go_modify_srq(srq->h, attr->max_wr, attr->srq_limit, mask);

	return rc ? snic_err(rc) : 0;
}

int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct snic_srq *srq = (struct snic_srq *)ibsrq;
	int max_wr = 0, max_sge = 0, limit = 0;
	int rc = snic_go_query_srq(srq->h, &max_wr, &max_sge, &limit);

	if (rc)
		return snic_err(rc);
	attr->max_wr = max_wr;
	attr->max_sge = max_sge;
	attr->srq_limit = limit;
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct snic_srq *srq = (struct snic_srq *)ibsrq;
	int rc;

	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->events_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);
	rc = snic_go_destroy_srq(srq->h);
	if (rc)
		return snic_err(rc);
	free(srq);
	return 0;
}

/* Address handles (UD). RoCE needs the GRH: the destination is its GID.
   The destination's MAC is resolved from the kernel's neighbours, as the
   kernel does for a RoCE NIC's ibv_create_ah; an address it cannot
   resolve fails the call (ETIMEDOUT, ENETUNREACH). */

struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
	struct snic_pd *pd = (struct snic_pd *)ibpd;
	struct snic_ah_attr a;
	struct snic_ah *ah;
	int rc;

	if (!attr || !attr->is_global || attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	memcpy(a.dgid, attr->grh.dgid.raw, 16);
	a.traffic_class = attr->grh.traffic_class;
	a.hop_limit = attr->grh.hop_limit;
	a.flow_label = attr->grh.flow_label;
	a.sgid_index = attr->grh.sgid_index;
	rc = snic_go_create_ah(pd->h, &a, &ah->h, &ah->num);
	if (rc) {
		free(ah);
		errno = rc;
		return NULL;
	}
	ah->ibv.context = ibpd->context;
	ah->ibv.pd = ibpd;
	ah->ibv.handle = ah->num;
	return &ah->ibv;
}

int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct snic_ah *ah = (struct snic_ah *)ibah;
	int rc = snic_go_destroy_ah(ah->h);

	if (rc)
		return snic_err(rc);
	free(ah);
	return 0;
}

/* Strings, as rdma-core words them. */

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const s[] = { "unknown", "InfiniBand channel adapter", "InfiniBand switch",
					 "InfiniBand router", "iWARP NIC", "usNIC", "usNIC UDP", "unspecified" };

	if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED)
		return s[0];
	return s[node_type];
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const s[] = { "no state change (NOP)", "down", "init", "armed", "active", "active defer" };

	if (port_state < IBV_PORT_NOP || port_state > IBV_PORT_ACTIVE_DEFER)
		return "unknown";
	return s[port_state];
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const s[] = {
		"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
		"local access violation work queue error", "communication established", "send queue drained",
		"path migrated", "path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
		"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
		"WQ fatal"
	};

	if (event < IBV_EVENT_CQ_ERR || event > IBV_EVENT_WQ_FATAL)
		return "unknown";
	return s[event];
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		"success", "local length error", "local QP operation error", "local EE context operation error",
		"local protection error", "Work Request Flushed Error", "memory management operation error",
		"bad response error", "local access error", "remote invalid request error",
		"remote access error", "remote operation error", "transport retry counter exceeded",
		"RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
		"aborted error", "invalid EE context number", "invalid EE context state", "fatal error",
		"response timeout error", "general error", "TM error", "TM Rendezvous error"
	};

	if (status < IBV_WC_SUCCESS || status > IBV_WC_TM_RNDV_INCOMPLETE)
		return "unknown";
	return s[status];
}

#define SNIC_VERSIONS_ALIASES
#include "versions_gen.h"
