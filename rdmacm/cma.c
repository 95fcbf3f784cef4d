/* softnic's drop-in librdmacm.so.1 (docs/rdmacm.md): rdma-core 44's
   librdmacm API and ABI (<rdma/rdma_cma.h>'s structures) as a thin C
   library over the rdma_cm state machine inside the drop-in
   libibverbs.so.1 (its private interface snic_cm.h, version node
   SOFTNIC_PRIVATE_1): one process holds one Go runtime. Ids, events and
   address info are rdma-core's structures in C memory; the verbs
   objects (id->verbs, id->pd, id->qp, CQs) are made with the drop-in
   libibverbs' own calls, as librdmacm makes them. What it does not
   implement is in stubs_gen.c (ENOSYS). */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "snic_cm.h"

struct snic_chan {
	struct rdma_event_channel ch;
	uintptr_t h;
};

struct snic_id {
	struct rdma_cm_id id;
	uintptr_t h;
	int sync;
	struct ibv_sa_path_rec path;
	struct ibv_qp_init_attr *qp_init_attr; /* rdma_create_ep on a passive id: for rdma_get_request */
};

struct snic_event {
	struct rdma_cm_event ev;
	uintptr_t h;
	uint8_t private_data[SNIC_CM_PRIVATE_DATA];
};

static int snic_fail(int e)
{
	errno = e;
	return -1;
}

/* The ids and event channels this library made and has not destroyed.
   Each call looks its id or channel up here before it reads through the
   pointer, and refuses one it does not know (-1, EINVAL). perftest
   4.5-0.17's rdma_cm client, when its REQ is rejected (the server not
   listening yet), destroys its ids and event channel, frees the array
   that holds them, and retries with what it reads from that freed array
   (rdma_cm_client_connection; upstream perftest reallocates since): read
   through, the stale pointer crashed the program (SIGBUS against Linux's
   rxe); refused, perftest reports the failure and exits. */
static pthread_mutex_t snic_live_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **snic_live;
static size_t snic_nlive, snic_live_cap;

static int snic_live_add(const void *p)
{
	int rc = 0;

	pthread_mutex_lock(&snic_live_lock);
	if (snic_nlive == snic_live_cap) {
		size_t n = snic_live_cap ? 2 * snic_live_cap : 64;
		const void **l = realloc(snic_live, n * sizeof(*l));

		if (l) {
			snic_live = l;
			snic_live_cap = n;
		}
	}
	if (snic_nlive < snic_live_cap)
		snic_live[snic_nlive++] = p;
	else
		rc = ENOMEM;
	pthread_mutex_unlock(&snic_live_lock);
	return rc;
}

static void snic_live_del(const void *p)
{
	size_t i;

	pthread_mutex_lock(&snic_live_lock);
	for (i = 0; i < snic_nlive; i++) {
		if (snic_live[i] == p) {
			snic_live[i] = snic_live[--snic_nlive];
			break;
		}
	}
	pthread_mutex_unlock(&snic_live_lock);
}

/* snic_live_has: p is an id or channel of this library's, not destroyed
   (NULL never is). */
static int snic_live_has(const void *p)
{
	size_t i;
	int found = 0;

	if (!p)
		return 0;
	pthread_mutex_lock(&snic_live_lock);
	for (i = 0; i < snic_nlive && !found; i++)
		found = snic_live[i] == p;
	pthread_mutex_unlock(&snic_live_lock);
	return found;
}

/* The device: the drop-in libibverbs' one context (the softnic daemon of
   SOFTNIC_SOCKET), opened on first use and kept open, with one PD that
   ids get as id->pd, as librdmacm keeps one per device. */
static pthread_mutex_t snic_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *snic_verbs;
static struct ibv_pd *snic_pd;

static struct ibv_context *snic_device(void)
{
	pthread_mutex_lock(&snic_dev_lock);
	if (!snic_verbs) {
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);

		if (list && n > 0) {
			snic_verbs = ibv_open_device(list[0]);
			if (snic_verbs) {
				snic_pd = ibv_alloc_pd(snic_verbs);
				if (!snic_pd) {
					ibv_close_device(snic_verbs);
					snic_verbs = NULL;
				} else {
					/* The CM service's channel lives on this
					   context's daemon connection. */
					snic_cm_set_device((uintptr_t)snic_verbs);
				}
			}
		}
		if (list)
			ibv_free_device_list(list);
	}
	pthread_mutex_unlock(&snic_dev_lock);
	if (!snic_verbs)
		errno = ENODEV;
	return snic_verbs;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = snic_device();
	if (num_devices)
		*num_devices = list[0] ? 1 : 0;
	return list;
}

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* Addresses */

static int snic_from_sockaddr(const struct sockaddr *sa, struct snic_cm_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		a->family = AF_INET;
		a->port = ntohs(in->sin_port);
		memcpy(a->addr, &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		a->family = AF_INET6;
		a->port = ntohs(in6->sin6_port);
		memcpy(a->addr, &in6->sin6_addr, 16);
		a->scope_id = in6->sin6_scope_id;
		return 0;
	}
	return EAFNOSUPPORT; /* AF_IB: softnic is RoCE only */
}

static void snic_to_sockaddr(const struct snic_cm_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		memcpy(&in->sin_addr, a->addr, 4);
	} else if (a->family == AF_INET6) {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		memcpy(&in6->sin6_addr, a->addr, 16);
		in6->sin6_scope_id = a->scope_id;
	}
}

/* snic_sync copies the id's addresses, device and path from the state
   machine into struct rdma_cm_id. */
static void snic_sync(struct snic_id *s)
{
	struct snic_cm_route r;
	struct rdma_route *rt = &s->id.route;

	if (snic_cm_query(s->h, &r))
		return;
	snic_to_sockaddr(&r.src, &rt->addr.src_storage);
	snic_to_sockaddr(&r.dst, &rt->addr.dst_storage);
	memcpy(rt->addr.addr.ibaddr.sgid.raw, r.sgid, 16);
	memcpy(rt->addr.addr.ibaddr.dgid.raw, r.dgid, 16);
	rt->addr.addr.ibaddr.pkey = htobe16(0xffff);
	if (r.has_device && !s->id.verbs && snic_device()) {
		s->id.verbs = snic_verbs;
		s->id.pd = snic_pd;
		s->id.port_num = 1;
	}
	if (r.has_path) {
		struct ibv_sa_path_rec *p = &s->path;

		memset(p, 0, sizeof(*p));
		memcpy(p->sgid.raw, r.sgid, 16);
		memcpy(p->dgid.raw, r.dgid, 16);
		p->hop_limit = r.hop_limit;
		p->traffic_class = r.traffic_class;
		p->flow_label = htobe32(r.flow_label);
		p->pkey = htobe16(r.pkey);
		p->mtu_selector = 2; /* exactly */
		p->mtu = r.mtu;
		p->rate_selector = 2;
		p->rate = 3; /* 10 Gb/s; softnic does not limit the rate */
		p->packet_life_time_selector = 2;
		p->packet_life_time = r.packet_life_time;
		p->reversible = 1;
		p->numb_path = 1;
		rt->path_rec = p;
		rt->num_paths = 1;
	}
}

/* Event channels */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct snic_chan *c = calloc(1, sizeof(*c));
	int fd = -1, rc;

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	rc = snic_cm_channel_create(&fd, &c->h);
	if (rc) {
		free(c);
		errno = rc;
		return NULL;
	}
	c->ch.fd = fd;
	if (snic_live_add(&c->ch)) {
		snic_cm_channel_destroy(c->h);
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct snic_chan *c = (struct snic_chan *)channel;

	if (!snic_live_has(c))
		return;
	if (snic_cm_channel_destroy(c->h) == 0) {
		snic_live_del(c);
		free(c);
	}
}

/* Ids */

static enum ibv_qp_type snic_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

static struct snic_id *snic_alloc_id(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps)
{
	struct snic_id *s = calloc(1, sizeof(*s));

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->id.context = context;
	s->id.ps = ps;
	s->id.qp_type = snic_qp_type(ps);
	if (!channel) {
		/* Synchronous mode: a channel of the id's own, whose events each
		   call waits for (librdmacm's ucma_complete). */
		channel = rdma_create_event_channel();
		if (!channel) {
			free(s);
			return NULL;
		}
		s->sync = 1;
	}
	s->id.channel = channel;
	return s;
}

static void snic_free_id(struct snic_id *s)
{
	snic_live_del(s);
	if (s->sync)
		rdma_destroy_event_channel(s->id.channel);
	free(s->qp_init_attr);
	free(s);
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	struct snic_id *s;
	int rc;

	if (!id || (channel && !snic_live_has(channel)))
		return snic_fail(EINVAL);
	s = snic_alloc_id(channel, context, ps);
	if (!s)
		return -1;
	rc = snic_cm_create_id(((struct snic_chan *)s->id.channel)->h, ps, (uintptr_t)s, &s->h);
	if (!rc)
		rc = snic_live_add(s);
	if (rc) {
		if (s->h)
			snic_cm_destroy_id(s->h);
		snic_free_id(s);
		return snic_fail(rc);
	}
	*id = &s->id;
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct snic_id *s = (struct snic_id *)id;
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	rc = snic_cm_destroy_id(s->h);
	if (rc)
		return snic_fail(rc);
	snic_free_id(s);
	return 0;
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct snic_id *s = (struct snic_id *)id;
	struct rdma_event_channel *old;
	int sync = !channel, rc;

	if (!snic_live_has(id) || (channel && !snic_live_has(channel)))
		return snic_fail(EINVAL);
	old = id->channel;
	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
	}
	rc = snic_cm_migrate(s->h, ((struct snic_chan *)channel)->h);
	if (rc) {
		if (sync)
			rdma_destroy_event_channel(channel);
		return snic_fail(rc);
	}
	id->channel = channel;
	if (s->sync)
		rdma_destroy_event_channel(old);
	s->sync = sync;
	return 0;
}

/* snic_complete: in synchronous mode, wait for the call's event and turn
   its status into the call's result, as librdmacm's ucma_complete does;
   the event stays in id->event until the next call acks it. */
static int snic_complete(struct rdma_cm_id *id)
{
	struct snic_id *s = (struct snic_id *)id;
	int rc;

	if (!s->sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	rc = rdma_get_cm_event(id->channel, &id->event);
	if (rc)
		return rc;
	if (id->event->status) {
		if (id->event->event == RDMA_CM_EVENT_REJECTED)
			return snic_fail(ECONNREFUSED);
		return snic_fail(id->event->status < 0 ? -id->event->status : id->event->status);
	}
	return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct snic_id *s = (struct snic_id *)id;
	struct snic_cm_addr a;
	int rc;

	if (!snic_live_has(id) || !addr)
		return snic_fail(EINVAL);
	rc = snic_from_sockaddr(addr, &a);
	if (!rc)
		rc = snic_cm_bind(s->h, &a);
	if (rc)
		return snic_fail(rc);
	snic_sync(s);
	return 0;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr, int timeout_ms)
{
	struct snic_id *s = (struct snic_id *)id;
	struct snic_cm_addr src, dst;
	int rc;

	if (!snic_live_has(id) || !dst_addr)
		return snic_fail(EINVAL);
	rc = snic_from_sockaddr(src_addr, &src);
	if (!rc)
		rc = snic_from_sockaddr(dst_addr, &dst);
	if (!rc)
		rc = snic_cm_resolve_addr(s->h, src_addr ? &src : NULL, &dst, timeout_ms);
	if (rc)
		return snic_fail(rc);
	snic_sync(s);
	return snic_complete(id);
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct snic_id *s = (struct snic_id *)id;
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_cm_resolve_route(s->h, timeout_ms);
	if (rc)
		return snic_fail(rc);
	return snic_complete(id);
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = &id->route.addr.src_addr;

	return sa->sa_family == AF_INET6 ? ((struct sockaddr_in6 *)sa)->sin6_port :
	       sa->sa_family == AF_INET ? ((struct sockaddr_in *)sa)->sin_port : 0;
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = &id->route.addr.dst_addr;

	return sa->sa_family == AF_INET6 ? ((struct sockaddr_in6 *)sa)->sin6_port :
	       sa->sa_family == AF_INET ? ((struct sockaddr_in *)sa)->sin_port : 0;
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_cm_set_option(((struct snic_id *)id)->h, level, optname, optval, optlen);
	return rc ? snic_fail(rc) : 0;
}

/* Events */

/* snic_ud_event fills a UD id's event's rdma_ud_param, as librdmacm's
   ucma_copy_ud_event: the private data, and for ESTABLISHED (the
   SIDR_REP) the peer's QPN and Q_Key and the attributes of an address
   handle to it, the id's path (the kernel's ib_init_ah_attr_from_path). */
static void snic_ud_event(struct snic_id *s, struct snic_event *evt, const struct snic_cm_event *e)
{
	struct rdma_ud_param *u = &evt->ev.param.ud;

	memcpy(evt->private_data, e->param.private_data, e->param.private_data_len);
	u->private_data = e->param.private_data_len ? evt->private_data : NULL;
	u->private_data_len = e->param.private_data_len;
	u->qp_num = e->param.qp_num;
	u->qkey = e->param.qkey;
	if (e->event == RDMA_CM_EVENT_ESTABLISHED && s->id.route.path_rec) {
		const struct ibv_sa_path_rec *p = s->id.route.path_rec;

		u->ah_attr.is_global = 1;
		u->ah_attr.port_num = s->id.port_num ? s->id.port_num : 1;
		u->ah_attr.grh.dgid = p->dgid;
		u->ah_attr.grh.sgid_index = 0;
		u->ah_attr.grh.flow_label = be32toh(p->flow_label);
		u->ah_attr.grh.hop_limit = p->hop_limit;
		u->ah_attr.grh.traffic_class = p->traffic_class;
	}
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct snic_chan *c = (struct snic_chan *)channel;
	struct snic_cm_event e;
	struct snic_event *evt;
	struct snic_id *s;
	int rc;

	if (!snic_live_has(channel) || !event)
		return snic_fail(EINVAL);
	evt = calloc(1, sizeof(*evt));
	if (!evt)
		return snic_fail(ENOMEM);
	rc = snic_cm_get_event(c->h, &e);
	if (rc) {
		free(evt);
		return snic_fail(rc);
	}
	evt->h = e.ev;
	s = (struct snic_id *)e.id_user;
	if (!s) {
		/* A connection request's new id, on the listener's channel (its
		   own, if the listener is synchronous, as librdmacm migrates it). */
		struct snic_id *l = (struct snic_id *)e.listen_user;

		s = calloc(1, sizeof(*s));
		if (!s) {
			snic_cm_ack_event(e.ev);
			free(evt);
			return snic_fail(ENOMEM);
		}
		s->h = e.id;
		if (snic_live_add(s)) {
			free(s);
			snic_cm_ack_event(e.ev);
			free(evt);
			return snic_fail(ENOMEM);
		}
		s->id.channel = l ? l->id.channel : channel;
		s->id.context = l ? l->id.context : NULL;
		s->id.ps = l ? l->id.ps : RDMA_PS_TCP;
		s->id.qp_type = snic_qp_type(s->id.ps);
		snic_cm_set_user(e.id, (uintptr_t)s);
		if (l && l->sync && rdma_migrate_id(&s->id, NULL))
			s->sync = 0;
	}
	evt->ev.id = &s->id;
	evt->ev.listen_id = e.listen_user ? &((struct snic_id *)e.listen_user)->id : NULL;
	evt->ev.event = e.event;
	evt->ev.status = e.status;
	switch (e.event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
	case RDMA_CM_EVENT_CONNECT_REQUEST:
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		snic_sync(s);
		break;
	default:
		break;
	}
	if (e.ud) {
		snic_ud_event(s, evt, &e);
	} else if (e.event != RDMA_CM_EVENT_ADDR_RESOLVED && e.event != RDMA_CM_EVENT_ADDR_ERROR &&
	    e.event != RDMA_CM_EVENT_ROUTE_RESOLVED && e.event != RDMA_CM_EVENT_ROUTE_ERROR) {
		struct rdma_conn_param *p = &evt->ev.param.conn;

		memcpy(evt->private_data, e.param.private_data, e.param.private_data_len);
		p->private_data = e.param.private_data_len ? evt->private_data : NULL;
		p->private_data_len = e.param.private_data_len;
		p->responder_resources = e.param.responder_resources;
		p->initiator_depth = e.param.initiator_depth;
		p->flow_control = e.param.flow_control;
		p->retry_count = e.param.retry_count;
		p->rnr_retry_count = e.param.rnr_retry_count;
		p->srq = e.param.srq;
		p->qp_num = e.param.qp_num;
	}
	*event = &evt->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct snic_event *evt = (struct snic_event *)event;

	if (!event)
		return snic_fail(EINVAL);
	snic_cm_ack_event(evt->h);
	free(evt);
	return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const s[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
		"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
		"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
		"RDMA_CM_EVENT_TIMEWAIT_EXIT"
	};

	if ((int)event < 0 || event > RDMA_CM_EVENT_TIMEWAIT_EXIT)
		return "UNKNOWN EVENT";
	return s[event];
}

/* QPs */

static void snic_destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* snic_create_cqs makes the CQs (each with a completion channel) a QP
   without its own gets, as librdmacm does: rdma_get_send_comp and
   rdma_get_recv_comp (rdma_verbs.h) wait on them. */
static int snic_create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	snic_destroy_cqs(id);
	return -1;
}

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct snic_id *s = (struct snic_id *)id;
	struct ibv_qp_init_attr init;
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	int rc;

	if (!snic_live_has(id) || !attr || id->qp)
		return snic_fail(EINVAL);
	if (!id->verbs)
		return snic_fail(EINVAL); /* not bound to a device */
	if (attr->comp_mask & ~IBV_QP_INIT_ATTR_PD)
		return snic_fail(EOPNOTSUPP); /* XRC, create flags, send ops: not softnic's */
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (attr->pd->context != id->verbs) {
		return snic_fail(EINVAL);
	}
	pd = attr->pd;
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return snic_fail(EINVAL);
	if (snic_create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
			    attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	memset(&init, 0, sizeof(init));
	init.qp_context = attr->qp_context;
	init.send_cq = attr->send_cq;
	init.recv_cq = attr->recv_cq;
	init.srq = attr->srq;
	init.cap = attr->cap;
	init.qp_type = attr->qp_type;
	init.sq_sig_all = attr->sq_sig_all;
	qp = ibv_create_qp(pd, &init);
	if (!qp) {
		rc = errno;
		snic_destroy_cqs(id);
		return snic_fail(rc);
	}
	attr->cap = init.cap;
	rc = snic_cm_attach_qp(s->h, (uintptr_t)qp, qp->qp_num);
	if (rc) {
		ibv_destroy_qp(qp);
		snic_destroy_cqs(id);
		return snic_fail(rc);
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex attr;
	int rc;

	if (!snic_live_has(id) || !qp_init_attr)
		return snic_fail(EINVAL);
	memset(&attr, 0, sizeof(attr));
	memcpy(&attr, qp_init_attr, sizeof(*qp_init_attr));
	attr.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr.pd = pd ? pd : id->pd;
	rc = rdma_create_qp_ex(id, &attr);
	memcpy(qp_init_attr, &attr, sizeof(*qp_init_attr));
	return rc;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!snic_live_has(id) || !id->qp)
		return;
	snic_cm_detach_qp(((struct snic_id *)id)->h);
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	snic_destroy_cqs(id);
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct snic_qp_attr a;
	int rc, mask = 0;

	if (!snic_live_has(id) || !qp_attr || !qp_attr_mask)
		return snic_fail(EINVAL);
	memset(&a, 0, sizeof(a));
	a.state = qp_attr->qp_state;
	rc = snic_cm_init_qp_attr(((struct snic_id *)id)->h, &a, &mask);
	if (rc)
		return snic_fail(rc);
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = a.state;
	qp_attr->qp_access_flags = a.access;
	qp_attr->pkey_index = a.pkey_index;
	qp_attr->port_num = a.port;
	qp_attr->ah_attr.is_global = 1;
	qp_attr->ah_attr.port_num = 1;
	memcpy(qp_attr->ah_attr.grh.dgid.raw, a.dgid, 16);
	qp_attr->ah_attr.grh.traffic_class = a.traffic_class;
	qp_attr->ah_attr.grh.hop_limit = a.hop_limit;
	qp_attr->ah_attr.grh.flow_label = a.flow_label;
	qp_attr->path_mtu = a.path_mtu;
	qp_attr->dest_qp_num = a.dest_qpn;
	qp_attr->rq_psn = a.rq_psn;
	qp_attr->sq_psn = a.sq_psn;
	qp_attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	qp_attr->max_rd_atomic = a.max_rd_atomic;
	qp_attr->min_rnr_timer = a.min_rnr_timer;
	qp_attr->timeout = a.timeout;
	qp_attr->retry_cnt = a.retry_cnt;
	qp_attr->rnr_retry = a.rnr_retry;
	qp_attr->qkey = a.qkey;
	*qp_attr_mask = mask;
	return 0;
}

/* Connections: through the CM service of the drop-in libibverbs. */

static int snic_param(struct snic_cm_param *d, const struct rdma_conn_param *p)
{
	memset(d, 0, sizeof(*d));
	if (!p) {
		/* librdmacm's defaults for a NULL rdma_conn_param. */
		d->responder_resources = RDMA_MAX_RESP_RES;
		d->initiator_depth = RDMA_MAX_INIT_DEPTH;
		d->retry_count = 7;
		d->rnr_retry_count = 7;
		return 0;
	}
	d->qp_num = p->qp_num;
	d->responder_resources = p->responder_resources;
	d->initiator_depth = p->initiator_depth;
	d->flow_control = p->flow_control;
	d->retry_count = p->retry_count;
	d->rnr_retry_count = p->rnr_retry_count;
	d->srq = p->srq;
	if (p->private_data && p->private_data_len) {
		/* More than a REP carries (a REQ carries less, which the
		   state machine checks). */
		if (p->private_data_len > SNIC_CM_PRIVATE_DATA)
			return EINVAL;
		d->private_data_len = p->private_data_len;
		memcpy(d->private_data, p->private_data, p->private_data_len);
	}
	return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct snic_cm_param p;
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_param(&p, conn_param);
	if (rc)
		return snic_fail(rc);
	rc = snic_cm_connect(((struct snic_id *)id)->h, &p);
	if (rc)
		return snic_fail(rc);
	return snic_complete(id);
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct snic_id *s = (struct snic_id *)id;
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	snic_device(); /* a wildcard id has not opened it yet */
	rc = snic_cm_listen(s->h, backlog);
	if (rc)
		return snic_fail(rc);
	snic_sync(s);
	return 0;
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct snic_id *l = (struct snic_id *)listen;
	struct rdma_cm_event *event;
	int rc;

	if (!snic_live_has(listen) || !id || !l->sync)
		return snic_fail(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	rc = rdma_get_cm_event(listen->channel, &event);
	if (rc)
		return rc;
	if (event->event == RDMA_CM_EVENT_REJECTED) {
		rc = snic_fail(ECONNREFUSED);
		goto err;
	}
	if (event->status) {
		rc = snic_fail(event->status < 0 ? -event->status : event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rc = snic_fail(EINVAL);
		goto err;
	}
	if (l->qp_init_attr) {
		struct ibv_qp_init_attr attr = *l->qp_init_attr;

		rc = rdma_create_qp(event->id, listen->pd, &attr);
		if (rc)
			goto err;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err:
	listen->event = event;
	return rc;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct snic_cm_param p;
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_param(&p, conn_param);
	if (rc)
		return snic_fail(rc);
	if (!conn_param)
		p.retry_count = 0;
	rc = snic_cm_accept(((struct snic_id *)id)->h, &p);
	if (rc)
		return snic_fail(rc);
	return snic_complete(id);
}

static int snic_reject(struct rdma_cm_id *id, const void *private_data, uint8_t len, int reason)
{
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_cm_reject(((struct snic_id *)id)->h, (void *)private_data, private_data ? len : 0, reason);
	return rc ? snic_fail(rc) : 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return snic_reject(id, private_data, private_data_len, 28); /* consumer defined */
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return snic_reject(id, private_data, private_data_len, 35); /* vendor option not supported */
}

int rdma_establish(struct rdma_cm_id *id)
{
	int rc;

	if (!snic_live_has(id) || id->qp)
		return snic_fail(EINVAL);
	rc = snic_cm_establish(((struct snic_id *)id)->h);
	return rc ? snic_fail(rc) : 0;
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_cm_notify(((struct snic_id *)id)->h, event);
	return rc ? snic_fail(rc) : 0;
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	int rc;

	if (!snic_live_has(id))
		return snic_fail(EINVAL);
	rc = snic_cm_disconnect(((struct snic_id *)id)->h);
	if (rc)
		return snic_fail(rc);
	return snic_complete(id);
}

/* Address information, from getaddrinfo(3): numeric addresses and host
   names, RAI_PASSIVE, RAI_NUMERICHOST, RAI_FAMILY, the port spaces
   RDMA_PS_TCP (RC QPs) and RDMA_PS_UDP (UD). No AF_IB, no SA path
   records (ai_route stays empty). */

static int snic_copy_addr(struct sockaddr **dst, socklen_t *len, const struct sockaddr *src, socklen_t n)
{
	*dst = malloc(n);
	if (!*dst)
		return -1;
	memcpy(*dst, src, n);
	*len = n;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct addrinfo h, *ai = NULL;
	struct rdma_addrinfo *rai;
	int rc;

	if (!res || (!node && !service))
		return snic_fail(EINVAL);
	memset(&h, 0, sizeof(h));
	h.ai_socktype = SOCK_STREAM;
	if (hints) {
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
		if (hints->ai_family == AF_IB)
			return snic_fail(EAFNOSUPPORT);
		h.ai_family = hints->ai_family;
		if (hints->ai_port_space == RDMA_PS_UDP || hints->ai_qp_type == IBV_QPT_UD)
			h.ai_socktype = SOCK_DGRAM;
	}
	rc = getaddrinfo(node, service, &h, &ai);
	if (rc) {
		/* librdmacm returns getaddrinfo's error (an EAI_* code). */
		if (rc == EAI_SYSTEM)
			return -1;
		errno = rc == EAI_NONAME ? ENOENT : EINVAL;
		return rc;
	}
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		freeaddrinfo(ai);
		return snic_fail(ENOMEM);
	}
	rai->ai_flags = hints ? hints->ai_flags : 0;
	rai->ai_family = ai->ai_family;
	if (hints && hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else
		rai->ai_qp_type = h.ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
	if (hints && hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else
		rai->ai_port_space = h.ai_socktype == SOCK_DGRAM ? RDMA_PS_UDP : RDMA_PS_TCP;
	if (rai->ai_flags & RAI_PASSIVE) {
		if (snic_copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen))
			goto nomem;
	} else {
		if (snic_copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen))
			goto nomem;
		if (hints && hints->ai_src_addr && hints->ai_src_len &&
		    snic_copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len))
			goto nomem;
	}
	if (node && !(rai->ai_flags & RAI_PASSIVE)) {
		rai->ai_dst_canonname = strdup(node);
		if (!rai->ai_dst_canonname)
			goto nomem;
	}
	freeaddrinfo(ai);
	*res = rai;
	return 0;
nomem:
	freeaddrinfo(ai);
	rdma_freeaddrinfo(rai);
	return snic_fail(ENOMEM);
}

/* Endpoints: a synchronous id with its address (passive: bound; active:
   address and route resolved) and, with qp_init_attr, its QP. */

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct snic_id *s;
	int rc;

	if (!id || !res)
		return snic_fail(EINVAL);
	rc = rdma_create_id(NULL, &cm_id, NULL, res->ai_port_space);
	if (rc)
		return rc;
	s = (struct snic_id *)cm_id;
	if (res->ai_flags & RAI_PASSIVE) {
		rc = rdma_bind_addr(cm_id, res->ai_src_addr);
		if (rc)
			goto err;
		if (qp_init_attr) {
			s->qp_init_attr = malloc(sizeof(*qp_init_attr));
			if (!s->qp_init_attr) {
				rc = snic_fail(ENOMEM);
				goto err;
			}
			*s->qp_init_attr = *qp_init_attr;
			s->qp_init_attr->qp_type = res->ai_qp_type;
		}
		if (pd)
			cm_id->pd = pd;
		*id = cm_id;
		return 0;
	}
	rc = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (rc)
		goto err;
	rc = rdma_resolve_route(cm_id, 2000);
	if (rc)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		rc = rdma_create_qp(cm_id, pd, qp_init_attr);
		if (rc)
			goto err;
	}
	*id = cm_id;
	return 0;
err:
	rc = errno;
	rdma_destroy_ep(cm_id);
	return snic_fail(rc);
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!snic_live_has(id))
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}
