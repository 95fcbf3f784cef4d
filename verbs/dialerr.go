package verbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// dialError is Dial's error when connecting to the control socket failed:
// one line saying why, in terms of what to do, wrapping the connect error
// (errors.Is sees fs.ErrNotExist, syscall.ECONNREFUSED, syscall.EACCES).
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }

// explainDial says why connecting to socket failed. No daemon ever made
// the socket (the path is missing), the daemon that made it is gone (a
// stale socket: ECONNREFUSED), or this user may not connect (EACCES or
// EPERM: the socket's mode, owner and group, which stat names, or its
// directory, decide); each has its own remedy. Any other failure keeps
// the connect error's words.
func explainDial(socket string, err error) error {
	var msg string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg = fmt.Sprintf("no softnic daemon is listening at %s: the socket does not exist (start softnic run, or give the socket it was started with)", socket)
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = fmt.Sprintf("no softnic daemon is listening at %s: the socket is stale, its daemon is gone (softnic run replaces it)", socket)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		msg = "permission denied on " + describeAccess(socket)
	default:
		msg = fmt.Sprintf("verbs: dial %s: %v", socket, err)
	}
	return &dialError{msg: msg, err: err}
}

// describeAccess names what keeps this user from connecting to path and
// who may: "S (mode 0660, owner root, group softnic: group softnic may
// connect)". Connecting needs write permission on the socket, and search
// permission on its directories: if this user cannot even look at the
// socket, the directory is named instead.
func describeAccess(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		dir := filepath.Dir(path)
		dfi, derr := os.Stat(dir)
		if derr != nil || !errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf("%s (%v)", path, err)
		}
		owner, group := owners(dfi)
		return fmt.Sprintf("%s: its directory %s (mode %04o, owner %s, group %s) may not be searched by this user", path, dir, dfi.Mode().Perm(), owner, group)
	}
	perm := fi.Mode().Perm()
	owner, group := owners(fi)
	var who string
	switch {
	case perm&0o002 != 0:
		who = "anyone may connect" // the directory must be what refused
	case perm&0o020 != 0:
		who = "group " + group + " may connect"
	case perm&0o200 != 0:
		who = "only " + owner + " may connect"
	default:
		who = "nobody may connect"
	}
	return fmt.Sprintf("%s (mode %04o, owner %s, group %s: %s)", path, perm, owner, group, who)
}

// owners names fi's owner and group, by number when the name is unknown.
func owners(fi fs.FileInfo) (owner, group string) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "?", "?"
	}
	owner, group = strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return owner, group
}
