#!/usr/bin/env bash
# idle-cpu.sh [SECONDS]: the CPU time two idle softnic daemons use on the
# two-host testbed (AF_XDP, no client connected) over SECONDS (default 10),
# read from /proc/PID/stat (utime + stime). Root and XDP needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed)
[ -z "$why" ] || { echo "idle-cpu: cannot run here: $why" >&2; exit 1; }
secs=${1:-10}
scheme=gbn
mtu=1024
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
build
up
sleep 1 # start-up done
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A t0
for p in "${pids[@]}"; do t0[$p]=$(ticks "$p"); done
sleep "$secs"
for p in "${pids[@]}"; do
	t=$(($(ticks "$p") - ${t0[$p]}))
	awk -v t="$t" -v hz="$hz" -v s="$secs" -v p="$p" 'BEGIN { printf "daemon pid %d: %.3f s of CPU in %d s idle (%.2f%%)\n", p, t / hz, s, 100 * t / hz / s }'
done
