#!/usr/bin/env bash
# sweep-loss.sh: goodput against loss rate on the two-host testbed, every
# recovery scheme: the testbed counterpart of `softnic-sweep loss`.
#
# As root with XDP: brings up the namespace testbed (testbed.sh), and for
# every scheme and loss rate starts a fresh pair of softnic daemons over
# AF_XDP with --scheme S, runs `softnic-bench write_bw -s 65536 -q 1 -D 3`
# from host A to host B with the loss injected on the switch in both
# directions (data and ACKs alike), and reads the NICs' counters with
# `softnic stats` before and after. Every point runs 3 times, in rounds
# (round r runs each point once, lossless first), so that a point's runs
# are spread over the scheme's series: two daemons and two bench processes
# share this machine's 2 cores, and other load comes in bursts. Then
# `softnic-sweep plot-loss` takes each point's median run, relative to the
# scheme's lossless median, and draws the plot with the embedded sweep's
# code.
#
# Without root, XDP or the testbed's tools (iproute2, ping, and nftables
# or sch_netem for the loss), or when the testbed or the daemons do not
# come up, it says so and runs the embedded sweep (`softnic-sweep loss`,
# simulated time) instead; with SOFTNIC_NO_EMBEDDED=1 (the tests) it says
# so and exits 1.
#
# Output, in $SOFTNIC_SWEEP_OUT (default docs/results):
#   testbed-loss-runs.csv  one row per run: loss.csv's columns, then rep,
#                          attempt, seconds, bw_peak_gbps (empty: the bench
#                          measures BW peak as perftest does, not in timed
#                          -D runs), msg_rate_mpps, sent_pkts,
#                          rx_dropped_b (frames B's AF_XDP socket had no
#                          room for), rx_dropped_a, switch_drops (the loss
#                          rule's count), nic_scheme (from the bench's
#                          banner), load1, wall_s, status, error
#   testbed-loss.csv       one row per (scheme, loss), loss.csv's columns:
#                          scheme, loss (a probability), size, iterations
#                          (completed in the run), mtu, goodput_gbps,
#                          relative (to the scheme's lossless median),
#                          retransmits and ack_timeouts (host A's
#                          retransmitted_pkts and local_ack_timeout_err)
#   testbed-loss.png       relative goodput against loss
#
# Environment (defaults):
#   SOFTNIC_SWEEP_SCHEMES        "gbn igbn ..." (every scheme `softnic-sweep
#                                schemes` lists, i.e. recovery.Names())
#   SOFTNIC_SWEEP_LOSSES         "0 0.01 0.1 0.5 1 2 5" (percent; 0 first)
#   SOFTNIC_SWEEP_SECONDS        3 (softnic-bench -D per run)
#   SOFTNIC_SWEEP_LOSSLESS_RUNS  3
#   SOFTNIC_SWEEP_RUNS           3 (runs of each lossy point)
#   SOFTNIC_SWEEP_RETRIES        2: a run that fails with an error (softnic-bench
#                                exit status 1, e.g. RETRY_EXC_ERR, or a daemon
#                                that died) is run again up to this many times;
#                                every attempt is a row of the runs CSV
#   SOFTNIC_SWEEP_LINK_RATE      1.5gbit: the daemons' --link-rate, the
#                                emulated link, below what the two hosts
#                                sustain (about 2.3-2.6 Gb/s of 64 KiB WRITEs
#                                on this 2-core machine), so that the link is
#                                the bottleneck and a lossless run drops
#                                nothing at the receiver; "" leaves it
#                                unlimited
#   SOFTNIC_SWEEP_RTO            "" (default): the daemon's own timeouts
#                                (--rto adaptive, --rto-min 5ms; docs/
#                                recovery.md). LOW/HIGH or one value: fixed
#                                RTO_low/RTO_high (--rto fixed --rto-low LOW
#                                --rto-high HIGH); "paper": fixed at the
#                                schemes' defaults (IRN's 100/320 µs).
#   SOFTNIC_SWEEP_SIZE           65536
#   SOFTNIC_SWEEP_MTU            1024 (path MTU; the daemons get 1024 or 2048)
#   SOFTNIC_SWEEP_OUT            docs/results
#   SOFTNIC_SWEEP_DAEMON_ARGS    more `softnic run` flags
#   SOFTNIC_NS_PREFIX            snsweep
#   SOFTNIC_NO_EMBEDDED          1: fail (exit 1) where the testbed cannot
#                                run, instead of the embedded fallback
#   SOFTNIC_SWEEP_TX_DEPTH       "" (softnic-bench's 128): -t, WRITEs in flight
#   SOFTNIC_SWEEP_QP_TIMEOUT     "" (softnic-bench's 14, 67 ms): -u, the QPs'
#                                local ACK timeout code, 4.096 us * 2^N
#                                (go-back-N's timeout with --rto fixed)
#   SOFTNIC_SWEEP_NAME           testbed-loss: the output files' prefix
#   SOFTNIC_SWEEP_ORDER          scheme: each scheme's series in turn;
#                                interleaved: every scheme at a loss rate
#                                before the next (the ratios between
#                                schemes then see the same load)
#   SOFTNIC_SWEEP_PAPER          "": a paper's workload, setting the defaults
#                                of the variables above (each still
#                                overrides it):
#     igbn-fig6a  Improved go-back-N (paper 002) Fig. 6a: 4 MiB WRITEs, ONE
#                 outstanding (-t 1: the next is posted when the last
#                 completes), schemes "gbn gbn-st gbn-ce igbn", losses
#                 "0 0.01 0.1 0.2 0.5 1", ACK timeout code 15 (134 ms, the
#                 IBA code nearest the paper's 100 ms), RTO fixed with no
#                 backoff (--rto fixed --rto-backoff=false: go-back-N waits
#                 exactly the QP's ACK timeout, as in the paper), SECONDS 10
#                 (a 4 MiB WRITE takes about 23 ms at 1.5gbit), 3 runs
#                 of every point, ORDER interleaved; writes
#                 testbed-igbn-fig6a{-runs.csv,.csv,.png}, the merged CSV in
#                 the paper preset's columns (scheme, loss as a fraction,
#                 relative first)
#     igbn-fig6b  the same at code 11 (8.4 ms, the paper's 10 ms)
#                 The paper's 500 us panel (6c) is left out: a timeout
#                 that near the round trip fires on every scheduler pause
#                 of this shared 2-core host. The NAK interval stays the
#                 daemon's (2 ms; the paper's 500 us is for a hardware NIC;
#                 SOFTNIC_SWEEP_DAEMON_ARGS="--nak-interval 500us" sets it).
#
# Time: about (SECONDS + 0.6) s per run plus retries; 5 schemes x 7 points
# x 3 runs at -D 3 take about 7 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
me=sweep-loss
# shellcheck source=scripts/sweep-lib.sh
source scripts/sweep-lib.sh

# A paper's workload: its defaults, each overridden by its variable.
paper=${SOFTNIC_SWEEP_PAPER:-}
p_schemes='' p_losses='0 0.01 0.1 0.5 1 2 5' p_secs=3 p_runs0=3 p_runs=3 p_size=65536 p_depth='' p_timeout='' p_rto='' p_name=testbed-loss p_paper_timeout= p_order=scheme
p_title="RDMA WRITE goodput under loss, two-host testbed (AF_XDP, both directions)"
paper_args=()
case "$paper" in
"") ;;
igbn-fig6a | igbn-fig6b)
	p_schemes="gbn gbn-st gbn-ce igbn" p_losses="0 0.01 0.1 0.2 0.5 1" p_secs=10
	p_size=4194304 p_depth=1 p_rto=fixed p_name=testbed-$paper p_order=interleaved
	p_timeout=15 p_paper_timeout="100 ms"
	[ "$paper" = igbn-fig6a ] || p_timeout=11 p_paper_timeout="10 ms"
	paper_args=(-paper-columns)
	;;
*)
	echo "sweep-loss: SOFTNIC_SWEEP_PAPER: no workload '$paper' (have: igbn-fig6a, igbn-fig6b)" >&2
	exit 2
	;;
esac

out=${SOFTNIC_SWEEP_OUT:-docs/results}
schemes=${SOFTNIC_SWEEP_SCHEMES:-$p_schemes}
losses=${SOFTNIC_SWEEP_LOSSES:-$p_losses}
secs=${SOFTNIC_SWEEP_SECONDS:-$p_secs}
runs0=${SOFTNIC_SWEEP_LOSSLESS_RUNS:-$p_runs0}
runs=${SOFTNIC_SWEEP_RUNS:-$p_runs}
size=${SOFTNIC_SWEEP_SIZE:-$p_size}
depth=${SOFTNIC_SWEEP_TX_DEPTH:-$p_depth}
qp_timeout=${SOFTNIC_SWEEP_QP_TIMEOUT:-$p_timeout}
name=${SOFTNIC_SWEEP_NAME:-$p_name}
mtu=${SOFTNIC_SWEEP_MTU:-1024}
dmtu=$([ "$mtu" -gt 1024 ] && echo 2048 || echo 1024)
retries=${SOFTNIC_SWEEP_RETRIES:-2}
rto=${SOFTNIC_SWEEP_RTO:-$p_rto}
link_rate=${SOFTNIC_SWEEP_LINK_RATE-1.5gbit}
order=${SOFTNIC_SWEEP_ORDER:-$p_order}
case "$order" in
scheme | interleaved) ;;
*) say "SOFTNIC_SWEEP_ORDER must be scheme or interleaved, got '$order'"; exit 2 ;;
esac

embedded() {
	no_embedded "$1"
	if [ -n "$paper" ]; then
		say "$1; running the paper preset on the embedded fabric instead (softnic-sweep paper ${paper%?}: simulated time, all three panels)"
		exec go run ./cmd/softnic-sweep paper "${paper%?}" -out "$out"
	fi
	say "$1; running the embedded sweep instead (softnic-sweep loss: the in-memory fabric, simulated time)"
	local args=(-out "$out" -loss "$(echo "$losses" | tr -s ' ' ,)" -s "$size" -m "$mtu")
	[ -z "$schemes" ] || args+=(-schemes "$(echo "$schemes" | tr -s ' ' ,)")
	exec go run ./cmd/softnic-sweep loss "${args[@]}"
}

# shellcheck disable=SC2086 # losses is a list
why=$(no_testbed $losses)
[ -z "$why" ] || embedded "$why"
case " $losses " in
*" 0 "*) ;;
*) say "SOFTNIC_SWEEP_LOSSES must include 0 (goodput is relative to it)"; exit 2 ;;
esac

sweep_setup
[ -n "$schemes" ] || schemes=$("$work/softnic-sweep" schemes | tr '\n' ' ')
first=${schemes%% *}
if ! testbed_up || ! start_daemons --scheme "$first" --mtu "$dmtu"; then
	sweep_cleanup
	trap - EXIT
	embedded "the testbed or the softnic daemons (XDP/AF_XDP) could not start here (log above)"
fi
stop_daemons
rto_flags=
case "$rto" in
"") rto="the daemon's (adaptive, --rto-min 5ms)" ;;
paper) rto_flags="--rto fixed --rto-low 100us --rto-high 320us" ;;
fixed) rto_flags="--rto fixed --rto-backoff=false" rto="fixed, no backoff (go-back-N: the QP's ACK timeout)" ;;
*) rto_flags="--rto fixed --rto-low ${rto%/*} --rto-high ${rto#*/}" ;;
esac
[ -z "$link_rate" ] || rto_flags="$rto_flags --link-rate $link_rate"

mkdir -p "$out"
runs_csv=$out/$name-runs.csv
echo "scheme,loss,size,iterations,mtu,goodput_gbps,relative,retransmits,ack_timeouts,rep,attempt,seconds,bw_peak_gbps,msg_rate_mpps,sent_pkts,rx_dropped_b,rx_dropped_a,switch_drops,nic_scheme,load1,wall_s,tx_depth,ack_timeout_us,status,error" >"$runs_csv"
bench_args=(-s "$size" -q 1 -m "$mtu" -D "$secs")
[ -z "$depth" ] || bench_args+=(-t "$depth")
[ -z "$qp_timeout" ] || bench_args+=(-u "$qp_timeout")
timeout_us=$(awk -v k="${qp_timeout:-14}" 'BEGIN { printf "%d", 4.096 * 2 ^ k }')

say "${paper:+$paper: }schemes: $schemes; loss (%): $losses; write_bw ${bench_args[*]}; lossless x$runs0, lossy x$runs; RTO $rto; ACK timeout ${timeout_us} us; link rate ${link_rate:-unlimited}; a failed run is tried again up to $retries times"
say "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty tree)'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf ' %-6s %6s %4s %9s %9s %12s %9s %10s %7s  %s\n' scheme loss% run Gb/s peak retransmits timeouts rx_drop_B wall status >&2

t_all=$(now)
cur_loss=
# Rounds: round r runs every point that has an r-th run, lossless first,
# so that the repeats of a point are spread over the series rather than
# back to back (CPU contention here comes in bursts). By scheme (the
# default) each scheme's series runs in turn; interleaved (a paper's
# default) runs every scheme at one loss rate before the next loss rate,
# so that a burst of load falls on all the schemes alike and their
# ratios are taken in one stretch of time.
plan=()
for s0 in $([ "$order" = interleaved ] && echo all || echo "$schemes"); do
	for r in $(seq $((runs0 > runs ? runs0 : runs))); do
		for l in $losses; do
			if [ "$l" = 0 ]; then [ "$r" -le "$runs0" ] || continue; else [ "$r" -le "$runs" ] || continue; fi
			for s in $([ "$s0" = all ] && echo "$schemes" || echo "$s0"); do
				plan+=("$s $l $r")
			done
		done
	done
done
for step in "${plan[@]}"; do
	read -r s l rep <<<"$step"
	if [ "$cur_loss" != "$l" ]; then
		set_loss "$l"
		cur_loss=$l
	fi
	for attempt in $(seq $((retries + 1))); do
		t0=$(now)
		load1=$(cut -d' ' -f1 /proc/loadavg)
		status=ok err='' iters='' gbps='' peak='' rate='' rc=0
		# shellcheck disable=SC2086 # rto_flags is a flag list
		if start_daemons --scheme "$s" --mtu "$dmtu" $rto_flags; then
			stats "$work/a.sock" "$work/a0"
			stats "$work/b.sock" "$work/b0"
			d0=$(dropped_on_switch)
			rm -f "$work/point.csv"
			bench $((secs + 60)) write_bw "${bench_args[@]}" --report_gbits --scheme "$s" --csv "$work/point.csv" || rc=$?
			if [ $rc = 0 ]; then
				iters=$(csv_field "$work/point.csv" iterations)
				gbps=$(csv_field "$work/point.csv" bw_avg)
				peak=$(csv_field "$work/point.csv" bw_peak)
				rate=$(csv_field "$work/point.csv" msg_rate)
			else
				status=failed
				err=$(bench_error)
				[ $rc != 124 ] && [ $rc != 137 ] || err="time limit ($((secs + 60)) s)${err:+: $err}"
			fi
			stats "$work/a.sock" "$work/a1"
			stats "$work/b.sock" "$work/b1"
			d1=$(dropped_on_switch)
			daemons_alive || { status=failed; err="${err:+$err; }a daemon died: $(tail -qn1 "$work/$nsA.log" "$work/$nsB.log" | tr ',"' ';_' | tr '\n' ' ' | cut -c1-200)"; }
			stop_daemons
		else
			status=failed
			err="daemons did not start"
			for f in a0 a1 b0 b1; do : >"$work/$f"; done
			: >"$work/client.out"
			d0=0 d1=0
		fi
		retx=$(delta "$work/a0" "$work/a1" retransmitted_pkts)
		tmo=$(delta "$work/a0" "$work/a1" local_ack_timeout_err)
		sent=$(delta "$work/a0" "$work/a1" sent_pkts)
		dropb=$(($(delta "$work/b0" "$work/b1" port_rx_dropped) + $(delta "$work/b0" "$work/b1" port_rx_ring_full) + $(delta "$work/b0" "$work/b1" port_rx_fill_ring_empty_descs)))
		dropa=$(($(delta "$work/a0" "$work/a1" port_rx_dropped) + $(delta "$work/a0" "$work/a1" port_rx_ring_full) + $(delta "$work/a0" "$work/a1" port_rx_fill_ring_empty_descs)))
		nic=$(sed -n 's/^ *Recovery scheme *: *\([a-z0-9_-]*\).*/\1/p' "$work/client.out" 2>/dev/null | head -1 || true)
		[ -z "$nic" ] || [ "$nic" = "$s" ] || say "warning: $s run, but the bench reports recovery scheme $nic"
		wall=$(since "$t0")
		prob=$(awk -v p="$l" 'BEGIN { print p / 100 }')
		echo "$s,$prob,$size,$iters,$mtu,$gbps,,$retx,$tmo,$rep,$attempt,$secs,$peak,$rate,$sent,$dropb,$dropa,$((d1 - d0)),$nic,$load1,$wall,${depth:-128},$timeout_us,$status,\"$err\"" >>"$runs_csv"
		printf ' %-6s %6s %4s %9s %9s %12s %9s %10s %7s  %s\n' "$s" "$l" "$rep$([ "$attempt" = 1 ] || echo "#$attempt")" "${gbps:--}" "${peak:--}" "$retx" "$tmo" "$dropb" "$wall" "$status${err:+: $err}" >&2
		retryable $rc $status || break
		if [ "$attempt" -le "$retries" ]; then
			say "running it again (retry $attempt of $retries)"
		fi
	done
done
set_loss 0
say "all runs: $(since "$t_all") s"
awk -F, 'NR > 1 { n[$1]++; if ($(NF - 1) != "ok") f[$1]++ } END { for (s in n) printf "sweep-loss: %s: %d runs, %d failed\n", s, n[s], f[s] }' "$runs_csv" | sort >&2
if [ -n "$paper" ]; then
	p_title="IGBN Fig. ${paper#igbn-fig}, testbed: $(awk -v b="$size" 'BEGIN { if (b % 1048576 == 0) printf "%d MiB", b / 1048576; else printf "%d B", b }') WRITEs one at a time, ${link_rate:-unlimited}, ACK timeout $(awk -v u="$timeout_us" 'BEGIN { printf "%.3g ms", u / 1000 }') (paper ${p_paper_timeout})"
fi
"$work/softnic-sweep" plot-loss -in "$runs_csv" -csv "$out/$name.csv" -out "$out/$name.png" "${paper_args[@]}" -title "$p_title"
