/* cmdelay: an LD_PRELOAD shim that waits SOFTNIC_CONNECT_DELAY_MS
   milliseconds before each rdma_connect, then calls the real one (the
   next object's). TestRxeInterop gives it to perftest's -R client on
   softnic's side: perftest 4.5-0.17's server makes a new listening id
   for the test's connection after the two sides exchanged their
   parameters, and against the slow TCG guest the softnic client's REQ
   came first and was rejected (reason 8), more often than not under
   load. The wait moves nothing else: what the two CMs send is the same. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <rdma/rdma_cma.h>

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	static int (*real)(struct rdma_cm_id *, struct rdma_conn_param *);
	const char *ms = getenv("SOFTNIC_CONNECT_DELAY_MS");

	if (!real)
		real = (int (*)(struct rdma_cm_id *, struct rdma_conn_param *))dlsym(RTLD_NEXT, "rdma_connect");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (ms) {
		long n = strtol(ms, NULL, 10);
		struct timespec ts = { .tv_sec = n / 1000, .tv_nsec = (n % 1000) * 1000000L };

		if (n > 0)
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
	}
	return real(id, conn_param);
}
