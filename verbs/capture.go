package verbs

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// CaptureOptions selects what a capture takes (docs/capture.md).
type CaptureOptions struct {
	SnapLen int   // bytes kept of each frame; 0: all (the NIC's largest frame)
	QPN     int64 // BTH DestQP to keep, -1 any
	Opcode  int   // BTH opcode to keep, -1 any
	Slots   int   // frames the daemon buffers; 0: its default
}

// Capture is a packet capture running in the daemon: the frames the NIC
// receives and sends, as it sees them (softnic capture).
type Capture struct {
	ctx     *Context
	conn    *net.UnixConn
	buf     []byte
	SnapLen int // in force
	once    sync.Once
	res     proto.CaptureStopResult
	err     error
}

// CaptureRecord is one captured frame.
type CaptureRecord = capture.Record

// Capture starts capturing on the daemon's NIC (root or the daemon's
// user only). A daemon context only: an embedded NIC's frames are taken
// with capture.AttachPcap on its Engine.
func (c *Context) Capture(o CaptureOptions) (*Capture, error) {
	if c.remote == nil {
		return nil, errors.New("verbs: capture needs a daemon context (embedded: attach a tap to the engine)")
	}
	var res proto.CaptureResult
	fds, err := c.remote.call(proto.OpCapture, proto.CaptureArgs{SnapLen: o.SnapLen, QPN: o.QPN, Opcode: o.Opcode, Slots: o.Slots}, nil, &res)
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return nil, fmt.Errorf("%w: capture sent %d descriptors, want 1", proto.ErrProtocol, len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "softnic-capture")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("%w: capture descriptor is not a unix socket", proto.ErrProtocol)
	}
	return &Capture{ctx: c, conn: uc, buf: make([]byte, capture.RecordHeaderLen+res.SnapLen+1), SnapLen: res.SnapLen}, nil
}

// Next waits for the next frame. The record's Data is valid until the
// next call. It returns io.EOF once the capture has stopped (Stop, or
// the daemon went away).
func (cp *Capture) Next() (CaptureRecord, error) {
	n, err := cp.conn.Read(cp.buf)
	if err != nil || n == 0 {
		if err == nil || errors.Is(err, net.ErrClosed) {
			err = io.EOF
		}
		return CaptureRecord{}, err
	}
	return capture.DecodeRecord(cp.buf[:n])
}

// Stop ends the capture and returns how many frames matched the filter
// and how many of them the daemon dropped because its buffer was full.
func (cp *Capture) Stop() (matched, dropped uint64, err error) {
	cp.once.Do(func() {
		_, cp.err = cp.ctx.remote.call(proto.OpCaptureStop, nil, nil, &cp.res)
		cp.conn.Close()
	})
	return cp.res.Matched, cp.res.Dropped, cp.err
}
