package dataplane

import "time"

// CaptureDir says which way a captured frame went.
type CaptureDir uint8

const (
	CaptureRX CaptureDir = iota // received, before any check
	CaptureTX                   // transmitted, ICRC written
)

func (d CaptureDir) String() string {
	if d == CaptureTX {
		return "tx"
	}
	return "rx"
}

// CaptureFunc sees every frame the engine receives (as the port hands it
// over, before it is parsed, so malformed frames too) and every frame it
// transmits (sealed: ICRC and checksums written, before the port queues
// it), with the engine's time. It runs on the poll loop with the engine
// lock held: it must copy what it keeps (frame is the port's buffer),
// must not block, and must not call back into the engine.
type CaptureFunc func(dir CaptureDir, now time.Duration, frame []byte)

// SetCapture installs fn as the engine's capture tap (nil removes it).
// With no tap the engine pays one nil check per frame. The receive
// impairment (Config.Netem, LinkDelay) sits before the tap: a frame it
// drops is not seen, a frame it delays is seen when the engine takes it.
func (e *Engine) SetCapture(fn CaptureFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.capture = fn
}

// MaxFrame is the largest frame the engine's port carries.
func (e *Engine) MaxFrame() int { return e.port.MaxFrame() }
