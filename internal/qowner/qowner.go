//go:build linux

// Package qowner records which program owns a receive queue of an
// interface: softnic's direct mode (verbs.OpenDirect) runs the NIC inside
// an application on one AF_XDP socket, and two programs cannot own one
// queue.
//
// An owner holds an exclusive flock(2) on a lock file per network
// namespace, interface and queue (Dir, e.g.
// /run/softnic/queues/veth0.q0.net4026532297.lock) and writes its pid and
// program name into it. The kernel drops the lock when the owner's last
// descriptor closes, also when the owner is SIGKILLed, so a dead owner's
// file never blocks anyone: the next program takes the lock and rewrites
// the file. A program that finds the lock held reads the owner from the
// file and fails with an *OwnedError naming it.
package qowner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where the lock files live by default.
const Dir = "/run/softnic/queues"

// OwnedError is a queue another live program owns.
type OwnedError struct {
	Iface   string
	Queue   int
	PID     int
	Program string
	// How names what holds it: "direct mode" (a lock file) or "softnic
	// daemon" (an XDP program attached by a live process).
	How string
}

func (e *OwnedError) Error() string {
	who := e.Program
	if who == "" {
		who = "a program"
	}
	if e.PID > 0 {
		who = fmt.Sprintf("%s (pid %d)", who, e.PID)
	}
	return fmt.Sprintf("queue %d of %s is owned by %s, %s: one program owns a queue; stop it or use another queue", e.Queue, e.Iface, who, e.How)
}

// Lock is an owned queue; Release gives it up.
type Lock struct {
	f    *os.File
	path string
}

// Path is the lock file.
func (l *Lock) Path() string { return l.path }

// netnsID names the calling thread's network namespace: interface names
// repeat across namespaces, the lock directory does not.
func netnsID() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return "0"
	}
	return strconv.FormatUint(st.Ino, 10)
}

// FileName is the lock file of iface's queue in the calling thread's
// network namespace.
func FileName(iface string, queue int) string {
	return fmt.Sprintf("%s.q%d.net%s.lock", iface, queue, netnsID())
}

// Acquire makes the calling process the owner of iface's queue, with
// program as its name, or fails with an *OwnedError naming the live
// owner. dir "" is Dir.
func Acquire(dir, iface string, queue int, program string) (*Lock, error) {
	if dir == "" {
		dir = Dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("queue lock directory: %w", err)
	}
	path := filepath.Join(dir, FileName(iface, queue))
	for range 8 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("queue lock: %w", err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			f.Close()
			pid, prog := parse(string(b))
			return nil, &OwnedError{Iface: iface, Queue: queue, PID: pid, Program: prog, How: "in direct mode (" + path + ")"}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("queue lock %s: %w", path, err)
		}
		// The file may have been removed by its previous owner
		// between our open and our lock: then the lock is on a name
		// nobody else sees; take the file that is there now.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("queue lock %s: %w", path, err)
		}
		if _, err := f.WriteAt([]byte(fmt.Sprintf("pid=%d program=%s\n", os.Getpid(), clean(program))), 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("queue lock %s: %w", path, err)
		}
		return &Lock{f: f, path: path}, nil
	}
	return nil, fmt.Errorf("queue lock %s: the file keeps being replaced", path)
}

// Release removes the lock file and gives up the queue.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Remove while still locked: a program that opened the file before
	// the removal finds, once it has the lock, that the name is gone
	// (Acquire's inode check) and opens the new file.
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Owner reads a lock file's owner: pid and program (0, "" if it has
// none).
func Owner(path string) (int, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	return parse(string(b))
}

func parse(s string) (pid int, prog string) {
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "pid":
			pid, _ = strconv.Atoi(v)
		case "program":
			prog = v
		}
	}
	return pid, prog
}

// clean makes a program name one field.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r <= ' ' || r == '=' {
			return '_'
		}
		return r
	}, s)
	if s == "" {
		return "unknown"
	}
	return s
}
