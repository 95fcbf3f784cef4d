package verbs

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// connectErr is what net.DialUnix returns when connect fails with errno.
func connectErr(path string, errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "unixpacket", Addr: &net.UnixAddr{Name: path, Net: "unixpacket"},
		Err: os.NewSyscallError("connect", errno)}
}

// TestExplainDial: each reason a connect fails has its own one-line
// message that says what to do, and the connect error stays reachable.
func TestExplainDial(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "softnic.sock")
	os.WriteFile(sock, nil, 0) // stands for the socket: describeAccess stats it
	me := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	group := strconv.Itoa(os.Getgid())
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	for _, tc := range []struct {
		mode  os.FileMode
		errno syscall.Errno
		want  string
	}{
		{0o660, syscall.ENOENT, "no softnic daemon is listening at " + sock + ": the socket does not exist (start softnic run, or give the socket it was started with)"},
		{0o660, syscall.ECONNREFUSED, "no softnic daemon is listening at " + sock + ": the socket is stale, its daemon is gone (softnic run replaces it)"},
		{0o660, syscall.EACCES, "permission denied on " + sock + " (mode 0660, owner " + me + ", group " + group + ": group " + group + " may connect)"},
		{0o660, syscall.EPERM, "permission denied on " + sock + " (mode 0660, owner " + me + ", group " + group + ": group " + group + " may connect)"},
		{0o600, syscall.EACCES, "permission denied on " + sock + " (mode 0600, owner " + me + ", group " + group + ": only " + me + " may connect)"},
		{0o640, syscall.EACCES, "permission denied on " + sock + " (mode 0640, owner " + me + ", group " + group + ": only " + me + " may connect)"},
		{0o400, syscall.EACCES, "permission denied on " + sock + " (mode 0400, owner " + me + ", group " + group + ": nobody may connect)"},
		{0o666, syscall.EACCES, "permission denied on " + sock + " (mode 0666, owner " + me + ", group " + group + ": anyone may connect)"},
		{0o660, syscall.ECONNRESET, "verbs: dial " + sock + ": dial unixpacket " + sock + ": connect: connection reset by peer"},
	} {
		if err := os.Chmod(sock, tc.mode); err != nil {
			t.Fatal(err)
		}
		err := explainDial(sock, connectErr(sock, tc.errno))
		if got := err.Error(); got != tc.want {
			t.Errorf("%04o %v:\n got %q\nwant %q", tc.mode, tc.errno, got, tc.want)
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%v: the connect error is not wrapped", tc.errno)
		}
	}
	if err := explainDial(sock, connectErr(sock, syscall.ENOENT)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ENOENT: errors.Is(fs.ErrNotExist) false")
	}
	// A socket that vanished between connect and stat.
	gone := filepath.Join(dir, "gone.sock")
	if got := explainDial(gone, connectErr(gone, syscall.EACCES)).Error(); !strings.HasPrefix(got, "permission denied on "+gone+" (stat ") {
		t.Errorf("vanished socket: %q", got)
	}
}

// TestDialMissing: Dial itself explains: no socket at the path.
func TestDialMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	_, err := Dial(missing)
	if err == nil || !strings.HasPrefix(err.Error(), "no softnic daemon is listening at "+missing+":") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Dial(%s): %v", missing, err)
	}
}
