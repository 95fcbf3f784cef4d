# shellcheck shell=bash
# sweep-lib.sh: shared by sweep-loss.sh and sweep-qps.sh, the sweeps on
# the two-host testbed. Sourced, not run. It checks for root, iproute2,
# ping and BPF (testbed-lib.sh's no_testbed), builds softnic, softnic-bench and softnic-sweep (the plots) into
# $work, brings the testbed up
# (testbed.sh), starts and stops a pair of softnic daemons over AF_XDP (a
# fresh pair for every run), runs softnic-bench between them with a time
# limit, reads counters with `softnic stats`, and tears everything down on
# exit (daemons, bench processes, namespaces, $work).
#
# Callers set `me` (their name, for messages) before sourcing, and may set:
#   SOFTNIC_NS_PREFIX         testbed namespaces (default snsweep: snsweep-a,
#                             snsweep-sw, snsweep-b)
#   SOFTNIC_SWEEP_DAEMON_ARGS more `softnic run` flags for both daemons
#   SOFTNIC_HOSTS             hosts the testbed is brought up with (2-26,
#                             default 2: testbed-lib.sh's testbed_hosts);
#                             the sweeps run between hosts a and b
# and may set daemon_args_a / daemon_args_b: flags for one host's daemon
# only, after all the others (the last of a repeated flag wins).

# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
tb=scripts/testbed.sh
# The testbed's host count (testbed-lib.sh's testbed_hosts): testbed.sh
# up makes SOFTNIC_HOSTS hosts; this script uses a and b.
SOFTNIC_HOSTS=$(testbed_hosts) || exit 2
export SOFTNIC_HOSTS
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-snsweep}
nsA=${SOFTNIC_NS_PREFIX}-a
nsB=${SOFTNIC_NS_PREFIX}-b
nsSW=${SOFTNIC_NS_PREFIX}-sw
work=
daemon_pids=()
bench_pids=()

say() { echo "${me:-sweep}: $*" >&2; }

sweep_cleanup() {
	local p
	for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	stop_daemons
	if [ -n "$work" ]; then
		bash "$tb" down >/dev/null 2>&1 || true
		rm -rf "$work"
	fi
}

# sweep_setup: temp dir, cleanup traps, the binaries.
sweep_setup() {
	work=$(mktemp -d /tmp/softnic-sweep.XXXXXX)
	trap sweep_cleanup EXIT
	trap 'exit 130' INT TERM
	say "building softnic, softnic-bench and softnic-sweep"
	go build -o "$work/softnic" ./cmd/softnic
	go build -o "$work/softnic-bench" ./cmd/softnic-bench
	go build -o "$work/softnic-sweep" ./cmd/softnic-sweep
}

# testbed_up: namespaces, next hops resolved.
testbed_up() {
	bash "$tb" up >/dev/null &&
		ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null &&
		ip netns exec "$nsB" ping -c1 -W2 198.18.0.1 >/dev/null
}

# set_loss PCT: loss on the switch, both directions.
set_loss() {
	bash "$tb" loss "$1" >"$work/loss.out" || { cat "$work/loss.out" >&2; return 1; }
}

# dropped_on_switch: packets the loss rule dropped so far (0 without one).
dropped_on_switch() {
	local n
	n=$(ip netns exec "$nsSW" nft list table inet softnic_loss 2>/dev/null | sed -n "s/.*counter packets \([0-9]*\).*/\1/p;T;q" || true)
	echo "${n:-0}"
}

# start_daemons ARGS...: a softnic daemon on each host with ARGS (and
# $SOFTNIC_SWEEP_DAEMON_ARGS) after the fixed ones; waits for both control
# sockets. On failure prints the logs and returns 1.
start_daemons() {
	local spec ns ifc ip sock host more ok
	rm -f "$work/a.sock" "$work/b.sock"
	for spec in "$nsA a-sw 198.18.0.1 $work/a.sock a" "$nsB b-sw 198.18.1.1 $work/b.sock b"; do
		read -r ns ifc ip sock host <<<"$spec"
		more=${daemon_args_b:-}
		[ "$host" = b ] || more=${daemon_args_a:-}
		# shellcheck disable=SC2086 # SOFTNIC_SWEEP_DAEMON_ARGS and more are flag lists
		ip netns exec "$ns" "$work/softnic" run --iface "$ifc" --ip "$ip" --socket "$sock" --metrics "" \
			"$@" ${SOFTNIC_SWEEP_DAEMON_ARGS:-} $more >"$work/$ns.log" 2>&1 &
		daemon_pids+=($!)
	done
	for _ in $(seq 200); do
		ok=1
		[ -S "$work/a.sock" ] && [ -S "$work/b.sock" ] || ok=0
		[ $ok = 1 ] && return 0
		for p in "${daemon_pids[@]}"; do kill -0 "$p" 2>/dev/null || ok=dead; done
		[ $ok = dead ] && break
		sleep 0.05
	done
	cat "$work/$nsA.log" "$work/$nsB.log" >&2
	stop_daemons
	return 1
}

# daemons_alive: both daemons still run.
daemons_alive() {
	local p
	[ ${#daemon_pids[@]} -eq 2 ] || return 1
	for p in "${daemon_pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
}

# stop_daemons: SIGTERM, then SIGKILL after 5 s; waits, so that the next
# pair can attach XDP to the same interfaces.
stop_daemons() {
	stop_pids "${daemon_pids[@]}"
	daemon_pids=()
}

# stats SOCK FILE: the daemon's counters into FILE (empty on failure).
stats() {
	"$work/softnic" stats --socket "$1" >"$2" 2>/dev/null || : >"$2"
}

# counter FILE NAME: one counter's value (0 when absent).
counter() {
	local v
	v=$(awk -v n="$2" '$1 == n { print $2; exit }' "$1")
	echo "${v:-0}"
}

# delta BEFORE AFTER NAME: how much a counter grew.
delta() {
	echo $(($(counter "$2" "$3") - $(counter "$1" "$3")))
}

# bench LIMIT ARGS...: softnic-bench server on B and client on A with the
# same ARGS (but --csv, which only the client gets: server_args), each
# killed after LIMIT seconds. Client output in
# $work/client.out, server's in $work/server.out. Returns the client's
# status, else the server's (124: a time limit hit).
bench() {
	local limit=$1 server rc sargs
	shift
	server_args "$@"
	ip netns exec "$nsB" timeout -k 5 "$limit" "$work/softnic-bench" "${sargs[@]}" --socket "$work/b.sock" >"$work/server.out" 2>&1 &
	server=$!
	bench_pids=("$server")
	sleep 0.3
	rc=0
	ip netns exec "$nsA" timeout -k 5 "$limit" "$work/softnic-bench" "$@" --socket "$work/a.sock" 198.18.1.1 >"$work/client.out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	else
		wait "$server" || rc=$?
	fi
	bench_pids=()
	return $rc
}

# retryable RC STATUS: whether a failed run is worth running again: it
# failed on its own (softnic-bench exit status 1, an error completion such
# as RETRY_EXC_ERR, or a daemon died), not by a time limit (124, 137) or a
# refused command line (2).
retryable() {
	[ "$2" != ok ] && [ "$1" != 124 ] && [ "$1" != 137 ] && [ "$1" != 2 ]
}

# bench_error: one line saying why the last bench failed.
bench_error() {
	local line
	line=$(grep -hE 'softnic-bench:|error|Error|panic' "$work/client.out" "$work/server.out" 2>/dev/null | head -1 || true)
	[ -n "$line" ] || line=$(tail -n1 "$work/client.out" 2>/dev/null)
	echo "$line" | tr ',"' ';_' | cut -c1-200
}

# csv_field FILE NAME: NAME's value in the last row of a softnic-bench CSV.
csv_field() {
	awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i; next } { v = $c } END { print v }' "$1"
}

# now: seconds since the epoch, with a fraction.
now() { date +%s.%N; }

# since T0: seconds since T0, 2 decimals.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
