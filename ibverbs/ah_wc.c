//go:build ibverbs

/* ibv_init_ah_from_wc and ibv_create_ah_from_wc: the address handle
   back to the sender of a received UD datagram, from its completion and
   the GRH area of its receive buffer (docs/ud.md, "Receiving"): RoCE v2
   puts an IPv6 datagram's IPv6 header in the 40 bytes, an IPv4
   datagram's IPv4 header in the last 20 after 20 zero bytes, as rxe and
   rdma-core lay it out. The destination GID is the datagram's source
   address (IPv4-mapped for IPv4), the source GID index the port's GID
   the datagram was sent to; the traffic class is the datagram's, the hop
   limit the IPv4 TTL (0xff for IPv6), the flow label the IPv6 header's,
   as rdma-core's set_ah_attr_by_ipv4 and _ipv6 make them. Written from
   those facts, with the library's public calls only. */

#include <infiniband/verbs.h>
#include <errno.h>
#include <endian.h>
#include <string.h>

static void snic_map_ipv4(const uint8_t *a4, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	memcpy(&g->raw[12], a4, 4);
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	const uint8_t *raw = (const uint8_t *)grh;
	union ibv_gid own, dst;
	int v6;

	if (!context || !wc || !grh || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	/* RoCE has no LID routing: a datagram without its GRH names no
	   way back. */
	if (!(wc->wc_flags & IBV_WC_GRH)) {
		errno = EINVAL;
		return -1;
	}
	v6 = (be32toh(grh->version_tclass_flow) >> 28) == 6;
	if (!v6 && (raw[20] >> 4) != 4) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	ah_attr->is_global = 1;
	if (v6) {
		uint32_t vtf = be32toh(grh->version_tclass_flow);

		ah_attr->grh.dgid = grh->sgid;
		dst = grh->dgid;
		ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
		ah_attr->grh.flow_label = vtf & 0xfffff;
		ah_attr->grh.hop_limit = 0xff;
	} else {
		snic_map_ipv4(raw + 20 + 12, &ah_attr->grh.dgid);
		snic_map_ipv4(raw + 20 + 16, &dst);
		ah_attr->grh.traffic_class = raw[20 + 1];
		ah_attr->grh.hop_limit = raw[20 + 8];
	}
	/* The port's one GID (index 0) must be the datagram's destination. */
	if (ibv_query_gid(context, port_num, 0, &own))
		return -1;
	if (memcmp(own.raw, dst.raw, 16)) {
		errno = EINVAL;
		return -1;
	}
	ah_attr->grh.sgid_index = 0;
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
