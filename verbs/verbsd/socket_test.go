package verbsd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/softnic/softnic/dataplane/sim"
)

// otherGroup is a group this process may give a file to that is not its
// own: root may give any (nogroup, 65534), another user one of its
// supplementary groups.
func otherGroup(t *testing.T) int {
	t.Helper()
	if os.Geteuid() == 0 {
		return 65534
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g != os.Getegid() {
			return g
		}
	}
	t.Skip("skipping: needs root or a supplementary group to give the socket to")
	return 0
}

// TestSocketGroupAndMode: the socket comes up with the mode and group
// asked for (softnic run --socket-mode, --socket-group), and a group the
// daemon may not give it to is an error that names the group.
func TestSocketGroupAndMode(t *testing.T) {
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gid := otherGroup(t)
	for _, tc := range []struct {
		mode os.FileMode
		gid  int
	}{{0o660, gid}, {0o600, 0}, {0o666, gid}} {
		path := filepath.Join(t.TempDir(), "v.sock")
		s, err := New(sim.A, Options{SocketPath: path, SocketMode: tc.mode, SocketGID: tc.gid})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.gid
		if want == 0 {
			want = os.Getegid()
		}
		if got := int(fi.Sys().(*syscall.Stat_t).Gid); fi.Mode().Perm() != tc.mode || got != want {
			t.Errorf("socket %04o group %d, want %04o group %d", fi.Mode().Perm(), got, tc.mode, want)
		}
		s.Close()
	}
	if os.Geteuid() != 0 {
		// Not a member of group 0 and no CAP_CHOWN.
		path := filepath.Join(t.TempDir(), "v.sock")
		_, err := New(sim.A, Options{SocketPath: path, SocketGID: 1 << 30})
		if err == nil || !strings.Contains(err.Error(), "to group 1073741824: operation not permitted") {
			t.Errorf("a group this user may not give the socket to: %v", err)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("socket left behind: %v", err)
		}
	}
}
