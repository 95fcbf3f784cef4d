#!/usr/bin/env bash
# transfer.sh: a byte-exact transfer per loss-recovery scheme through an
# impaired path, on the two-host testbed. For each scheme it runs the
# end-to-end client pair (tests/e2eclient: every opcode, every completion
# checked for SUCCESS, every byte of every destination compared, atomics'
# old values and targets checked so that one executed twice is caught)
# between daemons whose receive paths impair what they receive with
# softnic's netem stage (`softnic run --netem`), and prints per scheme the
# bytes verified, the steps, the time and the impairment counters of both
# daemons (what was lost, reordered, held, duplicated).
#
# Usage (as root): scripts/transfer.sh [BYTES]   (default 1073741824)
#
# Environment:
#   SOFTNIC_NETEM     the impairment each daemon applies to what it
#                     receives, so both directions get it (default
#                     "loss 5% delay 50us reorder 2% duplicate 0.1%")
#   SOFTNIC_SCHEMES   schemes to run (default "gbn igbn irn melo fasr")
#   SOFTNIC_SIZE      message size of the data opcodes (default 4194304)
#   SOFTNIC_OPS       opcodes (default: all seven e2eclient knows)
#
# Exit status: 0 when every scheme passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-1073741824}
export SOFTNIC_NETEM=${SOFTNIC_NETEM-loss 5% delay 50us reorder 2% duplicate 0.1%}
schemes=${SOFTNIC_SCHEMES:-gbn igbn irn melo fasr}
size=${SOFTNIC_SIZE:-4194304}
ops=${SOFTNIC_OPS:-SEND,SEND_WITH_IMM,RDMA_WRITE,RDMA_WRITE_WITH_IMM,RDMA_READ,ATOMIC_CMP_AND_SWP,ATOMIC_FETCH_AND_ADD}
scheme=gbn
mtu=1024

# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed)
[ -z "$why" ] || { echo "transfer.sh: cannot run here: $why" >&2; exit 1; }

# shellcheck source=scripts/lib.sh
source scripts/lib.sh
build
go build -o "$work/e2eclient" ./tests/e2eclient
up || { echo "transfer.sh: the daemons did not start (log above)" >&2; exit 1; }

# Data opcodes per round: the ops that are not atomics.
data_ops=0
IFS=, read -ra oplist <<<"$ops"
for o in "${oplist[@]}"; do [[ $o == ATOMIC* ]] || data_ops=$((data_ops + 1)); done
rounds=$(((total + data_ops * size - 1) / (data_ops * size)))

# impair_counters SOCKET: the impairment stage's counters, name=value.
impair_counters() {
	"$work/softnic" stats --socket "$1" | awk '/^impair_/ {printf "%s=%s ", $1, $2}'
}

echo "transfer: $rounds rounds of $ops, $size B each, per scheme; each daemon impairs what it receives: $SOFTNIC_NETEM"
port=18900
fail=0
for s in $schemes; do
	port=$((port + 1))
	before_a=$(impair_counters "$work/a.sock") before_b=$(impair_counters "$work/b.sock")
	start=$SECONDS
	common=(--ops "$ops" --sizes "$size" --rounds "$rounds" --scheme "$s" --seed "$port" --timeout 5m)
	ip netns exec "$nsB" "$work/e2eclient" --socket "$work/b.sock" --listen "198.18.1.1:$port" "${common[@]}" >"$work/resp.out" 2>&1 &
	resp=$!
	rc=0
	ip netns exec "$nsA" "$work/e2eclient" --socket "$work/a.sock" --connect "198.18.1.1:$port" --requester "${common[@]}" >"$work/req.out" 2>&1 || rc=$?
	wait "$resp" || rc=$((rc + 100))
	secs=$((SECONDS - start))
	if [ "$rc" = 0 ] && grep -q '^PASS' "$work/req.out" && grep -q '^PASS' "$work/resp.out"; then
		echo "$s: PASS, $(grep '^verified' "$work/req.out"), $(grep '^PASS' "$work/req.out" | cut -d' ' -f2) steps, ${secs} s, 0 failed work requests"
	else
		echo "$s: FAIL (exit $rc)"
		tail -n 3 "$work/req.out" "$work/resp.out" | sed 's/^/    /' || true
		keep=$(mktemp -d /tmp/softnic-transfer-fail.XXXXXX)
		cp "$work/req.out" "$work/resp.out" "$work"/*.log "$keep/" 2>/dev/null || true
		"$work/softnic" stats --socket "$work/a.sock" >"$keep/a.stats" 2>&1 || true
		"$work/softnic" stats --socket "$work/b.sock" >"$keep/b.stats" 2>&1 || true
		echo "    outputs, daemon logs and counters kept in $keep"
		fail=1
	fi
	echo "    host A received: before ${before_a:-none}"
	echo "                     after  $(impair_counters "$work/a.sock")"
	echo "    host B received: before ${before_b:-none}"
	echo "                     after  $(impair_counters "$work/b.sock")"
done
echo " counters of host A's NIC:"
"$work/softnic" stats --socket "$work/a.sock" | grep -E "${SOFTNIC_TRANSFER_COUNTERS:-sent_pkts|rcvd_pkts|retransmitted|rcvd_seq_err|local_ack_timeout|duplicate_request|out_of_sequence}" || true
exit $fail
