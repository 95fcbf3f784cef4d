package main

import (
	"fmt"
	"os/user"
	"strconv"
)

// socketMode is --socket-mode: the control socket's permission bits, in
// octal as chmod takes them (0660). Connecting to a unix socket needs
// write permission on it, so 0660 lets the owner (root) and the socket's
// group in and nobody else.
type socketMode uint32

const defaultSocketMode socketMode = 0o660

func (m *socketMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return fmt.Errorf("want permission bits in octal, 0000 to 0777 (e.g. 0660)")
	}
	*m = socketMode(v)
	return nil
}

func (m *socketMode) String() string {
	if m == nil {
		return fmt.Sprintf("%04o", uint32(defaultSocketMode))
	}
	return fmt.Sprintf("%04o", uint32(*m))
}

// lookupGroup resolves --socket-group: a group name, or a numeric gid
// (which need not have a name).
func lookupGroup(name string) (int, error) {
	if g, err := user.LookupGroup(name); err == nil {
		return strconv.Atoi(g.Gid)
	}
	if gid, err := strconv.ParseUint(name, 10, 31); err == nil {
		return int(gid), nil
	}
	return 0, fmt.Errorf("no such group (create it: groupadd --system %s)", name)
}
