package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/softnic/softnic/qp"
)

// Cache-line offsets of the ring files (docs/verbs-ipc.md has the
// diagrams). Every index one side writes sits alone on its 64-byte line,
// so that the two processes do not bounce a line they both write.
const (
	lineSize = 64

	// Header, common to every file: magic, layout version, then
	// per-file fields. Written by the daemon once, read by the client to
	// check that both sides agree on the layout.
	offMagic   = 0x00
	offVersion = 0x04

	// QP file.
	offSQCap       = 0x08
	offRQCap       = 0x0C
	offSQEntrySize = 0x10
	offRQEntrySize = 0x14
	offSQEntries   = 0x18
	offRQEntries   = 0x1C
	OffSQProd      = 0x40  // client: send WQEs published
	OffSQCons      = 0x80  // daemon: send WQEs retired
	OffRQProd      = 0xC0  // client: receive WQEs published
	OffRQCons      = 0x100 // daemon: receive WQEs retired
	qpHeaderSize   = 0x140

	// CQ file.
	offCQCap       = 0x08
	offCQEntrySize = 0x0C
	offCQEntries   = 0x10
	// The completion channel's words (protocol version 3) share the
	// header line, which nothing else writes after Init: zero in a file
	// of a daemon or client that predates them, so the line's layout,
	// and Version, stay as they were. See Notify.
	OffCQArm      = 0x20 // client: ReqNotify's arm word; daemon clears it when it fires
	OffCQEvents   = 0x24 // daemon: events fired
	OffCQProd     = 0x40 // daemon: completions published
	OffCQCons     = 0x80 // client: completions consumed
	OffCQOverflow = 0xC0 // daemon: nonzero once a completion was lost
	cqHeaderSize  = 0x100

	// Device page.
	OffNeedWakeup = 0x40 // daemon: nonzero while the poll loop sleeps
	DevicePageLen = 0x80

	// Version is the layout version; a change of any offset bumps it.
	Version = 1
)

// Magic numbers identify each file ("SNQP", "SNCQ", "SNDV" in memory
// order), so that a descriptor of the wrong kind is caught at map time.
const (
	MagicQP     = 0x50514e53
	MagicCQ     = 0x51434e53
	MagicDevice = 0x56444e53
)

// Entry sizes: the rings hold the dataplane's own fixed-size structs
// byte for byte (see Fingerprint for why that is safe across processes).
var (
	SendEntrySize = int(unsafe.Sizeof(qp.SendWR{}))
	RecvEntrySize = int(unsafe.Sizeof(qp.RecvWR{}))
	WCEntrySize   = int(unsafe.Sizeof(qp.WC{}))
)

// MaxRingEntries bounds any ring (the engine's limit on a work queue,
// and a CQ's).
const MaxRingEntries = 1 << 22

// RingCap is the capacity of a ring asked to hold n entries: the next
// power of two, as the engine sizes its own queues (qp.NewRing), so that
// "queue full" happens at the same count in both modes.
func RingCap(n int) (uint32, error) {
	if n < 1 || n > MaxRingEntries {
		return 0, fmt.Errorf("shm: ring of %d entries (want 1 to %d)", n, MaxRingEntries)
	}
	c := uint32(1)
	for int(c) < n {
		c <<= 1
	}
	return c, nil
}

func alignLine(n int) int { return (n + lineSize - 1) &^ (lineSize - 1) }

// QPLayout places a QP's send and receive rings in one file.
type QPLayout struct {
	SQCap, RQCap uint32
	SQOff, RQOff int
	Size         int // file size in bytes (whole pages)
}

// NewQPLayout lays out rings for the given queue depths.
func NewQPLayout(maxSend, maxRecv int) (QPLayout, error) {
	sq, err := RingCap(maxSend)
	if err != nil {
		return QPLayout{}, err
	}
	rq, err := RingCap(maxRecv)
	if err != nil {
		return QPLayout{}, err
	}
	l := QPLayout{SQCap: sq, RQCap: rq, SQOff: qpHeaderSize}
	l.RQOff = alignLine(l.SQOff + int(sq)*SendEntrySize)
	l.Size = RoundPage(l.RQOff + int(rq)*RecvEntrySize)
	return l, nil
}

// Init writes the header of a fresh QP file (daemon).
func (l QPLayout) Init(mem []byte) {
	le := binary.LittleEndian
	le.PutUint32(mem[offMagic:], MagicQP)
	le.PutUint32(mem[offVersion:], Version)
	le.PutUint32(mem[offSQCap:], l.SQCap)
	le.PutUint32(mem[offRQCap:], l.RQCap)
	le.PutUint32(mem[offSQEntrySize:], uint32(SendEntrySize))
	le.PutUint32(mem[offRQEntrySize:], uint32(RecvEntrySize))
	le.PutUint32(mem[offSQEntries:], uint32(l.SQOff))
	le.PutUint32(mem[offRQEntries:], uint32(l.RQOff))
}

// Check verifies that mem holds a QP file of this layout (client).
func (l QPLayout) Check(mem []byte) error {
	if len(mem) < l.Size {
		return fmt.Errorf("shm: QP ring file has %d bytes, layout needs %d", len(mem), l.Size)
	}
	return checkHeader(mem, MagicQP, []headerWord{
		{offSQCap, l.SQCap}, {offRQCap, l.RQCap}, {offSQEntrySize, uint32(SendEntrySize)},
		{offRQEntrySize, uint32(RecvEntrySize)}, {offSQEntries, uint32(l.SQOff)}, {offRQEntries, uint32(l.RQOff)},
	})
}

// SQ and RQ are the rings of a mapped QP file.
func (l QPLayout) SQ(mem []byte) Ring[qp.SendWR] {
	return newRing[qp.SendWR](mem, OffSQProd, OffSQCons, l.SQOff, l.SQCap)
}
func (l QPLayout) RQ(mem []byte) Ring[qp.RecvWR] {
	return newRing[qp.RecvWR](mem, OffRQProd, OffRQCons, l.RQOff, l.RQCap)
}

// CQLayout places a completion ring in a file.
type CQLayout struct {
	Cap  uint32
	Off  int
	Size int
}

// NewCQLayout lays out a ring of at least depth completions.
func NewCQLayout(depth int) (CQLayout, error) {
	c, err := RingCap(depth)
	if err != nil {
		return CQLayout{}, err
	}
	return CQLayout{Cap: c, Off: cqHeaderSize, Size: RoundPage(cqHeaderSize + int(c)*WCEntrySize)}, nil
}

// Init writes the header of a fresh CQ file (daemon).
func (l CQLayout) Init(mem []byte) {
	le := binary.LittleEndian
	le.PutUint32(mem[offMagic:], MagicCQ)
	le.PutUint32(mem[offVersion:], Version)
	le.PutUint32(mem[offCQCap:], l.Cap)
	le.PutUint32(mem[offCQEntrySize:], uint32(WCEntrySize))
	le.PutUint32(mem[offCQEntries:], uint32(l.Off))
}

// Check verifies that mem holds a CQ file of this layout (client).
func (l CQLayout) Check(mem []byte) error {
	if len(mem) < l.Size {
		return fmt.Errorf("shm: CQ ring file has %d bytes, layout needs %d", len(mem), l.Size)
	}
	return checkHeader(mem, MagicCQ, []headerWord{{offCQCap, l.Cap}, {offCQEntrySize, uint32(WCEntrySize)}, {offCQEntries, uint32(l.Off)}})
}

// Ring is the completion ring of a mapped CQ file.
func (l CQLayout) Ring(mem []byte) Ring[qp.WC] {
	return newRing[qp.WC](mem, OffCQProd, OffCQCons, l.Off, l.Cap)
}

// Overflow is the CQ file's overflow flag.
func (l CQLayout) Overflow(mem []byte) *atomic.Uint32 { return word(mem, OffCQOverflow) }

// Notify is the CQ file's completion-channel words.
func (l CQLayout) Notify(mem []byte) Notify {
	_ = mem[OffCQEvents+3]
	return Notify{
		Arm:    (*atomic.Uint32)(unsafe.Pointer(&mem[OffCQArm])),
		Events: (*atomic.Uint32)(unsafe.Pointer(&mem[OffCQEvents])),
	}
}

// InitDevicePage writes the device page header (daemon).
func InitDevicePage(mem []byte) {
	binary.LittleEndian.PutUint32(mem[offMagic:], MagicDevice)
	binary.LittleEndian.PutUint32(mem[offVersion:], Version)
}

// CheckDevicePage verifies a mapped device page (client).
func CheckDevicePage(mem []byte) error {
	if len(mem) < DevicePageLen {
		return fmt.Errorf("shm: device page has %d bytes", len(mem))
	}
	return checkHeader(mem, MagicDevice, nil)
}

// NeedWakeup is the device page's flag: the daemon sets it before its
// poll loop sleeps and clears it once it runs again; a client that
// publishes work while it is set rings the doorbell.
func NeedWakeup(mem []byte) *atomic.Uint32 { return word(mem, OffNeedWakeup) }

// headerWord is a 32-bit header field and its expected value.
type headerWord struct {
	off  int
	want uint32
}

// checkHeader compares the magic, the version and the given words.
func checkHeader(mem []byte, magic uint32, want []headerWord) error {
	le := binary.LittleEndian
	if m := le.Uint32(mem[offMagic:]); m != magic {
		return fmt.Errorf("shm: magic %#x, want %#x", m, magic)
	}
	if v := le.Uint32(mem[offVersion:]); v != Version {
		return fmt.Errorf("shm: layout version %d, want %d", v, Version)
	}
	for _, w := range want {
		if got := le.Uint32(mem[w.off:]); got != w.want {
			return fmt.Errorf("shm: header word at %#x is %d, want %d", w.off, got, w.want)
		}
	}
	return nil
}

// word is the 32-bit index at off, for sync/atomic. off is a multiple of
// 64 and mappings are page-aligned, so the word is aligned.
func word(mem []byte, off int) *atomic.Uint32 {
	_ = mem[off+3]
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

// Ring is one ring in shared memory: entries of T and the two indices.
// It is a view; the Producer and Consumer below hold each side's private
// cursor.
type Ring[T any] struct {
	prod, cons *atomic.Uint32
	slots      []T
	mask       uint32
}

func newRing[T any](mem []byte, prodOff, consOff, entOff int, capacity uint32) Ring[T] {
	size := int(unsafe.Sizeof(*new(T)))
	_ = mem[entOff+int(capacity)*size-1] // bounds, once
	return Ring[T]{
		prod:  word(mem, prodOff),
		cons:  word(mem, consOff),
		slots: unsafe.Slice((*T)(unsafe.Pointer(&mem[entOff])), capacity),
		mask:  capacity - 1,
	}
}

// Cap is the number of entries.
func (r *Ring[T]) Cap() uint32 { return r.mask + 1 }

// Producer is the writing side of a ring. Its tail is private: it is
// published with Publish and never read back.
type Producer[T any] struct {
	Ring[T]
	tail uint32
}

// NewProducer starts a producer on a fresh ring (indices zero).
func NewProducer[T any](r Ring[T]) Producer[T] { return Producer[T]{Ring: r} }

// Free is how many entries can be pushed before the consumer releases
// more. A consumer index that claims more than the ring holds (corrupt
// memory) leaves no room.
func (p *Producer[T]) Free() uint32 {
	used := p.tail - p.cons.Load()
	if used > p.Cap() {
		return 0
	}
	return p.Cap() - used
}

// Push copies *v into the next slot; the caller checked Free. The entry is
// not visible to the consumer until Publish.
func (p *Producer[T]) Push(v *T) {
	p.slots[p.tail&p.mask] = *v
	p.tail++
}

// Publish makes pushed entries visible: the atomic store orders the entry
// writes before the index (release), as the consumer's atomic load of the
// index orders its entry reads after it.
func (p *Producer[T]) Publish() { p.prod.Store(p.tail) }

// Tail is the private producer index.
func (p *Producer[T]) Tail() uint32 { return p.tail }

// Consumer is the reading side of a ring. Head (how far entries were
// read) is private; Release publishes how far slots may be reused, which
// can lag Head (the daemon releases a send WQE only when the engine
// retires it, so that the ring's capacity bounds outstanding work as the
// engine's queue does).
type Consumer[T any] struct {
	Ring[T]
	head uint32
}

// NewConsumer starts a consumer on a fresh ring.
func NewConsumer[T any](r Ring[T]) Consumer[T] { return Consumer[T]{Ring: r} }

// ErrCorrupt reports a producer index no correct producer could write.
var ErrCorrupt = fmt.Errorf("shm: ring index out of range (corrupt shared memory)")

// Available is how many published entries wait at Head. A producer index
// more than a ring ahead is corruption.
func (c *Consumer[T]) Available() (uint32, error) {
	n := c.prod.Load() - c.head
	if n > c.Cap() {
		return 0, ErrCorrupt
	}
	return n, nil
}

// At returns the entry i places after Head (i < Available). The slot is
// shared: a hostile producer may change it while it is read, so the
// daemon copies it out before validating it.
func (c *Consumer[T]) At(i uint32) *T { return &c.slots[(c.head+i)&c.mask] }

// Advance moves Head past n entries.
func (c *Consumer[T]) Advance(n uint32) { c.head += n }

// Head is the private consumer index.
func (c *Consumer[T]) Head() uint32 { return c.head }

// Release publishes that the slots before idx may be reused.
func (c *Consumer[T]) Release(idx uint32) { c.cons.Store(idx) }
