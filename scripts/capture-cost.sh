#!/usr/bin/env bash
# capture-cost.sh: what a running capture costs the daemon, on the
# two-host testbed (as root with XDP): softnic-bench write_bw from A to B,
# PAIRS times without and with `softnic capture -w /dev/null` attached to
# B's daemon, alternating (paired runs), and the ratio of each pair's
# bandwidth. docs/capture.md quotes it.
#
# Environment: SOFTNIC_CAPTURE_PAIRS (5), SOFTNIC_CAPTURE_ARGS
# ("-s 65536 -D 3"), SOFTNIC_NS_PREFIX (sncap).
set -euo pipefail
cd "$(dirname "$0")/.."
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-sncap}
scheme=${SOFTNIC_SCHEME:-gbn} mtu=1024
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed)
[ -z "$why" ] || { echo "capture-cost: cannot run here: $why" >&2; exit 1; }
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
pairs=${SOFTNIC_CAPTURE_PAIRS:-5}
read -r -a args <<<"${SOFTNIC_CAPTURE_ARGS:--s 65536 -D 3}"
build
up
echo "pair,without_bw_avg,with_bw_avg,ratio,captured"
for i in $(seq "$pairs"); do
	rm -f "$work/a.csv" "$work/b.csv"
	bench write_bw "${args[@]}" --csv "$work/a.csv" >/dev/null
	ip netns exec "$nsB" "$work/softnic" capture -i "$work/b.sock" -w /dev/null >"$work/cap.out" 2>&1 &
	cap=$!
	sleep 0.3
	bench write_bw "${args[@]}" --csv "$work/b.csv" >/dev/null
	kill -INT "$cap"; wait "$cap" || true
	a=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="bw_avg") c=i} NR>1 && c{v=$c} END{print v}' "$work/a.csv")
	b=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="bw_avg") c=i} NR>1 && c{v=$c} END{print v}' "$work/b.csv")
	n=$(grep -o '^[0-9]* packets captured' "$work/cap.out" | cut -d' ' -f1)
	echo "$i,$a,$b,$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b/a}'),$n"
done
