//go:build linux

package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// unit is the [Service] section of a systemd unit: each key's values, in
// order.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s: line %q: this test reads only key=value lines without continuations", path, line)
			}
			u[k] = append(u[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// one is the key's single value.
func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("unit: %s= %q, want one", key, u[key])
	}
	return u[key][0]
}

// execStart is the unit's ExecStart as systemd runs it for instance
// iface with an empty environment: %i replaced, $SOFTNIC_OPTS (unset)
// expanded to no words. Quoting and other specifiers are not this
// test's to interpret: a unit that uses them fails it.
func (u unit) execStart(t *testing.T, iface string) []string {
	t.Helper()
	line := u.one(t, "ExecStart")
	if strings.ContainsAny(line, `"'\;`) || strings.ContainsAny(line[:1], "-@+!:") {
		t.Fatalf("ExecStart=%s: quoting, prefixes and ';' are not supported by this test", line)
	}
	var argv []string
	for _, w := range strings.Fields(line) {
		if w == "$SOFTNIC_OPTS" {
			continue // unset: no words
		}
		if strings.Contains(w, "$") || strings.Contains(strings.ReplaceAll(w, "%i", ""), "%") {
			t.Fatalf("ExecStart=%s: %q: only %%i and $SOFTNIC_OPTS are supported by this test", line, w)
		}
		argv = append(argv, strings.ReplaceAll(w, "%i", iface))
	}
	return argv
}

// flagValue is the value of --name in argv ("--name value" or
// "--name=value").
func flagValue(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if a == "--"+name && i+1 < len(argv) {
			return argv[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// capNames turns systemd's capability names into setpriv's
// --bounding-set list: "-all,+net_admin,...".
func capNames(t *testing.T, list string) string {
	t.Helper()
	out := "-all"
	for _, c := range strings.Fields(list) {
		name, ok := strings.CutPrefix(c, "CAP_")
		if !ok {
			t.Fatalf("capability %q", c)
		}
		out += ",+" + strings.ToLower(name)
	}
	return out
}

// freeGID is a gid no group has, for a socket group that exists only
// for this test (the daemon takes a numeric --socket-group).
func freeGID(t *testing.T) int {
	t.Helper()
	for gid := 61000; gid < 62000; gid++ {
		if _, err := user.LookupGroupId(strconv.Itoa(gid)); err != nil {
			return gid
		}
	}
	t.Fatal("no free gid in 61000-61999")
	return 0
}

// TestInstall is the README's install, checked: make install into a
// DESTDIR gives the binaries, the unit template and the sysusers file;
// the unit passes systemd-analyze verify; two daemons run the installed
// binary with the unit's ExecStart for their interface (a private /run
// with the unit's RuntimeDirectory, the unit's CapabilityBoundingSet and
// NoNewPrivileges, as systemd would start them) on the two hosts of the
// testbed; and softnic-bench, run as a user who is not root but is in
// the socket group, measures RDMA WRITE between them. A user outside
// the group is told whose socket it is and who may connect.
func TestInstall(t *testing.T) {
	makePath := netns.RequireTool(t, "make")
	setpriv := netns.RequireTool(t, "setpriv")
	netns.RequireTools(t, "unshare", "mount", "sh")
	tb := requireDaemon(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for d := tmp; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // the bench's user must reach the binaries and sockets
	}
	dest := filepath.Join(tmp, "dest")
	const prefix = "/usr"
	cmd := exec.Command(makePath, "-C", root, "install", "DESTDIR="+dest, "PREFIX="+prefix, "BUILDDIR="+filepath.Join(tmp, "build"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}

	// The tree: these files, these modes, nothing else.
	want := map[string]fs.FileMode{
		"usr/bin/softnic":                         0o755,
		"usr/bin/softnic-bench":                   0o755,
		"usr/bin/softnic-sweep":                   0o755, // softnic sweep runs it
		"usr/lib/systemd/system/softnic@.service": 0o644,
		"usr/lib/sysusers.d/softnic.conf":         0o644,
	}
	// The drop-in libibverbs, when make ibverbs built it (docs/ibverbs.md).
	if _, err := os.Stat(filepath.Join(root, "build/lib/libibverbs.so.1")); err == nil {
		want["usr/lib/softnic/libibverbs.so.1"] = 0o755
	}
	// The drop-in librdmacm, when make rdmacm built it (docs/rdmacm.md).
	if _, err := os.Stat(filepath.Join(root, "build/lib/librdmacm.so.1")); err == nil {
		want["usr/lib/softnic/librdmacm.so.1"] = 0o755
	}
	got := map[string]fs.FileMode{}
	filepath.WalkDir(dest, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			fi, _ := d.Info()
			rel, _ := filepath.Rel(dest, path)
			got[rel] = fi.Mode()
		}
		return nil
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("installed %v, want %v", got, want)
	}
	softnic := filepath.Join(dest, prefix, "bin/softnic")
	bench := filepath.Join(dest, prefix, "bin/softnic-bench")
	if b, _ := os.ReadFile(filepath.Join(dest, "usr/lib/sysusers.d/softnic.conf")); !strings.Contains(string(b), "\ng softnic -\n") {
		t.Errorf("sysusers.d/softnic.conf does not create the group softnic:\n%s", b)
	}

	// The build information: the checkout's commit, linked in by make.
	for _, bin := range []string{softnic, bench} {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", bin, err)
		}
		line := strings.TrimSpace(string(out))
		if !strings.HasPrefix(line, filepath.Base(bin)+" ") || !strings.Contains(line, " go1.") || strings.Contains(line, "unknown") {
			t.Errorf("%s --version: %q, want its version, commit and toolchain", bin, line)
		}
		if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
			if !strings.Contains(line, "(commit "+strings.TrimSpace(string(head))) {
				t.Errorf("%s --version: %q, want the commit %s", bin, line, head)
			}
		}
	}

	unitPath := filepath.Join(dest, "usr/lib/systemd/system/softnic@.service")
	u := readUnit(t, unitPath)
	t.Run("systemd-analyze verify", func(t *testing.T) {
		analyze := netns.RequireTool(t, "systemd-analyze")
		// The unit as installed, but with ExecStart's binary where
		// DESTDIR put it: verify checks that it is executable.
		dir := t.TempDir()
		b, err := os.ReadFile(unitPath)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(b), "ExecStart="+prefix+"/bin/softnic ", "ExecStart="+softnic+" ", 1)
		if text == string(b) {
			t.Fatalf("ExecStart does not run %s/bin/softnic", prefix)
		}
		os.WriteFile(filepath.Join(dir, "softnic@.service"), []byte(text), 0o644)
		out, err := exec.Command(analyze, "verify", filepath.Join(dir, "softnic@eth1.service")).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	// What the unit asks of systemd, which this test does by hand.
	if v := u.one(t, "RuntimeDirectory"); v != "softnic/%i" {
		t.Fatalf("RuntimeDirectory=%s, want softnic/%%i", v)
	}
	rtMode, err := strconv.ParseUint(u.one(t, "RuntimeDirectoryMode"), 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	if u.one(t, "NoNewPrivileges") != "yes" {
		t.Fatal("NoNewPrivileges is not yes")
	}
	caps := u.one(t, "CapabilityBoundingSet")
	if ambient := u.one(t, "AmbientCapabilities"); ambient != caps {
		t.Errorf("AmbientCapabilities=%s differs from CapabilityBoundingSet=%s", ambient, caps)
	}
	run := filepath.Join(tmp, "run") // the daemons' /run
	gid := freeGID(t)
	const benchUID = 65534 // not root; its group comes from the credentials
	type host struct {
		name, iface string
		socket      string // outside the daemons' mount namespace
	}
	hosts := []host{{name: netns.HostA, iface: tb.A.Iface}, {name: netns.HostB, iface: tb.B.Iface}}
	var daemons []*installedDaemon
	for i, h := range hosts {
		argv := u.execStart(t, h.iface)
		if argv[0] != prefix+"/bin/softnic" || argv[1] != "run" {
			t.Fatalf("ExecStart runs %q, want %s/bin/softnic run", argv[:2], prefix)
		}
		socket, _ := flagValue(argv, "socket")
		group, _ := flagValue(argv, "socket-group")
		mode, _ := flagValue(argv, "socket-mode")
		if socket != "/run/softnic/"+h.iface+"/softnic.sock" || group != "softnic" || mode != "0660" {
			t.Fatalf("ExecStart: --socket %q --socket-group %q --socket-mode %q; want the socket in the RuntimeDirectory, group softnic, 0660", socket, group, mode)
		}
		// The group softnic stands for is this test's.
		args := slices.Clone(argv[1:]) // run and its flags
		args[slices.Index(args, "softnic")] = strconv.Itoa(gid)
		rt := filepath.Join(run, "softnic", h.iface)
		if err := os.MkdirAll(rt, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(run, 0o755)
		os.Chmod(filepath.Dir(rt), 0o755)
		os.Chmod(rt, fs.FileMode(rtMode))
		hosts[i].socket = filepath.Join(run, strings.TrimPrefix(socket, "/run/"))
		wrap := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /run && exec "$@"`, run,
			setpriv, "--bounding-set", capNames(t, caps), "--inh-caps", "-all", "--no-new-privs", softnic}
		d := startInstalled(t, tb, h.name, append(wrap, args...))
		daemons = append(daemons, d)
		d.waitReady(t, softnic, hosts[i].socket)
		fi, err := os.Stat(hosts[i].socket)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || int(st.Gid) != gid || st.Uid != 0 {
			t.Fatalf("socket %s: mode %04o owner %d group %d; want 0660, root, %d", hosts[i].socket, fi.Mode().Perm(), st.Uid, st.Gid, gid)
		}
	}

	// Without CAP_NET_RAW the daemon says so, rather than blame the
	// kernel (it fails before it looks at the socket or the interface).
	noRaw := strings.Replace(capNames(t, caps), ",+net_raw", "", 1)
	if o, code := runAs(t, tb, netns.HostA, []string{setpriv, "--bounding-set", noRaw, "--inh-caps", "-all", softnic, "run", "--iface", tb.A.Iface,
		"--socket", filepath.Join(tmp, "noraw.sock"), "--metrics="}); code != 1 || !strings.HasPrefix(o, "softnic: AF_XDP sockets need CAP_NET_RAW: ") {
		t.Errorf("softnic run without CAP_NET_RAW: exit %d, %q", code, o)
	}

	// A user in the socket group runs the bench: server on B, client on A.
	member := []string{setpriv, "--reuid", strconv.Itoa(benchUID), "--regid", strconv.Itoa(gid), "--groups", strconv.Itoa(gid), "--inh-caps", "-all"}
	port := strconv.Itoa(int(tcpPort.Add(1)))
	common := []string{"write_bw", "-s", "4096", "-n", "200", "-p", port}
	server := startAs(t, tb, netns.HostB, append(append(slices.Clone(member), bench), append(common, "--socket", hosts[1].socket)...))
	time.Sleep(300 * time.Millisecond) // the server listens on its TCP port
	var out string
	for try := 0; ; try++ {
		o, code := runAs(t, tb, netns.HostA, append(append(slices.Clone(member), bench), append(common, "--socket", hosts[0].socket, tb.B.IPv4.String())...))
		out = o
		if code == 0 {
			break
		}
		if try == 20 || !strings.Contains(o, "connection refused") {
			t.Fatalf("softnic-bench client as uid %d, group %d: exit %d\n%s\nserver:\n%s", benchUID, gid, code, o, server.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := server.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("softnic-bench server: exit %d\n%s", code, server.out.String())
	}
	if !strings.Contains(out, "RDMA_Write BW") || !strings.Contains(out, " 4096 ") {
		t.Errorf("softnic-bench client printed no bandwidth table:\n%s", out)
	}
	t.Logf("softnic-bench as uid %d in group %d:\n%s", benchUID, gid, out)

	// Outside the group: refused, with the socket's owners and who may
	// connect.
	outsider := []string{setpriv, "--reuid", strconv.Itoa(benchUID), "--regid", strconv.Itoa(benchUID), "--clear-groups", "--inh-caps", "-all"}
	o, code := runAs(t, tb, netns.HostA, append(slices.Clone(outsider), softnic, "stats", "--socket", hosts[0].socket))
	wantMsg := fmt.Sprintf("softnic: permission denied on %s (mode 0660, owner root, group %d: group %d may connect)\n", hosts[0].socket, gid, gid)
	if code != 1 || o != wantMsg {
		t.Errorf("softnic stats outside the group: exit %d, %q; want 1, %q", code, o, wantMsg)
	}
	// A member may read the counters too.
	if o, code := runAs(t, tb, netns.HostA, append(slices.Clone(member), softnic, "stats", "--socket", hosts[0].socket)); code != 0 || !strings.Contains(o, "sent_pkts ") {
		t.Errorf("softnic stats in the group: exit %d\n%s", code, o)
	}

	for i, d := range daemons {
		if err := d.signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("daemon on %s: SIGTERM: %v\n%s", hosts[i].name, err, d.out.String())
		}
		if _, err := os.Lstat(hosts[i].socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("control socket %s left behind: %v", hosts[i].socket, err)
		}
	}
}

// installedDaemon is an installed softnic started in a testbed namespace.
type installedDaemon struct{ *childProc }

// startInstalled runs argv (a command that ends by exec'ing the daemon)
// in host's namespace; the daemon is killed at cleanup if still running.
func startInstalled(t *testing.T, tb *netns.Testbed, host string, argv []string) *installedDaemon {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", tb.NS(host)}, argv...)...)
	return &installedDaemon{startChild(t, cmd, "daemon on "+host)}
}

// waitReady waits until the daemon answers softnic stats (as root) on
// socket.
func (d *installedDaemon) waitReady(t *testing.T, softnic, socket string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited before it answered: %v\n%s", d.err, d.out.String())
		default:
		}
		out, err := exec.Command(softnic, "stats", "--socket", socket).CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("softnic stats got no answer on %s: %v %s\ndaemon:\n%s", socket, err, out, d.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig and waits for the daemon to exit.
func (d *installedDaemon) signal(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
		return d.err
	case <-time.After(15 * time.Second):
		t.Fatalf("daemon did not exit within 15 s of %v\n%s", sig, d.out.String())
		return nil
	}
}

// startAs starts argv in host's namespace, as a clientProc.
func startAs(t *testing.T, tb *netns.Testbed, host string, argv []string) *clientProc {
	t.Helper()
	c := &clientProc{name: argv[len(argv)-1], out: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command("ip", append([]string{"netns", "exec", tb.NS(host)}, argv...)...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// runAs runs argv to completion in host's namespace and returns its
// output and exit code.
func runAs(t *testing.T, tb *netns.Testbed, host string, argv []string) (string, int) {
	t.Helper()
	c := startAs(t, tb, host, argv)
	code := c.wait(t, 60*time.Second)
	return c.out.String(), code
}
