#!/usr/bin/env bash
# soak.sh DURATION: softnic under load and impairment for DURATION (30m,
# 2m, 90s, 1h), looking for leaks and failures (issue 10, item 7).
#
# On the two-host testbed (root, AF_XDP) a daemon runs on host A and on
# host B, with loss on the switch (testbed.sh loss, both directions) and,
# when SOFTNIC_NETEM is set, `softnic run --netem SPEC` as well. Client
# loops run softnic-bench pairs (server on B, client on A) one after the
# other: every test softnic-bench has (write_bw read_bw send_bw atomic_bw
# write_lat read_lat send_lat) across every recovery scheme (--scheme);
# every SOFTNIC_SOAK_KILL_EVERY-th run one side, client or server in
# turn, is SIGKILLed mid-run. Every SOFTNIC_SOAK_INTERVAL seconds the
# loops pause between runs and each daemon's RSS, descriptors and
# goroutines (go_goroutines from its /metrics) are sampled into a CSV.
#
# At the end it prints the samples at the warm-up mark (minute 5) and at
# the end, each series' spread (max-min)/min from the mark on (flat:
# within 10%), the client errors other than injected deaths (a killed
# side's own output and its peer's "peer gone" exit do not count, nor a
# server still waiting for a client killed before it connected, which
# perftest's servers do for ever; a failure of any other run, a hang or
# a panic does), and the daemons'
# WARN/ERROR log lines. Exit status 1 if a series is not flat, a client
# failed unexpectedly or a daemon logged an ERROR or died; 2 on bad usage.
#
# Environment: SOFTNIC_SOAK_LOSS (switch loss %, default 0.5),
# SOFTNIC_NETEM (daemon impairment spec, unset: none), SOFTNIC_SOAK_CLIENTS
# (parallel loops, default 2), SOFTNIC_SOAK_KILL_EVERY (default 4),
# SOFTNIC_SOAK_INTERVAL (seconds, default 10), SOFTNIC_SOAK_WARMUP (the
# mark, seconds, default 300, at most half of DURATION), SOFTNIC_SOAK_OUT
# (directory kept for the CSV, runs' outputs and daemon logs; default
# /tmp/softnic-soak-YYYYmmdd-HHMMSS), SOFTNIC_SOAK_SCHEMES (default: the daemon's
# list), SOFTNIC_NS_PREFIX (default snsoak), SOFTNIC_DAEMON_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: soak.sh DURATION (e.g. 30m, 2m, 90s, 1h)" >&2
	exit 2
}
[ $# -eq 1 ] || usage
[[ $1 =~ ^([0-9]+)([smh]?)$ ]] || usage
case ${BASH_REMATCH[2]} in
h) duration=$((BASH_REMATCH[1] * 3600)) ;;
m) duration=$((BASH_REMATCH[1] * 60)) ;;
*) duration=$((BASH_REMATCH[1])) ;;
esac
((duration >= 20)) || usage

loss=${SOFTNIC_SOAK_LOSS:-0.5}
nclients=${SOFTNIC_SOAK_CLIENTS:-2}
kill_every=${SOFTNIC_SOAK_KILL_EVERY:-4}
interval=${SOFTNIC_SOAK_INTERVAL:-10}
warmup=${SOFTNIC_SOAK_WARMUP:-300}
((warmup <= duration / 2)) || warmup=$((duration / 2))
out=${SOFTNIC_SOAK_OUT:-/tmp/softnic-soak-$(date +%Y%m%d-%H%M%S)}
export SOFTNIC_NS_PREFIX=${SOFTNIC_NS_PREFIX:-snsoak}
export SOFTNIC_METRICS=127.0.0.1:9479 # each daemon's own namespace
scheme=gbn
mtu=1024
tests=(write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat)

# shellcheck source=scripts/testbed-lib.sh
source scripts/testbed-lib.sh
why=$(no_testbed "$loss")
if [ -n "$why" ]; then
	echo "soak: cannot run here: $why" >&2
	exit 2
fi
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)

# shellcheck source=scripts/lib.sh
source scripts/lib.sh
loops=()
finish() {
	local p
	for p in "${loops[@]}"; do kill "$p" 2>/dev/null || true; done
	cp "$work"/*.log "$out/" 2>/dev/null || true
	cleanup
}
trap finish EXIT INT TERM

build
bash "$tb" up >/dev/null
ip netns exec "$nsA" ping -c1 -W2 198.18.1.1 >/dev/null
start_daemon "$nsA" a-sw 198.18.0.1 "$work/a.sock"
start_daemon "$nsB" b-sw 198.18.1.1 "$work/b.sock"
dA=${pids[0]} dB=${pids[1]}
daemon_ns() { if [ "$1" = "$dA" ]; then echo "$nsA"; else echo "$nsB"; fi; }
impair=$(bash "$tb" loss "$loss" | tail -1)
if [ -n "${SOFTNIC_SOAK_SCHEMES:-}" ]; then
	read -ra schemes <<<"${SOFTNIC_SOAK_SCHEMES}"
else
	read -ra schemes <<<"$("$work/softnic" run -h 2>&1 | sed -n 's/.*loss recovery of QPs that do not ask for one \[\(.*\)\].*/\1/p')"
fi
[ ${#schemes[@]} -gt 0 ] || schemes=(gbn)

echo "== soak: $duration s on the testbed ($nsA <-> $nsB), $nclients client loops, every ${kill_every}th run SIGKILLed"
echo "   impairment: $impair${SOFTNIC_NETEM:+; daemons: --netem \"$SOFTNIC_NETEM\"}"
echo "   tests: ${tests[*]}; schemes: ${schemes[*]}; samples every $interval s, mark at $warmup s; output $out"

# The loops pause between runs while the sampler samples: a sample then
# counts what the daemons hold with no client connected, so that a
# client's own descriptors and goroutines are not mistaken for a leak.
pause=$work/pause
stop=$work/stop

# run_pair LOOP N: one softnic-bench pair; appends a line to the results:
# loop run test scheme victim client_rc server_rc verdict.
run_pair() {
	local l=$1 n=$2 t s victim=none port args=() cpid spid crc=0 src=0 verdict=ok
	t=${tests[$(((n + l) % ${#tests[@]}))]}
	s=${schemes[$(((n / ${#tests[@]} + l) % ${#schemes[@]}))]}
	port=$((18600 + l))
	case $t in
	*_bw) args=(-D 2 -s 65536) ;;
	*_lat) args=(-n 300) ;;
	esac
	[ "$t" = atomic_bw ] && args=(-D 2)
	args+=(--scheme "$s" -p "$port")
	local base=$out/runs/$l-$n
	ip netns exec "$nsB" "$work/softnic-bench" "$t" "${args[@]}" --socket "$work/b.sock" >"$base.server" 2>&1 &
	spid=$!
	sleep 0.3
	ip netns exec "$nsA" "$work/softnic-bench" "$t" "${args[@]}" --socket "$work/a.sock" 198.18.1.1 >"$base.client" 2>&1 &
	cpid=$!
	if ((n % kill_every == kill_every - 1)); then
		if (((n / kill_every) % 2 == 0)); then victim=client; else victim=server; fi
		sleep "0.$((RANDOM % 9 + 1))"
		if [ "$victim" = client ]; then kill -KILL "$cpid" 2>/dev/null || true; else kill -KILL "$spid" 2>/dev/null || true; fi
	fi
	# A hang is a failure: each side gets 60 s.
	local deadline=$((SECONDS + 60))
	while { kill -0 "$cpid" || kill -0 "$spid"; } 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
	if [ "$victim" = client ] && kill -0 "$spid" 2>/dev/null && ! kill -0 "$cpid" 2>/dev/null &&
		! grep -q 'remote address' "$base.server"; then
		# The client was killed before it connected: a perftest server
		# waits for a client for ever, as ib_*_lat/bw's do. Not a hang.
		kill -KILL "$spid" 2>/dev/null || true
		verdict=unconnected
	elif kill -0 "$cpid" 2>/dev/null || kill -0 "$spid" 2>/dev/null; then
		verdict=hang
		# SIGQUIT first: a Go program prints every goroutine's stack,
		# so the run's output says where each side waited.
		kill -QUIT "$cpid" "$spid" 2>/dev/null || true
		sleep 1
		kill -KILL "$cpid" "$spid" 2>/dev/null || true
	fi
	# (wait's stderr: bash's "Killed" notice for an injected death)
	{ wait "$cpid" || crc=$?; } 2>/dev/null
	{ wait "$spid" || src=$?; } 2>/dev/null
	if [ "$verdict" = ok ]; then
		# With a side killed, the survivor may fail (its peer vanished)
		# but not hang or panic.
		if [ "$victim" = none ] && { [ "$crc" != 0 ] || [ "$src" != 0 ]; }; then verdict=fail; fi
		if grep -qE '^panic:|fatal error:|SIGSEGV' "$base.client" "$base.server"; then verdict=panic; fi
	fi
	echo "$l $n $t $s $victim $crc $src $verdict" >>"$work/results"
}

client_loop() {
	local l=$1 n=0
	while [ ! -e "$stop" ]; do
		if [ -e "$pause" ]; then
			touch "$work/idle.$l"
			sleep 0.1
			continue
		fi
		rm -f "$work/idle.$l"
		# bash's "Killed" notices of injected deaths go to a file.
		run_pair "$l" "$n" 2>>"$work/notices"
		n=$((n + 1))
	done
	touch "$work/idle.$l"
}

# metric NS NAME: a value from the daemon's /metrics in NS, without curl.
metric() {
	ip netns exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9479 && printf "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n" >&3 && cat <&3' 2>/dev/null |
		awk -v n="$2" '$1 == n {print $2; exit}'
}
sample_one() { # PID NS -> rss_kb,fds,goroutines
	local rss fds g
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status")
	fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l)
	g=$(metric "$2" go_goroutines)
	echo "$rss,$fds,${g:-}"
}

csv=$out/samples.csv
echo "elapsed_s,a_rss_kb,a_fds,a_goroutines,b_rss_kb,b_fds,b_goroutines,runs" >"$csv"
: >"$work/results"
for ((l = 0; l < nclients; l++)); do
	client_loop "$l" &
	loops+=($!)
done

t0=$SECONDS
next=$((t0 + interval))
dead=
while :; do
	now=$SECONDS
	if ((now - t0 >= duration)); then touch "$stop"; fi
	if ((now >= next)) || [ -e "$stop" ]; then
		touch "$pause"
		# Wait for every loop to finish its run (at most ~65 s).
		for ((l = 0; l < nclients; l++)); do
			while [ ! -e "$work/idle.$l" ]; do sleep 0.1; done
		done
		sleep 1 # the daemons' drops of the last clients
		for p in "$dA" "$dB"; do [ -e "/proc/$p" ] || dead+=" $(daemon_ns "$p")"; done
		[ -z "$dead" ] || break
		row="$((SECONDS - t0)),$(sample_one "$dA" "$nsA"),$(sample_one "$dB" "$nsB"),$(wc -l <"$work/results")"
		echo "$row" >>"$csv"
		echo "   sample $row"
		rm -f "$pause" "$work"/idle.*
		next=$((SECONDS + interval))
		[ ! -e "$stop" ] || break
	fi
	sleep 0.5
done
touch "$stop"
rm -f "$pause"
for p in "${loops[@]}"; do wait "$p" 2>/dev/null || true; done
loops=()
cp "$work/results" "$out/results.txt"
cp "$work/$nsA.log" "$work/$nsB.log" "$out/" 2>/dev/null || true

# Summary.
fails=0
echo "== soak summary ($out)"
runs=$(wc -l <"$work/results")
killed=$(awk '$5 != "none"' "$work/results" | wc -l)
echo "   runs: $runs, of which $killed with a side SIGKILLed; per test:"
awk '{n[$3]++; if ($8 == "ok") ok[$3]++} END {for (t in n) printf "     %-10s %d runs, %d ok\n", t, n[t], ok[t] + 0}' "$work/results" | sort
if [ -n "$dead" ]; then
	echo "   FAIL: daemon died:$dead"
	fails=$((fails + 1))
fi
awk -F, -v mark="$warmup" -v limit=10 '
NR == 1 {for (i = 2; i <= 7; i++) name[i] = $i; next}
$1 >= mark && !seen {seen = 1; for (i = 2; i <= 7; i++) first[i] = $i; t1 = $1}
$1 >= mark {for (i = 2; i <= 7; i++) {if (!(i in mn) || $i < mn[i]) mn[i] = $i; if (!(i in mx) || $i > mx[i]) mx[i] = $i}; n++}
{for (i = 2; i <= 7; i++) last[i] = $i; tl = $1}
END {
	if (n < 2) {print "   FAIL: fewer than two samples after the mark"; exit 1}
	printf "   %-14s %12s %12s %8s  (%d samples from %d s on)\n", "series", "at " t1 " s", "at " tl " s", "spread", n, mark
	bad = 0
	for (i = 2; i <= 7; i++) {
		sp = mn[i] > 0 ? (mx[i] - mn[i]) / mn[i] * 100 : (mx[i] > 0 ? 100 : 0)
		flat = sp <= limit
		if (!flat) bad++
		printf "   %-14s %12s %12s %7.1f%%  %s\n", name[i], first[i], last[i], sp, flat ? "flat" : "NOT FLAT (max " mx[i] ", min " mn[i] ")"
	}
	exit bad > 0
}' "$csv" || fails=$((fails + 1))

unconnected=$(awk '$8 == "unconnected"' "$work/results" | wc -l)
[ "$unconnected" = 0 ] || echo "   $unconnected runs' client was killed before it connected; their servers, waiting for it as perftest's do, were stopped (not failures)"
unexpected=$(awk '$8 != "ok" && $8 != "unconnected"' "$work/results")
if [ -n "$unexpected" ]; then
	echo "   unexpected client failures ($(echo "$unexpected" | wc -l)): loop run test scheme killed client_rc server_rc verdict"
	echo "$unexpected" | head -20 | sed 's/^/     /'
	first=$(echo "$unexpected" | head -1 | awk '{print $1 "-" $2}')
	echo "     first one's output ($out/runs/$first.*):"
	tail -n 5 "$out/runs/$first.client" "$out/runs/$first.server" 2>/dev/null | sed 's/^/       /'
	fails=$((fails + 1))
else
	echo "   client errors other than injected deaths: 0"
fi
for ns in "$nsA" "$nsB"; do
	log=$work/$ns.log
	warns=$(grep -cE 'level=(WARN|ERROR)' "$log" || true)
	errs=$(grep -cE 'level=ERROR' "$log" || true)
	echo "   daemon $ns: $warns WARN/ERROR log lines ($errs ERROR)"
	{ grep -E 'level=(WARN|ERROR)' "$log" || true; } | sed -E 's/^time=[^ ]+ //' | sort | uniq -c | sort -rn | head -10 | sed 's/^/     /'
	[ "$errs" = 0 ] || fails=$((fails + 1))
done
echo "== soak: $([ "$fails" = 0 ] && echo PASS || echo FAIL)"
[ "$fails" = 0 ]
