#!/usr/bin/env bash
# switch-cost.sh: the rate softnic switch sustains here, beside the
# kernel's forwarding on the same namespaces (docs/switch.md, "Cost").
#
# On the two-host testbed, `softnic-bench raw` sends full RoCE frames
# (1024-byte payload, no transport) from host a's AF_XDP socket as fast as
# it can, to host b's, which counts what arrives; in between the switch
# namespace forwards them, PAIRS times alternately by the kernel
# (ip_forward) and by `softnic switch` (unpaced, ECN and PFC off), each
# for SECONDS. It prints one CSV row per run and the ratio of each pair's
# received frame rates (softnic switch / kernel).
#
# Usage (as root): scripts/switch-cost.sh
# Environment: SWITCH_COST_PAIRS (3), SWITCH_COST_SECONDS (3),
# SOFTNIC_NS_PREFIX (sncost).
set -euo pipefail
cd "$(dirname "$0")/.."
me=switch-cost
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed)
[ -z "$why" ] || { echo "$me: cannot run here: $why" >&2; exit 1; }
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-sncost}
export SOFTNIC_HOSTS=2 SOFTNIC_SWITCH=kernel
P=$SOFTNIC_NS_PREFIX
pairs=${SWITCH_COST_PAIRS:-3}
secs=${SWITCH_COST_SECONDS:-3}
tb=scripts/testbed.sh
work=$(mktemp -d /tmp/softnic-swcost.XXXXXX)
sw=
cleanup() {
	[ -z "$sw" ] || { kill -TERM "$sw" 2>/dev/null || true; wait "$sw" 2>/dev/null || true; }
	bash "$tb" down >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/softnic" ./cmd/softnic
go build -o "$work/softnic-bench" ./cmd/softnic-bench
bash "$tb" up >/dev/null
ip netns exec "$P-a" ping -c1 -W2 198.18.1.1 >/dev/null
ip netns exec "$P-sw" ping -c1 -W2 198.18.0.1 >/dev/null
ip netns exec "$P-sw" ping -c1 -W2 198.18.1.1 >/dev/null
mac=$(ip -n "$P-sw" -br link show sw-a | awk '{print $3}')

# run: one raw transfer a -> b; prints the frames/s b received.
run() {
	ip netns exec "$P-b" timeout $((secs + 20)) "$work/softnic-bench" raw --iface b-sw --src-ip 198.18.1.1 -D "$secs" >"$work/srv.out" 2>&1 &
	local srv=$!
	sleep 0.5
	ip netns exec "$P-a" timeout $((secs + 20)) "$work/softnic-bench" raw --iface a-sw --dst-mac "$mac" \
		--src-ip 198.18.0.1 --dst-ip 198.18.1.1 -D "$secs" 198.18.1.1 >"$work/cli.out" 2>&1
	wait "$srv" || true
	# The summary row (received, frames, seconds, frames/s, Mpps, Gb/s), not
	# the per-second lines before it.
	awk '$1 == "received" && NF == 6 { v = $4 } END { print v }' "$work/srv.out"
}

echo "pair,forwarder,frames_per_s"
for i in $(seq "$pairs"); do
	k=$(run)
	echo "$i,kernel,$k"
	ip netns exec "$P-sw" "$work/softnic" switch --port sw-a --port sw-b --pfc off --ecn off \
		--socket "$work/sw.sock" >"$work/sw.log" 2>&1 &
	sw=$!
	for _ in $(seq 100); do [ -S "$work/sw.sock" ] && break; sleep 0.05; done
	s=$(run)
	kill -TERM "$sw"
	wait "$sw" || true
	sw=
	rm -f "$work/sw.sock"
	echo "$i,softnic,$s"
	echo "$me: pair $i: softnic switch / kernel = $(awk -v a="$s" -v b="$k" 'BEGIN { printf "%.3f", a / b }')" >&2
done
