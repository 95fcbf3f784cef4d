#!/usr/bin/env bash
# testbed.sh: softnic's namespace testbed, N hosts (2 by default) joined to
# a switch namespace by veth pairs, with loss injected in the middle
# (docs/architecture.md, "The testbed").
#
#   host A (${P}-a)            switch (${P}-sw)             host B (${P}-b)
#   a-sw 198.18.0.1/24  <-> sw-a 198.18.0.254/24
#        2001:db8:a::1/64        2001:db8:a::fe/64
#                                sw-b 198.18.1.254/24 <-> b-sw 198.18.1.1/24
#                                     2001:db8:b::fe/64       2001:db8:b::1/64
#
# With N hosts, host i (0-based; letter a, b, c, ...: host c is ${P}-c,
# c-sw <-> sw-c) has 198.18.<i>.1/24 and 2001:db8:<x>::1/64 where x is
# 10+i in hex (a, b, c, d, e, f, then 10, 11, ...: hosts a-f have their
# own letter), and the switch .254 and ::fe on that subnet. Two hosts are
# exactly the testbed above.
#
# The hosts route everything via the switch, which forwards IPv4 and IPv6.
# Only the benchmarking range 198.18.0.0/15 and the documentation prefix
# 2001:db8::/32 are used, and only inside these namespaces: nothing is added
# to the root namespace.
#
# Usage (as root):
#   testbed.sh up [N]        create with N hosts, 2-26 (default
#                            $SOFTNIC_HOSTS, else 2; tears down leftovers
#                            of a crashed run first)
#   testbed.sh down          remove the namespaces, their veths and processes
#                            (every host of the prefix, however many)
#   testbed.sh loss PCT      drop PCT% (0-100, fractional ok, e.g. 0.01) of
#                            forwarded frames in EVERY direction; 0 removes it
#   testbed.sh status        namespaces, addresses, loss rule
#   testbed.sh hosts [N]     one line per host, for scripts:
#                            NAME NAMESPACE IFACE IPV4 IPV6 (e.g.
#                            "a snic-a a-sw 198.18.0.1 2001:db8:a::1"): the
#                            running testbed's hosts, or N's (default
#                            $SOFTNIC_HOSTS, else 2) when it is down
#   testbed.sh exec HOST CMD...   run CMD in host a, b, c, ... or sw, e.g.
#                            testbed.sh exec a softnic netem --socket S "loss 1%"
#                            to impair what host a's daemon receives (its
#                            control socket is a file: reachable from any
#                            namespace; docs/impair.md)
#
# Environment:
#   SOFTNIC_NS_PREFIX  namespace prefix P (default "snic": snic-a, snic-sw,
#                      snic-b); tests use a unique one each, so testbeds can
#                      run in parallel. Interface names do not depend on it:
#                      each veth end is created directly inside its namespace.
#   SOFTNIC_HOSTS      the number of hosts `up` makes (2-26, default 2)
#   SOFTNIC_SWITCH     what forwards in the switch namespace: kernel (the
#                      default: the kernel's IPv4/IPv6 forwarding) or
#                      softnic: the namespace is prepared the same (the
#                      kernel still forwards what a userspace switch leaves
#                      to it) and `up` prints the `softnic switch` command
#                      to run there, a switch over AF_XDP on its ports
#   SOFTNIC_MTU        veth MTU (default 3000). RoCE path MTU 2048 needs an
#                      IP MTU of about 2048 + 40 (IPv6) + 8 (UDP) + 12 (BTH)
#                      + 16..28 (RETH/AtomicETH) + softnic's extension
#                      headers + 4 (ICRC), i.e. more than 2200; 3000 leaves
#                      room, a 3014-byte frame still fits a 4096-byte UMEM
#                      chunk, and it stays under veth's limit for driver-mode
#                      XDP of a program not built for frags (one page minus
#                      headroom, about 3.5 KB). Path MTU 1024 only needs
#                      1500. Path MTU 4096 needs about 4200: use 4500 with
#                      daemons run with --mtu 4096 (frames then cross AF_XDP
#                      in two chunks, multi-buffer; softnic's XDP program is
#                      built for frags, so veth keeps driver mode). Every
#                      veth end gets the MTU, the switch namespace's too.
#
# Loss: the sender's own interface is useless for this, because AF_XDP
# transmit bypasses its qdisc; so loss is applied on the switch, to frames
# forwarded either way, which hits data and ACK/NAK frames alike. sch_netem
# is used where the kernel has it (egress of every switch port: this drops
# ARP/ND too); otherwise an nftables forward-chain rule
# `numgen random mod 1000000 < K drop` (resolution 0.0001%, only forwarded
# IP traffic). The command prints which one ran.
#
# Offloads: with ethtool present, TSO/GSO/GRO and TX checksum offload are
# turned off on every veth, so a frame the kernel sends arrives as it would
# on a wire: no GSO super-frames bigger than a UMEM chunk, no
# CHECKSUM_PARTIAL UDP checksums in frames an AF_XDP socket receives. Without
# ethtool they stay on (printed); softnic's own AF_XDP frames are unaffected
# either way, only kernel-sent baseline traffic is.
set -euo pipefail

prefix=${SOFTNIC_NS_PREFIX:-snic}
mtu=${SOFTNIC_MTU:-3000}

# Namespace names stay <= 15 characters like interface names, so the prefix
# is short and plain.
if [[ ! $prefix =~ ^[a-z][a-z0-9]{0,11}$ ]]; then
	echo "testbed: SOFTNIC_NS_PREFIX must match [a-z][a-z0-9]{0,11}, got '$prefix'" >&2
	exit 2
fi
if [[ ! $mtu =~ ^[0-9]+$ ]] || ((mtu < 1280 || mtu > 65535)); then
	echo "testbed: SOFTNIC_MTU must be 1280..65535 (IPv6 minimum), got '$mtu'" >&2
	exit 2
fi

ns_sw=$prefix-sw
nft_table=softnic_loss
letters=abcdefghijklmnopqrstuvwxyz
switch_mode=${SOFTNIC_SWITCH:-kernel}
case $switch_mode in
kernel | softnic) ;;
*)
	echo "testbed: SOFTNIC_SWITCH must be kernel or softnic, got '$switch_mode'" >&2
	exit 2
	;;
esac

die() {
	echo "testbed: $*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "needs '$1' (apt-get install -y $2)"
}

ns_exists() {
	[[ -e /run/netns/$1 ]]
}

# nsysctl NS KEY VALUE writes a sysctl inside NS through /proc (procps's
# sysctl may be missing; /proc/sys/net is per network namespace).
nsysctl() {
	ip netns exec "$1" sh -c "echo $3 > /proc/sys/${2//.//}"
}

# check_count N: N is a host count testbed.sh makes.
check_count() {
	[[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= 2 && 10#$1 <= ${#letters})) ||
		die "the host count must be 2..${#letters}, got '$1'"
}

# host_letter I, host_v4 I, host_v6net I: host I's name, IPv4 subnet's
# third octet and IPv6 /64's third group (10+I in hex: a..f, then 10, 11...).
host_letter() { echo "${letters:$1:1}"; }
host_v6net() { printf '%x' $((10 + $1)); }

# live_hosts: the letters of the hosts whose namespaces exist, in order.
live_hosts() {
	local i l
	for ((i = 0; i < ${#letters}; i++)); do
		l=${letters:i:1}
		ns_exists "$prefix-$l" && echo "$l"
	done
	return 0
}

# all_ns: every namespace of this prefix that exists, hosts and switch.
all_ns() {
	local l
	for l in $(live_hosts); do echo "$prefix-$l"; done
	ns_exists "$ns_sw" && echo "$ns_sw"
	return 0
}

host_ns() {
	local l
	case $1 in
	sw | "$ns_sw")
		echo "$ns_sw"
		return
		;;
	esac
	l=${1#"$prefix"-}
	[[ $l =~ ^[a-z]$ ]] || die "unknown host '$1' (a, b, ... or sw)"
	echo "$prefix-$l"
}

cmd_down() {
	local ns pids pid
	for ns in $(all_ns); do
		ns_exists "$ns" || continue
		# A namespace outlives `ip netns del` while a process is inside,
		# so end those (daemons a test started); never our caller.
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		for pid in $pids; do
			[[ $pid == "$$" || $pid == "$PPID" ]] && continue
			kill -TERM "$pid" 2>/dev/null || true
		done
		# Deleting a namespace deletes its veth ends, and with them
		# the peers in the neighbouring namespaces.
		ip netns del "$ns"
	done
}

offloads_off() {
	local ns=$1 dev=$2
	if command -v ethtool >/dev/null 2>&1; then
		ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off tx off >/dev/null 2>&1 ||
			echo "testbed: ethtool -K $dev failed; offloads left as they were" >&2
		return 0
	fi
	return 1
}

# wait_oper_up waits until every veth end reports operstate UP. Carrier
# comes up asynchronously (linkwatch), and until it does IPv6 holds packets
# back (neighbour discovery on a not-yet-running link): the first pings
# right after `up` took up to a second without this wait.
wait_oper_up() {
	local tries pair ns dev
	for pair in "$@"; do
		read -r ns dev <<<"$pair"
		for ((tries = 0; ; tries++)); do
			[[ $(ip -n "$ns" -br link show dev "$dev") == *" UP "* ]] && break
			((tries < 100)) || die "$dev in $ns did not come up within 5 s"
			sleep 0.05
		done
	done
}

cmd_up() {
	need ip iproute2
	local n=${1:-${SOFTNIC_HOSTS:-2}}
	check_count "$n"
	n=$((10#$n))
	cmd_down
	# A half-built testbed is worse than none: if any step fails (set -e
	# exits), the EXIT trap removes what was made.
	trap 'echo "testbed: up failed, removing it" >&2; cmd_down' EXIT

	local ns i l v6 ports=() pairs=() summary=()
	local hosts_ns=()
	for ((i = 0; i < n; i++)); do hosts_ns+=("$prefix-$(host_letter "$i")"); done
	for ns in "${hosts_ns[0]}" "$ns_sw" "${hosts_ns[@]:1}"; do
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		# New interfaces inherit "default": no duplicate address
		# detection, so IPv6 addresses (link-local too) work at once.
		nsysctl "$ns" net.ipv6.conf.default.accept_dad 0
		nsysctl "$ns" net.ipv6.conf.all.accept_dad 0
	done

	for ((i = 0; i < n; i++)); do
		l=$(host_letter "$i")
		ns=$prefix-$l
		v6=$(host_v6net "$i")
		ip -n "$ns" link add "$l-sw" mtu "$mtu" type veth peer name "sw-$l" netns "$ns_sw" mtu "$mtu"
		ip -n "$ns" addr add "198.18.$i.1/24" dev "$l-sw"
		ip -n "$ns" addr add "2001:db8:$v6::1/64" dev "$l-sw" nodad
		ip -n "$ns_sw" addr add "198.18.$i.254/24" dev "sw-$l"
		ip -n "$ns_sw" addr add "2001:db8:$v6::fe/64" dev "sw-$l" nodad
		pairs+=("$ns $l-sw" "$ns_sw sw-$l")
		ports+=(--port "sw-$l")
		summary+=("$ns (198.18.$i.1, 2001:db8:$v6::1)")
	done

	local offloads=on
	local pair dev
	for pair in "${pairs[@]}"; do
		read -r ns dev <<<"$pair"
		if offloads_off "$ns" "$dev"; then offloads=off; fi
		ip -n "$ns" link set "$dev" up
	done

	for ((i = 0; i < n; i++)); do
		ns=$prefix-$(host_letter "$i")
		ip -n "$ns" route add default via "198.18.$i.254"
		ip -n "$ns" -6 route add default via "2001:db8:$(host_v6net "$i")::fe"
	done
	# Forwarding stays on in softnic mode too: a userspace switch takes
	# RoCE over AF_XDP and leaves the rest (ARP, ND, ping, TCP for the
	# connection exchange) to the kernel.
	nsysctl "$ns_sw" net.ipv4.ip_forward 1
	nsysctl "$ns_sw" net.ipv6.conf.all.forwarding 1
	wait_oper_up "${pairs[@]}"

	trap - EXIT
	if [[ $offloads == on ]]; then
		echo "testbed: ethtool not found: veth offloads (TSO/GSO/GRO, TX checksum) left on"
	fi
	if ((n == 2)); then
		echo "testbed: up: ${summary[0]} <-> $ns_sw <-> ${summary[1]}, MTU $mtu, offloads $offloads"
	else
		local all=${summary[0]} h
		for h in "${summary[@]:1}"; do all+=", $h"; done
		echo "testbed: up: $n hosts around $ns_sw: $all, MTU $mtu, offloads $offloads"
	fi
	if [[ $switch_mode == softnic ]]; then
		echo "testbed: switch mode softnic: the kernel forwards until a userspace switch runs; start it with"
		echo "  ip netns exec $ns_sw softnic switch ${ports[*]}"
	fi
}

# switch_ports: the switch's ports that exist (sw-a, sw-b, ...).
switch_ports() {
	local l
	for l in $(live_hosts); do
		ip -n "$ns_sw" link show dev "sw-$l" >/dev/null 2>&1 && echo "sw-$l"
	done
	return 0
}

# loss_ppm PCT prints PCT% as parts per million (integer), in pure bash so
# no awk/bc is needed. Digits past the fourth decimal are below the rule's
# resolution and are dropped.
loss_ppm() {
	local pct=$1 int frac
	[[ $pct =~ ^([0-9]{1,3})(\.([0-9]*))?$ ]] || die "loss: PCT must be a number 0..100, got '$pct'"
	int=${BASH_REMATCH[1]}
	frac=${BASH_REMATCH[3]:-}
	frac=${frac:0:4}
	while ((${#frac} < 4)); do frac+=0; done
	local ppm=$((10#$int * 10000 + 10#$frac))
	((ppm <= 1000000)) || die "loss: PCT must be at most 100, got '$pct'"
	echo "$ppm"
}

loss_clear() {
	local dev
	for dev in $(switch_ports); do
		ip netns exec "$ns_sw" tc qdisc del dev "$dev" root 2>/dev/null || true
	done
	if command -v nft >/dev/null 2>&1; then
		ip netns exec "$ns_sw" nft delete table inet "$nft_table" 2>/dev/null || true
	fi
}

try_netem() {
	local pct=$1
	command -v tc >/dev/null 2>&1 || return 1
	# A distribution kernel has sch_netem as a module; tc would load it
	# itself on most systems, modprobe makes sure.
	if command -v modprobe >/dev/null 2>&1; then
		modprobe -q sch_netem 2>/dev/null || true
	fi
	local dev any=1
	for dev in $(switch_ports); do
		ip netns exec "$ns_sw" tc qdisc replace dev "$dev" root netem loss "$pct%" 2>/dev/null || return 1
		any=0
	done
	return $any
}

cmd_loss() {
	[[ $# -eq 1 ]] || die "usage: testbed.sh loss PCT"
	ns_exists "$ns_sw" || die "testbed $prefix is not up"
	local pct=$1 ppm
	ppm=$(loss_ppm "$pct")
	loss_clear
	if ((ppm == 0)); then
		echo "testbed: loss off"
		return
	fi
	if try_netem "$pct"; then
		echo "testbed: loss $pct% both directions via netem (sch_netem on $ns_sw $(switch_ports | paste -sd, | sed 's/,/, /g; s/\(.*\), /\1 and /') egress)"
		return
	fi
	loss_clear
	need nft nftables
	# numgen's result is 0..999999, so 100% is a plain drop (nft rejects a
	# comparison with a value out of that range).
	local rule="numgen random mod 1000000 < $ppm "
	((ppm < 1000000)) || rule=""
	ip netns exec "$ns_sw" nft -f - <<EOF
table inet $nft_table {
	chain forward {
		type filter hook forward priority filter; policy accept;
		${rule}counter drop
	}
}
EOF
	echo "testbed: loss $pct% both directions via nftables (sch_netem not available): '${rule}drop' in the forward chain of $ns_sw"
}

cmd_status() {
	local ns any=0
	for ns in $(all_ns); do
		ns_exists "$ns" || continue
		any=1
		echo "== $ns"
		ip -n "$ns" -br addr show
	done
	if ((any == 0)); then
		echo "testbed $prefix: down"
		return
	fi
	echo "== loss ($ns_sw)"
	local rule=""
	rule+=$(ip netns exec "$ns_sw" tc qdisc show 2>/dev/null | grep netem || true)
	if command -v nft >/dev/null 2>&1; then
		rule+=$(ip netns exec "$ns_sw" nft list table inet "$nft_table" 2>/dev/null || true)
	fi
	echo "${rule:-none}"
}

cmd_exec() {
	[[ $# -ge 2 ]] || die "usage: testbed.sh exec HOST CMD..."
	local ns
	ns=$(host_ns "$1")
	shift
	ns_exists "$ns" || die "namespace $ns does not exist (testbed.sh up)"
	exec ip netns exec "$ns" "$@"
}

cmd_hosts() {
	local l i n live
	live=$(live_hosts)
	if [[ -n $live ]]; then
		for l in $live; do
			i=${letters%%"$l"*}
			i=${#i}
			echo "$l $prefix-$l $l-sw 198.18.$i.1 2001:db8:$(host_v6net "$i")::1"
		done
		return
	fi
	n=${1:-${SOFTNIC_HOSTS:-2}}
	check_count "$n"
	for ((i = 0; i < 10#$n; i++)); do
		l=$(host_letter "$i")
		echo "$l $prefix-$l $l-sw 198.18.$i.1 2001:db8:$(host_v6net "$i")::1"
	done
}

usage() {
	sed -n '/^# Usage/,/^# Environment/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}

[[ $# -ge 1 ]] || usage
if [[ $1 == hosts ]]; then # reads /run/netns only: no root needed
	shift
	cmd_hosts "$@"
	exit
fi
if [[ $(id -u) -ne 0 ]]; then
	die "must run as root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
fi
cmd=$1
shift
case $cmd in
up)
	[[ $# -le 1 ]] || usage
	cmd_up "$@"
	;;
down) cmd_down ;;
loss) cmd_loss "$@" ;;
status) cmd_status ;;
exec) cmd_exec "$@" ;;
*) usage ;;
esac
