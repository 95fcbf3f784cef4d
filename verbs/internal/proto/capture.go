package proto

// Packet capture (docs/capture.md). Not tied to a protocol version: a
// daemon that predates it answers "unknown operation" (protocol), which
// `softnic capture` reports as such.
const (
	OpCapture     = "capture"      // start capturing; the response carries the stream socket
	OpCaptureStop = "capture_stop" // stop; the result has the counts
)

// CaptureArgs starts a capture on the connection (one at a time; root or
// the daemon's uid only, else ErrPermission). QPN (BTH DestQP) and Opcode
// filter, -1 for any; SnapLen 0 is the largest frame; Slots is the
// ring's size in frames (0: the daemon's default).
type CaptureArgs struct {
	SnapLen int   `json:"snaplen"`
	QPN     int64 `json:"qpn"`
	Opcode  int   `json:"opcode"`
	Slots   int   `json:"slots,omitempty"`
}

// CaptureResult answers capture. Its one descriptor is a SOCK_SEQPACKET
// socket on which the daemon sends one message per captured frame (the
// record of package internal/capture) until capture_stop or the end of
// the connection.
type CaptureResult struct {
	SnapLen int `json:"snaplen"` // in force (at most the largest frame)
	Slots   int `json:"slots"`
}

// CaptureStopResult answers capture_stop: the frames that matched the
// filter, and those of them dropped because the ring was full (the
// client read too slowly), as tcpdump's "dropped by kernel".
type CaptureStopResult struct {
	Matched uint64 `json:"matched"`
	Dropped uint64 `json:"dropped"`
}
