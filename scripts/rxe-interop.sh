#!/usr/bin/env bash
# rxe-interop.sh: softnic against Linux's software RoCE NIC (rdma_rxe), the
# interop matrix (docs/interop.md). Host A of the namespace testbed runs a
# softnic daemon; host B's place behind the switch is taken by a QEMU guest
# running rxe (scripts/rxe-vm.sh): B's veth is bridged to the guest's tap
# and the guest has B's address, 198.18.1.1. Debian's unmodified programs
# run on both sides: over the drop-in libibverbs on A, over rdma-core and
# librxe in the guest.
#
# The matrix: ibv_rc_pingpong, ib_write_bw, ib_read_bw, ib_send_bw,
# ib_write_lat, ib_atomic_bw, and beside RC's the UD and SRQ programs
# ibv_ud_pingpong, ib_send_bw -c UD (ib_send_bw_UD) and ibv_srq_pingpong,
# each with softnic as the client (rxe the server) and rxe as the client,
# lossless and with 1% loss on the switch (both directions, testbed.sh
# loss); the lossy runs twice: with softnic's daemon unbounded
# (--max-unacked-psns 0) and bounded like rxe (--max-unacked-psns 128,
# RXE_MAX_UNACKED_PSNS; not the UD programs, which have no PSN window).
# UD resends nothing (docs/ud.md): at loss ib_send_bw -c UD runs for a
# time (-D 3) instead of a count, and ibv_ud_pingpong, which waits for
# every datagram, gets 60 s and is reported as stalled if a datagram of
# it was lost. Each run's row has the
# exit status of both sides, the client's figure, and the counters that
# show retransmission on each side: softnic's `softnic stats`
# (retransmitted_pkts, completer_retry_err, duplicate_request) and rxe's
# hw_counters (sent_pkts, completer_retry_err, duplicate_request; rxe
# counts no retransmitted packets, so its sent_pkts beside the lossless
# run's is the volume). The table is markdown on stdout; progress goes to
# stderr.
#
# Usage (as root): scripts/rxe-interop.sh
# Environment:
#   SOFTNIC_RXE_LOGS      where the guest's console log and the daemon's log
#                         are left (default /tmp/softnic-rxe-logs)
#   SOFTNIC_CACHE         rxe-vm.sh's cache (fetched and imaged if empty)
#   SOFTNIC_RXE_PROGRAMS  the programs to run (default: all nine; ib_send_bw_UD
#                         is ib_send_bw -c UD)
#   SOFTNIC_RXE_LOSS      the lossy runs' loss in % (default 1)
#   SOFTNIC_RXE_CM_PROGRAMS  the rdma_cm programs to run (default: rping
#                         ib_write_bw_R ib_read_bw_R rdma_server; udaddy,
#                         rdma_cm's UD over SIDR, is known too), connected
#                         through softnic's CM and Linux's (docs/rdmacm.md),
#                         each way, lossless and at the lossy runs' loss,
#                         softnic's daemon unbounded; the guest's eth0 at MTU
#                         1500 meanwhile (Linux's rdma_cm asks for its
#                         netdev's MTU, 2048 at 3000, and softnic's port
#                         takes 1024). SOFTNIC_RXE_PROGRAMS="" runs only these
#   SOFTNIC_RXE_OUTS      N: ib_read_bw and ib_atomic_bw get `-o N` (perftest's
#                         outstanding READs/atomics) on both sides. perftest
#                         sets a QP's max_rd_atomic to the other side's
#                         out_reads, which is its device's max_qp_rd_atom
#                         (rxe 128, softnic 16); a client on softnic facing
#                         an rxe server asks for 128 and softnic refuses
#                         it. Default: unset (perftest's own default)
set -euo pipefail
cd "$(dirname "$0")/.."

vm=scripts/rxe-vm.sh
tb=scripts/testbed.sh
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-snrxe}
nsA=$SOFTNIC_NS_PREFIX-a
nsB=$SOFTNIC_NS_PREFIX-b
nsSW=$SOFTNIC_NS_PREFIX-sw
ipA=198.18.0.1
ipB=198.18.1.1
loss=${SOFTNIC_RXE_LOSS:-1}
cache=${SOFTNIC_CACHE:-/var/cache/softnic-rxe}
read -r -a programs <<<"${SOFTNIC_RXE_PROGRAMS-ibv_rc_pingpong ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_atomic_bw ibv_ud_pingpong ib_send_bw_UD ibv_srq_pingpong}"
read -r -a cm_programs <<<"${SOFTNIC_RXE_CM_PROGRAMS-rping ib_write_bw_R ib_read_bw_R rdma_server}"

die() {
	echo "rxe-interop: $*" >&2
	exit 1
}
log() { echo "rxe-interop: $*" >&2; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
for c in rping:rdmacm-utils stdbuf:coreutils qemu-system-x86_64:qemu-system-x86 ip:iproute2 nft:nftables ss:iproute2 gcc:gcc go:golang ibv_rc_pingpong:ibverbs-utils ib_write_bw:perftest; do
	command -v "${c%%:*}" >/dev/null || die "needs ${c%%:*} (apt-get install -y --no-install-recommends ${c#*:})"
done

work=$(mktemp -d /tmp/softnic-rxe.XXXXXX)
qemu=
daemon=
logs=${SOFTNIC_RXE_LOGS:-/tmp/softnic-rxe-logs}
cleanup() {
	[[ -n $daemon ]] && kill "$daemon" 2>/dev/null
	[[ -n $qemu ]] && bash $vm stop "$work/vm" >/dev/null 2>&1
	# The guest's console and the daemon's log outlive the run.
	mkdir -p "$logs"
	cp "$work/vm/console.log" "$logs/console.log" 2>/dev/null
	cat "$work"/daemon*.log >"$logs/daemon.log" 2>/dev/null
	wait 2>/dev/null || true
	bash $tb down >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [[ ! -f $cache/rxe.cpio.gz ]]; then
	bash $vm fetch >&2
	bash $vm image >&2
fi

log "building softnic and the drop-in libibverbs"
mkdir -p "$work/lib"
go build -o "$work/softnic" ./cmd/softnic
CGO_ENABLED=1 go build -tags ibverbs -buildmode=c-shared \
	-ldflags "-extldflags '-Wl,--version-script=$PWD/ibverbs/libibverbs.map'" \
	-o "$work/lib/libibverbs.so.1" ./ibverbs/
# The drop-in librdmacm over it (make rdmacm), for the rdma_cm rows.
${CC:-cc} -shared -fPIC -O2 -fstack-protector-strong -Wall -Iibverbs -Wl,-soname,librdmacm.so.1 \
	-Wl,--version-script="$PWD/rdmacm/librdmacm.map" -Wl,--no-undefined \
	-o "$work/lib/librdmacm.so.1" rdmacm/cma.c rdmacm/stubs_gen.c -L"$work/lib" -l:libibverbs.so.1
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=" (with uncommitted changes)"

bash $tb up >&2
bash $vm net "$nsB" b-sw rxetap
bash $vm offloads "$nsA" a-sw
bash $vm offloads "$nsSW" sw-a sw-b
ip netns exec "$nsB" bash $vm run "$work/vm" >"$work/qemu.out" 2>&1 &
qemu=$!
log "booting the guest"
began=$SECONDS
ready=$(bash $vm wait "$work/vm" 600) || { cat "$work/qemu.out" >&2; die "the guest did not come up"; }
log "guest up in $((SECONDS - began)) s: $ready"
guest() { bash $vm guest "$work/vm" "$@"; }

start_daemon() {
	[[ -n $daemon ]] && { kill "$daemon"; wait "$daemon" 2>/dev/null || true; }
	rm -f "$work/a.sock"
	ip netns exec "$nsA" "$work/softnic" run --iface a-sw --ip $ipA --socket "$work/a.sock" --metrics "" \
		--max-unacked-psns "$1" >"$work/daemon-$1.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do
		[[ -S $work/a.sock ]] && return 0
		sleep 0.1
	done
	cat "$work/daemon-$1.log" >&2
	die "the softnic daemon did not start"
}

# args PROGRAM [LOSS]: the arguments of both sides (64 KiB messages at MTU
# 1024 for the bandwidth tests, 8 B for latency, as tests/ibverbs_test.go;
# the UD programs' datagrams 1024 bytes, softnic's port MTU, and by time
# at loss, as tests/ibverbs_ud_test.go).
args() {
	case $1 in
	ibv_rc_pingpong) echo "-n 1000 -c" ;;
	ibv_ud_pingpong) echo "-s 1024 -n 1000 -c" ;;
	ibv_srq_pingpong) echo "-n 500 -c" ;;
	ib_send_bw_UD) [[ ${2:-0} == 0 ]] && echo "-c UD -s 1024 -n 1000 -F" || echo "-c UD -s 1024 -D 3 -F" ;;
	ib_write_bw) echo "-s 65536 -m 1024 -n 500 -F" ;;
	ib_read_bw) echo "-s 65536 -m 1024 -n 500 -F${SOFTNIC_RXE_OUTS:+ -o $SOFTNIC_RXE_OUTS}" ;;
	ib_send_bw) echo "-s 65536 -m 1024 -n 500 -F" ;;
	ib_write_lat) echo "-s 8 -m 1024 -n 1000 -F" ;;
	ib_atomic_bw) echo "-m 1024 -n 1000 -F${SOFTNIC_RXE_OUTS:+ -o $SOFTNIC_RXE_OUTS}" ;;
	esac
}
# gidarg PROGRAM IDX: the GID index option (ibverbs-utils' -g, perftest -x).
gidarg() { [[ $1 == ibv_* ]] && echo "-g $2" || echo "-x $2"; }
# bin PROGRAM: the program's executable (ib_send_bw_UD: ib_send_bw).
bin() { echo "${1%_UD}"; }
# limit PROGRAM LOSS: how long each side may run. ibv_ud_pingpong waits
# for every datagram, and at loss for ever for a lost one.
limit() { [[ $1 == ibv_ud_pingpong && $2 != 0 ]] && echo 60 || echo 240; }

# figure PROGRAM OUTPUT: the client's result.
figure() {
	case $1 in
	ibv_rc_pingpong | ibv_ud_pingpong | ibv_srq_pingpong) grep -o '[0-9.]* Mbit/sec' <<<"$2" | head -1 ;;
	ib_write_lat) awk '$1 == "8" && NF >= 6 {printf "t_typical %s µs, t_avg %s µs", $5, $6}' <<<"$2" ;;
	*) awk '$1 ~ /^[0-9]+$/ && NF >= 4 && $2 ~ /^[0-9]+$/ {printf "%s MB/s", $4}' <<<"$2" ;;
	esac
}

# err OUTPUT: the first line that reads like an error, for the table.
err() {
	grep -m1 -iE "error|fail|couldn't|unable|timeout|invalid|@@RXE-TIMEOUT" <<<"$1" | tr -d '|' | cut -c1-100 || true
}

snic_counters() { "$work/softnic" stats --socket "$work/a.sock"; }
# cval TEXT NAME: a counter from "name value" lines.
cval() { awk -v n="$2" '$1 == n {print $2; exit}' <<<"$1"; }

port=18800
declare -A lossless_sent=()
rows=()
# run CONFIG LOSS PROGRAM DIRECTION: one cell of the matrix. DIRECTION
# softnic: softnic's side is the client (rxe serves); rxe: the reverse.
run() {
	local config=$1 pct=$2 prog=$3 dir=$4 a srv_out cli_out srv_rc cli_rc s0 s1 r0 r1 exe secs
	port=$((port + 1))
	read -r -a a <<<"$(args "$prog" "$pct")"
	exe=$(bin "$prog")
	secs=$(limit "$prog" "$pct")
	s0=$(snic_counters)
	r0=$(guest counters)
	log "$config loss $pct%: $prog, $dir client"
	if [[ $dir == softnic ]]; then
		guest "bg srv timeout $secs $exe ${a[*]} $(gidarg "$prog" 1) -p $port; listening $port 60" >/dev/null ||
			log "the guest's server did not listen"
		set +e
		cli_out=$(ip netns exec "$nsA" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/a.sock" \
			timeout "$secs" "$exe" "${a[@]}" $(gidarg "$prog" 0) -p $port $ipB 2>&1)
		cli_rc=$?
		# The server is done when the client is, or stuck: a minute.
		srv_out=$(SOFTNIC_RXE_TIMEOUT=$((secs + 120)) guest "fg srv $((secs > 60 ? 60 : secs))")
		srv_rc=$?
		set -e
	else
		ip netns exec "$nsA" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/a.sock" \
			timeout "$secs" "$exe" "${a[@]}" $(gidarg "$prog" 0) -p $port >"$work/srv.out" 2>&1 &
		local srv=$!
		for _ in $(seq 200); do
			ip netns exec "$nsA" ss -Hltn "sport = :$port" | grep -q LISTEN && break
			sleep 0.05
		done
		set +e
		cli_out=$(SOFTNIC_RXE_TIMEOUT=$((secs + 120)) guest "timeout $secs $exe ${a[*]} $(gidarg "$prog" 1) -p $port $ipA")
		cli_rc=$?
		wait $srv
		srv_rc=$?
		set -e
		srv_out=$(cat "$work/srv.out")
	fi
	s1=$(snic_counters)
	r1=$(guest counters)
	local d_snic_retx d_snic_retry d_snic_dup d_rxe_sent d_rxe_retry d_rxe_dup
	d_snic_retx=$(($(cval "$s1" retransmitted_pkts) - $(cval "$s0" retransmitted_pkts)))
	d_snic_retry=$(($(cval "$s1" completer_retry_err) - $(cval "$s0" completer_retry_err)))
	d_snic_dup=$(($(cval "$s1" duplicate_request) - $(cval "$s0" duplicate_request)))
	d_rxe_sent=$(($(cval "$r1" sent_pkts) - $(cval "$r0" sent_pkts)))
	d_rxe_retry=$(($(cval "$r1" completer_retry_err) - $(cval "$r0" completer_retry_err)))
	d_rxe_dup=$(($(cval "$r1" duplicate_request) - $(cval "$r0" duplicate_request)))
	local result
	if ((cli_rc == 0 && srv_rc == 0)); then
		result="ok, $(figure "$prog" "$cli_out")"
		if [[ $prog == ibv_*_pingpong ]] && grep -q "invalid data" <<<"$cli_out$srv_out"; then
			result="FAILED: invalid data (-c)"
		fi
	elif [[ $prog == ibv_ud_pingpong && $pct != 0 ]] && ((cli_rc == 124 || srv_rc == 124)); then
		result="stalled (expected): not done in $secs s, waiting for a lost datagram (UD resends nothing); client exit $cli_rc, server exit $srv_rc"
	else
		local e
		e=$(err "$cli_out")
		[[ -n $e ]] || e=$(err "$srv_out")
		result="FAILED: client exit $cli_rc, server exit $srv_rc${e:+: $e}"
		log "$result"
		log "client output: $(tail -5 <<<"$cli_out")"
		log "server output: $(tail -5 <<<"$srv_out")"
		log "daemon log: $(tail -q -n 3 "$work"/daemon-*.log)"
		log "guest console: $(tail -n 5 "$work/vm/console.log")"
	fi
	local rxe_sent=$d_rxe_sent key="$prog $dir"
	if [[ $pct == 0 ]]; then
		lossless_sent[$key]=$d_rxe_sent
	elif [[ -n ${lossless_sent[$key]:-} ]]; then
		rxe_sent+=" (lossless ${lossless_sent[$key]})"
	fi
	local client=softnic
	[[ $dir == rxe ]] && client=rxe
	local label=$prog
	if [[ $prog == ib_send_bw_UD ]]; then
		label="ib_send_bw -c UD"
		[[ $pct == 0 ]] || label+=" -D 3"
	fi
	rows+=("| $config | $pct% | $label | $client | $result | $d_snic_retx | $d_snic_retry | $d_snic_dup | $rxe_sent | $d_rxe_retry | $d_rxe_dup |")
	log "${rows[-1]}"
}

matrix() {
	local config=$1 pct=$2 p d
	bash $tb loss "$pct" >&2
	for p in "${programs[@]}"; do
		# UD has no PSN window for --max-unacked-psns to bound.
		[[ $config == max-unacked* && ($p == ibv_ud_pingpong || $p == ib_send_bw_UD) ]] && continue
		for d in softnic rxe; do run "$config" "$pct" "$p" "$d"; done
	done
	bash $tb loss 0 >&2
}

# The rdma_cm rows. cm_args PROGRAM SERVER_IP: the server's arguments;
# the client's are the same (rping's with -c for -s) and the server's
# address. cm_ok PROGRAM OUTPUT: the output shows the program did its
# work (rping: 1000 verified iterations; perftest: its table and no
# failure; rdma_client/rdma_server: their end line).
cm_args() {
	case $1 in
	rping) echo "rping -s -d -a $2 -C 1000 -V -v" ;;
	ib_write_bw_R) echo "ib_write_bw -R -F -s 65536 -n 500" ;;
	ib_read_bw_R) echo "ib_read_bw -R -F -s 65536 -n 500" ;;
	rdma_server) echo "rdma_server" ;;
	udaddy) echo "udaddy" ;;
	esac
}
cm_client() {
	case $1 in
	rping) echo "rping -c -a $2 -C 1000 -V -v" ;;
	ib_write_bw_R | ib_read_bw_R) echo "$(cm_args "$1") $2" ;;
	rdma_server) echo "rdma_client -s $2" ;;
	udaddy) echo "udaddy -s $2" ;;
	esac
}
cm_ok() {
	case $1 in
	rping) [[ $(grep -c "ping data: " <<<"$2") == 1000 ]] && ! grep -qE "data mismatch|error" <<<"$2" ;;
	ib_write_bw_R | ib_read_bw_R) grep -q "#bytes" <<<"$2" && ! grep -q "Failed" <<<"$2" ;;
	rdma_server) grep -qE "rdma_(client|server): end 0" <<<"$2" ;;
	udaddy) grep -q "^test complete" <<<"$2" && grep -q "^return status 0" <<<"$2" ;;
	esac
}
cm_figure() {
	case $1 in
	rping) echo "$(grep -c "ping data: " <<<"$2") iterations verified" ;;
	ib_write_bw_R | ib_read_bw_R) figure ib_write_bw "$2" ;;
	rdma_server) grep -o "rdma_client: end -\?[0-9]*" <<<"$2" ;;
	udaddy) grep -m1 "data transfers complete" <<<"$2" ;;
	esac
}
# run_cm LOSS PROGRAM DIRECTION: one rdma_cm cell.
run_cm() {
	local pct=$1 prog=$2 dir=$3 srv_out cli_out srv_rc cli_rc s0 s1 r0 r1 began
	port=$((port + 1))
	# udaddy has no port option (its -p is the port space): 7174.
	local lport=$port popt="-p $port"
	[[ $prog == udaddy ]] && lport=7174 popt=
	s0=$(snic_counters)
	r0=$(guest counters)
	log "rdma_cm loss $pct%: $prog, $dir client"
	began=$SECONDS
	local lst="rdma res show cm_id | grep -q \"state LISTEN .*:$lport \""
	if [[ $dir == softnic ]]; then
		guest "bg srv timeout 300 $(cm_args "$prog" $ipB) $popt; i=0; while [ \$i -lt 300 ] && ! $lst; do i=\$((i+1)); sleep 0.1; done; $lst" >/dev/null ||
			log "the guest's server did not listen"
		set +e
		cli_out=$(ip netns exec "$nsA" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/a.sock" \
			timeout 300 stdbuf -o0 $(cm_client "$prog" $ipB) $popt 2>&1)
		cli_rc=$?
		srv_out=$(SOFTNIC_RXE_TIMEOUT=120 guest "fg srv 60")
		srv_rc=$?
		set -e
	else
		ip netns exec "$nsA" env LD_LIBRARY_PATH="$work/lib" SOFTNIC_SOCKET="$work/a.sock" \
			timeout 300 stdbuf -o0 $(cm_args "$prog" $ipA) $popt >"$work/srv.out" 2>&1 &
		local srv=$!
		sleep 1
		set +e
		cli_out=$(guest "timeout 300 $(cm_client "$prog" $ipA) $popt")
		cli_rc=$?
		wait $srv
		srv_rc=$?
		set -e
		srv_out=$(cat "$work/srv.out")
	fi
	local secs=$((SECONDS - began))
	s1=$(snic_counters)
	r1=$(guest counters)
	local result
	if ((cli_rc == 0 && srv_rc == 0)) && cm_ok "$prog" "$cli_out" && cm_ok "$prog" "$srv_out"; then
		result="ok, $(cm_figure "$prog" "$cli_out"), ${secs} s"
	else
		local e
		e=$(err "$cli_out")
		[[ -n $e ]] || e=$(err "$srv_out")
		result="FAILED: client exit $cli_rc, server exit $srv_rc${e:+: $e}"
		log "$result"
		log "client output: $(tail -5 <<<"$cli_out")"
		log "server output: $(tail -5 <<<"$srv_out")"
	fi
	local client=softnic
	[[ $dir == rxe ]] && client=rxe
	rows+=("| unbounded, rdma_cm | $pct% | $(cm_client "$prog" server | sed 's/ server$//') | $client | $result | $(($(cval "$s1" retransmitted_pkts) - $(cval "$s0" retransmitted_pkts))) | $(($(cval "$s1" completer_retry_err) - $(cval "$s0" completer_retry_err))) | $(($(cval "$s1" duplicate_request) - $(cval "$s0" duplicate_request))) | $(($(cval "$r1" sent_pkts) - $(cval "$r0" sent_pkts))) | $(($(cval "$r1" completer_retry_err) - $(cval "$r0" completer_retry_err))) | $(($(cval "$r1" duplicate_request) - $(cval "$r0" duplicate_request))) |")
	log "${rows[-1]}"
}
matrix_cm() {
	local pct=$1 p d
	((${#cm_programs[@]})) || return 0
	guest "ip link set eth0 mtu 1500" >/dev/null
	bash $tb loss "$pct" >&2
	for p in "${cm_programs[@]}"; do
		for d in softnic rxe; do run_cm "$pct" "$p" "$d"; done
	done
	bash $tb loss 0 >&2
	guest "ip link set eth0 mtu 3000" >/dev/null
}

started=$(date +%s)
# The guest's clock against the host's: under TCG on a loaded host the
# guest's calibration can be off, and its timeouts with it.
up0=$(guest 'cut -d" " -f1 /proc/uptime')
start_daemon 0
if ((${#programs[@]})); then
	matrix "unbounded" 0
	matrix "unbounded" "$loss"
fi
matrix_cm 0
matrix_cm "$loss"
if ((${#programs[@]})); then
	start_daemon 128
	matrix "max-unacked-psns 128" "$loss"
fi
elapsed=$(($(date +%s) - started))
up1=$(guest 'cut -d" " -f1 /proc/uptime')

guest_versions=$(guest 'cat /etc/rxe-versions; echo "guest kernel $(uname -r)"')
cat <<EOF
Softnic $commit, daemon on host A ($ipA, AF_XDP, go-back-N, path MTU 1024), Debian's ibverbs-utils $(dpkg-query -W -f '${Version}' ibverbs-utils) and perftest $(dpkg-query -W -f '${Version}' perftest) over the drop-in libibverbs; rxe in a QEMU TCG guest (1 vCPU) in host B's place ($ipB), bridged to the switch:
$(sed 's/^/- guest: /' <<<"$guest_versions")
- loss: \`testbed.sh loss\` on the switch, both directions; $(date -u +%Y-%m-%d), matrix run in ${elapsed} s (the guest's clock: $(awk -v a="$up0" -v b="$up1" 'BEGIN {printf "%.0f", b - a}') s); host load average at the end $(cut -d' ' -f1-3 /proc/loadavg)
- programs' arguments: $(for p in "${programs[@]}"; do printf '%s `%s`; ' "$p" "$(args "$p")"; done)
- rdma_cm programs (server / client, each with \`-p PORT\`; the guest's eth0 at MTU 1500 for them): $(for p in "${cm_programs[@]}"; do printf '`%s` / `%s`; ' "$(cm_args "$p" SERVER)" "$(cm_client "$p" SERVER)"; done)

| softnic daemon | loss | program | client | result (client's figure) | softnic retransmitted_pkts | softnic completer_retry_err | softnic duplicate_request | rxe sent_pkts | rxe completer_retry_err | rxe duplicate_request |
|---|---|---|---|---|---|---|---|---|---|---|
$(printf '%s\n' "${rows[@]}")
EOF
