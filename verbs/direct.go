package verbs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/internal/hostaddr"
	"github.com/softnic/softnic/internal/qowner"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// Progress says who drives a direct-mode engine when the application does
// not (docs/direct.md).
type Progress int

const (
	// ProgressStandby (the default): the threads that call CQ.Poll and
	// QP.PostSend drive the engine; a progress goroutine takes over only
	// once no call has driven it for DirectOptions.Handoff (a passive
	// side that waits on a TCP socket, a GetEvent that blocks) and hands
	// it back at the next call. softnic-bench runs this way: its polling
	// goroutine moves every packet, with no thread hop.
	ProgressStandby Progress = iota
	// ProgressAlways: the progress goroutine runs the poll loop all the
	// time (busy-polling DirectOptions.BusyPoll after the last work,
	// then blocking on the socket), and callers drive the engine as well
	// whenever the loop is not in the middle of a round. For programs
	// that wait for data by watching memory without calling the library
	// (perftest's ib_write_lat): the drop-in libibverbs runs this way.
	ProgressAlways
)

// DirectOptions configure OpenDirect.
type DirectOptions struct {
	// Queue is the interface's receive queue the engine owns (default 0).
	Queue int
	// IP is the local address, the GID (default: the interface's first
	// address in 198.18.0.0/15, else its first global one), as softnic
	// run --ip.
	IP string
	// MTU is the largest path MTU, 1024 (default), 2048 or 4096, as
	// softnic run --mtu (4096 crosses AF_XDP in several chunks, multi-
	// buffer; the interface's MTU must carry it, docs/deploy.md).
	MTU int
	// Scheme is the loss recovery of QPs that ask for none (default gbn).
	Scheme string
	// Program is the owner's name in the queue's lock file (default: the
	// executable's name).
	Program string
	// LockDir is where queue lock files live (default qowner.Dir,
	// /run/softnic/queues).
	LockDir string
	// Progress, Handoff and BusyPoll: see Progress. Handoff defaults to
	// 1 ms, BusyPoll to 1 ms (softnic run --busy-poll's default).
	Progress Progress
	Handoff  time.Duration
	BusyPoll time.Duration
}

const (
	defaultHandoff    = time.Millisecond
	defaultDirectBusy = time.Millisecond
	// directMaxWait bounds one blocking wait of the progress goroutine.
	directMaxWait = 100 * time.Millisecond
)

// OpenDirect opens a softnic device in direct mode: the engine runs in
// this process on its own AF_XDP socket bound to opts.Queue of iface
// (in the calling thread's network namespace), with softnic's XDP
// steering program attached to the interface and the socket in its
// XSKMAP slot for that queue. No daemon is involved; the wire is the
// daemon's. The queue must be free: a second owner gets an error
// (errors.As *qowner.OwnedError) naming the program that has it, whether
// another direct-mode program or a softnic daemon on the interface.
// Close gives everything back: the socket, the XDP program and the
// queue's lock. It needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW).
func OpenDirect(iface string, opts DirectOptions) (c *Context, err error) {
	if opts.MTU == 0 {
		opts.MTU = 1024
	}
	if opts.MTU != 1024 && opts.MTU != 2048 && opts.MTU != 4096 {
		return nil, fmt.Errorf("verbs: direct mode: MTU %d: want 1024, 2048 or 4096", opts.MTU)
	}
	if opts.Program == "" {
		opts.Program = filepath.Base(os.Args[0])
	}
	if opts.Handoff <= 0 {
		opts.Handoff = defaultHandoff
	}
	if opts.BusyPoll <= 0 {
		opts.BusyPoll = defaultDirectBusy
	}
	if opts.Queue < 0 {
		return nil, fmt.Errorf("verbs: direct mode: queue %d", opts.Queue)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("verbs: direct mode: no such interface %q", iface)
	}
	if err := afxdp.CheckQueues(iface, []int{opts.Queue}); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	addr, err := directAddr(ifi, opts.IP)
	if err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	d := &direct{ifi: ifi}
	defer func() {
		if err != nil {
			d.teardown()
		}
	}()
	if d.lock, err = qowner.Acquire(opts.LockDir, iface, opts.Queue, opts.Program); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	// A live process holding the interface's XDP program (a softnic
	// daemon, or a direct-mode program on another queue) owns the
	// interface's steering: its program's XSKMAP, its queues.
	if h, held, err := bpf.LinkHolder(ifi.Index); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	} else if held {
		return nil, fmt.Errorf("verbs: direct mode: %w", ownerOfLink(iface, opts.Queue, h))
	}
	if _, err := bpf.DetachStale(ifi.Index); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	bo := bpf.Options{}
	if addr.Is4() {
		bo.LocalIPv4 = addr
	} else {
		bo.LocalIPv6 = addr
	}
	if d.steer, err = bpf.Load(bo); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	if d.link, err = bpf.Attach(d.steer.Program, ifi.Index); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	pc := afxdp.Config{Interface: iface, Queues: []int{opts.Queue}, FrameSize: 2 * opts.MTU, XSKMap: d.steer.XSKMap}
	if opts.MTU == 4096 {
		// One 4096-byte chunk and the rest in a second (softnic run's
		// mtu4096Frame): the path MTU plus room for every header.
		pc.FrameSize, pc.MaxFrame = 4096, 4096+256
	}
	if d.port, err = afxdp.Open(pc); err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	var mac [6]byte
	copy(mac[:], ifi.HardwareAddr)
	// The daemon's defaults (softnic run): the same engine, the same
	// wire, the same timeouts for a software NIC on a shared host.
	e, err := dataplane.NewEngine(dataplane.Config{MAC: mac, Addr: addr, Scheme: opts.Scheme,
		SchemeParams: recovery.Params{RTOLow: time.Millisecond, RTOHigh: 2 * time.Millisecond, NakInterval: 2 * time.Millisecond},
		SRAMBytes:    qp.DefaultCacheBudget, RTOBackoff: true, RTO: dataplane.RTOAdaptive, RTOMin: 5 * time.Millisecond}, d.port)
	if err != nil {
		return nil, fmt.Errorf("verbs: direct mode: %w", err)
	}
	d.embedded = &embedded{dev: "softnic_" + iface, e: e}
	d.drv = newDriver(e, d.port, opts)
	return &Context{b: d, e: e, drv: d.drv}, nil
}

// ownerOfLink is the error for a queue whose interface's XDP program a
// live process holds.
func ownerOfLink(iface string, queue int, h bpf.Holder) error {
	how := fmt.Sprintf("which holds the interface's XDP program (bpf_link %d): a softnic daemon or a direct-mode program", h.LinkID)
	if h.Comm == "softnic" {
		how = fmt.Sprintf("a softnic daemon on the interface (its XDP program, bpf_link %d)", h.LinkID)
	}
	return &qowner.OwnedError{Iface: iface, Queue: queue, PID: h.PID, Program: h.Comm, How: how}
}

// directAddr picks the local address as softnic run does.
func directAddr(ifi *net.Interface, want string) (netip.Addr, error) {
	return hostaddr.Local(ifi, want, "IP")
}

// direct is the backend of a direct-mode Context: the embedded backend's
// calls into the engine, plus the port, the XDP program and the queue's
// lock it owns.
type direct struct {
	*embedded
	ifi   *net.Interface
	lock  *qowner.Lock
	steer *bpf.Steer
	link  *bpf.Link
	port  *afxdp.Port
	drv   *driver
}

// allocBuf: memory outside the Go heap, so that C (the drop-in library's
// inline slots) may keep its address.
func (b *direct) allocBuf(n int) ([]byte, error) {
	if n <= 0 {
		return nil, errBufSize
	}
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: alloc buffer: %w", err)
	}
	return m, nil
}

func (b *direct) freeBuf(m []byte) error { return unix.Munmap(m) }

func (b *direct) stats() ([]Counter, error) {
	out, err := b.embedded.stats()
	for name, v := range b.port.Stats().All() {
		out = append(out, Counter{Name: "port_" + name, Value: v})
	}
	return out, err
}

func (b *direct) close() error {
	return b.teardown()
}

// teardown undoes OpenDirect in reverse: the progress goroutine, the
// socket, the XDP program, the lock.
func (b *direct) teardown() error {
	var errs []error
	if b.drv != nil {
		b.drv.close()
		b.drv = nil
	}
	if b.link != nil {
		errs = append(errs, b.link.Close())
		b.link = nil
	}
	if b.port != nil {
		errs = append(errs, b.port.Close())
		b.port = nil
	}
	if b.steer != nil {
		errs = append(errs, b.steer.Close())
		b.steer = nil
	}
	if b.lock != nil {
		errs = append(errs, b.lock.Release())
		b.lock = nil
	}
	return errors.Join(errs...)
}

// driver runs a direct-mode engine: callers of CQ.Poll and QP.PostSend
// (drive) and the progress goroutine (run) take turns, each poll round
// and each blocking wait on the socket under mu, so that the port is only
// ever used by one of them at a time.
type driver struct {
	e      *dataplane.Engine
	port   *afxdp.Port
	clock  *dataplane.MonotonicClock
	always bool
	// handoff: how long after a caller last drove the engine the
	// progress goroutine takes over (ProgressStandby).
	handoff, busyPoll time.Duration
	mu                sync.Mutex
	// lastCaller is when a caller last drove or wanted to drive, on
	// clock.
	lastCaller atomic.Int64
	// waiting: the progress goroutine is blocked on the socket holding
	// mu; a caller that wants in wakes it.
	waiting atomic.Bool
	closed  atomic.Bool
	done    chan struct{}
	// kick ends the standby sleep early (idle); timer times it.
	kick  chan struct{}
	timer *time.Timer
}

func newDriver(e *dataplane.Engine, port *afxdp.Port, opts DirectOptions) *driver {
	d := &driver{e: e, port: port, clock: dataplane.NewMonotonicClock(), always: opts.Progress == ProgressAlways,
		handoff: opts.Handoff, busyPoll: opts.BusyPoll, done: make(chan struct{}),
		kick: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	d.timer.Stop()
	// Work that becomes ready without a caller driving (a post while the
	// progress goroutine sleeps on the socket) wakes it.
	e.SetDoorbell(d.wake)
	go d.run()
	return d
}

// wake makes the progress goroutine leave its wait on the socket.
func (d *driver) wake() {
	if d.waiting.CompareAndSwap(true, false) {
		d.port.Wake()
	}
}

// drive runs one round of the engine for a caller (receive, timers,
// transmit), unless the progress goroutine is in the middle of one.
// It does not allocate.
func (d *driver) drive() {
	if d.closed.Load() {
		return
	}
	now := d.clock.Now()
	d.lastCaller.Store(int64(now))
	if d.mu.TryLock() {
		if !d.closed.Load() {
			d.e.Poll(now)
		}
		d.mu.Unlock()
		return
	}
	if !d.always {
		d.wake() // hand the engine back to the caller
	}
}

// idle says a caller is about to block without driving the engine
// (GetEvent on a completion channel): the progress goroutine takes over
// now rather than after the hand-off time.
func (d *driver) idle() {
	if d.always {
		return
	}
	d.lastCaller.Store(int64(d.clock.Now() - d.handoff))
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// run is the progress goroutine.
func (d *driver) run() {
	defer close(d.done)
	idle := 0
	var lastWork time.Duration
	for !d.closed.Load() {
		now := d.clock.Now()
		if !d.always {
			if since := now - time.Duration(d.lastCaller.Load()); since < d.handoff {
				d.timer.Reset(d.handoff - since)
				select {
				case <-d.timer.C:
				case <-d.kick:
					d.timer.Stop()
				}
				continue
			}
		}
		d.mu.Lock()
		if d.e.Poll(now) {
			d.mu.Unlock()
			idle, lastWork = 0, now
			continue
		}
		if idle++; idle < 4 || now-lastWork < d.busyPoll {
			d.mu.Unlock()
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		idle = 0
		wait := directMaxWait
		if t, ok := d.e.NextDeadline(); ok {
			wait = min(wait, max(0, t-now))
		}
		d.waiting.Store(true)
		// A caller that wanted in since the check above, or a close,
		// would find waiting unset: look again before blocking.
		if d.closed.Load() || (!d.always && d.clock.Now()-time.Duration(d.lastCaller.Load()) < d.handoff) {
			d.waiting.Store(false)
			d.mu.Unlock()
			continue
		}
		if wait > 0 {
			d.port.Wait(wait)
		}
		d.waiting.Store(false)
		d.mu.Unlock()
	}
}

// close stops the progress goroutine and keeps callers out of the engine
// for good (the port is about to close).
func (d *driver) close() {
	d.closed.Store(true)
	d.port.Wake()
	select {
	case d.kick <- struct{}{}:
	default:
	}
	<-d.done
	d.e.SetDoorbell(nil)
	d.mu.Lock() // a caller's round in progress ends; none starts again
}
