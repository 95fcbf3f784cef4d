// Package verbsd is the daemon side of softnic's verbs across processes:
// it serves the verbs API of one engine to other processes on a unix
// socket, so that verbs.Dial(path) gives them a Context that behaves as
// an embedded one.
//
// Control operations (PDs, MRs, CQs, QPs, modify/query, device query,
// stats) are RPCs on the socket, handled by one goroutine per client.
// The data path never crosses the socket: each QP has a send and a
// receive ring and each CQ a completion ring in a memfd the server
// creates and passes to the client, and memory regions are the client's
// own memfds, mapped by the server and registered under the client's
// addresses. Pump, run by the engine's poll loop, moves published work
// requests from the rings into the engine and completions from the
// engine into the rings; BeforeWait raises the "need wakeup" flag that
// tells clients to ring their doorbell eventfd, so a busy daemon costs
// its clients no system call.
//
// Every object belongs to the connection that created it and is named by
// a per-connection handle; a handle of another connection names nothing.
// When a connection ends, however the client ended, the server destroys
// its QPs, CQs, MRs and PDs and unmaps its memory.
//
// Options.Limits bound what one client can make the daemon hold:
// connections per uid, and objects and ring and region bytes per
// connection. A request beyond a limit fails with proto.ErrLimit
// (verbs.ErrLimit) naming it, and is counted (LimitStats).
//
// The protocol and the ring layout are in docs/verbs-ipc.md.
package verbsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// Options configure a Server.
type Options struct {
	// SocketPath is where the server listens (SOCK_SEQPACKET).
	SocketPath string
	// Logger gets connection events and client errors (default: none).
	Logger *slog.Logger
	// Wake wakes the engine's poll loop (dataplane.Waiter.Wake); a
	// client's doorbell calls it. Without it, posted work waits for the
	// loop's next timeout.
	Wake func()
	// Watch, if set, adds a client's doorbell eventfd to what the poll
	// loop's blocking wait wakes on (doorbell.Doorbell.Watch), and
	// Unwatch removes it: a client's ring then wakes the loop directly,
	// with no goroutine relaying it to Wake. Without them the server
	// relays each ring through a goroutine.
	Watch   func(fd int) error
	Unwatch func(fd int) error
	// SocketMode is the socket file's mode (default 0660): only the owner
	// and the group may create QPs and register memory, never everyone.
	SocketMode os.FileMode
	// SocketGID, if not 0, is the socket file's group (softnic run
	// --socket-group): with mode 0660, the users of that group may use
	// the NIC without root. 0 leaves the daemon's own group.
	SocketGID int
	// Name is the device name clients see (default "softnic0").
	Name string
	// Counters, if set, adds counters after the engine's in the stats RPC
	// (the daemon's port and XDP counters).
	Counters func(yield func(name string, v uint64))
	// CountersOnly leaves the engine's own counters out of the stats
	// RPC: a server whose engine carries no traffic (softnic switch,
	// which serves its counters and captures this way) reports Counters
	// alone.
	CountersOnly bool
	// Limits bound what one client may hold (zero fields: defaults).
	Limits Limits
}

// pumpBatch is how many entries one engine call moves: the daemon's own
// buffers, so that entries are copied out of client-writable memory
// before the engine validates them.
const pumpBatch = 32

// Server serves one engine's verbs on a unix socket.
type Server struct {
	e    *dataplane.Engine
	caps captures // packet captures (capture.go)
	o    Options
	log  *slog.Logger
	ln   *net.UnixListener
	wake func()
	abi  uint64

	devFD  int
	devMem []byte
	// needWakeup is the flag in the device page every client maps
	// read-only (F_SEAL_FUTURE_WRITE), so no client can clear another's
	// wakeups.
	needWakeup *atomic.Uint32

	wg         sync.WaitGroup
	nextClient atomic.Uint64

	lim Limits
	// limitRefusals counts requests refused for a per-connection limit,
	// connRefusals connections refused for the per-uid limit.
	limitRefusals, connRefusals atomic.Uint64
	refusing                    atomic.Int32 // refused connections still being answered
	acceptLog, refuseLog        rateLog
	// memReturn hands the heap a large client leaves behind back to the
	// system (see returnMemoryBytes).
	memReturn memReturner

	// mu guards everything below and the objects of every client. Pump
	// holds it on the poll goroutine; RPC handlers hold it around engine
	// calls, never across socket I/O or mapping changes. Order: mu, then
	// the engine's lock.
	mu      sync.Mutex
	closed  bool
	clients map[*client]struct{}
	perUID  map[uint32]int // open connections by uid
	// uidRingBytes is what each uid's connections hold against
	// Limits.RingBytesPerUID.
	uidRingBytes map[uint32]int64
	qps          []*qpObj          // every client's QPs
	byQPN        map[uint32]*qpObj // the same, by QPN: whom a completion retires
	pending      []*qpObj          // QPs with work an engine queue had no room for
	watch        []*qpObj          // QPs with unsignaled send WQEs in the engine
	cqs          []*cqObj
	gen          uint64 // completion batches moved, for qpObj.stamp
	looked       int    // QPs whose rings the last Pump looked at (tests)

	pendingSpare []*qpObj
	recheck      bool // the next Pump is BeforeWait's last look before sleeping
	warned       bool // Options.Wake is nil and was logged

	sendBatch [pumpBatch]qp.SendWR
	recvBatch [pumpBatch]qp.RecvWR
	wcBatch   [pumpBatch]qp.WC

	ev serverEvents // the engine's asynchronous events (srq.go)
}

// New creates the server for e and starts listening on o.SocketPath. A
// stale socket file (nobody answers on it) is replaced; a live server at
// the path is an error, as is a file that is not a socket.
func New(e *dataplane.Engine, o Options) (*Server, error) {
	if o.SocketPath == "" {
		return nil, errors.New("verbsd: no socket path")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SocketMode == 0 {
		o.SocketMode = 0o660
	}
	if o.Name == "" {
		o.Name = "softnic0"
	}
	abi, err := shm.Fingerprint()
	if err != nil {
		return nil, err
	}
	s := &Server{e: e, o: o, log: o.Logger, wake: o.Wake, abi: abi, lim: o.Limits.withDefaults(),
		clients: map[*client]struct{}{}, perUID: map[uint32]int{}, uidRingBytes: map[uint32]int64{}, byQPN: map[uint32]*qpObj{}}
	if s.wake == nil {
		s.wake = func() {}
	}
	s.initEvents()
	// The device page: created writable for the daemon, then sealed so
	// that clients can only map it read-only.
	s.devFD, s.devMem, err = shm.Create("softnic-device", shm.DevicePageLen, shm.SealSize)
	if err != nil {
		return nil, err
	}
	shm.InitDevicePage(s.devMem)
	s.needWakeup = shm.NeedWakeup(s.devMem)
	if err := shm.AddSeals(s.devFD, unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		s.freeDevicePage()
		return nil, err
	}
	if s.ln, err = listen(o.SocketPath, o.SocketMode, o.SocketGID, s.log); err != nil {
		s.freeDevicePage()
		return nil, err
	}
	return s, nil
}

func (s *Server) freeDevicePage() {
	if s.devMem != nil {
		unix.Munmap(s.devMem)
		unix.Close(s.devFD)
		s.devMem, s.needWakeup = nil, nil
	}
}

// listen binds the socket in a private directory, gives it its mode and
// group (gid 0: the daemon's) and renames it into place, so that it is
// never reachable with other permissions (a chmod after bind leaves a
// window; a umask is process-wide). A rename that would replace a file
// means another server won the race.
func listen(path string, mode os.FileMode, gid int, log *slog.Logger) (*net.UnixListener, error) {
	if err := removeStale(path, log); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".softnic-sock-")
	if err != nil {
		return nil, fmt.Errorf("verbsd: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: tmpPath, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("verbsd: listen: %w", err)
	}
	ln.SetUnlinkOnClose(false) // the path changes; Close removes the final one
	if gid != 0 {
		if err := os.Chown(tmpPath, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("verbsd: give socket %s to group %d: %w", path, gid, errors.Unwrap(err))
		}
	}
	if err := os.Chmod(tmpPath, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("verbsd: %w", err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmpPath, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		ln.Close()
		return nil, fmt.Errorf("verbsd: socket %s: %w", path, err)
	}
	return ln, nil
}

// removeStale removes a socket file left by a server that is gone.
func removeStale(path string, log *slog.Logger) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("verbsd: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("verbsd: %s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("verbsd: %s: a server is already listening", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("verbsd: %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("verbsd: remove stale socket: %w", err)
	}
	log.Info("removed stale verbs socket", "path", path)
	return nil
}

// Serve accepts clients until ctx ends or Close is called, and returns
// nil then. Each client gets a goroutine for its control RPCs and one
// blocked on its doorbell.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		conn, err := s.ln.AcceptUnix()
		if err == nil {
			backoff = 0
		} else {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// The connection waits in the backlog; back off (up to a
				// second) until a client leaves, warning once a second.
				s.acceptLog.warn(s.log, time.Second, "verbs socket: out of descriptors", "err", err)
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return nil
				}
				continue
			}
			return fmt.Errorf("verbsd: accept: %w", err)
		}
		if err := s.start(conn); err != nil {
			s.refuseLog.warn(s.log, time.Second, "verbs client refused", "err", err)
			conn.Close()
		}
	}
}

// Close stops the server: the listener closes, every client connection is
// hung up and its objects destroyed, and the socket file is removed.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var conns []*net.UnixConn
	for c := range s.clients {
		conns = append(conns, c.conn.C)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	for _, c := range conns {
		c.Close()
	}
	s.wg.Wait()
	if rerr := os.Remove(s.o.SocketPath); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	s.mu.Lock()
	s.freeDevicePage() // Pump and BeforeWait see closed and never touch it again
	s.mu.Unlock()
	return err
}

// Objects counts what the server holds for its clients.
type Objects struct {
	Clients, PDs, MRs, CQs, QPs int
	Channels                    int // completion channels
	AHs                         int // address handles (ud.go)
}

// Objects returns the current counts, over all clients.
func (s *Server) Objects() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := Objects{Clients: len(s.clients)}
	for c := range s.clients {
		o.PDs += len(c.pds)
		o.MRs += len(c.mrs)
		o.CQs += len(c.cqs)
		o.QPs += len(c.qps)
		o.Channels += len(c.chs)
		o.AHs += len(c.ahs)
	}
	return o
}

// LimitStats counts refusals for the per-client limits.
type LimitStats struct {
	// Requests refused for a per-connection limit.
	Requests uint64
	// Connections refused for the per-uid limit.
	Conns uint64
}

// LimitStats returns the refusal counts so far.
func (s *Server) LimitStats() LimitStats {
	return LimitStats{Requests: s.limitRefusals.Load(), Conns: s.connRefusals.Load()}
}

// LimitCounters yields the refusal counts as counters, for
// Options.Counters: client_limit_refusals (requests refused for a
// per-connection limit) and client_conn_refusals (connections refused for
// the per-uid limit). A nil Server yields zeros.
func (s *Server) LimitCounters(yield func(name string, v uint64)) {
	var st LimitStats
	if s != nil {
		st = s.LimitStats()
	}
	yield("client_limit_refusals", st.Requests)
	yield("client_conn_refusals", st.Conns)
}

// Limits returns the limits in force (defaults filled in).
func (s *Server) Limits() Limits { return s.lim }

// SocketPath is where the server listens.
func (s *Server) SocketPath() string { return s.o.SocketPath }
