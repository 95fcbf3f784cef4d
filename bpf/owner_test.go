//go:build linux

package bpf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/tests/netns"
)

// TestLinkHolder: an interface whose steering program this process
// attached through a bpf_link names this process (pid and comm) and the
// link; once the link is closed, nobody holds it.
func TestLinkHolder(t *testing.T) {
	netns.RequireRoot(t)
	netns.RequireBPF(t)
	tb := netns.NewTestbed(t)
	idx := ifindex(t, tb, netns.HostB, tb.B.Iface)
	steer, err := Load(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer steer.Close()
	holder := func() (h Holder, ok bool) {
		if err := tb.Do(netns.HostB, func() (err error) {
			h, ok, err = LinkHolder(idx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return h, ok
	}
	if h, ok := holder(); ok {
		t.Fatalf("a holder before anything is attached: %+v", h)
	}
	var l *Link
	if err := tb.Do(netns.HostB, func() (err error) {
		l, err = Attach(steer.Program, idx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	h, ok := holder()
	comm, _ := os.ReadFile("/proc/self/comm")
	if !ok || h.PID != os.Getpid() || h.LinkID != uint32(info.ID) || h.Comm+"\n" != string(comm) {
		t.Errorf("holder %+v, %v; want pid %d, link %d, comm %q", h, ok, os.Getpid(), info.ID, filepath.Base(string(comm)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if h, ok := holder(); ok {
		t.Errorf("a holder after the link closed: %+v", h)
	}
}
