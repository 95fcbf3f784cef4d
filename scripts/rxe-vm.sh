#!/usr/bin/env bash
# rxe-vm.sh: a QEMU guest running Linux's software RoCE NIC (rdma_rxe) with
# Debian's unmodified rdma-core programs, for interop runs against softnic
# (docs/interop.md). The guest is Debian bookworm's kernel and an initramfs
# made here: busybox, rdma-core's programs and libraries (ibverbs-utils,
# perftest, rdmacm-utils, ibverbs-providers' librxe), iproute2's ip, tc and
# rdma, ethtool, and the kernel modules rxe needs. No disk image, no
# network access from the guest beyond its one NIC.
#
# Usage (as root):
#   rxe-vm.sh fetch           apt-get download the packages into $cache/debs
#                             (the kernel, busybox-static, rdma-core's
#                             packages, perftest, iproute2, ethtool); no
#                             installation
#   rxe-vm.sh image           build $cache/vmlinuz and $cache/rxe.cpio.gz
#                             from them (and $cache/versions)
#   rxe-vm.sh prepare         fetch what is missing from the cache and build
#                             the image unless this rxe-vm.sh built the one
#                             there (what .ci/run does)
#   rxe-vm.sh versions        print the guest's package versions
#   rxe-vm.sh net NS IFACE TAP
#                             in namespace NS: make tap device TAP and a
#                             bridge rxebr joining it to IFACE, whose
#                             addresses are removed (the guest takes the
#                             host's place behind IFACE); offloads off, long
#                             queue on TAP
#   rxe-vm.sh offloads NS DEV...
#                             checksum offload and TSO/GSO/GRO off on DEVs
#                             in NS (with the guest's ethtool when the host
#                             has none)
#   rxe-vm.sh run DIR         boot the guest in the foreground (run it in
#                             the namespace of its tap device: `ip netns
#                             exec NS rxe-vm.sh run DIR &`); DIR gets the
#                             console log (console.log), the control
#                             channel's FIFOs (ctl.in, ctl.out), qemu.pid
#   rxe-vm.sh wait DIR [SECS] wait until the guest's rxe0 is up and it reads
#                             commands (default 300 s); prints its report
#   rxe-vm.sh guest DIR CMD...
#                             run the shell command CMD in the guest, print
#                             its output, exit with its status (124: no
#                             answer within $SOFTNIC_RXE_TIMEOUT s, default
#                             300)
#   rxe-vm.sh stop DIR        power the guest off (kill QEMU if it does not
#                             go within 30 s)
#
# Environment:
#   SOFTNIC_CACHE      cache directory (default /var/cache/softnic-rxe)
#   SOFTNIC_RXE_KERNEL the kernel package (default: the one Debian's
#                      linux-image-amd64 depends on)
#   SOFTNIC_RXE_IP     the guest's eth0 address/prefix (default
#                      198.18.1.1/24: testbed.sh's host B)
#   SOFTNIC_RXE_GW     its default gateway (default 198.18.1.254)
#   SOFTNIC_RXE_MTU    its MTU (default 3000, testbed.sh's)
#   SOFTNIC_RXE_TAP    the tap device QEMU opens (default rxetap)
#   SOFTNIC_RXE_MEM    guest memory (default 1G)
#   SOFTNIC_RXE_APPEND more kernel command line for the guest
#
# The guest's control channel is its second serial port (ttyS1), a QEMU
# pipe chardev on DIR/ctl.in and DIR/ctl.out: the guest reads one command a
# line, runs it in a subshell (stdin /dev/null) and answers
#   @@RXE-BEGIN TAG / output / @@RXE-END TAG STATUS
# The kernel's console (ttyS0) goes to DIR/console.log. Inside the guest a
# command may use these shell functions of its /init:
#   bg NAME CMD...      start CMD in the background, output to /tmp/NAME.out
#   fg NAME [SECS]      wait for it (default 300 s), print its output, return
#                       its status (124 and a kill on timeout)
#   listening PORT [SECS]  wait until a TCP socket listens on PORT
#   counters            rxe0's hw_counters, one "name value" a line
#
# Checked facts about rxe under QEMU TCG that the guest's setup follows:
# rxe needs crc32_generic loaded (no modprobe in the initramfs); checksum
# offload and TSO/GSO off on eth0 and on every device of the path (the
# virtio NIC is made without offloads); a long queue (txqueuelen 10000) on
# eth0 and the tap, or they overrun; pfifo_fast on eth0, because fq_codel
# drops frames rxe has already counted as sent; rxe's RoCEv2 GID of the
# IPv4 address is index 1 (index 0 is the IPv6 link-local one). The
# guest keeps time by the HPET (clocksource=hpet), QEMU's clock: its TSC,
# calibrated at boot on a loaded host, ran its clock at 0.6 of the
# host's, and its timeouts (timeout, fg) with it.
set -euo pipefail

cache=${SOFTNIC_CACHE:-/var/cache/softnic-rxe}
debs=$cache/debs
arch=x86_64-linux-gnu

die() {
	echo "rxe-vm: $*" >&2
	exit 1
}

usage() {
	sed -n '/^# Usage/,/^# Environment/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}

# The userspace packages whose programs and libraries the guest gets.
user_pkgs=(busybox-static ibverbs-utils perftest rdmacm-utils ibverbs-providers
	libibverbs1 librdmacm1 iproute2 ethtool)

# The modules the guest loads (with the modules each one's depends= names):
# rxe, the user verbs and RDMA CM interfaces, rxe's CRC, the NIC.
want_mods=(crc32_generic rdma_rxe ib_uverbs rdma_ucm virtio_net virtio_pci)

kernel_pkg() {
	if [[ -n ${SOFTNIC_RXE_KERNEL:-} ]]; then
		echo "$SOFTNIC_RXE_KERNEL"
		return
	fi
	local p
	p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
	if [[ -z $p ]]; then
		# A fresh machine has no package lists yet.
		apt-get update -qq >&2 || true
		p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
	fi
	[[ -n $p ]] || die "cannot resolve linux-image-amd64's kernel package (apt-get update? or set SOFTNIC_RXE_KERNEL)"
	echo "$p"
}

cmd_fetch() {
	command -v apt-get >/dev/null || die "needs apt-get (a Debian host)"
	local k
	k=$(kernel_pkg)
	mkdir -p "$debs"
	echo "rxe-vm: downloading $k ${user_pkgs[*]} into $debs"
	(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "$k" "${user_pkgs[@]}") || die "apt-get download failed"
	echo "$k" >"$debs/kernel"
}

# deb NAME: the newest downloaded .deb of package NAME.
deb() {
	local f
	f=$(ls -1 "$debs/$1"_*.deb 2>/dev/null | sort -V | tail -1)
	[[ -n $f ]] || die "no $1 package in $debs (rxe-vm.sh fetch)"
	echo "$f"
}

cmd_prepare() {
	local p missing=0
	for p in "${user_pkgs[@]}" "$(cat "$debs/kernel" 2>/dev/null || echo none)"; do
		ls "$debs/$p"_*.deb >/dev/null 2>&1 || missing=1
	done
	((missing)) && cmd_fetch
	if [[ -f $cache/rxe.cpio.gz && $(sha256sum <"$0") == "$(cat "$cache/image.sum" 2>/dev/null)" ]]; then
		echo "rxe-vm: the image in $cache is this rxe-vm.sh's"
		cat "$cache/versions"
		return
	fi
	cmd_image
}

cmd_versions() {
	[[ -f $cache/versions ]] || die "no image in $cache (rxe-vm.sh fetch && rxe-vm.sh image)"
	cat "$cache/versions"
}

# copy_elf STAGE ROOT FILE...: FILEs (paths under STAGE) into ROOT at the
# same path, with every shared library they need (ldd, libraries of the
# stage first, then the host's).
copy_elf() {
	local stage=$1 root=$2 f lib out
	shift 2
	for f in "$@"; do
		[[ -e $stage$f ]] || die "$f missing from the extracted packages"
		mkdir -p "$root$(dirname "$f")"
		cp -L "$stage$f" "$root$f"
		out=$(LD_LIBRARY_PATH=$stage/usr/lib/$arch:$stage/lib/$arch ldd "$stage$f" 2>&1) ||
			die "ldd $f: $out"
		if grep -q "not found" <<<"$out"; then
			die "$f needs $(awk '/not found/ {print $1}' <<<"$out" | paste -sd' '), found neither in the packages nor on the host"
		fi
		# A library of the stage goes to its path in the guest: the
		# stage prefix stripped.
		while read -r lib; do
			[[ -e $root${lib#"$stage"} ]] && continue
			mkdir -p "$root$(dirname "${lib#"$stage"}")"
			cp -L "$lib" "$root${lib#"$stage"}"
		done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3; next} $1 ~ /^\// {print $1}' <<<"$out")
	done
}

cmd_image() {
	command -v dpkg-deb >/dev/null || die "needs dpkg-deb (dpkg)"
	local k stage root kver list
	k=$(cat "$debs/kernel" 2>/dev/null) || die "nothing fetched (rxe-vm.sh fetch)"
	stage=$(mktemp -d "$cache/stage.XXXXXX")
	root=$(mktemp -d "$cache/root.XXXXXX")
	tmpdirs=("$stage" "$root")
	trap 'rm -rf "${tmpdirs[@]}"' EXIT
	echo "rxe-vm: extracting $k ${user_pkgs[*]}"
	dpkg-deb -x "$(deb "$k")" "$stage/kernel"
	local p
	for p in "${user_pkgs[@]}"; do dpkg-deb -x "$(deb "$p")" "$stage"; done
	kver=$(ls "$stage/kernel/lib/modules")
	[[ $(wc -w <<<"$kver") == 1 ]] || die "expected one kernel version in $k, got: $kver"
	cp "$stage/kernel/boot/vmlinuz-$kver" "$cache/vmlinuz.new"

	# Modules: every wanted one that is a module (not built in), after its
	# dependencies (the depends= of each module's .modinfo: the package
	# has no modules.dep, depmod makes it at install), decompressed if need
	# be (busybox's insmod takes plain .ko).
	local mdir=$stage/kernel/lib/modules/$kver f n
	declare -A modpath=() seen=()
	while read -r f; do
		n=${f##*/}
		n=${n%%.ko*}
		modpath[${n//-/_}]=$f
	done < <(find "$mdir/kernel" -name '*.ko*')
	mkdir -p "$root/lib/modules"
	list=()
	visit() {
		local m=$1 f=${modpath[$1]:-} d base
		[[ -n ${seen[$m]:-} ]] && return
		seen[$m]=1
		if [[ -z $f ]]; then
			grep -q "/${m//_/[_-]}\.ko\$" "$mdir/modules.builtin" ||
				die "module $m is neither a module nor built into $kver"
			return
		fi
		base=${f##*/}
		case $base in
		*.ko.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
		*.ko.zst) zstd -qdc "$f" >"$root/lib/modules/$m.ko" ;;
		*.ko.gz) gzip -dc "$f" >"$root/lib/modules/$m.ko" ;;
		*.ko) cp "$f" "$root/lib/modules/$m.ko" ;;
		*) die "unexpected module file $f" ;;
		esac
		for d in $(tr '\0' '\n' <"$root/lib/modules/$m.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
			visit "${d//-/_}"
		done
		list+=("$m.ko")
	}
	local m
	for m in "${want_mods[@]}"; do visit "$m"; done
	printf '%s\n' "${list[@]}" >"$root/lib/modules/order"

	# Userspace: busybox for the shell and the basics; rdma-core's,
	# perftest's and iproute2's programs with their libraries.
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/sbin,proc,sys,dev,tmp,etc,root}
	cp "$stage/bin/busybox" "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	local progs=() f
	for f in "$stage"/usr/bin/ibv_* "$stage"/usr/bin/ib_* "$stage"/usr/bin/rping \
		"$stage"/usr/bin/ucmatose "$stage"/usr/bin/udaddy "$stage"/usr/bin/rdma_*; do
		[[ -f $f ]] && progs+=("${f#"$stage"}")
	done
	local tool d src
	for tool in ip tc rdma ethtool; do
		src=
		for d in /sbin /usr/sbin /bin /usr/bin; do
			[[ -f $stage$d/$tool ]] && src=$d/$tool && break
		done
		[[ -n $src ]] || die "$tool missing from the extracted packages"
		progs+=("$src")
		# iproute2's programs first in PATH, ahead of busybox's applets.
		ln -sf "$src" "$root/usr/local/sbin/$tool"
	done
	copy_elf "$stage" "$root" "${progs[@]}"
	# rxe's provider: libibverbs finds it through /etc/libibverbs.d.
	mkdir -p "$root/etc/libibverbs.d"
	cp "$stage/etc/libibverbs.d/rxe.driver" "$root/etc/libibverbs.d/"
	local prov
	prov=$(ls "$stage/usr/lib/$arch/libibverbs/"librxe-rdmav*.so)
	copy_elf "$stage" "$root" "${prov#"$stage"}"
	# glibc dlopens libgcc_s for pthread_cancel and pthread_exit, which
	# ldd does not list: without it rdmacm-utils' rping aborts at its
	# end ("libgcc_s.so.1 must be installed for pthread_exit to work").
	local gcc_s
	gcc_s=$(ldconfig -p | awk '$1 == "libgcc_s.so.1" && $NF ~ /'"$arch"'/ {print $NF; exit}')
	[[ -n $gcc_s ]] || die "the host has no libgcc_s.so.1 (libgcc-s1)"
	mkdir -p "$root/lib/$arch"
	cp -L "$gcc_s" "$root/lib/$arch/libgcc_s.so.1"
	[[ -d $stage/etc/iproute2 ]] && cp -r "$stage/etc/iproute2" "$root/etc/"
	[[ -d $stage/usr/share/iproute2 ]] && mkdir -p "$root/usr/share" && cp -r "$stage/usr/share/iproute2" "$root/usr/share/"
	echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
	echo "root:x:0:" >"$root/etc/group"

	local ver_rdma ver_perf ver_bb ver_ip ver_eth
	pkgver() { dpkg-deb -f "$(deb "$1")" Version; }
	ver_rdma=$(pkgver ibverbs-utils)
	ver_perf=$(pkgver perftest)
	ver_bb=$(pkgver busybox-static)
	ver_ip=$(pkgver iproute2)
	ver_eth=$(pkgver ethtool)
	{
		echo "kernel $k $(dpkg-deb -f "$(deb "$k")" Version) ($kver)"
		echo "rdma-core $ver_rdma (ibverbs-utils, ibverbs-providers $(pkgver ibverbs-providers), rdmacm-utils $(pkgver rdmacm-utils))"
		echo "perftest $ver_perf"
		echo "iproute2 $ver_ip, ethtool $ver_eth, busybox-static $ver_bb"
	} >"$root/etc/rxe-versions"

	install -m 0755 /dev/stdin "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mkdir -p /bb
/bin/busybox --install -s /bb
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:/bb
# busybox's shell runs its own applets ahead of PATH: iproute2's and
# ethtool's programs by function.
ip() { /usr/local/sbin/ip "$@"; }
tc() { /usr/local/sbin/tc "$@"; }
ethtool() { /usr/local/sbin/ethtool "$@"; }
rdma() { /usr/local/sbin/rdma "$@"; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
say() { echo "rxe-init: $*" >/dev/console; }
fail() {
	say "FAILED: $*"
	echo "@@RXE-FAILED $*" >/dev/ttyS1
	poweroff -f
}
RXE_IP=198.18.1.1/24 RXE_GW=198.18.1.254 RXE_MTU=3000
[ -f /etc/rxe.conf ] && . /etc/rxe.conf
for m in $(cat /lib/modules/order); do
	insmod /lib/modules/$m || fail "insmod $m"
done
i=0
while [ ! -e /sys/class/net/eth0 ]; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "no eth0"
	sleep 0.1
done
ip link set lo up
ip link set eth0 mtu "$RXE_MTU" txqueuelen 10000 || fail "eth0 mtu/txqueuelen"
ethtool -K eth0 tx off rx off tso off gso off gro off >/dev/console 2>&1 || say "ethtool -K eth0 reported an error (fixed features stay as they are)"
ip link set eth0 up || fail "eth0 up"
ip addr add "$RXE_IP" dev eth0 || fail "address $RXE_IP"
ip route add default via "$RXE_GW" || fail "route via $RXE_GW"
tc qdisc replace dev eth0 root pfifo_fast || fail "pfifo_fast on eth0"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
i=0
while ! grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "rxe0 port not ACTIVE"
	sleep 0.1
done

# Helpers for the commands the host sends (rxe-vm.sh's usage).
bg() {
	n=$1
	shift
	rm -f /tmp/$n.rc /tmp/$n.out
	("$@" >/tmp/$n.out 2>&1; echo $? >/tmp/$n.rc) </dev/null &
	echo $! >/tmp/$n.pid
}
fg() {
	n=$1 t=${2:-300}
	while [ ! -e /tmp/$n.rc ] && [ $t -gt 0 ]; do
		sleep 1
		t=$((t - 1))
	done
	cat /tmp/$n.out 2>/dev/null
	if [ ! -e /tmp/$n.rc ]; then
		# What the program is doing, for the report: its state and
		# where in the kernel it waits.
		echo "@@RXE-TIMEOUT $n"
		for p in $(descendants "$(cat /tmp/$n.pid)"); do
			echo "pid $p: $(tr '\0' ' ' </proc/$p/cmdline)"
			grep -E '^(State|voluntary|nonvoluntary)' /proc/$p/status
			echo "wchan: $(cat /proc/$p/wchan)"
			cat /proc/$p/stack 2>/dev/null
		done
		kill -KILL $(descendants "$(cat /tmp/$n.pid)") 2>/dev/null
		return 124
	fi
	return "$(cat /tmp/$n.rc)"
}
# descendants PID: the processes under PID (busybox-static has no pgrep).
descendants() {
	for s in /proc/[0-9]*/stat; do
		read -r pid comm state ppid rest <"$s" 2>/dev/null || continue
		[ "$ppid" = "$1" ] && echo "$pid" && descendants "$pid"
	done
}
listening() {
	hex=$(printf ':%04X' "$1") t=$((${2:-60} * 10))
	while [ $t -gt 0 ]; do
		awk -v p="$hex" '$2 ~ p"$" && $4 == "0A" {f=1} END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
		sleep 0.1
		t=$((t - 1))
	done
	echo "nothing listens on port $1"
	return 1
}
counters() {
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
		echo "${f##*/} $(cat $f)"
	done
}

# The command loop runs in a child of PID 1, not in PID 1 itself: the
# processes bg starts outlive the command's subshell and are then
# reparented to PID 1, whose shell gets their SIGCHLD. busybox's read
# builtin, interrupted by a signal in the middle of a line, throws away
# the bytes it has read and starts over (shell_builtin_read's poll
# EINTR path, then readcmd's "goto again"): a command that arrived while
# a bg program exited lost its first characters, its tag with them, and
# the host waited for an answer under a tag the guest never saw. The
# loop's own children are its subshells, each waited for before the
# next read.
serve() {
	stty -F /dev/ttyS1 raw -echo
	{
		echo "@@RXE-READY $(uname -r) rxe0 $(cat /sys/class/infiniband/rxe0/ports/1/state) $(rdma link show rxe0/1 | head -1)"
		while IFS= read -r line; do
			tag=${line%% *}
			cmd=${line#* }
			echo "@@RXE-BEGIN $tag"
			echo "rxe-init: $(cut -d' ' -f1 /proc/uptime) begin $tag" >/dev/console
			(eval "$cmd") </dev/null 2>&1
			rc=$?
			echo "rxe-init: $(cut -d' ' -f1 /proc/uptime) end $tag $rc" >/dev/console
			echo "@@RXE-END $tag $rc"
		done
	} </dev/ttyS1 >/dev/ttyS1 2>&1
}
serve &
serving=$!
# PID 1 reaps the orphans until the loop ends (stop: poweroff -f).
while kill -0 $serving 2>/dev/null; do wait $serving; done
poweroff -f
INIT

	# newc cpio made by busybox's own cpio applet (the host needs no cpio).
	(cd "$root" && find . | LC_ALL=C sort | "$stage/bin/busybox" cpio -o -H newc 2>/dev/null) |
		gzip -1 >"$cache/rxe.cpio.gz.new"
	cp "$root/etc/rxe-versions" "$cache/versions.new"
	mv "$cache/vmlinuz.new" "$cache/vmlinuz"
	mv "$cache/rxe.cpio.gz.new" "$cache/rxe.cpio.gz"
	mv "$cache/versions.new" "$cache/versions"
	# run refuses an image an older rxe-vm.sh built (its /init may differ).
	sha256sum <"$0" >"$cache/image.sum"
	cp "$stage/bin/busybox" "$cache/busybox"
	cp "$root$(readlink "$root/usr/local/sbin/ethtool")" "$cache/ethtool"
	echo "rxe-vm: $cache/vmlinuz and $cache/rxe.cpio.gz ($(du -h "$cache/rxe.cpio.gz" | cut -f1)), modules: ${list[*]}"
	cat "$cache/versions"
}

ethtool_cmd() {
	if command -v ethtool >/dev/null 2>&1; then
		echo ethtool
	elif [[ -x $cache/ethtool ]]; then
		echo "$cache/ethtool"
	else
		die "needs ethtool (apt-get install -y ethtool, or rxe-vm.sh image, which keeps the guest's)"
	fi
}

cmd_offloads() {
	[[ $# -ge 2 ]] || usage
	local ns=$1 dev et
	shift
	et=$(ethtool_cmd)
	for dev in "$@"; do
		# Some features are fixed on some devices (the bridge's rx):
		# ethtool sets the others and reports those; what counts is
		# what is left on, checked below.
		ip netns exec "$ns" "$et" -K "$dev" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
		local on
		on=$(ip netns exec "$ns" "$et" -k "$dev" | awk '/^(tx-checksumming|tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):/ && $2 == "on" {print $1}')
		[[ -z $on ]] || die "$dev in $ns: still on: $on"
	done
}

cmd_net() {
	[[ $# -eq 3 ]] || usage
	local ns=$1 ifc=$2 tap=$3 mtu
	mtu=$(ip netns exec "$ns" cat "/sys/class/net/$ifc/mtu")
	ip -n "$ns" tuntap add dev "$tap" mode tap
	ip -n "$ns" link set "$tap" mtu "$mtu" txqueuelen 10000
	ip -n "$ns" link add rxebr mtu "$mtu" type bridge
	ip -n "$ns" addr flush dev "$ifc"
	ip -n "$ns" link set "$ifc" master rxebr
	ip -n "$ns" link set "$tap" master rxebr
	cmd_offloads "$ns" "$ifc" "$tap" rxebr
	ip -n "$ns" link set rxebr up
	ip -n "$ns" link set "$tap" up
}

cmd_run() {
	[[ $# -eq 1 ]] || usage
	local dir=$1
	command -v qemu-system-x86_64 >/dev/null || die "needs qemu-system-x86_64 (apt-get install -y --no-install-recommends qemu-system-x86)"
	[[ -f $cache/rxe.cpio.gz && -f $cache/vmlinuz ]] || die "no image in $cache (rxe-vm.sh fetch && rxe-vm.sh image)"
	[[ $(sha256sum <"$0") == "$(cat "$cache/image.sum" 2>/dev/null)" ]] ||
		die "the image in $cache was made by another version of rxe-vm.sh (rxe-vm.sh image)"
	mkdir -p "$dir"
	rm -f "$dir/ctl.in" "$dir/ctl.out" "$dir/mon.in" "$dir/mon.out" "$dir/console.log" "$dir/qemu.pid"
	mkfifo "$dir/ctl.in" "$dir/ctl.out" "$dir/mon.in" "$dir/mon.out"
	# This run's settings: a second cpio appended to the image (the
	# kernel unpacks concatenated archives in order).
	local conf
	conf=$(mktemp -d)
	mkdir -p "$conf/etc"
	cat >"$conf/etc/rxe.conf" <<EOF
RXE_IP=${SOFTNIC_RXE_IP:-198.18.1.1/24}
RXE_GW=${SOFTNIC_RXE_GW:-198.18.1.254}
RXE_MTU=${SOFTNIC_RXE_MTU:-3000}
EOF
	(cd "$conf" && printf '%s\n' . etc etc/rxe.conf | "$cache/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$dir/run.cpio.gz"
	rm -rf "$conf"
	cat "$cache/rxe.cpio.gz" "$dir/run.cpio.gz" >"$dir/initrd"
	local nicopts=csum=off,gso=off,guest_csum=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off
	exec qemu-system-x86_64 -accel tcg -m "${SOFTNIC_RXE_MEM:-1G}" -smp 1 \
		-display none -no-reboot \
		-chardev "pipe,id=mon,path=$dir/mon" -mon chardev=mon,mode=readline -pidfile "$dir/qemu.pid" \
		-kernel "$cache/vmlinuz" -initrd "$dir/initrd" \
		-append "console=ttyS0 panic=-1 loglevel=6 clocksource=hpet ${SOFTNIC_RXE_APPEND:-}" \
		-serial "file:$dir/console.log" \
		-chardev "pipe,id=ctl,path=$dir/ctl" -serial chardev:ctl \
		-netdev "tap,id=n0,ifname=${SOFTNIC_RXE_TAP:-rxetap},script=no,downscript=no,vhost=off" \
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:18:01:01,$nicopts"
}

qemu_alive() {
	local pid
	pid=$(cat "$1/qemu.pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null
}

# monitor DIR CMD: run the QEMU monitor (HMP) command CMD, print its answer.
monitor() {
	local dir=$1 line
	exec 6<"$dir/mon.out"
	# What was left from before.
	while IFS= read -r -t 0.2 line <&6; do :; done
	printf '%s\n' "$2" >"$dir/mon.in"
	# The monitor echoes the command with line-editing escapes: dropped.
	while IFS= read -r -t 2 line <&6; do
		[[ $line == *$'\e'* ]] || printf '%s\n' "${line%$'\r'}"
	done
	exec 6<&-
}

# diagnose DIR: what the guest is doing when it does not answer.
diagnose() {
	local dir=$1 line
	echo "rxe-vm: diagnosis at $(date +%T):"
	monitor "$dir" "info cpus"
	for _ in 1 2 3; do monitor "$dir" "info registers" | grep -E 'RIP|HLT|EFL'; sleep 0.5; done
	echo "rxe-vm: console, last lines:"
	tail -5 "$dir/console.log"
	echo "rxe-vm: probing the control channel"
	local probe=t$$x$RANDOM
	printf '%s echo probe-alive; cat /proc/uptime\n' "$probe" >"$dir/ctl.in"
	while IFS= read -r -t 30 line <&3; do
		echo "ctl: ${line%$'\r'}"
		[[ $line == "@@RXE-END $probe"* ]] && break
	done
	echo "rxe-vm: console, last lines:"
	tail -5 "$dir/console.log"
}

# read_until DIR SECS PATTERN [TAG]: read the guest's answers until a line
# matches PATTERN (a glob); with TAG, print the lines between
# "@@RXE-BEGIN TAG" and it. Prints the matching line last on fd 4.
read_until() {
	local dir=$1 secs=$2 pat=$3 tag=${4:-} line partial= begun=0 end=$((SECONDS + $2))
	exec 3<"$dir/ctl.out"
	while :; do
		local left=$((end - SECONDS))
		if ((left <= 0)); then
			echo "rxe-vm: no answer from the guest within $secs s" >&2
			diagnose "$dir" >&2
			return 124
		fi
		# A read that times out in the middle of a line leaves what
		# it got in line: kept, and the line's rest appended.
		if ! IFS= read -r -t "$((left < 5 ? left : 5))" line <&3; then
			partial+=$line
			qemu_alive "$dir" || {
				echo "rxe-vm: QEMU exited; console:" >&2
				tail -30 "$dir/console.log" >&2
				return 125
			}
			continue
		fi
		line=$partial${line%$'\r'}
		partial=
		case $line in
		$pat)
			echo "$line" >&4
			return 0
			;;
		"@@RXE-FAILED "*)
			echo "rxe-vm: guest setup ${line#@@RXE-}; console:" >&2
			tail -30 "$dir/console.log" >&2
			return 125
			;;
		"@@RXE-BEGIN $tag") [[ -n $tag ]] && begun=1 ;;
		"@@RXE-BEGIN "*)
			# Tags are t<pid>x<random>: anything else is a command
			# line the guest received damaged; its answer will not
			# carry this command's tag.
			if [[ -n $tag && ! ${line#@@RXE-BEGIN } =~ ^t[0-9]+x[0-9]+$ ]]; then
				echo "rxe-vm: the guest received a damaged command line (it began a command tagged '${line#@@RXE-BEGIN }', this one is $tag)" >&2
				return 126
			fi
			((begun)) && printf '%s\n' "$line"
			;;
		*) ((begun)) && printf '%s\n' "$line" ;;
		esac
	done
}

cmd_wait() {
	local dir=$1 secs=${2:-300} last
	for ((i = 0; i < 100; i++)); do
		[[ -p $dir/ctl.out ]] && qemu_alive "$dir" && break
		sleep 0.1
	done
	qemu_alive "$dir" || die "QEMU is not running (qemu.pid in $dir)"
	last=$(read_until "$dir" "$secs" "@@RXE-READY *" 4>&1 >/dev/null) || exit $?
	echo "${last#@@RXE-READY }"
}

cmd_guest() {
	[[ $# -ge 2 ]] || usage
	local dir=$1 tag last
	shift
	qemu_alive "$dir" || die "QEMU is not running (qemu.pid in $dir)"
	tag=t$$x$RANDOM
	printf '%s %s\n' "$tag" "$*" >"$dir/ctl.in"
	exec 5>&1
	last=$(read_until "$dir" "${SOFTNIC_RXE_TIMEOUT:-300}" "@@RXE-END $tag *" "$tag" 4>&1 >&5) || exit $?
	exit "${last##* }"
}

cmd_stop() {
	local dir=$1 pid
	pid=$(cat "$dir/qemu.pid" 2>/dev/null) || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	printf 'stop poweroff -f\n' >"$dir/ctl.in" &
	local w=$!
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$w" 2>/dev/null || true
	if kill -0 "$pid" 2>/dev/null; then
		echo "rxe-vm: the guest did not power off within 30 s; killing QEMU ($pid)" >&2
		kill "$pid"
	fi
}

[[ $# -ge 1 ]] || usage
cmd=$1
shift
case $cmd in
versions) cmd_versions ;;
guest) cmd_guest "$@" ;;
wait) [[ $# -ge 1 ]] || usage && cmd_wait "$@" ;;
*)
	[[ $(id -u) -eq 0 ]] || die "must run as root"
	case $cmd in
	fetch) cmd_fetch ;;
	prepare) cmd_prepare ;;
	image) cmd_image ;;
	net) cmd_net "$@" ;;
	offloads) cmd_offloads "$@" ;;
	run) cmd_run "$@" ;;
	stop) [[ $# -eq 1 ]] || usage && cmd_stop "$@" ;;
	*) usage ;;
	esac
	;;
esac
