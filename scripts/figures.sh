#!/usr/bin/env bash
# figures.sh: the path and transport figures of softnic on the two-host
# testbed, in one run: the raw AF_XDP frame rate (no transport), RDMA WRITE
# bandwidth with 64 KiB messages at path MTU 1024 and 2048 over 1 and 4
# QPs, and 8-byte write latency. Root and XDP needed. Output: the tables,
# and CSV rows in ${SOFTNIC_FIGURES_CSV:-figures.csv}.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "figures: needs root (namespaces, XDP)" >&2; exit 1; }
scheme=${SOFTNIC_SCHEME:-gbn}
mtu=2048 # the daemons carry up to 2048; each run picks its own path MTU
csv=$(realpath -m "${SOFTNIC_FIGURES_CSV:-figures.csv}")
dur=${SOFTNIC_FIGURES_SECONDS:-5}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
build
bash "$tb" up >/dev/null
ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null

echo "== raw AF_XDP frames A -> B, 1 KiB payload, no transport (${dur} s)"
gw=$(ip netns exec "$nsA" ip neigh show 198.18.0.254 | awk '{print $5; exit}')
ip netns exec "$nsB" "$work/softnic-bench" raw --iface b-sw --src-ip 198.18.1.1 >"$work/raw.server" 2>&1 &
rs=$!
sleep 0.5
if ! ip netns exec "$nsA" "$work/softnic-bench" raw --iface a-sw --dst-mac "$gw" --src-ip 198.18.0.1 --dst-ip 198.18.1.1 -D "$dur" 198.18.1.1; then
	kill "$rs" 2>/dev/null || true
fi
wait "$rs" || true
cat "$work/raw.server"

start_daemon "$nsA" a-sw 198.18.0.1 "$work/a.sock"
start_daemon "$nsB" b-sw 198.18.1.1 "$work/b.sock"
for m in 1024 2048; do
	for q in 1 4; do
		echo "== write_bw 64 KiB, MTU $m, $q QP(s) (${dur} s)"
		bench write_bw -s 65536 -D "$dur" -m "$m" -q "$q" --report_gbits --csv "$csv"
	done
done
echo "== write_lat 8 B"
bench write_lat -s 8 -n 10000 --csv "$csv"
echo "== kernel path baseline, same hosts and switch: 8-byte UDP ping-pong"
go build -o "$work/udplat" ./scripts/udplat
ip netns exec "$nsB" "$work/udplat" -listen 198.18.1.1:18600 &
us=$!
sleep 0.2
ip netns exec "$nsA" "$work/udplat" -n 10000 198.18.1.1:18600
wait "$us" || true
