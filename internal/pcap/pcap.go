// Package pcap writes and reads classic libpcap capture files (the
// tcpdump format, "pcap-savefile(5)"): a 24-byte global header, then per
// packet a 16-byte record header and the captured bytes. Only what
// softnic needs: microsecond timestamps, little-endian on write (readers
// accept either byte order), LINKTYPE_ETHERNET.
package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

const (
	magicMicros = 0xa1b2c3d4 // microsecond timestamps
	magicNanos  = 0xa1b23c4d // nanosecond timestamps (read only)

	// LinkTypeEthernet is LINKTYPE_ETHERNET (DLT_EN10MB).
	LinkTypeEthernet = 1

	// DefaultSnapLen is tcpdump's default snap length.
	DefaultSnapLen = 262144

	fileHeaderLen   = 24
	recordHeaderLen = 16
)

// Writer writes a capture file. It is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	snapLen int
	hdr     [recordHeaderLen]byte
}

// NewWriter writes the file header to w: version 2.4, LINKTYPE_ETHERNET,
// snapLen (at most DefaultSnapLen; 0 or less means DefaultSnapLen).
func NewWriter(w io.Writer, snapLen int) (*Writer, error) {
	if snapLen <= 0 || snapLen > DefaultSnapLen {
		snapLen = DefaultSnapLen
	}
	var h [fileHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], magicMicros)
	le.PutUint16(h[4:], 2)
	le.PutUint16(h[6:], 4)
	// thiszone, sigfigs 0
	le.PutUint32(h[16:], uint32(snapLen))
	le.PutUint32(h[20:], LinkTypeEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, snapLen: snapLen}, nil
}

// SnapLen is the file's snap length.
func (w *Writer) SnapLen() int { return w.snapLen }

// WritePacket writes one packet captured at ts (time since the Unix
// epoch, or since any origin the reader agrees on) whose original length
// is origLen; data is what was captured and is cut to the snap length.
// It does not allocate.
func (w *Writer) WritePacket(ts time.Duration, origLen int, data []byte) error {
	if len(data) > w.snapLen {
		data = data[:w.snapLen]
	}
	if origLen < len(data) {
		origLen = len(data)
	}
	if ts < 0 {
		ts = 0
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:], uint32(ts/time.Second))
	le.PutUint32(w.hdr[4:], uint32(ts%time.Second/time.Microsecond))
	le.PutUint32(w.hdr[8:], uint32(len(data)))
	le.PutUint32(w.hdr[12:], uint32(origLen))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}

// Packet is one record of a capture file.
type Packet struct {
	Time    time.Duration // since the epoch of the file's timestamps
	OrigLen int
	Data    []byte
}

// Reader reads a capture file.
type Reader struct {
	r        io.Reader
	order    binary.ByteOrder
	nanos    bool
	SnapLen  int
	LinkType uint32
}

// ErrFormat is a file that is not a classic pcap file.
var ErrFormat = errors.New("pcap: not a pcap file")

// NewReader reads the file header.
func NewReader(r io.Reader) (*Reader, error) {
	var h [fileHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("pcap: file header: %w", err)
	}
	rd := &Reader{r: r}
	switch {
	case binary.LittleEndian.Uint32(h[:]) == magicMicros:
		rd.order = binary.LittleEndian
	case binary.BigEndian.Uint32(h[:]) == magicMicros:
		rd.order = binary.BigEndian
	case binary.LittleEndian.Uint32(h[:]) == magicNanos:
		rd.order, rd.nanos = binary.LittleEndian, true
	case binary.BigEndian.Uint32(h[:]) == magicNanos:
		rd.order, rd.nanos = binary.BigEndian, true
	default:
		return nil, ErrFormat
	}
	rd.SnapLen = int(rd.order.Uint32(h[16:]))
	rd.LinkType = rd.order.Uint32(h[20:])
	return rd, nil
}

// Next reads the next packet; io.EOF at the end of the file.
func (r *Reader) Next() (Packet, error) {
	var h [recordHeaderLen]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Packet{}, fmt.Errorf("pcap: truncated record header: %w", err)
		}
		return Packet{}, err
	}
	sec, frac := r.order.Uint32(h[0:]), r.order.Uint32(h[4:])
	incl, orig := r.order.Uint32(h[8:]), r.order.Uint32(h[12:])
	if incl > DefaultSnapLen || incl > orig {
		return Packet{}, fmt.Errorf("%w: record of %d bytes, original %d", ErrFormat, incl, orig)
	}
	p := Packet{OrigLen: int(orig), Data: make([]byte, incl)}
	if _, err := io.ReadFull(r.r, p.Data); err != nil {
		return Packet{}, fmt.Errorf("pcap: truncated record: %w", io.ErrUnexpectedEOF)
	}
	unit := time.Microsecond
	if r.nanos {
		unit = time.Nanosecond
	}
	p.Time = time.Duration(sec)*time.Second + time.Duration(frac)*unit
	return p, nil
}
