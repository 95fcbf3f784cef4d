#!/usr/bin/env bash
# testbed-incast.sh: an (N-1):1 incast of write_bw on the N-host testbed
# through softnic's switch (docs/switch.md, "Incast on the testbed"), and
# the same experiment on the embedded switch beside it.
#
# Hosts a, b, c, ... (all but the last) each run softnic-bench write_bw
# into the last host at once, one QP each, through `softnic switch` on the
# switch namespace, which paces every port at RATE; every daemon's
# emulated link (--link-rate) is RATE too, so the receiver's port is
# (N-1) times oversubscribed. Each mode runs every scheme:
#   dcqcn+pfc  daemons --cc dcqcn; the switch marks ECN (RED, kmin 5 KB,
#              kmax 20 KB, pmax 1%) and sends PFC (XOFF 150 KB per ingress
#              port, headroom for 2 ms of the daemons' reaction); DCQCN's
#              rate steps scaled to RATE as at 40 Gbit/s (dcqcn.rai,
#              dcqcn.rhai: 40 and 200 Mbit/s there, 0.1% and 0.5% of the
#              line) and its timers and CNP interval at 1 ms, above the
#              loaded testbed's round trip (the paper's 55 µs is a fraction
#              of one round trip of daemons here, and cuts each flow every
#              few packets)
#   none       no congestion control, no marking, no PFC: the receiver's
#              queue (a 300 KB buffer per egress port) overflows and drops
# Goodput is what each client's softnic-bench reports (BW average, Gb/s)
# over its -D seconds. The switch's counters give drops, pauses, marks and
# the receiver's queue p99 (arrivals after --occupancy-after, the
# convergence time); the receiver daemon's np_cnp_sent gives the CNPs.
#
# Usage (as root): scripts/testbed-incast.sh [CSV]
#   CSV   rows are written there (default docs/results/testbed-incast.csv,
#         replaced), the testbed's as they are measured and then the
#         embedded switch's (softnic-sweep incast at the same rate); the
#         last column, status, is ok or how the flow failed
# Environment:
#   SOFTNIC_HOSTS   hosts (default 4: a 3:1 incast)
#   INCAST_RATE     every link's rate in Mbit/s (default 200: what this
#                   2-core host sustains with 4 daemons and the switch)
#   INCAST_SECONDS  write_bw -D (default 10)
#   INCAST_SCHEMES  recovery schemes (default "gbn irn fasr")
#   INCAST_MODES    (default "dcqcn+pfc none")
#   INCAST_REPEAT   runs per point (default 1)
#   INCAST_SOFTNIC  a softnic binary to run instead of the one built here
#   INCAST_DCQCN    the daemons' (and the embedded NICs') DCQCN knobs
#                   (default above), space-separated
set -euo pipefail
cd "$(dirname "$0")/.."
me=testbed-incast
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh

hosts=${SOFTNIC_HOSTS:-4}
rate=${INCAST_RATE:-200}
secs=${INCAST_SECONDS:-10}
schemes=${INCAST_SCHEMES:-gbn irn fasr}
modes=${INCAST_MODES:-dcqcn+pfc none}
repeat=${INCAST_REPEAT:-1}
csv=${1:-docs/results/testbed-incast.csv}
export SOFTNIC_HOSTS=$hosts SOFTNIC_SWITCH=softnic
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-sninc}
tb=scripts/testbed.sh
P=$SOFTNIC_NS_PREFIX

why=$(no_testbed)
if [ -n "$why" ]; then
	echo "$me: $why" >&2
	exit 1
fi

work=$(mktemp -d /tmp/softnic-incast.XXXXXX)
pids=()
stop_all() {
	stop_pids "${pids[@]}"
	pids=()
}
cleanup() {
	stop_all
	bash "$tb" down >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$me: $*" >&2; }

say "building softnic, softnic-bench and softnic-sweep"
go build -o "$work/softnic" ./cmd/softnic
# INCAST_SOFTNIC: another softnic binary for the switch and daemons (an
# A/B of two builds on the same testbed).
[ -z "${INCAST_SOFTNIC:-}" ] || cp "$INCAST_SOFTNIC" "$work/softnic"
go build -o "$work/softnic-bench" ./cmd/softnic-bench
go build -o "$work/softnic-sweep" ./cmd/softnic-sweep

bash "$tb" up "$hosts" >/dev/null
mapfile -t lines < <(bash "$tb" hosts)
names=() nss=() ifs=() ips=()
for l in "${lines[@]}"; do
	read -r n ns ifc ip4 _ <<<"$l"
	names+=("$n") nss+=("$ns") ifs+=("$ifc") ips+=("$ip4")
done
last=$((hosts - 1))
dstip=${ips[$last]}
# Neighbours resolved in the switch namespace before the switch starts
# (it reads next hops from the kernel's table).
for i in "${!ips[@]}"; do
	ip netns exec "${nss[$i]}" ping -c1 -W2 "$dstip" >/dev/null 2>&1 || true
	ip netns exec "$P-sw" ping -c1 -W2 "${ips[$i]}" >/dev/null
done

bits=$((rate * 1000000))
# PFC headroom: 2 ms of the line (what a loaded daemon takes to see a
# pause and stop; netsw.HeadroomFor for a wire would be microseconds),
# two frames and the pause frame, at least 20 KB.
headroom=$((bits / 8 * 2000 / 1000000 + 60 + 2 * 4096))
((headroom >= 20000)) || headroom=20000
rai_kbit=$((40 * rate / 40)) rhai_kbit=$((200 * rate / 40))
read -r -a dcqcn <<<"${INCAST_DCQCN:-dcqcn.rai=${rai_kbit}kbit dcqcn.rhai=${rhai_kbit}kbit dcqcn.rate_timer=1ms dcqcn.alpha_timer=1ms dcqcn.cnp_interval=1ms}"

switch_args() { # MODE
	local ports=() i
	for i in "${!names[@]}"; do ports+=(--port "sw-${names[$i]}"); done
	printf '%s\n' "${ports[@]}" --rate "${rate}mbit" --occupancy-after 2s
	case $1 in
	none) printf '%s\n' --ecn off --pfc off --buffer 300000 --buffer-charge egress ;;
	*) printf '%s\n' --ecn kmin=5000,kmax=20000,pmax=0.01 --pfc "xoff=150000,xon=$((150000 - headroom)),headroom=$headroom" --buffer 300000 --buffer-charge egress ;;
	esac
}

cc_of() { [ "${1%%+*}" = none ] && echo none || echo "${1%%+*}"; }

# run_point MODE SCHEME: one incast; appends to $work/rows.csv.
run_point() {
	local mode=$1 sch=$2 cc i sargs=() dargs=() pfc=off
	cc=$(cc_of "$mode")
	[[ $mode == *+pfc ]] && pfc=on
	mapfile -t sargs < <(switch_args "$mode")
	ip netns exec "$P-sw" "$work/softnic" switch "${sargs[@]}" --socket "$work/sw.sock" >"$work/switch.log" 2>&1 &
	pids+=($!)
	dargs=(--scheme "$sch" --link-rate "${rate}mbit" --cc "$cc" --metrics "")
	[ "$cc" = dcqcn ] && for kv in "${dcqcn[@]}"; do dargs+=(--cc-param "$kv"); done
	for i in "${!names[@]}"; do
		rm -f "$work/${names[$i]}.sock"
		ip netns exec "${nss[$i]}" "$work/softnic" run --iface "${ifs[$i]}" --ip "${ips[$i]}" --socket "$work/${names[$i]}.sock" \
			"${dargs[@]}" >"$work/${names[$i]}.log" 2>&1 &
		pids+=($!)
	done
	for _ in $(seq 200); do
		local ok=1
		[ -S "$work/sw.sock" ] || ok=0
		for i in "${!names[@]}"; do [ -S "$work/${names[$i]}.sock" ] || ok=0; done
		[ $ok = 1 ] && break
		sleep 0.05
	done
	if [ $ok != 1 ]; then
		cat "$work/switch.log" "$work"/*.log >&2
		return 1
	fi
	local cpids=()
	for ((i = 0; i < last; i++)); do
		ip netns exec "${nss[$last]}" timeout -k 5 $((3 * secs + 30)) "$work/softnic-bench" write_bw -p $((18515 + i)) -D "$secs" --report_gbits \
			--socket "$work/${names[$last]}.sock" >"$work/server$i.out" 2>&1 &
		pids+=($!)
	done
	sleep 0.5
	for ((i = 0; i < last; i++)); do
		rm -f "$work/client$i.csv"
		ip netns exec "${nss[$i]}" timeout -k 5 $((3 * secs + 30)) "$work/softnic-bench" write_bw -p $((18515 + i)) -D "$secs" --report_gbits \
			--csv "$work/client$i.csv" --socket "$work/${names[$i]}.sock" "$dstip" >"$work/client$i.out" 2>&1 &
		cpids+=($!)
	done
	local rc=0 st=()
	for p in "${cpids[@]}"; do
		# write_bw -D stops posting after the duration and waits for the
		# WRITEs in flight: go-back-N at 1% of the line takes tens of
		# seconds more to drain its 128; a client still running at
		# three times the duration is "timeout".
		local prc=0
		wait "$p" || prc=$?
		case $prc in
		0) st+=(ok) ;;
		124 | 137) st+=(timeout) rc=1 ;;
		*) st+=(failed) rc=1 ;;
		esac
	done
	"$work/softnic" stats --socket "$work/sw.sock" >"$work/sw.stats" 2>/dev/null || : >"$work/sw.stats"
	"$work/softnic" stats --socket "$work/${names[$last]}.sock" >"$work/dst.stats" 2>/dev/null || : >"$work/dst.stats"
	stop_all
	if [ $rc != 0 ]; then
		say "$mode $sch: a client failed:"
		grep -h . "$work"/client*.out | tail -5 >&2
	fi
	local c drops pauses marks qp99 cnps gbps
	c() { awk -v n="$1" '$1 == n { print $2; exit }' "$2"; }
	drops=$(c dropped "$work/sw.stats")
	pauses=$(c pauses_sent "$work/sw.stats")
	marks=$(c ecn_marked "$work/sw.stats")
	qp99=$(c "port${last}_queue_p99_bytes" "$work/sw.stats")
	cnps=$(c np_cnp_sent "$work/dst.stats")
	for ((i = 0; i < last; i++)); do
		gbps=$(awk -F, 'NR == 1 { for (k = 1; k <= NF; k++) if ($k == "bw_avg") c = k; next } { v = $c } END { print v }' "$work/client$i.csv" 2>/dev/null || true)
		echo "testbed,$hosts,$sch,$cc,$pfc,${names[$i]},${gbps:-0},${drops:-0},${pauses:-0},${cnps:-0},${marks:-0},${qp99:-0},${st[$i]}" >>"$csv"
		say "$mode $sch ${names[$i]}: ${gbps:-?} Gb/s (drops ${drops:-?} pauses ${pauses:-?} cnps ${cnps:-?} marks ${marks:-?} q p99 ${qp99:-?} B)"
	done
}

# The testbed's rows go to the CSV as they are measured, so that a later
# failure keeps them.
mkdir -p "$(dirname "$csv")"
echo "network,hosts,scheme,cc,pfc,flow,goodput_gbps,drops,pauses,cnps,ecn_marks,queue_p99_bytes,status" >"$csv"
for mode in $modes; do
	for sch in $schemes; do
		for ((r = 0; r < repeat; r++)); do
			run_point "$mode" "$sch"
		done
	done
done
say "the embedded switch at ${rate} Mbit/s"
"$work/softnic-sweep" incast -hosts "$hosts" -measure 10s -warmup 2s -rate-mbps "$rate" -schemes "${schemes// /,}" -modes "${modes// /,}" \
	$(printf -- '-cc-param %s ' "${dcqcn[@]}") -csv - | tail -n +2 >"$work/embedded.csv.tmp"
grep '^embedded,' "$work/embedded.csv.tmp" >>"$csv"
grep -v '^embedded,' "$work/embedded.csv.tmp" >&2 || true
say "wrote $csv"
