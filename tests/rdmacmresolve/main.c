/* rdmacmresolve runs librdmacm's address calls over the drop-in
   librdmacm.so.1 and libibverbs.so.1: rdma_getaddrinfo, rdma_get_devices,
   an event channel whose fd it polls, rdma_resolve_addr and
   rdma_resolve_route to argv[1], rdma_create_qp on the id, the same in
   synchronous mode, and rdma_resolve_addr to argv[2], which nobody
   answers, with a 500 ms timeout. tests/rdmacm_test.go compiles it
   against rdma-core's headers and reads one "key value..." line per
   check. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *ntop(const struct sockaddr *sa, char *buf, size_t n)
{
	if (sa->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, n);
	if (sa->sa_family == AF_INET6)
		return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, n);
	snprintf(buf, n, "family%d", sa->sa_family);
	return buf;
}

static const char *gid(const union ibv_gid *g, char *buf, size_t n)
{
	return inet_ntop(AF_INET6, g->raw, buf, n);
}

/* next waits up to ms for the channel's fd, then takes one event. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch, int ms, const char *what)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int n = poll(&p, 1, ms);

	printf("%s poll %d\n", what, n);
	if (n != 1)
		return NULL;
	if (rdma_get_cm_event(ch, &ev)) {
		printf("%s get_cm_event failed errno=%d\n", what, errno);
		return NULL;
	}
	printf("%s event %s status %d\n", what, rdma_event_str(ev->event), ev->status);
	return ev;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id, *sid;
	struct ibv_context **devs;
	char b1[64], b2[64];
	int n, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: rdmacmresolve reachable-ip silent-ip\n");
		return 2;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	rc = rdma_getaddrinfo(argv[1], "7471", &hints, &res);
	if (rc) {
		printf("getaddrinfo failed %d errno=%d\n", rc, errno);
		return 1;
	}
	printf("getaddrinfo dst %s port %d ps %#x qp_type %d\n", ntop(res->ai_dst_addr, b1, sizeof(b1)),
	       ntohs(((struct sockaddr_in *)res->ai_dst_addr)->sin_port), res->ai_port_space, res->ai_qp_type);
	rdma_freeaddrinfo(res);
	hints.ai_flags = RAI_PASSIVE;
	rc = rdma_getaddrinfo(NULL, "7471", &hints, &res);
	printf("getaddrinfo passive rc %d src %s\n", rc, rc ? "-" : ntop(res->ai_src_addr, b1, sizeof(b1)));
	if (!rc)
		rdma_freeaddrinfo(res);
	hints.ai_flags = 0;
	hints.ai_family = AF_INET;
	rc = rdma_getaddrinfo("localhost", "7471", &hints, &res);
	printf("getaddrinfo name rc %d dst %s\n", rc, rc ? "-" : ntop(res->ai_dst_addr, b1, sizeof(b1)));
	if (!rc)
		rdma_freeaddrinfo(res);

	devs = rdma_get_devices(&n);
	printf("devices %d %s\n", n, n > 0 ? ibv_get_device_name(devs[0]->device) : "-");
	rdma_free_devices(devs);

	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("create failed errno=%d\n", errno);
		return 1;
	}
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	rc = rdma_get_cm_event(ch, &ev);
	printf("nonblocking get rc %d errno=%d\n", rc, errno);

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	rdma_getaddrinfo(argv[1], "7471", &hints, &res);
	if (rdma_resolve_addr(id, NULL, res->ai_dst_addr, 2000)) {
		printf("resolve_addr failed errno=%d\n", errno);
		return 1;
	}
	ev = next(ch, 5000, "addr");
	if (!ev)
		return 1;
	printf("addr verbs %d pd %d port %d src %s dst %s dst_port %d src_port_set %d\n", id->verbs != NULL,
	       id->pd != NULL, id->port_num, ntop(rdma_get_local_addr(id), b1, sizeof(b1)),
	       ntop(rdma_get_peer_addr(id), b2, sizeof(b2)), ntohs(rdma_get_dst_port(id)), rdma_get_src_port(id) != 0);
	rdma_ack_cm_event(ev);
	{
		uint8_t tos = 32;
		int bogus = 1;

		rc = rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos));
		printf("set_option tos rc %d", rc);
		errno = 0;
		rc = rdma_set_option(id, RDMA_OPTION_ID, 99, &bogus, sizeof(bogus));
		printf(" unknown rc %d errno=%d\n", rc, errno);
	}
	if (rdma_resolve_route(id, 2000)) {
		printf("resolve_route failed errno=%d\n", errno);
		return 1;
	}
	ev = next(ch, 5000, "route");
	if (!ev)
		return 1;
	rdma_ack_cm_event(ev);
	printf("route paths %d sgid %s dgid %s hop_limit %d mtu %d pkey %#x tclass %d\n", id->route.num_paths,
	       gid(&id->route.path_rec->sgid, b1, sizeof(b1)), gid(&id->route.path_rec->dgid, b2, sizeof(b2)),
	       id->route.path_rec->hop_limit, id->route.path_rec->mtu, be16toh(id->route.path_rec->pkey),
	       id->route.path_rec->traffic_class);
	rc = poll(&(struct pollfd){ .fd = ch->fd, .events = POLLIN }, 1, 0);
	printf("drained poll %d\n", rc);

	struct ibv_qp_attr qa;
	int mask = 0;

	qa.qp_state = IBV_QPS_INIT;
	rc = rdma_init_qp_attr(id, &qa, &mask);
	printf("init_qp_attr rc %d mask %#x port %d pkey_index %d\n", rc, mask, qa.port_num, qa.pkey_index);
	qa.qp_state = IBV_QPS_RTR;
	rc = rdma_init_qp_attr(id, &qa, &mask);
	printf("init_qp_attr_rtr rc %d errno=%d\n", rc, errno);

	struct ibv_qp_init_attr init = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
					 .qp_type = IBV_QPT_RC };
	rc = rdma_create_qp(id, NULL, &init);
	if (rc) {
		printf("create_qp failed errno=%d\n", errno);
	} else {
		struct ibv_qp_init_attr qi;

		ibv_query_qp(id->qp, &qa, IBV_QP_STATE, &qi);
		printf("create_qp state %d port %d cqs %d\n", qa.qp_state, qa.port_num, id->send_cq != NULL && id->recv_cq != NULL);
	}
	/* More private data than any CM message carries (255, the most
	   rdma_conn_param's uint8_t length says): EINVAL, nothing sent. */
	{
		static char big[255];
		struct rdma_conn_param cp = { .private_data = big, .private_data_len = sizeof(big),
					      .responder_resources = 1, .initiator_depth = 1, .retry_count = 7 };

		rc = rdma_connect(id, &cp);
		printf("connect_big rc %d errno=%d\n", rc, errno);
	}
	rc = rdma_connect(id, NULL);
	printf("connect rc %d errno=%d\n", rc, rc ? errno : 0);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* Synchronous mode: the calls wait for their events. */
	if (rdma_create_id(NULL, &sid, NULL, RDMA_PS_TCP)) {
		printf("create sync failed errno=%d\n", errno);
		return 1;
	}
	rc = rdma_resolve_addr(sid, NULL, res->ai_dst_addr, 2000);
	printf("sync resolve_addr rc %d verbs %d\n", rc, sid->verbs != NULL);
	rc = rdma_resolve_route(sid, 2000);
	printf("sync resolve_route rc %d paths %d\n", rc, sid->route.num_paths);
	rdma_destroy_id(sid);
	rdma_freeaddrinfo(res);

	/* Nobody answers for argv[2] on the link: ADDR_ERROR after the timeout. */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	rdma_getaddrinfo(argv[2], "7471", &hints, &res);
	double t0 = now_ms();

	rc = rdma_resolve_addr(id, NULL, res->ai_dst_addr, 500);
	printf("silent resolve_addr rc %d\n", rc);
	ev = next(ch, 10000, "silent");
	printf("silent elapsed_ms %.0f\n", now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(id);

	rdma_create_id(NULL, &sid, NULL, RDMA_PS_TCP);
	t0 = now_ms();
	rc = rdma_resolve_addr(sid, NULL, res->ai_dst_addr, 500);
	printf("sync_silent rc %d errno=%d elapsed_ms %.0f\n", rc, errno, now_ms() - t0);
	rdma_destroy_id(sid);
	rdma_freeaddrinfo(res);
	/* What softnic does not implement fails with ENOSYS (stubs_gen.c),
	   with the return type's -1. */
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 } };
		struct sockaddr_in mc = { .sin_family = AF_INET };
		char buf[8];
		int r;
		long l;

		rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
		errno = 0;
		r = rdma_join_multicast(id, (struct sockaddr *)&mc, NULL);
		printf("unsupported rdma_join_multicast %d errno=%d\n", r, errno);
		errno = 0;
		r = rdma_create_srq(id, NULL, &sa);
		printf("unsupported rdma_create_srq %d errno=%d\n", r, errno);
		errno = 0;
		r = rsocket(AF_INET, SOCK_STREAM, 0);
		printf("unsupported rsocket %d errno=%d\n", r, errno);
		errno = 0;
		l = rread(3, buf, sizeof(buf));
		printf("unsupported rread %ld errno=%d\n", l, errno);
		errno = 0;
		l = (long)riomap(3, buf, sizeof(buf), PROT_WRITE, 0, -1);
		printf("unsupported riomap %ld errno=%d\n", l, errno);
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
