// Package capture is what softnic's packet capture shares between the
// daemon, its clients and the embedded tools: the filter (BTH DestQP,
// opcode), the bounded ring the daemon's tap copies frames into, the
// record each frame travels in to a capturing client, and a tap that
// writes a pcap file from an embedded engine. docs/capture.md.
package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
)

// Filter selects frames by their BTH: QPN is the BTH DestQP, Opcode the
// BTH opcode; a negative value matches anything. A frame whose BTH cannot
// be found (not UDP to 4791, truncated) matches only the empty filter.
type Filter struct {
	QPN    int64
	Opcode int
}

// All is the filter that matches every frame.
var All = Filter{QPN: -1, Opcode: -1}

// Empty reports whether f matches every frame.
func (f Filter) Empty() bool { return f.QPN < 0 && f.Opcode < 0 }

// Match reports whether frame passes f.
func (f Filter) Match(frame []byte) bool {
	if f.Empty() {
		return true
	}
	off, ok := BTHOffset(frame)
	if !ok {
		return false
	}
	b := frame[off:]
	if f.Opcode >= 0 && int(b[0]) != f.Opcode {
		return false
	}
	if f.QPN >= 0 && int64(b[5])<<16|int64(b[6])<<8|int64(b[7]) != f.QPN {
		return false
	}
	return true
}

// BTHOffset finds the BTH of an Ethernet frame (802.1Q-tagged or not)
// carrying IPv4 or IPv6 and UDP to port 4791, with at least the BTH's 12
// bytes present.
func BTHOffset(frame []byte) (int, bool) {
	eth := 14
	if len(frame) < eth {
		return 0, false
	}
	etherType := binary.BigEndian.Uint16(frame[12:])
	if etherType == 0x8100 {
		if eth += 4; len(frame) < eth {
			return 0, false
		}
		etherType = binary.BigEndian.Uint16(frame[16:])
	}
	var udp int
	switch etherType {
	case 0x0800:
		if len(frame) < eth+20 || frame[eth]>>4 != 4 || frame[eth+9] != 17 {
			return 0, false
		}
		udp = eth + int(frame[eth]&0x0F)*4
	case 0x86DD:
		if len(frame) < eth+40 || frame[eth+6] != 17 {
			return 0, false
		}
		udp = eth + 40
	default:
		return 0, false
	}
	if len(frame) < udp+8+bth.BTHLen || binary.BigEndian.Uint16(frame[udp+2:]) != 4791 {
		return 0, false
	}
	return udp + 8, true
}

// ParseOpcode reads an opcode filter: a number (decimal or 0x...) or an
// opcode name as bth names it ("RC_ACKNOWLEDGE_SACK", case-insensitive).
func ParseOpcode(s string) (int, error) {
	if n, err := strconv.ParseUint(s, 0, 8); err == nil {
		return int(n), nil
	}
	for op := 0; op < 256; op++ {
		if info := bth.Lookup(bth.Opcode(op)); info != nil && strings.EqualFold(info.Name, s) {
			return op, nil
		}
	}
	return 0, fmt.Errorf("capture: unknown opcode %q (a number 0-255 or a name such as RC_ACKNOWLEDGE_SACK)", s)
}

// Record is one captured frame as it travels to a capturing client: one
// SOCK_SEQPACKET message of RecordHeaderLen bytes, then the captured
// bytes (at most the snap length).
//
//	bytes 0-7   capture time, nanoseconds since the Unix epoch (big-endian)
//	byte  8     direction: 0 received, 1 transmitted (dataplane.CaptureDir)
//	bytes 9-11  reserved, 0
//	bytes 12-15 the frame's original length (big-endian)
type Record struct {
	Time    time.Time
	Dir     dataplane.CaptureDir
	OrigLen int
	Data    []byte
}

// RecordHeaderLen is the length of a record's header.
const RecordHeaderLen = 16

// ErrRecord is a message too short to be a record.
var ErrRecord = errors.New("capture: malformed record")

// DecodeRecord reads a record from msg; Data aliases msg.
func DecodeRecord(msg []byte) (Record, error) {
	if len(msg) < RecordHeaderLen || msg[8] > 1 {
		return Record{}, ErrRecord
	}
	r := Record{
		Time:    time.Unix(0, int64(binary.BigEndian.Uint64(msg))),
		Dir:     dataplane.CaptureDir(msg[8]),
		OrigLen: int(binary.BigEndian.Uint32(msg[12:])),
		Data:    msg[RecordHeaderLen:],
	}
	if r.OrigLen < len(r.Data) {
		return Record{}, ErrRecord
	}
	return r, nil
}

// putHeader writes a record's header into b.
func putHeader(b []byte, unixNano int64, dir dataplane.CaptureDir, origLen int) {
	binary.BigEndian.PutUint64(b, uint64(unixNano))
	b[8], b[9], b[10], b[11] = byte(dir), 0, 0, 0
	binary.BigEndian.PutUint32(b[12:], uint32(origLen))
}

// Ring is a bounded queue of captured frames between a tap on the poll
// loop (Offer, which never blocks and never allocates) and a reader
// (Take). A frame that finds the ring full is counted as dropped, as
// tcpdump's "packets dropped by kernel".
type Ring struct {
	filter Filter
	snap   int
	ready  chan struct{} // one token: the ring went from empty to not empty

	mu      sync.Mutex
	bufs    [][]byte // each RecordHeaderLen + snap bytes: an encoded record
	lens    []int
	head, n int
	seen    uint64 // matched the filter
	dropped uint64 // matched, but the ring was full
	closed  bool
}

// NewRing makes a ring of slots frames of at most snap captured bytes.
func NewRing(slots, snap int, f Filter) *Ring {
	r := &Ring{filter: f, snap: snap, ready: make(chan struct{}, 1), bufs: make([][]byte, slots), lens: make([]int, slots)}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, RecordHeaderLen+snap)
	}
	return r
}

// Offer copies frame into the ring if it matches the filter (the tap).
func (r *Ring) Offer(dir dataplane.CaptureDir, unixNano int64, frame []byte) {
	if !r.filter.Match(frame) {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.seen++
	if r.n == len(r.bufs) {
		r.dropped++
		r.mu.Unlock()
		return
	}
	i := (r.head + r.n) % len(r.bufs)
	b := r.bufs[i]
	putHeader(b, unixNano, dir, len(frame))
	r.lens[i] = RecordHeaderLen + copy(b[RecordHeaderLen:], frame)
	r.n++
	wasEmpty := r.n == 1
	r.mu.Unlock()
	if wasEmpty {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}

// Take copies the oldest record into buf (of at least RecordHeaderLen +
// snap bytes) and returns its length, 0 if the ring is empty.
func (r *Ring) Take(buf []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0
	}
	n := copy(buf, r.bufs[r.head][:r.lens[r.head]])
	r.head = (r.head + 1) % len(r.bufs)
	r.n--
	return n
}

// Ready has a token when the ring may have become non-empty.
func (r *Ring) Ready() <-chan struct{} { return r.ready }

// Close makes Offer ignore frames from now on.
func (r *Ring) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Stats returns the frames that matched the filter and those of them
// dropped because the ring was full.
func (r *Ring) Stats() (matched, dropped uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.dropped
}

// SnapLen is the ring's snap length.
func (r *Ring) SnapLen() int { return r.snap }
