# shellcheck shell=bash
# testbed-lib.sh: what every script on the namespace testbed checks before
# it starts, and how it stops what it started. Sourced, not run, and
# without side effects: lib.sh and sweep-lib.sh source it, demo.sh before
# lib.sh, testbed-incast.sh and switch-cost.sh on their own.
#
# no_testbed [PCT...]: prints why the testbed cannot run here (nothing
# when it can), naming the Debian package to install: root, iproute2's
# ip, iputils' ping (the scripts resolve the next hops with it before the
# daemons start), a kernel with BPF; when a PCT (the loss rates the
# caller will set) is not 0, a way for testbed.sh to drop frames on the
# switch (sch_netem, else nftables).
#
# testbed_hosts: prints the number of hosts the testbed is brought up
# with, SOFTNIC_HOSTS (2-26; testbed.sh up reads the same variable), 2
# when unset; a bad value is reported and returns 2. lib.sh and
# sweep-lib.sh export it, so a script takes a host count from its caller
# and passes it to testbed.sh; the scripts that run today use hosts a and
# b only, whatever the count.
#
# no_embedded WHY: call it where a script is about to run its embedded
# counterpart instead of the testbed. With SOFTNIC_NO_EMBEDDED=1 it
# prints WHY and exits 1: the Go tests that run a script set it, so that
# a testbed that cannot come up fails the test at once instead of
# spending minutes in the embedded fabric. Unset (a user), it returns
# and the fallback runs.

no_testbed() {
	if [ "$(id -u)" != 0 ]; then
		echo "not root (the two-host testbed needs network namespaces and XDP)"
	elif ! command -v ip >/dev/null; then
		echo "no 'ip' command (apt-get install -y iproute2)"
	elif ! command -v ping >/dev/null; then
		echo "no 'ping' command (apt-get install -y iputils-ping)"
	elif ! [ -d /sys/fs/bpf ] && ! [ -e /proc/sys/net/core/bpf_jit_enable ]; then
		echo "this kernel has no BPF"
	elif lossy "$@" && ! can_drop; then
		echo "no way to drop frames on the switch: no 'nft' command (apt-get install -y nftables) and no sch_netem"
	fi
}

# lossy PCT...: some PCT is not 0.
lossy() {
	local l
	for l in "$@"; do
		[[ $l =~ ^0*(\.0*)?$ ]] || return 0
	done
	return 1
}

# can_drop: testbed.sh loss can work here: nft, or tc with sch_netem
# loaded or loadable.
can_drop() {
	command -v nft >/dev/null && return 0
	command -v tc >/dev/null || return 1
	[ -d /sys/module/sch_netem ] || { command -v modprobe >/dev/null && modprobe -n -q sch_netem 2>/dev/null; }
}

no_embedded() {
	if [ "${SOFTNIC_NO_EMBEDDED:-}" = 1 ]; then
		echo "${me:-testbed}: $1; not running the embedded fallback (SOFTNIC_NO_EMBEDDED=1)" >&2
		exit 1
	fi
}

testbed_hosts() {
	local n=${SOFTNIC_HOSTS:-2}
	if ! [[ $n =~ ^[0-9]+$ ]] || ((10#$n < 2 || 10#$n > 26)); then
		echo "${me:-testbed}: SOFTNIC_HOSTS must be 2..26, got '$n'" >&2
		return 2
	fi
	echo $((10#$n))
}

# stop_pids PID...: SIGTERM, then SIGKILL after 5 s; waits for each, so
# that the next daemons can attach XDP to the same interfaces.
stop_pids() {
	local p
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "$@"; do
		for _ in $(seq 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
