#!/usr/bin/env bash
# figures.sh: the path and transport figures of softnic on the two-host
# testbed, in one run: the raw AF_XDP frame rate (no transport), RDMA WRITE
# bandwidth with 64 KiB messages at path MTU 1024 and 2048 over 1 and 4
# QPs, the 8-byte WRITE rate of one QP with one WRITE in flight, 8-byte
# write, read and send latency, and the kernel's own path on the same
# hosts (an 8-byte UDP ping-pong) as the baseline. Root and XDP needed.
# Output: the tables, CSV rows in ${SOFTNIC_FIGURES_CSV:-figures.csv}, and
# the latency summary (test, t_typical, p99, p99_9 in µs; rows write_lat,
# read_lat, send_lat, udp, udp_blocking, and ib_write_lat: Debian's
# perftest over the drop-in libibverbs.so.1, when it can be built) in
# ${SOFTNIC_LATENCY_CSV:-testbed-latency.csv}. "udp" polls its socket as
# softnic's loops poll (the same waiting policy; the stricter baseline
# here), "udp_blocking" blocks in recv.
# Since issue 27 also: write_bw at path MTU 4096 (AF_XDP multi-buffer) and
# iperf3's TCP goodput (installed with apt-get when missing), both last,
# on a testbed whose veths carry 4500 bytes; and the throughput
# summary in ${SOFTNIC_THROUGHPUT_CSV:-testbed-throughput.csv} (test,
# mtu, gbps: raw_afxdp's frame rate as Gb/s of 1 KiB payloads, write_bw
# 64 KiB over 1 QP at
# each path MTU, iperf3_tcp at the veth MTU); and write_lat in direct
# mode (softnic-bench --direct, the NIC in the bench process, no daemon),
# the latency summary's row write_lat_direct.
# Daemon flags: SOFTNIC_DAEMON_FLAGS (e.g. "--link-rate 5gbit").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed)
[ -z "$why" ] || { echo "figures: cannot run here: $why" >&2; exit 1; }
scheme=${SOFTNIC_SCHEME:-gbn}
mtu=2048 # the daemons carry up to 2048; each run picks its own path MTU
# (path MTU 4096 runs last, on veths of 4500 bytes: see below)
csv=$(realpath -m "${SOFTNIC_FIGURES_CSV:-figures.csv}")
latcsv=$(realpath -m "${SOFTNIC_LATENCY_CSV:-testbed-latency.csv}")
tputcsv=$(realpath -m "${SOFTNIC_THROUGHPUT_CSV:-testbed-throughput.csv}")
if ! command -v iperf3 >/dev/null; then
	echo "installing iperf3 (the TCP baseline)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null
fi
dur=${SOFTNIC_FIGURES_SECONDS:-5}
iters=${SOFTNIC_FIGURES_ITERS:-10000}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
mkdir -p "$(dirname "$csv")" "$(dirname "$latcsv")" "$(dirname "$tputcsv")"
rm -f "$csv" # one run per file: the ratios are taken within it
build
bash "$tb" up >/dev/null
ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null

echo "== raw AF_XDP frames A -> B, 1 KiB payload, no transport (${dur} s)"
gw=$(ip netns exec "$nsA" ip neigh show 198.18.0.254 | awk '{print $5; exit}')
ip netns exec "$nsB" "$work/softnic-bench" raw --iface b-sw --src-ip 198.18.1.1 >"$work/raw.server" 2>&1 &
rs=$!
sleep 0.5
if ! ip netns exec "$nsA" "$work/softnic-bench" raw --iface a-sw --dst-mac "$gw" --src-ip 198.18.0.1 --dst-ip 198.18.1.1 -D "$dur" 198.18.1.1 | tee "$work/raw.client"; then
	kill "$rs" 2>/dev/null || true
fi
wait "$rs" || true
cat "$work/raw.server"
# The client's table, "received <frames> <seconds> <frames/s> <Mpps>
# <Gb/s>": the whole run's frame rate as Gb/s of 1 KiB payloads, so that
# write_bw at MTU 1024 (payload Gb/s) over it is the ratio of the two
# frame rates.
rawgbps=$(awk '$1 == "received" && $3 ~ /^[0-9.]+$/ { printf "%.4f", $4 * 1024 * 8 / 1e9; exit }' "$work/raw.client")


start_daemon "$nsA" a-sw 198.18.0.1 "$work/a.sock"
start_daemon "$nsB" b-sw 198.18.1.1 "$work/b.sock"
declare -A wbw
for m in 1024 2048; do
	for q in 1 4; do
		echo "== write_bw 64 KiB, MTU $m, $q QP(s) (${dur} s)"
		bench write_bw -s 65536 -D "$dur" -m "$m" -q "$q" --report_gbits --csv "$csv"
		if [ "$q" = 1 ]; then
			# the row just written: bw_avg (Gb/s), column 5
			wbw[$m]=$(tail -n 1 "$csv" | awk -F, '{ print $5 }')
		fi
	done
done
echo "== write_bw 8 B, 1 QP, tx depth 1: one WRITE in flight (${dur} s)"
bench write_bw -s 8 -q 1 -t 1 -D "$dur" --report_gbits --csv "$csv"
for t in write_lat read_lat send_lat; do
	echo "== $t 8 B"
	bench "$t" -s 8 -n "$iters" --csv "$csv"
done
# Debian's ib_write_lat over the drop-in libibverbs.so.1, same daemons,
# same run (the issue-25 row; needs perftest, gcc and libibverbs-dev).
iblat=""
if command -v ib_write_lat >/dev/null && [ -f /usr/include/infiniband/verbs.h ]; then
	echo "== ib_write_lat 8 B over the drop-in libibverbs.so.1"
	mkdir -p "$work/lib"
	CGO_ENABLED=1 go build -tags ibverbs -buildmode=c-shared \
		-ldflags "-extldflags '-Wl,--version-script=$PWD/ibverbs/libibverbs.map'" -o "$work/lib/libibverbs.so.1" ./ibverbs/
	ip netns exec "$nsB" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/b.sock" \
		ib_write_lat -s 8 -n "$iters" -F -p 18610 >"$work/iblat.server" 2>&1 &
	ls=$!
	sleep 0.5
	ip netns exec "$nsA" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/a.sock" \
		ib_write_lat -s 8 -n "$iters" -F -p 18610 198.18.1.1 | tee "$work/iblat.client"
	wait "$ls" || true
	# perftest's row: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
	iblat=$(awk '$1 == 8 && NF >= 9 { print "ib_write_lat," $5 "," $8 "," $9; exit }' "$work/iblat.client")
else
	echo "== ib_write_lat skipped: needs perftest's ib_write_lat and rdma-core's headers (libibverbs-dev)"
fi
# write_lat in direct mode: the NIC in each bench process on its
# interface's queue, no daemon (docs/direct.md). The daemons hold the
# interfaces, so they stop first.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait "${pids[@]}" 2>/dev/null || true
pids=()
echo "== write_lat 8 B in direct mode (softnic-bench --direct, no daemon)"
ip netns exec "$nsB" "$work/softnic-bench" write_lat -s 8 -n "$iters" --direct b-sw >"$work/direct.server" 2>&1 &
ds=$!
sleep 0.5
ip netns exec "$nsA" "$work/softnic-bench" write_lat -s 8 -n "$iters" --direct a-sw --csv "$work/direct.csv" 198.18.1.1
wait "$ds" || { cat "$work/direct.server" >&2; exit 1; }
go build -o "$work/udplat" ./scripts/udplat
for busy in true false; do
	echo "== kernel path baseline, same hosts and switch: 8-byte UDP ping-pong ($([ $busy = true ] && echo "recv polled" || echo "blocking recv"))"
	ip netns exec "$nsB" "$work/udplat" -busy=$busy -listen 198.18.1.1:18600 &
	us=$!
	sleep 0.2
	ip netns exec "$nsA" "$work/udplat" -busy=$busy -n "$iters" -csv "$csv" 198.18.1.1:18600
	wait "$us" || true
done
# Path MTU 4096: AF_XDP multi-buffer on veths that carry 4500 bytes
# (a testbed of its own, so that the rows above keep their path), and
# the kernel's TCP on the same veths.
bash "$tb" down >/dev/null
export SOFTNIC_MTU=4500
mtu=4096
bash "$tb" up >/dev/null
ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null
echo "== kernel TCP on the MTU 4096 veth path: iperf3, 1 stream, ${dur} s (veth MTU $SOFTNIC_MTU)"
ip netns exec "$nsB" iperf3 -s -1 -B 198.18.1.1 -p 18620 >/dev/null 2>&1 &
is=$!
sleep 0.5
ip netns exec "$nsA" iperf3 -c 198.18.1.1 -p 18620 -t "$dur" -J >"$work/iperf3.json"
wait "$is" || true
tcpgbps=$(python3 -c 'import json,sys; print("%.4f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' "$work/iperf3.json")
echo " iperf3 TCP: $tcpgbps Gb/s received"
start_daemon "$nsA" a-sw 198.18.0.1 "$work/a.sock"
start_daemon "$nsB" b-sw 198.18.1.1 "$work/b.sock"
for q in 1 4; do
	echo "== write_bw 64 KiB, MTU 4096, $q QP(s) (${dur} s)"
	bench write_bw -s 65536 -D "$dur" -m 4096 -q "$q" --report_gbits --csv "$csv"
	[ "$q" != 1 ] || wbw[4096]=$(tail -n 1 "$csv" | awk -F, '{ print $5 }')
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait "${pids[@]}" 2>/dev/null || true
pids=()

# The latency summary: the last row of each latency test in this run's CSV.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	$1 ~ /^(write_lat|read_lat|send_lat|udp|udp_blocking)$/ { row[$1] = $col["t_typical"] "," $col["p99"] "," $col["p99_9"] }
	END { print "test,t_typical,p99,p99_9"
		n = split("write_lat read_lat send_lat udp udp_blocking", order, " ")
		for (i = 1; i <= n; i++) if (order[i] in row) print order[i] "," row[order[i]] }' "$csv" >"$latcsv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	$1 == "write_lat" { row = "write_lat_direct," $col["t_typical"] "," $col["p99"] "," $col["p99_9"] }
	END { if (row != "") print row }' "$work/direct.csv" >>"$latcsv"
[ -z "$iblat" ] || echo "$iblat" >>"$latcsv"
echo "== latency summary (µs), $latcsv"
tr , "\t" <"$latcsv"
{
	echo "test,mtu,gbps"
	echo "raw_afxdp,1024,$rawgbps"
	for m in 1024 2048 4096; do echo "write_bw,$m,${wbw[$m]}"; done
	echo "iperf3_tcp,4500,$tcpgbps"
} >"$tputcsv"
echo "== throughput summary (Gb/s), $tputcsv"
tr , "\t" <"$tputcsv"
awk -F, '$1 == "raw_afxdp" { raw = $3 } $1 == "write_bw" && $2 == 1024 { w = $3 } $1 == "write_bw" && $2 == 4096 { w4 = $3 } $1 == "iperf3_tcp" { tcp = $3 }
	END { if (raw > 0) printf "write_bw MTU 1024 / raw AF_XDP: %.2f\n", w / raw
		if (tcp > 0) printf "write_bw MTU 4096 / iperf3 TCP: %.2f\n", w4 / tcp }' "$tputcsv"
