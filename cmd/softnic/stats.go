package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/softnic/softnic/verbs"
)

// counter is one named value of a snapshot.
type counter struct {
	name  string
	value uint64
}

// statsCmd prints a running daemon's counters, one `name value` per line
// in the order rdma-core's `rdma statistic show` would: the engine's (rxe
// hw_counters names first), then the port's (port_*) and the XDP
// program's (xdp_*). It asks over the verbs control socket.
func statsCmd(args []string) error {
	flags := flag.NewFlagSet("stats", flag.ContinueOnError)
	socket := flags.String("socket", defaultSocket, "control socket of the daemon")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usagef("stats: unexpected argument %q", flags.Arg(0))
	}
	counters, err := queryStats(*socket)
	if err != nil {
		return dialError(*socket, err)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, c := range counters {
		fmt.Fprintf(w, "%s %d\n", c.Name, c.Value)
	}
	return w.Flush()
}

func queryStats(socket string) ([]verbs.Counter, error) {
	ctx, err := verbs.Dial(socket)
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	return ctx.Stats()
}

// dialError says in one line why `softnic stats` got no answer on
// socket. Connecting can fail because no daemon ever made the socket (the
// path is missing), because the daemon that made it is gone (a stale
// socket: ECONNREFUSED), or because this user may not connect (EACCES or
// EPERM: the socket is 0660, root's); each has its own remedy. Other
// errors, and errors after the connection was made, are returned as they
// are.
func dialError(socket string, err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no daemon at %s (is softnic run running? --socket)", socket)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no daemon at %s: the socket is stale, its daemon is not running (start softnic run; it replaces the socket)", socket)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("permission denied on %s", describeAccess(socket))
	}
	return err
}

// describeAccess names what guards path: the socket's mode, owner and
// group, or, if this user cannot even look at the socket, its directory's.
func describeAccess(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		dir := filepath.Dir(path)
		if fi, err = os.Stat(dir); err != nil {
			return fmt.Sprintf("%s (%v)", path, err)
		}
		return fmt.Sprintf("%s: its directory %s %s: run as root or as a user that may search it)", path, dir, modeOwner(fi))
	}
	return fmt.Sprintf("%s %s: run as root or as a member of that group)", path, modeOwner(fi))
}

// modeOwner is "(mode 0660, owner root, group root" without the closing
// parenthesis, so that the caller can add its advice inside it.
func modeOwner(fi fs.FileInfo) string {
	s := fmt.Sprintf("(mode %04o", fi.Mode().Perm())
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return s
	}
	uid, gid := strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	owner, group := uid, gid
	if u, err := user.LookupId(uid); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(gid); err == nil {
		group = g.Name
	}
	return fmt.Sprintf("%s, owner %s, group %s", s, owner, group)
}
