#!/usr/bin/env bash
# sweep-star.sh: StaR Fig. 5a on the two-host testbed, the testbed
# counterpart of `softnic sweep star`: the stateful NIC (rdma) against
# StaR's stateless server (star) as the connection count grows.
#
# As root with XDP: brings up the namespace testbed (testbed.sh), and for
# every mode and connection count N starts a fresh pair of softnic daemons
# over AF_XDP with the context cache of sweep-qps.sh on the server, host B
# (--sram BYTES --fetch-penalty D --link-rate L --model-rate M, fixed
# retransmission timeouts), host A's cache unlimited (StaR's setup: the
# clients stand for many machines), B's daemon with --star-server in star
# mode, and runs
# `softnic-bench write_bw -q N -s 8 -t 1 -D SECONDS` from host A to host B
# (N connections, one outstanding 8-byte WRITE each, reposted on
# completion): in rdma mode on ordinary QPs (--scheme RDMA_SCHEME), in star
# mode with --star (B's QPs stateless servers, A's StaR clients on
# STAR_SCHEME). It reads B's counters with `softnic stats` before and
# after: context-cache misses, the peak of on-chip context bytes, and the
# StaR packets served. A failed run is recorded with its error and retried
# (RETRIES); after a time-limit failure the larger counts of that mode are
# skipped.
#
# Without root, XDP or the testbed's tools (iproute2, ping), or when the
# testbed or the daemons do not come up, it says so and runs the embedded
# Fig. 5a (`softnic sweep star`, simulated time) instead; with
# SOFTNIC_NO_EMBEDDED=1 it says so and exits 1.
#
# --fig 5b (or SOFTNIC_STAR_FIG=5b): StaR Fig. 5b's RPC test with the
# paper's call: `softnic-bench rpc_lat -q N -s 2800 --response-size 1400
# -Q 16 -m 2048 -D SECONDS`, one call outstanding per connection: a 2,800-byte
# SEND request into the server's RECV, a 1,400-byte SEND response into
# the client's, RECVs posted before the SENDs they take (in star mode the
# server's RECVs and SENDs travel as WQEPs from B's driver and complete
# through the client's CQEPs). The rate column is call_rate (calls per
# second at the clients); the runs CSV counts B's star_cqep_rcvd where 5a
# counts star_rdp_rcvd, and adds the calls' median and 99th-percentile
# round trips (t_typical_us, p99_us). Each side signals one SEND in 16
# (-Q 16), as the embedded Fig. 5b does: a closed-loop call needs no
# completion of its SENDs, and on StaR each signaled server SEND costs a
# CQEP. Default connections "1 10 100 300 1000", MTU 2048 (the embedded
# Fig. 5b's: the smallest RoCE MTU that carries the paper's 1.4 KB MSS in
# one packet), PREFIX
# testbed-star-fig5b; the embedded fallback is `softnic sweep star -fig 5b`.
#
# Output, in $SOFTNIC_SWEEP_OUT (default docs/results), PREFIX
# $SOFTNIC_SWEEP_PREFIX (default testbed-star-fig5a):
#   PREFIX.csv       mode,connections,msg_rate,server_context_misses,
#                    server_onchip_bytes_peak (the runs that succeeded;
#                    msg_rate in WRITEs per second)
#   PREFIX-runs.csv  every attempt: the same columns, then star_rdp_rcvd
#                    (B), retransmits and ack_timeouts (A), (5b: the
#                    latency columns), wqep_resent (B's star_wqep_resent),
#                    cqep_resent (A's star_cqep_resent), rx_dropped (A's
#                    and B's port_rx_dropped), attempt, seconds, load1,
#                    wall_s, status, error
#
# Environment (defaults):
#   SOFTNIC_SWEEP_CONNS        "1 10 100 300 1000 2000 5000"
#   SOFTNIC_SWEEP_MODES        "rdma star"
#   SOFTNIC_SWEEP_RDMA_SCHEME  gbn (the stateful NIC, as the embedded sweep)
#   SOFTNIC_SWEEP_STAR_SCHEME  irn (the StaR clients, as the embedded sweep)
#   SOFTNIC_SWEEP_SECONDS      3 (softnic-bench -D per run)
#   SOFTNIC_SWEEP_SRAM         76800 (the server's, B's: StaR's 300 contexts
#                              of 256 B)
#   SOFTNIC_SWEEP_CLIENT_SRAM  0 (A's --sram: unlimited, as StaR's setup
#                              budgets the clients, which stand for many
#                              machines; 76800 gives A the server's budget)
#   SOFTNIC_SWEEP_FETCH_PENALTY_NS 1000, SOFTNIC_SWEEP_LINK_RATE 10gbit,
#   SOFTNIC_SWEEP_MODEL_RATE   100gbit, SOFTNIC_SWEEP_MTU 2048,
#   SOFTNIC_SWEEP_RTO          67108864ns: as sweep-qps.sh (its header says why);
#                              "adaptive": the daemons' own timeouts, which
#                              follow each QP's measured round trip up to
#                              the QP's ACK timeout (-u)
#   SOFTNIC_SWEEP_LIMIT 120, SOFTNIC_SWEEP_RETRIES 2, SOFTNIC_NS_PREFIX (snsweep)
#   SOFTNIC_SWEEP_STATS_DIR    "" (a directory: keep every run's counters,
#                              `softnic stats` of A and B before and after,
#                              as MODE-N-ATTEMPT-{a0,a1,b0,b1}, and the
#                              bench's output, -client.out, -server.out)
#   SOFTNIC_SWEEP_BENCH_ARGS   "" (extra softnic-bench flags, both modes)
#   SOFTNIC_SWEEP_RDMA_BENCH_ARGS, SOFTNIC_SWEEP_STAR_BENCH_ARGS "" (extra
#                              softnic-bench flags of one mode only, e.g.
#                              "-u 22 --stall 60" for rdma at 100mbit)
set -euo pipefail
cd "$(dirname "$0")/.."
me=sweep-star
fig=${SOFTNIC_STAR_FIG:-5a}
if [ "${1:-}" = --fig ]; then
	fig=${2:?--fig 5a or 5b}
fi
case $fig in 5a | 5b) ;; *) echo "sweep-star.sh: --fig $fig: 5a or 5b" >&2; exit 2 ;; esac
# shellcheck source=scripts/sweep-lib.sh
source scripts/sweep-lib.sh

out=${SOFTNIC_SWEEP_OUT:-docs/results}
prefix=${SOFTNIC_SWEEP_PREFIX:-testbed-star-fig$fig}
if [ "$fig" = 5a ]; then
	conns=${SOFTNIC_SWEEP_CONNS:-1 10 100 300 1000 2000 5000}
	workload=(write_bw -s 8 -t 1)
	rate_col=msg_rate served=star_rdp_rcvd embedded_fig=
else
	conns=${SOFTNIC_SWEEP_CONNS:-1 10 100 300 1000}
	workload=(rpc_lat -s 2800 --response-size 1400 -Q 16)
	rate_col=call_rate served=star_cqep_rcvd embedded_fig="-fig 5b"
fi
# Extra softnic-bench flags for every run, e.g. "-u 22" (a QP ACK timeout
# of 17 s) when the emulated link is slowed so far that a context fetch
# lasts a millisecond (SOFTNIC_SWEEP_LINK_RATE 100mbit).
# shellcheck disable=SC2206 # a flag list
workload+=(${SOFTNIC_SWEEP_BENCH_ARGS:-})
# shellcheck disable=SC2206 # flag lists
rdma_args=(${SOFTNIC_SWEEP_RDMA_BENCH_ARGS:-})
# shellcheck disable=SC2206
star_args=(${SOFTNIC_SWEEP_STAR_BENCH_ARGS:-})
lat_cols=
[ "$fig" = 5a ] || lat_cols=,t_typical_us,p99_us
modes=${SOFTNIC_SWEEP_MODES:-rdma star}
rdma_scheme=${SOFTNIC_SWEEP_RDMA_SCHEME:-gbn}
star_scheme=${SOFTNIC_SWEEP_STAR_SCHEME:-irn}
secs=${SOFTNIC_SWEEP_SECONDS:-3}
sram=${SOFTNIC_SWEEP_SRAM:-76800}
client_sram=${SOFTNIC_SWEEP_CLIENT_SRAM:-0}
daemon_args_a="--sram $client_sram"
penalty=${SOFTNIC_SWEEP_FETCH_PENALTY_NS:-1000}
mtu=${SOFTNIC_SWEEP_MTU:-2048}
limit=${SOFTNIC_SWEEP_LIMIT:-120}
retries=${SOFTNIC_SWEEP_RETRIES:-2}
rto=${SOFTNIC_SWEEP_RTO:-67108864ns}
link_rate=${SOFTNIC_SWEEP_LINK_RATE-10gbit}
model_rate=${SOFTNIC_SWEEP_MODEL_RATE-100gbit}
scale_flags=
[ -z "$link_rate" ] || [ -z "$model_rate" ] || scale_flags="--link-rate $link_rate --model-rate $model_rate"
dmtu=$([ "$mtu" -gt 1024 ] && echo 2048 || echo 1024)
rto_flags=
case $rto in
paper | adaptive) ;; # the daemons' defaults: --rto adaptive
*) rto_flags="--rto fixed --rto-low $rto --rto-high $rto" ;;
esac

why=$(no_testbed)
if [ -n "$why" ]; then
	no_embedded "$why"
	say "$why; running the embedded Fig. 5a instead (softnic sweep star: the in-memory fabric, simulated time)"
	exec go run ./cmd/softnic sweep star $embedded_fig -out "$out"
fi

# star_bench LIMIT ARGS...: sweep-lib.sh's bench with --star server on B
# and --star client on A.
star_bench() {
	local limit=$1 server rc
	shift
	ip netns exec "$nsB" timeout -k 5 "$limit" "$work/softnic-bench" "$@" --star server --socket "$work/b.sock" >"$work/server.out" 2>&1 &
	server=$!
	bench_pids=("$server")
	sleep 0.3
	rc=0
	ip netns exec "$nsA" timeout -k 5 "$limit" "$work/softnic-bench" "$@" --star client --socket "$work/a.sock" 198.18.1.1 >"$work/client.out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	else
		wait "$server" || rc=$?
	fi
	bench_pids=()
	return $rc
}

sweep_setup
# daemon_flags MODE: both daemons' flags (B serves StaR packets in star
# mode; A's --star-server changes nothing for its client QPs).
# shellcheck disable=SC2086 # rto_flags and scale_flags are flag lists
daemon_flags() {
	local s=$rdma_scheme star=
	[ "$1" = rdma ] || { s=$star_scheme; star=--star-server; }
	echo --scheme "$s" --mtu "$dmtu" --sram "$sram" --fetch-penalty "${penalty}ns" $rto_flags $scale_flags $star
}
# shellcheck disable=SC2046
if ! testbed_up || ! start_daemons $(daemon_flags star); then
	sweep_cleanup
	trap - EXIT
	no_embedded "the testbed or the softnic daemons (XDP/AF_XDP) could not start here (log above)"
	say "the testbed or the softnic daemons (XDP/AF_XDP) could not start here (log above); running the embedded Fig. 5a instead"
	exec go run ./cmd/softnic sweep star $embedded_fig -out "$out"
fi
stop_daemons
set_loss 0

mkdir -p "$out"
csv=$out/$prefix.csv
runs_csv=$out/$prefix-runs.csv
echo "mode,connections,$rate_col,server_context_misses,server_onchip_bytes_peak" >"$csv"
echo "mode,connections,$rate_col,server_context_misses,server_onchip_bytes_peak,$served,retransmits,ack_timeouts$lat_cols,wqep_resent,cqep_resent,rx_dropped,attempt,seconds,load1,wall_s,status,error" >"$runs_csv"
say "Fig. $fig; modes: $modes; connections: $conns; ${workload[*]} -m $mtu -D $secs; rdma on $rdma_scheme ${rdma_args[*]}, star clients on $star_scheme ${star_args[*]}; daemons: $(daemon_flags rdma), A's also $daemon_args_a"
say "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty tree)'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf ' %-5s %5s %11s %8s %8s %9s %6s %8s %7s  %s\n' mode conns msgs/s misses_B peak_B rdp_rcvd retx timeouts wall status >&2

t_all=$(now)
for mode in $modes; do
	skip=
	for n in $conns; do
		for attempt in $(seq $((retries + 1))); do
			t0=$(now)
			load1=$(cut -d' ' -f1 /proc/loadavg)
			status=ok err='' rate='' lat='' rc=0
			for f in a0 a1 b0 b1; do : >"$work/$f"; done
			: >"$work/client.out"
			# shellcheck disable=SC2046 # daemon_flags is a flag list
			if [ -n "$skip" ]; then
				status=skipped
				err="after $skip"
			elif start_daemons $(daemon_flags "$mode"); then
				stats "$work/a.sock" "$work/a0"
				stats "$work/b.sock" "$work/b0"
				rm -f "$work/point.csv"
				# bench passes the same arguments to both sides;
				# star_bench gives each its role.
				if [ "$mode" = rdma ]; then
					bench $((secs + limit)) "${workload[@]}" ${rdma_args[@]+"${rdma_args[@]}"} -q "$n" -m "$mtu" -D "$secs" --scheme "$rdma_scheme" --csv "$work/point.csv" || rc=$?
				else
					star_bench $((secs + limit)) "${workload[@]}" ${star_args[@]+"${star_args[@]}"} -q "$n" -m "$mtu" -D "$secs" --scheme "$star_scheme" --csv "$work/point.csv" || rc=$?
				fi
				if [ $rc = 0 ]; then
					rate=$(awk -v r="$(csv_field "$work/point.csv" msg_rate)" 'BEGIN { printf "%.0f", r * 1e6 }')
					[ -z "$lat_cols" ] || lat=$(csv_field "$work/point.csv" t_typical),$(csv_field "$work/point.csv" p99)
				else
					status=failed
					err=$(bench_error)
					if [ $rc = 124 ] || [ $rc = 137 ]; then
						err="time limit ($((secs + limit)) s)${err:+: $err}"
						skip="a time-limit failure at $n connections"
					fi
				fi
				stats "$work/a.sock" "$work/a1"
				stats "$work/b.sock" "$work/b1"
				daemons_alive || { status=failed; err="${err:+$err; }a daemon died: $(tail -qn1 "$work/$nsA.log" "$work/$nsB.log" | tr ',"' ';_' | tr '\n' ' ' | cut -c1-200)"; }
				stop_daemons
			else
				status=failed
				err="daemons did not start"
			fi
			missb=$(delta "$work/b0" "$work/b1" qpc_cache_misses)
			peakb=$(counter "$work/b1" qpc_resident_bytes_peak)
			rdp=$(delta "$work/b0" "$work/b1" "$served")
			retx=$(delta "$work/a0" "$work/a1" retransmitted_pkts)
			tmo=$(delta "$work/a0" "$work/a1" local_ack_timeout_err)
			# What StaR's drivers resent (B's WQEPs, A's CQEPs), and the
			# frames either host's AF_XDP socket had no room for.
			wqepr=$(delta "$work/b0" "$work/b1" star_wqep_resent)
			cqepr=$(delta "$work/a0" "$work/a1" star_cqep_resent)
			rxd=$(($(delta "$work/a0" "$work/a1" port_rx_dropped) + $(delta "$work/b0" "$work/b1" port_rx_dropped)))
			if [ -n "${SOFTNIC_SWEEP_STATS_DIR:-}" ]; then
				mkdir -p "$SOFTNIC_SWEEP_STATS_DIR"
				for f in a0 a1 b0 b1 client.out server.out; do cp "$work/$f" "$SOFTNIC_SWEEP_STATS_DIR/$mode-$n-$attempt-$f" 2>/dev/null || true; done
			fi
			wall=$(since "$t0")
			[ -z "$lat_cols" ] || [ -n "$lat" ] || lat=,
			echo "$mode,$n,$rate,$missb,$peakb,$rdp,$retx,$tmo${lat_cols:+,$lat},$wqepr,$cqepr,$rxd,$attempt,$secs,$load1,$wall,$status,\"$err\"" >>"$runs_csv"
			[ $status != ok ] || echo "$mode,$n,$rate,$missb,$peakb" >>"$csv"
			printf ' %-5s %5s %11s %8s %8s %9s %6s %8s %7s  %s\n' "$mode" "$n$([ "$attempt" = 1 ] || echo "#$attempt")" "${rate:--}" "$missb" "$peakb" "$rdp" "$retx" "$tmo" "$wall" "$status${err:+: $err}" >&2
			if [ $status = skipped ] || ! retryable $rc $status; then
				break
			fi
			[ "$attempt" -gt "$retries" ] || say "running it again (retry $attempt of $retries)"
		done
	done
done
say "all runs: $(since "$t_all") s; $csv"
