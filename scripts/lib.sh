# lib.sh: shared by the scripts that run a daemon per host on the testbed
# (demo.sh, figures.sh, limits-demo.sh, soak.sh, transfer.sh, ...).
# Sourced, not run: builds softnic and softnic-bench into $work, brings
# up the testbed, starts one softnic daemon per host over AF_XDP, and
# tears it all down on exit. A caller can ask no_testbed (testbed-lib.sh)
# first whether the testbed can run here.
# Callers set: scheme, mtu (path MTU the daemons must carry). Daemons get
# SOFTNIC_DAEMON_FLAGS (word-split), SOFTNIC_BUSY_POLL and, when set,
# SOFTNIC_NETEM as `--netem SPEC` (impairment inside the daemon, e.g.
# "loss 1% delay 100us 20us reorder 2%"). SOFTNIC_HOSTS (default 2) is
# how many hosts the testbed has (testbed_hosts); the daemons run on a
# and b.

# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh
# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
tb=scripts/testbed.sh
# The testbed's host count (testbed-lib.sh's testbed_hosts): testbed.sh
# up makes SOFTNIC_HOSTS hosts; this script uses a and b.
SOFTNIC_HOSTS=$(testbed_hosts) || exit 2
export SOFTNIC_HOSTS
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-sndemo}
nsA=${SOFTNIC_NS_PREFIX}-a
nsB=${SOFTNIC_NS_PREFIX}-b
work=$(mktemp -d /tmp/softnic.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	bash "$tb" down >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

build() {
	echo "building softnic and softnic-bench" >&2
	go build -o "$work/softnic" ./cmd/softnic
	go build -o "$work/softnic-bench" ./cmd/softnic-bench
}

# daemon_mtu: the daemons' --mtu for the path MTU $mtu: 1024, 2048, or
# 4096 (AF_XDP multi-buffer; the testbed's veths then carry 4500 bytes,
# see up).
daemon_mtu() {
	if [ "$mtu" -gt 2048 ]; then
		echo 4096
	elif [ "$mtu" -gt 1024 ]; then
		echo 2048
	else
		echo 1024
	fi
}

# start_daemon NS IFACE IP SOCKET: a daemon in the namespace, waiting for
# its control socket; on failure prints its log and returns 1.
start_daemon() {
	ip netns exec "$1" "$work/softnic" run --iface "$2" --ip "$3" --socket "$4" --scheme "$scheme" \
		--mtu "$(daemon_mtu)" --metrics "${SOFTNIC_METRICS:-}" \
		${SOFTNIC_BUSY_POLL:+--busy-poll "$SOFTNIC_BUSY_POLL"} ${SOFTNIC_NETEM:+--netem "$SOFTNIC_NETEM"} \
		${SOFTNIC_DAEMON_FLAGS:-} >"$work/$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		[ -S "$4" ] && return 0
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.05
	done
	cat "$work/$1.log" >&2
	return 1
}

# up: testbed, neighbours resolved, a daemon on each host.
up() {
	# Path MTU 4096 needs veths that carry a 4.2 KB frame; a
	# SOFTNIC_MTU given by the caller wins.
	if [ "$(daemon_mtu)" = 4096 ]; then
		SOFTNIC_MTU=${SOFTNIC_MTU:-4500} bash "$tb" up >/dev/null
	else
		bash "$tb" up >/dev/null
	fi
	ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null
	start_daemon "$nsA" a-sw 198.18.0.1 "$work/a.sock" && start_daemon "$nsB" b-sw 198.18.1.1 "$work/b.sock"
}

# bench ARGS...: softnic-bench server on B, client on A, same arguments,
# except that only the client writes CSV (server_args), so a row is
# written once.
bench() {
	local sargs
	server_args "$@"
	ip netns exec "$nsB" "$work/softnic-bench" "${sargs[@]}" --socket "$work/b.sock" >"$work/server.out" 2>&1 &
	local server=$!
	sleep 0.3
	ip netns exec "$nsA" "$work/softnic-bench" "$@" --socket "$work/a.sock" 198.18.1.1
	wait "$server" || { cat "$work/server.out" >&2; return 1; }
}
