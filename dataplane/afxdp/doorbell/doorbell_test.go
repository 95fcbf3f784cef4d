//go:build linux

package doorbell

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

func newBell(t *testing.T, fds ...int) *Doorbell {
	t.Helper()
	d, err := New(fds...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// waited times one Wait.
func waited(d *Doorbell, timeout time.Duration) time.Duration {
	start := time.Now()
	d.Wait(timeout)
	return time.Since(start)
}

func TestTimeout(t *testing.T) {
	d := newBell(t)
	if got := waited(d, 20*time.Millisecond); got < 20*time.Millisecond {
		t.Errorf("Wait(20ms) returned after %v", got)
	}
	// Sub-millisecond timeouts are honoured, not rounded up to poll(2)'s
	// millisecond (generous bound for a loaded machine).
	if got := waited(d, 100*time.Microsecond); got > 50*time.Millisecond {
		t.Errorf("Wait(100µs) took %v", got)
	}
}

func TestWakeBeforeWait(t *testing.T) {
	d := newBell(t)
	d.Wake()
	d.Wake() // a second ring before the wait is the same ring
	if got := waited(d, 5*time.Second); got > time.Second {
		t.Fatalf("Wait after Wake blocked %v", got)
	}
	// Consumed: the next Wait sleeps again.
	if got := waited(d, 20*time.Millisecond); got < 20*time.Millisecond {
		t.Errorf("second Wait returned after %v; the ring was not consumed", got)
	}
}

func TestWakeDuringWait(t *testing.T) {
	d := newBell(t)
	for range 100 {
		done := make(chan struct{})
		go func() {
			d.Wait(10 * time.Second)
			close(done)
		}()
		time.Sleep(50 * time.Microsecond) // usually inside ppoll by now, sometimes not: both must work
		d.Wake()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Wake did not end a Wait: lost wake-up")
		}
	}
}

func TestReadableFD(t *testing.T) {
	r, w := newPipe(t)
	d := newBell(t, r)
	unix.Write(w, []byte{1})
	if got := waited(d, 5*time.Second); got > time.Second {
		t.Fatalf("Wait with a readable fd blocked %v", got)
	}
}

func TestNoAllocs(t *testing.T) {
	r, _ := newPipe(t)
	d := newBell(t, r)
	if allocs := testing.AllocsPerRun(100, func() {
		d.Wake()
		d.Wait(time.Millisecond)
		d.WaitOut(0, true)
	}); allocs != 0 {
		t.Errorf("Wake/Wait: %v allocations, want 0", allocs)
	}
}

// A watched eventfd (a verbs client's doorbell) wakes a Wait directly, each
// ring once: the edge is consumed by the Wait it ended, the counter is
// never read, and an unwatched fd wakes nothing.
func TestWatch(t *testing.T) {
	d := newBell(t)
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := d.Watch(efd); err != nil {
		t.Fatal(err)
	}
	if err := d.Watch(efd); err == nil {
		t.Error("watching an fd twice succeeded")
	}
	ring := func() {
		if _, err := unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		ring()
		if got := waited(d, 5*time.Second); got > time.Second {
			t.Fatalf("ring %d: Wait blocked %v", i, got)
		}
		// The edge was consumed, though the eventfd still reads nonzero.
		if watchedPending(d) {
			t.Fatalf("ring %d: the watched set is still readable after the Wait; the ring was not consumed", i)
		}
	}
	// A ring during a Wait ends it.
	done := make(chan struct{})
	go func() {
		d.Wait(10 * time.Second)
		close(done)
	}()
	time.Sleep(time.Millisecond)
	ring()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a watched ring did not end a Wait")
	}
	if err := d.Unwatch(efd); err != nil {
		t.Fatal(err)
	}
	ring()
	if watchedPending(d) {
		t.Error("an unwatched fd made the watched set readable")
	}
}

// watchedPending reports whether the watched set would wake a Wait now.
// (Asking the epoll fd, not timing a Wait: ppoll may return early on a
// signal, which the Waiter contract allows.)
func watchedPending(d *Doorbell) bool {
	fds := []unix.PollFd{{Fd: int32(d.epfd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0
}

// Many doorbells ringing at once need more than one epoll_wait batch.
func TestWatchMany(t *testing.T) {
	d := newBell(t)
	var fds []int
	for range 40 {
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(efd)
		if err := d.Watch(efd); err != nil {
			t.Fatal(err)
		}
		fds = append(fds, efd)
	}
	for _, fd := range fds {
		unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	if got := waited(d, 5*time.Second); got > time.Second {
		t.Fatalf("Wait blocked %v", got)
	}
	if watchedPending(d) {
		t.Error("the watched set is still readable after the Wait: edges were left")
	}
}
