package dataplane

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

// Capture returns the capture tap SetCapture installed (nil: none), for a
// poll loop outside the engine that feeds the engine's capture sessions
// (softnic switch: its ingress frames). It takes the engine's lock.
func (e *Engine) Capture() CaptureFunc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.capture
}
