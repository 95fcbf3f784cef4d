package capture

import (
	"bufio"
	"io"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/pcap"
)

// PcapTap writes the frames of one engine to a pcap file as the engine
// sends and receives them: the embedded tools' --pcap. It writes on the
// poll loop (buffered), with the engine's time as the timestamp (in
// simulated time, time since the simulation's start).
type PcapTap struct {
	e      *dataplane.Engine
	bw     *bufio.Writer
	pw     *pcap.Writer
	filter Filter
	frames uint64
	err    error
}

// AttachPcap installs a tap on e that writes every frame matching f to w
// (snap: the snap length, 0 for pcap.DefaultSnapLen). Close detaches it.
func AttachPcap(e *dataplane.Engine, w io.Writer, snap int, f Filter) (*PcapTap, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	pw, err := pcap.NewWriter(bw, snap)
	if err != nil {
		return nil, err
	}
	t := &PcapTap{e: e, bw: bw, pw: pw, filter: f}
	e.SetCapture(t.tap)
	return t, nil
}

func (t *PcapTap) tap(_ dataplane.CaptureDir, now time.Duration, frame []byte) {
	if t.err != nil || !t.filter.Match(frame) {
		return
	}
	if t.err = t.pw.WritePacket(now, len(frame), frame); t.err == nil {
		t.frames++
	}
}

// Close detaches the tap, flushes the file and returns the number of
// frames written and the first write error.
func (t *PcapTap) Close() (uint64, error) {
	t.e.SetCapture(nil) // after it returns the poll loop no longer calls tap
	if err := t.bw.Flush(); t.err == nil {
		t.err = err
	}
	return t.frames, t.err
}
