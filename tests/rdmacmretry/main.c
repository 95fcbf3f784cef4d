/* rdmacmretry replays what perftest 4.5-0.17's rdma_cm client does when
   its connection is rejected (rdma_cm_client_connection's retry loop; a
   REJ with reason 8, no listener, comes when the server has not listened
   yet): rdma_resolve_addr, rdma_resolve_route, rdma_create_qp,
   rdma_connect to argv[1]:argv[2], where nothing listens, takes the
   REJECTED event and acks it, then rdma_cm_destroy_cma: rdma_destroy_id
   (with the QP still on the id), rdma_destroy_event_channel,
   rdma_freeaddrinfo. perftest then calls rdma_resolve_addr on the id it
   destroyed (its cma_node array freed too); rdma-core's librdmacm fails
   that call (the freed id's channel fd is gone) and perftest tries ten
   times and exits 1. This program passes the destroyed id back twice,
   as perftest does: the library must refuse it without touching the
   memory it freed. One "key value..." line per step for
   tests/rdmacm_test.go. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static struct rdma_cm_event *next(struct rdma_event_channel *ch, const char *what)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		printf("%s get_cm_event rc -1 errno=%d\n", what, errno);
		return NULL;
	}
	printf("%s event %s status %d\n", what, rdma_event_str(ev->event), ev->status);
	return ev;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo hints, *rai;
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct ibv_cq *cq;
	int attempt, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: rdmacmretry server-ip port\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("create rc -1 errno=%d\n", errno);
		return 1;
	}
	for (attempt = 0; attempt < 3; attempt++) {
		memset(&hints, 0, sizeof(hints));
		hints.ai_port_space = RDMA_PS_TCP;
		rc = rdma_getaddrinfo(argv[1], argv[2], &hints, &rai);
		if (rc) {
			printf("getaddrinfo rc %d\n", rc);
			return 1;
		}
		rc = rdma_resolve_addr(id, rai->ai_src_addr, rai->ai_dst_addr, 2000);
		printf("resolve_addr%d rc %d errno=%d\n", attempt, rc, rc ? errno : 0);
		if (rc) {
			rdma_freeaddrinfo(rai);
			continue;
		}
		if (!(ev = next(ch, "addr")))
			return 1;
		rdma_ack_cm_event(ev);
		if (rdma_resolve_route(id, 2000) || !(ev = next(ch, "route")))
			return 1;
		rdma_ack_cm_event(ev);
		cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = qa.recv_cq = cq;
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		rc = rdma_create_qp(id, id->pd, &qa);
		printf("create_qp rc %d\n", rc);
		memset(&cp, 0, sizeof(cp));
		cp.retry_count = cp.rnr_retry_count = 7;
		rc = rdma_connect(id, &cp);
		printf("connect rc %d\n", rc);
		if (!(ev = next(ch, "connect")))
			return 1;
		rdma_ack_cm_event(ev);
		/* perftest's rdma_cm_destroy_cma */
		rc = rdma_destroy_id(id);
		printf("destroy_id rc %d\n", rc);
		rdma_destroy_event_channel(ch);
		rdma_freeaddrinfo(rai);
	}
	/* And once more what perftest's second rdma_cm_destroy_cma does
	   with the stale id and channel; then the channel's events. */
	rc = rdma_destroy_id(id);
	printf("destroy_id_again rc %d errno=%d\n", rc, rc ? errno : 0);
	rdma_destroy_event_channel(ch);
	rc = rdma_get_cm_event(ch, &ev);
	printf("get_cm_event_destroyed rc %d errno=%d\n", rc, rc ? errno : 0);
	printf("done\n");
	return 0;
}
