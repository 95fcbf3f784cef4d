//go:build linux

package netns

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where `ip netns add` bind-mounts named namespaces.
const Dir = "/run/netns"

// errGoexit marks fn having left through runtime.Goexit instead of
// returning.
var errGoexit = errors.New("netns: fn called runtime.Goexit (t.FailNow/t.Fatal/t.Skip inside Do?); return an error instead")

// Do runs fn inside the named network namespace (one made by `ip netns
// add`, as the testbed does) and returns its error.
//
// A network namespace belongs to a thread, not to a process, so fn runs on
// a new goroutine locked to its OS thread (runtime.LockOSThread), which
// enters the namespace with setns(2), calls fn, and goes back to its
// original namespace before unlocking. If going back fails, the goroutine
// exits still locked and the Go runtime terminates that thread rather than
// reuse it, so no other goroutine can ever run in the wrong namespace.
//
// What fn creates keeps its namespace after Do returns: sockets (UDP, raw,
// AF_XDP, netlink) and XDP attachments are bound to the namespace they were
// made in, so a test can create them inside Do and use them from any
// goroutine afterwards. Goroutines that fn starts do not inherit the
// namespace. fn runs on another goroutine, so it must not call t.Fatal and
// friends; a panic in fn is re-raised in the caller.
func Do(name string, fn func() error) error {
	target, err := unix.Open(filepath.Join(Dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: open namespace %q: %w", name, err)
	}
	defer unix.Close(target)

	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// /proc/thread-self is this thread's own view; /proc/self would
		// be the main thread's namespace.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netns: open current namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netns: enter %q: %w", name, err)}
			return
		}

		res := result{err: errGoexit}
		// Deferred so that restoring also happens when fn panics or
		// calls runtime.Goexit.
		defer func() {
			if v := recover(); v != nil {
				res = result{panicked: true, value: v}
			}
			if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
				// Stay locked: the thread dies with the goroutine.
				res.err = errors.Join(res.err, fmt.Errorf("netns: return from %q: %w (thread discarded)", name, err))
				done <- res
				return
			}
			runtime.UnlockOSThread()
			done <- res
		}()
		res.err = fn()
	}()
	res := <-done
	if res.panicked {
		panic(res.value)
	}
	return res.err
}
