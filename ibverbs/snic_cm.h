/* softnic's private interface between the drop-in librdmacm.so.1
   (rdmacm/cma.c, a C library) and the rdma_cm state machine that lives in
   the drop-in libibverbs.so.1's Go runtime (ibverbs/rdmacm.go on package
   verbs/rdmacm): one process holds one Go runtime. libibverbs.so.1
   exports these functions, and nothing else beyond rdma-core's exports,
   under the version node SOFTNIC_PRIVATE_1 (ibverbs/gen.go writes it
   into libibverbs.map); the ABI is private to the two libraries of one
   build. Handles are Go handles; "user" is the C side's struct
   rdma_cm_id of an id. Calls return 0 or an errno. */
#ifndef SNIC_CM_H
#define SNIC_CM_H

#include <stddef.h>
#include <stdint.h>
#include "snic.h"

#define SNIC_CM_PRIVATE_DATA 196 /* a REP's; a REQ carries at most 56 of the program's */

/* A socket address, flat: family AF_INET or AF_INET6 (0: none), the port
   in host order, the address in network order (IPv4 in addr[0..3]). */
struct snic_cm_addr {
	uint16_t family, port;
	uint8_t addr[16];
	uint32_t scope_id;
};

/* struct rdma_conn_param without its pointer. */
struct snic_cm_param {
	uint32_t qp_num;
	uint8_t responder_resources, initiator_depth, flow_control, retry_count, rnr_retry_count, srq;
	uint8_t private_data_len;
	uint8_t private_data[SNIC_CM_PRIVATE_DATA];
	uint32_t qkey; /* UD (rdma_ud_param): the peer's Q_Key */
};

/* What an id's struct rdma_cm_id shows: addresses, device, path. */
struct snic_cm_route {
	struct snic_cm_addr src, dst;
	uint8_t has_device, has_path;
	uint8_t sgid[16], dgid[16];
	uint8_t hop_limit, traffic_class, mtu, packet_life_time;
	uint32_t flow_label;
	uint16_t pkey;
	uint8_t dmac[6];
};

struct snic_cm_event {
	uintptr_t ev;                 /* for snic_cm_ack_event */
	uintptr_t id, listen_id;      /* Go handles of the ids */
	uintptr_t id_user, listen_user; /* their struct rdma_cm_id; id_user 0: a new id */
	int32_t event, status;
	struct snic_cm_param param;
	uint8_t ud; /* a UD id's event: param is rdma_ud_param's */
};

#ifndef SNIC_CM_NO_PROTOTYPES
/* Exported by libibverbs.so.1 under SOFTNIC_PRIVATE_1 (lib: rdmacm.go). */
int snic_cm_channel_create(int *fd, uintptr_t *h);
int snic_cm_channel_destroy(uintptr_t ch);
int snic_cm_get_event(uintptr_t ch, struct snic_cm_event *out);
void snic_cm_ack_event(uintptr_t ev);
int snic_cm_create_id(uintptr_t ch, int ps, uintptr_t user, uintptr_t *h);
int snic_cm_destroy_id(uintptr_t id);
void snic_cm_set_user(uintptr_t id, uintptr_t user);
int snic_cm_migrate(uintptr_t id, uintptr_t ch);
int snic_cm_bind(uintptr_t id, struct snic_cm_addr *a);
int snic_cm_resolve_addr(uintptr_t id, struct snic_cm_addr *src, struct snic_cm_addr *dst, int timeout_ms);
int snic_cm_resolve_route(uintptr_t id, int timeout_ms);
int snic_cm_query(uintptr_t id, struct snic_cm_route *out);
int snic_cm_attach_qp(uintptr_t id, uintptr_t qp, uint32_t qpn);
void snic_cm_detach_qp(uintptr_t id);
int snic_cm_init_qp_attr(uintptr_t id, struct snic_qp_attr *a, int *mask);
int snic_cm_connect(uintptr_t id, struct snic_cm_param *p);
int snic_cm_listen(uintptr_t id, int backlog);
int snic_cm_accept(uintptr_t id, struct snic_cm_param *p);
int snic_cm_reject(uintptr_t id, void *private_data, int len, int reason);
int snic_cm_establish(uintptr_t id);
int snic_cm_notify(uintptr_t id, int event);
int snic_cm_disconnect(uintptr_t id);
int snic_cm_set_option(uintptr_t id, int level, int name, void *val, size_t len);
/* The device context (struct ibv_context *) ids use: the CM service's
   channel is opened on its daemon connection, so that connections name
   the QPs made on it. */
int snic_cm_set_device(uintptr_t ctx);
#endif

/* libibverbs-internal (ibverbs/cm.c, not exported): ibv_modify_qp on a struct ibv_qp
   from snic_qp_attr, for the Go side's QP moves. */
int snic_modify_qp_c(uintptr_t qp, struct snic_qp_attr *a, int mask);
/* The Go handle of a struct ibv_context of this library (0 for NULL). */
uintptr_t snic_context_handle_c(uintptr_t ctx);

#endif
