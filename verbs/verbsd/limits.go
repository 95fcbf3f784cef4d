package verbsd

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/verbs/internal/proto"
)

// Limits bound what one client can make the daemon hold, so that one
// permitted user cannot exhaust the daemon's descriptors or memory for
// the others. A zero field takes its default; a negative one means no
// limit. The defaults and their reasons are in docs/verbs-ipc.md.
type Limits struct {
	// ConnsPerUID is how many connections one uid (SO_PEERCRED) may
	// have open at once.
	ConnsPerUID int
	// Per connection: protection domains, QPs, CQs, memory regions and
	// completion channels.
	PDs, QPs, CQs, MRs, Channels int
	// RingBytes bounds the memory the daemon allocates for one
	// connection: its QP ring files, its CQ ring files, and the engine's
	// own queues behind them (each QP's send and receive queue, each
	// CQ's completion ring).
	RingBytes int64
	// RingBytesPerUID bounds the same over all connections of one uid,
	// which ConnsPerUID alone would let reach ConnsPerUID × RingBytes.
	RingBytesPerUID int64
	// MRBytes bounds the client memory the daemon maps for one
	// connection's memory regions (address space and page tables; the
	// pages are the client's).
	MRBytes int64
	// AHs bounds a connection's address handles (UD; ud.go).
	AHs int
}

// Default limits.
const (
	DefaultConnsPerUID = 64
	DefaultPDs         = 4096
	DefaultQPs         = 16384 // softnic-bench -q goes to 16384 (cm.MaxQPs) on one connection
	DefaultCQs         = 1024
	DefaultMRs         = 4096
	DefaultChannels    = 1024
	DefaultRingBytes   = 2 << 30
	// DefaultRingBytesPerUID: two connections' worth, so that both ends
	// of the largest benchmark run by one user on one host fit.
	DefaultRingBytesPerUID = 4 << 30
	DefaultMRBytes         = 64 << 30
	// DefaultAHs: perftest's UD tests make one AH per QP, and a UD
	// server one per peer; an AH is some 100 bytes of daemon memory.
	DefaultAHs = 65536
)

// withDefaults fills zero fields.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.ConnsPerUID, DefaultConnsPerUID)
	def(&l.PDs, DefaultPDs)
	def(&l.QPs, DefaultQPs)
	def(&l.CQs, DefaultCQs)
	def(&l.MRs, DefaultMRs)
	def(&l.Channels, DefaultChannels)
	def(&l.AHs, DefaultAHs)
	if l.RingBytes == 0 {
		l.RingBytes = DefaultRingBytes
	}
	if l.RingBytesPerUID == 0 {
		l.RingBytesPerUID = DefaultRingBytesPerUID
	}
	if l.MRBytes == 0 {
		l.MRBytes = DefaultMRBytes
	}
	return l
}

// limitErr is the error for an exceeded limit: it names the limit and the
// flag that raises it.
func limitErr(n int64, what, flag string) error {
	return fmt.Errorf("%w: %d %s per connection (softnic run --%s)", proto.ErrLimit, n, what, flag)
}

// count checks that a connection holding have objects may make one more
// (Server.mu held), counting a refusal.
func (s *Server) count(have, max int, what, flag string) error {
	if max < 0 || have < max {
		return nil
	}
	s.limitRefusals.Add(1)
	return limitErr(int64(max), what, flag)
}

// bytes checks that a connection holding have bytes may add more.
func (s *Server) bytes(have, more, max int64, what, flag string) error {
	if max < 0 || (more <= max && have <= max-more) {
		return nil
	}
	s.limitRefusals.Add(1)
	return fmt.Errorf("%w: %d bytes of %s per connection (softnic run --%s); this connection holds %d and asked for %d more",
		proto.ErrLimit, max, what, flag, have, more)
}

// reserveRings checks that c may hold cost more bytes of rings, against
// the per-connection and the per-uid limit, and counts them (Server.mu
// held). What is reserved is counted at once, so that concurrent
// requests of one uid's connections cannot overshoot together; the
// caller gives it back with releaseRings if it then fails.
func (s *Server) reserveRings(c *client, cost int64) error {
	if err := s.bytes(c.ringBytes, cost, s.lim.RingBytes, "QP and CQ rings", "max-ring-bytes"); err != nil {
		return err
	}
	if max, have := s.lim.RingBytesPerUID, s.uidRingBytes[c.uid]; max >= 0 && (cost > max || have > max-cost) {
		s.limitRefusals.Add(1)
		return fmt.Errorf("%w: %d bytes of QP and CQ rings per uid (softnic run --max-ring-bytes-per-uid); this uid's connections hold %d and asked for %d more",
			proto.ErrLimit, max, have, cost)
	}
	c.ringBytes += cost
	s.uidRingBytes[c.uid] += cost
	return nil
}

// releaseRings gives back what reserveRings counted (Server.mu held).
func (s *Server) releaseRings(c *client, cost int64) {
	c.ringBytes -= cost
	if s.uidRingBytes[c.uid] -= cost; s.uidRingBytes[c.uid] <= 0 {
		delete(s.uidRingBytes, c.uid)
	}
}

// rateLog logs a repeated warning at most once per interval, with how
// many it suppressed in between.
type rateLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *rateLog) warn(log *slog.Logger, every time.Duration, msg string, args ...any) {
	r.warnAt(time.Now(), log, every, msg, args...)
}

func (r *rateLog) warnAt(now time.Time, log *slog.Logger, every time.Duration, msg string, args ...any) {
	r.mu.Lock()
	if !r.last.IsZero() && now.Sub(r.last) < every {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}

// returnMemoryBytes: when a connection that held at least this many bytes
// of rings ends, the server returns the freed memory to the system at
// once (debug.FreeOSMemory: a garbage collection, then every free page
// released). The ring files are unmapped by drop, and so are the engine's
// deep queues (qp.OffHeapBytes and more: mappings of their own, unmapped
// by DestroyQP and DestroyCQ); what stays is the Go heap of the smaller
// ones, of many shallow QPs, for instance: left to
// the runtime, that heap is collected only at the next GC, which a quiet
// daemon runs every two minutes, and its pages are released only a GC
// cycle later (the runtime spares pages that were densely used in the
// last cycle). A client that filled --max-ring-bytes left the daemon
// hundreds of MB resident for minutes that way. 64 MiB is far above what
// a perftest-sized client holds (a few MiB), so ordinary clients coming
// and going cost no forced collection while others are connected.
//
// The last client leaving also returns the heap: with no client the
// engine has no QP and no traffic, so the collection (about a
// millisecond for a daemon's heap of a few MiB) delays nothing, and an
// idle daemon's RSS is then what it holds, not the garbage of the clients
// that came and went. Without it, a daemon sampled between clients (the
// soak, scripts/soak.sh) wandered by 15-20% of its ~30 MiB with the
// heap's garbage, hiding what a leak would look like.
const returnMemoryBytes = 64 << 20

// memReturner runs freeOSMemory on a goroutine of its own, once for any
// number of requests that arrive while it runs plus once more after
// them, so a burst of large clients leaving costs at most two
// collections and no client's drop waits for one.
type memReturner struct {
	mu      sync.Mutex
	running bool
	again   bool
	runs    atomic.Uint64 // completed runs, for tests
	// free replaces freeOSMemory for this returner (a test's); set
	// before the first request.
	free func()
}

// freeOSMemory is debug.FreeOSMemory.
var freeOSMemory = debug.FreeOSMemory

func (m *memReturner) request() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		m.again = true
		return
	}
	m.running = true
	free := m.free
	if free == nil {
		free = freeOSMemory
	}
	go func() {
		for {
			free()
			m.runs.Add(1)
			m.mu.Lock()
			if !m.again {
				m.running = false
				m.mu.Unlock()
				return
			}
			m.again = false
			m.mu.Unlock()
		}
	}()
}
