// Package perftest holds the perftest-style benchmarks of softnic-bench
// and the demo: the measurement loops of ib_write_bw, ib_read_bw,
// ib_send_bw, ib_atomic_bw, ib_write_lat, ib_read_lat and ib_send_lat over
// the verbs API (Run), their statistics (BW peak and average, latency
// percentiles), perftest's tables and a CSV form, the raw-frame baseline
// over a dataplane.Port (RawSend, RawReceive), and two ways to run them
// with no daemon: RunEmbedded, both sides against the wall clock on the
// in-memory fabric, and WriteBWEmbedded, the demo's write_bw in
// simulated time.
//
// Run is one side of a run, client or server, over a verbs Context and a
// connection to the peer (TCP, or net.Pipe embedded): it creates the QPs,
// exchanges and connects them with package verbs/cm, checks that both
// sides run the same test, and then measures each size with the wall
// clock. The client measures and reports each row to the server, so both
// print the same table. The same code runs against the daemon and
// embedded; only the Device differs.
package perftest

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
)

// Options of a bandwidth run (perftest flag names in comments).
type Options struct {
	Size    int    // -s: message size, bytes
	Iters   int    // -n: messages
	TxDepth int    // -t: work requests in flight
	MTU     qp.MTU // -m
	Scheme  string // recovery scheme of both NICs
	// Params are the scheme's knobs (zero: the papers' defaults).
	Params recovery.Params
	Seed   uint64
	// Pcap, when set, receives a pcap of every frame NIC A (the writer)
	// sends and receives, stamped with the simulated time.
	Pcap io.Writer
	// Timeout is the QPs' local ACK timeout exponent (4.096 µs * 2^k,
	// perftest's -u); 0 keeps perftest's default, 14 (67 ms).
	Timeout uint8
}

// Link describes the embedded fabric's wire, per direction.
type Link struct {
	RateBps float64       // serialization rate
	Delay   time.Duration // one-way propagation
	Loss    float64       // drop probability, data and ACKs alike
	Ring    int           // transmit ring, frames
	// Drop, when set, is asked about every frame the fabric carries, in
	// either direction, and drops those it returns true for (tests).
	Drop func(frame []byte) bool
}

// DefaultLink is a 25 Gb/s hop with 2 µs of propagation each way.
var DefaultLink = Link{RateBps: 25e9, Delay: 2 * time.Microsecond, Ring: 64}

// Result is one row of a bandwidth table.
type Result struct {
	Bytes      int
	Iters      int
	PeakGbps   float64
	AvgGbps    float64
	MsgRateMpp float64
	Elapsed    time.Duration // simulated
	Wall       time.Duration // real time the run took on this CPU
	A, B       dataplane.Counters
	PcapFrames uint64 // frames written to Options.Pcap
}

// WriteBWEmbedded runs ib_write_bw between the two NICs of an embedded
// pair in simulated time over link, and returns the row.
func WriteBWEmbedded(o Options, link Link) (Result, error) {
	if o.Size <= 0 || o.Iters <= 0 || o.TxDepth <= 0 {
		return Result{}, errors.New("perftest: size, iterations and tx depth must be positive")
	}
	lc := fabric.LinkConfig{RateBps: link.RateBps, Delay: link.Delay, Loss: link.Loss, QueueFrames: link.Ring}
	m, err := verbs.NewEmbedded(sim.Config{Seed: o.Seed, AtoB: lc, BtoA: lc, SchemeA: o.Scheme, SchemeB: o.Scheme, SchemeParams: o.Params})
	if err != nil {
		return Result{}, err
	}
	// Simulated time runs both engines on this goroutine, so A's requester
	// may read B's responder to classify its ACK timeouts.
	m.A.Engine().SetTimeoutPeer(m.B.Engine())
	var tap *capture.PcapTap
	if o.Pcap != nil {
		if tap, err = capture.AttachPcap(m.A.Engine(), o.Pcap, 0, capture.All); err != nil {
			return Result{}, err
		}
		defer tap.Close() // on the error paths; the result's path closes it first
	}
	client, err := newSide(m.A, o.Size*o.TxDepth, o.TxDepth)
	if err != nil {
		return Result{}, err
	}
	server, err := newSide(m.B, o.Size*o.TxDepth, o.TxDepth)
	if err != nil {
		return Result{}, err
	}
	if err := m.Connect(client.qp, server.qp, verbs.ConnParam{MTU: o.MTU, Timeout: o.Timeout}); err != nil {
		return Result{}, err
	}

	wr := verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, NumSGE: 1, RKey: server.mr.RKey}
	completions := make([]time.Duration, 0, o.Iters)
	wcs := make([]verbs.WC, 64)
	posted := 0
	post := func() error {
		for posted < o.Iters && posted-len(completions) < o.TxDepth {
			slot := posted % o.TxDepth
			wr.WRID = uint64(posted)
			wr.SGL[0] = client.mr.SGE(slot*o.Size, o.Size)
			wr.RemoteAddr = server.mr.Addr + uint64(slot*o.Size)
			if err := client.qp.PostSend(wr); err != nil {
				return err
			}
			posted++
		}
		return nil
	}
	var runErr error
	cond := func() bool {
		n, err := client.cq.Poll(wcs)
		if err != nil {
			runErr = err
			return true
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				runErr = fmt.Errorf("perftest: completion %d: %v", wc.WRID, wc.Status)
				return true
			}
			completions = append(completions, m.Now())
		}
		if err := post(); err != nil {
			runErr = err
			return true
		}
		return len(completions) == o.Iters
	}
	wallStart := time.Now()
	start := m.Now()
	if err := post(); err != nil {
		return Result{}, err
	}
	// The simulation goes idle when the last write in flight completes;
	// the check that sees the completion posts the next one (with -t 1,
	// every time), so an idle stop after progress runs again.
	for done := -1; !m.RunUntil(cond, time.Hour); done = len(completions) {
		if runErr != nil || len(completions) == done {
			if runErr != nil {
				break
			}
			return Result{}, fmt.Errorf("perftest: %d of %d writes completed", len(completions), o.Iters)
		}
	}
	if runErr != nil {
		return Result{}, runErr
	}
	r := Result{Bytes: o.Size, Iters: o.Iters, Elapsed: m.Now() - start, Wall: time.Since(wallStart),
		A: m.A.Engine().Counters(), B: m.B.Engine().Counters()}
	fillRates(&r, start, completions, o.TxDepth)
	if tap != nil {
		if r.PcapFrames, err = tap.Close(); err != nil {
			return Result{}, fmt.Errorf("perftest: pcap: %w", err)
		}
	}
	return r, nil
}

// fillRates computes BW average over the run and BW peak as the best rate
// over any window of txDepth consecutive completions.
func fillRates(r *Result, start time.Duration, done []time.Duration, window int) {
	bits := float64(r.Bytes) * 8
	secs := r.Elapsed.Seconds()
	r.AvgGbps = bits * float64(r.Iters) / secs / 1e9
	r.MsgRateMpp = float64(r.Iters) / secs / 1e6
	window = min(window, len(done)-1)
	for i := 0; window > 0 && i+window < len(done); i++ {
		if dt := (done[i+window] - done[i]).Seconds(); dt > 0 {
			r.PeakGbps = max(r.PeakGbps, bits*float64(window)/dt/1e9)
		}
	}
	r.PeakGbps = max(r.PeakGbps, r.AvgGbps)
}

type side struct {
	pd *verbs.PD
	mr *verbs.MR
	cq *verbs.CQ
	qp *verbs.QP
}

func newSide(c *verbs.Context, bytes, depth int) (*side, error) {
	s := &side{}
	var err error
	if s.pd, err = c.AllocPD(); err != nil {
		return nil, err
	}
	if s.mr, err = s.pd.RegMR(make([]byte, bytes), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return nil, err
	}
	if s.cq, err = c.CreateCQ(2 * depth); err != nil {
		return nil, err
	}
	s.qp, err = s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: depth, MaxRecvWR: depth})
	return s, err
}

// PrintBWHeader prints perftest's bandwidth table header.
func PrintBWHeader(w io.Writer, gbits bool) {
	unit := "MiB/sec"
	if gbits {
		unit = "Gb/sec"
	}
	fmt.Fprintln(w, "---------------------------------------------------------------------------------------")
	fmt.Fprintf(w, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", unit, unit)
}

// PrintBWRow prints one row in perftest's layout.
func PrintBWRow(w io.Writer, r Result, gbits bool) {
	printBW(w, r.Bytes, r.Iters, r.PeakGbps, r.AvgGbps, r.MsgRateMpp, gbits)
}
