#!/usr/bin/env bash
# demo.sh: softnic's main job. On a Linux host with root and XDP it builds
# softnic and softnic-bench, brings up the two-host namespace testbed
# (testbed.sh), starts a softnic daemon on host A and on host B over AF_XDP,
# runs `softnic-bench write_bw` from A to B lossless and at 1% loss (both
# directions, on the switch), then once more at 1% with QPs that ask for a
# selective-repeat scheme (FaSR by default: the daemons run go-back-N for
# QPs that do not ask), prints perftest's tables and tears everything
# down. Without root, XDP or the testbed's tools (iproute2, ping, and
# nftables or sch_netem for the loss) it says why and runs the embedded
# demo instead (`softnic demo`: two NICs on the in-memory fabric,
# simulated time); with SOFTNIC_NO_EMBEDDED=1 it says why and exits 1.
#
# Environment: SOFTNIC_DEMO_ITERS (default 5000), SOFTNIC_DEMO_SIZE (65536),
# SOFTNIC_DEMO_MTU (1024), SOFTNIC_DEMO_LOSS (1), SOFTNIC_DEMO_SCHEME (gbn),
# SOFTNIC_DEMO_COMPARE (fasr; "" skips the comparison run).
set -euo pipefail
cd "$(dirname "$0")/.."

iters=${SOFTNIC_DEMO_ITERS:-5000}
size=${SOFTNIC_DEMO_SIZE:-65536}
mtu=${SOFTNIC_DEMO_MTU:-1024}
loss=${SOFTNIC_DEMO_LOSS:-1}
scheme=${SOFTNIC_DEMO_SCHEME:-gbn}
compare=${SOFTNIC_DEMO_COMPARE-fasr}

me=demo
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh

embedded() {
	no_embedded "$1"
	echo "demo: $1; running the embedded demo instead" >&2
	go run ./cmd/softnic demo -s "$size" -n "$iters" -m "$mtu" -loss "$loss" -scheme "$scheme"
	if [ -n "$compare" ] && [ "$compare" != "$scheme" ]; then
		go run ./cmd/softnic demo -s "$size" -n "$iters" -m "$mtu" -loss "$loss" -scheme "$compare"
	fi
	exit 0
}

why=$(no_testbed "$loss")
[ -z "$why" ] || embedded "$why"

# shellcheck source=scripts/lib.sh
source scripts/lib.sh
build
if ! up; then
	bash "$tb" down >/dev/null 2>&1 || true
	trap - EXIT
	rm -rf "$work"
	embedded "the softnic daemon could not attach XDP/AF_XDP here (log above)"
fi

echo " RDMA_Write BW, softnic over AF_XDP between two hosts (namespaces) through a switch namespace"
echo " MTU $mtu, recovery $scheme, $iters x $size B; loss injected on the switch: $(bash "$tb" loss 0 | tail -1)"
for pct in 0 "$loss"; do
	bash "$tb" loss "$pct" >/dev/null
	echo " loss ${pct}% (both directions):"
	bench write_bw -s "$size" -n "$iters" -m "$mtu" --report_gbits
done
if [ -n "$compare" ] && [ "$compare" != "$scheme" ]; then
	echo " loss ${loss}% (both directions), QPs asking for $compare:"
	bench write_bw -s "$size" -n "$iters" -m "$mtu" --report_gbits --scheme "$compare"
fi
bash "$tb" loss 0 >/dev/null
echo " counters of host A's NIC:"
"$work/softnic" stats --socket "$work/a.sock" | grep -E 'sent_pkts|rcvd_pkts|retransmitted|rcvd_seq_err|local_ack_timeout' || true
