package dataplane

// Port moves Ethernet frames between an engine and a wire: the in-memory
// fabric, an AF_XDP socket or a kernel UDP socket. The shape follows an
// AF_XDP ring pair so that the fast path can build frames straight into the
// transmit ring and read them straight out of the receive ring.
type Port interface {
	// Receive fills frames[:n] with received frames. They stay valid until
	// the next Receive call.
	Receive(frames [][]byte) int
	// TxBuffer returns a buffer of MaxFrame bytes to build the next frame
	// in, or nil when the transmit ring is full (back-pressure).
	TxBuffer() []byte
	// Transmit queues the first n bytes of the buffer from the last
	// TxBuffer call.
	Transmit(n int)
	// Flush pushes queued frames to the wire (one system call per batch on
	// real ports).
	Flush()
	// MaxFrame is the largest frame the port carries.
	MaxFrame() int
}
