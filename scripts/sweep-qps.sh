#!/usr/bin/env bash
# sweep-qps.sh: the QP-scalability sweep (StaR's stress test) on the
# two-host testbed, every recovery scheme: the testbed counterpart of
# `softnic-sweep qps`.
#
# As root with XDP: brings up the namespace testbed (testbed.sh), and for
# every scheme, loss rate, message size and QP count N starts a fresh pair
# of softnic daemons over AF_XDP (--scheme S --sram BYTES --fetch-penalty
# D), runs `softnic-bench write_bw -q N -s SIZE -t 1 -D 3` from host A to
# host B (N QPs, each with one outstanding WRITE reposted on completion)
# and reads the NICs' counters with `softnic stats` before and after: the
# context cache's hits and misses and its peak residency at B (as the
# embedded sweep reports B's), retransmits and ACK timeouts at A. A run
# that fails (softnic-bench's error, a daemon that died, the time limit) is
# recorded with its error and the sweep goes on; after a time-limit failure
# the larger QP counts of that series are skipped (recorded as skipped).
# Then `softnic-sweep plot-qps` writes the CSV in qps.csv's columns (SR
# bytes from the recovery package's accounting, as the embedded sweep) and
# draws the plots with the embedded sweep's code.
#
# Without root, XDP or the testbed's tools (iproute2, ping, and nftables
# or sch_netem for a loss above 0), or when the testbed or the daemons do
# not come up, it says so and runs the embedded sweep (`softnic-sweep
# qps`, simulated time) instead; with SOFTNIC_NO_EMBEDDED=1 it says so and
# exits 1.
#
# Output, in $SOFTNIC_SWEEP_OUT (default docs/results), with PREFIX
# $SOFTNIC_SWEEP_PREFIX (default testbed-qps):
#   PREFIX-runs.csv           one row per run: qps.csv's columns (sr_bytes
#                             empty), then ack_timeouts, misses_a,
#                             hit_rate_a, peak_resident_a (host A's cache),
#                             attempt, seconds, nic_scheme, load1, wall_s, status,
#                             error
#   PREFIX.csv                the successful runs in qps.csv's columns
#   PREFIX_msgrate_8B.png, PREFIX_msgrate_8192B.png, PREFIX_sr_bytes.png
#
# Environment (defaults):
#   SOFTNIC_SWEEP_SCHEMES   every scheme `softnic-sweep schemes` lists
#   SOFTNIC_SWEEP_QPS       "1 16 64 256 300 512 1000 2000 5000"
#   SOFTNIC_SWEEP_SIZES     "8 8192"
#   SOFTNIC_SWEEP_LOSSES    "0 1" (percent, both directions)
#   SOFTNIC_SWEEP_SECONDS   3 (softnic-bench -D per run)
#   SOFTNIC_SWEEP_SRAM      76800 (the daemons' --sram: StaR's 300 contexts;
#                           1400000 for FaSR's budget)
#   SOFTNIC_SWEEP_FETCH_PENALTY_NS  1000 (--fetch-penalty: StaR's 1 µs on the
#                           modelled NIC)
#   SOFTNIC_SWEEP_LINK_RATE 10gbit and SOFTNIC_SWEEP_MODEL_RATE 100gbit: the
#                           emulation scale (`softnic run --link-rate L
#                           --model-rate M`): the penalty lasts as many
#                           packet times on the emulated L link as the
#                           1 µs fetch does on StaR's 100 Gb/s NIC (about
#                           120 minimum-size frames), i.e. M/L = 10 times
#                           longer, 10 µs. A 1 µs stall is a speck beside
#                           a software NIC's microseconds per packet, and
#                           the knee stays soft; scaled, the collapse of
#                           StaR Fig. 1 shows. The CSVs' fetch_penalty_ns
#                           is the scaled penalty. "" for either: none.
#   SOFTNIC_SWEEP_MTU       2048 (path MTU; the embedded sweep's 4096 does
#                           not fit the daemon's UMEM chunks)
#   SOFTNIC_SWEEP_RTO       67108864ns: the daemons' --rto-low and --rto-high,
#                           the selective schemes' retransmission timeouts,
#                           set to the QPs' ACK timeout (softnic-bench's code
#                           14) as the embedded sweep gives every scheme its
#                           QPs' ACK timeout. IRN's 100/320 µs fire again and
#                           again on this testbed, whose round trip with one
#                           8-byte WRITE outstanding is about a millisecond
#                           (the processes sleep between polls): one QP
#                           failed with RETRY_EXC_ERR lossless. "paper" keeps
#                           the schemes' defaults. Ignored (with a warning)
#                           by a daemon without --rto-low.
#   SOFTNIC_SWEEP_LIMIT     120 (seconds a run may take beyond -D)
#   SOFTNIC_SWEEP_RETRIES   2 (a run that failed with an error, not a time
#                           limit, is run again up to this many times; every
#                           attempt is a row of the runs CSV)
#   SOFTNIC_SWEEP_OUT, SOFTNIC_SWEEP_PREFIX, SOFTNIC_SWEEP_DAEMON_ARGS,
#   SOFTNIC_NS_PREFIX (snsweep)
#
# Time: about (SECONDS + 0.7) s per run, 5.3-6.1 s at 5000 QPs; the default
# sweep, 5 schemes x 36 points, takes about 12 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
me=sweep-qps
# shellcheck source=scripts/sweep-lib.sh
source scripts/sweep-lib.sh

out=${SOFTNIC_SWEEP_OUT:-docs/results}
prefix=${SOFTNIC_SWEEP_PREFIX:-testbed-qps}
schemes=${SOFTNIC_SWEEP_SCHEMES:-}
qplist=${SOFTNIC_SWEEP_QPS:-1 16 64 256 300 512 1000 2000 5000}
sizes=${SOFTNIC_SWEEP_SIZES:-8 8192}
losses=${SOFTNIC_SWEEP_LOSSES:-0 1}
secs=${SOFTNIC_SWEEP_SECONDS:-3}
sram=${SOFTNIC_SWEEP_SRAM:-76800}
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

embedded() {
	no_embedded "$1"
	say "$1; running the embedded sweep instead (softnic-sweep qps: the in-memory fabric, simulated time)"
	local args=(-out "$out" -qps "$(echo "$qplist" | tr -s ' ' ,)" -sizes "$(echo "$sizes" | tr -s ' ' ,)"
		-loss "$(echo "$losses" | tr -s ' ' ,)" -sram "$sram" -fetch-penalty "${penalty}ns")
	[ -z "$schemes" ] || args+=(-schemes "$(echo "$schemes" | tr -s ' ' ,)")
	exec go run ./cmd/softnic-sweep qps "${args[@]}"
}

# shellcheck disable=SC2086 # losses is a list
why=$(no_testbed $losses)
[ -z "$why" ] || embedded "$why"

sweep_setup
[ -n "$schemes" ] || schemes=$("$work/softnic-sweep" schemes | tr '\n' ' ')
rto_flags=
if [ "$rto" != paper ]; then
	# (no `| grep -q`: with pipefail, grep's early exit can fail the pipe)
	run_help=$("$work/softnic" run -h 2>&1 || true)
	if [[ $run_help == *-rto-low* ]]; then
		rto_flags="--rto fixed --rto-low $rto --rto-high $rto"
	else
		say "warning: this softnic run has no --rto-low: the selective schemes keep their own RTOs"
		rto=paper
	fi
fi
# shellcheck disable=SC2086 # rto_flags is a flag list
daemon_flags() { echo --scheme "$1" --mtu "$dmtu" --sram "$sram" --fetch-penalty "${penalty}ns" $rto_flags $scale_flags; }
# shellcheck disable=SC2046
if ! testbed_up || ! start_daemons $(daemon_flags "${schemes%% *}"); then
	sweep_cleanup
	trap - EXIT
	embedded "the testbed or the softnic daemons (XDP/AF_XDP) could not start here (log above)"
fi
# The scale the daemon applied (its start-up log says), and the penalty it
# stalls for.
scale=$(sed -n 's/.*emulation_scale=\([0-9.]*\).*/\1/p' "$work/$nsA.log" | head -1)
scale=${scale:-1}
penalty_eff=$(awk -v p="$penalty" -v s="$scale" 'BEGIN { printf "%d", p * s + 0.5 }')
stop_daemons

mkdir -p "$out"
runs_csv=$out/$prefix-runs.csv
echo "scheme,qps,size,loss,sram_bytes,fetch_penalty_ns,messages,msg_rate,goodput_gbps,cache_misses,hit_rate,peak_resident_qps,sr_bytes,retransmits,ack_timeouts,misses_a,hit_rate_a,peak_resident_a,attempt,seconds,nic_scheme,load1,wall_s,status,error" >"$runs_csv"

say "schemes: $schemes; QPs: $qplist; sizes: $sizes; loss (%): $losses; write_bw -t 1 -m $mtu -D $secs; --sram $sram --fetch-penalty ${penalty}ns x emulation scale $scale (${scale_flags:-none}) = ${penalty_eff}ns, RTO $rto"
say "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty tree)'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf ' %-6s %5s %5s %5s %11s %9s %7s %6s %8s %8s %7s  %s\n' scheme size loss% QPs msgs/s Gb/s hit_B peak_B retx timeouts wall status >&2

# hitrate BEFORE AFTER: the context cache's hit rate between two snapshots.
hitrate() {
	local h m
	h=$(delta "$1" "$2" qpc_cache_hits)
	m=$(delta "$1" "$2" qpc_cache_misses)
	awk -v h="$h" -v m="$m" 'BEGIN { if (h + m > 0) printf "%.4f", h / (h + m) }'
}

t_all=$(now)
cur_loss=
for s in $schemes; do
	for l in $losses; do
		if [ "$cur_loss" != "$l" ]; then
			set_loss "$l"
			cur_loss=$l
		fi
		prob=$(awk -v p="$l" 'BEGIN { print p / 100 }')
		for size in $sizes; do
			skip=
			for n in $qplist; do
				for attempt in $(seq $((retries + 1))); do
					t0=$(now)
					load1=$(cut -d' ' -f1 /proc/loadavg)
					status=ok err='' msgs='' rate='' gbps='' nic='' rc=0
					for f in a0 a1 b0 b1; do : >"$work/$f"; done
					: >"$work/client.out"
					# shellcheck disable=SC2046 # daemon_flags is a flag list
					if [ -n "$skip" ]; then
						status=skipped
						err="after $skip"
					elif start_daemons $(daemon_flags "$s"); then
						stats "$work/a.sock" "$work/a0"
						stats "$work/b.sock" "$work/b0"
						rm -f "$work/point.csv"
						bench $((secs + limit)) write_bw -q "$n" -s "$size" -t 1 -m "$mtu" -D "$secs" --report_gbits --scheme "$s" --csv "$work/point.csv" || rc=$?
						if [ $rc = 0 ]; then
							msgs=$(csv_field "$work/point.csv" iterations)
							rate=$(awk -v r="$(csv_field "$work/point.csv" msg_rate)" 'BEGIN { printf "%.0f", r * 1e6 }')
							gbps=$(csv_field "$work/point.csv" bw_avg)
						else
							status=failed
							err=$(bench_error)
							if [ $rc = 124 ] || [ $rc = 137 ]; then
								err="time limit ($((secs + limit)) s)${err:+: $err}"
								skip="a time-limit failure at $n QPs"
							fi
						fi
						stats "$work/a.sock" "$work/a1"
						stats "$work/b.sock" "$work/b1"
						daemons_alive || { status=failed; err="${err:+$err; }a daemon died: $(tail -qn1 "$work/$nsA.log" "$work/$nsB.log" | tr ',"' ';_' | tr '\n' ' ' | cut -c1-200)"; }
						stop_daemons
						nic=$(sed -n 's/^ *Recovery scheme *: *\([a-z0-9_-]*\).*/\1/p' "$work/client.out" | head -1 || true)
						[ -z "$nic" ] || [ "$nic" = "$s" ] || say "warning: $s run, but the bench reports recovery scheme $nic"
					else
						status=failed
						err="daemons did not start"
					fi
					missb=$(delta "$work/b0" "$work/b1" qpc_cache_misses)
					hitb=$(hitrate "$work/b0" "$work/b1")
					peakb=$(counter "$work/b1" qpc_resident_peak)
					missa=$(delta "$work/a0" "$work/a1" qpc_cache_misses)
					hita=$(hitrate "$work/a0" "$work/a1")
					peaka=$(counter "$work/a1" qpc_resident_peak)
					retx=$(delta "$work/a0" "$work/a1" retransmitted_pkts)
					tmo=$(delta "$work/a0" "$work/a1" local_ack_timeout_err)
					wall=$(since "$t0")
					echo "$s,$n,$size,$prob,$sram,$penalty_eff,$msgs,$rate,$gbps,$missb,$hitb,$peakb,,$retx,$tmo,$missa,$hita,$peaka,$attempt,$secs,$nic,$load1,$wall,$status,\"$err\"" >>"$runs_csv"
					printf ' %-6s %5s %5s %5s %11s %9s %7s %6s %8s %8s %7s  %s\n' "$s" "$size" "$l" "$n$([ "$attempt" = 1 ] || echo "#$attempt")" "${rate:--}" "${gbps:--}" "${hitb:--}" "$peakb" "$retx" "$tmo" "$wall" "$status${err:+: $err}" >&2
					if [ $status = skipped ] || ! retryable $rc $status; then
						break
					fi
					if [ "$attempt" -le "$retries" ]; then
						say "running it again (retry $attempt of $retries)"
					fi
				done
			done
		done
	done
done
set_loss 0
say "all runs: $(since "$t_all") s"
awk -F, 'NR > 1 { n[$1]++; if ($(NF - 1) != "ok") f[$1]++ } END { for (s in n) printf "sweep-qps: %s: %d runs, %d not ok\n", s, n[s], f[s] }' "$runs_csv" | sort >&2
"$work/softnic-sweep" plot-qps -in "$runs_csv" -csv "$out/$prefix.csv" -out "$out" -prefix "$prefix" -note "testbed, SRAM $sram B"
