# shellcheck shell=bash
# bench-lib.sh: sourced by lib.sh and sweep-lib.sh, which run a
# softnic-bench server and client with the same arguments.
#
# server_args ARGS...: sets sargs to ARGS without --csv FILE (or
# --csv=FILE). A softnic-bench server receives the client's result rows
# and prints the same table, and with --csv it appends them too: given
# to both sides, every row landed in the file twice. Only the client
# writes CSV.
server_args() {
	sargs=()
	local skip=0 a
	for a in "$@"; do
		if [ "$skip" = 1 ]; then skip=0; continue; fi
		case "$a" in
		--csv) skip=1; continue ;;
		--csv=*) continue ;;
		esac
		sargs+=("$a")
	done
}
