package verbsd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// Capture's ring: DefaultCaptureSlots frames unless the client asks,
// at most maxCaptureSlots and maxCaptureBytes of slots per capture.
const (
	DefaultCaptureSlots = 4096
	maxCaptureSlots     = 1 << 16
	maxCaptureBytes     = 64 << 20
)

// captures are the running packet captures (docs/capture.md): the engine's
// tap copies each frame into the ring of every capture whose filter takes
// it; a goroutine per capture sends the ring's records on its socket.
type captures struct {
	mu  sync.Mutex
	by  map[*client]*captureSession
	set func(dataplane.CaptureFunc)
}

type captureSession struct {
	ring *capture.Ring
	conn *net.UnixConn
	stop chan struct{}
	done chan struct{}
}

// install gives the engine a tap over the current sessions, or none
// (c.mu held).
func (cs *captures) install() {
	if len(cs.by) == 0 {
		cs.set(nil)
		return
	}
	rings := make([]*capture.Ring, 0, len(cs.by))
	for _, s := range cs.by {
		rings = append(rings, s.ring)
	}
	cs.set(func(d dataplane.CaptureDir, _ time.Duration, frame []byte) {
		now := time.Now().UnixNano()
		for _, r := range rings {
			r.Offer(d, now, frame)
		}
	})
}

// startCapture answers capture.
func (s *Server) startCapture(c *client, a proto.CaptureArgs) (any, reply, error) {
	if !mayChangeNetem(c.uid, uint32(os.Geteuid())) {
		return nil, reply{}, fmt.Errorf("%w: uid %d may not capture the NIC's traffic (root or the daemon's uid %d may)", proto.ErrPermission, c.uid, os.Geteuid())
	}
	snap := s.e.MaxFrame()
	if a.SnapLen > 0 && a.SnapLen < snap {
		snap = a.SnapLen
	}
	slots := a.Slots
	if slots <= 0 {
		slots = DefaultCaptureSlots
	}
	slots = min(slots, maxCaptureSlots, maxCaptureBytes/(capture.RecordHeaderLen+snap))
	if a.Opcode > 255 {
		return nil, reply{}, fmt.Errorf("%w: capture: opcode %d", proto.ErrProtocol, a.Opcode)
	}
	qpn, op := a.QPN, a.Opcode
	if qpn < 0 {
		qpn = -1
	}
	if op < 0 {
		op = -1
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, reply{}, fmt.Errorf("capture socket: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "softnic-capture")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, reply{}, fmt.Errorf("capture socket: %w", err)
	}
	sess := &captureSession{
		ring: capture.NewRing(slots, snap, capture.Filter{QPN: qpn, Opcode: op}),
		conn: fc.(*net.UnixConn), stop: make(chan struct{}), done: make(chan struct{}),
	}
	cs := &s.caps
	cs.mu.Lock()
	if cs.by == nil {
		cs.by = map[*client]*captureSession{}
		cs.set = s.e.SetCapture
	}
	if cs.by[c] != nil {
		cs.mu.Unlock()
		sess.conn.Close()
		unix.Close(fds[1])
		return nil, reply{}, fmt.Errorf("%w: this connection already captures", dataplane.ErrBusy)
	}
	cs.by[c] = sess
	cs.install()
	cs.mu.Unlock()
	go sess.send()
	c.log.Info("packet capture started", "snaplen", snap, "slots", slots, "qpn", qpn, "opcode", op)
	return proto.CaptureResult{SnapLen: snap, Slots: slots}, reply{fds: []int{fds[1]}, owned: []int{fds[1]}}, nil
}

// send moves records from the ring to the socket until stopped or the
// client stops reading for good (the socket fails).
func (cs *captureSession) send() {
	defer close(cs.done)
	buf := make([]byte, capture.RecordHeaderLen+cs.ring.SnapLen())
	for {
		select {
		case <-cs.ring.Ready():
		case <-cs.stop:
			return
		}
		for {
			n := cs.ring.Take(buf)
			if n == 0 {
				break
			}
			if _, err := cs.conn.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// stopCapture ends c's capture, if any, and returns its counts.
func (s *Server) stopCapture(c *client) (proto.CaptureStopResult, bool) {
	cs := &s.caps
	cs.mu.Lock()
	sess := cs.by[c]
	if sess != nil {
		delete(cs.by, c)
		cs.install() // once it returns the tap no longer offers to sess
	}
	cs.mu.Unlock()
	if sess == nil {
		return proto.CaptureStopResult{}, false
	}
	sess.ring.Close()
	close(sess.stop)
	sess.conn.Close() // unblocks a write the client does not read
	<-sess.done
	m, d := sess.ring.Stats()
	c.log.Info("packet capture stopped", "matched", m, "dropped", d)
	return proto.CaptureStopResult{Matched: m, Dropped: d}, true
}

// captureStop answers capture_stop.
func (s *Server) captureStop(c *client) (any, reply, error) {
	res, ok := s.stopCapture(c)
	if !ok {
		return nil, reply{}, errors.New("capture_stop: this connection does not capture")
	}
	return res, reply{}, nil
}
