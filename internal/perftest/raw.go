package perftest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/verbs/cm"
)

// The raw test measures the path without softnic's transport: frames that
// look like RoCEv2 to every device on the way (Ethernet, IP, UDP/4791, a
// BTH, payload and a valid ICRC) sent as fast as one core can build them
// through the same port the NIC uses, and counted on the far side. Its
// frame rate is the ceiling softnic's goodput is read against.

// RawFrame describes the frames of a raw run.
type RawFrame struct {
	Header  bth.FrameHeader // addresses; SrcPort 0 takes a fixed entropy port
	DestQPN uint32
	Payload int // bytes after the BTH (1024: one full packet at MTU 1024)
}

// rawSrcPort is the UDP source port of raw frames when none is set: in
// the dynamic range, as RoCEv2 entropy ports are (Annex A17).
const rawSrcPort = 0xC0DE

// Build writes the frame with PSN psn into buf and returns its length, or
// 0 if buf is too short. The opcode is RC SEND Only: a receiver's NIC
// without that QP drops it after the ICRC check, which is the work a real
// receive path does at least.
func (f *RawFrame) Build(buf []byte, psn uint32) int {
	h := f.Header
	if h.SrcPort == 0 {
		h.SrcPort = rawSrcPort
	}
	pad := bth.PadFor(f.Payload)
	roceLen := bth.BTHLen + f.Payload + pad + bth.ICRCLen
	n := h.Len() + roceLen
	if f.Payload < 0 || n > len(buf) {
		return 0
	}
	off := h.Encode(buf, roceLen)
	bth.BTH(buf[off:]).Encode(&bth.BTHFields{Opcode: bth.RCSendOnly, PadCount: uint8(pad), PKey: 0xFFFF,
		DestQPN: f.DestQPN, PSN: psn & 0xFFFFFF})
	payload := buf[off+bth.BTHLen : n-bth.ICRCLen]
	for i := range payload {
		payload[i] = byte(i)
	}
	bth.FinishFrame(buf[:n], &h)
	return n
}

// RawStats counts frames over a stretch of time.
type RawStats struct {
	Frames  uint64
	Bytes   uint64 // Ethernet frame bytes, without preamble, FCS or gap
	Elapsed time.Duration
}

// Mpps is the frame rate in millions per second.
func (s RawStats) Mpps() float64 { return rate(float64(s.Frames), s.Elapsed) / 1e6 }

// Gbps is the frame bit rate in Gb/s.
func (s RawStats) Gbps() float64 { return rate(float64(s.Bytes)*8, s.Elapsed) / 1e9 }

func rate(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

func (s RawStats) String() string {
	return fmt.Sprintf("%d frames in %v: %.0f frames/s, %.3f Mpps, %.2f Gb/s",
		s.Frames, s.Elapsed.Round(time.Millisecond), rate(float64(s.Frames), s.Elapsed), s.Mpps(), s.Gbps())
}

// RawPort is what the raw test needs of a port: the dataplane's Port and,
// optionally, a blocking wait for when there is nothing to do (an AF_XDP
// port waits on its socket; nil spins with yields).
type RawPort struct {
	dataplane.Port
	Wait func(timeout time.Duration)
}

// RawSend builds and transmits frames until d has passed (or, if frames >
// 0, that many are sent) and returns what it sent. Each frame is copied
// from a template and gets its own PSN and ICRC, as softnic's transmit
// path does per packet; everything else is as cheap as it can be.
func RawSend(ctx context.Context, p RawPort, f RawFrame, d time.Duration, frames uint64) (RawStats, error) {
	tmpl := make([]byte, p.MaxFrame())
	n := f.Build(tmpl, 0)
	if n == 0 {
		return RawStats{}, fmt.Errorf("perftest: a raw frame with %d payload bytes does not fit the port's %d-byte frames", f.Payload, p.MaxFrame())
	}
	tmpl = tmpl[:n]
	h := f.Header
	bthOff := h.Len()
	const batch = 64
	var st RawStats
	start := time.Now()
	for psn := uint32(0); ; {
		if frames > 0 && st.Frames >= frames {
			break
		}
		sent := 0
		for ; sent < batch && (frames == 0 || st.Frames < frames); sent++ {
			buf := p.TxBuffer()
			if buf == nil {
				break
			}
			copy(buf, tmpl)
			psn++
			bth.BTH(buf[bthOff:]).SetPSN(psn & 0xFFFFFF)
			bth.FinishFrame(buf[:n], &h)
			p.Transmit(n)
			st.Frames++
		}
		p.Flush()
		if d > 0 && time.Since(start) >= d || ctx.Err() != nil {
			break
		}
		if sent == 0 { // transmit ring full: let the kernel drain it
			if p.Wait != nil {
				p.Wait(100 * time.Microsecond)
			} else {
				runtime.Gosched()
			}
		}
	}
	st.Elapsed = time.Since(start)
	st.Bytes = st.Frames * uint64(n)
	return st, ctx.Err()
}

// RawReceive counts frames until stop reports true, calling each, if not
// nil, with every second's count. The total's Elapsed runs from the first
// frame to the last, so that the time before the sender started and after
// it stopped does not dilute the rate.
func RawReceive(ctx context.Context, p RawPort, stop func() bool, each func(RawStats)) (RawStats, error) {
	frames := make([][]byte, 64)
	var total, sec RawStats
	var first, last time.Time
	secStart := time.Now()
	idle := 0
	for ctx.Err() == nil && !stop() {
		n := p.Receive(frames)
		now := time.Now()
		if n > 0 {
			for _, fr := range frames[:n] {
				sec.Bytes += uint64(len(fr))
			}
			sec.Frames += uint64(n)
			if first.IsZero() {
				first = now
			}
			last, idle = now, 0
		} else if idle++; idle > 64 {
			if p.Wait != nil {
				p.Wait(time.Millisecond)
			} else {
				runtime.Gosched()
			}
		}
		if now.Sub(secStart) >= time.Second {
			sec.Elapsed = now.Sub(secStart)
			if each != nil {
				each(sec)
			}
			total.Frames += sec.Frames
			total.Bytes += sec.Bytes
			sec, secStart = RawStats{}, now
		}
	}
	total.Frames += sec.Frames
	total.Bytes += sec.Bytes
	total.Elapsed = last.Sub(first)
	return total, ctx.Err()
}

// RawResult is what both sides of a raw run print.
type RawResult struct {
	Sent, Received RawStats
}

// RawClient runs the client side of a raw test: agree on the start with
// the server over conn, blast for d, and swap the counts.
func RawClient(ctx context.Context, p RawPort, conn net.Conn, f RawFrame, d time.Duration) (RawResult, error) {
	if err := rawHello(conn); err != nil {
		return RawResult{}, err
	}
	sent, err := RawSend(ctx, p, f, d, 0)
	if err != nil {
		return RawResult{Sent: sent}, err
	}
	// Frames still in the rings and on the wire reach the server before
	// it stops counting, so a lossless path reports no loss.
	time.Sleep(rawDrain)
	// Two rounds: the first tells the server to stop counting, the second
	// brings its count back.
	mine, _ := json.Marshal(sent)
	if _, err := cm.Sync(conn, mine); err != nil {
		return RawResult{Sent: sent}, err
	}
	theirs, err := cm.Sync(conn, nil)
	if err != nil {
		return RawResult{Sent: sent}, err
	}
	res := RawResult{Sent: sent}
	if err := json.Unmarshal(theirs, &res.Received); err != nil {
		return res, fmt.Errorf("perftest: server's raw report: %w", err)
	}
	return res, nil
}

// rawDrain is how long the client waits after its last frame before it
// tells the server to stop counting.
const rawDrain = 50 * time.Millisecond

const rawGreeting = "softnic raw v1"

// rawHello is the start barrier; it also makes sure both sides run raw.
func rawHello(conn net.Conn) error {
	theirs, err := cm.Sync(conn, []byte(rawGreeting))
	if err != nil {
		return err
	}
	if string(theirs) != rawGreeting {
		return fmt.Errorf("perftest: the peer does not run the raw test (it sent %.40q)", theirs)
	}
	return nil
}

// RawServer runs the server side: count frames from the client's start to
// its end, reporting every second's count to each.
func RawServer(ctx context.Context, p RawPort, conn net.Conn, each func(RawStats)) (RawResult, error) {
	if err := rawHello(conn); err != nil {
		return RawResult{}, err
	}
	var done atomic.Bool
	type result struct {
		payload []byte
		err     error
	}
	end := make(chan result, 1)
	go func() {
		var r result
		r.payload, r.err = cm.Sync(conn, nil)
		done.Store(true)
		end <- r
	}()
	received, rerr := RawReceive(ctx, p, done.Load, each)
	res := RawResult{Received: received}
	r := <-end
	if r.err != nil {
		return res, r.err
	}
	if rerr != nil {
		return res, rerr
	}
	if err := json.Unmarshal(r.payload, &res.Sent); err != nil {
		return res, fmt.Errorf("perftest: client's raw report: %w", err)
	}
	mine, _ := json.Marshal(received)
	if _, err := cm.Sync(conn, mine); err != nil {
		return res, err
	}
	return res, nil
}
