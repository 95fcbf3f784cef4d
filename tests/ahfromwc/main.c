/* ahfromwc: ibv_init_ah_from_wc and ibv_create_ah_from_wc of the drop-in
   libibverbs on GRH areas made here (TestIbverbsAHFromWC). argv[1] is
   the IPv4 address datagrams come from (a host the kernel can reach).
   One line per case: its name, then what the call gave. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static void show(const char *name, int rc, struct ibv_ah_attr *a)
{
	char g[INET6_ADDRSTRLEN];

	if (rc) {
		printf("%s rc %d errno=%d\n", name, rc, errno);
		return;
	}
	inet_ntop(AF_INET6, a->grh.dgid.raw, g, sizeof(g));
	printf("%s rc 0 global %d port %d dgid %s sgid_index %d tclass 0x%x hop_limit %d flow 0x%x\n", name,
	       a->is_global, a->port_num, g, a->grh.sgid_index, a->grh.traffic_class, a->grh.hop_limit,
	       a->grh.flow_label);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_ah *ah;
	union ibv_gid own;
	struct ibv_ah_attr attr;
	struct ibv_wc wc;
	uint8_t grh[40];
	struct in_addr src;
	int n;

	if (argc != 2 || inet_pton(AF_INET, argv[1], &src) != 1)
		return 2;
	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0])) || ibv_query_gid(ctx, 1, 0, &own) ||
	    !(pd = ibv_alloc_pd(ctx))) {
		printf("setup failed errno=%d\n", errno);
		return 1;
	}
	memset(&wc, 0, sizeof(wc));
	wc.wc_flags = IBV_WC_GRH;

	/* RoCE v2 over IPv4: 20 zero bytes, then the IPv4 header. */
	memset(grh, 0, sizeof(grh));
	grh[20] = 0x45;
	grh[21] = 0x28; /* TOS */
	grh[28] = 63;   /* TTL */
	grh[29] = 17;   /* UDP */
	memcpy(&grh[32], &src, 4);
	memcpy(&grh[36], &own.raw[12], 4);
	show("ipv4", ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &attr), &attr);
	errno = 0;
	ah = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)grh, 1);
	printf("create_ah_from_wc ah %d errno=%d\n", ah != NULL, ah ? 0 : errno);
	if (ah)
		ibv_destroy_ah(ah);

	/* An IPv6 header: version 6, traffic class 0x12, flow label 0xabcde;
	   the source 2001:db8:b::1, the destination the port's GID. */
	memset(grh, 0, sizeof(grh));
	grh[0] = 0x61;
	grh[1] = 0x2a;
	grh[2] = 0xbc;
	grh[3] = 0xde;
	grh[6] = 17;
	grh[7] = 64;
	inet_pton(AF_INET6, "2001:db8:b::1", &grh[8]);
	memcpy(&grh[24], own.raw, 16);
	show("ipv6", ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &attr), &attr);

	/* Sent to another address than the port's. */
	grh[39] ^= 1;
	show("other_dgid", ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &attr), &attr);
	/* Neither an IPv6 nor an IPv4 header. */
	memset(grh, 0, sizeof(grh));
	show("no_header", ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &attr), &attr);
	/* No GRH in the completion. */
	wc.wc_flags = 0;
	show("no_grh", ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &attr), &attr);
	errno = 0;
	ah = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)grh, 1);
	printf("create_ah_from_wc_no_grh ah %d errno=%d\n", ah != NULL, ah ? 0 : errno);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
