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
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestDialErrorReal: the messages for real failures of queryStats: no
// socket, a stale socket (its listener closed, as a killed daemon leaves
// it) and a socket this user may not connect to.
func TestDialErrorReal(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	if _, err := queryStats(missing); err == nil || !strings.HasPrefix(err.Error(), "no softnic daemon is listening at "+missing+": the socket does not exist") {
		t.Errorf("missing socket: %v", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: stale, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := queryStats(stale); err == nil || !strings.HasPrefix(err.Error(), "no softnic daemon is listening at "+stale+": the socket is stale") {
		t.Errorf("stale socket: %v", err)
	}
}

// TestDialErrorPermission: connecting to a socket without write
// permission on it, or in a directory this user may not search, fails
// with EACCES, and stats says so, with the socket's mode and owners and
// who may connect, or the directory's. Root may connect to anything, so
// as root the check runs in a copy of the test binary as nobody.
func TestDialErrorPermission(t *testing.T) {
	if path := os.Getenv("SOFTNIC_TEST_DIAL"); path != "" {
		// The child, as nobody.
		_, err := queryStats(path)
		if err == nil {
			fmt.Println("connected")
			return
		}
		fmt.Println(err)
		return
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // nobody must reach the socket and the binary
	}
	listen := func(path string) {
		ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	sock := filepath.Join(dir, "softnic.sock")
	listen(sock)
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	hidden := filepath.Join(private, "softnic.sock")
	listen(hidden)
	t.Cleanup(func() { os.Chmod(private, 0o700) })

	// dial connects as this user, or as nobody when this user is root.
	bin := filepath.Join(dir, "softnic.test")
	dial := func(path string) string {
		t.Helper()
		if os.Getuid() != 0 {
			_, err := queryStats(path)
			if err == nil {
				t.Fatalf("connected to %s", path)
			}
			if !errors.Is(err, syscall.EACCES) {
				t.Fatalf("connect to %s: %v, want EACCES", path, err)
			}
			return err.Error()
		}
		if _, err := os.Stat(bin); err != nil {
			copyFile(t, os.Args[0], bin)
		}
		cmd := exec.Command(bin, "-test.run=^TestDialErrorPermission$")
		cmd.Env = append(os.Environ(), "SOFTNIC_TEST_DIAL="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("test binary as nobody: %v\n%s", err, out)
		}
		return strings.SplitN(string(out), "\n", 2)[0]
	}
	me := "root"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	var want string
	if os.Getuid() != 0 {
		// The owner is refused too without write permission.
		os.Chmod(sock, 0)
		want = "permission denied on " + sock + " (mode 0000, owner " + me + ", group "
	} else {
		os.Chmod(sock, 0o660)
		want = "permission denied on " + sock + " (mode 0660, owner root, group "
	}
	wantWho := ": nobody may connect)"
	if os.Getuid() == 0 {
		group := strconv.Itoa(os.Getegid())
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
		wantWho = ": group " + group + " may connect)"
	}
	if got := dial(sock); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, wantWho) {
		t.Errorf("got %q, want %q...%q", got, want, wantWho)
	}
	if os.Getuid() != 0 {
		os.Chmod(private, 0) // the owner too may not search it now
	}
	mode := "0700"
	if os.Getuid() != 0 {
		mode = "0000"
	}
	want = "permission denied on " + hidden + ": its directory " + private + " (mode " + mode + ", owner " + me + ", group "
	if got := dial(hidden); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ") may not be searched by this user") {
		t.Errorf("got %q, want %q...", got, want)
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
