package sweep

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"
)

// MELO's Fig. 6a (§4.2.1): the CPU a host spends copying out-of-order
// data from the reorder buffer to the application. The paper takes a
// packet-level trace of one connection at full speed (40 Gb/s, BDP
// 512 KB, RTT about 100 µs, a lossy switch) and costs the out-of-order
// bytes in it with one core's copy rate: "the fraction of one second to
// finish copying the trace produced within 1s". softnic takes the trace
// from its counter rob_delivered_bytes over a measured stretch of
// simulated time and costs it with MeloCopyBytesPerSec.

// MeloCopyBytesPerSec is one core copying 1 KB chunks (one packet's
// payload at MELO's 1 KB MTU) from a 512 KB reorder buffer into a 256 MiB
// application buffer: 10,625 MB/s, measured once by
// BenchmarkMeloReorderCopy/dst-256MiB (melo6a_bench_test.go) on the
// machine these figures were made on (AMD EPYC, family 25 model 1, 2 vCPUs
// under KVM, 32 MiB L3; go1.26.8's copy): the median of 5 runs of 2 s
// (10,155-10,991 MB/s), bytes over the thread's CPU time, as the machine
// was shared with other work (wall-clock MB/s was 2,072-3,106). The
// paper's own rate, from its worst case (40 Gb/s copied whole is 82.2% of
// a 2.4 GHz Xeon E5-2630 v3 core), is about 6,080 MB/s.
const MeloCopyBytesPerSec = 10625e6

// Fig. 6a's path (§4.2.1: "BDP to be 512KB (RTT ~100µs)"): the round
// trip, and the BDP in 1 KB packets.
const (
	MeloFig6aRTT = 100 * time.Microsecond
	MeloFig6aBDP = 512
)

// MeloFig6aConfig is one point of Fig. 6a: one connection streaming 1 MiB
// WRITEs (two outstanding) at 40 Gb/s over a 100 µs path, loss in both
// directions. The paper's sender is DCQCN's, at line rate with no window
// (one flow: nothing marks it, docs/results.md, "Fig. 5a with DCQCN"), and
// it goes on sending new packets while a loss is recovered: those are
// the out-of-order packets. softnic's is held to the line rate by the
// link (Ring 64: the one-way pipe plus a 64-frame transmit ring) under
// melo-fig5a's cap, the pool's 1024 packets, which a recovery of one
// round trip (500-550 packets) does not reach; a longer one (a lost
// retransmission) can, and then the pool runs out first. (A cap at the BDP,
// Window MeloFig6aBDP, instead stalls the sender in every recovery: the
// cumulative acknowledgement moves two round trips after a loss.)
func MeloFig6aConfig(loss float64, warmup, measure time.Duration) MeloPoolConfig {
	return MeloPoolConfig{Conns: 1, Loss: loss, RTT: MeloFig6aRTT, Size: 1 << 20, Window: MeloPoolBits, Ring: 64,
		Warmup: warmup, Measure: measure, Seed: 1}
}

// MeloCopyPoint is one loss rate of Fig. 6a.
type MeloCopyPoint struct {
	Loss           float64
	OOOBytesPerSec float64 // payload copied from the reorder buffer per second of simulated time
	CoreFraction   float64 // OOOBytesPerSec / MeloCopyBytesPerSec
	Run            MeloPoolResult
}

// RunMeloCopy measures one point (MeloFig6aConfig): after the warm-up,
// the bytes copied out of the receiver's reorder buffer per second of the
// measured time, and the share of a core that copying them takes.
func RunMeloCopy(c MeloPoolConfig) (MeloCopyPoint, error) {
	r, err := RunMeloPool(c)
	if err != nil {
		return MeloCopyPoint{}, err
	}
	rate := float64(r.ROBBytes) / c.Measure.Seconds()
	return MeloCopyPoint{Loss: c.Loss, OOOBytesPerSec: rate, CoreFraction: rate / MeloCopyBytesPerSec, Run: r}, nil
}

// WriteMeloCopyCSV writes Fig. 6a's rows: loss, ooo_bytes_per_s,
// copy_core_fraction.
func WriteMeloCopyCSV(w io.Writer, ps []MeloCopyPoint) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"loss", "ooo_bytes_per_s", "copy_core_fraction"})
	for _, p := range ps {
		cw.Write([]string{strconv.FormatFloat(p.Loss, 'g', -1, 64), strconv.FormatFloat(p.OOOBytesPerSec, 'f', 0, 64),
			strconv.FormatFloat(p.CoreFraction, 'f', 4, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveMeloCopy writes <dir>/<name>.csv.
func SaveMeloCopy(dir, name string, ps []MeloCopyPoint) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteMeloCopyCSV(w, ps) })
}
