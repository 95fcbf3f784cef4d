package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// dialErr is what verbs.Dial returns when connect fails with errno.
func dialErr(path string, errno syscall.Errno) error {
	op := &net.OpError{Op: "dial", Net: "unixpacket", Addr: &net.UnixAddr{Name: path, Net: "unixpacket"},
		Err: os.NewSyscallError("connect", errno)}
	return fmt.Errorf("verbs: dial %s: %w", path, op)
}

// TestDialError: each reason `softnic stats` gets no answer has its own
// one-line message; what is not a failed connect is left as it is.
func TestDialError(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "softnic.sock")
	os.WriteFile(sock, nil, 0o660) // stands for the socket: describeAccess stats it
	os.Chmod(sock, 0o660)          // whatever the umask
	other := errors.New("verbs: protocol error: hello carried 2 descriptors, want 3")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dialErr(sock, syscall.ENOENT), "no daemon at " + sock + " (is softnic run running? --socket)"},
		{dialErr(sock, syscall.ECONNREFUSED), "no daemon at " + sock + ": the socket is stale"},
		{dialErr(sock, syscall.EACCES), "permission denied on " + sock + " (mode 0660, owner "},
		{dialErr(sock, syscall.EPERM), "permission denied on " + sock + " (mode 0660, owner "},
		{dialErr(sock, syscall.ECONNRESET), "verbs: dial " + sock + ": dial unixpacket " + sock + ": connect: connection reset by peer"},
		{other, other.Error()},
		// Not a dial: a refusal later on is not a stale socket.
		{fmt.Errorf("stats: %w", syscall.ECONNREFUSED), "stats: connection refused"},
	} {
		got := dialError(sock, tc.err).Error()
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("dialError(%v) = %q, want one line starting %q", tc.err, got, tc.want)
		}
	}
	if got := dialError(sock, dialErr(sock, syscall.EACCES)).Error(); !strings.HasSuffix(got, ": run as root or as a member of that group)") {
		t.Errorf("EACCES: %q gives no advice", got)
	}
}

// TestDialErrorReal: the messages for real failures of queryStats: no
// socket, a stale socket (its listener closed, as a killed daemon leaves
// it) and a socket this user may not connect to.
func TestDialErrorReal(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	if _, err := queryStats(missing); err == nil || dialError(missing, err).Error() != "no daemon at "+missing+" (is softnic run running? --socket)" {
		t.Errorf("missing socket: %v -> %v", err, dialError(missing, err))
	}
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: stale, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := queryStats(stale); err == nil || !strings.HasPrefix(dialError(stale, err).Error(), "no daemon at "+stale+": the socket is stale") {
		t.Errorf("stale socket: %v -> %v", err, dialError(stale, err))
	}
}

// TestDialErrorPermission: connecting to a socket without write
// permission on it fails with EACCES, and stats says so, with the
// socket's mode and owners. Root may connect to anything, so as root the
// check runs in a copy of the test binary as nobody.
func TestDialErrorPermission(t *testing.T) {
	if path := os.Getenv("SOFTNIC_TEST_DIAL"); path != "" {
		// The child, as nobody.
		_, err := queryStats(path)
		if err == nil {
			fmt.Println("connected")
			return
		}
		fmt.Println(dialError(path, err))
		return
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // nobody must reach the socket and the binary
	}
	sock := filepath.Join(dir, "softnic.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got, wantOwner string
	if os.Getuid() != 0 {
		// The owner is refused too without write permission.
		os.Chmod(sock, 0)
		_, err := queryStats(sock)
		if err == nil {
			t.Fatal("connected to a socket of mode 0000")
		}
		if !errors.Is(err, syscall.EACCES) {
			t.Fatalf("connect to a socket of mode 0000: %v, want EACCES", err)
		}
		got = dialError(sock, err).Error()
		u, _ := user.Current()
		wantOwner = "(mode 0000, owner " + u.Username + ", group "
	} else {
		os.Chmod(sock, 0o660)
		bin := filepath.Join(dir, "softnic.test")
		copyFile(t, os.Args[0], bin)
		cmd := exec.Command(bin, "-test.run=^TestDialErrorPermission$")
		cmd.Env = append(os.Environ(), "SOFTNIC_TEST_DIAL="+sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("test binary as nobody: %v\n%s", err, out)
		}
		got = strings.SplitN(string(out), "\n", 2)[0]
		wantOwner = "(mode 0660, owner root, group "
	}
	want := "permission denied on " + sock + " " + wantOwner
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ": run as root or as a member of that group)") {
		t.Errorf("got %q, want %q... with advice", got, want)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
