//go:build linux

package qowner

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second owner of a queue is refused with the first one's pid and
// name; the queue is free again once the first releases it.
func TestSecondOwnerRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "veth9", 0, "first-prog")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir, "veth9", 0, "second-prog")
	var owned *OwnedError
	if !errors.As(err, &owned) {
		t.Fatalf("second Acquire: %v, want an *OwnedError", err)
	}
	if owned.PID != os.Getpid() || owned.Program != "first-prog" {
		t.Errorf("owner %d %q, want %d first-prog", owned.PID, owned.Program, os.Getpid())
	}
	msg := err.Error()
	if !strings.Contains(msg, "queue 0 of veth9 is owned by first-prog (pid "+strconv.Itoa(os.Getpid())+")") || strings.Contains(msg, "\n") {
		t.Errorf("message %q does not name the owner in one line", msg)
	}
	// Another queue of the interface is another lock.
	l1, err := Acquire(dir, "veth9", 1, "second-prog")
	if err != nil {
		t.Fatalf("queue 1: %v", err)
	}
	l1.Release()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Path()); !os.IsNotExist(err) {
		t.Errorf("lock file still there after Release: %v", err)
	}
	l2, err := Acquire(dir, "veth9", 0, "second-prog")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer l2.Release()
	if pid, prog := Owner(l2.Path()); pid != os.Getpid() || prog != "second-prog" {
		t.Errorf("lock file says %d %q", pid, prog)
	}
}

// A dead owner's lock file (its process was killed, the file stayed)
// does not block: the next program takes the queue and the file names it.
func TestStaleOwnerRecovered(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName("veth9", 2))
	// A child holds the lock, as a program in direct mode would, and is
	// killed with SIGKILL.
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skipf("skipping: flock(1) (Debian package util-linux) is missing: %v", err)
	}
	// The shell becomes sleep (exec), so the killed pid is the holder.
	cmd := exec.Command("sh", "-c", `exec 9>>"$0" && flock -xn 9 && exec sleep 60`, path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, err := Acquire(dir, "veth9", 2, "probe"); err != nil {
			break // the child has it
		} else if l.f.Close(); time.Now().After(deadline) {
			t.Fatal("the child never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.WriteFile(path, []byte("pid="+strconv.Itoa(cmd.Process.Pid)+" program=dead-prog\n"), 0o644)
	_, err := Acquire(dir, "veth9", 2, "next")
	if err == nil || !strings.Contains(err.Error(), "dead-prog (pid "+strconv.Itoa(cmd.Process.Pid)+")") {
		t.Fatalf("while the owner lives: %v, want it named", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the dead owner's file should still be there: %v", err)
	}
	l, err := Acquire(dir, "veth9", 2, "next")
	if err != nil {
		t.Fatalf("stale lock blocked: %v", err)
	}
	defer l.Release()
	if pid, prog := Owner(path); pid != os.Getpid() || prog != "next" {
		t.Errorf("lock file says %d %q after recovery", pid, prog)
	}
}
